"""The scheduling cycle (Kueue's scheduler.schedule) and the per-ClusterQueue queues with their inadmissible sets.

One cycle pops one head per active ClusterQueue, nominates (flavor assignment, preemption targets), orders the
entries (classic: non-borrowing first, priority, FIFO; Fair Sharing: the DRS tournament), then admits, preempts or
requeues each. `Scheduler.run` repeats cycles on one snapshot until nothing changes, as the emulator needs.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from kubesim.kernel.quantity import to_amount
from kubesim.kueue import constants as C
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.features import PRIORITIZE_PREEMPTOR_WORKLOADS
from kubesim.kueue.scheduler.flavors import FIT, NO_FIT, PREEMPT, Assignment, FlavorAssigner
from kubesim.kueue.scheduler.model import (
    ClusterQueueNode,
    Snapshot,
    WorkloadInfo,
    condition_true,
    entry_penalty,
    find_condition,
    local_queue_usage,
    order_key,
)
from kubesim.kueue.scheduler.preemption import Preemptor, Target, cq_path
from kubesim.kueue.scheduler.quota import (
    DRS,
    CohortNode,
    FlavorResource,
    add_usage,
    available,
    compare_drs,
    dominant_resource_share,
    remove_usage,
)

# requeue reasons
GENERIC = ""
FAILED_AFTER_NOMINATION = "FailedAfterNomination"
NAMESPACE_MISMATCH = "NamespaceMismatch"
NO_FIT_REASON = "NoFit"
PENDING_PREEMPTION = "PendingPreemption"
PREEMPTION_NO_CANDIDATES = "PreemptionNoCandidates"
WAITING_FOR_PODS_READY = "WaitingForPodsReady"  # kubesim's name: the head stays in the heap while admission waits
_IMMEDIATE = {FAILED_AFTER_NOMINATION, PENDING_PREEMPTION, "PreemptionFailed", WAITING_FOR_PODS_READY}
PODS_READY_MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"
DEFERRED_FIT_MESSAGE = (
    "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete"
)


@dataclass
class Admission:
    """A quota reservation the cycle made: what status.admission should say."""

    workload: WorkloadInfo
    cluster_queue: str
    podset_assignments: list[dict]
    usage: dict[FlavorResource, int]


@dataclass
class Preemption:
    """An eviction the cycle issued: the victim keeps its quota until its Job has stopped."""

    victim: WorkloadInfo
    preemptor: WorkloadInfo
    reason: str  # InClusterQueue, InCohortReclamation, ...
    message: str
    preemptor_cq: str
    victim_cq: str


@dataclass
class Pending:
    """A workload that was not admitted this cycle, with the QuotaReserved=False reason and message to write.

    evaluated: the scheduler tried it (Kueue then also records its requests and an event); False for workloads
    set aside with an equivalent one that failed (SchedulingEquivalenceHashing).
    """

    workload: WorkloadInfo
    reason: str
    message: str
    evaluated: bool = True


@dataclass
class CycleResult:
    """What one scheduling cycle decided."""

    admitted: list[Admission] = field(default_factory=list)
    preempted: list[Preemption] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    moved_aside: int = 0  # heads moved to the inadmissible set
    resumed: int = 0  # heads back in the heap to resume their flavor search next cycle
    # (ClusterQueue, outcome) per assignment searched again because its targets overlapped an earlier entry's:
    # deferred_fit, new_targets or skipped (Kueue's preemption_target_recomputations_total results)
    recomputations: list[tuple[str, str]] = field(default_factory=list)

    @property
    def progressed(self) -> bool:
        return bool(self.admitted or self.preempted or self.moved_aside or self.resumed)


@dataclass
class _Entry:
    wl: WorkloadInfo
    cq: ClusterQueueNode | None
    assignment: Assignment = field(default_factory=Assignment)
    targets: list[Target] = field(default_factory=list)
    status: str = ""  # "", skipped, assumed, waiting (for PodsReady), deferred (behind a waiting entry)
    message: str = ""
    reason: str = ""
    requeue: str = GENERIC
    # its ClusterQueue's sticky preemptor, put first under PrioritizePreemptorWorkloads (alpha, off in v0.20)
    preemptor: bool = False

    @property
    def queue(self) -> ClusterQueueNode:
        """The entry's ClusterQueue: every nominated entry has one (only rejected heads may lack it)."""
        if self.cq is None:
            raise RuntimeError(f"{self.wl.key} was nominated without a ClusterQueue")
        return self.cq


def _quota_signature(cq: ClusterQueueNode) -> tuple:
    return tuple(cq.resource_groups), tuple(sorted(cq.quotas.items()))


