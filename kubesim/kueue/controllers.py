"""Kueue's controllers on kubesim's store: the scheduler loop, the Workload lifecycle (deactivation, backoff,
waitForPodsReady, maximum execution time, stop policies) and the ClusterQueue / LocalQueue / Cohort status."""

from __future__ import annotations

import bisect
import hashlib
import json
import weakref
from datetime import datetime, timedelta

from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.cache import ChangeGate, Changes, Key, clone, listed
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.jobs import JobIntegration
from kubesim.kueue.scheduler import Queues, Scheduler, Snapshot
from kubesim.kueue.scheduler.model import (
    WorkloadInfo,
    condition_true,
    find_condition,
    is_active,
    is_finished,
    order_key,
    parse_time,
    workload_info,
)
from kubesim.kueue.scheduler.quota import dominant_resource_share
from kubesim.quantity import format_amount

QUEUE_CONFIG = ("resourceflavors", "cohorts", "clusterqueues", "localqueues", "namespaces")
SCHEDULING_INPUTS = {"workloads", "clusterqueues", "cohorts", "localqueues", "resourceflavors", "namespaces"}

# Queue state and configuration per store, so visibility() orders pending workloads exactly as the scheduler does.
_QUEUES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CONFIGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def config_for(store) -> KueueConfig:
    return _CONFIGS.get(store) or KueueConfig.default()


def queues_for(store) -> Queues:
    queues = _QUEUES.get(store)
    if queues is None:
        queues = _QUEUES[store] = Queues()
    return queues


def build_snapshot(store, config: KueueConfig, now: datetime | None) -> Snapshot:
    return Snapshot.from_objects(
        resource_flavors=listed(store, "resourceflavors"),
        cohorts=listed(store, "cohorts"),
        cluster_queues=listed(store, "clusterqueues"),
        local_queues=listed(store, "localqueues"),
        workloads=listed(store, "workloads"),
        namespaces=listed(store, "namespaces"),
        config=config,
        now=now,
    )


class LiveSnapshot:
    """A Snapshot kept across passes: rebuilt in full when queue configuration, a reservation or the history
    changed (or the owner marked it stale), otherwise patched with the pending workloads written since the last
    refresh, so a pass that only sees new or re-marked pending workloads costs what changed."""

    def __init__(self, config: KueueConfig) -> None:
        self.config = config
        self.snap: Snapshot | None = None
        self.stale = True
        self._changes = Changes("workloads", *QUEUE_CONFIG, status_only=QUEUE_CONFIG)
        self._now: datetime | None = None
        self._backoff: set[str] = set()  # workloads with status.requeueState.requeueAt: time changes their place
        self.config_changed = True  # whether the last refresh saw queue configuration (not status) change
        # After a patch: the ClusterQueues and (namespace, LocalQueue) whose pending workloads may have changed.
        self.queues_touched: set[str] = set()
        self.local_queues_touched: set[tuple[str, str]] = set()

    def refresh(self, store, now: datetime | None) -> set[str] | None:
        """Bring the snapshot up to date; returns the workload keys it patched, or None after a full build."""
        changes = self._changes.since_last(store)
        moved, self._now = now != self._now, now
        self.config_changed = changes is None or any(changes[r] for r in QUEUE_CONFIG)
        if self.snap is None or self.stale or self.config_changed:
            return self._rebuild(store, now)
        self.queues_touched, self.local_queues_touched = set(), set()
        objs = {f"{ns}/{name}": store.get("workloads", ns, name, copy=False) for ns, name in changes["workloads"]}
        if moved and now is not None:
            for key in self._backoff:
                ns, name = key.split("/", 1)
                objs.setdefault(key, store.get("workloads", ns, name, copy=False))
        infos = {k: None if o is None else workload_info(o, self.config) for k, o in objs.items()}
        snap = self.snap
        if any(w is not None and w.has_reservation for w in [*infos.values(), *map(snap.workloads.get, infos)]):
            return self._rebuild(store, now)
        for key, wl in sorted(infos.items(), key=lambda kv: _store_order(kv[0])):
            self._remove(snap, key)
            if wl is not None:
                self._add(snap, wl, now)
        return set(infos)

    def _rebuild(self, store, now: datetime | None) -> None:
        self.snap = build_snapshot(store, self.config, now)
        self.stale = False
        self._backoff = {k for k, w in self.snap.workloads.items() if w.requeue_at is not None}
        return None

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


