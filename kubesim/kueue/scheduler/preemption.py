"""Preemption target selection: classic (withinClusterQueue / reclaimWithinCohort / borrowWithinCohort, with
hierarchical reclaim) and Fair Sharing (DRS-ordered targets, the two strategies).

Both work the same way on the snapshot: take candidates out one at a time, in the order Kueue documents, until the
preemptor fits; then make the set minimal (each victim is spared if the preemptor still fits without preempting
it, trying the latest-chosen victims first), and finally put the snapshot back as it was. `_Trial` holds that
what-if: the victims taken out so far, and the undo.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cmp_to_key, partial
from operator import itemgetter
from types import TracebackType

from kubesim.kueue import constants as C
from kubesim.kueue.scheduler.flavors import (
    G_NO_CANDIDATES,
    G_PREEMPT,
    G_RECLAIM,
    Assignment,
    lowest_subtree_that_fits,
)
from kubesim.kueue.scheduler.model import ClusterQueueNode, Snapshot, WorkloadInfo
from kubesim.kueue.scheduler.quota import (
    DRS,
    CohortNode,
    FlavorResource,
    QuotaNode,
    add_usage,
    available,
    compare_drs,
    dominant_resource_share,
    fits_in_quota,
    remove_usage,
    usage_version,
    within_nominal,
)

# classic preemption variants
_NEVER, _WITHIN_CQ, _HIER_RECLAIM, _RECLAIM_NO_BORROW, _RECLAIM_WHILE_BORROW = range(5)
_VARIANT_REASON = {
    _WITHIN_CQ: C.IN_CLUSTER_QUEUE,
    _HIER_RECLAIM: C.IN_COHORT_RECLAMATION,
    _RECLAIM_NO_BORROW: C.IN_COHORT_RECLAMATION,
    _RECLAIM_WHILE_BORROW: C.IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass
class Target:
    workload: WorkloadInfo
    reason: str


class _Trial:
    """Victims taken out of the snapshot for a what-if, in the order they were chosen. Leaving the `with` block
    puts every workload still taken out back into the snapshot, whatever happened inside."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.victims: list[Target] = []

    def __enter__(self) -> _Trial:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for victim in self.victims:
            self.snapshot.add_workload(victim.workload)
        self.victims = []

    def take(self, workload: WorkloadInfo, reason: str) -> None:
        self.snapshot.remove_workload(workload)
        self.victims.append(Target(workload, reason))

    def minimal(self, preemptor_fits: Callable[[], bool]) -> list[Target]:
        """The victims the preemptor needs. Victims are reconsidered from the most recently chosen backwards (the
        last one is needed: the preemptor did not fit before it was taken); one whose workload, put back, leaves
        the preemptor still fitting is spared (and stays back in the snapshot)."""
        spared: set[int] = set()
        for victim in reversed(self.victims[:-1]):
            self.snapshot.add_workload(victim.workload)
            if preemptor_fits():
                spared.add(id(victim))
            else:
                self.snapshot.remove_workload(victim.workload)
        self.victims = [v for v in self.victims if id(v) not in spared]
        return list(self.victims)


@contextmanager
def _usage_added(node: QuotaNode, usage: dict[FlavorResource, int]) -> Iterator[None]:
    """node (and its ancestors) charged with usage for the duration of the block."""
    for fr, v in usage.items():
        add_usage(node, fr, v)
    try:
        yield
    finally:
        for fr, v in usage.items():
            remove_usage(node, fr, v)


@contextmanager
def _usage_removed(node: QuotaNode, usage: dict[FlavorResource, int]) -> Iterator[None]:
    """node (and its ancestors) relieved of usage for the duration of the block."""
    for fr, v in usage.items():
        remove_usage(node, fr, v)
    try:
        yield
    finally:
        for fr, v in usage.items():
            add_usage(node, fr, v)


def cq_path(cq: ClusterQueueNode) -> str:
    """`/root/.../cq`, as the Preempted message prints the preemptor and preemptee paths."""
    parts = [cq.name] + [a.name for a in cq.path_to_root()]
    return "/" + "/".join(reversed(parts))


def satisfies_policy(preemptor: WorkloadInfo, candidate: WorkloadInfo, policy: str) -> bool:
    lower = preemptor.priority > candidate.priority
    if policy == C.LOWER_PRIORITY:
        return lower
    if policy == C.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return lower or (preemptor.priority == candidate.priority and preemptor.order_time < candidate.order_time)
    return policy == C.ANY


