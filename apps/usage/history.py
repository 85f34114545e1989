"""Quota over time: one project's deserved quota, units in use and units borrowed on one pool, over the last day,
week or month, from the GPU-hour ledger (two queries).

Each point is the average over its step (15 minutes for a day, an hour for a week, six hours for a month), weighted
by time, so a job shorter than a step still counts for the time it held its cards. In use counts every ledger slice
of the project on the pool (a share of a card on a KAI pool as that share of a unit); borrowed is the over-quota
part of each slice (units x (1 - its within-deserved share)), the same split as the GPU-hour reports
(apps/usage/split.py); deserved is the quota in force (DeservedPeriod), from the moment it came into force (none
before the project had a quota on the pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from apps.org.models import NodePool, Project

from .models import DeservedPeriod, UsageSlice
from .services import quota_units, usage_timelines_settle

SPANS: dict[str, tuple[str, timedelta, timedelta]] = {
    "day": ("Last day", timedelta(days=1), timedelta(minutes=15)),
    "week": ("Last week", timedelta(days=7), timedelta(hours=1)),
    "month": ("Last 30 days", timedelta(days=30), timedelta(hours=6)),
}


@dataclass
class QuotaHistory:
    project: Project
    pool: NodePool
    span: str
    start: datetime
    step: timedelta
    deserved: list[float]
    used: list[float]
    borrowed: list[float]
    current_seconds: float  # how much of the last step has passed (its averages are over that part)

    @property
    def times(self) -> list[datetime]:
        return [self.start + self.step * index for index in range(len(self.used))]

    @property
    def borrowed_card_hours(self) -> float:
        """Units x hours held over quota in the span (pool units, not physical cards)."""
        if not self.borrowed:
            return 0.0
        return (sum(self.borrowed[:-1]) * self.step.total_seconds() + self.borrowed[-1] * self.current_seconds) / 3600

    def chart_data(self) -> dict[str, Any]:
        """What static/js/quota-history.js draws: epoch seconds and the three series, rounded to 0.01 unit."""
        return {
            "t": [int(moment.timestamp()) for moment in self.times],
            "deserved": [round(value, 2) for value in self.deserved],
            "used": [round(value, 2) for value in self.used],
            "borrowed": [round(value, 2) for value in self.borrowed],
            "title": f"{self.project.name} on {self.pool.name}: {SPANS[self.span][0].lower()}",
        }


def _spread(
    values: list[float], amount: float, since: datetime, until: datetime, *, start: datetime, step: timedelta
) -> None:
    """Add `amount` x the seconds of [since, until) that fall in each step's bucket."""
    end = start + step * len(values)
    since, until = max(since, start), min(until, end)
    index = int((since - start) / step)
    while since < until and index < len(values):
        bucket_end = start + step * (index + 1)
        values[index] += amount * (min(until, bucket_end) - since).total_seconds()
        since = bucket_end
        index += 1


def quota_history(*, project: Project, pool: NodePool, span: str, now: datetime | None = None) -> QuotaHistory:
    """The project's figures on the pool over `span` (a key of SPANS), ending at `now` (on a step boundary)."""
    _, length, step = SPANS[span]
    now = now or timezone.now()
    end = now - (now - now.replace(hour=0, minute=0, second=0, microsecond=0)) % step + step  # the current step too
    start = end - length
    count = int(length / step)
    used, borrowed, deserved = [0.0] * count, [0.0] * count, [0.0] * count
    usage_timelines_settle()
    overlapping = Q(started_at__lt=end) & (Q(ended_at__isnull=True) | Q(ended_at__gt=start))
    for whole, fraction, numerator, denominator, since, until in UsageSlice.objects.filter(
        overlapping, project=project, node_pool=pool
    ).values_list("units", "interval__workload__gpu_fraction", "share_numerator", "share_denominator", "started_at",
                  "ended_at"):
        until = min(until or now, now)  # an open slice holds its cards until now, not until the step's end
        units = float(quota_units(whole, fraction))  # a share of a card on a KAI pool: that share of a unit
        _spread(used, units, since, until, start=start, step=step)
        _spread(borrowed, units * (1 - numerator / denominator), since, until, start=start, step=step)
    in_force = Q(in_force_from__lt=end) & (Q(ended_at__isnull=True) | Q(ended_at__gt=start))
    for units, since, until in DeservedPeriod.objects.filter(in_force, project=project, node_pool=pool).values_list(
        "deserved", "in_force_from", "ended_at"
    ):
        _spread(deserved, units, since, min(until or end, end), start=start, step=step)
    seconds = step.total_seconds()
    # The current step has only run until now: its averages are over the part that has passed.
    current = (now - (end - step)).total_seconds() or seconds
    for values in (used, borrowed):
        values[:-1] = [value / seconds for value in values[:-1]]
        values[-1] = values[-1] / current
    deserved[:] = [value / seconds for value in deserved]
    return QuotaHistory(
        project=project,
        pool=pool,
        span=span,
        start=start,
        step=step,
        deserved=deserved,
        used=used,
        borrowed=borrowed,
        current_seconds=current,
    )
