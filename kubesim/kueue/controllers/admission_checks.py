"""Admission checks on kubesim's store: the part of Kueue's workload controller that follows the check states
(Admitted once all are Ready, eviction on Retry, deactivation on Rejected), and Kueue's ProvisioningRequest check
controller (controllerName kueue.x-k8s.io/provisioning-request; controllers/provisioning.py), whose requests kubesim
answers itself unless told not to (standing for a cluster autoscaler). Other controllers' checks are set through the
API (`status.admissionChecks`), as their own controllers would."""

from __future__ import annotations

from datetime import datetime

from kubesim.kernel.store import Store
from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.cache import ChangeGate, Changes, Lookup, clone
from kubesim.kueue.controllers.provisioning import Provisioning
from kubesim.kueue.controllers.scheduler import record_admitted
from kubesim.kueue.scheduler.model import condition_true, is_active, is_finished
from kubesim.kueue.state import KueueState


class AdmissionChecksController:
    """AdmissionCheck Active conditions for the provisioning controller, the provisioning checks' states, and the
    workload's reaction to its checks."""

    name = "kueue-admission-checks"

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self.config = state.config
        watched = ("workloads", "admissionchecks", "clusterqueues", "localqueues", *PROVISIONING_KINDS)
        self._gate = ChangeGate(set(watched))
        self._changes = Changes(*watched, status_only=("clusterqueues", "localqueues"))
        self.provisioning = Provisioning(self.config)

    def next_deadline(self, store: Store) -> datetime | None:
        return self.provisioning.next_deadline(store, store.clock.now())

    def reconcile(self, store: Store) -> bool:
        if not self._gate.should_run(store):
            return False
        now = store.clock.now()
        wrote = self.provisioning.autoscale(store, now)
        wrote = self.provisioning.activate(store, self.state.listed(store, "admissionchecks"), now) or wrote
        changes = self._changes.since_last(store)
        if (
            changes is None
            or changes["admissionchecks"]
            or changes["clusterqueues"]
            or changes["localqueues"]
            or changes["provisioningrequestconfigs"]
        ):
            candidates = self.state.listed(store, "workloads")
        else:
            keys = set(changes["workloads"]) | {
                (k[0], o["name"])
                for k, pr in changes["provisioningrequests"].items()
                for o in pr["metadata"].get("ownerReferences") or []
                if o.get("kind") == "Workload"
            }
            candidates = [w for k in sorted(keys) if (w := store.get("workloads", k[0], k[1], copy=False))]
        if not candidates:
            return wrote
        provisioning = self._provisioning_checks(store)
        cqs, lqs = Lookup(store, "clusterqueues"), Lookup(store, "localqueues")
        for wl in candidates:
            if provisioning:
                wrote = self.provisioning.cleanup(store, wl) or wrote
            if not _reserved(wl):
                wrote = self._sync_pending(store, wl, now, cqs, lqs) or wrote
            elif _has_checks(wl) or (wl.get("status") or {}).get("admission"):
                wrote = self._workload(store, wl, provisioning, now, cqs) or wrote
        return wrote

    def _provisioning_checks(self, store: Store) -> dict[str, dict]:
        return {
            o["metadata"]["name"]: o
            for o in self.state.listed(store, "admissionchecks")
            if (o.get("spec") or {}).get("controllerName") == C.PROVISIONING_CONTROLLER
        }

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

    def _workload(self, store: Store, seen: dict, provisioning: dict[str, dict], now: datetime, cqs: Lookup) -> bool:
        if is_finished(seen) or not condition_true(seen, C.QUOTA_RESERVED) or condition_true(seen, C.EVICTED):
            return False
        wl = clone(seen)
        # the reservation lists the checks its ClusterQueue asks of its flavors (also one written by another
        # client, and again when the ClusterQueue's checks change: Kueue's reconcileSyncAdmissionChecks)
        admission = wl["status"].get("admission") or {}
        cq = cqs.get(admission.get("clusterQueue", ""))
        changed = cq is not None and ws.sync_checks(wl, _checks_for(cq, admission.get("podSetAssignments") or []), now)
        if provisioning and any(c.get("name") in provisioning for c in wl["status"].get("admissionChecks") or []):
            changed = self.provisioning.sync(store, wl, provisioning, now) or changed
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

    @staticmethod
    def _write(store: Store, wl: dict, changed: bool) -> bool:
        if changed:
            store.update_status("workloads", wl)
        return changed


PROVISIONING_KINDS = ("provisioningrequests", "provisioningrequestconfigs")


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
