"""The visibility API's PendingWorkloadsSummary, with positions in Kueue's queue order (pkg/visibility).

Positions come from the same queue state the scheduler controller keeps (the KueueState's Queues: inadmissible
sets, sticky preemptor), so they agree with the order the scheduler admits in.
"""

from __future__ import annotations

from kubesim.kernel.store import Store
from kubesim.kueue.scheduler import WorkloadInfo
from kubesim.kueue.state import KueueState

MAX_LIMIT = 100000


def _item(wl: WorkloadInfo, position_cq: int, position_lq: int) -> dict:
    md = wl.obj.get("metadata") or {}
    meta = {"name": wl.name, "namespace": wl.namespace, "creationTimestamp": md.get("creationTimestamp")}
    if md.get("ownerReferences"):
        meta["ownerReferences"] = md["ownerReferences"]
    return {
        "metadata": meta,
        "priority": wl.priority,
        "localQueueName": wl.queue_name,
        "positionInClusterQueue": position_cq,
        "positionInLocalQueue": position_lq,
    }


def pending_workloads(
    state: KueueState,
    store: Store,
    *,
    cluster_queue: str | None = None,
    namespace: str | None = None,
    local_queue: str | None = None,
    limit: int = 1000,
    offset: int = 0,
) -> dict:
    """All pending workloads of a ClusterQueue (or of one LocalQueue of it), heap, inadmissible and backoff alike."""
    snap = state.snapshot(store, None)
    if cluster_queue is None and local_queue is not None:
        lq = store.get("localqueues", namespace, local_queue)
        cluster_queue = ((lq or {}).get("spec") or {}).get("clusterQueue")
    ordered = state.queues.ordered(snap, cluster_queue) if cluster_queue else []
    per_lq: dict[tuple[str, str], int] = {}
    items = []
    for i, wl in enumerate(ordered):
        lq_key = (wl.namespace, wl.queue_name)
        pos_lq = per_lq.get(lq_key, 0)
        per_lq[lq_key] = pos_lq + 1
        if local_queue is not None and lq_key != (namespace, local_queue):
            continue
        items.append(_item(wl, i, pos_lq))
    limit = max(0, min(limit, MAX_LIMIT))
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "metadata": {},
        "items": items[offset : offset + limit],
    }