def _fingerprint(store) -> str:
    """Changes to queues, cohorts, flavors or namespaces flush the inadmissible sets."""
    parts = []
    for resource in QUEUE_CONFIG:
        for obj in listed(store, resource):
            md = obj.get("metadata") or {}
            parts.append((resource, md.get("namespace"), md.get("name"), obj.get("spec"), md.get("labels")))
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _root_name(snap: Snapshot, cq_name: str) -> str:
    cq = snap.cluster_queues.get(cq_name)
    return "" if cq is None else cq.root().name


class SchedulerController:
    """Runs scheduling cycles until nothing changes and writes the decisions as Kueue does."""

    name = "kueue-scheduler"

    def __init__(self, config: KueueConfig) -> None:
        self.config = config
        self._reserving: dict[str, str] = {}  # workload key -> ClusterQueue, after the last reconcile
        self._generations: dict[str, int] = {}
        self._fingerprint = ""
        self._gate = ChangeGate(SCHEDULING_INPUTS)
        self._live = LiveSnapshot(config)

    def next_deadline(self, store) -> datetime | None:
        """Backoff expiries: a workload re-enters its queue at status.requeueState.requeueAt."""
        now = store.clock.now()
        best = None
        for wl in listed(store, "workloads"):
            at = parse_time(((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt"))
            if at is not None and at > now and (best is None or at < best):
                best = at
        return best

    def reconcile(self, store) -> bool:
        if not self._gate.should_run(store):
            return False
        now = store.clock.now()
        queues = queues_for(store)
        _CONFIGS[store] = self.config
        touched = self._live.refresh(store, now)
        snap = self._live.snap
        self._flush_on_events(store, snap, queues, touched)
        results = [] if self._blocked(snap) else Scheduler(self.config, queues).run(snap, now)
        # A cycle that looked at a head may have changed the snapshot (admissions, preemption trials).
        acted = any(r.admitted or r.preempted or r.pending or r.moved_aside for r in results)
        self._live.stale = acted
        wrote = False
        pending = {}
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
        if touched is None or acted:
            self._reserving = {k: w.cluster_queue for k, w in snap.workloads.items() if w.has_reservation}
        return wrote

    def _blocked(self, snap: Snapshot) -> bool:
        """waitForPodsReady.blockAdmission: no admission while an admitted workload's pods are not ready."""
        wfpr = self.config.wait_for_pods_ready
        if not (wfpr.enable and wfpr.block_admission):
            return False
        return any(
            w.has_reservation and not condition_true(w.obj, C.PODS_READY) and not w.evicted
            for w in snap.workloads.values()
        )

    def _flush_on_events(self, store, snap: Snapshot, queues: Queues, touched: set[str] | None) -> None:
        if self._live.config_changed:  # status-only writes to queues do not change the fingerprint
            fingerprint = _fingerprint(store)
            if fingerprint != self._fingerprint:
                self._fingerprint = fingerprint
                queues.flush()
        if touched is not None:
            self._forget_touched(snap, queues, touched)
            return
        reserving = {k for k, w in snap.workloads.items() if w.has_reservation}
        released_roots = {_root_name(snap, cq) for k, cq in self._reserving.items() if k not in reserving}
        if released_roots:
            queues.flush({name for name, cq in snap.cluster_queues.items() if cq.root().name in released_roots})
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

    def _forget_touched(self, snap: Snapshot, queues: Queues, touched: set[str]) -> None:
        """_flush_on_events for a patched snapshot: reservations did not change, so only the touched workloads can
        have left a queue or changed generation."""
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

    def _set_pending(self, store, wl, reason: str, message: str, now: datetime, scheduled: bool = False) -> bool:
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

    def _admit(self, store, adm, now: datetime) -> bool:
        md = adm.workload.obj["metadata"]
        obj = store.get("workloads", md["namespace"], md["name"])
        if obj is None:
            return False
        requeued = find_condition(obj, C.REQUEUED)
        queued_at = parse_time((requeued or {}).get("lastTransitionTime")) or adm.workload.creation
        ws.set_quota_reservation(obj, adm.cluster_queue, adm.podset_assignments, now)
        store.update_status("workloads", obj)
        wait = round((now - queued_at).total_seconds())
        store.record_event(
            obj,
            "Normal",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {adm.cluster_queue}, wait time since queued was {wait}s",
            C.CONTROLLER_NAME,
        )
        store.record_event(
            obj,
            "Normal",
            "Admitted",
            f"Admitted by ClusterQueue {adm.cluster_queue}, wait time since reservation was 0s",
            C.CONTROLLER_NAME,
        )
        return True

    def _preempt(self, store, pre, now: datetime) -> bool:
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


def pods_ready_deadline(wl: dict, admitted_since: datetime, wfpr) -> tuple[datetime | None, str]:
    """When an admitted workload without ready pods times out, and the underlying cause: WaitForStart counts from
    admission with timeout, WaitForRecovery (a pod failed after start) from that transition with recoveryTimeout."""
    cond = find_condition(wl, C.PODS_READY)
    if cond is not None and cond.get("reason") == "WaitForRecovery":
        if wfpr.recovery_timeout_seconds is None:
            return None, "WaitForRecovery"
        since = parse_time(cond.get("lastTransitionTime")) or admitted_since
        return since + timedelta(seconds=wfpr.recovery_timeout_seconds), "WaitForRecovery"
    return admitted_since + timedelta(seconds=wfpr.timeout_seconds), "WaitForStart"


class WorkloadController:
    """Workload lifecycle outside scheduling: deactivation and reactivation, requeue backoff, waitForPodsReady
    timeouts, maximumExecutionTimeSeconds and ClusterQueue / LocalQueue HoldAndDrain."""

    name = "kueue-workload-controller"

    def __init__(self, config: KueueConfig) -> None:
        self.config = config
        self._gate = ChangeGate({"workloads", "clusterqueues", "localqueues"})
        self._changes = Changes(
            "workloads", "clusterqueues", "localqueues", status_only=("clusterqueues", "localqueues")
        )
        self._timed: set[Key] = set()  # workloads whose next action waits for the clock (see _waits)
        self._now: datetime | None = None

    def next_deadline(self, store) -> datetime | None:
        now = store.clock.now()
        deadlines = []
        wfpr = self.config.wait_for_pods_ready
        for wl in listed(store, "workloads"):
            if is_finished(wl):
                continue
            at = parse_time(((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt"))
            if at is not None:
                deadlines.append(at)
            admitted = find_condition(wl, C.ADMITTED)
            if admitted is None or admitted.get("status") != "True":
                continue
            since = parse_time(admitted.get("lastTransitionTime")) or now
            if wfpr.enable and not condition_true(wl, C.PODS_READY) and not condition_true(wl, C.EVICTED):
                deadline = pods_ready_deadline(wl, since, wfpr)[0]
                if deadline is not None:
                    deadlines.append(deadline)
            max_exec = (wl.get("spec") or {}).get("maximumExecutionTimeSeconds")
            if max_exec is not None:
                past = int((wl.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0)
                deadlines.append(since + timedelta(seconds=int(max_exec) - past))
        future = [d for d in deadlines if d > now]
        return min(future) if future else None

    def reconcile(self, store) -> bool:
        if not self._gate.should_run(store):
            return False
        now = store.clock.now()
        cqs = {o["metadata"]["name"]: o for o in listed(store, "clusterqueues")}
        lqs = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in listed(store, "localqueues")}
        wrote = False
        for wl in self._candidates(store, now):
            if is_finished(wl) or wl["metadata"].get("deletionTimestamp"):
                continue
            if is_active(wl):
                wrote = self._active(store, wl, now, cqs, lqs) or wrote
            else:
                wrote = self._inactive(store, wl, now) or wrote
        return wrote

    def _candidates(self, store, now: datetime) -> list[dict]:
        """The workloads this pass must look at, in store order: all of them after a queue change (stop policies
        drain and restart), else those written since the last pass plus, when the clock moved, those waiting
        for it. Keeps the set of waiting workloads current."""
        changes = self._changes.since_last(store)
        moved, self._now = now != self._now, now
        if changes is None or changes["clusterqueues"] or changes["localqueues"]:
            everything = listed(store, "workloads")
            self._timed = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in everything if self._waits(o)}
            return everything
        keys = set(changes["workloads"]) | (self._timed if moved else set())
        out = []
        for key in sorted(keys):
            obj = store.get("workloads", key[0], key[1], copy=False)
            if obj is not None and self._waits(obj):
                self._timed.add(key)
            else:
                self._timed.discard(key)
            if obj is not None:
                out.append(obj)
        return out

    def _waits(self, wl: dict) -> bool:
        """Whether time alone can make this workload's next action due: backoff expiry, maximum execution time,
        or the waitForPodsReady timeout."""
        if is_finished(wl) or wl["metadata"].get("deletionTimestamp"):
            return False
        if ((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt") is not None:
            return True
        if not condition_true(wl, C.ADMITTED) or condition_true(wl, C.EVICTED):
            return False
        wfpr = self.config.wait_for_pods_ready
        max_exec = (wl.get("spec") or {}).get("maximumExecutionTimeSeconds")
        return max_exec is not None or (wfpr.enable and not condition_true(wl, C.PODS_READY))

    def _active(self, store, seen: dict, now: datetime, cqs: dict, lqs: dict) -> bool:
        """seen is the store's object (read-only): every branch that writes works on a clone."""
        if condition_true(seen, C.DEACTIVATION_TARGET):
            wl = clone(seen)
            wl["spec"]["active"] = False
            store.update("workloads", wl)
            return True
        requeue_at = parse_time(((seen.get("status") or {}).get("requeueState") or {}).get("requeueAt"))
        requeued = find_condition(seen, C.REQUEUED)
        if requeued is not None and requeued.get("status") == "False":
            wl = clone(seen)
            if requeued.get("reason") == "Deactivated":
                ws.set_condition(wl, C.REQUEUED, "True", "Reactivated", "The workload was reactivated", now)
            elif requeued.get("reason") == C.EVICTED_PODS_READY_TIMEOUT and (requeue_at is None or requeue_at <= now):
                if requeue_at is not None:
                    wl["status"]["requeueState"]["requeueAt"] = None
                ws.set_condition(wl, C.REQUEUED, "True", "BackoffFinished", "The workload backoff was finished", now)
            elif not self._restarted(wl, requeued, cqs, lqs, now):
                wl = None
            if wl is not None:
                store.update_status("workloads", wl)
                return True
        if not condition_true(seen, C.ADMITTED) or condition_true(seen, C.EVICTED):
            return False
        if self._drain(store, seen, now, cqs, lqs):
            return True
        since = parse_time((find_condition(seen, C.ADMITTED) or {}).get("lastTransitionTime")) or now
        max_exec = (seen.get("spec") or {}).get("maximumExecutionTimeSeconds")
        if max_exec is not None:
            past = int((seen.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0)
            if since + timedelta(seconds=int(max_exec) - past) <= now:
                wl = clone(seen)
                message = "exceeding the maximum execution time"
                ws.set_condition(wl, C.DEACTIVATION_TARGET, "True", "MaximumExecutionTimeExceeded", message, now)
                wl["status"].pop("accumulatedPastExecutionTimeSeconds", None)
                store.update_status("workloads", wl)
                message = f"The maximum execution time ({int(max_exec)}s) exceeded"
                store.record_event(wl, "Warning", "MaximumExecutionTimeExceeded", message, C.CONTROLLER_NAME)
                return True
        wfpr = self.config.wait_for_pods_ready
        if not wfpr.enable or condition_true(seen, C.PODS_READY):
            return False
        deadline, cause = pods_ready_deadline(seen, since, wfpr)
        if deadline is None or deadline > now:
            return False
        wl = clone(seen)
        status = wl["status"]
        count = int((status.get("requeueState") or {}).get("count") or 0)
        if wfpr.backoff_limit_count is not None and count + 1 > wfpr.backoff_limit_count:
            message = "exceeding the maximum number of re-queuing retries"
            ws.set_condition(wl, C.DEACTIVATION_TARGET, "True", "RequeuingLimitExceeded", message, now)
            store.update_status("workloads", wl)
            return True
        delay = min(wfpr.backoff_base_seconds * 2**count, wfpr.backoff_max_seconds)
        status["requeueState"] = {"count": count + 1, "requeueAt": ws.ts(now + timedelta(seconds=delay))}
        md = wl["metadata"]
        message = f"Exceeded the PodsReady timeout {md['namespace']}/{md['name']}"
        ws.evict(wl, C.EVICTED_PODS_READY_TIMEOUT, message, now)
        self._count_cause(wl, C.EVICTED_PODS_READY_TIMEOUT, cause)
        store.update_status("workloads", wl)
        store.record_event(wl, "Normal", "EvictedDueToPodsReadyTimeout", message, C.CONTROLLER_NAME)
        return True

    @staticmethod
    def _restarted(wl: dict, requeued: dict, cqs: dict, lqs: dict, now: datetime) -> bool:
        """Requeued=True once the stopped ClusterQueue / LocalQueue that evicted the workload runs again."""
        now_reason = requeued.get("reason")
        lq = lqs.get((wl["metadata"]["namespace"], (wl.get("spec") or {}).get("queueName", "")))
        lq_running = lq is not None and ((lq.get("spec") or {}).get("stopPolicy") or "None") == "None"
        if now_reason == C.EVICTED_LQ_STOPPED and lq_running:
            msg = "The LocalQueue was restarted after being stopped"
            return ws.set_condition(wl, C.REQUEUED, "True", "LocalQueueRestarted", msg, now)
        if now_reason == C.EVICTED_CQ_STOPPED and lq is not None:
            cq = cqs.get((lq.get("spec") or {}).get("clusterQueue", ""))
            if cq is not None and ((cq.get("spec") or {}).get("stopPolicy") or "None") == "None":
                msg = "The ClusterQueue was restarted after being stopped"
                return ws.set_condition(wl, C.REQUEUED, "True", "ClusterQueueRestarted", msg, now)
        return False

    @staticmethod
    def _count_cause(wl: dict, reason: str, cause: str) -> None:
        """Kueue counts PodsReady-timeout evictions with their underlying cause."""
        for e in wl["status"]["schedulingStats"]["evictions"]:
            if e["reason"] == reason and e["underlyingCause"] == "":
                e["count"] -= 1
        evictions = [e for e in wl["status"]["schedulingStats"]["evictions"] if e["count"] > 0]
        for e in evictions:
            if e["reason"] == reason and e["underlyingCause"] == cause:
                e["count"] += 1
                break
        else:
            evictions.append({"reason": reason, "underlyingCause": cause, "count": 1})
        wl["status"]["schedulingStats"]["evictions"] = evictions

    def _drain(self, store, wl: dict, now: datetime, cqs: dict, lqs: dict) -> bool:
        """HoldAndDrain on the ClusterQueue or LocalQueue evicts admitted workloads."""
        admission = (wl.get("status") or {}).get("admission") or {}
        cq = cqs.get(admission.get("clusterQueue", ""))
        lq = lqs.get((wl["metadata"]["namespace"], (wl.get("spec") or {}).get("queueName", "")))
        if cq is not None and (cq.get("spec") or {}).get("stopPolicy") == "HoldAndDrain":
            reason, message = C.EVICTED_CQ_STOPPED, "The ClusterQueue is stopped"
        elif lq is not None and (lq.get("spec") or {}).get("stopPolicy") == "HoldAndDrain":
            reason, message = C.EVICTED_LQ_STOPPED, "The LocalQueue is stopped"
        else:
            return False
        wl = clone(wl)
        ws.evict(wl, reason, message, now)
        store.update_status("workloads", wl)
        store.record_event(wl, "Normal", f"EvictedDueTo{reason}", message, C.CONTROLLER_NAME)
        return True

    def _inactive(self, store, seen: dict, now: datetime) -> bool:
        wl = clone(seen)  # deactivated workloads are few: work on a copy
        status = wl.setdefault("status", {})
        wrote = False
        if not condition_true(wl, C.EVICTED):
            target = find_condition(wl, C.DEACTIVATION_TARGET)
            cause, message = "", "The workload is deactivated"
            if target is not None:
                cause = target.get("reason", "")
                message = f"{message} due to {target.get('message', '')}"
            had_admission = status.get("admission") is not None
            ws.evict(wl, C.EVICTED_DEACTIVATED, message, now, cause)
            ws.remove_condition(wl, C.DEACTIVATION_TARGET)
            status.pop("requeueState", None)
            store.update_status("workloads", wl)
            if had_admission:
                reason = "EvictedDueToDeactivated" + (f"DueTo{cause}" if cause else "")
                store.record_event(wl, "Normal", reason, message, C.CONTROLLER_NAME)
            return True
        if status.get("requeueState") is not None:
            status.pop("requeueState")
            wrote = True
        if not condition_true(wl, C.QUOTA_RESERVED):
            wrote = ws.unset_quota_reservation(wl, "Deactivated", "The workload is deactivated", now) or wrote
        if wrote:
            store.update_status("workloads", wl)
        return wrote


class StatusController:
    """ClusterQueue, LocalQueue and Cohort status: counts, flavor reservation/usage, weighted share, Active."""

    name = "kueue-status"

    def __init__(self, config: KueueConfig) -> None:
        self.config = config
        self._gate = ChangeGate(SCHEDULING_INPUTS)
        self._live = LiveSnapshot(config)
        self._written: dict[tuple[str, str, str], str] = {}  # (resource, ns, name) -> resourceVersion we left

    def next_deadline(self, store) -> datetime | None:
        return None

    def _unchanged(self, resource: str, obj: dict, touched: bool) -> bool:
        """Skip a queue whose members did not change and whose object is as this controller left it."""
        md = obj["metadata"]
        return not touched and self._written.get((resource, md.get("namespace", ""), md["name"])) == md.get(
            "resourceVersion"
        )

    def reconcile(self, store) -> bool:
        if not self._gate.should_run(store):
            return False
        now = store.clock.now()
        full = self._live.refresh(store, None) is None
        live = self._live
        snap = live.snap
        wrote = False
        pending_by_lq: dict[tuple[str, str], int] = {}
        lq_cqs = {
            ((snap.local_queues.get(k) or {}).get("spec") or {}).get("clusterQueue") for k in live.local_queues_touched
        }
        for wls in snap.pending.values() if full else [snap.pending.get(c, []) for c in live.queues_touched | lq_cqs]:
            for w in wls:
                pending_by_lq[(w.namespace, w.queue_name)] = pending_by_lq.get((w.namespace, w.queue_name), 0) + 1
        for obj in listed(store, "clusterqueues"):
            if self._unchanged("clusterqueues", obj, full or obj["metadata"]["name"] in live.queues_touched):
                continue
            cq = snap.cluster_queues[obj["metadata"]["name"]]
            status = dict(obj.get("status") or {})
            reservation = self._flavors(cq, cq.usage, borrowed=True)
            admitted = sum(1 for w in cq.workloads.values() if condition_true(w.obj, C.ADMITTED))
            status.update(
                pendingWorkloads=len(snap.pending.get(cq.name, [])),
                reservingWorkloads=len(cq.workloads),
                admittedWorkloads=admitted,
                flavorsReservation=reservation,
                flavorsUsage=reservation,
            )
            if self.config.fair_sharing:
                status["fairSharing"] = {"weightedShare": dominant_resource_share(cq).weighted_share()}
            if cq.active:
                status["conditions"] = self._active(obj, now, "True", C.CQ_REASON_READY, "Can admit new workloads")
            else:
                status["conditions"] = self._active(obj, now, "False", cq.inactive_reason, cq.inactive_message)
            wrote = self._write(store, "clusterqueues", obj, status) or wrote
        for obj in listed(store, "localqueues"):
            md = obj["metadata"]
            if self._unchanged("localqueues", obj, full or (md["namespace"], md["name"]) in live.local_queues_touched):
                continue
            cq = snap.cluster_queues.get((obj.get("spec") or {}).get("clusterQueue", ""))
            mine = [
                w
                for w in (cq.workloads.values() if cq else [])
                if w.namespace == md["namespace"] and w.queue_name == md["name"]
            ]
            usage: dict = {}
            for w in mine:
                for fr, v in w.usage.items():
                    usage[fr] = usage.get(fr, 0) + v
            flavors = self._flavors(cq, usage, borrowed=False) if cq else []
            status = dict(obj.get("status") or {})
            status.update(
                pendingWorkloads=pending_by_lq.get((md["namespace"], md["name"]), 0),
                reservingWorkloads=len(mine),
                admittedWorkloads=sum(1 for w in mine if condition_true(w.obj, C.ADMITTED)),
                flavorsReservation=flavors,
                flavorsUsage=flavors,
            )
            if ((obj.get("spec") or {}).get("stopPolicy") or "None") != "None":
                cond = ("False", "Stopped", "LocalQueue is stopped")
            elif cq is None or not cq.active:
                cond = ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
            else:
                cond = ("True", "Ready", "Can submit new workloads to localQueue")
            status["conditions"] = self._active(obj, now, *cond)
            wrote = self._write(store, "localqueues", obj, status) or wrote
        if self.config.fair_sharing:
            for obj in listed(store, "cohorts"):
                if self._unchanged("cohorts", obj, full):  # a patch changes no reservation, so no share
                    continue
                node = snap.cohorts.get(obj["metadata"]["name"])
                if node is None:
                    continue
                status = dict(obj.get("status") or {})
                status["fairSharing"] = {"weightedShare": dominant_resource_share(node).weighted_share()}
                wrote = self._write(store, "cohorts", obj, status) or wrote
        return wrote

    @staticmethod
    def _flavors(cq, usage: dict, borrowed: bool) -> list[dict]:
        out = []
        seen = set()
        for rg in cq.resource_groups:
            for flavor in rg.flavors:
                if flavor in seen:
                    continue
                seen.add(flavor)
                resources = []
                for res in rg.covered:
                    used = usage.get((flavor, res), 0)
                    entry = {"name": res, "total": format_amount(res, used)}
                    if borrowed:
                        nominal = cq.quota_for((flavor, res)).nominal
                        entry["borrowed"] = format_amount(res, max(0, used - nominal))
                    resources.append(entry)
                out.append({"name": flavor, "resources": resources})
        return out

    @staticmethod
    def _active(obj: dict, now: datetime, status: str, reason: str, message: str) -> list[dict]:
        """The Active condition; its lastTransitionTime moves only when the status flips."""
        conds = [dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
        old = next((c for c in conds if c.get("type") == "Active"), None)
        same = old is not None and old.get("status") == status and old.get("lastTransitionTime")
        new = {
            "type": "Active",
            "status": status,
            "reason": reason,
            "message": message,
            "observedGeneration": (obj.get("metadata") or {}).get("generation"),
            "lastTransitionTime": old["lastTransitionTime"] if same else ws.ts(now),
        }
        return [*(c for c in conds if c.get("type") != "Active"), new]

    def _write(self, store, resource: str, obj: dict, status: dict) -> bool:
        md = obj["metadata"]
        key = (resource, md.get("namespace", ""), md["name"])
        if status == (obj.get("status") or {}):
            self._written[key] = md.get("resourceVersion")
            return False
        new = {**obj, "status": status}
        self._written[key] = store.update_status(resource, new)["metadata"]["resourceVersion"]
        return True


class InUseFinalizers:
    """`kueue.x-k8s.io/resource-in-use` on ClusterQueues and ResourceFlavors: a ClusterQueue being deleted stays
    until no workload reserves quota in it; a flavor stays until no ClusterQueue references it."""

    name = "kueue-in-use-finalizers"

    def __init__(self) -> None:
        self._gate = ChangeGate({"clusterqueues", "resourceflavors", "workloads"})

    def next_deadline(self, store) -> datetime | None:
        return None

    def reconcile(self, store) -> bool:
        if not self._gate.should_run(store):
            return False
        wrote = False
        cqs = listed(store, "clusterqueues")
        # Only a ClusterQueue being deleted asks which queues hold reservations: skip the workload scan otherwise.
        deleting = any(o["metadata"].get("deletionTimestamp") for o in cqs)
        reserving = {
            ((w.get("status") or {}).get("admission") or {}).get("clusterQueue")
            for w in (listed(store, "workloads") if deleting else ())
            if condition_true(w, C.QUOTA_RESERVED) and not is_finished(w)
        }
        used_flavors = {
            f["name"] for cq in cqs for rg in (cq.get("spec") or {}).get("resourceGroups") or [] for f in rg["flavors"]
        }
        for resource, objs, in_use in (
            ("clusterqueues", cqs, lambda o: o["metadata"]["name"] in reserving),
            ("resourceflavors", listed(store, "resourceflavors"), lambda o: o["metadata"]["name"] in used_flavors),
        ):
            for obj in objs:
                md = obj["metadata"]
                has = C.RESOURCE_IN_USE_FINALIZER in (md.get("finalizers") or [])
                if not md.get("deletionTimestamp") and not has:
                    new = clone(obj)
                    new["metadata"]["finalizers"] = [*(md.get("finalizers") or []), C.RESOURCE_IN_USE_FINALIZER]
                    store.update(resource, new)
                    wrote = True
                elif md.get("deletionTimestamp") and has and not in_use(obj):
                    store.remove_finalizer(resource, None, md["name"], C.RESOURCE_IN_USE_FINALIZER)
                    wrote = True
        return wrote


def kueue_controllers(config: KueueConfig) -> list:
    return [
        JobIntegration(config),
        WorkloadController(config),
        SchedulerController(config),
        StatusController(config),
        InUseFinalizers(),
    ]
