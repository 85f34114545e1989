""""Why am I waiting": the cause of every kind of wait, with its numbers, for one viewer.

One model serves every place that says why a workload waits: the list, the detail page (its status line and its
queue panel), a project's queue, the API (`waiting`: a `reason` code, the sentence, the status line and the
numbers) and the e-mails. Each cause is a `reason` code (`REASONS`); the sentence and the status line (`headline`)
are built from the same `numbers`, so they can never disagree with each other.

The numbers come from the same sources as the quota pages (the organisation's quotas and the watcher's mirror of
each ClusterQueue's usage, as in `apps.usage.selectors.quota_dashboard`), and the free capacity is Kueue's own
arithmetic over the cohort tree (`capacity.PoolTree`), so "N more needed" is the number Kueue writes in its message.
Which level is short decides the reason, lowest first: the queue (non-preemptible work inside the deserved quota),
the project's limit, the department's limit, then the pool (full, or idle cards a non-lending project keeps).

Other projects are named only when the viewer may see them (`apps.accounts.access`): holders a viewer may not see
are summed as "others", and cards kept by a project the viewer may not see are "held back by a project you cannot
see". An explanation therefore depends on the viewer: callers pass it, and pages that cache key by its scope.

`explain` is pure; `explain_workloads` gathers the facts for many workloads in a fixed number of queries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.db.models import Exists, OuterRef, Q, Value

from apps.accounts import access
from apps.accounts.access import Action
from apps.cluster.models import ClusterQueueState, LocalQueueState, NodeState
from apps.core import kueue_conditions as kueue
from apps.org.models import Project, Quota

from .capacity import ZERO, Assessment, DepartmentQuota, PoolTree, ProjectQuota
from .models import PREEMPTED_STATUSES, QUEUED_STATUSES, Status, Workload, WorkloadEvent

# --- the reasons -----------------------------------------------------------------------------------------------

PROJECT_LIMIT = "project_limit"
PROJECT_DESERVED = "project_deserved"
DEPARTMENT_LIMIT = "department_limit"
POOL_FULL = "pool_full"
NOT_LENDABLE = "not_lendable"
BEHIND = "behind"
ADMITTING = "admitting"
GANG = "gang"
PREEMPTING = "preempting"
PREEMPTED = "preempted"
ADMISSION_CHECKS = "admission_checks"
QUEUE_STOPPED = "queue_stopped"
MISCONFIGURED = "misconfigured"
NO_QUOTA = "no_quota"
INACTIVE = "inactive"
NEVER_FITS = "never_fits"
UNKNOWN = "unknown"

REASONS: dict[str, str] = {
    PROJECT_LIMIT: "The project uses its whole limit on the pool (project_used / limit), whatever is idle.",
    PROJECT_DESERVED: "Non-preemptible work runs only inside the project's deserved quota, and its non-preemptible "
                      "work holds it (queue_used / deserved).",
    DEPARTMENT_LIMIT: "The department uses its whole limit on the pool (department_used / department_limit); "
                      "holders lists its projects the viewer may see, the rest as others.",
    POOL_FULL: "Within its limits, but the pool is physically full (pool_used / pool_capacity); holders lists who "
               "holds it, by project the viewer may see, the rest as others.",
    NOT_LENDABLE: "Cards are idle but a project that does not lend (lendingLimit 0) keeps them (held_back, "
                  "held_back_by; a project the viewer may not see is unnamed).",
    BEHIND: "There is room for it (available), but `ahead` earlier or higher-priority workloads go first.",
    ADMITTING: "There is room for it (available): Kueue admits it at its next pass.",
    GANG: "A gang of `pods` pods admitted together: waiting until every pod is ready (waitForPodsReady), or "
          "requeued after its pods were not all ready in time.",
    PREEMPTING: "Kueue preempts other work to make room for it (victims, as far as the viewer may see them; "
                "hidden_victims counts the others), or reclaims the project's lent deserved quota.",
    PREEMPTED: "It was preempted (preemptor, when the viewer may see it; preemption_reason; preempted_at) and goes "
               "back into the queue once its pods have stopped.",
    ADMISSION_CHECKS: "Quota is reserved; Kueue admits it once its admission checks are Ready (admission_checks: "
                      "name, state, message each; a provisioning check waits for capacity to be brought up).",
    QUEUE_STOPPED: "Its LocalQueue or ClusterQueue is held or stopped by an admin.",
    MISCONFIGURED: "Its queue is not usable (Kueue's message says why).",
    NO_QUOTA: "The project has no quota on this pool, so there is no queue for it there.",
    INACTIVE: "Kueue deactivated it (spec.active false): it will not start again.",
    NEVER_FITS: "It can never be admitted as submitted (limit, deserved quota, department limit, pool capacity or "
                "cards held back); `change` says what to change.",
    UNKNOWN: "The portal has no numbers for its queue yet.",
}

# The coarse kinds of the first version (API `explanation_kind`, `data-explanation` in pages).
QUOTA = "quota"
STOPPED_QUEUE = "stopped_queue"
PENDING = "pending"
_KIND = {PROJECT_LIMIT: QUOTA, PROJECT_DESERVED: QUOTA, DEPARTMENT_LIMIT: QUOTA, POOL_FULL: QUOTA,
         NOT_LENDABLE: QUOTA, BEHIND: QUOTA, ADMITTING: PENDING, GANG: PENDING, PREEMPTING: PREEMPTING,
         PREEMPTED: PREEMPTING, QUEUE_STOPPED: STOPPED_QUEUE, MISCONFIGURED: MISCONFIGURED, NO_QUOTA: NEVER_FITS,
         INACTIVE: MISCONFIGURED, NEVER_FITS: NEVER_FITS, UNKNOWN: PENDING,
         ADMISSION_CHECKS: PENDING}

# Kueue's preemption reasons in plain words (after "Preempted ... by <preemptor>, ").
HUMAN_PREEMPTION = {
    kueue.IN_CLUSTER_QUEUE: "to make room for higher-priority work in the same queue",
    kueue.IN_COHORT_RECLAMATION: "to give back borrowed quota to the project that deserves it",
    kueue.IN_COHORT_FAIR_SHARING: "to share the pool fairly between projects (fair sharing)",
    kueue.IN_COHORT_RECLAIM_WHILE_BORROWING: "to make room for higher-priority work of another project",
}


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
        return _KIND[self.reason]


# --- wording helpers -------------------------------------------------------------------------------------------


def _n(value: Decimal | int | None) -> str:
    if value is None:
        return "?"
    value = Decimal(value)
    return format(value.normalize(), "f") if value != value.to_integral() else str(int(value))


def _num(value: Decimal | int | None) -> int | float | None:
    """A number for the API: integral units as integers."""
    if value is None:
        return None
    value = Decimal(value)
    return int(value) if value == value.to_integral() else float(value)


def _ahead(position: int | None) -> str:
    if position is None:
        return ""
    if position == 0:
        return " You are next in line."
    return f" {position} workload{'s are' if position != 1 else ' is'} ahead of you."


def _gang(pods: int, per_pod: int, nodes: tuple[int, ...] | None, hosting: int | None) -> str:
    """' (4 pods of 2 each, admitted together; 2 of the pool's 3 nodes can host such a pod)', '' for one pod."""
    if pods <= 1:
        return ""
    where = ""
    if nodes is not None and hosting is not None:
        where = f"; {'none' if hosting == 0 else hosting} of the pool's {_plural(len(nodes), 'node')} can host " \
                "such a pod"
    return f" ({pods} pods of {per_pod} each, admitted together{where})"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _join(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return f"{', '.join(parts[:-1])} and {parts[-1]}"


def _shares(shares: Iterable[Share], *, others: str = "others") -> str:
    """'Vision 8, NLP 4, others 4': named projects first by size, the unnamed summed."""
    named = sorted((s for s in shares if s.project is not None and s.units > 0), key=lambda s: (-s.units, s.project))
    hidden = sum((s.units for s in shares if s.project is None), ZERO)
    parts = [f"{s.project} {_n(s.units)}" for s in named]
    if hidden > 0:
        parts.append(f"{others} {_n(hidden)}")
    return ", ".join(parts)


def _keepers(shares: tuple[Share, ...]) -> str:
    """Who keeps idle cards: 'Serving (4)', 'a project you cannot see (4)'."""
    named = [f"{s.project} ({_n(s.units)})" for s in shares if s.project is not None]
    hidden = [s for s in shares if s.project is None]
    if hidden:
        units = sum((s.units for s in hidden), ZERO)
        what = "a project you cannot see" if len(hidden) == 1 else f"{len(hidden)} projects you cannot see"
        named.append(f"{what} ({_n(units)})")
    return _join(named)


def _share_numbers(shares: Iterable[Share]) -> list[dict[str, Any]]:
    hidden = sum((s.units for s in shares if s.project is None), ZERO)
    named = sorted((s for s in shares if s.project is not None and s.units > 0), key=lambda s: (-s.units, s.project))
    rows: list[dict[str, Any]] = [{"project": s.project, "units": _num(s.units)} for s in named]
    if hidden > 0:
        rows.append({"project": None, "units": _num(hidden)})
    return rows


def _peer(peer: Peer | None) -> dict[str, Any] | None:
    if peer is None:
        return None
    return {"id": peer.id, "name": peer.name, "project": peer.project} if peer.visible else \
        {"id": None, "name": None, "project": None}


# --- explain ---------------------------------------------------------------------------------------------------


def waits(workload: Workload) -> bool:
    """Whether the workload has something to explain: it waits for admission, for its pods, or was deactivated."""
    if workload.status in (*QUEUED_STATUSES, Status.REJECTED, Status.PREEMPTED):
        return True
    if workload.status == Status.ADMITTED:
        return workload.pod_count > 1
    return workload.status == Status.STOPPED and workload.status_reason.startswith(kueue.DEACTIVATED)


def _condition(workload: Workload, kind: str) -> dict[str, Any]:
    for condition in workload.kueue_conditions or []:
        if condition.get("type") == kind:
            return condition
    return {}


def _pods_timed_out(workload: Workload) -> bool:
    evicted, requeued = _condition(workload, kueue.EVICTED), _condition(workload, kueue.REQUEUED)
    return (evicted.get("status") == kueue.TRUE and evicted.get("reason") == kueue.PODS_READY_TIMEOUT) or (
        requeued.get("reason") == kueue.PODS_READY_TIMEOUT)


def explain(workload: Workload, facts: WaitFacts) -> Explanation | None:
    """The cause of the wait, as a reason code, a sentence, a status line and numbers; None when it does not wait."""
    if not waits(workload):
        return None
    return _Explainer(workload, facts).run()


class _Explainer:
    """One explanation: the shared numbers first, then the first cause that applies."""

    def __init__(self, workload: Workload, facts: WaitFacts) -> None:
        self.w, self.f = workload, facts
        self.units = workload.gpu_units
        self.pool = workload.node_pool.name
        self.project = workload.project.name
        self.a = facts.assessment
        pods, per_pod, nodes = workload.pod_count, workload.gpus, facts.node_allocatable
        # A node hosts a pod when its allocatable units are at least the pod's: what each node holds now is not
        # mirrored, so this counts the nodes that could, not the ones free this moment.
        hosting = None if nodes is None else sum(1 for units in nodes if units >= per_pod)
        self.ask = f"{self.units} x {self.pool}{_gang(pods, per_pod, nodes, hosting)}"
        position = workload.queue_position_local if workload.status in QUEUED_STATUSES else None
        self.position = position
        idle = None
        if facts.pool_capacity is not None and facts.pool_used is not None:
            idle = max(ZERO, facts.pool_capacity - facts.pool_used)
        self.idle = idle
        self.numbers: dict[str, Any] = {
            "requested": self.units, "pool": workload.node_pool.slug, "pool_name": self.pool, "pods": pods,
            "gpus_per_pod": workload.gpus, "preemptible": workload.preemptible, "position": position,
            "ahead": position, "available": _num(self.a.available) if self.a else None,
            "more_needed": _num(self.a.more_needed) if self.a else None,
            "deserved": facts.deserved, "limit": facts.limit, "project_used": _num(facts.project_used),
            "queue_used": _num(facts.queue_used), "department": facts.department or None,
            "department_deserved": facts.department_deserved, "department_limit": facts.department_limit,
            "department_used": _num(facts.department_used), "pool_capacity": facts.pool_capacity,
            "pool_used": _num(facts.pool_used), "pool_idle": _num(idle), "kueue_reason": workload.status_reason,
            "pool_nodes": None if nodes is None else len(nodes), "nodes_hosting_a_pod": hosting,
        }

        self.note: PreemptionNote | None = None
        if workload.status in PREEMPTED_STATUSES:
            reason = facts.preemption_reason or (workload.status_reason if workload.status == Status.PREEMPTED else "")
            self.note = PreemptionNote(at=facts.preempted_at or workload.last_preempted_at, reason=reason,
                                       preemptor=facts.preemptor)
            self.numbers.update(preemptor=_peer(facts.preemptor), preemption_reason=reason,
                                preempted_at=self.note.at.isoformat() if self.note.at else None)

    def done(self, reason: str, sentence: str, headline: str, **numbers: Any) -> Explanation:
        return Explanation(reason, sentence, headline, {**self.numbers, **numbers}, preemption=self.note)

    def run(self) -> Explanation:
        w, f = self.w, self.f
        if w.status == Status.STOPPED:
            return self.done(INACTIVE, f"Kueue deactivated this workload ({w.status_message or w.status_reason}): "
                                       "it will not start again as it is. Submit it again to queue it anew.",
                             "Deactivated by Kueue")
        if w.status == Status.ADMITTED:
            return self.gang_starting()
        if w.status == Status.PREEMPTED:
            return self.preempted()
        if w.status_reason == kueue.UNSATISFIED_ADMISSION_CHECKS:
            return self.admission_checks()
        if not f.has_quota:
            return self.no_quota()
        never = self.never_fits()
        if never is not None:
            return never
        if w.status_reason == kueue.DEACTIVATED:
            return self.done(INACTIVE, f"Waiting for {self.ask}: Kueue deactivated it, so it will not be "
                                       "admitted until it is reactivated.", "Deactivated by Kueue")
        if (not f.queue_active and f.queue_reason in kueue.STOPPED_REASONS) or (
                f.queue_active and w.status_reason == kueue.SUSPENDED):  # held, and the mirror has not seen it yet
            return self.done(QUEUE_STOPPED, f"Waiting for {self.ask}: the {w.queue_name} queue is on hold by an "
                                            "admin; nothing new starts there until it is released. Your place is "
                                            "kept.", f"The {w.queue_name} queue is on hold")
        if w.status_reason == kueue.MISCONFIGURED or not f.queue_active:
            detail = w.status_message or f.queue_message or f.queue_reason
            return self.done(MISCONFIGURED, f"Waiting for {self.ask}: the {w.queue_name} queue is not usable right "
                                            f"now ({detail}). Ask an admin to check the queue; your place is kept.",
                             f"The {w.queue_name} queue is not usable")
        if w.status_reason == kueue.WAITING_FOR_PREEMPTED_WORKLOADS:
            return self.preempting()
        if _pods_timed_out(w):
            return self.done(GANG, f"Waiting for {self.ask}: not all {_plural(w.pod_count, 'pod')} were ready "
                                   "within Kueue's timeout, so it was evicted and is requeued after a back-off."
                             + _ahead(self.position), "Requeued: its pods were not all ready in time")
        return self.quota()

    # -- each cause -----------------------------------------------------------------------------------------------

    def gang_starting(self) -> Explanation:
        pods = self.w.pod_count
        return self.done(GANG, f"Admitted as a gang: all {pods} pods ({self.w.gpus} x {self.pool} each) start "
                               "together, and Kueue waits until every one of them is ready; if they are not ready in "
                               "time, Kueue evicts the gang and queues it again.",
                         f"Admitted: waiting for all {pods} pods to be ready")

    def admission_checks(self) -> Explanation:
        checks = [c for c in (self.w.admission or {}).get("checks") or [] if c.get("state") != kueue.CHECK_READY]
        capacity = any(c.get("message", "").startswith(kueue.WAITING_FOR_PROVISIONING) for c in checks)
        states = _join([f"{c.get('name')} is {c.get('state')}" + (f" ({c['message']})" if c.get("message") else "")
                        for c in checks]) or "not all are Ready yet"
        what = "capacity being brought up for it" if capacity else "its admission checks"
        return self.done(ADMISSION_CHECKS, f"Quota is reserved for {self.ask}; Kueue admits it once its admission "
                                           f"checks pass: {states}.",
                         f"Quota reserved: waiting for {what}", admission_checks=checks)

    def no_quota(self) -> Explanation:
        return self.done(NO_QUOTA, f"Waiting for {self.ask}: {self.project} has no quota on {self.pool}, so Kueue "
                                   f"has no queue for it there. Ask your department admin for quota on {self.pool}, "
                                   f"or submit it again on a pool {self.project} has quota on.",
                         f"No quota on {self.pool}", change="quota")

    def never_fits(self) -> Explanation | None:
        w, f, a, units = self.w, self.f, self.a, self.units
        kueue_says = w.status_reason in kueue.NEVER_ADMITTABLE or w.status == Status.REJECTED
        if not kueue_says and (a is None or a.ever_fits):
            return None
        change, what = "request", ""
        if f.limit is not None and units > f.limit:
            what, change = f"{self.project} may use at most {f.limit} there", "project_limit"
        elif not w.preemptible and f.deserved is not None and units > f.deserved:
            what, change = f"non-preemptible work must fit in {self.project}'s deserved {f.deserved}", "preemptible"
        elif f.department_limit is not None and units > f.department_limit:
            what, change = f"{f.department or 'the department'} may use at most {f.department_limit} there", \
                "department_limit"
        elif f.pool_capacity is not None and units > f.pool_capacity:
            what, change = f"the pool has {f.pool_capacity} in all", "request"
        elif a is not None and not a.ever_fits:
            what = f"at most {_n(max(ZERO, a.potential))} of them can ever be free to {self.project}"
            if f.keepers:
                what += f", since {_keepers(f.keepers)} {'does' if len(f.keepers) == 1 else 'do'} not lend"
            change = "not_lendable"
        elif w.status_message:
            what = w.status_message
        else:
            what = "no quota can ever hold it"
        return self.done(NEVER_FITS, f"This can never start as submitted: it asks for {units} x {self.pool} but "
                                     f"{what}. Ask for fewer GPUs or pods, or ask your admin for more quota.",
                         f"Can never start: {what}", change=change)

    def preempted(self) -> Explanation:
        assert self.note is not None  # set for every preempted workload
        return self.done(PREEMPTED, f"{self.note.sentence[:-1]}; it goes back into the queue for {self.ask} once "
                                    "its pods have stopped.", "its pods are stopping, then back into the queue")

    def preempting(self, *, reclaim: bool = False) -> Explanation:
        f = self.f
        seen = [v for v in f.victims if v.visible]
        hidden = len(f.victims) - len(seen)
        names = [f"{v.name} ({v.project})" for v in seen]
        if hidden:
            names.append(f"{hidden} in {'a project' if hidden == 1 else 'projects'} you cannot see")
        numbers = {"victims": [_peer(v) for v in seen], "hidden_victims": hidden}
        if reclaim:
            return self.done(PREEMPTING, f"Waiting for {self.ask}: {self.project}'s deserved quota is lent to others "
                                         f"right now ({_n(self.a.available if self.a else None)} free to it); Kueue "
                                         "takes it back by preempting the borrowed work." + _ahead(self.position),
                             f"Reclaiming {self.project}'s lent quota", **numbers)
        if not f.victims and kueue.OVERLAPPING_TARGETS in (self.w.status_message or ""):
            return self.done(PREEMPTING, f"Starting soon: Kueue is already preempting work for another workload, "
                                         f"and {self.ask} fits once that work has released its GPUs."
                             + _ahead(self.position), "Making room: waiting for preemptions already under way",
                             **numbers)
        victims = f": {_join(names)}" if names else ""
        count = f" ({len(f.victims)})" if f.victims else ""
        return self.done(PREEMPTING, f"Starting soon: Kueue is making room for {self.ask} and waits for the "
                                     f"workloads it preempted{count} to release their GPUs{victims}."
                         + _ahead(self.position),
                         f"Making room: {_plural(len(f.victims), 'workload')} preempted" if f.victims
                         else "Making room: preempting other work", **numbers)

    def quota(self) -> Explanation:
        """Quota and capacity, lowest level first; for preemptible work (non-preemptible: `non_preemptible`)."""
        f, a, w = self.f, self.a, self.w
        if a is None:
            return self.done(UNKNOWN, f"Waiting for {self.ask}: the portal has no numbers for its queue yet."
                             + _ahead(self.position), "Waiting for Kueue")
        if not w.preemptible:
            return self.non_preemptible(a)
        more = _n(a.more_needed)
        needed = f"{more} more {self.pool} needed"
        ahead = _ahead(self.position)
        used, units = f.project_used or ZERO, self.units
        if f.limit is not None and used + units > f.limit:
            idle = ""
            if self.idle:
                idle = f"; {_n(self.idle)} of the pool's {f.pool_capacity} are idle, but the limit caps " \
                       f"{self.project}"
            return self.done(PROJECT_LIMIT, f"Waiting for {self.ask}: {self.project} is at its limit there, "
                                            f"{_n(used)} of {f.limit} in use, so {more} more are needed{idle}. It "
                                            f"starts when {self.project}'s own work frees them, or when an admin "
                                            "raises the limit." + ahead,
                             f"{needed}: {self.project} is at its limit ({_n(used)} of {f.limit})")
        dept_used = f.department_used or ZERO
        if f.department_limit is not None and dept_used + units > f.department_limit:
            department = f.department or "The department"
            holders = _shares(f.department_holders)
            return self.done(DEPARTMENT_LIMIT, f"Waiting for {self.ask}: {department} is at its limit there, "
                                               f"{_n(dept_used)} of {f.department_limit} in use"
                                               f"{f' ({holders})' if holders else ''}, so {more} more are needed; "
                                               f"{self.project} itself uses {_n(used)} of its limit "
                                               f"{'(unlimited)' if f.limit is None else f.limit}." + ahead,
                             f"{needed}: {department} is at its limit ({_n(dept_used)} of {f.department_limit})",
                             holders=_share_numbers(f.department_holders))
        pool_used = f.pool_used or ZERO
        if f.pool_capacity is not None and pool_used + units > f.pool_capacity:
            holders = _shares(f.holders)
            return self.done(POOL_FULL, f"Waiting for {self.ask}: {_n(pool_used)} of the pool's {f.pool_capacity} "
                                        f"are in use{f' ({holders})' if holders else ''}, so {more} more are needed. "
                                        f"{self.project} uses {_n(used)} of its deserved {f.deserved} (limit "
                                        f"{'unlimited' if f.limit is None else f.limit}); it starts when others "
                                        "finish or give back what they borrowed." + ahead,
                             f"{needed}: the pool is full ({_n(pool_used)} of {f.pool_capacity} in use)",
                             holders=_share_numbers(f.holders))
        if not a.fits:
            return self.not_lendable(a)
        return self.room(a)

    def non_preemptible(self, a: Assessment) -> Explanation:
        """Non-preemptible work runs in the guaranteed queue: inside the deserved quota, never borrowing; when that
        quota is lent out, Kueue takes it back by preemption."""
        f = self.f
        if not a.fits and a.short_at == "queue":
            more = _n(a.more_needed)
            return self.done(PROJECT_DESERVED, f"Waiting for {self.ask}: non-preemptible work runs only inside "
                                               f"{self.project}'s deserved quota, and your project's guaranteed queue "
                                               f"has {_n(f.queue_used)} of {f.deserved} in use, so {more} more are "
                                               "needed. Mark it preemptible to use idle capacity beyond it."
                             + _ahead(self.position),
                             f"{more} more {self.pool} needed: non-preemptible work holds {_n(f.queue_used)} of "
                             f"{self.project}'s deserved {f.deserved}")
        if not a.fits:
            return self.preempting(reclaim=True)
        return self.room(a)

    def not_lendable(self, a: Assessment) -> Explanation:
        f = self.f
        level = a.short_at or "pool"
        kept = f.held_back.get(level, ())
        total = sum((s.units for s in kept), ZERO)
        if level == "project":
            where = f"{self.project} keeps its {_n(total)} idle deserved for its non-preemptible work (it does not " \
                    "lend, not even to its own preemptible work)"
            short = f"{_n(total)} idle kept by {self.project} for its non-preemptible work"
        else:
            keepers = _keepers(kept) if kept else "projects that do not lend"
            verb = "keeps" if len(kept) == 1 else "keep"
            lend = "does" if len(kept) == 1 else "do"
            where = f"{_n(self.idle)} of the pool's {f.pool_capacity} are idle, but {keepers} {verb} {_n(total)} of " \
                    f"them for non-preemptible work and {lend} not lend them"
            short = f"{_n(total)} idle held back by {keepers}"
        return self.done(NOT_LENDABLE, f"Waiting for {self.ask}: {where}, so only {_n(max(ZERO, a.available))} are "
                                       f"free to {self.project} and {_n(a.more_needed)} more are needed."
                         + _ahead(self.position), f"{_n(a.more_needed)} more {self.pool} needed: {short}",
                         held_back=_num(total), held_back_by=_share_numbers(kept), held_back_at=level)

    def room(self, a: Assessment) -> Explanation:
        free, queue = _n(a.available), self.w.queue_name
        if self.position:
            goes = "goes" if self.position == 1 else "go"
            return self.done(BEHIND, f"Waiting for {self.ask}: there is room for it ({free} free to {self.project}), "
                                     f"but {_plural(self.position, 'earlier or higher-priority workload')} ahead of "
                                     f"you in {queue} {goes} first.",
                             f"Behind {_plural(self.position, 'workload')} in {queue}")
        return self.done(ADMITTING, f"Waiting for {self.ask}: there is room for it ({free} free to {self.project}); "
                                    "Kueue admits it at its next pass." + _ahead(self.position),
                         "Room for it: starting soon")


# --- gathering the facts ---------------------------------------------------------------------------------------


def _quota_rows(pool_ids: set[int], viewer: Any) -> list[Quota]:
    """Every department and project quota on the pools, projects (with department) joined, and whether the viewer
    may see each project: one query."""
    rows = Quota.objects.filter(node_pool_id__in=pool_ids).select_related("project__department", "department")
    if viewer is not None and getattr(viewer, "is_authenticated", False):
        seen = access.restrict(Project.objects.filter(pk=OuterRef("project_id")), viewer, Action.VIEW)
        rows = rows.annotate(visible=Exists(seen))
    return list(rows)


@dataclass
class _Pool:
    """One pool's quotas, usage and tree, with the names the viewer may read."""

    tree: PoolTree
    used: Decimal
    names: dict[int, str]  # project id -> name, for the projects the viewer may see
    department_quota: dict[int, Quota]
    project_quota: dict[int, Quota]
    queue_usage: dict[tuple[int, bool], Decimal]

    def share(self, project_id: int, units: Decimal, own: Workload) -> Share:
        if project_id == own.project_id:
            return Share(own.project.name, units)
        return Share(self.names.get(project_id), units)


def _pools(waiting: list[Workload], quotas: list[Quota], states: list[dict[str, Any]]) -> dict[int, _Pool]:
    pools: dict[int, _Pool] = {}
    for workload in waiting:
        pool = workload.node_pool
        if pool.pk in pools:
            continue
        mine = [q for q in quotas if q.node_pool_id == pool.pk]
        usage: dict[tuple[int, bool], Decimal] = defaultdict(lambda: ZERO)
        used = ZERO
        for state in states:
            if state["node_pool_id"] == pool.pk:
                used += state["used"]
                if state["project_id"] is not None:
                    usage[(state["project_id"], state["guaranteed"])] += state["used"]
        project_quota = {q.project.pk: q for q in mine if q.project is not None}
        department_quota = {q.department.pk: q for q in mine if q.department is not None}
        tree = PoolTree.build(
            capacity=pool.capacity,
            departments=[DepartmentQuota(d, q.deserved, q.limit) for d, q in department_quota.items()],
            projects=[ProjectQuota(p, q.project.department_id, q.deserved, q.limit, lends=not q.project.does_not_lend,
                                   guaranteed_used=usage[(p, True)], elastic_used=usage[(p, False)])
                      for p, q in project_quota.items() if q.project is not None])
        names = {p: q.project.name for p, q in project_quota.items()
                 if q.project is not None and getattr(q, "visible", False)}
        pools[pool.pk] = _Pool(tree=tree, used=used, names=names, department_quota=department_quota,
                               project_quota=project_quota, queue_usage=usage)
    return pools


# A preempted workload's preemptor, Kueue's reason and when; a preempting one's victims.
_PeerFacts = tuple[Peer | None, str, datetime | None, tuple[Peer, ...]]


def _facts(workload: Workload, pool: _Pool, queue: dict[str, Any] | None, local: LocalQueueState | None,
           peers: _PeerFacts, node_allocatable: tuple[int, ...] | None = None) -> WaitFacts:
    tree, own = pool.tree, workload.project_id
    quota = pool.project_quota.get(own)
    mine = tree.projects.get(own)
    department_id = mine.department_id if mine else None
    dept = pool.department_quota.get(department_id) if department_id is not None else None
    # Idle deserved units that projects which do not lend keep out of each level (its own project's too: they are
    # kept for its non-preemptible work, not lent to its preemptible work).
    keeping = [p for p in tree.projects.values() if p.held_back > 0]
    held_back: dict[str, tuple[Share, ...]] = {
        "project": tuple(pool.share(p.project_id, p.held_back, workload) for p in keeping if p.project_id == own),
        "department": tuple(pool.share(p.project_id, p.held_back, workload) for p in keeping
                            if p.department_id == department_id),
        "pool": tuple(pool.share(p.project_id, p.held_back, workload) for p in keeping),
    }
    inactive = local is not None or (queue is not None and not queue["active"])
    # A stopped ClusterQueue makes its LocalQueues inactive too ("ClusterQueueIsInactive"): its own reason says why.
    source: Any = local if local is not None and (queue is None or queue["active"]) else None
    preemptor, preemption_reason, preempted_at, victims = peers
    return WaitFacts(
        has_quota=quota is not None and mine is not None,
        deserved=quota.deserved if quota else None, limit=quota.limit if quota else None,
        project_used=mine.used if mine else None,
        queue_used=pool.queue_usage[(own, not workload.preemptible)],
        department=quota.project.department.name if quota is not None and quota.project is not None else "",
        department_deserved=dept.deserved if dept else None, department_limit=dept.limit if dept else None,
        department_used=tree.department_used(department_id) if department_id is not None else None,
        pool_capacity=workload.node_pool.capacity, pool_used=pool.used,
        assessment=tree.assess(project_id=own, guaranteed=not workload.preemptible, units=workload.gpu_units),
        holders=tuple(pool.share(p.project_id, p.used, workload) for p in tree.projects.values()),
        department_holders=tuple(pool.share(p.project_id, p.used, workload) for p in tree.projects.values()
                                 if p.department_id == department_id),
        held_back=held_back,
        keepers=tuple(pool.share(p.project_id, Decimal(p.deserved), workload) for p in tree.projects.values()
                      if not p.lends and p.deserved > 0),
        queue_active=not inactive,
        queue_reason=source.active_reason if source else (queue["active_reason"] if queue else ""),
        queue_message=source.active_message if source else (queue["active_message"] if queue else ""),
        preemptor=preemptor, preemption_reason=preemption_reason, preempted_at=preempted_at, victims=victims,
        node_allocatable=node_allocatable,
    )


def explain_workloads(workloads: list[Workload], *, viewer: Any = None) -> dict[int, Explanation | None]:
    """Explanations for many workloads as `viewer` may read them (None: names no other project): three queries
    whatever their number (the pools' quotas with the viewer's visibility, the pools' ClusterQueues, the projects'
    stopped LocalQueues), one or two more when any of them was preempted or is preempting others, one more when a
    gang waits for admission (its pool's nodes), and one for the viewer's grants unless the request has asked the
    access module already.

    The rows need `project` and `node_pool` joined.
    """
    waiting = [w for w in workloads if waits(w)]
    result: dict[int, Explanation | None] = {w.pk: None for w in workloads}
    if not waiting:
        return result
    pool_ids = {w.node_pool_id for w in waiting}
    quotas = _quota_rows(pool_ids, viewer)
    states: list[dict[str, Any]] = [dict(row) for row in ClusterQueueState.objects.filter(
        node_pool_id__in=pool_ids).values("name", "project_id", "node_pool_id", "guaranteed", "used", "active",
                                          "active_reason", "active_message")]
    stopped_local = {(q.namespace, q.name): q for q in LocalQueueState.objects.filter(
        project_id__in={w.project_id for w in waiting}, active=False)}
    pools = _pools(waiting, quotas, states)
    peers = _peers(waiting, viewer)
    nodes = _nodes(waiting)
    queues = {state["name"]: state for state in states}
    for workload in waiting:
        facts = _facts(workload, pools[workload.node_pool_id], queues.get(workload.cluster_queue_name),
                       stopped_local.get((workload.project.namespace, workload.queue_name)),
                       peers.get(workload.pk, (None, "", None, ())), nodes.get(workload.node_pool_id))
        result[workload.pk] = explain(workload, facts)
    return result


def _nodes(waiting: list[Workload]) -> dict[int, tuple[int, ...]]:
    """Pool id -> allocatable units of its ready, schedulable nodes, for the pools of gangs waiting for admission:
    one query, none without such a gang. A pool without mirrored nodes is left out (unknown)."""
    pool_ids = {w.node_pool_id for w in waiting if w.pod_count > 1 and w.status != Status.ADMITTED}
    if not pool_ids:
        return {}
    found: dict[int, list[int]] = {}
    for pool_id, units, ready, unschedulable in NodeState.objects.filter(node_pool_id__in=pool_ids).values_list(
            "node_pool_id", "allocatable_gpus", "ready", "unschedulable"):
        found.setdefault(pool_id, [])
        if ready and not unschedulable:
            found[pool_id].append(units)
    return {pool_id: tuple(units) for pool_id, units in found.items()}


def _peers(waiting: list[Workload], viewer: Any) -> dict[int, _PeerFacts]:
    """For preempted and requeued workloads their last preemption (preemptor, reason, when), for preempting ones their
    victims: one query for the events, one for the preemptors, none if neither.

    Whether the viewer may see a peer is the access module's answer (a subquery in the same queries), as on every
    other page."""
    preempted = {w.pk: w for w in waiting if w.status in PREEMPTED_STATUSES}
    preempting = {w.k8s_uid: w for w in waiting
                  if w.status_reason == kueue.WAITING_FOR_PREEMPTED_WORKLOADS and w.k8s_uid}
    if not preempted and not preempting:
        return {}
    events = list(_seen(WorkloadEvent.objects.filter(to_status=Status.PREEMPTED).filter(
        Q(workload_id__in=list(preempted)) | Q(details__preemptor_job_uid__in=list(preempting))), viewer,
        "workload_id").select_related("workload__project").order_by("at", "id"))
    uids = {e.details.get("preemptor_job_uid") for e in events if e.workload_id in preempted} - {None, ""}
    preemptors = {w.k8s_uid: w for w in _seen(Workload.objects.filter(k8s_uid__in=uids), viewer, "pk")
                  .select_related("project")} if uids else {}

    def peer(other: Workload, visible: bool) -> Peer:
        return Peer(other.pk, other.name, other.project.name) if visible else Peer()

    found: dict[int, _PeerFacts] = {}
    victims: dict[int, dict[int, Peer]] = defaultdict(dict)
    for event in events:
        if event.workload_id in preempted:
            other = preemptors.get(event.details.get("preemptor_job_uid", ""))
            found[event.workload_id] = (peer(other, other.visible) if other else None, event.reason,
                                        event.cluster_at or event.at, ())
        preemptor = preempting.get(event.details.get("preemptor_job_uid", ""))
        if preemptor is not None and event.at >= (preemptor.last_preempted_at or preemptor.created_at):
            victims[preemptor.pk][event.workload_id] = peer(event.workload, event.visible)
    for workload_id, seen in victims.items():
        found[workload_id] = (None, "", None, tuple(seen.values()))
    return found


def _seen(queryset: Any, viewer: Any, workload_path: str) -> Any:
    """The rows annotated with `visible`: whether the viewer may see the workload at `workload_path`."""
    if viewer is None or not getattr(viewer, "is_authenticated", False):
        return queryset.annotate(visible=Value(False))
    may_see = access.restrict(Workload.objects.filter(pk=OuterRef(workload_path)), viewer, Action.VIEW)
    return queryset.annotate(visible=Exists(may_see))


def kueue_more_needed(message: str) -> Decimal | None:
    """The "N more needed" of Kueue's message, if it says one (the largest, when several resources are short)."""
    found = [Decimal(m) for m in kueue.MORE_NEEDED.findall(message or "")]
    return max(found) if found else None


# --- the submit form's forecast: the same model on a workload not submitted yet ---------------------------------


def explain_probe(probe: Workload, *, viewer: Any) -> Explanation | None:
    """What the explanation model says of an unsaved workload as if it were queued now, worded for `viewer`.

    The submit form's pool panel runs this on what is being filled in: the same facts as for waiting work (the
    pool's quotas and the mirror of its ClusterQueues; no cluster call), with its place in the queue the queued
    workloads of its ClusterQueue at its priority or higher. Four queries, five for a gang (its pool's nodes). The
    probe needs `project`, `node_pool`, its sizes and `preemptible`; `priority_class` when known.
    """
    probe.status, probe.status_reason, probe.status_message = Status.QUEUED, "", ""
    pool_ids = {probe.node_pool_id}
    quotas = _quota_rows(pool_ids, viewer)
    states: list[dict[str, Any]] = [dict(row) for row in ClusterQueueState.objects.filter(
        node_pool_id__in=pool_ids).values("name", "project_id", "node_pool_id", "guaranteed", "used", "active",
                                          "active_reason", "active_message")]
    local = LocalQueueState.objects.filter(namespace=probe.project.namespace, name=probe.queue_name,
                                           active=False).first()
    ahead = Workload.objects.filter(project_id=probe.project_id, node_pool_id=probe.node_pool_id,
                                    preemptible=probe.preemptible, status=Status.QUEUED)
    if probe.priority_class_id is not None:
        ahead = ahead.filter(priority_class__value__gte=probe.priority_class.value)
    probe.queue_position_local = ahead.count() or None
    pool = _pools([probe], quotas, states)[probe.node_pool_id]
    queue = next((state for state in states if state["name"] == probe.cluster_queue_name), None)
    return explain(probe, _facts(probe, pool, queue, local, (None, "", None, ()),
                                 _nodes([probe]).get(probe.node_pool_id)))


@dataclass(frozen=True)
class Forecast:
    """Whether a workload would start now or wait, in one line, and the explanation it comes from."""

    starts_now: bool
    sentence: str
    explanation: Explanation


def forecast(probe: Workload, explanation: Explanation) -> Forecast:
    """The submit form's one line: "Would start now (4 of 8 deserved H100 free)" or "Would wait: Vision is at its
    limit (8 of 8 H100)", from the numbers of the explanation `explain_probe` gave."""
    n, reason = explanation.numbers, explanation.reason
    pool, project = probe.node_pool.name, probe.project.name
    if reason == ADMITTING:
        deserved = n["deserved"] or 0
        used = n["queue_used"] if not probe.preemptible else n["project_used"]
        free_deserved = max(0, deserved - (used or 0))
        if free_deserved >= n["requested"]:
            why = f"{_n(free_deserved)} of {deserved} deserved {pool} free"
        else:
            why = f"{_n(n['available'])} {pool} free to {project}, beyond its deserved {deserved}: preemptible"
        return Forecast(True, f"Would start now ({why}).", explanation)
    more = n.get("more_needed")
    needed = f"; {_n(more)} more {pool} needed" if more else ""
    causes = {
        PROJECT_LIMIT: lambda: f"{project} is at its limit ({_n(n['project_used'])} of {n['limit']} {pool}){needed}",
        DEPARTMENT_LIMIT: lambda: f"{n['department'] or 'the department'} is at its limit "
                                  f"({_n(n['department_used'])} of {n['department_limit']} {pool}){needed}",
        POOL_FULL: lambda: f"the pool is full ({_n(n['pool_used'])} of {n['pool_capacity']} {pool} in use){needed}",
        PROJECT_DESERVED: lambda: f"non-preemptible work holds {_n(n['queue_used'])} of {project}'s deserved "
                                  f"{n['deserved']} {pool}{needed}",
        NOT_LENDABLE: lambda: f"{explanation.headline.partition(': ')[2]}{needed}",
        BEHIND: lambda: f"there is room, but {_plural(n['ahead'], 'earlier or higher-priority workload')} in "
                        f"{probe.queue_name} {'goes' if n['ahead'] == 1 else 'go'} first",
    }
    if reason == NEVER_FITS:
        return Forecast(False, f"Would never start: {explanation.headline.removeprefix('Can never start: ')}.",
                        explanation)
    cause = causes[reason]() if reason in causes else explanation.headline[:1].lower() + explanation.headline[1:]
    return Forecast(False, f"Would wait: {cause}.", explanation)
