"""The workload table's columns, in one place for the list page, its column chooser and the CSV export.

Run:ai's workloads page is the model: every column can be hidden (the browser remembers the choice, see
static/js/portal.js), the sortable ones carry the FilterSet's ordering key, and the CSV has the same columns for the
filtered rows. A column's value comes from the row as `selectors.workload_list` joins it and `annotate_live` fills it
in, so neither the page nor the CSV adds a query per row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from apps.core.actors import Actor

from .models import HOLDING_STATUSES, Status, Workload
from .selectors import annotate_live


def forecast_of(workload: Workload) -> Any:
    """The workload's start forecast when the forecast engine made one (a missing row reads as None)."""
    return getattr(workload, "forecast", None)


def forecast_text(workload: Workload) -> str:
    forecast = forecast_of(workload)
    return forecast.phrase() if forecast is not None and hasattr(forecast, "phrase") else ""


def allocated_units(workload: Workload) -> str:
    """GPUs its scheduler has admitted for it: all it asked for while it holds quota (a share of a card as that
    share, 0.5), none otherwise."""
    return workload.gpu_amount_text if workload.status in HOLDING_STATUSES else "0"


def pods_running(workload: Workload) -> int:
    """Pods running now: the whole gang (or the batch's parallel pods) while running; the portal mirrors the Job,
    not each pod, so an admitted workload whose pods are still starting counts none."""
    return workload.pod_count if workload.status == Status.RUNNING else 0


def waiting_for(workload: Workload) -> str:
    explanation = getattr(workload, "explanation", None)
    return explanation.headline if explanation is not None else ""


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    value: Callable[[Workload], Any]
    ordering: str = ""  # the FilterSet's ordering value, when the column sorts
    shown: bool = True  # shown until the user hides it
    csv_label: str = ""  # the CSV's heading when its value differs from the page's (a time rather than an age)


COLUMNS: tuple[Column, ...] = (
    Column("name", "Workload", lambda w: w.name, "name"),
    Column("project", "Project", lambda w: w.project.slug, "project"),
    Column("department", "Department", lambda w: w.project.department.slug, "department"),
    Column("creator", "Creator", lambda w: w.submitter_label, "owner"),
    Column("kind", "Kind", lambda w: w.get_kind_display(), "kind"),
    Column("pool", "Pool", lambda w: w.node_pool.slug, "node_pool", shown=False),
    Column("gpus_requested", "GPUs requested", lambda w: w.gpu_amount_text, "gpus"),
    Column("gpus_allocated", "GPUs allocated", allocated_units),
    Column("pods", "Pods running / requested", lambda w: f"{pods_running(w)}/{w.pod_count}"),
    Column("status", "Status", lambda w: w.get_status_display(), "status"),
    Column("position", "Position", lambda w: w.position_label, "position"),
    Column("waiting_for", "Waiting for", waiting_for),
    Column("forecast", "Forecast", forecast_text),
    Column(
        "runtime",
        "Runtime",
        lambda w: int(w.runtime.total_seconds()) if w.runtime else "",
        shown=False,
        csv_label="Runtime (seconds)",
    ),
    Column("age", "Age", lambda w: w.created_at, "created_at", csv_label="Submitted (UTC)"),
)


def csv_header() -> list[str]:
    return ["id", *(column.csv_label or column.label for column in COLUMNS)]


def csv_rows(workloads: Iterable[Workload]) -> Iterator[list[Any]]:
    """One line per workload with every column (age as the submission time, ISO 8601 in UTC)."""
    for workload in workloads:
        values = [column.value(workload) for column in COLUMNS]
        yield [
            workload.pk,
            *(value.astimezone(UTC).isoformat() if isinstance(value, datetime) else value for value in values),
        ]


def header_links(query: Any, ordering: str) -> list[dict[str, Any]]:
    """Each column's heading: its label, whether it starts shown, and for sortable columns the address that sorts
    by it (ascending first, descending when it already sorts ascending) and the current direction."""
    current = ordering.split(",")[0] if ordering else ""
    headings = []
    for column in COLUMNS:
        heading: dict[str, Any] = {
            "key": column.key,
            "label": column.label,
            "shown": column.shown,
            "sort_url": "",
            "sorted": "",
        }
        if column.ordering:
            heading["sorted"] = (
                "asc" if current == column.ordering else "desc" if current == f"-{column.ordering}" else ""
            )
            sorted_query = query.copy()
            sorted_query.pop("page", None)
            sorted_query["ordering"] = f"-{column.ordering}" if heading["sorted"] == "asc" else column.ordering
            heading["sort_url"] = f"?{sorted_query.urlencode()}"
        headings.append(heading)
    return headings


EXPORT_CHUNK = 500  # rows explained at once: a fixed number of queries per chunk, bounded memory
EXPORT_LIMIT = 50_000  # a CSV larger than this is a report for the API's pages, not a download


def export_rows(workloads: Any, *, viewer: Actor) -> Iterator[list[Any]]:
    """The CSV of the filtered rows (header first), each chunk explained for `viewer` like the page's rows."""
    yield csv_header()
    rows = list(workloads[:EXPORT_LIMIT].values_list("pk", flat=True))
    for start in range(0, len(rows), EXPORT_CHUNK):
        chunk = {w.pk: w for w in workloads.filter(pk__in=rows[start : start + EXPORT_CHUNK])}
        yield from csv_rows(
            annotate_live([chunk[pk] for pk in rows[start : start + EXPORT_CHUNK] if pk in chunk], viewer=viewer)
        )
