"""Helpers for the GPU-hour report tests: ledger rows written directly (the arithmetic is what is under test)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from apps.org.models import NodePool, PriorityClass, Project
from apps.usage.models import UsageInterval
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory


def at(text: str) -> datetime:
    """'2026-03-01 10:00' -> an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def workload(owner: Any, *, project: str = "vision", pool: str = "h100", name: str = "run", gpus: int = 1,
             model_label: str = "resnet", data_class: str = "public", preemptible: bool = True) -> Workload:
    return WorkloadFactory(
        project=Project.objects.get(slug=project), owner=owner, name=name, node_pool=NodePool.objects.get(slug=pool),
        gpus=gpus, priority_class=PriorityClass.objects.get(name="train"), preemptible=preemptible,
        model_label=model_label, data_class=data_class, status="running")


def interval(work: Workload, start: str, end: str | None, *, units: int | None = None,
             queue: str | None = None, reason: str = "") -> UsageInterval:
    """One ledger row for `work`, with its pool's card fraction, from `start` to `end` (None: still open)."""
    pool = work.node_pool
    return UsageInterval.objects.create(
        workload=work, project=work.project, department_id=work.project.department_id, user=work.owner,
        node_pool=pool, units=work.gpus if units is None else units,
        card_fraction_numerator=pool.card_fraction_numerator,
        card_fraction_denominator=pool.card_fraction_denominator,
        queue=queue or ("elastic" if work.preemptible else "guaranteed"), model_label=work.model_label,
        data_class=work.data_class, started_at=at(start), ended_at=at(end) if end else None,
        end_reason=reason if end else "")


def expected_hours(rows: list[UsageInterval], start: datetime, end: datetime) -> float:
    """The ledger arithmetic done by hand in Python (the reference the SQL is checked against)."""
    total = 0.0
    for row in rows:
        begin, finish = max(row.started_at, start), min(row.ended_at or end, end)
        if finish > begin:
            total += (finish - begin).total_seconds() / 3600 * row.units * row.card_fraction_numerator / (
                row.card_fraction_denominator)
    return total
