"""Pending workloads counted as Kueue's queue manager counts them (pkg/cache/queue): by where each one sits.

Kueue's manager holds, per LocalQueue it knows (one not stopped), its admissible workloads, and pushes them into
their ClusterQueue's queue: the active heap, or the inadmissible set for a workload the scheduler tried and could not
admit, or one still in backoff (Requeued=False, or status.requeueState.requeueAt not reached). kueue_pending_workloads
reports that split per ClusterQueue, kueue_local_queue_pending_workloads per LocalQueue, and both report a queue
whose ClusterQueue is not active (stopped, missing flavors or checks, terminating) as all inadmissible. So a
StrictFIFO head that does not fit, the workloads behind it and a preemptor waiting for its victims stay active, what
their QuotaReserved reason says notwithstanding. Which workloads the scheduler set aside comes from the Queues the
scheduler controller keeps (KueueState.queues), the same state visibility positions are read from.
"""

from __future__ import annotations

from datetime import datetime

from kubesim.kernel.protocols import PendingCounts
from kubesim.kernel.store import Store
from kubesim.kueue import constants as C
from kubesim.kueue.scheduler.model import condition_true, find_condition, is_admissible, parse_time
from kubesim.kueue.state import KueueState


def pending_counts(state: KueueState, store: Store) -> PendingCounts:
    """(active, inadmissible) per ClusterQueue and per LocalQueue of Kueue's queue manager."""
    now = store.clock.now()
    active_cqs = {cq["metadata"]["name"]: _active(cq) for cq in state.listed(store, "clusterqueues")}
    targets = {
        (lq["metadata"]["namespace"], lq["metadata"]["name"]): (lq.get("spec") or {}).get("clusterQueue", "")
        for lq in state.listed(store, "localqueues")
        if ((lq.get("spec") or {}).get("stopPolicy") or "None") == "None"
    }
    cq_counts = {name: [0, 0] for name in active_cqs}
    lq_counts = {key: [0, 0] for key in targets}
    set_aside = state.queues.inadmissible
    for wl in state.listed(store, "workloads"):
        md = wl["metadata"]
        key = (md["namespace"], (wl.get("spec") or {}).get("queueName", ""))
        cq = targets.get(key)
        if cq is None or cq not in active_cqs or not is_admissible(wl):
            continue
        inadmissible = (
            not active_cqs[cq]
            or in_backoff(wl, now)
            or f"{md['namespace']}/{md['name']}" in set_aside.get(cq, ())
        )
        cq_counts[cq][int(inadmissible)] += 1
        lq_counts[key][int(inadmissible)] += 1
    return PendingCounts(
        cluster_queues={name: (a, i) for name, (a, i) in cq_counts.items()},
        local_queues={key: (a, i) for key, (a, i) in lq_counts.items()},
    )


def in_backoff(wl: dict, now: datetime) -> bool:
    """Kueue keeps such a workload in the inadmissible set until its backoff is over (backoffWaitingTimeExpired)."""
    requeued = find_condition(wl, C.REQUEUED)
    if requeued is not None and requeued.get("status") == "False":
        return True
    at = parse_time(((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt"))
    return at is not None and at > now


def _active(cq: dict) -> bool:
    """What Kueue's status checker answers: the ClusterQueue's Active condition, and not terminating."""
    return not cq["metadata"].get("deletionTimestamp") and condition_true(cq, "Active")
