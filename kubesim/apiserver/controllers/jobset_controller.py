"""The JobSet operator's controller (sigs.k8s.io/jobset v0.12.0 with its default feature gates), as the cluster runs it
beside Kubernetes' own controllers: one child Job per replicatedJob replica (`<jobset>-<replicatedJob>-<index>`,
labelled and annotated as the operator does), a headless Service named after the network subdomain, suspend and
resume of the child Jobs (on resume the replicatedJob template's labels, annotations, nodeSelector, tolerations and
scheduling gates, which Kueue may change while the JobSet is suspended, are merged into each child Job's pod
template), status.replicatedJobsStatus, the success and failure policies (kubesim.apiserver.controllers.jobset_status),
startupPolicy InOrder and dependsOn, ttlSecondsAfterFinished. Deleting a JobSet cascades to its children through
their owner references, as the garbage collector does."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from kubesim.apiserver.controllers import jobset_status as S
from kubesim.apiserver.errors import invalid
from kubesim.apiserver.registry.resources import RESOURCES
from kubesim.apiserver.validation import builtin, schema
from kubesim.kernel.clock import parse_rfc3339, rfc3339
from kubesim.kernel.store import ChangeFeed, Store, clone, controller_reference

COMPONENT = "jobset-controller"
TEMPLATE_MAPS = (("metadata", "labels"), ("metadata", "annotations"), ("spec", "nodeSelector"))
TEMPLATE_LISTS = ("tolerations", "schedulingGates")


def _controlled_by(obj: dict, uid: str) -> bool:
    return any(r.get("uid") == uid and r.get("controller") for r in obj["metadata"].get("ownerReferences") or [])


def _controller_uid(obj: dict) -> str | None:
    return next((r.get("uid") for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def _finished_at(js: dict) -> datetime | None:
    for c in (js.get("status") or {}).get("conditions") or []:
        if c.get("type") in (S.COMPLETED, S.FAILED) and c.get("status") == "True" and c.get("lastTransitionTime"):
            return parse_rfc3339(c["lastTransitionTime"])
    return None


def _expiry(js: dict) -> datetime | None:
    """When a finished JobSet with ttlSecondsAfterFinished is deleted."""
    ttl = S.spec_of(js).get("ttlSecondsAfterFinished")
    at = _finished_at(js)
    return None if ttl is None or at is None or js["metadata"].get("deletionTimestamp") else at + timedelta(seconds=ttl)


class JobSetController:
    """Controller protocol implementation for jobset.x-k8s.io/v1alpha2 JobSets."""

    name = "jobset-controller"

    def __init__(self) -> None:
        self._feed = ChangeFeed("jobsets", "jobs", "services")
        self._deadline: tuple[int, datetime | None] | None = None

    def reconcile(self, store: Store) -> bool:
        """Sync the JobSets touched since the last pass (their own writes, their child Jobs' or Services'), and those
        whose time to live ran out; every JobSet after a history gap."""
        events = self._feed.changed(store)
        if events is None:
            keys = {(js["metadata"]["namespace"], js["metadata"]["name"]) for js in store.list("jobsets", copy=False)}
        else:
            keys = set()
            for ev in events:
                md = ev.obj["metadata"]
                if ev.resource == "jobsets":
                    keys.add((md["namespace"], md["name"]))
                elif (uid := _controller_uid(ev.obj)) and (owner := store.by_uid(uid)) and owner[0] == "jobsets":
                    keys.add((owner[1], owner[2]))
        now = store.now()
        if (deadline := self.next_deadline(store)) is not None and deadline <= now:
            for js in store.list("jobsets", copy=False):
                if (at := _expiry(js)) is not None and at <= now:
                    keys.add((js["metadata"]["namespace"], js["metadata"]["name"]))
        wrote = False
        for namespace, name in sorted(keys):
            stored = store.get("jobsets", namespace, name, copy=False)
            if stored is not None:
                wrote = self._sync(store, stored) or wrote
        return wrote

    def next_deadline(self, store: Store) -> datetime | None:
        version = store.last_change("jobsets")
        if self._deadline is None or self._deadline[0] != version:
            times = [at for js in store.list("jobsets", copy=False) if (at := _expiry(js)) is not None]
            self._deadline = (version, min(times) if times else None)
        return self._deadline[1]

    # -- one JobSet ------------------------------------------------------------------------------------------

    def _sync(self, store: Store, stored: dict) -> bool:
        md = stored["metadata"]
        managed_by = S.spec_of(stored).get("managedBy")
        if md.get("deletionTimestamp") or (managed_by is not None and managed_by != S.CONTROLLER_NAME):
            return False
        js = clone(stored)
        jobs = [j for _, j in store.dependents(md["uid"], "jobs") if _controlled_by(j, md["uid"])]
        children = S.Children.of(js, jobs)
        status = js.setdefault("status", {})
        update = S.Update(status, rfc3339(store.now()))
        statuses = S.replicated_jobs_status(js, children)
        if status.get("replicatedJobsStatus") != statuses or "restarts" not in status:
            status["replicatedJobsStatus"] = statuses
            status.setdefault("restarts", 0)
            update.changed = True
        wrote = False
        if S.finished(js):
            wrote = self._delete(store, children.active)
            at = _expiry(js)
            if at is not None and at <= store.now():
                store.delete("jobsets", md["namespace"], md["name"], "Foreground")
                return True
            return self._write(store, js, update) or wrote
        wrote = self._delete(store, children.previous)
        if not S.suspended(js) and S.all_jobs_ready(js, statuses):
            update.restarting_false("JobsReady", "all jobs are ready")
        if children.failed:
            S.apply_failure_policy(js, children.failed, update)
            return self._write(store, js, update) or wrote
        if children.successful and S.success_reached(js, children.successful):
            update.completed()
            return self._write(store, js, update) or wrote
        wrote = self._ensure_service(store, js) or wrote
        wrote = self._create_jobs(store, js, children, statuses, update) or wrote
        if S.suspended(js):
            wrote = self._suspend(store, children.active) or wrote
            update.condition(S.SUSPENDED, "True", "SuspendedJobs", "jobset is suspended")
            update.restarting_false("JobSetSuspended", "jobset is suspended")
        else:
            wrote = self._resume(store, js, children.active, statuses, update) or wrote
        return self._write(store, js, update) or wrote

    def _write(self, store: Store, js: dict, update: S.Update) -> bool:
        """One status write per reconcile, then the Events of the conditions it changed."""
        if not update.changed:
            return False
        store.update_status("jobsets", js)
        for type_, reason, message in update.events:
            store.record_event(js, type_, reason, message, COMPONENT)
        return True

    @staticmethod
    def _delete(store: Store, jobs: list[dict]) -> bool:
        wrote = False
        for job in jobs:
            if not job["metadata"].get("deletionTimestamp"):
                store.delete("jobs", job["metadata"]["namespace"], job["metadata"]["name"], "Foreground")
                wrote = True
        return wrote

    # -- child Jobs and the Service ------------------------------------------------------------------------

    def _create_jobs(
        self, store: Store, js: dict, children: S.Children, statuses: list[dict], update: S.Update
    ) -> bool:
        """reconcileReplicatedJobs: create each replicatedJob's missing Jobs, in order; a replicatedJob waits for its
        dependsOn, and with startupPolicy InOrder for the one before it to have started all its Jobs. Under
        failurePolicy BlockingRecreate nothing is created while Jobs of an earlier run remain."""
        blocking = (S.spec_of(js).get("failurePolicy") or {}).get("restartStrategy") == "BlockingRecreate"
        if blocking and children.previous:
            return False
        existing, wanted, wrote = children.names(), {}, False
        in_order = S.in_order_startup(js) and not S.suspended(js)
        for rj in S.replicated_jobs(js):
            wanted[rj["name"]] = S.replicas(rj)
            if not S.dependencies_reached(rj, wanted, statuses):
                continue
            if in_order and S.all_replicas_started(rj, S.status_of(statuses, rj["name"])):
                continue
            for index in range(S.replicas(rj)):
                if S.job_name(js, rj, index) not in existing:
                    wrote = self._create_job(store, js, rj, index) or wrote
            if in_order:
                update.condition(
                    S.STARTUP_IN_PROGRESS,
                    "True",
                    "InOrderStartupPolicyInProgress",
                    "in order startup policy is in progress",
                )
                return wrote
        if in_order:
            update.condition(
                S.STARTUP_COMPLETED, "True", "InOrderStartupPolicyCompleted", "in order startup policy has completed"
            )
        return wrote

    def _create_job(self, store: Store, js: dict, rj: dict, index: int) -> bool:
        """constructJob, then the Job through the API: its registry defaults and validation (a refusal is a
        JobCreationFailed Warning on the JobSet, as the operator reports a failed create)."""
        template = clone(rj.get("template") or {})
        labels = S.child_labels(js, rj, index)
        tmd = template.get("metadata") or {}
        name = S.job_name(js, rj, index)
        spec: dict = template.get("spec") or {}
        job: dict = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": js["metadata"]["namespace"],
                "labels": {**(tmd.get("labels") or {}), **labels},
                "annotations": {**(tmd.get("annotations") or {}), **labels},
                "ownerReferences": [controller_reference(js)],
                "uid": str(uuid.uuid4()),
            },
            "spec": spec,
        }
        pod_template = spec.setdefault("template", {})
        pmd = pod_template.setdefault("metadata", {})
        pmd["labels"] = {**(pmd.get("labels") or {}), **labels}
        pmd["annotations"] = {**(pmd.get("annotations") or {}), **labels}
        if S.dns_hostnames(js):
            pod_template.setdefault("spec", {})["subdomain"] = S.subdomain(js)
        spec["suspend"] = S.suspended(js)
        builtin.apply_defaults("jobs", job, None)
        builtin.label_job(job)
        causes = schema.validate("jobs", job, None)
        causes = causes or builtin.validate("jobs", job, None)
        if causes:
            refusal = invalid(RESOURCES["jobs"], name, causes).message
            store.record_event(
                js, "Warning", "JobCreationFailed", f'job "{name}" creation failed with error: {refusal}', COMPONENT
            )
            return True
        store.create("jobs", job)
        return True

    @staticmethod
    def _ensure_service(store: Store, js: dict) -> bool:
        """The headless Service that gives the pods DNS names under the subdomain (when enableDNSHostnames)."""
        if not S.dns_hostnames(js):
            return False
        name, namespace = S.subdomain(js), js["metadata"]["namespace"]
        if store.get("services", namespace, name, copy=False) is not None:
            return False
        network = S.spec_of(js).get("network") or {}
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [controller_reference(js)]},
            "spec": {
                "type": "ClusterIP",
                "clusterIP": "None",
                "clusterIPs": ["None"],
                "selector": {S.JOBSET_NAME: js["metadata"]["name"]},
                "publishNotReadyAddresses": network.get("publishNotReadyAddresses", True) is not False,
            },
        }
        store.create("services", service)
        return True

    # -- suspend and resume ----------------------------------------------------------------------------------

    @staticmethod
    def _suspend(store: Store, active: list[dict]) -> bool:
        wrote = False
        for job in active:
            if not S.suspended(job):
                job = clone(job)
                job["spec"]["suspend"] = True
                store.update("jobs", job)
                wrote = True
        return wrote

    def _resume(self, store: Store, js: dict, active: list[dict], statuses: list[dict], update: S.Update) -> bool:
        """resumeJobsIfNecessary: unsuspend the active child Jobs replicatedJob by replicatedJob (waiting for
        dependsOn, and with InOrder for each replicatedJob before the next), then mark the JobSet resumed."""
        by_rj: dict[str, list[dict]] = {}
        for job in active:
            by_rj.setdefault((job["metadata"].get("labels") or {}).get(S.REPLICATED_JOB_NAME, ""), []).append(job)
        wanted, wrote = {}, False
        in_order = S.in_order_startup(js)
        for rj in S.replicated_jobs(js):
            wanted[rj["name"]] = S.replicas(rj)
            if not S.dependencies_reached(rj, wanted, statuses):
                continue
            if in_order and S.all_replicas_started(rj, S.status_of(statuses, rj["name"])):
                continue
            for job in by_rj.get(rj["name"], []):
                if S.suspended(job):
                    self._resume_job(store, job, rj)
                    wrote = True
            if in_order:
                update.condition(
                    S.STARTUP_IN_PROGRESS,
                    "True",
                    "InOrderStartupPolicyInProgress",
                    "in order startup policy is in progress",
                )
                return wrote
        update.condition(S.SUSPENDED, "False", "ResumeJobs", "jobset is resumed")
        return wrote

    @staticmethod
    def _resume_job(store: Store, stored: dict, rj: dict) -> None:
        """A Job's pod template may change only while it is suspended and not started: clear startTime, merge the
        replicatedJob template's mutable fields (its values win; nothing the Job has is removed), unsuspend."""
        job = clone(stored)
        if (job.get("status") or {}).get("startTime"):
            job["status"].pop("startTime")
            job = clone(store.update_status("jobs", job))
        source = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
        target = job["spec"].setdefault("template", {})
        for part, key in TEMPLATE_MAPS:
            merged = {**((target.get(part) or {}).get(key) or {}), **((source.get(part) or {}).get(key) or {})}
            if merged:
                target.setdefault(part, {})[key] = merged
        for key in TEMPLATE_LISTS:
            merged_list = list((target.get("spec") or {}).get(key) or [])
            merged_list += [item for item in (source.get("spec") or {}).get(key) or [] if item not in merged_list]
            if merged_list:
                target.setdefault("spec", {})[key] = merged_list
        job["spec"]["suspend"] = False
        store.update("jobs", job)