def uses_resources(wl: WorkloadInfo, frs: AbstractSet[FlavorResource]) -> bool:
    return any(fr in frs for fr in wl.usage)


def candidate_key(wl: WorkloadInfo, cq_name: str, now: datetime) -> tuple:
    """CandidatesOrdering: evicted first, other ClusterQueues first, lower priority, most recently reserved, UID."""
    reserved = wl.reserved_at or now
    return (not wl.evicted, wl.cluster_queue == cq_name, wl.priority, -reserved.timestamp(), wl.uid)


def order_candidates(snapshot: Snapshot, candidates: list, cq_name: str, now: datetime, wl_of=lambda c: c) -> None:
    """Sort candidates (items whose workload is wl_of(item)) in CandidatesOrdering's order, in place.

    With Admission Fair Sharing, two candidates of one ClusterQueue whose admissionScope uses it, queued through
    LocalQueues of different names, go by their LocalQueues' usage first (the higher first), before priority:
    preemption then takes from the LocalQueue that used the most. Kueue asks this only of such pairs, so the order
    is a comparison, not a key; without an AFS queue among the candidates it is the plain key.
    """
    afs = set()
    if snapshot.config.admission_fair_sharing is not None:  # else no queue admits by usage: skip the scan
        afs = {name for name, q in snapshot.cluster_queues.items() if q.admission_fair_sharing}
    if not afs or not any(wl_of(c).cluster_queue in afs for c in candidates):
        candidates.sort(key=lambda c: candidate_key(wl_of(c), cq_name, now))
        return
    usage = snapshot.lq_usage

    def compare(x: object, y: object) -> int:
        a, b = wl_of(x), wl_of(y)
        ka, kb = candidate_key(a, cq_name, now), candidate_key(b, cq_name, now)
        if ka[:2] != kb[:2]:
            return -1 if ka[:2] < kb[:2] else 1
        if a.cluster_queue == b.cluster_queue and a.cluster_queue in afs and a.queue_name != b.queue_name:
            ua, ub = usage.get((a.namespace, a.queue_name), 0.0), usage.get((b.namespace, b.queue_name), 0.0)
            if ua != ub:
                return -1 if ua > ub else 1
        return (ka > kb) - (ka < kb)

    candidates.sort(key=cmp_to_key(compare))


