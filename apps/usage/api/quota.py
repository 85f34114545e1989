"""GET /api/v1/usage/quota/: the quota dashboard's figures, scoped like the page."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import AuthenticatedAPIRequest

from .. import selectors

_units = serializers.DecimalField(max_digits=12, decimal_places=3, coerce_to_string=False)


def _figures(name: str, **extra: Any) -> serializers.Serializer:
    return inline_serializer(name, fields={
        "name": serializers.CharField(), "slug": serializers.CharField(),
        "deserved": serializers.IntegerField(), "limit": serializers.IntegerField(allow_null=True),
        "used": _units, "lent": _units,
        "borrowed": serializers.DecimalField(max_digits=12, decimal_places=3, coerce_to_string=False, help_text=(
            "Borrowed over deserved: in use beyond the deserved quota, both queues of a project together (not "
            "Kueue's per-queue borrowed, which counts all of an elastic queue's work).")),
        "pending": serializers.DecimalField(max_digits=12, decimal_places=3, coerce_to_string=False, help_text=(
            "GPU units of waiting (queued or preempted) workloads; a share of a card on a KAI pool counts as that "
            "share (0.5).")),
        "weighted_share": serializers.IntegerField(allow_null=True), **extra})


QUEUE = inline_serializer("QuotaQueue", fields={
    "name": serializers.CharField(), "guaranteed": serializers.BooleanField(), "used": _units,
    "borrowed": serializers.DecimalField(max_digits=12, decimal_places=3, coerce_to_string=False, help_text=(
        "Kueue's own per-queue borrowed (flavorsUsage borrowed): use beyond this queue's nominal quota. An elastic "
        "queue has none, so all its work counts, even within the project's deserved quota.")),
    "nominal": _units, "pending_workloads": serializers.IntegerField(),
    "admitted_workloads": serializers.IntegerField()})
PROJECT = _figures("QuotaProjectFigures", queues=QUEUE.__class__(many=True))
DEPARTMENT = _figures("QuotaDepartmentFigures", projects=PROJECT.__class__(many=True))
RESERVATION = inline_serializer("QuotaServingReservation", fields={
    "name": serializers.CharField(), "slug": serializers.CharField(),
    "reserved": serializers.IntegerField(help_text="Units the project's serving reservation holds on the pool."),
    "in_use": serializers.IntegerField(help_text="Units its live inference services hold (replicas x pods x GPUs)."),
    "free": serializers.IntegerField(help_text="What it may still start: 0 while a lowered reservation is below "
                                               "what runs.")})
POOL = inline_serializer("QuotaPool", fields={
    "pool": serializers.CharField(), "name": serializers.CharField(), "gpu_resource": serializers.CharField(),
    "capacity": serializers.IntegerField(),
    "serving": serializers.BooleanField(help_text="A serving pool: no quotas or queues, only reservations."),
    "departments": DEPARTMENT.__class__(many=True),
    "reservations": RESERVATION.__class__(many=True, help_text=(
        "On a serving pool, the serving reservations of the projects you may see and what their services hold.")),
    "cluster": _figures("QuotaClusterFigures").__class__(allow_null=True)})


class QuotaUsageView(APIView):
    request: AuthenticatedAPIRequest

    @extend_schema(
        responses={200: inline_serializer("QuotaUsage", fields={"pools": POOL.__class__(many=True)})},
        description=(
            "Per node pool, the departments and projects you may see with their deserved quota, limit, GPU units in "
            "use (Kueue's ClusterQueue flavorsUsage of the project's two queues together), borrowed (in use beyond the "
            "project's deserved quota, whichever queue: preemptible work inside deserved is not borrowing), lent "
            "(deserved left idle, 0 for a project that does not lend), pending demand and fair-sharing weighted "
            "share. A department's in use, borrowed, lent and pending are the sums over all its projects; its "
            "deserved and limit are its own quota. A serving pool has no quotas: `reservations` gives each visible "
            "project's reservation, the units its inference services hold and what is free. `cluster` is given only "
            "to those who see everything; on a serving pool its in use is what all the services hold."
        ),
    )
    def get(self, request: AuthenticatedAPIRequest) -> Response:
        pools = []
        for dashboard in selectors.quota_dashboard(user=request.user):
            pool = dashboard.pool
            pools.append({
                "pool": pool.slug, "name": pool.name, "gpu_resource": pool.gpu_resource, "capacity": pool.capacity,
                "serving": pool.serving,
                "departments": [{**dept.as_dict(), "projects": [p.as_dict() for p in dept.children]}
                                for dept in dashboard.departments],
                "reservations": [{"name": r.name, "slug": r.slug, "reserved": r.reserved, "in_use": r.in_use,
                                  "free": r.free} for r in dashboard.reservations],
                "cluster": dashboard.cluster.as_dict() if dashboard.cluster else None,
            })
        return Response({"pools": pools})