def _tree_state(cq: ClusterQueueNode) -> tuple | None:
    """What Kueue's cohort tree updates follow, for a ClusterQueue in a cohort (None outside any): every Cohort of
    its tree (existence, parent, quotas, weight), every ClusterQueue of it (its spec as the snapshot holds it, and
    whether it is active) and the workloads reserving quota anywhere in it. Kueue advances the allocatable
    generation of each ClusterQueue of a tree when a Cohort of it is created, updated or deleted, when a ClusterQueue
    joins, leaves or is updated (a ClusterQueue's update event reconciles its ancestor Cohorts, which updates the
    tree from its root; its status changes after every admission or eviction in it)."""
    if cq.parent is None:
        return None
    cohorts, queues, reserving = [], [], set()
    stack = [cq.parent.root()]
    while stack:
        c = stack.pop()
        parent = c.parent.name if c.parent is not None else ""
        cohorts.append((c.name, c.exists, parent, tuple(sorted(c.quotas.items())), c.weight))
        stack.extend(c.child_cohorts)
        for q in c.child_cqs:
            selector = json.dumps(q.namespace_selector, sort_keys=True)
            spec = (
                q.cohort_name,
                _quota_signature(q),
                q.weight,
                q.preemption,
                q.fungibility,
                q.queueing_strategy,
                selector,
                q.stop_policy,
                q.admission_checks,
                q.admission_fair_sharing,
                q.inactive_reason,
            )
            queues.append((q.name, spec))
            reserving.update(q.workloads)
    return tuple(sorted(cohorts)), tuple(sorted(queues)), frozenset(reserving)


@dataclass
class _ScanProgress:
    """Where a cycle's flavor search stopped for a workload it did not admit (Kueue's LastAssignment, kept with
    FlavorFungibilityPreserveScanProgress, beta and on since 0.19): flavorFungibility made a resource group's search
    stop before its last flavor, so the next attempt starts after that flavor instead of from the first."""

    tried: list[dict[str, int]]  # per pod set, per resource: the flavor index the search stopped at
    cycle: int
    cluster_queue: str
    shape: str
    quotas: tuple  # the ClusterQueue's resource groups and quotas then
    reserving: frozenset[str]  # the workloads reserving quota in it then
    tree: tuple | None = None  # its cohort tree then (`_tree_state`)

    @classmethod
    def record(cls, wl: WorkloadInfo, cq: ClusterQueueNode, tried: list[dict[str, int]], cycle: int) -> _ScanProgress:
        return cls(
            tried=tried,
            cycle=cycle,
            cluster_queue=cq.name,
            shape=wl.shape,
            quotas=_quota_signature(cq),
            reserving=frozenset(cq.workloads),
            tree=_tree_state(cq),
        )

    def outdated(self, wl: WorkloadInfo, cq: ClusterQueueNode, cycle: int) -> bool:
        """Kueue drops the progress when the workload's shape changed, or, unless it was recorded in the previous
        cycle, when the ClusterQueue's allocatable generation advanced (its quotas changed, a workload left it, or
        its cohort tree changed)."""
        if self.shape != wl.shape or self.cluster_queue != cq.name:
            return True
        if cycle - self.cycle <= 1:
            return False
        if self.quotas != _quota_signature(cq) or not self.reserving.issubset(cq.workloads):
            return True
        return self.tree != _tree_state(cq)


