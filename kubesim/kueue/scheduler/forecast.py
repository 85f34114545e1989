"""Start-time forecasts: replay the scheduler forward in time on a snapshot, finishing workloads at their estimated
run times and releasing preempted ones at once. For the portal's "when will my job start" estimates; no ETA is
exact (Kueue's own KEP declines to give one), so callers should present these as estimates.

Cost: each end of a workload requeues the pending heads of its quota tree only (trees share no quota), and ends
close together are replayed together (within a `resolution`, or a `relative_resolution` of their distance from now
when that is longer: far ahead every estimate is coarse anyway), at the last of them, so a start is never forecast
earlier than the ends it waits for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from kubesim.kueue import constants as C
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler.model import ClusterQueueNode, Snapshot, WorkloadInfo, order_key
from kubesim.kueue.scheduler.quota import QuotaNode, available
from kubesim.kueue.scheduler.scheduler import Scheduler

# Preemption rounds at one instant before the replay stops preempting: each round releases its victims at once (their
# Jobs stop instantly here), so a victim may preempt back at the same instant, which a cluster, where stopping takes
# time, would not see.
MAX_PREEMPTION_ROUNDS = 3


def forecast(
    snapshot: Snapshot,
    runtime: Callable[[WorkloadInfo], float | None],
    now: datetime,
    *,
    config: KueueConfig | None = None,
    horizon: timedelta = timedelta(days=7),
    max_steps: int = 10000,
    resolution: timedelta = timedelta(0),
    relative_resolution: float = 0.0,
    preempt_later: bool = True,
    causes: dict[str, list[str]] | None = None,
) -> dict[str, datetime]:
    """Estimated reservation time per pending (and re-queued) workload key, within the horizon.

    runtime(workload) gives the seconds a workload runs once admitted, or None when it is not known (it then holds
    its quota to the end of the replay); running workloads are assumed to have started at their reservation time.
    With preempt_later False, preemption is tried at `now` only (the arrivals and reclaims the snapshot holds); later
    passes only admit into freed quota, which is much cheaper on a full cluster. The snapshot is consumed (mutated).
    `causes`, when given, is filled with the keys of the workloads whose ends made room for each start: those that
    ended at its instant in its quota tree (none for a start at `now`).
    """
    scheduler = Scheduler(config)
    step = resolution.total_seconds()

    def end_at(start: datetime, seconds: float) -> datetime:
        return max(now, start + timedelta(seconds=seconds))

    def next_batch() -> tuple[datetime, list[str]]:
        """The next instant replayed and the ends replayed at it: every end within a window after the first one
        (`resolution`, or `relative_resolution` of its distance from now when that is longer), at the window's last
        end, so that no start is forecast earlier than the ends it waits for."""
        first = min(ends.values())
        window = max(step, relative_resolution * (first - now).total_seconds())
        limit = first + timedelta(seconds=window)
        keys = [key for key, end in ends.items() if end <= limit]
        return max(ends[key] for key in keys), keys

    trees = {name: _root(cq) for name, cq in snapshot.cluster_queues.items()}
    members: dict[int, set[str]] = {}
    for name, root in trees.items():
        members.setdefault(id(root), set()).add(name)
    ends: dict[str, datetime] = {}
    for cq in snapshot.cluster_queues.values():
        for wl in cq.workloads.values():
            seconds = runtime(wl)
            if seconds is not None:
                ends[wl.key] = end_at(wl.reserved_at or now, seconds)
    starts: dict[str, datetime] = {}
    ended: dict[int, list[str]] = {}  # per quota tree, the workloads that ended at t
    causes = causes if causes is not None else {}
    t = now
    rounds = 0  # preemption rounds at t
    for _ in range(max_steps):
        released = False
        for result in scheduler.run(snapshot, t):
            for adm in result.admitted:
                starts.setdefault(adm.workload.key, t)
                causes.setdefault(adm.workload.key, ended.get(id(trees[adm.cluster_queue]), []))
                seconds = runtime(adm.workload)
                if seconds is not None:
                    ends[adm.workload.key] = end_at(t, seconds)
            for pre in result.preempted:
                _requeue(snapshot, pre.victim)
                ends.pop(pre.victim.key, None)
                starts.pop(pre.victim.key, None)
                causes.pop(pre.victim.key, None)
                released = True
        if released:
            rounds += 1
            if rounds >= MAX_PREEMPTION_ROUNDS:  # victims preempting back at the same instant: stop the ping-pong
                _no_preemption(snapshot)
            scheduler.queues.flush()
            continue
        rounds = 0
        if t == now and not preempt_later:
            _no_preemption(snapshot)
        if not any(snapshot.pending.values()) or not ends:
            break
        t, batch = next_batch()
        if t > now + horizon:
            break
        touched: set[str] = set()
        ended = {}
        for key in batch:
            del ends[key]
            wl = snapshot.workloads[key]
            if wl.has_reservation and key in snapshot.cluster_queues[wl.cluster_queue].workloads:
                snapshot.remove_workload(wl)
                tree = id(trees[wl.cluster_queue])
                touched |= members[tree]
                ended.setdefault(tree, []).append(key)
        if not preempt_later:  # admission only: retry just the queues where some pending workload now has room
            touched = {name for name in touched if _room_for_one(snapshot, name)}
        scheduler.queues.flush(touched)
    return starts


def _room_for_one(snapshot: Snapshot, name: str) -> bool:
    """Whether some pending workload of the ClusterQueue could fit its free quota now, each resource it asks for in
    one of the flavors the queue has for it (necessary for an admission without preemption, and cheap)."""
    cq = snapshot.cluster_queues[name]
    pending = snapshot.pending.get(name)
    if not pending:
        return False
    for wl in pending:
        needs: dict[str, int] = {}
        for ps in wl.podsets:
            for resource, amount in ps.requests.items():
                needs[resource] = needs.get(resource, 0) + amount * ps.count
        fits = True
        for resource, amount in needs.items():
            group = cq.rg_for(resource)
            if group is None:
                continue  # not covered: quotaCheckStrategy decides; the scheduler will say
            if not any(available(cq, (flavor, resource)) >= amount for flavor in group.flavors):
                fits = False
                break
        if fits:
            return True
    return False


def _no_preemption(snapshot: Snapshot) -> None:
    for cq in snapshot.cluster_queues.values():
        cq.preemption = replace(cq.preemption, within_cluster_queue=C.NEVER, reclaim_within_cohort=C.NEVER,
                                borrow_within_cohort=C.NEVER)


def _root(cq: ClusterQueueNode) -> QuotaNode:
    node: QuotaNode = cq
    while node.parent is not None:
        node = node.parent
    return node


def _requeue(snapshot: Snapshot, wl: WorkloadInfo) -> None:
    """A preempted workload leaves its quota and waits in its queue again."""
    if wl.key in snapshot.cluster_queues[wl.cluster_queue].workloads:
        snapshot.remove_workload(wl)
    wl.reserved_at = None
    wl.evicted = False
    pending = snapshot.pending.setdefault(wl.cluster_queue, [])
    pending.append(wl)
    pending.sort(key=order_key)
