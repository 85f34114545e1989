"""Small display filters for the workload and queue pages."""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django import template
from django.template import Context
from django.template.defaultfilters import capfirst, date, timesince_filter, urlencode
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString
from django.utils.timezone import localtime

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


# The workload list's rows, written here rather than by the template: fifteen cells of variables, filters and two
# `{% url %}` a row cost the page more than its queries. Byte for byte what partials/_list_table.html rendered with
# `{% for %}` (tests/apps/workloads/test_workload_tags.py keeps that template and compares). What is the same for
# every row (the addresses' shape, the page's own address as `next`, the page's flags) is worked out once a
# rendering, in its render context.
_ROW_CONSTANTS = "workload_tags.list_row"
_PLACEHOLDER_ID = 987654321
_PLACEHOLDER_SLUG = "placeholder-slug-0"
_NONE = '<span class="muted">—</span>'


def _around(address: str, placeholder: object) -> tuple[str, str]:
    """The address split where its one argument goes: (before, after)."""
    before, after = address.split(str(placeholder))
    return before, after


@dataclass(frozen=True)
class _RowConstants:
    detail: tuple[str, str]
    stop: tuple[str, str]
    queue: tuple[str, str]
    next_query: str
    may_stop_any: bool
    may_submit: bool
    stop_consequences: str
    submit: dict[str, str]  # kind -> the submit form's address, as rows ask for them
    badges: dict[str, str]  # status -> its badge, as rows ask for them
    kinds: dict[str, str]  # kind -> its label, as rows ask for them


def _row_constants(context: Context) -> _RowConstants:
    found: _RowConstants | None = context.render_context.get(_ROW_CONSTANTS)
    if found is None:
        request = context.get("request")
        found = _RowConstants(
            detail=_around(reverse("workloads:detail", args=[_PLACEHOLDER_ID]), _PLACEHOLDER_ID),
            stop=_around(reverse("workloads:stop", args=[_PLACEHOLDER_ID]), _PLACEHOLDER_ID),
            queue=_around(reverse("workloads:project_queue", args=[_PLACEHOLDER_SLUG]), _PLACEHOLDER_SLUG),
            next_query=escape(urlencode(request.get_full_path())) if request is not None else "",
            may_stop_any=bool(context.get("may_stop_any")), may_submit=bool(context.get("may_submit")),
            stop_consequences=escape(context.get("stop_consequences", "")), submit={}, badges={}, kinds={})
        context.render_context[_ROW_CONSTANTS] = found
    return found


def _kind_label(labels: dict[str, str], w: Workload) -> str:
    """`w.get_kind_display()`, looked up once a rendering: Django builds the field's choices into a dict again on
    every call."""
    if w.kind not in labels:
        labels[w.kind] = str(w.get_kind_display())
    return labels[w.kind]


def _escape(text: object) -> str:
    """Django's `escape` (html.escape of its text) without making a SafeString of every cell."""
    return html.escape(str(text))


def _at(shape: tuple[str, str], argument: object) -> str:
    return _escape(f"{shape[0]}{argument}{shape[1]}")


def _date_time(value: datetime) -> str:
    """`{{ value|date:"Y-m-d H:i:s" }}` of a value in the current time zone."""
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"


def _local_date(value: datetime | None, format_string: str) -> str:
    """`{{ value|date:format_string }}`: in the current time zone, nothing for nothing."""
    return date(localtime(value), format_string) if value is not None else ""


def _forecast_span(forecast: WorkloadForecast) -> SafeString:
    """partials/_forecast.html for a row's forecast (the list's Forecast column)."""
    if forecast.estimated:
        title = format_html("Estimated start between {} and {} UTC, likely {}; from {}",
                            _local_date(forecast.earliest, "H:i"), _local_date(forecast.latest, "H:i"),
                            _local_date(forecast.likely, "H:i"), forecast.get_basis_display())
    else:
        title = escape(capfirst(forecast.get_reason_display()))
    return format_html('\n<span class="forecast{}" data-forecast="{}"{}\n  title="{} (computed {} UTC)">{}</span>\n',
                       "" if forecast.estimated else " muted", forecast.basis,
                       format_html(' data-forecast-reason="{}"', forecast.reason) if forecast.reason else "", title,
                       _local_date(forecast.computed_at, "H:i:s"), forecast_phrase(forecast))


