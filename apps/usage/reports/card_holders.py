"""Who held the cards: the ledger's intervals on a pool inside a window, for the holders page's timeline and its
CSV (every interval with its GPU-hours in the window, within the deserved quota and over it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import FloatField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.core.actors import Actor
from apps.workloads.models import submitter_text

from ..models import UsageInterval, UsageSlice
from ..services import usage_timelines_settle
from .ledger import card_hours, intervals_for, overlapping, within_hours
from .showback import hours_text
from .window import Window


@dataclass(frozen=True)
class HolderFilters:
    node_pool_id: int | None = None
    project_id: int | None = None
    user_id: int | None = None
    model_label: str = ""
    data_class: str = ""


def holders(*, user: Actor, window: Window, filters: HolderFilters, now: datetime | None = None
            ) -> QuerySet[UsageInterval]:
    """Intervals that held cards of the pool inside the window, oldest first, each with its card hours in the
    window (`held_hours`) and of which within the project's deserved quota (`within_hours`, from its slices; one
    correlated subquery, evaluated once per row). held_split() gives within and over quota, which add up to it."""
    now = now or timezone.now()
    usage_timelines_settle()
    within = UsageSlice.objects.filter(interval_id=OuterRef("pk")).filter(overlapping(window, now)).order_by().values(
        "interval_id").annotate(hours=Sum(within_hours(window, now))).values("hours")
    queryset = intervals_for(user).filter(overlapping(window, now))
    if filters.node_pool_id is not None:
        queryset = queryset.filter(node_pool_id=filters.node_pool_id)
    if filters.project_id is not None:
        queryset = queryset.filter(project_id=filters.project_id)
    if filters.user_id is not None:
        queryset = queryset.filter(user_id=filters.user_id)
    if filters.model_label:
        queryset = queryset.filter(model_label__iexact=filters.model_label)
    if filters.data_class:
        queryset = queryset.filter(data_class__iexact=filters.data_class)
    return queryset.annotate(held_hours=card_hours(window, now),
                             within_hours=Coalesce(Subquery(within, output_field=FloatField()), Value(0.0)),
                             ).order_by("started_at", "id")


def held_split(held: float | None, within: float | None) -> tuple[float, float]:
    """(within deserved, over quota) card hours of a holders() row: within is never above the held hours (the
    slices' float sum may differ in the last bits), over is the rest, so the two add up to the held hours exactly."""
    held = float(held or 0.0)
    within = min(max(float(within or 0.0), 0.0), held)
    return within, held - within


HOLDER_COLUMNS = [
    "Interval", "Workload", "Workload name", "Department", "Project", "User", "Node pool", "Units", "Card fraction",
    "Queue", "Model", "Data class", "Started", "Ended", "End reason", "GPU-hours in window", "Within deserved",
    "Over quota",
]


def _iso(moment: datetime | None) -> str:
    """UTC, unambiguous for auditors whatever the portal's time zone (and cheap for 100,000s of rows)."""
    return "" if moment is None else moment.astimezone(UTC).isoformat()


def holder_rows(queryset: QuerySet[UsageInterval]) -> Iterator[list[str]]:
    """CSV cells of each interval; reads the rows in chunks (values, no model instances)."""
    columns = ("pk", "workload_id", "workload__name", "department__slug", "project__slug", "user__username",
               "workload__submitted_by", "node_pool__slug", "units", "card_fraction_numerator",
               "card_fraction_denominator", "queue", "model_label", "data_class", "started_at", "ended_at",
               "end_reason", "held_hours", "within_hours")
    for (pk, workload_id, workload_name, department, project, username, submitted_by, pool, units, numerator,
         denominator, queue, model_label, data_class, started_at, ended_at, end_reason, held,
         within) in queryset.values_list(*columns).iterator(chunk_size=5000):
        inside, over = held_split(held, within)
        yield [str(pk), str(workload_id), workload_name, department, project, submitter_text(username, submitted_by),
               pool, str(units),
               f"{numerator}/{denominator}", queue, model_label, data_class, _iso(started_at), _iso(ended_at),
               end_reason, hours_text(float(held or 0.0)), hours_text(inside), hours_text(over)]


@dataclass
class TimelineBar:
    interval: UsageInterval
    left: float  # percent of the window
    width: float
    open: bool
    within: float = 0.0  # card hours in the window within the project's deserved quota
    over: float = 0.0  # and over it


def timeline(intervals: list[UsageInterval], window: Window, now: datetime) -> list[TimelineBar]:
    """Bars positioned by percentage of the window (for the page's one page of rows)."""
    until = window.until(now)
    span = (until - window.start).total_seconds() or 1.0
    bars = []
    for interval in intervals:
        begin = max(interval.started_at, window.start)
        finish = min(interval.ended_at or until, until)
        left = (begin - window.start).total_seconds() / span * 100
        width = max((finish - begin).total_seconds() / span * 100, 0.3)
        within, over = held_split(getattr(interval, "held_hours", None), getattr(interval, "within_hours", None))
        bars.append(TimelineBar(interval=interval, left=round(left, 3), width=round(min(width, 100 - left), 3),
                                open=interval.ended_at is None, within=within, over=over))
    return bars
