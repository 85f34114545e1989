"""Helpers for the GPU-hour report tests: ledger rows written directly (the arithmetic is what is under test)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from apps.org.models import NodePool, NodePoolPrice, PriorityClass, Project
from apps.usage import split
from apps.usage.models import DeservedPeriod, UsageInterval
from apps.usage.services import usage_timeline_refresh
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory


def at(text: str) -> datetime:
    """'2026-03-01 10:00' -> an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def quotas_in_force_since(moment: str | datetime) -> None:
    """Date the project quotas of the demo organisation as set at `moment` ('2026-01-01 00:00'): the test database
    seeds them today, and deserved GPU-hours count only from when a quota came into force (DeservedPeriod)."""
    DeservedPeriod.objects.filter(started_at=split.BEGINNING).update(
        in_force_from=at(moment) if isinstance(moment, str) else moment)


def priced(pool: str, price: str | None, since: str) -> None:
    """The pool's card-hour costs `price` from `since` on ('2026-02-01 00:00'), as if an admin had set it then: a
    row of its price history, and its price now."""
    row = NodePool.objects.get(slug=pool)
    NodePoolPrice.objects.create(node_pool=row, price_per_card_hour=price, valid_from=at(since))
    NodePool.objects.filter(pk=row.pk).update(price_per_card_hour=price)


def workload(owner: Any, *, project: str = "vision", pool: str = "h100", name: str = "run", gpus: int = 1,
             model_label: str = "resnet", data_class: str = "public", preemptible: bool = True) -> Workload:
    return WorkloadFactory(
        project=Project.objects.get(slug=project), owner=owner, name=name, node_pool=NodePool.objects.get(slug=pool),
        gpus=gpus, priority_class=PriorityClass.objects.get(name="train"), preemptible=preemptible,
        model_label=model_label, data_class=data_class, status="running")


def interval(work: Workload, start: str, end: str | None, *, units: int | None = None,
             queue: str | None = None, reason: str = "") -> UsageInterval:
    """One ledger row for `work`, with its pool's card fraction, from `start` to `end` (None: still open), and its
    project's within-deserved slices recomputed from its start (as the ledger writers do)."""
    pool = work.node_pool
    row = UsageInterval.objects.create(
        workload=work, project=work.project, department_id=work.project.department_id, user=work.owner,
        node_pool=pool, units=work.gpus if units is None else units,
        card_fraction_numerator=pool.card_fraction_numerator,
        card_fraction_denominator=pool.card_fraction_denominator,
        queue=queue or ("elastic" if work.preemptible else "guaranteed"), model_label=work.model_label,
        data_class=work.data_class, started_at=at(start), ended_at=at(end) if end else None,
        end_reason=reason if end else "")
    usage_timeline_refresh(project_id=row.project_id, node_pool_id=row.node_pool_id, since=row.started_at)
    return row


def expected_hours(rows: list[UsageInterval], start: datetime, end: datetime) -> float:
    """The ledger arithmetic done by hand in Python (the reference the SQL is checked against)."""
    total = 0.0
    for row in rows:
        begin, finish = max(row.started_at, start), min(row.ended_at or end, end)
        if finish > begin:
            total += (finish - begin).total_seconds() / 3600 * row.units * row.card_fraction_numerator / (
                row.card_fraction_denominator)
    return total


def expected_within(rows: list[UsageInterval], start: datetime, end: datetime,
                    deserved: dict[tuple[int, int], int | list[tuple[datetime, int]]]) -> dict[int, float]:
    """Within-deserved card hours of each interval in [start, end), by brute force (the reference for the split).

    `deserved[(project_id, pool_id)]` is a number of units, or a list of (from, units) periods. Cuts the window at
    every start and end of every interval and every quota change; in each piece, per project and pool: guaranteed
    units G, elastic units E, deserved D. Guaranteed work gets min(G, D) in proportion to units, elastic work
    min(E, D - min(G, D)) in proportion to units.
    """
    def quota_at(key: tuple[int, int], moment: datetime) -> int:
        value = deserved.get(key, 0)
        if isinstance(value, int):
            return value
        current = 0
        for since, units in sorted(value):
            if since <= moment:
                current = units
        return current

    changes = {since for value in deserved.values() if not isinstance(value, int) for since, _ in value}
    cuts = sorted({start, end} | {moment for row in rows for moment in (row.started_at, row.ended_at)
                                  if moment is not None and start < moment < end}
                  | {moment for moment in changes if start < moment < end})
    within = {row.pk: 0.0 for row in rows}
    for begin, finish in itertools.pairwise(cuts):
        live = [row for row in rows if row.started_at <= begin and (row.ended_at is None or row.ended_at >= finish)]
        hours = (finish - begin).total_seconds() / 3600
        for key in {(row.project_id, row.node_pool_id) for row in live}:
            mine = [row for row in live if (row.project_id, row.node_pool_id) == key]
            quota = quota_at(key, begin)
            guaranteed = sum(row.units for row in mine if row.queue == "guaranteed")
            elastic = sum(row.units for row in mine if row.queue != "guaranteed")
            g_within = min(guaranteed, quota)
            e_within = min(elastic, quota - g_within)
            for row in mine:
                share = (g_within / guaranteed) if row.queue == "guaranteed" else (e_within / elastic)
                within[row.pk] += hours * row.units * share * row.card_fraction_numerator / (
                    row.card_fraction_denominator)
    return within