@register.simple_tag(takes_context=True)
def workload_row(context: Context, w: Workload) -> SafeString:
    """One row of the workload list (its `<tr>` and the whitespace around it in the template's loop). Written with
    f-strings and `html.escape`, which is what Django's `escape` does, rather than `format_html`: its per-argument
    checks cost as much as the rest of the row."""
    row = _row_constants(context)
    pk = w.pk
    name = _escape(w.name)
    may_stop = getattr(w, "may_stop", False)
    select = ""
    if row.may_stop_any:
        select = f'<td><input type="checkbox" name="ids" value="{pk}" aria-label="Select {name}"></td>' if may_stop \
            else "<td></td>"
    priority = _escape((w.priority_class.name if w.priority_class is not None else "") or "no priority class")
    position_label = getattr(w, "position_label", "")
    position = f"<strong data-position>{_escape(position_label)}</strong>" if position_label else _NONE
    explanation = getattr(w, "explanation", None)
    why = ""
    if explanation:
        why = (f'<div class="small" data-explanation="{_escape(explanation.kind)}" '
               f'data-reason="{_escape(explanation.reason)}">{_escape(explanation.sentence)}</div>')
    elif w.status_reason and w.status != "running" and w.status != "succeeded" and \
            str(w.status_reason).lower() != w.status:
        why = f'<div class="small muted"><code>{_escape(w.status_reason)}</code></div>'
    forecast = w.start_forecast
    forecast_cell = f"<div data-start-forecast>{_forecast_span(forecast)}</div>" if forecast else _NONE
    runtime = getattr(w, "runtime", None)
    runtime_cell = _escape(duration(runtime)) if runtime else _NONE
    kind = _kind_label(row.kinds, w)
    stop = ""
    if may_stop:
        stop = (f'<a class="btn small danger" href="{_at(row.stop, pk)}?next={row.next_query}"\n'
                f'          data-confirm="Stop {_escape(kind.lower())} {name}?" '
                f'data-confirm-detail="{row.stop_consequences}" data-confirm-label="Stop">Stop</a>')
    again = ""
    if row.may_submit:
        if w.kind not in row.submit:
            row.submit[w.kind] = _escape(reverse("workloads:submit", args=[w.kind]))
        again = f'<a class="btn small secondary" href="{row.submit[w.kind]}?from={pk}">Submit again</a>'
    if w.status not in row.badges:
        row.badges[w.status] = status_badge(w)
    project_slug = _escape(w.project.slug)
    created_at = localtime(w.created_at)
    return SafeString(
        f'\n    <tr data-workload="{pk}" data-status="{_escape(w.status)}">\n      {select}\n'
        f'      <td data-col="name"><a href="{_at(row.detail, pk)}"><strong>{name}</strong></a>{origin_badge(w)}<br>'
        f'<span class="muted small">{priority}{" · preemptible" if w.preemptible else " · non-preemptible"}</span>'
        f'</td>\n'
        f'      <td data-col="project"><a href="{_at(row.queue, w.project.slug)}" title="The project\'s queue">'
        f'{project_slug}</a></td>\n'
        f'      <td data-col="department">{_escape(w.project.department.slug)}</td>\n'
        f'      <td data-col="creator">{_escape(w.submitter_label)}</td>\n'
        f'      <td data-col="kind">{_escape(kind)}</td>\n'
        f'      <td data-col="pool">{_escape(w.node_pool.slug)}</td>\n'
        f'      <td data-col="gpus_requested" class="num">{_escape(w.gpu_amount_text)}</td>\n'
        f'      <td data-col="gpus_allocated" class="num">{_escape(table.allocated_units(w))}</td>\n'
        f'      <td data-col="pods" class="num">{table.pods_running(w)}/{w.pod_count}</td>\n'
        f'      <td data-col="status">{row.badges[w.status]}</td>\n'
        f'      <td data-col="position">{position}</td>\n'
        f'      <td data-col="waiting_for" class="why">{why}</td>\n'
        f'      <td data-col="forecast" class="small">{forecast_cell}</td>\n'
        f'      <td data-col="runtime" class="small" data-runtime>{runtime_cell}</td>\n'
        f'      <td data-col="age" class="small" title="{_date_time(created_at)} UTC">'
        f'{_escape(timesince_filter(w.created_at))}</td>\n'
        f'      <td><div class="actions">\n        {stop}\n        {again}\n      </div></td>\n    </tr>\n  ')


# The project queue's rows, written here for the same reason as the list's: its hundred waiting rows through the
# template (the variables, filters, badges and the forecast's include of each) cost the poll more CPU than its
# selector's queries. Byte for byte what partials/_project_queue_live.html rendered with `{% for %}`
# (tests/apps/workloads/test_workload_tags.py keeps those loops' bodies and compares).
_QUEUE_CONSTANTS = "workload_tags.queue_row"


