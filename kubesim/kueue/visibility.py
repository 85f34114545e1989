"""The visibility API's PendingWorkloadsSummary, with positions in Kueue's queue order (pkg/visibility).

Positions come from the same queue state the scheduler controller keeps (the KueueState's Queues: inadmissible
sets, sticky preemptor), so they agree with the order the scheduler admits in. `PendingOrder` keeps the answer
between asks: a snapshot patched with the workloads written since (LiveSnapshot), and each ClusterQueue's ordered
positions until a write touches that queue, so a client asking every few seconds costs a page, not a rebuild of
every workload under the store's lock.
"""

from __future__ import annotations

from kubesim.kernel.store import Store
from kubesim.kueue.controllers.live_snapshot import LiveSnapshot
from kubesim.kueue.scheduler import WorkloadInfo
from kubesim.kueue.state import KueueState

MAX_LIMIT = 100000

Positioned = tuple[WorkloadInfo, int, int]  # a pending workload, its position in its ClusterQueue, in its LocalQueue


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


class PendingOrder:
    """Each ClusterQueue's pending workloads with their positions (and each LocalQueue's share of them), kept until
    a write touches the queue, its sticky preemptor changes, or queue configuration changes. Admission Fair Sharing
    orders by every LocalQueue's usage, so its ClusterQueues are ordered afresh on each ask. Callers hold the store's
    lock."""

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self.live = LiveSnapshot(state)  # now=None: workloads in backoff stay in their queues, as Kueue shows them
        self.by_cluster_queue: dict[str, tuple[str | None, list[Positioned]]] = {}  # cq -> (sticky, positions)
        self.by_local_queue: dict[tuple[str, str, str], list[Positioned]] = {}  # (cq, namespace, lq) -> positions

    def positions(self, store: Store, cluster_queue: str, local_queue: tuple[str, str] | None) -> list[Positioned]:
        """The pending workloads of cluster_queue in order (of its LocalQueue (namespace, name) only, if given)."""
        if self.live.refresh(store, None) is None:
            self.by_cluster_queue.clear()
            self.by_local_queue.clear()
        else:
            for touched in self.live.queues_touched:
                self._forget(touched)
        sticky = self.state.queues.sticky.get(cluster_queue)
        node = self.live.snap.cluster_queues.get(cluster_queue)
        kept = self.by_cluster_queue.get(cluster_queue)
        if kept is None or kept[0] != sticky or (node is not None and node.admission_fair_sharing):
            self._forget(cluster_queue)
            kept = self.by_cluster_queue[cluster_queue] = (sticky, self._order(cluster_queue))
        if local_queue is None:
            return kept[1]
        key = (cluster_queue, *local_queue)
        if key not in self.by_local_queue:
            self.by_local_queue[key] = [p for p in kept[1] if (p[0].namespace, p[0].queue_name) == local_queue]
        return self.by_local_queue[key]

    def _order(self, cluster_queue: str) -> list[Positioned]:
        per_lq: dict[tuple[str, str], int] = {}
        out = []
        for i, wl in enumerate(self.state.queues.ordered(self.live.snap, cluster_queue)):
            lq_key = (wl.namespace, wl.queue_name)
            pos_lq = per_lq.get(lq_key, 0)
            per_lq[lq_key] = pos_lq + 1
            out.append((wl, i, pos_lq))
        return out

    def _forget(self, cluster_queue: str) -> None:
        self.by_cluster_queue.pop(cluster_queue, None)
        for key in [key for key in self.by_local_queue if key[0] == cluster_queue]:
            del self.by_local_queue[key]


def pending_workloads(
    order: PendingOrder,
    store: Store,
    *,
    cluster_queue: str | None = None,
    namespace: str | None = None,
    local_queue: str | None = None,
    limit: int = 1000,
    offset: int = 0,
) -> dict:
    """All pending workloads of a ClusterQueue (or of one LocalQueue of it), heap, inadmissible and backoff alike."""
    if cluster_queue is None and local_queue is not None:
        lq = store.get("localqueues", namespace, local_queue, copy=False)
        cluster_queue = ((lq or {}).get("spec") or {}).get("clusterQueue")
    positioned: list[Positioned] = []
    if cluster_queue:
        positioned = order.positions(store, cluster_queue, (namespace or "", local_queue) if local_queue else None)
    limit = max(0, min(limit, MAX_LIMIT))
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "metadata": {},
        "items": [_item(*p) for p in positioned[offset : offset + limit]],
    }
