"""GET /api/v1/usage/: GPU-hours per department, project, user or pool in a window, scoped like everything else.

Rows come from apps.usage.reports.usage_report (the same selector as the showback page and its CSV): see the
package's docstring for the definitions (physical card hours, [start, end) clipped, open intervals up to now, within
deserved vs over quota by the project's deserved quota at each moment, deserved hours from the quotas in force since
each came into force, cost at the price per card-hour in force when each hour was used).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import AuthenticatedAPIRequest, validation_error_detail
from apps.core.csv_export import csv_response

from .. import reports
from ..forms.reports import ReportScopeForm

API_GROUPS = [reports.Group.DEPARTMENT, reports.Group.PROJECT, reports.Group.USER, reports.Group.POOL]
# group -> (id field, name field) of each row
ROW_NAMES = {
    reports.Group.DEPARTMENT: ("department", "department_slug"),
    reports.Group.PROJECT: ("project", "project_slug"),
    reports.Group.USER: ("user", "username"),
    reports.Group.POOL: ("node_pool", "node_pool_slug"),
}


def _hours(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


class UsageRowSerializer(serializers.Serializer):
    """One group's GPU-hours. Only the two fields naming the requested group are present."""

    department = serializers.IntegerField(required=False, help_text="group_by=department (and project rows).")
    department_slug = serializers.CharField(required=False)
    project = serializers.IntegerField(required=False, help_text="group_by=project.")
    project_slug = serializers.CharField(required=False)
    user = serializers.IntegerField(required=False, allow_null=True, help_text=(
        "group_by=user; null for work from outside the portal attributed to no user (named \"outside the portal\")."))
    username = serializers.CharField(required=False)
    node_pool = serializers.IntegerField(required=False, help_text="group_by=pool.")
    node_pool_slug = serializers.CharField(required=False)
    name = serializers.CharField()
    gpu_hours = serializers.FloatField(help_text="Physical card hours: units x card fraction x hours in the window.")
    gpu_hours_within_quota = serializers.FloatField(
        help_text="Of which within the project's deserved quota: at each moment the project's units held on a pool "
                  "(both queues) up to its deserved quota; non-preemptible work first, preemptible work shares the "
                  "rest in proportion to units.")
    gpu_hours_borrowed = serializers.FloatField(
        help_text="Of which over the project's deserved quota (borrowed idle capacity). Within plus over is gpu_hours.")
    deserved_gpu_hours = serializers.FloatField(
        allow_null=True, help_text="Deserved units x card fraction x hours of the window (up to now), from the project "
                                   "quotas in force at each moment, each from when it came into force (a quota set "
                                   "mid-window deserves only the rest of it); null for users.")
    used_over_deserved = serializers.FloatField(allow_null=True)
    cost = serializers.DecimalField(max_digits=18, decimal_places=2, allow_null=True, coerce_to_string=False,
                                    help_text="GPU-hours x the pool's price per card-hour in force when they were "
                                              "used (a stretch across a price change is priced per part; see the "
                                              "node pool's price_history); null when none was used at a price.")
    gpu_utilisation = serializers.FloatField(
        allow_null=True, help_text="Mean GPU utilisation (0..1) of the allocated GPU-hours Prometheus measured; null "
                                   "without a Prometheus or without measurements.")
    idle_gpu_hours = serializers.FloatField(
        allow_null=True, help_text="Allocated but idle: measured GPU-hours below the idle policy's threshold; null "
                                   "without a Prometheus or without measurements.")


class UsageReportSerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=[group.value for group in API_GROUPS])
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    counted_until = serializers.DateTimeField(help_text="The end, or now when the window reaches into the future.")
    utilisation_available = serializers.BooleanField(help_text="False: no Prometheus configured (PROMETHEUS_URL).")
    currency = serializers.CharField(allow_null=True, help_text=(
        "The currency of every cost (USAGE_CURRENCY, e.g. EUR); null when the installation names none: costs are "
        "then in the currency the pools' prices were entered in."))
    rows = UsageRowSerializer(many=True)
    total = UsageRowSerializer()


