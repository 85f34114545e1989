"""Admission checks on kubesim's store: the part of Kueue's workload controller that follows the check states
(Admitted once all are Ready, eviction on Retry, deactivation on Rejected), and a ProvisioningRequest-style check
controller (controllerName kueue.x-k8s.io/provisioning-request) that kubesim satisfies itself after the configured
delay, standing for the capacity a cluster autoscaler brings up. Other controllers' checks are set through the API
(`status.admissionChecks`), as their own controllers would."""

from __future__ import annotations

from datetime import datetime, timedelta

from kubesim.kernel.store import Store
from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.cache import ChangeGate, Changes, Key, Lookup, clone
from kubesim.kueue.controllers.scheduler import record_admitted
from kubesim.kueue.scheduler.model import EPOCH, condition_true, is_active, is_finished, parse_time
from kubesim.kueue.state import KueueState


def provisioning_request_name(workload: str, check: str, attempt: int) -> str:
    """The ProvisioningRequest Kueue would create for this workload, check and attempt."""
    return f"{workload}-{check}-{attempt}"


class AdmissionChecksController:
    """AdmissionCheck Active conditions for the provisioning controller, the provisioning checks' states, and the
    workload's reaction to its checks."""

    name = "kueue-admission-checks"

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self.config = state.config
        self._gate = ChangeGate({"workloads", "admissionchecks", "clusterqueues", "localqueues"})
        self._changes = Changes(
            "workloads", "admissionchecks", "clusterqueues", "localqueues", status_only=("clusterqueues", "localqueues")
        )
        self._waiting: set[Key] = set()  # workloads with a provisioning check still Pending (the clock decides)
        self._now: datetime | None = None

    def next_deadline(self, store: Store) -> datetime | None:
        now = store.clock.now()
        checks = self._provisioning_checks(store)
        times = []
        for ns, name in self._waiting:
            wl = store.get("workloads", ns, name, copy=False)
            for c in ((wl or {}).get("status") or {}).get("admissionChecks") or []:
                if c.get("name") in checks and c.get("state") == C.CHECK_PENDING:
                    at = self._ready_at(c)
                    if at > now:
                        times.append(at)
        return min(times) if times else None

    def reconcile(self, store: Store) -> bool:
        if not self._gate.should_run(store):
            return False
        now = store.clock.now()
        moved, self._now = now != self._now, now
        wrote = self._activate(store, now)
        changes = self._changes.since_last(store)
        if changes is None or changes["admissionchecks"] or changes["clusterqueues"] or changes["localqueues"]:
            candidates = self.state.listed(store, "workloads")
        else:
            keys = set(changes["workloads"]) | (self._waiting if moved else set())
            candidates = [w for k in sorted(keys) if (w := store.get("workloads", k[0], k[1], copy=False))]
        if not candidates:
            return wrote
        provisioning = self._provisioning_checks(store)
        cqs, lqs = Lookup(store, "clusterqueues"), Lookup(store, "localqueues")
        for wl in candidates:
            if not _reserved(wl):
                wrote = self._sync_pending(store, wl, now, cqs, lqs) or wrote
            elif _has_checks(wl) or (wl.get("status") or {}).get("admission"):
                wrote = self._workload(store, wl, provisioning, now, cqs) or wrote
        return wrote

    def _provisioning_checks(self, store: Store) -> set[str]:
        return {
            o["metadata"]["name"]
            for o in self.state.listed(store, "admissionchecks")
            if (o.get("spec") or {}).get("controllerName") == C.PROVISIONING_CONTROLLER
        }

    def _activate(self, store: Store, now: datetime) -> bool:
        """The provisioning controller marks the checks it owns Active."""
        wrote = False
        for obj in self.state.listed(store, "admissionchecks"):
            if (obj.get("spec") or {}).get("controllerName") != C.PROVISIONING_CONTROLLER:
                continue
            if condition_true(obj, "Active"):
                continue
            new = clone(obj)
            ws.set_condition(new, "Active", "True", "Active", "The admission check is active", now)
            store.update_status("admissionchecks", new)
            wrote = True
        return wrote

    @staticmethod
    def _sync_pending(store: Store, seen: dict, now: datetime, cqs: Lookup, lqs: Lookup) -> bool:
        """A workload without reservation lists the checks of its LocalQueue's ClusterQueue that apply to every
        flavor of that queue (which flavor it gets is not known yet), as Kueue's reconcileSyncAdmissionChecks."""
        if is_finished(seen) or seen["metadata"].get("deletionTimestamp") or not is_active(seen):
            return False
        lq = lqs.get((seen["metadata"]["namespace"], (seen.get("spec") or {}).get("queueName", "")))
        cq = cqs.get(((lq or {}).get("spec") or {}).get("clusterQueue", ""))
        if cq is None:
            return False
        names = _checks_for(cq, None)
        if not names and not _has_checks(seen):
            return False
        wl = clone(seen)
        if not ws.sync_checks(wl, names, now) or wl.get("status") == seen.get("status"):
            return False
        store.update_status("workloads", wl)
        return True

    def _ready_at(self, check: dict) -> datetime:
        since = parse_time(check.get("lastTransitionTime")) or EPOCH
        return since + timedelta(seconds=self.config.provisioning_delay_seconds)

    def _workload(self, store: Store, seen: dict, provisioning: set[str], now: datetime, cqs: Lookup) -> bool:
        md = seen["metadata"]
        key = (md["namespace"], md["name"])
        self._waiting.discard(key)
        if is_finished(seen) or not condition_true(seen, C.QUOTA_RESERVED) or condition_true(seen, C.EVICTED):
            return False
        wl = clone(seen)
        # the reservation lists the checks its ClusterQueue asks of its flavors (also one written by another
        # client, and again when the ClusterQueue's checks change: Kueue's reconcileSyncAdmissionChecks)
        admission = wl["status"].get("admission") or {}
        cq = cqs.get(admission.get("clusterQueue", ""))
        changed = cq is not None and ws.sync_checks(wl, _checks_for(cq, admission.get("podSetAssignments") or []), now)
        changed = self._provision(wl, provisioning, now, key) or changed
        states = wl["status"].get("admissionChecks") or []
        rejected = [c for c in states if c.get("state") == C.CHECK_REJECTED]
        retry = [c for c in states if c.get("state") == C.CHECK_RETRY]
        event = None
        if rejected:
            if condition_true(wl, C.DEACTIVATION_TARGET) or not (wl.get("spec") or {}).get("active", True):
                return self._write(store, wl, changed)
            message = checks_message(rejected, C.CHECK_REJECTED)
            changed = ws.set_condition(wl, C.DEACTIVATION_TARGET, "True", C.EVICTED_ADMISSION_CHECK, message, now)
            event = ("Warning", "AdmissionCheckRejected", f"Deactivated due to {message}")
        elif retry:
            message = f"Evicted due to {checks_message(retry, C.CHECK_RETRY)}"
            at = ws.retry_time(wl)  # a Retry check's requeueAfterSeconds holds the workload back (requeueState)
            if at is not None and at > now:
                state = wl["status"].setdefault("requeueState", {})
                state["requeueAt"] = ws.ts(at)
                state.setdefault("count", 0)
            ws.evict(wl, C.EVICTED_ADMISSION_CHECK, message, now)
            changed, event = True, ("Normal", "EvictedDueToAdmissionCheck", message)
        else:
            was_admitted = condition_true(wl, C.ADMITTED)
            changed = ws.sync_admitted(wl, now) or changed
            if condition_true(wl, C.ADMITTED) and not was_admitted:
                wrote = self._write(store, wl, changed)
                record_admitted(store, wl, wl["status"]["admission"]["clusterQueue"], now)
                return wrote
        wrote = self._write(store, wl, changed)
        if event is not None:
            store.record_event(wl, event[0], event[1], event[2][:1024], C.CONTROLLER_NAME)
        return wrote

    def _provision(self, wl: dict, provisioning: set[str], now: datetime, key: Key) -> bool:
        """Pending provisioning checks: say which ProvisioningRequest they wait for, then Ready after the delay,
        with the pod set updates that make the pods consume the provisioned capacity."""
        changed = False
        name = wl["metadata"]["name"]
        for c in wl["status"].get("admissionChecks") or []:
            if c.get("name") not in provisioning or c.get("state") != C.CHECK_PENDING:
                continue
            request = provisioning_request_name(name, c["name"], int(c.get("retryCount") or 0) + 1)
            if self._ready_at(c) > now:
                self._waiting.add(key)
                waiting = f"Waiting for ProvisioningRequest {request} to be provisioned"
                changed = ws.set_check_state(wl, c["name"], C.CHECK_PENDING, waiting, now) or changed
                continue
            updates = [
                {"name": ps.get("name", "main"), "annotations": {C.CONSUME_PROVISIONING_REQUEST: request}}
                for ps in (wl.get("spec") or {}).get("podSets") or []
            ]
            message = f"ProvisioningRequest {request} is provisioned"
            changed = ws.set_check_state(wl, c["name"], C.CHECK_READY, message, now, podSetUpdates=updates) or changed
        return changed

    @staticmethod
    def _write(store: Store, wl: dict, changed: bool) -> bool:
        if changed:
            store.update_status("workloads", wl)
        return changed


