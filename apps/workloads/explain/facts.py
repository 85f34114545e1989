"""What `explain` takes (`WaitFacts`: the numbers and peers of one workload, for one viewer) and what it gives
(`Explanation`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from apps.workloads.capacity import Assessment

from .reasons import HUMAN_PREEMPTION, KINDS


@dataclass(frozen=True)
class Share:
    """Units on a pool attributed to one project; `project` is None for projects the viewer may not see."""

    project: str | None
    units: Decimal


@dataclass(frozen=True)
class Peer:
    """Another workload (a preemptor or a victim); everything None when the viewer may not see it."""

    id: int | None = None
    name: str | None = None
    project: str | None = None

    @property
    def visible(self) -> bool:
        return self.id is not None


@dataclass(frozen=True)
class PreemptionNote:
    """A workload's last preemption in one plain sentence: when, by which workload (as far as the viewer may see it;
    None: a workload the portal does not know) and why. No UIDs, no cohort paths: those stay in Kueue's conditions."""

    at: datetime | None
    reason: str
    preemptor: Peer | None

    @property
    def when(self) -> str:
        return f"on {self.at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" if self.at else ""

    @property
    def who(self) -> str:
        if self.preemptor is None:
            return ""  # the portal does not know the preemptor (Kueue named none, or a Job it did not submit)
        if self.preemptor.visible:
            return f"by #{self.preemptor.id} {self.preemptor.name} ({self.preemptor.project})"
        return "by a workload of a project you cannot see"

    @property
    def why(self) -> str:
        return HUMAN_PREEMPTION.get(self.reason, "")

    @property
    def sentence(self) -> str:
        """E.g. "Preempted on 2026-03-01 10:00:00 UTC by #12 reclaim (NLP), to give back borrowed quota ..."."""
        parts = " ".join(part for part in ("Preempted", self.when, self.who) if part)
        return f"{parts}, {self.why}." if self.why else f"{parts}."


@dataclass(frozen=True)
class WaitFacts:
    """What `explain` may use, for one workload and one viewer. None where nothing is known (yet)."""

    has_quota: bool = True
    deserved: int | None = None
    limit: int | None = None
    project_used: Decimal | None = None
    queue_used: Decimal | None = None  # its own ClusterQueue (guaranteed for non-preemptible work)
    department: str = ""
    department_deserved: int | None = None
    department_limit: int | None = None
    department_used: Decimal | None = None
    pool_capacity: int | None = None
    pool_used: Decimal | None = None
    assessment: Assessment | None = None
    holders: tuple[Share, ...] = ()  # everyone on the pool
    department_holders: tuple[Share, ...] = ()  # the department's projects on the pool
    held_back: dict[str, tuple[Share, ...]] = field(default_factory=dict)  # level -> idle cards kept there
    keepers: tuple[Share, ...] = ()  # other projects on the pool that do not lend (units: their deserved)
    queue_active: bool = True
    queue_reason: str = ""
    queue_message: str = ""
    victims: tuple[Peer, ...] = ()
    preemptor: Peer | None = None
    preemption_reason: str = ""
    preempted_at: datetime | None = None
    # Allocatable units of each ready, schedulable node of the pool (the watcher's node mirror); None: none mirrored.
    node_allocatable: tuple[int, ...] | None = None
    # The budget holding this (preemptible) workload's scope, if one does: (scope's name, amount, period).
    budget_hold: BudgetHold | None = None


@dataclass(frozen=True)
class BudgetHold:
    """An exceeded `hold_preemptible` budget of the workload's project or department, as the explanation names it."""

    scope: str  # e.g. "project Vision", "department Research"
    amount: str  # e.g. "100 GPU-hours"
    period: str  # e.g. "March 2026", "Q1 2026"


@dataclass(frozen=True)
class Explanation:
    reason: str
    sentence: str
    headline: str
    numbers: dict[str, Any] = field(default_factory=dict)
    preemption: PreemptionNote | None = None  # preempted or requeued: its last preemption

    @property
    def kind(self) -> str:
        """The coarse kind of the first version (quota, preempting, never_fits, misconfigured, stopped_queue)."""
        return KINDS[self.reason]
