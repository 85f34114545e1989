"""Kubeflow Trainer v2.3.0's TrainJob controller, as the cluster runs it beside the JobSet operator: each TrainJob runs
as a JobSet of the same name (kubesim.kernel.trainer builds it from the runtime), created with the TrainJob's suspend
and, while either of them is suspended, kept in step with the TrainJob (its suspend, and the pod templates' labels,
annotations, nodeSelector, tolerations and scheduling gates its runtimePatches set: what Kueue writes on admission
and takes back on eviction). The TrainJob's status follows: Suspended True/False from spec.suspend, Complete and
Failed copied from the JobSet's Completed and Failed conditions, jobsStatus from its replicatedJobsStatus; a runtime
that is missing is a TrainJobResourcesCreationFailed Warning, an unknown runtime kind fails the TrainJob.
Not emulated: activeDeadlineSeconds, runtime snapshots, trainerStatus."""

from __future__ import annotations

from kubesim.apiserver.errors import invalid
from kubesim.apiserver.registry.resources import RESOURCES
from kubesim.apiserver.validation import jobset_webhook, schema
from kubesim.kernel import trainer
from kubesim.kernel.clock import rfc3339
from kubesim.kernel.store import ChangeFeed, Store, clone, controller_reference

COMPONENT = "trainjob-controller"
CONTROLLER_NAME = "trainer.kubeflow.org/trainjob-controller"
SUSPENDED, COMPLETE, FAILED = "Suspended", "Complete", "Failed"
TEMPLATE_MAPS = (("metadata", "labels"), ("metadata", "annotations"), ("spec", "nodeSelector"))
TEMPLATE_LISTS = (("spec", "tolerations"), ("spec", "schedulingGates"))


