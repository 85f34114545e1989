"""Writes of the GPU-hour ledger. The workloads app announces quota held and released (apps.workloads.signals);
the receivers below record it inside the same transaction as the workload's transition."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import DateTimeField, F, Value
from django.db.models.functions import Greatest

from .models import UsageInterval


def usage_interval_open(*, workload: Any, at: datetime, ended_at: datetime | None = None, reason: str = "") -> bool:
    """Record the stretch of quota that began at `at` (Kueue's admission time); idempotent.

    No-op when an interval starting then exists already, or when another one is still open. With `ended_at` the
    stretch is recorded closed at once: the watcher learnt of the admission only after it ended.
    """
    existing = UsageInterval.objects.filter(workload_id=workload.pk)
    if existing.filter(started_at=at).exists() or (ended_at is None and existing.filter(ended_at__isnull=True)
                                                      .exists()):
        return False
    pool = workload.node_pool
    UsageInterval.objects.create(
        workload_id=workload.pk, project_id=workload.project_id, department_id=workload.project.department_id,
        user_id=workload.owner_id, node_pool_id=pool.pk, units=workload.gpu_units,
        card_fraction_numerator=pool.card_fraction_numerator, card_fraction_denominator=pool.card_fraction_denominator,
        queue=UsageInterval.Queue.ELASTIC if workload.preemptible else UsageInterval.Queue.GUARANTEED,
        model_label=workload.model_label, data_class=workload.data_class, started_at=at,
        ended_at=None if ended_at is None else max(at, ended_at), end_reason=reason[:100] if ended_at else "",
    )
    return True


def usage_interval_close(*, workload_id: int, at: datetime, reason: str) -> bool:
    """Stop counting; an interval closes once (no-op when none is open). Never ends before it began."""
    return bool(UsageInterval.objects.filter(workload_id=workload_id, ended_at__isnull=True).update(
        ended_at=Greatest(F("started_at"), Value(at, output_field=DateTimeField())), end_reason=reason[:100]))


def on_quota_held(*, workload: Any, at: datetime, ended_at: datetime | None = None, reason: str = "",
                  **_: Any) -> None:
    usage_interval_open(workload=workload, at=at, ended_at=ended_at, reason=reason)


def on_quota_released(*, workload_id: int, at: datetime, reason: str, **_: Any) -> None:
    usage_interval_close(workload_id=workload_id, at=at, reason=reason)
