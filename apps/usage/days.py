"""The portal's local days a stretch of time crosses: the buckets of UsageDay and of the use-over-time dashboard by
day (a day can be 23 or 25 hours long at a clock change)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone


def day_start(moment: datetime) -> datetime:
    """The local midnight that starts the day of `moment`."""
    return timezone.make_aware(datetime.combine(timezone.localtime(moment).date(), datetime.min.time()))


def next_day(start: datetime) -> datetime:
    """The local midnight after the day starting at `start`."""
    day = timezone.localtime(start).date() + timedelta(days=1)
    return timezone.make_aware(datetime.combine(day, datetime.min.time()))


def days_crossed(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime, float]]:
    """(day start, day end, seconds of [start, end) inside it) for each local day the stretch crosses. Seconds in
    UTC: Python subtracts two moments of one time zone by their wall clocks, 24 hours across a clock change."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    day = day_start(start)
    while day < end:
        following = next_day(day)
        seconds = (min(end, following.astimezone(UTC)) - max(start, day.astimezone(UTC))).total_seconds()
        if seconds > 0:
            yield day, following, seconds
        day = following


SLICE_COLUMNS = ("project_id", "node_pool_id", "department_id", "units", "card_fraction_numerator",
                 "card_fraction_denominator", "share_numerator", "share_denominator", "started_at", "ended_at")
HOUR_COLUMNS = ("project_id", "node_pool_id", "department_id", "hour", "observed_card_hours", "used_card_hours",
                "idle_card_hours")
Key = tuple[int, int, int, datetime]  # project, pool, department, day


def daily_figures(slices: Iterable[tuple[Any, ...]], hours: Iterable[tuple[Any, ...]]) -> dict[Key, list[Any]]:
    """UsageDay's figures from closed slices and hourly utilisation rows (values_list of SLICE_COLUMNS and
    HOUR_COLUMNS): key -> [day end, card-seconds, within-deserved card-seconds, observed, used, idle card hours].
    For the backfill (migration usage 0011) and usage_days_rebuild."""
    sums: dict[Key, list[Any]] = {}
    for project_id, pool_id, department_id, units, numerator, denominator, share_n, share_d, start, end in slices:
        cards = units * numerator / denominator
        for day, day_end, seconds in days_crossed(start, end):
            entry = sums.setdefault((project_id, pool_id, department_id, day), [day_end, 0.0, 0.0, 0.0, 0.0, 0.0])
            entry[1] += cards * seconds
            entry[2] += cards * seconds * share_n / share_d
    for project_id, pool_id, department_id, hour, observed, used, idle in hours:
        day = day_start(hour)
        entry = sums.setdefault((project_id, pool_id, department_id, day), [next_day(day), 0.0, 0.0, 0.0, 0.0, 0.0])
        entry[3] += observed
        entry[4] += used
        entry[5] += idle
    return sums
