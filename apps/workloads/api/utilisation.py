"""Held but idle, for admins as on its page (others: 404): what holds GPUs the idle rule flagged right now
(`GET /api/v1/held-idle/`) and the rule itself (`GET`/`PATCH /api/v1/idle-policy/`, the page's form)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts import access
from apps.core.api import AsciiIntegerField, AuthenticatedAPIRequest
from apps.core.api_lists import StrictJSONParser
from apps.org.models import NodePool
from apps.workloads import services
from apps.workloads.models import MAX_IDLE_WARNING_MINUTES, IdlePolicy, Workload
from apps.workloads.selectors import utilisation_available, workloads_held_idle

NOT_FOUND = "No such page."
ADMINS_ONLY = OpenApiResponse(description="Not an admin: there is no such page for you (as on the portal's pages).")
MAX_IDLE_MINUTES = 7 * 24 * 60


def _require_admin(request: Request) -> None:
    """The held-but-idle page and its rule are installation-wide: admins only, everyone else a 404 as the page."""
    if not access.can_manage_idle_policy(request.user):
        raise exceptions.NotFound(NOT_FOUND)


class HeldIdleSerializer(serializers.ModelSerializer):
    """A workload holding GPUs whose utilisation stayed below the idle rule's threshold for its duration."""

    project_slug = serializers.CharField(source="project.slug", read_only=True)
    department_slug = serializers.CharField(source="project.department.slug", read_only=True)
    submitter_label = serializers.CharField(read_only=True, help_text="Who submitted it, as the pages say it.")
    node_pool: serializers.SlugRelatedField[NodePool] = serializers.SlugRelatedField(slug_field="slug",
                                                                                      read_only=True)
    gpu_units = serializers.IntegerField(read_only=True, help_text="GPU units it holds (whole GPUs: 0 for a fraction "
                                                                   "of one).")
    gpu_fraction = serializers.FloatField(read_only=True, allow_null=True, help_text=(
        "The share of one GPU it holds on a KAI pool (e.g. 0.5; `gpu_units` is then 0); null: whole GPUs."))
    idle_since = serializers.DateTimeField(source="utilisation.idle_since", read_only=True, allow_null=True)
    idle_flagged_at = serializers.DateTimeField(source="utilisation.idle_flagged_at", read_only=True)
    mean_percent = serializers.FloatField(source="utilisation.mean_percent", read_only=True, allow_null=True,
                                         help_text="Mean GPU utilisation over the run, 0-100.")
    last_percent = serializers.FloatField(source="utilisation.last_percent", read_only=True, allow_null=True)

    class Meta:
        model = Workload
        fields = ["id", "name", "kind", "status", "project", "project_slug", "department_slug", "owner",
                  "submitter_label", "node_pool", "gpu_units", "gpu_fraction", "idle_since", "idle_flagged_at",
                  "mean_percent", "last_percent"]
        read_only_fields = fields


@extend_schema_view(list=extend_schema(responses={200: HeldIdleSerializer(many=True), 404: ADMINS_ONLY}))
class HeldIdleViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Workloads holding GPUs now that the idle rule flagged, longest idle first. Admins only (others: 404)."""

    request: AuthenticatedAPIRequest
    serializer_class = HeldIdleSerializer
    filter_backends: list[type] = []

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        _require_admin(request)

    def get_queryset(self) -> QuerySet[Workload]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no signed-in user
            return Workload.objects.none()
        return workloads_held_idle(user=self.request.user)


class IdlePolicySerializer(serializers.Serializer):
    threshold_percent = AsciiIntegerField(min_value=1, max_value=100, required=False, help_text=(
        "Mean GPU utilisation below this percent counts as idle."))
    idle_minutes = AsciiIntegerField(min_value=1, max_value=MAX_IDLE_MINUTES, required=False, help_text=(
        "How long a workload's GPUs must stay below the threshold to be flagged (minutes, as the page sets it)."))
    idle_seconds = serializers.IntegerField(read_only=True, help_text="The same duration in seconds.")
    cull_notebooks = serializers.BooleanField(required=False, help_text="Stop notebooks idle this long (unless "
                                                                        "their owner showed activity).")
    warning_minutes = AsciiIntegerField(min_value=0, max_value=MAX_IDLE_WARNING_MINUTES, required=False, help_text=(
        "A flagged notebook's owner is warned this many minutes before it is stopped (0: stopped once flagged)."))
    utilisation_available = serializers.BooleanField(read_only=True, help_text=(
        "False: no Prometheus configured (PROMETHEUS_URL), so nothing can be flagged."))

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise serializers.ValidationError({"non_field_errors": ["Send a JSON object of the fields to change."]})
        writable = {name for name, field in self.fields.items() if not field.read_only}
        errors = {name: ["This field is read-only." if name in self.fields else "Unknown field."]
                  for name in sorted(set(data) - writable)}
        if errors:
            raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


def _policy(policy: IdlePolicy) -> dict[str, Any]:
    return {"threshold_percent": policy.threshold_percent, "idle_minutes": max(1, round(policy.idle_minutes)),
            "idle_seconds": policy.idle_seconds, "cull_notebooks": policy.cull_notebooks,
            "warning_minutes": policy.warning_minutes,
            "utilisation_available": utilisation_available()}


class IdlePolicyView(APIView):
    """The idle rule of "held but idle". Admins only (others: 404)."""

    request: AuthenticatedAPIRequest
    parser_classes = [StrictJSONParser]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        _require_admin(request)

    @extend_schema(responses={200: IdlePolicySerializer, 404: ADMINS_ONLY},
                   description="The rule in force (the defaults until an admin saved one).")
    def get(self, request: AuthenticatedAPIRequest) -> Response:
        return Response(_policy(IdlePolicy.current()))

    @extend_schema(
        request=IdlePolicySerializer,
        responses={200: IdlePolicySerializer, 400: OpenApiResponse(description="A value out of bounds, or a field "
                                                                               "that cannot be written."),
                   404: ADMINS_ONLY},
        description="Change the fields it names (the others keep their value), as the page's form does; audited.",
    )
    def patch(self, request: AuthenticatedAPIRequest) -> Response:
        body = IdlePolicySerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        current = IdlePolicy.current()
        changes = body.validated_data
        policy = services.idle_policy_update(
            actor=request.user, threshold_percent=changes.get("threshold_percent", current.threshold_percent),
            idle_seconds=changes["idle_minutes"] * 60 if "idle_minutes" in changes else current.idle_seconds,
            cull_notebooks=changes.get("cull_notebooks", current.cull_notebooks),
            warning_minutes=changes.get("warning_minutes", current.warning_minutes))
        return Response(_policy(policy))