class Queues:
    """Per-ClusterQueue queue state that outlives a snapshot: the inadmissible sets, sticky preemptors and the flavor
    search progress of workloads not admitted."""

    def __init__(self) -> None:
        self.inadmissible: dict[str, set[str]] = {}
        self.sticky: dict[str, str] = {}
        self.progress: dict[str, _ScanProgress] = {}
        self.cycles = 0  # scheduling cycles run (Kueue's schedulingCycle)

    def flush(self, cluster_queues: set[str] | None = None) -> None:
        """Move inadmissible workloads back to the heap (a cluster event may have made room)."""
        if cluster_queues is None:
            self.inadmissible.clear()
        else:
            for name in cluster_queues:
                self.inadmissible.pop(name, None)

    def forget(self, key: str) -> None:
        for s in self.inadmissible.values():
            s.discard(key)
        self.progress.pop(key, None)

    def ordered(self, snapshot: Snapshot, cq: str) -> list[WorkloadInfo]:
        """All pending workloads of cq in Kueue's order (sticky preemptor first); used for visibility too."""
        return self._in_order(snapshot, cq, snapshot.pending.get(cq, []))

    def _in_order(self, snapshot: Snapshot, cq: str, items: list[WorkloadInfo]) -> list[WorkloadInfo]:
        """Sticky preemptor first; with Admission Fair Sharing the LocalQueue's usage (lower first) comes before
        priority and queue-order time (Kueue's queueOrderingFunc). The pending lists are kept in order_key order."""
        sticky = self.sticky.get(cq)
        node = snapshot.cluster_queues.get(cq)
        if node is not None and node.admission_fair_sharing:
            usage = snapshot.lq_usage
            return sorted(
                items, key=lambda w: (w.key != sticky, usage.get((w.namespace, w.queue_name), 0.0), *order_key(w))
            )
        if sticky:
            return sorted(items, key=lambda w: (w.key != sticky, *order_key(w)))
        return list(items)

    def heads(self, snapshot: Snapshot, consumed: set[str]) -> list[WorkloadInfo]:
        """One head per active ClusterQueue: the sticky preemptor, else the first queued workload not set aside."""
        heads = []
        for name in sorted(snapshot.pending):
            cq = snapshot.cluster_queues.get(name)
            if cq is None or not cq.schedulable:
                continue
            aside = self.inadmissible.get(name, set())
            candidates = snapshot.pending[name]
            if self.sticky.get(name) or cq.admission_fair_sharing:
                candidates = self._in_order(snapshot, name, candidates)
            for wl in candidates:
                if wl.key not in consumed and wl.key not in aside:
                    heads.append(wl)
                    break
        return heads

    def requeue(
        self, cq: ClusterQueueNode | None, wl: WorkloadInfo, reason: str, pending_flavors: bool = False
    ) -> bool:
        """Requeue a head that was not admitted; True when it was moved to the inadmissible set. A head whose flavor
        search has flavors left to try (pending_flavors) goes back to the heap, as Kueue requeues it."""
        name = wl.cluster_queue
        strict = cq is not None and cq.queueing_strategy == C.STRICT_FIFO
        immediate = reason != NAMESPACE_MISMATCH if strict else reason in _IMMEDIATE or pending_flavors
        if reason == PENDING_PREEMPTION and not strict:
            self.sticky[name] = wl.key
        elif self.sticky.get(name) == wl.key:
            del self.sticky[name]
        if immediate:
            self.inadmissible.get(name, set()).discard(wl.key)
            return False
        self.inadmissible.setdefault(name, set()).add(wl.key)
        return True

    def set_aside_equivalent(self, snapshot: Snapshot, wl: WorkloadInfo, consumed: set[str]) -> list[WorkloadInfo]:
        """SchedulingEquivalenceHashing (beta, on since Kueue 0.18): in a BestEffortFIFO queue, a head that did not
        fit takes every queued workload of the same scheduling shape to the inadmissible set with it."""
        aside = self.inadmissible.setdefault(wl.cluster_queue, set())
        moved = []
        for other in snapshot.pending.get(wl.cluster_queue, []):
            if other.shape == wl.shape and other.key not in aside and other.key not in consumed:
                aside.add(other.key)
                moved.append(other)
        return moved


class _Tournament:
    """One root cohort's Fair Sharing tournament, kept between picks (see `Scheduler._tournament`).

    `shares[(cohort, key)]` is the DRS, with the entry's own request added, of the child of `cohort` on the entry's
    path, with that request; `winners[cohort]` the entry that wins the cohort's subtree.
    """

    def __init__(self, root: CohortNode, entries: list[_Entry], by_cq: dict[int, _Entry],
                 less: Callable[[_Entry, _Entry, int, dict], bool]) -> None:
        self.root, self.by_cq, self.less = root, by_cq, less
        self.shares: dict[tuple[int, str], tuple[DRS, dict]] = {}
        self.winners: dict[int, _Entry | None] = {}
        # The entries below each cohort other than the root: those whose shares a pick under that cohort changes.
        self.below: dict[int, list[_Entry]] = defaultdict(list)
        depth: dict[int, tuple[int, CohortNode]] = {}  # the cohorts with entries below them, by height from the root
        for e in entries:
            self._measure(e)
            path = list(e.queue.path_to_root())
            for level, cohort in enumerate(path):
                depth[id(cohort)] = (len(path) - level, cohort)
                if cohort is not root:
                    self.below[id(cohort)].append(e)
        for _, cohort in sorted(depth.values(), key=lambda item: -item[0]):  # children before their parents
            self._decide(cohort)
        self.last: _Entry | None = None
        self.usage_before: dict[FlavorResource, int] = {}

    def winner(self) -> _Entry | None:
        return self.winners.get(id(self.root))

    def picked(self, e: _Entry) -> None:
        self.last, self.usage_before = e, dict(e.queue.usage)

    def replay_after_pick(self) -> None:
        """The last winner was processed: if that changed its ClusterQueue's usage (and so its path's), measure again
        the entries that share a cohort below the root with it; play again the tournaments on its path."""
        e, self.last = self.last, None
        if e is None:
            return
        path = list(e.queue.path_to_root())
        if e.queue.usage != self.usage_before:  # admitted or reserved: usage moved along its path (else only gone)
            affected = {id(other): other for cohort in path[:-1] for other in self.below[id(cohort)]
                        if id(other.queue) in self.by_cq}
            for other in affected.values():
                self._measure(other)
        for cohort in path:
            self._decide(cohort)

    def _measure(self, e: _Entry) -> None:
        cq = e.queue
        usage = dict(e.assignment.usage) if not e.wl.has_reservation else {}
        for fr, v in usage.items():
            add_usage(cq, fr, v)
        drs = dominant_resource_share(cq)
        for ancestor in cq.path_to_root():
            self.shares[(id(ancestor), e.wl.key)] = (drs, usage)
            drs = dominant_resource_share(ancestor)
        for fr, v in usage.items():
            remove_usage(cq, fr, v)

    def _decide(self, cohort: CohortNode) -> _Entry | None:
        """The cohort's winner from its children's (cached) winners and its own ClusterQueues' entries, in Kueue's
        order of candidates: child cohorts first, then ClusterQueues."""
        candidates = [w for child in cohort.child_cohorts if (w := self.winners.get(id(child))) is not None]
        candidates += [self.by_cq[id(cq)] for cq in cohort.child_cqs if id(cq) in self.by_cq]
        best: _Entry | None = None
        for cur in candidates:
            if best is None or self.less(cur, best, id(cohort), self.shares):
                best = cur
        self.winners[id(cohort)] = best
        return best