def checks_message(checks: list[dict], state: str) -> str:
    """Names the checks in this state, by name, each with its message when it has one (as Kueue words it)."""
    parts = [
        f'"{c.get("name", "")}" ({c["message"]})' if c.get("message") else f'"{c.get("name", "")}"'
        for c in sorted(checks, key=lambda c: c.get("name", ""))
    ]
    noun = "AdmissionChecks" if len(checks) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def _reserved(wl: dict) -> bool:
    return condition_true(wl, C.QUOTA_RESERVED)


def _checks_for(cq: dict, podset_assignments: list[dict] | None) -> list[str]:
    """The ClusterQueue's checks that apply to these assignments: without onFlavors, or naming an assigned flavor.
    Without assignments (no reservation yet): those that apply to every flavor of the ClusterQueue."""
    spec = cq.get("spec") or {}
    rules = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    if podset_assignments is None:
        every = {f["name"] for rg in spec.get("resourceGroups") or [] for f in rg.get("flavors") or []}
        return sorted(c.get("name", "") for c in rules if not c.get("onFlavors") or every <= set(c["onFlavors"]))
    flavors = {f for psa in podset_assignments for f in (psa.get("flavors") or {}).values()}
    return sorted(c.get("name", "") for c in rules if not c.get("onFlavors") or flavors & set(c["onFlavors"]))


def _has_checks(wl: dict) -> bool:
    return bool((wl.get("status") or {}).get("admissionChecks"))
