"""Kueue's Workload controller on kubesim's store: the lifecycle outside scheduling (deactivation and
reactivation, requeue backoff, waitForPodsReady timeouts, maximum execution time, HoldAndDrain)."""

from __future__ import annotations

from datetime import datetime, timedelta

from kubesim.kernel.store import Store
from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.cache import ChangeGate, Changes, Key, Lookup, Tracked, clone
from kubesim.kueue.config import WaitForPodsReady
from kubesim.kueue.scheduler.model import condition_true, find_condition, is_active, is_finished, parse_time
from kubesim.kueue.state import KueueState


def pods_ready_deadline(wl: dict, admitted_since: datetime, wfpr: WaitForPodsReady) -> tuple[datetime | None, str]:
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

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self.config = state.config
        self._gate = ChangeGate({"workloads", "clusterqueues", "localqueues"})
        self._changes = Changes(
            "workloads", "clusterqueues", "localqueues", status_only=("clusterqueues", "localqueues")
        )
        self._timed: set[Key] = set()  # workloads whose next action waits for the clock (see _waits)
        self._deadlines = Tracked("workloads", self._has_deadline)  # what next_deadline looks at
        self._now: datetime | None = None

    def _has_deadline(self, wl: dict) -> bool:
        """Whether next_deadline can find a time in this workload: a backoff, or an admitted workload's
        waitForPodsReady timeout or maximum execution time."""
        if is_finished(wl):
            return False
        if ((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt") is not None:
            return True
        if not condition_true(wl, C.ADMITTED):
            return False
        wfpr = self.config.wait_for_pods_ready
        waits_ready = wfpr.enable and not condition_true(wl, C.PODS_READY) and not condition_true(wl, C.EVICTED)
        return waits_ready or (wl.get("spec") or {}).get("maximumExecutionTimeSeconds") is not None

    def next_deadline(self, store: Store) -> datetime | None:
        now = store.clock.now()
        deadlines = []
        wfpr = self.config.wait_for_pods_ready
        for wl in self._deadlines.objects(store):
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

    def reconcile(self, store: Store) -> bool:
        if not self._gate.should_run(store):
            return False
        now = store.clock.now()
        cqs, lqs = Lookup(store, "clusterqueues"), Lookup(store, "localqueues")
        wrote = False
        for wl in self._candidates(store, now):
            if is_finished(wl) or wl["metadata"].get("deletionTimestamp"):
                continue
            if is_active(wl):
                wrote = self._active(store, wl, now, cqs, lqs) or wrote
            else:
                wrote = self._inactive(store, wl, now) or wrote
        return wrote

    def _candidates(self, store: Store, now: datetime) -> list[dict]:
        """The workloads this pass must look at, in store order: all of them after a queue change (stop policies
        drain and restart), else those written since the last pass plus, when the clock moved, those waiting
        for it. Keeps the set of waiting workloads current."""
        changes = self._changes.since_last(store)
        moved, self._now = now != self._now, now
        if changes is None or changes["clusterqueues"] or changes["localqueues"]:
            everything = self.state.listed(store, "workloads")
            self._timed = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in everything if self._waits(o)}
            self._deadlines.reset(everything)
            return everything
        self._deadlines.update(store, changes["workloads"])
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

    def _active(self, store: Store, seen: dict, now: datetime, cqs: Lookup, lqs: Lookup) -> bool:
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
            elif requeued.get("reason") in (C.EVICTED_PODS_READY_TIMEOUT, C.EVICTED_ADMISSION_CHECK) and (
                requeue_at is None or requeue_at <= now
            ):
                if requeue_at is not None:
                    wl["status"]["requeueState"].pop("requeueAt", None)  # nil: omitted, as Kueue writes it
                ws.set_condition(wl, C.REQUEUED, "True", "BackoffFinished", "The workload backoff was finished", now)
            elif not self._restarted(wl, requeued, cqs, lqs, now):
                wl = None
            if wl is not None:
                store.update_status("workloads", wl)
                return True
        # a reservation that is not admitted and will not be now (checks pending; Kueue admits first when it can)
        reserved_only = condition_true(seen, C.QUOTA_RESERVED) and not condition_true(seen, C.ADMITTED)
        if reserved_only and not ws.checks_ready(seen) and self._release_blocked(store, seen, now, cqs, lqs):
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
    def _restarted(wl: dict, requeued: dict, cqs: Lookup, lqs: Lookup, now: datetime) -> bool:
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

    def _release_blocked(self, store: Store, wl: dict, now: datetime, cqs: Lookup, lqs: Lookup) -> bool:
        """A reservation not yet admitted is given back when its LocalQueue or ClusterQueue is missing, being
        deleted or stopped (Kueue's workload reconciler; an admitted workload only leaves on HoldAndDrain)."""
        queue = (wl.get("spec") or {}).get("queueName", "")
        lq = lqs.get((wl["metadata"]["namespace"], queue))
        cq_name = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        cq = cqs.get(cq_name)
        if lq is None or lq["metadata"].get("deletionTimestamp"):
            reason, message = C.REASON_MISCONFIGURED, f"LocalQueue {queue} is terminating or missing"
        elif ((lq.get("spec") or {}).get("stopPolicy") or "None") != "None":
            reason, message = C.REASON_SUSPENDED, f"LocalQueue {queue} is stopped"
        elif cq is None or cq["metadata"].get("deletionTimestamp"):
            reason, message = C.REASON_MISCONFIGURED, f"ClusterQueue {cq_name} is terminating or missing"
        elif ((cq.get("spec") or {}).get("stopPolicy") or "None") != "None":
            reason, message = C.REASON_SUSPENDED, f"ClusterQueue {cq_name} is stopped"
        else:
            return False
        wl = clone(wl)
        ws.unset_quota_reservation(wl, reason, message, now)
        store.update_status("workloads", wl)
        return True

    def _drain(self, store: Store, wl: dict, now: datetime, cqs: Lookup, lqs: Lookup) -> bool:
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

    def _inactive(self, store: Store, seen: dict, now: datetime) -> bool:
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