class Scheduler:
    """Kueue's scheduler. Holds the queue state (inadmissible sets, sticky preemptors) between cycles.

    config, when given, overrides the snapshot's configuration.
    """

    def __init__(self, config: KueueConfig | None = None, queues: Queues | None = None) -> None:
        self.config = config
        self.queues = queues if queues is not None else Queues()

    def run(self, snapshot: Snapshot, now: datetime, max_cycles: int = 100000) -> list[CycleResult]:
        """Cycles until a cycle changes nothing; the snapshot then reflects the admissions made."""
        consumed: set[str] = set()
        results = []
        for _ in range(max_cycles):
            result = self.cycle(snapshot, now, consumed)
            results.append(result)
            if not result.progressed:
                break
        return results

    def cycle(self, snapshot: Snapshot, now: datetime, consumed: set[str] | None = None) -> CycleResult:
        """One scheduling cycle. consumed collects workloads admitted by earlier cycles on the same snapshot."""
        if self.config is not None:
            snapshot.config = self.config
        queues = self.queues
        queues.cycles += 1
        for key in [k for k in queues.progress if k not in snapshot.workloads]:  # deleted since
            del queues.progress[key]
        consumed = consumed if consumed is not None else set()
        result = CycleResult()
        heads = queues.heads(snapshot, consumed)
        if not heads:
            return result
        preemptor = Preemptor(snapshot, now)
        entries, rejected = self._nominate(snapshot, heads, preemptor)
        preempted_keys: set[str] = set()
        gate = _PodsReadyGate.of(snapshot)
        order, tournament = self._order(snapshot, entries, gated=gate is not None)
        transient: list[tuple[ClusterQueueNode, dict[FlavorResource, int]]] = []
        unprocessed = {id(e): e for e in entries}
        for e in order:
            if gate is not None and gate.holding:
                e.status = "deferred"  # Kueue's scheduler is itself blocked: later entries wait unseen
                continue
            self._process(snapshot, e, preemptor, preempted_keys, result, consumed, now, transient, gate)
            del unprocessed[id(e)]
            if tournament and gate is None and self._settled(snapshot, unprocessed.values(), preempted_keys):
                for rest in list(unprocessed.values()):  # in any order: no pick is left for the tournament to make
                    self._process(snapshot, rest, preemptor, preempted_keys, result, consumed, now, transient, gate)
                break
        for cq, usage in transient:  # the next cycle starts from a fresh view of reservations
            for fr, v in usage.items():
                remove_usage(cq, fr, v)
        nominated = {id(e) for e in entries}
        for e in entries + rejected:
            if e.status == "deferred":
                continue
            pending_flavors = id(e) in nominated and self._keep_progress(e)
            if e.status == "assumed":
                continue
            if e.status == "waiting":
                queues.requeue(e.cq, e.wl, WAITING_FOR_PODS_READY)
                result.pending.append(Pending(e.wl, e.reason, e.message, evaluated=False))
                continue
            if e.requeue == GENERIC and e.status:
                e.requeue = FAILED_AFTER_NOMINATION
            if pending_flavors:
                queues.requeue(e.cq, e.wl, e.requeue, pending_flavors=True)
                if e.requeue not in _IMMEDIATE and not (e.cq is not None and e.cq.queueing_strategy == C.STRICT_FIFO):
                    result.resumed += 1  # would have been set aside: the next cycle tries its remaining flavors
            elif queues.requeue(e.cq, e.wl, e.requeue):
                result.moved_aside += 1
                best_effort = e.cq is not None and e.cq.queueing_strategy != C.STRICT_FIFO
                if e.requeue in (NO_FIT_REASON, PREEMPTION_NO_CANDIDATES) and best_effort:
                    for other in queues.set_aside_equivalent(snapshot, e.wl, consumed):
                        result.moved_aside += 1
                        if _bypass_visible(other):
                            result.pending.append(Pending(other, e.reason, BYPASSED, evaluated=False))
            result.pending.append(Pending(e.wl, e.reason, e.message))
        return result

    def _keep_progress(self, e: _Entry) -> bool:
        """Record (or drop) where the entry's flavor search stopped; True when flavors are left to try. Kueue drops
        the progress once the workload is admitted or has issued preemptions, and keeps it otherwise (also when the
        entry was skipped for capacity or targets another entry took)."""
        queues, cq = self.queues, e.queue
        if e.status == "assumed" or e.requeue == PENDING_PREEMPTION or not e.assignment.pending_flavors():
            queues.progress.pop(e.wl.key, None)
            return False
        queues.progress[e.wl.key] = _ScanProgress.record(e.wl, cq, e.assignment.last_tried(), queues.cycles)
        return True

    # -- nomination -----------------------------------------------------------------------------------------

    def _nominate(
        self, snapshot: Snapshot, heads: list[WorkloadInfo], preemptor: Preemptor
    ) -> tuple[list[_Entry], list[_Entry]]:
        entries: list[_Entry] = []
        rejected: list[_Entry] = []
        prioritize_preemptors = snapshot.config.enabled(PRIORITIZE_PREEMPTOR_WORKLOADS)
        for wl in heads:
            cq = snapshot.cluster_queues.get(wl.cluster_queue)
            e = _Entry(wl, cq)
            if cq is None:
                e.message, e.reason = f"ClusterQueue {wl.cluster_queue} not found", C.REASON_MISCONFIGURED
            elif not cq.schedulable:
                e.message, e.reason = f"ClusterQueue {cq.name} is inactive", C.REASON_SUSPENDED
            elif not snapshot.namespace_matches(cq, wl.namespace):
                e.message, e.reason = "workload namespace doesn't match ClusterQueue selector", C.REASON_MISCONFIGURED
                e.requeue = NAMESPACE_MISMATCH
            elif invalid := _requests_over_limits(wl):
                e.message, e.reason = f"resources validation failed: {invalid}", C.REASON_MISCONFIGURED
            else:
                e.assignment, e.targets = self._assignments(snapshot, wl, cq, preemptor)
                e.message = e.assignment.message()
                e.preemptor = prioritize_preemptors and self.queues.sticky.get(cq.name) == wl.key
                entries.append(e)
                continue
            rejected.append(e)
        return entries, rejected

    def _assignments(
        self,
        snapshot: Snapshot,
        wl: WorkloadInfo,
        cq: ClusterQueueNode,
        preemptor: Preemptor,
        pinned: dict[str, dict[str, str]] | None = None,
    ) -> tuple[Assignment, list[Target]]:
        """The flavor assignment and preemption targets for wl. pinned (a search made again within the cycle): keep
        to those flavors and search from each resource group's first flavor, whatever progress was kept."""
        progress = self.queues.progress.get(wl.key) if pinned is None else None
        if progress is not None and progress.outdated(wl, cq, self.queues.cycles):
            del self.queues.progress[wl.key]
            progress = None
        assigner = FlavorAssigner(wl, cq, snapshot, preemptor.simulate, progress.tried if progress else None, pinned)
        full = assigner.assign()
        mode = full.mode()
        if mode not in (NO_FIT, PREEMPT):
            return full, []
        if mode == PREEMPT:
            targets = preemptor.get_targets(wl, full)
            if targets:
                return full, targets
        # Partial admission (Kueue's PodSetReducer): every PodSet with a minCount gives up the same fraction of its
        # reducible pods, searched for the smallest such step (the most pods) that fits or finds preemption targets.
        deltas = [ps.count - ps.min_count if ps.min_count is not None else 0 for ps in wl.podsets]
        total = sum(deltas)
        if total > 0:

            def attempt(step: int) -> tuple[Assignment, list[Target]] | None:
                counts = [ps.count - d * step // total for ps, d in zip(wl.podsets, deltas, strict=True)]
                tried = assigner.assign(counts)
                if tried.mode() not in (NO_FIT, PREEMPT):
                    return tried, []
                if tried.mode() == PREEMPT:
                    t = preemptor.get_targets(wl, tried)
                    if t:
                        return tried, t
                return None

            best: tuple[Assignment, list[Target]] | None = None
            lo, hi = 0, total + 1
            while lo < hi:
                mid = (lo + hi) // 2
                found = attempt(mid)
                if found:
                    best, hi = found, mid
                else:
                    lo = mid + 1
            if best is not None:
                return best
        return full, []

    # -- ordering ---------------------------------------------------------------------------------------------

    def _order(self, snapshot: Snapshot, entries: list[_Entry], *, gated: bool) -> tuple[Iterable[_Entry], bool]:
        """The order entries are processed in: classic (non-borrowing first, priority, FIFO) or the Fair Sharing
        tournament; and whether that tournament is being played (only then can it stop early: `_settled`)."""
        if not snapshot.config.fair_sharing:
            return sorted(entries, key=lambda e: (not e.preemptor, e.assignment.borrowing, *order_key(e.wl))), False
        if gated:
            return self._tournament(entries), True
        modes = {id(e): e.assignment.mode() for e in entries}
        live = [e for e in entries if modes[id(e)] != NO_FIT]
        if len(live) <= 1 or not any(e.targets or modes[id(e)] == FIT for e in live):
            # Entries that fit nowhere change nothing when processed, and one that needs a preemption it cannot make
            # only holds back quota from the entries after it that would be admitted: beside at most one other
            # entry, or with none that is admitted or preempts, the outcome is the same in any order, so the
            # tournament need not be played.
            return entries, False
        # Nor need those that fit nowhere take part: picking one changes no share, so the others' order is the
        # same without them.
        return itertools.chain(self._tournament(live), (e for e in entries if modes[id(e)] == NO_FIT)), True

    def _settled(self, snapshot: Snapshot, entries: Iterable[_Entry], preempted_keys: set[str]) -> bool:
        """Whether the order of the entries left in a cycle can no longer matter: none has preemption targets and
        none that fits at its nomination still fits, so each ends the same way (requeued with the same reason)
        whichever is processed first; quota a blocked preemptor holds back only lowers what the others find."""
        for e in entries:
            if e.targets:
                return False
            if e.assignment.mode() == FIT and self._fits_after(snapshot, e.queue, e.assignment.usage, preempted_keys,
                                                               e.targets):
                return False
        return True

    def _tournament(self, entries: list[_Entry]) -> Iterator[_Entry]:
        """Fair Sharing order: per root cohort, repeatedly pick the winner of a DRS tournament.

        Kueue recomputes every entry's shares after each pick. A share only depends on the usage of the node it is
        measured for, and a pick changes usage only along the winner's path, so after a pick only the entries below
        that path's cohorts get new shares and only the tournaments on that path are played again (the others keep
        their winners): the same order, without a pass over the whole tree per pick.
        """
        by_cq = {id(e.queue): e for e in entries}
        remaining = sorted(entries, key=lambda e: e.queue.name)
        in_tree: dict[int, list[_Entry]] = defaultdict(list)
        for e in entries:
            if e.queue.parent is not None:
                in_tree[id(e.queue.parent.root())].append(e)
        trees: dict[int, _Tournament] = {}
        last: _Tournament | None = None
        while remaining:
            if last is not None:
                last.replay_after_pick()
            first = remaining[0]
            parent = first.queue.parent
            winner: _Entry | None = first
            if parent is not None:
                root = parent.root()
                tree = trees.get(id(root))
                if tree is None:
                    tree = trees[id(root)] = _Tournament(root, in_tree[id(root)], by_cq, self._less)
                winner, last = tree.winner(), tree
            else:
                last = None
            assert winner is not None, "first's own ClusterQueue takes part in its root's tournament"
            remaining.remove(winner)
            del by_cq[id(winner.queue)]
            if last is not None:
                last.picked(winner)
            yield winner

    @staticmethod
    def _less(a: _Entry, b: _Entry, cohort: int, drs: dict) -> bool:
        if a.preemptor != b.preemptor:  # PrioritizePreemptorWorkloads: a preemptor waiting for its victims first
            return a.preemptor
        a_drs, a_req = drs[(cohort, a.wl.key)]
        b_drs, b_req = drs[(cohort, b.wl.key)]
        a_borrow, b_borrow = a_drs.borrowing_on(a_req), b_drs.borrowing_on(b_req)
        if a_borrow != b_borrow:
            return not a_borrow
        c = compare_drs(a_drs, b_drs)
        if c != 0:
            return c == -1
        if a.wl.priority != b.wl.priority:
            return a.wl.priority > b.wl.priority
        return a.wl.order_time < b.wl.order_time

    # -- processing -------------------------------------------------------------------------------------------

    def _process(
        self,
        snapshot: Snapshot,
        e: _Entry,
        preemptor: Preemptor,
        preempted_keys: set[str],
        result: CycleResult,
        consumed: set[str],
        now: datetime,
        transient: list[tuple[ClusterQueueNode, dict[FlavorResource, int]]],
        gate: _PodsReadyGate | None = None,
    ) -> None:
        cq = e.cq
        assert cq is not None
        deferred = False
        if any(t.workload.key in preempted_keys for t in e.targets):
            deferred = self._recompute_upon_overlap(snapshot, e, preemptor, preempted_keys, result)
        mode = e.assignment.mode()
        usage = e.assignment.usage
        if mode == NO_FIT:
            e.requeue, e.reason = NO_FIT_REASON, e.assignment.no_fit_reason or C.REASON_WAITING_FOR_QUOTA
            return
        if mode == PREEMPT and not e.targets:
            e.requeue, e.reason = PREEMPTION_NO_CANDIDATES, C.REASON_WAITING_FOR_QUOTA
            # capacity held back unless the queue can always reclaim it; under PrioritizePreemptorWorkloads a
            # preemptor waiting for its victims holds it back in any case
            if cq.preemption.reclaim_within_cohort != C.ANY or e.preemptor:
                reserve = self._to_reserve(e, cq)
                for fr, v in reserve.items():
                    add_usage(cq, fr, v)
                transient.append((cq, reserve))
            return
        if deferred:
            # Fits once the victims of earlier entries are gone: it waits for them, as a preemptor does, and holds
            # its capacity for the rest of the cycle.
            e.reason, e.requeue = C.REASON_WAITING_FOR_PREEMPTED, PENDING_PREEMPTION
            e.message = DEFERRED_FIT_MESSAGE
            for fr, v in usage.items():
                add_usage(cq, fr, v)
            transient.append((cq, dict(usage)))
            return
        if any(t.workload.key in preempted_keys for t in e.targets):
            e.status, e.message = "skipped", "Workload has overlapping preemption targets with another workload"
            e.reason = C.REASON_WAITING_FOR_QUOTA
            return
        if not self._fits_after(snapshot, cq, usage, preempted_keys, e.targets):
            e.status, e.message = "skipped", "Workload no longer fits after processing another workload"
            e.reason = C.REASON_WAITING_FOR_QUOTA
            return
        if mode != PREEMPT and gate is not None and gate.blocked:
            e.status, e.reason, e.message = "waiting", C.REASON_WAITING_FOR_PODS_READY, PODS_READY_MESSAGE
            gate.holding = True
            return
        preempted_keys.update(t.workload.key for t in e.targets)
        for fr, v in usage.items():
            add_usage(cq, fr, v)
        if mode == PREEMPT:
            e.reason = C.REASON_WAITING_FOR_PREEMPTED
            for t in e.targets:
                victim_cq = snapshot.cluster_queues[t.workload.cluster_queue]
                message = preemption_message(e.wl, t.reason, cq_path(cq), cq_path(victim_cq))
                if not t.workload.evicted:
                    t.workload.evicted = True
                    victim_cq.touched()  # evicted candidates come first
                    result.preempted.append(Preemption(t.workload, e.wl, t.reason, message, cq.name, victim_cq.name))
            e.message += f". Pending the preemption of {len(e.targets)} workload(s)"
            e.requeue = PENDING_PREEMPTION
            transient.append((cq, dict(usage)))  # not admitted yet: its usage only blocks the rest of this cycle
            return
        if gate is not None:
            gate.blocked = True  # the workload admitted now has no ready pods yet
        e.status = "assumed"
        e.wl.cluster_queue = cq.name
        e.wl.usage = dict(usage)
        e.wl.reserved_at = now
        cq.workloads[e.wl.key] = e.wl
        cq.touched()
        consumed.add(e.wl.key)
        snapshot.pending[cq.name] = [w for w in snapshot.pending.get(cq.name, []) if w.key != e.wl.key]
        if cq.admission_fair_sharing:  # the entry penalty: the next head of this queue sees the admission at once
            lq = snapshot.local_queues.get((e.wl.namespace, e.wl.queue_name)) or {}
            penalty = local_queue_usage(
                {"spec": lq.get("spec") or {}}, snapshot.config, entry_penalty(e.wl, snapshot.config)
            )
            key = (e.wl.namespace, e.wl.queue_name)
            snapshot.lq_usage[key] = snapshot.lq_usage.get(key, 0.0) + penalty
        result.admitted.append(Admission(e.wl, cq.name, e.assignment.to_api(), dict(usage)))

    def _recompute_upon_overlap(
        self, snapshot: Snapshot, e: _Entry, preemptor: Preemptor, preempted_keys: set[str], result: CycleResult
    ) -> bool:
        """Kueue's RecomputeAssignmentUponPreemptionTargetsOverlap (beta, on since 0.20): an entry whose nominated
        targets include a victim an earlier entry of this cycle already chose searches again, on the snapshot as it
        will be once this cycle's victims are gone (their preemptors' usage stays charged), keeping to the flavors it
        was nominated with. The new assignment and targets replace the nominated ones; True when it now fits
        without preempting anything (it must still wait for those victims to leave)."""
        gone = [snapshot.workloads[k] for k in preempted_keys if k in snapshot.workloads]
        gone = [w for w in gone if w.key in snapshot.cluster_queues[w.cluster_queue].workloads]
        for w in gone:
            snapshot.remove_workload(w)
        try:
            e.assignment, e.targets = self._assignments(
                snapshot, e.wl, e.queue, preemptor, pinned=e.assignment.flavor_names()
            )
        finally:
            for w in gone:
                snapshot.add_workload(w)
        e.message = e.assignment.message()
        deferred = e.assignment.mode() == FIT
        if deferred:
            outcome = "deferred_fit"
        elif e.targets and not any(t.workload.key in preempted_keys for t in e.targets) and self._fits_after(
            snapshot, e.queue, e.assignment.usage, preempted_keys, e.targets
        ):
            outcome = "new_targets"
        else:
            outcome = "skipped"
        result.recomputations.append((e.queue.name, outcome))
        return deferred

    @staticmethod
    def _fits_after(snapshot: Snapshot, cq, usage, preempted_keys: set[str], targets: list[Target]) -> bool:
        """Whether usage fits once this cycle's victims and this entry's targets are gone."""
        removed = [snapshot.workloads[k] for k in preempted_keys if k in snapshot.workloads]
        removed += [t.workload for t in targets if t.workload.key not in preempted_keys]
        removed = [w for w in removed if w.key in snapshot.cluster_queues[w.cluster_queue].workloads]
        for w in removed:
            snapshot.remove_workload(w)
        ok = all(max(0, available(cq, fr)) >= v for fr, v in usage.items())
        for w in removed:
            snapshot.add_workload(w)
        return ok

    @staticmethod
    def _to_reserve(e: _Entry, cq: ClusterQueueNode) -> dict[FlavorResource, int]:
        """Capacity a blocked preemptor holds for this cycle so lower entries cannot take it (resourcesToReserve): what
        it would use within its nominal quota (or up to its borrowing limit when it borrows); all of it if it fits."""
        if e.assignment.mode() != PREEMPT:
            return dict(e.assignment.usage)
        reserved = {}
        for fr, v in e.assignment.usage.items():
            q = cq.quota_for(fr)
            used = cq.usage.get(fr, 0)
            if e.assignment.borrowing > 0:
                reserved[fr] = v if q.borrowing_limit is None else min(v, q.nominal + q.borrowing_limit - used)
            else:
                reserved[fr] = max(0, min(v, q.nominal - used))
        return reserved


@dataclass
class _PodsReadyGate:
    """waitForPodsReady.blockAdmission within one cycle: while any workload holding quota has no ready pods, the
    first entry that would be admitted is marked WaitingForPodsReady and holds the rest of the cycle (Kueue's
    scheduler waits right there until the pods are ready); each admission closes the gate again."""

    blocked: bool
    holding: bool = False

    @classmethod
    def of(cls, snapshot: Snapshot) -> _PodsReadyGate | None:
        wfpr = snapshot.config.wait_for_pods_ready
        if not (wfpr.enable and wfpr.block_admission):
            return None
        return cls(
            blocked=any(
                not w.evicted and not condition_true(w.obj, C.PODS_READY)
                for cq in snapshot.cluster_queues.values()
                for w in cq.workloads.values()
            )
        )


BYPASSED = "Bypassed scheduling evaluation because an equivalent workload recently failed"


def _requests_over_limits(wl: WorkloadInfo) -> str:
    """Kueue's ValidateResources before nomination: every (init) container asking for more of a resource than its
    limit, as field errors ('' when none). Job validation rejects such pod templates, so only a Workload written
    directly can carry one."""
    errors = []
    for i, ps in enumerate((wl.obj.get("spec") or {}).get("podSets") or []):
        spec = (ps.get("template") or {}).get("spec") or {}
        parts = [
            (f"{kind}[{j}]", c) for kind in ("initContainers", "containers") for j, c in enumerate(spec.get(kind) or [])
        ]
        if spec.get("resources"):  # pod-level resources
            parts.append(("resources", {"resources": spec["resources"]}))
        for where, c in parts:
            res = c.get("resources") or {}
            limits, requests = res.get("limits") or {}, res.get("requests") or {}
            over = sorted(r for r, v in requests.items() if r in limits and to_amount(r, v) > to_amount(r, limits[r]))
            if over:
                names = ",".join(f'"{r}"' for r in over)
                path = f"spec.podSets[{i}].template.spec.{where}"
                errors.append(f"{path}: Invalid value: [{names}]: requests must not exceed its limits")
    if len(errors) > 1:
        return f"[{', '.join(errors)}]"
    return errors[0] if errors else ""


def _bypass_visible(wl: WorkloadInfo) -> bool:
    """Kueue rewrites the condition of a set-aside workload only when it shows no scheduler verdict of its own."""
    cond = find_condition(wl.obj, C.QUOTA_RESERVED)
    return cond is not None and cond.get("reason", "") in (
        "",
        C.REASON_PENDING_EVALUATION,
        C.REASON_SUSPENDED,
        "Deactivated",
        "Pending",
    )


def preemption_message(preemptor: WorkloadInfo, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    """The Preempted / Evicted message; any part that is missing reads UNKNOWN, as in Kueue's."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor.uid or 'UNKNOWN'}, JobUID: "
        f"{preemptor.job_uid or 'UNKNOWN'}) due to {C.HUMAN_PREEMPTION_REASONS.get(reason, 'UNKNOWN')}; "
        f"preemptor path: {preemptor_path or 'UNKNOWN'}; preemptee path: {preemptee_path or 'UNKNOWN'}"
    )