@dataclass(frozen=True)
class _QueueConstants:
    detail: tuple[str, str]
    viewer_pk: object
    badges: dict[str, str]  # status -> its badge, as rows ask for them
    kinds: dict[str, str]  # kind -> its label, as rows ask for them


_PREEMPTIBLE = ' <span class="muted">preemptible</span>'


def _queue_constants(context: Context) -> _QueueConstants:
    found: _QueueConstants | None = context.render_context.get(_QUEUE_CONSTANTS)
    if found is None:
        # As `{% if w.owner_id == request.user.pk %}` read it: None without a request (or a user) in the context.
        viewer_pk = getattr(getattr(context.get("request"), "user", None), "pk", None)
        found = _QueueConstants(detail=_around(reverse("workloads:detail", args=[_PLACEHOLDER_ID]), _PLACEHOLDER_ID),
                                viewer_pk=viewer_pk, badges={}, kinds={})
        context.render_context[_QUEUE_CONSTANTS] = found
    return found


def _queue_row_head(row: _QueueConstants, w: Workload) -> str:
    """The cells both tables open a row with: its link, id, kind and origin badge."""
    return (f'<td><a href="{_at(row.detail, w.pk)}">{_escape(w.name)}</a> <span class="muted small">#{w.pk} '
            f'{_escape(_kind_label(row.kinds, w).lower())}</span>{origin_badge(w)}</td>')


def _queue_badge(row: _QueueConstants, w: Workload) -> str:
    if w.status not in row.badges:
        row.badges[w.status] = status_badge(w)
    return row.badges[w.status]


@register.simple_tag(takes_context=True)
def queue_waiting_row(context: Context, w: Workload) -> SafeString:
    """One waiting row of the project queue (its `<tr>` and the whitespace around it in the template's loop)."""
    row = _queue_constants(context)
    position_label = getattr(w, "position_label", "")
    position = (f"<strong>{_escape(position_label)}</strong>" if position_label
                else f'<span class="muted">{_escape(w.queue_name)}</span>')
    you = ' <span class="badge">you</span>' if w.owner_id == row.viewer_pk else ""
    priority = _escape((w.priority_class.name if w.priority_class is not None else "") or "no priority class")
    explanation = getattr(w, "explanation", None)
    why = ""
    if explanation:
        why = (f'<span data-explanation="{_escape(explanation.kind)}" data-reason="{_escape(explanation.reason)}">'
               f'{_escape(explanation.sentence)}</span>')
    elif w.status_message:
        why = _escape(w.status_message)
    forecast = w.start_forecast
    if forecast:
        why += f"<div data-start-forecast>{_forecast_span(forecast)}</div>"
    local_position = w.queue_position_local
    return SafeString(
        f'\n      <tr data-workload="{w.pk}" data-status="{_escape(w.status)}">\n'
        f'        <td data-position="{"" if local_position is None else local_position}">{position}</td>\n'
        f"        {_queue_row_head(row, w)}\n"
        f"        <td>{_escape(w.submitter_label)}{you}</td>\n"
        f'        <td class="num">{_escape(w.gpu_amount_text)}</td>\n'
        f'        <td class="small">{priority}{"" if w.preemptible else " · non-preemptible"}</td>\n'
        f"        <td>{_queue_badge(row, w)}</td>\n"
        f'        <td class="small">{why}</td>\n'
        f'        <td class="small">{_escape(timesince_filter(w.created_at))}</td></tr>\n    ')


@register.simple_tag(takes_context=True)
def queue_holding_row(context: Context, w: Workload) -> SafeString:
    """One admitted or running row of the project queue (its `<tr>` and the whitespace around it in the loop)."""
    row = _queue_constants(context)
    runtime = getattr(w, "runtime", None)
    return SafeString(
        f'\n      <tr data-workload="{w.pk}" data-status="{_escape(w.status)}">\n'
        f"        {_queue_row_head(row, w)}\n"
        f"        <td>{_escape(w.submitter_label)}</td><td>{_escape(w.node_pool.slug)}</td>"
        f'<td class="num">{_escape(w.gpu_amount_text)}</td>\n'
        f'        <td class="small"><code>{_escape(w.queue_name)}</code>'
        f'{_PREEMPTIBLE if w.preemptible else ""}</td>\n'
        f"        <td>{_queue_badge(row, w)}</td>\n"
        f'        <td class="small">{_escape(duration(runtime)) if runtime else "—"}</td></tr>\n    ')
