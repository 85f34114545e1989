"""A scheduler Snapshot kept across controller passes and patched with what changed (kubesim's own optimisation:
Kueue keeps an equivalent cache up to date from informer events)."""

from __future__ import annotations

import bisect
from datetime import datetime

from kubesim.kernel.store import Store
from kubesim.kueue.cache import Changes
from kubesim.kueue.scheduler import Snapshot
from kubesim.kueue.scheduler.model import WorkloadInfo, order_key, workload_info
from kubesim.kueue.state import KueueState

QUEUE_CONFIG = ("resourceflavors", "cohorts", "clusterqueues", "localqueues", "namespaces", "admissionchecks")
SCHEDULING_INPUTS = {"workloads", *QUEUE_CONFIG}
# Status-only writes to these do not change what the scheduler sees (an AdmissionCheck's Active condition does).
_STATUS_IGNORED = tuple(r for r in QUEUE_CONFIG if r != "admissionchecks")


class LiveSnapshot:
    """A Snapshot kept across passes: rebuilt in full when queue configuration, a reservation or the history
    changed (or the owner marked it stale), otherwise patched with the pending workloads written since the last
    refresh, so a pass that only sees new or re-marked pending workloads costs what changed."""

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self.config = state.config
        self._snap: Snapshot | None = None
        self.stale = True
        self._changes = Changes("workloads", *QUEUE_CONFIG, status_only=_STATUS_IGNORED)
        self._now: datetime | None = None
        self._backoff: set[str] = set()  # workloads with status.requeueState.requeueAt: time changes their place
        self.config_changed = True  # whether the last refresh saw queue configuration (not status) change
        self._afs_epoch = -1
        # After a patch: the ClusterQueues and (namespace, LocalQueue) whose pending workloads may have changed.
        self.queues_touched: set[str] = set()
        self.local_queues_touched: set[tuple[str, str]] = set()

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
        if changes is None or self._snap is None or self.stale or self.config_changed or usage_moved:
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
        if any(w is not None and w.has_reservation for w in [*infos.values(), *map(snap.workloads.get, infos)]):
            self._rebuild(store, now)
            return None
        for key, wl in sorted(infos.items(), key=lambda kv: _store_order(kv[0])):
            self._remove(snap, key)
            if wl is not None:
                self._add(snap, wl, now)
        return set(infos)

    def _rebuild(self, store: Store, now: datetime | None) -> None:
        snap = self._snap = self.state.snapshot(store, now)
        self.stale = False
        self._afs_epoch = self.state.afs_epoch
        self._backoff = {k for k, w in snap.workloads.items() if w.requeue_at is not None}

    def _remove(self, snap: Snapshot, key: str) -> None:
        old = snap.workloads.pop(key, None)
        self._backoff.discard(key)
        if old is None:
            return
        self.queues_touched.add(old.cluster_queue)
        self.local_queues_touched.add((old.namespace, old.queue_name))
        lst = snap.pending.get(old.cluster_queue)
        if lst is not None and old in lst:
            lst.remove(old)
        snap.orphans[:] = [o for o in snap.orphans if o[0] is not old]

    def _add(self, snap: Snapshot, wl: WorkloadInfo, now: datetime | None) -> None:
        """As Snapshot.from_objects files a workload without a reservation."""
        snap.workloads[wl.key] = wl
        if wl.requeue_at is not None:
            self._backoff.add(wl.key)
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
        lst.insert(bisect.bisect([order_key(w) for w in lst], order_key(wl)), wl)


def _store_order(key: str) -> tuple[str, str]:
    ns, name = key.split("/", 1)
    return ns, name
