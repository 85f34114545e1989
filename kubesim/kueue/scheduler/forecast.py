"""Start-time forecasts: replay the scheduler forward in time on a snapshot, finishing workloads at their estimated
run times and releasing preempted ones at once. For the portal's "when will my job start" estimates; no ETA is
exact (Kueue's own KEP declines to give one), so callers should present these as estimates.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler.model import Snapshot, WorkloadInfo, order_key
from kubesim.kueue.scheduler.scheduler import Scheduler


def forecast(
    snapshot: Snapshot,
    runtime: Callable[[WorkloadInfo], float | None],
    now: datetime,
    *,
    config: KueueConfig | None = None,
    horizon: timedelta = timedelta(days=7),
    max_steps: int = 10000,
) -> dict[str, datetime]:
    """Estimated reservation time per pending (and re-queued) workload key, within the horizon.

    runtime(workload) gives the seconds a workload runs once admitted, or None when it is not known (it then holds
    its quota to the end of the replay); running workloads are assumed to have started at their reservation time.
    The snapshot is consumed (mutated).
    """
    scheduler = Scheduler(config)
    ends: dict[str, datetime] = {}
    for cq in snapshot.cluster_queues.values():
        for wl in cq.workloads.values():
            seconds = runtime(wl)
            if seconds is not None:
                ends[wl.key] = max(now, (wl.reserved_at or now) + timedelta(seconds=seconds))
    starts: dict[str, datetime] = {}
    t = now
    for _ in range(max_steps):
        released = False
        for result in scheduler.run(snapshot, t):
            for adm in result.admitted:
                starts.setdefault(adm.workload.key, t)
                seconds = runtime(adm.workload)
                if seconds is not None:
                    ends[adm.workload.key] = t + timedelta(seconds=seconds)
            for pre in result.preempted:
                _requeue(snapshot, pre.victim)
                ends.pop(pre.victim.key, None)
                starts.pop(pre.victim.key, None)
                released = True
        if released:
            scheduler.queues.flush()
            continue
        if not any(snapshot.pending.values()) or not ends:
            break
        t = min(ends.values())
        if t > now + horizon:
            break
        for key in [k for k, end in ends.items() if end <= t]:
            del ends[key]
            wl = snapshot.workloads[key]
            if wl.has_reservation and key in snapshot.cluster_queues[wl.cluster_queue].workloads:
                snapshot.remove_workload(wl)
        scheduler.queues.flush()
    return starts


def _requeue(snapshot: Snapshot, wl: WorkloadInfo) -> None:
    """A preempted workload leaves its quota and waits in its queue again."""
    if wl.key in snapshot.cluster_queues[wl.cluster_queue].workloads:
        snapshot.remove_workload(wl)
    wl.reserved_at = None
    wl.evicted = False
    pending = snapshot.pending.setdefault(wl.cluster_queue, [])
    pending.append(wl)
    pending.sort(key=order_key)