class Preemptor:
    """Finds preemption targets for a workload against a snapshot (which it mutates and restores)."""

    def __init__(self, snapshot: Snapshot, now: datetime) -> None:
        self.snapshot = snapshot
        self.now = now
        self.fair_sharing = snapshot.config.fair_sharing
        self._borrowers: dict[tuple[int, frozenset], tuple[int, list[ClusterQueueNode]]] = {}
        self._ordered: dict[tuple[str, frozenset], tuple[int, list[WorkloadInfo]]] = {}
        self.strategies = snapshot.config.preemption_strategies or [
            C.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
            C.LESS_THAN_INITIAL_SHARE,
        ]

    def get_targets(self, wl: WorkloadInfo, assignment: Assignment) -> list[Target]:
        cq = self.snapshot.cluster_queues[wl.cluster_queue]
        return self._targets(wl, cq, assignment.frs_needing_preemption(), dict(assignment.usage))

    def simulate(self, cq: ClusterQueueNode, wl: WorkloadInfo, fr: FlavorResource, quantity: int) -> tuple[int, int]:
        """The preemption oracle of the flavor assigner: (granular mode, borrowing level after preemption)."""
        targets = self._targets(wl, cq, {fr}, {fr: quantity})
        if not targets:
            return G_NO_CANDIDATES, lowest_subtree_that_fits(cq, fr, quantity)[0]
        with _Trial(self.snapshot) as trial:
            for t in targets:
                trial.take(t.workload, t.reason)
            borrow = lowest_subtree_that_fits(cq, fr, quantity)[0]
        if any(t.workload.cluster_queue == cq.name for t in targets):
            return G_PREEMPT, borrow
        return G_RECLAIM, borrow

    def _targets(
        self, wl: WorkloadInfo, cq: ClusterQueueNode, frs: set[FlavorResource], requests: dict[FlavorResource, int]
    ) -> list[Target]:
        if self.fair_sharing:
            return self._fair(wl, cq, frs, requests)
        return self._classic(wl, cq, frs, requests)

    # -- shared ---------------------------------------------------------------------------------------------

    def _fits(self, cq: ClusterQueueNode, requests: dict[FlavorResource, int], allow_borrowing: bool) -> bool:
        for fr, v in requests.items():
            if not allow_borrowing and cq.borrowing_with(fr, v):
                return False
            if v > max(0, available(cq, fr)):
                return False
        return True

    # -- classic --------------------------------------------------------------------------------------------

    def _classify(self, wl: WorkloadInfo, cq: ClusterQueueNode, cand: WorkloadInfo, frs: set, advantage: bool) -> int:
        if not uses_resources(cand, frs):
            return _NEVER
        same = cand.cluster_queue == cq.name
        policy = cq.preemption.within_cluster_queue if same else cq.preemption.reclaim_within_cohort
        if not satisfies_policy(wl, cand, policy):
            return _NEVER
        if same:
            return _WITHIN_CQ
        if advantage:
            return _HIER_RECLAIM
        if cq.preemption.borrow_within_cohort == C.NEVER:
            return _RECLAIM_NO_BORROW
        threshold = cq.preemption.max_priority_threshold
        if cand.priority >= wl.priority or (threshold is not None and cand.priority > threshold):
            return _RECLAIM_NO_BORROW
        return _RECLAIM_WHILE_BORROW

    def _from_cq(self, wl, cq, source: ClusterQueueNode, lca, frs, advantage) -> list[tuple]:
        out = []
        for cand in source.workloads.values():
            variant = self._classify(wl, cq, cand, frs, advantage)
            if variant != _NEVER:
                out.append((cand, lca, variant))
        return out

    def _collect_subtree(self, wl, cq, current: CohortNode, subtree_root, skip, frs, advantage, result) -> None:
        for child in current.child_cohorts:
            if child is skip or within_nominal(child, frs):
                continue
            self._collect_subtree(wl, cq, child, subtree_root, skip, frs, advantage, result)
        for child_cq in current.child_cqs:
            if child_cq is cq:
                continue
            if not within_nominal(child_cq, frs):
                result.extend(self._from_cq(wl, cq, child_cq, subtree_root, frs, advantage))

    def _classic(self, wl, cq: ClusterQueueNode, frs, requests) -> list[Target]:
        same = [] if cq.preemption.within_cluster_queue == C.NEVER else self._from_cq(wl, cq, cq, None, frs, False)
        hierarchy: list[tuple] = []
        priority: list[tuple] = []
        if cq.parent is not None and cq.preemption.reclaim_within_cohort != C.NEVER:
            advantage, remaining = fits_in_quota(cq, requests)
            previous = None
            for subtree_root in cq.path_to_root():
                bucket = hierarchy if advantage else priority
                self._collect_subtree(wl, cq, subtree_root, subtree_root, previous, frs, advantage, bucket)
                fits, remaining = fits_in_quota(subtree_root, remaining)
                advantage = advantage or fits
                previous = subtree_root
        ordered: list[tuple[WorkloadInfo, CohortNode | None, int]] = []
        for lst in (hierarchy, priority, same):
            order_candidates(self.snapshot, lst, cq.name, self.now, itemgetter(0))
        for evicted in (True, False):
            for lst in (hierarchy, priority, same):
                ordered.extend(c for c in lst if c[0].evicted == evicted)
        no_borrow_forbidden = cq.preemption.borrow_within_cohort == C.NEVER
        if (not hierarchy and not priority) or (no_borrow_forbidden and not self._under_nominal(cq, frs)):
            attempts = [True]
        elif no_borrow_forbidden and not hierarchy:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for borrow in attempts:
            with _Trial(self.snapshot) as trial:
                for cand, lca, variant in ordered:
                    if not self._valid(cq, cand, lca, variant, frs, borrow):
                        continue
                    trial.take(cand, _VARIANT_REASON[variant])
                    if self._fits(cq, requests, borrow):
                        return trial.minimal(partial(self._fits, cq, requests, borrow))
        return []

    def _under_nominal(self, cq: ClusterQueueNode, frs: set[FlavorResource]) -> bool:
        return all(cq.quota_for(fr).nominal > cq.usage.get(fr, 0) for fr in frs)

    def _valid(self, cq, cand: WorkloadInfo, lca, variant: int, frs, borrow: bool) -> bool:
        if cand.cluster_queue == cq.name:
            return True
        if borrow and variant == _RECLAIM_NO_BORROW:
            return False
        cand_cq = self.snapshot.cluster_queues[cand.cluster_queue]
        if within_nominal(cand_cq, frs):
            return False
        for node in cand_cq.path_to_root():
            if node is lca:
                break
            if within_nominal(node, frs):
                return False
        return True

    # -- fair sharing -----------------------------------------------------------------------------------------

    def _fair_queues(self, wl: WorkloadInfo, cq: ClusterQueueNode, frs) -> list[tuple[ClusterQueueNode, str]]:
        """The queues fair sharing may take from, each with the policy its candidates must satisfy: cq itself, and
        the other queues of its tree that borrow."""
        out = []
        if cq.preemption.within_cluster_queue != C.NEVER:
            out.append((cq, cq.preemption.within_cluster_queue))
        if cq.parent is not None and cq.preemption.reclaim_within_cohort != C.NEVER:
            out += [
                (o, cq.preemption.reclaim_within_cohort)
                for o in self._borrowing_queues(cq.parent.root(), frs)
                if o is not cq
            ]
        return out

    def _ordered_workloads(self, cq: ClusterQueueNode, frs: frozenset[FlavorResource]) -> list[WorkloadInfo]:
        """cq's workloads that use any of frs, in CandidatesOrdering's order, kept while cq's workloads stay the
        same (workloads_version): every head nominated in a cycle asks it of the same borrowing queues, and the sort
        was most of a nomination's time in a full cohort. Within one queue the order does not depend on the
        preemptor (its "other ClusterQueues first" is the same for all of them), so one list serves every head."""
        key = (cq.name, frs)
        kept = self._ordered.get(key)
        if kept is None or kept[0] != cq.workloads_version:
            items = [c for c in cq.workloads.values() if uses_resources(c, frs)]
            items.sort(key=lambda c: candidate_key(c, "", self.now))
            kept = (cq.workloads_version, items)
            self._ordered[key] = kept
        return kept[1]

    def _borrowing_queues(self, root: CohortNode, frs) -> list[ClusterQueueNode]:
        """The ClusterQueues of root's tree that borrow any of frs, kept while no usage changes (every head of a
        cycle asks the same question of the whole tree)."""
        key = (id(root), frozenset(frs))
        kept = self._borrowers.get(key)
        if kept is None or kept[0] != usage_version():
            kept = (
                usage_version(),
                [other for other in root.subtree_cluster_queues() if any(other.borrowing(fr) for fr in frs)],
            )
            self._borrowers[key] = kept
        return kept[1]

    def _fair(self, wl, cq: ClusterQueueNode, frs, requests) -> list[Target]:
        queues = self._fair_queues(wl, cq, frs)
        ordering: FairTargets
        if self.snapshot.config.admission_fair_sharing is not None and any(
            q.admission_fair_sharing for q, _ in queues
        ):  # candidates compared by their LocalQueues' usage (order_candidates): ordered afresh
            candidates = [
                c
                for q, policy in queues
                for c in q.workloads.values()
                if satisfies_policy(wl, c, policy) and uses_resources(c, frs)
            ]
            order_candidates(self.snapshot, candidates, cq.name, self.now)
            ordering = FairTargets(cq, candidates, self.now)
        else:
            kinds = frozenset(frs)
            ordering = FairTargets.of_queues(
                cq,
                {
                    q.name: (self._ordered_workloads(q, kinds), partial(satisfies_policy, wl, policy=policy))
                    for q, policy in queues
                },
                self.now,
            )
        if not ordering.any_candidate():
            return []
        with _Trial(self.snapshot) as trial:
            with _usage_added(cq, requests):  # shares are compared with the preemptor's workload admitted
                retry = self._take_by_strategy(wl, cq, frs, requests, ordering, self.strategies[0], trial)
                fits = retry is None
                if not fits and len(self.strategies) > 1:
                    fits = self._take_below_initial_share(cq, requests, retry or [], trial)
            if not fits:
                return []
            return trial.minimal(lambda: self._fits(cq, requests, True))

    def _fits_fair(self, cq: ClusterQueueNode, requests: dict[FlavorResource, int]) -> bool:
        """Whether the preemptor fits, asked while its own usage is charged to cq (see _fair)."""
        with _usage_removed(cq, requests):
            return self._fits(cq, requests, True)

    def _take_by_strategy(self, wl, cq, frs, requests, ordering: FairTargets, strategy: str, trial: _Trial):
        """Take candidates queue by queue in FairTargets' order under the first strategy. None when the
        preemptor fits; otherwise the candidates the strategy turned down (for the second strategy)."""
        within_nominal_now = not any(cq.borrowing(fr) for fr in frs)
        retry: list[WorkloadInfo] = []
        for target_cq in ordering.iterate():
            if target_cq is cq or within_nominal_now:
                cand = ordering.pop(target_cq)
                trial.take(cand, C.IN_CLUSTER_QUEUE if target_cq is cq else C.IN_COHORT_RECLAMATION)
                if self._fits_fair(cq, requests):
                    return None
                continue
            preemptor_new, target_old = ordering.shares(target_cq)
            if preemptor_new.precise() == float("inf") and target_old.precise() != float("inf"):
                while ordering.has_workload(target_cq):
                    retry.append(ordering.pop(target_cq))
                continue
            while ordering.has_workload(target_cq):
                cand = ordering.pop(target_cq)
                target_new = ordering.target_share_after_removal(target_cq, cand)
                if strategy == C.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
                    passed = compare_drs(preemptor_new, target_new) <= 0
                else:
                    passed = compare_drs(preemptor_new, target_old) < 0
                if passed:
                    trial.take(cand, C.IN_COHORT_FAIR_SHARING)
                    if self._fits_fair(cq, requests):
                        return None
                    break
                retry.append(cand)
        return retry

    def _take_below_initial_share(self, cq, requests, retry: list[WorkloadInfo], trial: _Trial) -> bool:
        """LessThanInitialShare over what the first strategy turned down, one candidate per queue visit."""
        ordering = FairTargets(cq, retry, self.now)
        for target_cq in ordering.iterate():
            preemptor_new, target_old = ordering.shares(target_cq)
            cand = ordering.pop(target_cq)
            if compare_drs(preemptor_new, target_old) < 0:
                trial.take(cand, C.IN_COHORT_FAIR_SHARING)
                if self._fits_fair(cq, requests):
                    return True
            ordering.drop(target_cq)
        return False


