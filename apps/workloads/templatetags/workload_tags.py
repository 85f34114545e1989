"""Small display filters for the workload and queue pages."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from apps.workloads import table
from apps.workloads.models import Workload, WorkloadForecast

register = template.Library()

# The badges of long tables' rows (the workload list, a project's queue), written here rather than included from
# partials/_status_badge.html and _origin_badge.html per row: two includes a row cost those pages more than the
# rest of the row. Byte for byte what the partials render, which stay for single workloads (a test compares them).
_STATUS_TONES = {"running": " ok", "succeeded": " ok", "admitted": " ok", "failed": " bad", "rejected": " bad",
                 "submit_failed": " bad", "preempted": " warn", "requeued": " warn", "stopping": " warn",
                 "stopped": " grey"}


@register.simple_tag
def status_badge(workload: Workload) -> SafeString:
    """partials/_status_badge.html for one row."""
    return format_html('<span class="badge status-{}{}">{}</span>\n', workload.status,
                       _STATUS_TONES.get(workload.status, ""), workload.get_status_display())


@register.simple_tag
def origin_badge(workload: Workload) -> SafeString:
    """partials/_origin_badge.html for one row: the "outside" badge for work submitted outside the portal."""
    if not workload.from_outside:
        return SafeString("\n")
    by = format_html(" by {}", workload.submitted_by) if workload.submitted_by else ""
    return format_html(' <span class="badge grey" data-origin="outside" title="Submitted outside the portal{} ({} {})">'
                       'outside</span>\n', by, workload.get_kind_display(), workload.object_name)


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
