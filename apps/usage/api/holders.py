"""GET /api/v1/usage/holders/: who held the cards of a pool in a window, the holders page's rows (the same filter
form, so one query string means the same rows on both), each ledger interval with its GPU-hours in the window."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import AuthenticatedAPIRequest
from apps.core.api_lists import Pagination, form_error_detail

from .. import reports
from ..forms.reports import HolderFilterForm
from ..models import UsageInterval


def _hours(value: float) -> float:
    return round(value, 4)


class HolderSerializer(serializers.Serializer):
    """One stretch of held cards: a workload's admission on the pool, from admission to its end (or now)."""

    interval = serializers.IntegerField(source="pk")
    workload = serializers.IntegerField(source="workload_id")
    workload_name = serializers.CharField(source="workload.name")
    department_slug = serializers.CharField(source="department.slug")
    project = serializers.IntegerField(source="project_id")
    project_slug = serializers.CharField(source="project.slug")
    user = serializers.CharField(source="user.username", allow_null=True, help_text=(
        "The portal user it is attributed to; null for work from outside the portal that names none."))
    submitter_label = serializers.CharField(source="workload.submitter_label", help_text=(
        'Who held them, as the page says it: the username, else "outside the portal (<Kubernetes user>)".'))
    node_pool = serializers.CharField(source="node_pool.slug")
    units = serializers.IntegerField(help_text="GPU units held.")
    card_fraction = serializers.SerializerMethodField(help_text='The pool\'s card fraction per unit, e.g. "1/1", '
                                                                '"1/7".')
    queue = serializers.CharField(help_text="guaranteed or elastic.")
    model_label = serializers.CharField()
    data_class = serializers.CharField()
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True, help_text="Null: still holding.")
    end_reason = serializers.CharField()
    gpu_hours = serializers.SerializerMethodField(help_text="Physical card hours held inside the window.")
    within_deserved = serializers.SerializerMethodField(help_text="Of which within the project's deserved quota.")
    over_quota = serializers.SerializerMethodField(help_text="Of which over it (borrowed); the two add up to "
                                                             "gpu_hours.")

    def get_card_fraction(self, interval: UsageInterval) -> str:
        return f"{interval.card_fraction_numerator}/{interval.card_fraction_denominator}"

    def get_gpu_hours(self, interval: UsageInterval) -> float:
        return _hours(sum(reports.held_split(_held(interval), _within(interval))))

    def get_within_deserved(self, interval: UsageInterval) -> float:
        return _hours(reports.held_split(_held(interval), _within(interval))[0])

    def get_over_quota(self, interval: UsageInterval) -> float:
        return _hours(reports.held_split(_held(interval), _within(interval))[1])


def _held(interval: UsageInterval) -> float | None:
    return getattr(interval, "held_hours", None)


def _within(interval: UsageInterval) -> float | None:
    return getattr(interval, "within_hours", None)


class HoldersPageSerializer(serializers.Serializer):
    node_pool = serializers.CharField(allow_null=True, help_text="The pool (the first by slug unless asked); null "
                                                                 "when there are no pools.")
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    counted_until = serializers.DateTimeField(help_text="The end, or now when the window reaches into the future.")
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = HolderSerializer(many=True)


HOLDER_PARAMETERS = [
    OpenApiParameter("node_pool", str, description="The pool (id or slug); default: the first by slug."),
    OpenApiParameter("start", str, description="A date-time (naive: the portal's time zone); default: a day before "
                                               "the end."),
    OpenApiParameter("end", str, description=f"A date-time after start, at most {reports.MAX_SPAN.days} days later; "
                                             "default: now."),
    OpenApiParameter("project", str, description="Only this project (id or slug)."),
    OpenApiParameter("user", str, description="Only this user's work (id or username)."),
    OpenApiParameter("model_label", {"type": "string", "maxLength": 63}, description="Only this model label (any "
                                                                                     "case)."),
    OpenApiParameter("data_class", {"type": "string", "maxLength": 63}, description="Only this data class (any "
                                                                                    "case)."),
]


class CardHoldersView(APIView):
    request: AuthenticatedAPIRequest
    pagination_class = Pagination

    @extend_schema(
        parameters=HOLDER_PARAMETERS,
        responses={200: HoldersPageSerializer},
        description=(
            "Who held the cards of a pool in [start, end): every ledger interval of the projects you may see that "
            "overlaps the window, oldest first, with its GPU-hours inside the window, within the project's deserved "
            "quota and over it (the holders page's table and CSV). Paginated with limit and offset."),
    )
    def get(self, request: AuthenticatedAPIRequest) -> Response:
        form = HolderFilterForm(request.query_params, viewer=request.user)
        if not form.is_valid():
            raise ValidationError(form_error_detail(form.errors))
        now = timezone.now()
        window = form.cleaned_data["window"]
        queryset = reports.holders(user=request.user, window=window, filters=form.filters(), now=now)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(
            queryset.select_related("workload__owner", "project", "department", "user", "node_pool"), request,
            view=self)
        pool = form.cleaned_data["node_pool"]
        data: dict[str, Any] = {
            "node_pool": pool.slug if pool else None, "start": timezone.localtime(window.start),
            "end": timezone.localtime(window.end), "counted_until": timezone.localtime(window.until(now)),
            "count": paginator.count, "next": paginator.get_next_link(), "previous": paginator.get_previous_link(),
            "results": HolderSerializer(page, many=True).data,
        }
        return Response(data)