def _row(report: reports.Report, row: reports.ReportRow, *, total: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if not total:
        id_field, slug_field = ROW_NAMES[report.group]
        data = {id_field: row.key, slug_field: row.slug}
        if report.group == reports.Group.PROJECT:
            data["department_slug"] = row.department_slug
    return {**data, "name": row.name, "gpu_hours": _hours(row.gpu_hours),
            "gpu_hours_within_quota": _hours(row.within_quota), "gpu_hours_borrowed": _hours(row.borrowed),
            "deserved_gpu_hours": _hours(row.deserved),
            "used_over_deserved": None if row.ratio is None else round(row.ratio, 4),
            "cost": None if row.cost is None else round(row.cost, 2),
            "gpu_utilisation": None if row.utilisation is None else round(row.utilisation, 4),
            "idle_gpu_hours": _hours(row.idle_hours) if row.measured_hours else None}


# A day (its midnight) or a moment; a date-time without an offset is also taken, in the portal's time zone.
DATE_OR_DATE_TIME = {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}]}
REPORT_PARAMETERS = [
    OpenApiParameter("group_by", str, enum=[group.value for group in API_GROUPS], required=True),
    OpenApiParameter("start", DATE_OR_DATE_TIME, required=True,
                     description="ISO date (its midnight) or date-time; one without an offset is in the portal's "
                                 "time zone."),
    OpenApiParameter("end", DATE_OR_DATE_TIME, required=True,
                     description=f"Exclusive; after start, at most {reports.MAX_SPAN.days} days later; a date "
                                 "means its midnight."),
    OpenApiParameter("department", str, description="Only this department (id or slug)."),
    OpenApiParameter("project", str, description="Only this project (id or slug)."),
    OpenApiParameter("user", str, description="Only this user's workloads (id or username)."),
    OpenApiParameter("node_pool", str, description="Only this pool (id or slug)."),
]


def requested_report(request: AuthenticatedAPIRequest) -> reports.Report:
    """The report the query string asks for; every bad parameter at once as a 400."""
    params = request.query_params
    group_by = params.get("group_by", "")
    errors: dict[str, list[str]] = {}
    if group_by not in {group.value for group in API_GROUPS}:
        errors["group_by"] = [f"Choose one of: {', '.join(group.value for group in API_GROUPS)}."]
    try:
        window = reports.window_from(params.get("start", ""), params.get("end", ""))
    except DjangoValidationError as exc:
        errors.update(validation_error_detail(exc))
    user = request.user
    scope = ReportScopeForm(params, viewer=user)  # the same scope fields as the showback page
    if not scope.is_valid():
        errors.update({name: [str(message) for message in messages] for name, messages in scope.errors.items()})
    if errors:
        raise ValidationError(errors)
    return reports.usage_report(user=user, group=reports.Group(group_by), window=window,
                                filters=scope.report_filters())


class UsageReportCsvView(APIView):
    request: AuthenticatedAPIRequest

    @extend_schema(
        parameters=REPORT_PARAMETERS,
        responses={(200, "text/csv"): OpenApiResponse(response=OpenApiTypes.STR, description=(
            "The report as CSV: the showback page's table and its CSV (a header line, one line per group)."))},
        description="GPU-hours per group in [start, end) as CSV, the same rows as GET /api/v1/usage/.",
    )
    def get(self, request: AuthenticatedAPIRequest) -> StreamingHttpResponse:
        report = requested_report(request)
        return csv_response(reports.report_table(report),
                            f"gpu-hours-by-{report.group.value}-{reports.window_slug(report.window)}.csv")


class UsageReportView(APIView):
    request: AuthenticatedAPIRequest

    @extend_schema(
        parameters=REPORT_PARAMETERS,
        responses={200: UsageReportSerializer},
        description=(
            "GPU-hours (physical card hours: units x card fraction x hours, allocation not utilisation) per group in "
            "[start, end), split into within the project's deserved quota and over it (borrowed), whichever queue "
            "the work ran in, beside the deserved quota's own hours and, where pools are priced, the cost. Only the "
            "projects you may see count; open intervals count up to now."
        ),
    )
    def get(self, request: AuthenticatedAPIRequest) -> Response:
        report = requested_report(request)
        window = report.window
        return Response({
            "group_by": report.group.value, "start": timezone.localtime(window.start),
            "end": timezone.localtime(window.end), "counted_until": timezone.localtime(report.until),
            "utilisation_available": report.measured, "currency": settings.USAGE_CURRENCY or None,
            "rows": [_row(report, row) for row in report.rows], "total": _row(report, report.total, total=True),
        })