def _condition(obj: dict, ctype: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


def _true(obj: dict, ctype: str) -> bool:
    return (_condition(obj, ctype) or {}).get("status") == "True"


def finished(trainjob: dict) -> bool:
    return _true(trainjob, COMPLETE) or _true(trainjob, FAILED)


def _set_condition(status: dict, ctype: str, value: str, reason: str, message: str, now: str) -> None:
    """meta.SetStatusCondition: updated in place (its transition time kept unless the status flips), else appended."""
    conditions = status.setdefault("conditions", [])
    current = next((c for c in conditions if c["type"] == ctype), None)
    if current is None:
        conditions.append({"type": ctype, "status": value, "reason": reason, "message": message,
                           "lastTransitionTime": now})
        return
    if current["status"] != value:
        current["lastTransitionTime"] = now
    current.update(status=value, reason=reason, message=message)


class TrainJobController:
    """Controller protocol implementation for trainer.kubeflow.org/v1alpha1 TrainJobs."""

    name = COMPONENT

    def __init__(self) -> None:
        self._feed = ChangeFeed("trainjobs", "jobsets")

    def next_deadline(self, store: Store) -> None:
        return None

    def reconcile(self, store: Store) -> bool:
        events = self._feed.changed(store)
        if events is None:
            keys = {(t["metadata"]["namespace"], t["metadata"]["name"]) for t in store.list("trainjobs", copy=False)}
        else:
            keys = set()
            for ev in events:
                md = ev.obj["metadata"]
                if ev.resource == "trainjobs" or any(
                    r.get("controller") and r.get("kind") == "TrainJob" for r in md.get("ownerReferences") or []
                ):
                    keys.add((md["namespace"], md["name"]))  # a TrainJob's JobSet has its name
        wrote = False
        for namespace, name in sorted(keys):
            stored = store.get("trainjobs", namespace, name, copy=False)
            if stored is not None:
                wrote = self._sync(store, stored) or wrote
        return wrote

    def _sync(self, store: Store, stored: dict) -> bool:
        md = stored["metadata"]
        spec = stored.get("spec") or {}
        if md.get("deletionTimestamp") or spec.get("managedBy", CONTROLLER_NAME) != CONTROLLER_NAME:
            return False
        status = clone(stored.get("status") or {})
        now = rfc3339(store.now())
        wrote = False
        try:
            runtime = trainer.runtime_of(store, stored)
        except trainer.RuntimeUnavailable as exc:
            if str(exc).startswith("unsupported runtime"):
                _set_condition(status, FAILED, "True", "TrainingRuntimeNotSupported", str(exc), now)
            else:
                wrote = self._warn(store, stored, f"TrainJob resources reconciliation failed: {exc}")
            runtime = None
        existing = store.get("jobsets", md["namespace"], md["name"], copy=False)
        if runtime is not None and not finished(stored):
            wrote = self._apply(store, stored, trainer.jobset(stored, runtime), existing) or wrote
            existing = store.get("jobsets", md["namespace"], md["name"], copy=False)
        if spec.get("suspend"):
            _set_condition(status, SUSPENDED, "True", "Suspended", "TrainJob is suspended", now)
        elif _true(stored, SUSPENDED):
            _set_condition(status, SUSPENDED, "False", "Resumed", "TrainJob is resumed", now)
        if existing is not None:
            self._copy_status(existing, status, now)
        if status != (stored.get("status") or {}):
            obj = clone(stored)
            obj["status"] = status
            store.update_status("trainjobs", obj)
            wrote = True
        return wrote

    @staticmethod
    def _copy_status(jobset: dict, status: dict, now: str) -> None:
        """The JobSet's terminal conditions (Completed -> Complete, Failed -> Failed) and its replicatedJobsStatus."""
        for source, target in (("Completed", COMPLETE), (FAILED, FAILED)):
            cond = _condition(jobset, source)
            if cond is not None and cond.get("status") == "True":
                _set_condition(status, target, "True", cond.get("reason", ""), cond.get("message", ""),
                               cond.get("lastTransitionTime") or now)
        statuses = (jobset.get("status") or {}).get("replicatedJobsStatus")
        if statuses is not None:
            status["jobsStatus"] = [
                {key: s.get(key, 0) if key != "name" else s.get("name")
                 for key in ("name", "ready", "succeeded", "failed", "active", "suspended")}
                for s in statuses
            ]

    def _apply(self, store: Store, trainjob: dict, built: dict, existing: dict | None) -> bool:
        """Create the JobSet, or bring it in step while the TrainJob or the JobSet is suspended (the Trainer's apply
        is skipped once both run)."""
        if existing is None:
            built["metadata"]["ownerReferences"] = [controller_reference(trainjob)]
            return self._write(store, trainjob, built, None)
        if not built["spec"]["suspend"] and not (existing.get("spec") or {}).get("suspend"):
            return False
        jobset = clone(existing)
        jobset["spec"]["suspend"] = built["spec"]["suspend"]
        wanted = {rj["name"]: rj for rj in built["spec"].get("replicatedJobs") or []}
        for rj in jobset["spec"].get("replicatedJobs") or []:
            source = ((wanted.get(rj["name"]) or {}).get("template") or {}).get("spec", {}).get("template") or {}
            target = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
            for part, key in (*TEMPLATE_MAPS, *TEMPLATE_LISTS):
                value = (source.get(part) or {}).get(key)
                if value:
                    target.setdefault(part, {})[key] = clone(value)
                elif isinstance(target.get(part), dict):
                    target[part].pop(key, None)
        if jobset["spec"] == existing.get("spec"):
            return False
        return self._write(store, trainjob, jobset, existing)

    def _write(self, store: Store, trainjob: dict, jobset: dict, old: dict | None) -> bool:
        """As the API server admits the Trainer's apply: the CRD's defaults, the JobSet operator's defaulting (on
        create) and validation; a refusal is a TrainJobResourcesCreationFailed Warning. (Kueue's JobSet webhook would
        change nothing: the JobSet's controlling owner is a TrainJob.)"""
        schema.default_and_prune("jobsets", jobset)
        if old is None:
            jobset_webhook.default(jobset)
        causes = schema.validate("jobsets", jobset, old) or jobset_webhook.validate(jobset, old)
        if causes:
            refusal = invalid(RESOURCES["jobsets"], jobset["metadata"]["name"], causes).message
            return self._warn(store, trainjob, f"TrainJob resources reconciliation failed: {refusal}")
        if old is None:
            store.create("jobsets", jobset)
        else:
            store.update("jobsets", jobset)
        return True

    @staticmethod
    def _warn(store: Store, trainjob: dict, message: str) -> bool:
        store.record_event(trainjob, "Warning", "TrainJobResourcesCreationFailed", message[:1024], COMPONENT)
        return True
