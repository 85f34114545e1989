"""Start-time forecasts: the worker computes them (worker/forecast.py); this stores each refresh."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Subquery

from apps.core.services import lock_for_transaction
from apps.workloads.models import (
    FORECAST_RECORD_DAYS,
    HOLDING_STATUSES,
    ForecastRecord,
    Workload,
    WorkloadEvent,
    WorkloadForecast,
)

FORECAST_FIELDS = ("computed_at", "earliest", "likely", "latest", "basis", "reason", "message")


def workload_forecasts_store(*, computed_at: datetime, forecasts: dict[int, dict[str, Any]],
                             replayed: Mapping[int, tuple[datetime, datetime, datetime]] | None = None) -> int:
    """Replace the stored forecasts with one refresh's (it covers every waiting workload): each workload in
    `forecasts` gets its row (earliest, likely, latest, basis, reason, message), every other row goes. Workloads
    deleted meanwhile are skipped. `replayed`: the replay's own (earliest, likely, latest) of the estimated ones,
    recorded the first time each is estimated; records get their start once the workload has quota, and go after
    FORECAST_RECORD_DAYS. One transaction; returns the rows written.

    Refreshes can overlap (beat's and the watcher's): they store one at a time, and one computed before the stored
    forecasts were is dropped (0), so an older picture never replaces a newer one."""
    with transaction.atomic():
        lock_for_transaction("workload-forecasts")
        if WorkloadForecast.objects.filter(computed_at__gt=computed_at).exists():
            return 0
        WorkloadForecast.objects.exclude(workload_id__in=list(forecasts)).delete()
        present = set(Workload.objects.filter(pk__in=list(forecasts)).values_list("pk", flat=True))
        rows = [WorkloadForecast(workload_id=workload_id, computed_at=computed_at, **values)
                for workload_id, values in forecasts.items() if workload_id in present]
        WorkloadForecast.objects.bulk_create(rows, batch_size=1000, update_conflicts=True,
                                             unique_fields=["workload"], update_fields=list(FORECAST_FIELDS))
        _forecast_record_keep(computed_at=computed_at, replayed={
            workload_id: times for workload_id, times in (replayed or {}).items() if workload_id in present})
    return len(rows)


def _forecast_record_keep(*, computed_at: datetime,
                          replayed: Mapping[int, tuple[datetime, datetime, datetime]]) -> None:
    """Record first estimates (a workload already recorded keeps its first), give each record whose workload has
    got quota since its estimate that start (the first admission the mirror recorded after it, on the cluster's
    clock, whose times have whole seconds), and drop the old ones."""
    ForecastRecord.objects.bulk_create(
        [ForecastRecord(workload_id=workload_id, forecast_at=computed_at, earliest=earliest, likely=likely,
                        latest=latest) for workload_id, (earliest, likely, latest) in sorted(replayed.items())],
        batch_size=1000, ignore_conflicts=True)
    admissions = WorkloadEvent.objects.filter(
        workload_id=OuterRef("workload_id"), to_status__in=HOLDING_STATUSES,
        cluster_at__gte=OuterRef("forecast_at") - timedelta(seconds=1)).order_by("cluster_at")
    ForecastRecord.objects.filter(Exists(admissions), started_at__isnull=True).update(
        started_at=Subquery(admissions.values("cluster_at")[:1]))
    ForecastRecord.objects.filter(forecast_at__lt=computed_at - timedelta(days=FORECAST_RECORD_DAYS)).delete()
