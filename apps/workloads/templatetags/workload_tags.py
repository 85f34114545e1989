"""Small display filters for the workload and queue pages."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django import template

from apps.workloads import table
from apps.workloads.models import Workload, WorkloadForecast

register = template.Library()


@register.filter
def duration(value: timedelta | None) -> str:
    """2h 05m, 4m 10s, 12s."""
    if value is None:
        return ""
    seconds = max(0, int(value.total_seconds()))
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {seconds:02d}s"
    return f"{seconds}s"


@register.filter
def allocated_units(workload: Workload) -> str:
    """GPUs its scheduler admitted for the workload, a share of a card as that share (apps/workloads/table.py)."""
    return table.allocated_units(workload)


@register.filter
def pods_running(workload: Workload) -> int:
    return table.pods_running(workload)


@register.filter
def runtime_limit(seconds: int | None) -> str:
    """A max runtime in the form's unit, minutes, with hours beside it: "45 min", "90 min (1 h 30 min)"; seconds
    only when the API set a limit that is not whole minutes ("1 h 30 min 15 s")."""
    if not seconds:
        return ""
    minutes, rest = divmod(seconds, 60)
    hours, minutes_left = divmod(minutes, 60)
    spoken = " ".join(part for part in (f"{hours} h" if hours else "", f"{minutes_left} min" if minutes_left else "",
                                        f"{rest} s" if rest else "") if part)
    if rest or not hours:
        return spoken
    return f"{minutes} min ({spoken})"


@register.filter
def units(value: Any) -> str:
    """GPU units without trailing zeros: 4, 0.5."""
    if value is None:
        return "—"
    value = Decimal(value)
    return format(value.normalize(), "f") if value != value.to_integral() else str(int(value))


@register.filter
def plus_one(value: int | None) -> int | None:
    """Kueue's 0-based positions as people count them."""
    return None if value is None else value + 1


@register.filter
def forecast_phrase(forecast: WorkloadForecast | None) -> str:
    """A WorkloadForecast counted from now: "likely in 30 min (25-40 min)" or "cannot estimate: ..."."""
    return forecast.phrase() if forecast else ""
