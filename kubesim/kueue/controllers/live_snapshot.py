"""A scheduler Snapshot kept across controller passes and patched with what changed (kubesim's own optimisation:
Kueue keeps an equivalent cache up to date from informer events)."""

from __future__ import annotations

import bisect
from datetime import datetime

from kubesim.kernel.store import Store
from kubesim.kueue.cache import Changes
from kubesim.kueue.scheduler import Snapshot
from kubesim.kueue.scheduler.model import ClusterQueueNode, WorkloadInfo, local_queue_usage, order_key, workload_info
from kubesim.kueue.scheduler.quota import add_usage, remove_usage
from kubesim.kueue.state import KueueState

QUEUE_CONFIG = ("resourceflavors", "cohorts", "clusterqueues", "localqueues", "namespaces", "admissionchecks")
SCHEDULING_INPUTS = {"workloads", *QUEUE_CONFIG}
# Status-only writes to these do not change what the scheduler sees (an AdmissionCheck's Active condition does).
_STATUS_IGNORED = tuple(r for r in QUEUE_CONFIG if r != "admissionchecks")


class LiveSnapshot:
    """A Snapshot kept across passes: rebuilt in full when queue configuration or the history changed, otherwise
    patched with the workloads written since the last refresh, so a pass costs what changed: a pending workload is
    filed in (or taken out of) its queue, a reservation's usage is added to (or taken from) its ClusterQueue and
    that quota tree's cohort usage is summed again, as a full build would."""

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self.config = state.config
        self._snap: Snapshot | None = None
        self._changes = Changes("workloads", *QUEUE_CONFIG, status_only=_STATUS_IGNORED)
        self._now: datetime | None = None
        self._backoff: set[str] = set()  # workloads with status.requeueState.requeueAt: time changes their place
        self.config_changed = True  # whether the last refresh saw queue configuration (not status) change
        self._afs_epoch = -1
        # After a patch: the ClusterQueues and (namespace, LocalQueue) whose pending workloads may have changed.
        self.queues_touched: set[str] = set()
        self.local_queues_touched: set[tuple[str, str]] = set()
        self.cohorts_touched: set[str] = set()  # the cohorts above a ClusterQueue whose reservations changed

    @property
    def backoff(self) -> set[str]:
        """The workloads with status.requeueState.requeueAt, as of the last refresh()."""
        return self._backoff

    @property
    def snap(self) -> Snapshot:
        """The snapshot as of the last refresh()."""
        if self._snap is None:
            raise RuntimeError("LiveSnapshot.refresh() has not run yet")
        return self._snap

    def refresh(self, store: Store, now: datetime | None) -> set[str] | None:
        """Bring the snapshot up to date; returns the workload keys it patched, or None after a full build."""
        changes = self._changes.since_last(store)
        moved, self._now = now != self._now, now
        self.config_changed = changes is None or any(changes[r] for r in QUEUE_CONFIG)
        usage_moved = self._afs_epoch != self.state.afs_epoch  # Admission Fair Sharing usage was sampled
        if changes is None or self._snap is None or self.config_changed or usage_moved:
            self._rebuild(store, now)
            return None
        self.queues_touched, self.local_queues_touched = set(), set()
        objs = {f"{ns}/{name}": store.get("workloads", ns, name, copy=False) for ns, name in changes["workloads"]}
        if moved and now is not None:
            for key in self._backoff:
                ns, name = key.split("/", 1)
                objs.setdefault(key, store.get("workloads", ns, name, copy=False))
        infos = {k: None if o is None else workload_info(o, self.config, self.state.parsed) for k, o in objs.items()}
        snap = self._snap
        self.cohorts_touched = set()
        for key, wl in sorted(infos.items(), key=lambda kv: _store_order(kv[0])):
            self._remove(snap, key)
            if wl is not None:
                self._add(snap, wl, now)
        if self.config.admission_fair_sharing is not None:
            # As from_objects computes them: the LocalQueue's sampled usage plus its entry penalties so far.
            for lq_key in self.local_queues_touched:
                lq = snap.local_queues.get(lq_key)
                if lq is not None:
                    snap.lq_usage[lq_key] = local_queue_usage(lq, self.config, self.state.afs_penalty.get(lq_key))
        return set(infos)

    def _rebuild(self, store: Store, now: datetime | None) -> None:
        snap = self._snap = self.state.snapshot(store, now)
        self._afs_epoch = self.state.afs_epoch
        self._backoff = {k for k, w in snap.workloads.items() if w.requeue_at is not None}

    def _remove(self, snap: Snapshot, key: str) -> None:
        old = snap.workloads.pop(key, None)
        self._backoff.discard(key)
        if old is None:
            return
        self.queues_touched.add(old.cluster_queue)
        self.local_queues_touched.add((old.namespace, old.queue_name))
        holder = snap.cluster_queues.get(old.cluster_queue)
        if holder is not None and holder.workloads.get(key) is old:
            del holder.workloads[key]
            holder.touched()
            self._charge(holder, old.usage, -1)
            return
        lst = snap.pending.get(old.cluster_queue)
        if lst is not None:  # kept in order_key order, which is unique (it ends with the uid)
            at = bisect.bisect_left(lst, order_key(old), key=order_key)
            if at < len(lst) and lst[at] is old:
                del lst[at]
        snap.orphans[:] = [o for o in snap.orphans if o[0] is not old]

    def _add(self, snap: Snapshot, wl: WorkloadInfo, now: datetime | None) -> None:
        """As Snapshot.from_objects files a workload without a reservation."""
        snap.workloads[wl.key] = wl
        if wl.requeue_at is not None:
            self._backoff.add(wl.key)
        if wl.has_reservation:
            holder = snap.cluster_queues.get(wl.cluster_queue)
            self.local_queues_touched.add((wl.namespace, wl.queue_name))
            if holder is not None:
                holder.workloads[wl.key] = wl
                holder.touched()
                self._charge(holder, wl.usage, 1)
                self.queues_touched.add(holder.name)
            return
        if not wl.admissible:
            return
        reason, message = snap.queue_blocker(wl)
        if reason:
            at = bisect.bisect([_store_order(o[0].key) for o in snap.orphans], _store_order(wl.key))
            snap.orphans.insert(at, (wl, reason, message))
            self.local_queues_touched.add((wl.namespace, wl.queue_name))  # its LocalQueue may still count it
            return
        wl.cluster_queue = snap.cluster_queue_for(wl)
        self.queues_touched.add(wl.cluster_queue)
        self.local_queues_touched.add((wl.namespace, wl.queue_name))
        if now is not None and wl.requeue_at is not None and wl.requeue_at > now:
            return
        lst = snap.pending.setdefault(wl.cluster_queue, [])
        lst.insert(bisect.bisect(lst, order_key(wl), key=order_key), wl)

    def _charge(self, cq: ClusterQueueNode, usage: dict, sign: int) -> None:
        """A reservation's usage added to (sign 1) or taken from (-1) its ClusterQueue, the part beyond each node's
        local quota carried up the tree as Kueue's cache does (the cohort usage a full build sums, update_tree)."""
        for fr, v in usage.items():
            if sign > 0:
                add_usage(cq, fr, v)
            else:
                remove_usage(cq, fr, v)
            if not cq.usage.get(fr):
                cq.usage.pop(fr, None)  # as a full build leaves it: no entry for what nothing reserves
        self.cohorts_touched.update(cohort.name for cohort in cq.path_to_root())


def _store_order(key: str) -> tuple[str, str]:
    ns, name = key.split("/", 1)
    return ns, name
