"""GET /api/v1/usage/over-time/: the use-over-time dashboard's series (per pool and per day or hour: cards held,
within deserved, deserved and, with a Prometheus, busy, utilisation and held-but-idle hours) and its top consumers,
from apps.usage.reports.use_over_time, with the page's form, so one query string means the same numbers in both."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import AuthenticatedAPIRequest
from apps.core.api_lists import form_error_detail

from .. import reports
from ..forms.reports import UseOverTimeForm


def _rounded(values: list[float | None]) -> list[float | None]:
    return [None if value is None else round(value, 4) for value in values]


class PoolSeriesSerializer(serializers.Serializer):
    node_pool = serializers.IntegerField()
    node_pool_slug = serializers.CharField()
    allocated = serializers.ListField(child=serializers.FloatField(), help_text=(
        "Cards held on average in each bucket (physical cards: units x the pool's card fraction), up to now."))
    within_deserved = serializers.ListField(child=serializers.FloatField(), help_text=(
        "Of which within the projects' deserved quotas."))
    deserved = serializers.ListField(child=serializers.FloatField(), help_text=(
        "Cards deserved on average in each bucket (the project quotas in force, from when each came into force)."))
    busy = serializers.ListField(child=serializers.FloatField(allow_null=True), allow_null=True, help_text=(
        "Cards busy on average (measured use weighted by utilisation); null without a Prometheus."))
    utilisation = serializers.ListField(child=serializers.FloatField(allow_null=True), allow_null=True, help_text=(
        "Mean utilisation (0..1) of the measured card hours of each bucket; null without a Prometheus."))
    idle_gpu_hours = serializers.ListField(child=serializers.FloatField(allow_null=True), allow_null=True, help_text=(
        "Held but idle: measured card hours below the idle policy's threshold; null without a Prometheus."))
    gpu_hours = serializers.FloatField(help_text="The buckets' card hours together: the showback GPU-hours.")
    gpu_hours_within_deserved = serializers.FloatField()
    deserved_gpu_hours = serializers.FloatField()


class ConsumerSerializer(serializers.Serializer):
    project = serializers.IntegerField()
    project_slug = serializers.CharField()
    department_slug = serializers.CharField()
    gpu_hours = serializers.FloatField()
    gpu_hours_borrowed = serializers.FloatField()
    deserved_gpu_hours = serializers.FloatField(allow_null=True)
    idle_gpu_hours = serializers.FloatField(allow_null=True)


class UseOverTimeSerializer(serializers.Serializer):
    granularity = serializers.ChoiceField(choices=[value.value for value in reports.Granularity])
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    buckets = serializers.ListField(child=serializers.DateTimeField(), help_text="Each bucket's start.")
    utilisation_available = serializers.BooleanField()
    pools = PoolSeriesSerializer(many=True)
    top_consumers = ConsumerSerializer(many=True)


TYPED = ("start", "end", "granularity")
PARAMETERS = [
    OpenApiParameter("start", {"type": "string", "format": "date"}, description="First day; default: 29 days before "
                                                                               "the end."),
    OpenApiParameter("end", {"type": "string", "format": "date"}, description="Last day (inclusive); default today."),
    OpenApiParameter("granularity", str, enum=[value.value for value in reports.Granularity],
                     description=f"day (default) or hour; at most {reports.MAX_BUCKETS} buckets."),
    OpenApiParameter("department", str, description="Only this department (id or slug); default: all you may see."),
    OpenApiParameter("node_pool", str, description="Only this pool (id or slug)."),
]


def _pool(result: reports.UseOverTime, series: Any) -> dict[str, Any]:
    return {"node_pool": series.pool.pk, "node_pool_slug": series.pool.slug,
            "allocated": _rounded(series.allocated), "within_deserved": _rounded(series.within),
            "deserved": _rounded(series.deserved),
            "busy": _rounded(series.busy) if result.measured else None,
            "utilisation": _rounded(series.utilisation) if result.measured else None,
            "idle_gpu_hours": _rounded(series.idle_hours) if result.measured else None,
            "gpu_hours": round(series.card_hours, 4), "gpu_hours_within_deserved": round(series.within_hours, 4),
            "deserved_gpu_hours": round(series.deserved_hours, 4)}


class UseOverTimeView(APIView):
    request: AuthenticatedAPIRequest

    @extend_schema(parameters=PARAMETERS, responses={200: UseOverTimeSerializer}, description=(
        "Per node pool and per day or hour of [start, end + 1 day): the cards held on average (and within deserved), "
        "the cards deserved and, with a Prometheus, the cards busy, the utilisation and the held-but-idle hours, "
        "over the projects you may see; with the window's ten largest consumers. A pool's buckets add up to its "
        "GPU-hours in GET /api/v1/usage/?group_by=pool."))
    def get(self, request: AuthenticatedAPIRequest) -> Response:
        form = UseOverTimeForm(request.query_params, viewer=request.user)
        # The page's form reads an empty date or step as the default; the API's schema types them, so an empty one
        # is a mistake to name, not a default (a parameter not wanted is left out).
        empty = {name: ["Give a value, or leave the parameter out."] for name in TYPED
                 if request.query_params.get(name) == ""}
        if not form.is_valid() or empty:
            raise ValidationError({**(form_error_detail(form.errors) if form.errors else {}), **empty})
        result = reports.use_over_time(user=request.user, window=form.cleaned_data["window"],
                                       granularity=form.cleaned_data["granularity"], filters=form.filters())
        return Response({
            "granularity": result.granularity.value, "start": timezone.localtime(result.window.start),
            "end": timezone.localtime(result.window.end),
            "buckets": [timezone.localtime(start) for start in result.starts],
            "utilisation_available": result.measured,
            "pools": [_pool(result, series) for series in result.pools],
            "top_consumers": [{
                "project": row.key, "project_slug": row.slug, "department_slug": row.department_slug,
                "gpu_hours": round(row.gpu_hours, 4), "gpu_hours_borrowed": round(row.borrowed, 4),
                "deserved_gpu_hours": None if row.deserved is None else round(row.deserved, 4),
                "idle_gpu_hours": round(row.idle_hours, 4) if row.measured_hours else None,
            } for row in result.top],
        })
