"""Start-time forecasts (worker/forecast.py computes them; pages and the API only read)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q, Window
from django.db.models.functions import RowNumber

from apps.workloads.models import FORECAST_RECORD_DAYS, FORECAST_STATUSES, ForecastRecord, WorkloadForecast

FORECAST_RECORD_SIZE = 100  # recorded waits the range calibration reads: few enough to follow the cluster's changes


def forecasts_for(*, workload_ids: Any) -> dict[int, WorkloadForecast]:
    """The latest forecast of each of these workloads that waits, by workload id: one query. Rows the caller may show
    only (the ids come from a scoped queryset); a workload that does not wait has none. Lists may instead join it
    with `select_related("forecast")` (the reverse one-to-one; absent reads as no attribute in templates)."""
    return {row.workload_id: row for row in WorkloadForecast.objects.filter(workload_id__in=list(workload_ids))}


def forecast_record(*, now: datetime, size: int = FORECAST_RECORD_SIZE,
                    ) -> list[tuple[datetime, datetime, datetime, datetime | None, bool]]:
    """(estimated at, earliest, latest, started or None, preemptible) of the latest `size` first estimates of each
    kind of work (preemptible or not) that was to wait (likely after the estimate), estimated within
    FORECAST_RECORD_DAYS of `now`, and that has got quota since or waits still (work stopped before it started says
    nothing): what the worker calibrates its ranges on (no user's view, so not scoped). One query."""
    latest_first = [F("forecast_at").desc(), F("workload_id").desc()]
    recorded = ForecastRecord.objects.filter(
        Q(started_at__isnull=False) | Q(workload__status__in=FORECAST_STATUSES), likely__gt=F("forecast_at"),
        forecast_at__gte=now - timedelta(days=FORECAST_RECORD_DAYS),
    ).annotate(rank=Window(RowNumber(), partition_by=F("workload__preemptible"), order_by=latest_first))
    return list(recorded.filter(rank__lte=size).order_by(*latest_first).values_list(
        "forecast_at", "earliest", "latest", "started_at", "workload__preemptible"))


def forecasts_computed_since(*, at: Any) -> bool:
    """Whether a forecast refresh started at or after `at` (so it saw everything committed before then)."""
    return WorkloadForecast.objects.filter(computed_at__gte=at).exists()
