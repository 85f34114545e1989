"""`explain`: the first cause of a workload's wait that applies, lowest level first, as a reason code, a sentence,
a status line and numbers. Pure: the facts are gathered elsewhere."""

from __future__ import annotations

from typing import Any

from apps.core import kueue_conditions as kueue
from apps.workloads.capacity import ZERO, Assessment
from apps.workloads.models import PREEMPTED_STATUSES, QUEUED_STATUSES, Status, Workload

from .facts import Explanation, PreemptionNote, WaitFacts
from .kai import kai_gang_starting, kai_wait
from .reasons import (
    ADMISSION_CHECKS,
    ADMITTING,
    BEHIND,
    BUDGET_HOLD,
    DEPARTMENT_LIMIT,
    GANG,
    INACTIVE,
    MISCONFIGURED,
    NEVER_FITS,
    NO_QUOTA,
    NOT_LENDABLE,
    POOL_FULL,
    PREEMPTED,
    PREEMPTING,
    PROJECT_DESERVED,
    PROJECT_LIMIT,
    QUEUE_STOPPED,
    UNKNOWN,
)
from .wording import (
    _ahead,
    _gang,
    _join,
    _keepers,
    _limit,
    _n,
    _num,
    _over_a_cap,
    _peer,
    _plural,
    _share_numbers,
    _shares,
)


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
        (per_pod, pods), nodes = workload.gang_shape, facts.node_allocatable
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
            return kai_gang_starting(self) if w.node_pool.kai else self.gang_starting()
        if w.status == Status.PREEMPTED:
            return self.preempted()
        if w.node_pool.kai:  # KAI Scheduler's pools: its own conditions say why (explain/kai.py)
            return kai_wait(self)
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
        if f.budget_hold is not None:
            hold = f.budget_hold
            return self.done(BUDGET_HOLD, f"Waiting for {self.ask}: held: {hold.scope} has spent its {hold.amount} "
                                          f"budget for {hold.period}, so new preemptible work there waits until the "
                                          "period rolls over or the budget is raised. Your place is kept.",
                             f"Held: {hold.scope} has spent its budget for {hold.period}",
                             budget_scope=hold.scope, budget=hold.amount, budget_period=hold.period)
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
        per_pod, pods = self.w.gang_shape
        return self.done(GANG, f"Admitted as a gang: all {pods} pods ({per_pod} x {self.pool} each) start "
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
        if cap := _over_a_cap(f, amount=units, preemptible=w.preemptible, project=self.project):
            what, change = cap
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
            said, short = _limit(self.project, used, f.limit, units)
            return self.done(PROJECT_LIMIT, f"Waiting for {self.ask}: {said}, so {more} more are needed{idle}. It "
                                            f"starts when {self.project}'s own work frees them, or when an admin "
                                            "raises the limit." + ahead, f"{needed}: {short}")
        dept_used = f.department_used or ZERO
        if f.department_limit is not None and dept_used + units > f.department_limit:
            department = f.department or "The department"
            holders = _shares(f.department_holders)
            said, short = _limit(department, dept_used, f.department_limit, units,
                                 holders=f" ({holders})" if holders else "")
            return self.done(DEPARTMENT_LIMIT, f"Waiting for {self.ask}: {said}, so {more} more are needed; "
                                               f"{self.project} itself uses {_n(used)} of its limit "
                                               f"{'(unlimited)' if f.limit is None else f.limit}." + ahead,
                             f"{needed}: {short}", holders=_share_numbers(f.department_holders))
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