class FairTargets:
    """Where fair sharing takes its next victim from (Kueue's documented rule: the queue furthest above its fair
    share, compared level by level from the root of the preemptor's tree).

    A queue is open while it still has candidates, has not been set aside, and borrows (the preemptor's own queue
    is always open); a cohort is open while it borrows or lies on the preemptor's path, and some queue below it is
    open. Preemption only lowers usage, so a closed node never reopens: each pick is computed afresh from the
    current snapshot instead of keeping pruned sets.
    """

    def __init__(self, cq: ClusterQueueNode, candidates: list[WorkloadInfo], now: datetime) -> None:
        """candidates in CandidatesOrdering's order."""
        queued: dict[str, tuple[list[WorkloadInfo], Callable[[WorkloadInfo], bool] | None]] = {}
        for candidate in candidates:
            queued.setdefault(candidate.cluster_queue, ([], None))[0].append(candidate)
        self._start(cq, queued, now)

    @classmethod
    def of_queues(
        cls,
        cq: ClusterQueueNode,
        queued: dict[str, tuple[list[WorkloadInfo], Callable[[WorkloadInfo], bool] | None]],
        now: datetime,
    ) -> FairTargets:
        """From each queue's workloads in CandidatesOrdering's order, with the test a candidate must pass (None:
        all are candidates): read lazily, so a pick costs the workloads it passes over, not the whole cohort. The
        lists are read, never changed."""
        ordering = cls.__new__(cls)
        ordering._start(cq, queued, now)
        return ordering

    def _start(
        self,
        cq: ClusterQueueNode,
        queued: dict[str, tuple[list[WorkloadInfo], Callable[[WorkloadInfo], bool] | None]],
        now: datetime,
    ) -> None:
        self.preemptor_queue = cq
        self.now = now
        self.preemptor_path = list(cq.path_to_root())
        self.on_path = {id(node) for node in self.preemptor_path}
        self.queued = queued
        self.next: dict[str, int] = dict.fromkeys(queued, 0)  # per queue: where its next candidate may be
        self.set_aside: set[int] = set()

    def any_candidate(self) -> bool:
        return any(self._peek(name) is not None for name in self.queued)

    def has_workload(self, cq: ClusterQueueNode) -> bool:
        return self._peek(cq.name) is not None

    def pop(self, cq: ClusterQueueNode) -> WorkloadInfo:
        candidate = self._peek(cq.name)
        if candidate is None:
            raise IndexError(f"no candidate left in {cq.name}")
        self.next[cq.name] += 1
        return candidate

    def _peek(self, name: str) -> WorkloadInfo | None:
        """The queue's next candidate, passing over the workloads that fail its test."""
        if name not in self.queued:
            return None
        items, accepts = self.queued[name]
        at = self.next[name]
        while at < len(items) and accepts is not None and not accepts(items[at]):
            at += 1
        self.next[name] = at
        return items[at] if at < len(items) else None

    def drop(self, cq: ClusterQueueNode) -> None:
        """Visit cq no more (the second strategy looks at each queue once)."""
        self.set_aside.add(id(cq))

    def iterate(self) -> Iterator[ClusterQueueNode]:
        """The queue to take from next, as long as one is open."""
        if not self.preemptor_path:
            while self._queue_open(self.preemptor_queue):
                yield self.preemptor_queue
            return
        root = self.preemptor_path[-1]
        while self._cohort_open(root):
            yield self._descend(root)

    def _queue_open(self, cq: ClusterQueueNode) -> bool:
        if id(cq) in self.set_aside or not self.has_workload(cq):
            return False
        return cq is self.preemptor_queue or dominant_resource_share(cq).borrowing

    def _cohort_open(self, cohort: CohortNode) -> bool:
        if id(cohort) not in self.on_path and not dominant_resource_share(cohort).borrowing:
            return False
        return any(map(self._queue_open, cohort.child_cqs)) or any(map(self._cohort_open, cohort.child_cohorts))

    def _descend(self, cohort: CohortNode) -> ClusterQueueNode:
        """From an open cohort down to the open queue with the highest share. Between queues of equal share the
        one whose next candidate comes first wins; a cohort wins over queues of no higher share, and between
        cohorts of equal share the later child."""
        queue: tuple[DRS, ClusterQueueNode] | None = None
        for cq in filter(self._queue_open, cohort.child_cqs):
            share = dominant_resource_share(cq)
            if queue is None or self._queue_first(share, cq, *queue):
                queue = (share, cq)
        child: tuple[DRS, CohortNode] | None = None
        for sub in filter(self._cohort_open, cohort.child_cohorts):
            share = dominant_resource_share(sub)
            if child is None or compare_drs(share, child[0]) >= 0:
                child = (share, sub)
        if child is not None and (queue is None or compare_drs(child[0], queue[0]) >= 0):
            return self._descend(child[1])
        assert queue is not None, "an open cohort has an open queue below it"
        return queue[1]

    def _queue_first(self, share: DRS, cq: ClusterQueueNode, best_share: DRS, best: ClusterQueueNode) -> bool:
        order = compare_drs(share, best_share)
        if order != 0:
            return order > 0
        mine = candidate_key(self._peek(cq.name), self.preemptor_queue.name, self.now)  # type: ignore[arg-type]
        return mine < candidate_key(self._peek(best.name), self.preemptor_queue.name, self.now)  # type: ignore[arg-type]

    def _sides(self, target: ClusterQueueNode) -> tuple[QuotaNode, QuotaNode]:
        """The preemptor's and the target's nodes just below where their paths to the root meet: fair sharing
        compares those two."""
        theirs: QuotaNode = target
        for meeting in target.path_to_root():
            if id(meeting) in self.on_path:
                break
            theirs = meeting
        else:
            raise RuntimeError("the target is not in the preemptor's tree")
        mine: QuotaNode = self.preemptor_queue
        for node in self.preemptor_path:
            if node is meeting:
                return mine, theirs
            mine = node
        raise RuntimeError("unreachable: the meeting point lies on the preemptor's path")

    def shares(self, target: ClusterQueueNode) -> tuple[DRS, DRS]:
        """(preemptor side's DRS with its workload, target side's current DRS) where their paths meet."""
        mine, theirs = self._sides(target)
        return dominant_resource_share(mine), dominant_resource_share(theirs)

    def target_share_after_removal(self, target: ClusterQueueNode, wl: WorkloadInfo) -> DRS:
        """The target side's DRS if wl were preempted."""
        with _usage_removed(target, wl.usage):
            return dominant_resource_share(self._sides(target)[1])
