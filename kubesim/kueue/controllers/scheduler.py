"""Kueue's scheduler loop on kubesim's store: runs scheduling cycles on a kept snapshot and writes the decisions
(quota reservation, preemption, pending conditions and events) as Kueue's scheduler does."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import datetime

from kubesim.kernel.store import Store
from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.cache import ChangeGate
from kubesim.kueue.controllers.live_snapshot import QUEUE_CONFIG, SCHEDULING_INPUTS, LiveSnapshot
from kubesim.kueue.scheduler import Admission, Pending, Preemption, Queues, Scheduler, Snapshot, WorkloadInfo
from kubesim.kueue.scheduler.model import condition_true, entry_penalty, find_condition, parse_time
from kubesim.kueue.state import KueueState


def _fingerprint(state: KueueState, store: Store) -> str:
    """Changes to queues, cohorts, flavors or namespaces flush the inadmissible sets."""
    parts = []
    for resource in QUEUE_CONFIG:
        for obj in state.listed(store, resource):
            md = obj.get("metadata") or {}
            parts.append((resource, md.get("namespace"), md.get("name"), obj.get("spec"), md.get("labels")))
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def record_admitted(store: Store, obj: dict, cluster_queue: str, now: datetime) -> None:
    """The Admitted event, with the wait since the quota reservation."""
    reserved = parse_time((find_condition(obj, C.QUOTA_RESERVED) or {}).get("lastTransitionTime")) or now
    wait = round((now - reserved).total_seconds())
    message = f"Admitted by ClusterQueue {cluster_queue}, wait time since reservation was {wait}s"
    store.record_event(obj, "Normal", "Admitted", message, C.CONTROLLER_NAME)


def _held(wl: WorkloadInfo) -> tuple[str, int, tuple]:
    """What a reservation holds, as far as set-aside workloads care: where, at what priority, how much."""
    return wl.cluster_queue, wl.priority, tuple(sorted(wl.usage.items()))


def _root_name(snap: Snapshot, cq_name: str) -> str:
    cq = snap.cluster_queues.get(cq_name)
    return "" if cq is None else cq.root().name


class SchedulerController:
    """Runs scheduling cycles until nothing changes and writes the decisions as Kueue does."""

    name = "kueue-scheduler"

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self.config = state.config
        # workload key -> (ClusterQueue, priority, usage) of the reservations at the last pass
        self._reserving: dict[str, tuple[str, int, tuple]] = {}
        self._generations: dict[str, int] = {}
        self._fingerprint = ""
        self._gate = ChangeGate(SCHEDULING_INPUTS)
        self._live = LiveSnapshot(state)

    def next_deadline(self, store: Store) -> datetime | None:
        """Backoff expiries: a workload re-enters its queue at status.requeueState.requeueAt."""
        now = store.clock.now()
        best: datetime | None = None
        for key in self._live.backoff:
            ns, name = key.split("/", 1)
            wl = store.get("workloads", ns, name, copy=False) or {}
            at = parse_time(((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt"))
            if at is not None and at > now and (best is None or at < best):
                best = at
        return best

    def reconcile(self, store: Store) -> bool:
        if not self._gate.should_run(store):
            return False
        now = store.clock.now()
        queues = self.state.queues
        touched = self._live.refresh(store, now)
        snap = self._live.snap
        self._flush_on_events(store, snap, queues, touched)
        # The cycles leave the snapshot as the writes below make the store (reservations made, victims evicted, the
        # rest restored): the next refresh patches it with those writes as read back.
        results = Scheduler(self.config, queues).run(snap, now)
        wrote = False
        pending: dict[str, Pending] = {}
        for result in results:
            for adm in result.admitted:
                wrote = self._admit(store, adm, now) or wrote
            for pre in result.preempted:
                wrote = self._preempt(store, pre, now) or wrote
            for p in result.pending:
                pending[p.workload.key] = p
        for key, p in pending.items():
            if snap.workloads[key].has_reservation:
                continue
            wrote = self._set_pending(store, p.workload, p.reason, p.message, now, scheduled=p.evaluated) or wrote
        # Workloads neither written nor re-filed since the last pass already carry these conditions.
        for wl, reason, message in snap.orphans:
            if touched is None or wl.key in touched:
                wrote = self._set_pending(store, wl, reason, message, now) or wrote
        for cq_name, wls in snap.pending.items():
            cq = snap.cluster_queues.get(cq_name)
            if cq is not None and not cq.schedulable and (touched is None or cq_name in self._live.queues_touched):
                for wl in wls:
                    if touched is None or wl.key in touched:
                        msg = f"ClusterQueue {cq_name} is inactive"
                        wrote = self._set_pending(store, wl, C.REASON_SUSPENDED, msg, now) or wrote
        for result in results:
            for adm in result.admitted:
                self._reserving[adm.workload.key] = _held(adm.workload)
        return wrote

    def _flush_on_events(self, store: Store, snap: Snapshot, queues: Queues, touched: set[str] | None) -> None:
        if self._live.config_changed:  # status-only writes to queues do not change the fingerprint
            fingerprint = _fingerprint(self.state, store)
            if fingerprint != self._fingerprint:
                self._fingerprint = fingerprint
                queues.flush()
        if touched is not None:
            self._forget_touched(snap, queues, touched)
            return
        reserving = {k: _held(w) for k, w in snap.workloads.items() if w.has_reservation}
        self._flush_released(snap, queues, self._reserving.items(), reserving)
        self._reserving = reserving
        pending_keys: dict[str, set[str]] = {}
        for cq_name, wls in snap.pending.items():
            pending_keys[cq_name] = {w.key for w in wls}
            for w in wls:
                if self._generations.get(w.key, w.generation) != w.generation:
                    queues.forget(w.key)
        self._generations = {k: w.generation for k, w in snap.workloads.items()}
        for cq_name in list(queues.inadmissible):
            queues.inadmissible[cq_name] &= pending_keys.get(cq_name, set())
        for cq_name, key in list(queues.sticky.items()):
            if key not in pending_keys.get(cq_name, set()):
                del queues.sticky[cq_name]

    def _flush_released(
        self, snap: Snapshot, queues: Queues, before: Iterable[tuple[str, tuple]], now: dict[str, tuple]
    ) -> None:
        """A released reservation, a priority change of a workload holding one (its Job's priority class changed) or
        a smaller one (reclaimable pods) may let a set-aside workload in the same tree in: flush that tree. before:
        (key, what it held) at the last pass, for the workloads to compare; now: what they hold now."""
        changed_roots = {_root_name(snap, held[0]) for key, held in before if now.get(key) != held}
        if changed_roots:
            queues.flush({name for name, cq in snap.cluster_queues.items() if cq.root().name in changed_roots})

    def _forget_touched(self, snap: Snapshot, queues: Queues, touched: set[str]) -> None:
        """_flush_on_events for a patched snapshot: only the touched workloads can have changed their reservation,
        left a queue or changed generation."""
        reserving = {k: _held(w) for k in touched if (w := snap.workloads.get(k)) is not None and w.has_reservation}
        self._flush_released(snap, queues, [(k, self._reserving[k]) for k in touched if k in self._reserving],
                             reserving)
        for key in touched:
            if key in reserving:
                self._reserving[key] = reserving[key]
            else:
                self._reserving.pop(key, None)
        where = {}
        for key in touched:
            wl = snap.workloads.get(key)
            if wl is not None and wl in snap.pending.get(wl.cluster_queue, ()):
                where[key] = wl.cluster_queue
        for key in touched:
            wl = snap.workloads.get(key)
            if wl is None:
                self._generations.pop(key, None)
                continue
            if key in where and self._generations.get(key, wl.generation) != wl.generation:
                queues.forget(key)
            self._generations[key] = wl.generation
        for cq_name, aside in queues.inadmissible.items():
            aside -= {k for k in touched if where.get(k) != cq_name}
        for cq_name, key in list(queues.sticky.items()):
            if key in touched and where.get(key) != cq_name:
                del queues.sticky[cq_name]

    def _set_pending(
        self, store: Store, wl: WorkloadInfo, reason: str, message: str, now: datetime, scheduled: bool = False
    ) -> bool:
        """QuotaReserved=False with reason and message; a scheduler verdict (scheduled) also records the
        requests and an event."""
        seen = wl.obj
        if condition_true(seen, C.QUOTA_RESERVED):
            return False
        requests = wl.resource_requests() if scheduled else None
        qr, adm = find_condition(seen, C.QUOTA_RESERVED), find_condition(seen, C.ADMITTED)
        status = seen.get("status") or {}
        if (
            qr is not None
            and (qr.get("status"), qr.get("reason"), qr.get("message")) == ("False", reason, message)
            and adm is not None
            and adm.get("status") == "False"
            and status.get("admission") is None
            and (requests is None or status.get("resourceRequests") == requests)
        ):
            return False  # already says so: no copy, no write
        md = seen["metadata"]
        obj = store.get("workloads", md["namespace"], md["name"])
        if obj is None or condition_true(obj, C.QUOTA_RESERVED):
            return False
        if not ws.set_pending(obj, reason, message, now, requests):
            return False
        store.update_status("workloads", obj)
        if scheduled:
            store.record_event(obj, "Warning", reason, message, C.CONTROLLER_NAME)
        return True

    def _admit(self, store: Store, adm: Admission, now: datetime) -> bool:
        md = adm.workload.obj["metadata"]
        obj = store.get("workloads", md["namespace"], md["name"])
        if obj is None:
            return False
        requeued = find_condition(obj, C.REQUEUED)
        queued_at = parse_time((requeued or {}).get("lastTransitionTime")) or adm.workload.creation
        cq = self._live.snap.cluster_queues.get(adm.cluster_queue)
        checks = cq.checks_for(adm.podset_assignments) if cq is not None else []
        ws.set_quota_reservation(obj, adm.cluster_queue, adm.podset_assignments, now, checks)
        store.update_status("workloads", obj)
        wait = round((now - queued_at).total_seconds())
        store.record_event(
            obj,
            "Normal",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {adm.cluster_queue}, wait time since queued was {wait}s",
            C.CONTROLLER_NAME,
        )
        if cq is not None and cq.admission_fair_sharing:
            lq_key = (adm.workload.namespace, adm.workload.queue_name)
            self.state.push_penalty(lq_key, adm.workload.key, entry_penalty(adm.workload, self.config))
        if condition_true(obj, C.ADMITTED):  # else the admission checks controller admits it once all are Ready
            record_admitted(store, obj, adm.cluster_queue, now)
        return True

    def _preempt(self, store: Store, pre: Preemption, now: datetime) -> bool:
        md = pre.victim.obj["metadata"]
        obj = store.get("workloads", md["namespace"], md["name"])
        if obj is None or condition_true(obj, C.EVICTED):
            return False
        ws.preempt(obj, pre.reason, pre.message, now)
        store.update_status("workloads", obj)
        prio = (
            f"; preemptor effective priority: {pre.preemptor.priority} (base: {pre.preemptor.priority}, boost: 0); "
            f"preemptee effective priority: {pre.victim.priority} (base: {pre.victim.priority}, boost: 0)"
        )
        store.record_event(obj, "Normal", "EvictedDueToPreempted", pre.message, C.CONTROLLER_NAME)
        store.record_event(obj, "Normal", "Preempted", pre.message + prio, C.CONTROLLER_NAME)
        store.record_event(
            pre.preemptor.obj,
            "Normal",
            "PreemptedWorkload",
            f"Preempted workload {md['namespace']}/{md['name']} (UID: {md.get('uid')}) in ClusterQueue "
            f"{pre.victim_cq}{prio}",
            C.CONTROLLER_NAME,
        )
        return True
