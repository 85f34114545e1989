"""The workload tallies: per project, pool and status, how many workloads and the GPU units they ask for (a share
of a card on a KAI pool as that share), read from a few rows instead of counted from every workload
(docs/architecture.md, Figures kept rather than counted)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, QuerySet, Sum

from apps.workloads.models import WorkloadTally, WorkloadTallyChange


@dataclass
class Tally:
    workloads: int = 0
    unit_hundredths: int = 0  # as kept: added up exactly, read as `units`
    # Grows with every change and never goes back: the part of a poll marker that moves whenever the figures may.
    changes: int = 0
    department_id: int = 0  # the project's

    def add(self, other: Tally) -> None:
        self.department_id = other.department_id
        self.workloads += other.workloads
        self.unit_hundredths += other.unit_hundredths
        self.changes += other.changes

    @property
    def units(self) -> Decimal:
        """The GPU units they ask for: 2, 0.5 (a share of a card on a KAI pool counts as that share)."""
        return Decimal(self.unit_hundredths) / 100


TallyKey = tuple[int, int, str]  # project id, pool id, status


def workload_tallies(*, statuses: Iterable[str], **where: Any) -> dict[TallyKey, Tally]:
    """The tallies in `statuses` of the projects `where` selects (`project=...`, `project__department_id__in=...`;
    nothing: every project), by project, pool and status. One query, of the folded figures and the changes not
    folded yet: as exact as counting the rows would be in the same transaction."""
    return tallies_of(tally_rows(statuses=statuses, **where))


def tally_rows(*, statuses: Iterable[str], **where: Any) -> QuerySet[Any, tuple[Any, ...]]:
    """`workload_tallies`' query, for readers that compile it once (apps/usage/reads.py): the folded rows and the
    changes not folded yet, as (project id, pool id, status, department id, workloads, unit hundredths, changes)."""
    statuses = sorted(statuses)
    folded = WorkloadTally.objects.filter(status__in=statuses, **where).values_list(
        "project_id", "node_pool_id", "status", "project__department_id", "workloads", "unit_hundredths", "changes")
    pending = WorkloadTallyChange.objects.filter(status__in=statuses, **where).values_list(
        "project_id", "node_pool_id", "status", "project__department_id").annotate(
        workloads=Sum("workloads"), unit_hundredths=Sum("unit_hundredths"), changes=Count("pk")).order_by()
    return folded.union(pending, all=True)


def tallies_of(rows: Iterable[Sequence[Any]]) -> dict[TallyKey, Tally]:
    """`tally_rows`' rows added up by project, pool and status."""
    tallies: dict[TallyKey, Tally] = defaultdict(Tally)
    for project_id, pool_id, status, department_id, workloads, hundredths, changes in rows:
        tallies[(project_id, pool_id, status)].add(Tally(int(workloads), int(hundredths), int(changes), department_id))
    return dict(tallies)


def tallies_by_pool(tallies: Mapping[TallyKey, Tally], *, statuses: Iterable[str]) -> dict[tuple[int, int], Tally]:
    """`tallies` of `statuses` added up per (project id, pool id)."""
    wanted = set(statuses)
    added: dict[tuple[int, int], Tally] = defaultdict(Tally)
    for (project_id, pool_id, status), tally in tallies.items():
        if status in wanted:
            added[(project_id, pool_id)].add(tally)
    return dict(added)
