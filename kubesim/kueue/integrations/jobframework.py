"""Kueue's jobframework (upstream pkg/controller/jobframework/reconciler.go): the reconciler every job integration
shares, parametrised by a JobKind that says how one kind exposes its pod sets, suspension, activity, outcome and
readiness (upstream's GenericJob). One reconciler runs per enabled kind.

For a job labelled with a queue name whose namespace Kueue manages and that has no Kueue-managed ancestor, the
reconciler creates a Workload (controller-owned by the job, named by podsets.workload_name), keeps it matching the
job (queue name, WorkloadPriorityClass, pod sets while suspended), starts the job once the Workload is admitted
(merging podsets.PodSetInfo into its pod templates), stops it on eviction or when it runs without admission
(restoring the templates), releases the quota of an evicted Workload once the job is no longer active, reports
reclaimable pods and PodsReady, and finishes the Workload when the job finishes. A job whose controlling ancestor
is a Kueue-managed job gets no Workload and is suspended while that ancestor's Workload is not admitted.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from kubesim.kernel.store import controller_reference
from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.cache import ChangeGate, Changes, Key, Tracked, clone
from kubesim.kueue.integrations import podsets
from kubesim.kueue.integrations.podsets import PodSetConflict, PodSetInfo
from kubesim.kueue.scheduler.model import condition_true, find_condition, parse_time
from kubesim.kueue.state import KueueState

PROVREQ_PREFIX = "provreq.kueue.x-k8s.io/"
REPEAT_PREEMPTIONS = 3
FAILED_TO_START = "FailedToStart"


class PodSetsUnavailable(ValueError):
    """A job's pod sets cannot be built yet (a TrainJob's runtime is missing): Kueue logs the error and retries on
    the next change; the job gets no Workload meanwhile."""


class JobKind(Protocol):
    """One integrated kind, as the reconciler needs it (upstream's GenericJob and its optional interfaces)."""

    framework: str  # Configuration integrations.frameworks name, e.g. "batch/job"
    resource: str  # the kind's plural, e.g. "jobs"
    inputs: tuple[str, ...]  # other resources its pod sets are built from (a change retries waiting jobs)
    api_version: str
    kind: str
    group: str

    def pod_sets(self, store, job: dict) -> list[dict]:
        """The Workload's spec.podSets for this job (PodSetsUnavailable when they cannot be built yet)."""
        ...

    def suspended(self, job: dict) -> bool: ...

    def suspend(self, job: dict) -> None: ...

    def active(self, job: dict) -> bool:
        """Whether it still runs pods (the quota of its evicted Workload is held until it does not)."""
        ...

    def finished(self, job: dict) -> tuple[bool, bool, str]:
        """(finished, succeeded, message)."""
        ...

    def pods_ready(self, store, job: dict, wl: dict) -> bool: ...

    def reclaimable_pods(self, store, job: dict) -> list[dict]:
        """status.reclaimablePods entries ({name, count}) before they are capped at the pod sets' sizes."""
        ...

    def run(self, job: dict, infos: list[PodSetInfo]) -> None:
        """RunWithPodSetsInfo: merge the admission into the pod templates and unsuspend (PodSetConflict: permanent)."""
        ...

    def restore(self, job: dict, infos: list[PodSetInfo]) -> None:
        """RestorePodSetsInfo: put back what the Workload recorded (the job is already suspended)."""
        ...


@runtime_checkable
class SkippingKind(Protocol):
    """A kind some of whose objects Kueue leaves alone whatever their labels (upstream's JobWithSkip)."""

    def skip(self, job: dict) -> bool: ...


def owner_uid(wl: dict, kind: str | None = None) -> str | None:
    """The uid of the Workload's controller owner (of that kind when given)."""
    for ref in (wl.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and (kind is None or ref.get("kind") == kind):
            return ref.get("uid")
    return None


def release_time(wl: dict) -> datetime | None:
    """When an evicted workload's quota may be released once its job stopped: at once, except after repeated
    preemptions, which wait one emulated second. Pods take time to terminate in a real cluster, so a preemption
    livelock (possible in Kueue, e.g. with capacity held for an unreclaimable preemptor) then advances with the
    clock instead of spinning forever inside one settle."""
    evictions = ((wl.get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
    preempted = sum(int(e.get("count", 0)) for e in evictions if e.get("reason") == C.EVICTED_PREEMPTED)
    if preempted < REPEAT_PREEMPTIONS:
        return None
    evicted = parse_time((find_condition(wl, C.EVICTED) or {}).get("lastTransitionTime"))
    return None if evicted is None else evicted + timedelta(seconds=1)


def remove_in_use_finalizer(store, wl: dict) -> bool:
    md = wl["metadata"]
    if C.RESOURCE_IN_USE_FINALIZER not in (md.get("finalizers") or []):
        return False
    store.remove_finalizer("workloads", md["namespace"], md["name"], C.RESOURCE_IN_USE_FINALIZER)
    return True


class JobReconciler:
    """The jobframework's reconciler for one kind; `kinds` are every enabled kind (ancestors are looked up among
    them)."""

    def __init__(self, state: KueueState, kind: JobKind, kinds: Iterable[JobKind]) -> None:
        self.state = state
        self.config = state.config
        self.kind = kind
        self.name = f"kueue-{kind.kind.lower()}-controller"
        self._kinds = {(k.api_version, k.kind): k.resource for k in kinds}
        self._warned: set[tuple[str, str]] = set()
        watched = (kind.resource, "workloads", "resourceflavors", "workloadpriorityclasses", *kind.inputs)
        self._gate = ChangeGate(set(watched))
        self._quiet: dict[str, tuple[str, str]] = {}  # job uid -> (job rv, workload rv) when a sync wrote nothing
        self._changes = Changes(*watched)
        self._busy: set[Key] = set()  # jobs to sync again next pass although neither they nor their Workload changed
        self._releasing = Tracked("workloads", self._evicted_reserving)  # what next_deadline looks at
        self.visited = 0  # jobs looked at, all passes: grows with what changed, not what exists (a test pins it)

    def _evicted_reserving(self, wl: dict) -> bool:
        """An evicted Workload of this kind still holding its quota: its release may be paced (release_time)."""
        return bool(owner_uid(wl, self.kind.kind)) and condition_true(wl, C.EVICTED) and condition_true(
            wl, C.QUOTA_RESERVED
        )

    def next_deadline(self, store) -> datetime | None:
        """Paced releases of repeatedly preempted workloads (see release_time)."""
        now = store.clock.now()
        times = [
            at
            for wl in self._releasing.objects(store)
            if self._evicted_reserving(wl) and (at := release_time(wl)) is not None and at > now
        ]
        return min(times) if times else None

    def reconcile(self, store) -> bool:
        if not self._gate.should_run(store):
            return False
        now = store.clock.now()
        changes = self._changes.since_last(store)
        if changes is None or changes["resourceflavors"] or changes["workloadpriorityclasses"]:
            return self._full_pass(store, now)
        resource = self.kind.resource
        self._releasing.update(store, changes["workloads"])
        jobs = set(changes[resource]) | self._busy
        workloads: dict[Key, dict] = {}
        for key, seen in changes["workloads"].items():
            uid = owner_uid(seen, self.kind.kind)
            owner = store.by_uid(uid) if uid else None
            if owner is not None and owner[0] == resource:
                jobs.add((owner[1], owner[2]))
            if uid and (wl := store.get("workloads", key[0], key[1], copy=False)) is not None:
                workloads[key] = wl
        for key, seen in changes[resource].items():
            if store.get(resource, key[0], key[1], copy=False) is None:  # deleted: its Workloads may be unblocked
                self._quiet.pop(seen["metadata"]["uid"], None)
                for _, wl in store.dependents(seen["metadata"]["uid"], "workloads"):
                    workloads[(wl["metadata"]["namespace"], wl["metadata"]["name"])] = wl
        self._busy = set()
        wrote = False
        for key in sorted(jobs):
            job = store.get(resource, key[0], key[1], copy=False)
            if job is not None:
                self.visited += 1
                wrote = self._visit(store, job, self._owned(store, job), now) or wrote
        for _, wl in sorted(workloads.items()):
            uid = owner_uid(wl, self.kind.kind)
            owner = store.by_uid(uid) if uid else None
            wrote = self._release_deleted(store, wl, owner is not None and owner[0] == resource) or wrote
        return wrote

    def _full_pass(self, store, now: datetime) -> bool:
        """Every job and Workload of the kind: on the first pass, after the change history ran out, or after a
        flavor or priority class changed."""
        workloads = [wl for wl in self.state.listed(store, "workloads") if owner_uid(wl, self.kind.kind)]
        self._releasing.reset(workloads)
        by_owner: dict[str | None, list[dict]] = {}
        for wl in workloads:
            by_owner.setdefault(owner_uid(wl, self.kind.kind), []).append(wl)
        self._busy = set()
        wrote = False
        job_uids = set()
        for job in self.state.listed(store, self.kind.resource):
            self.visited += 1
            job_uids.add(job["metadata"]["uid"])
            wrote = self._visit(store, job, by_owner.get(job["metadata"]["uid"], []), now) or wrote
        for uid in set(self._quiet) - job_uids:
            del self._quiet[uid]
        for wl in workloads:
            wrote = self._release_deleted(store, wl, owner_uid(wl, self.kind.kind) in job_uids) or wrote
        return wrote

    def _owned(self, store, job: dict) -> list[dict]:
        uid = job["metadata"]["uid"]
        return [wl for _, wl in store.dependents(uid, "workloads") if owner_uid(wl, self.kind.kind) == uid]

    def _visit(self, store, job: dict, owned: list[dict], now: datetime) -> bool:
        """Sync one job unless it and its Workload are as they were after a sync that wrote nothing."""
        md = job["metadata"]
        if md.get("namespace") in C.UNMANAGED_NAMESPACES:
            return False
        if isinstance(self.kind, SkippingKind) and self.kind.skip(job):
            return False
        queue = (md.get("labels") or {}).get(C.QUEUE_NAME_LABEL)
        ancestor = self._managed_ancestor(store, job)
        if ancestor is not None:
            return self._suspend_child(store, job, ancestor)
        if not queue:
            return False
        wl = owned[0] if owned else None
        versions = (md.get("resourceVersion", ""), (wl or {}).get("metadata", {}).get("resourceVersion", ""))
        if len(owned) <= 1 and wl is not None and self._quiet.get(md["uid"]) == versions:
            return False
        try:
            synced = self._keep_one(store, job, owned) if len(owned) > 1 else self._sync(store, job, wl, now)
        except PodSetsUnavailable:
            self._busy.add((md["namespace"], md["name"]))  # retried on the next pass (an input changed, say)
            return False
        if len(owned) > 1:
            return synced
        if synced:
            self._quiet.pop(md["uid"], None)
            self._busy.add((md["namespace"], md["name"]))
            return True
        releasing = wl is not None and condition_true(wl, C.EVICTED) and condition_true(wl, C.QUOTA_RESERVED)
        if not releasing:
            self._quiet[md["uid"]] = versions  # not waiting for a paced release
        if wl is None or releasing:
            self._busy.add((md["namespace"], md["name"]))
        return False

    def _keep_one(self, store, job: dict, owned: list[dict]) -> bool:
        """ensureOneWorkload: of several Workloads the job controls, the first that matches it stays; the others
        are deleted ("Deleted not matching Workload")."""
        keep = next((wl for wl in owned if self._counts_match(store, job, wl)), None)
        for wl in owned:
            if wl is keep:
                continue
            md = wl["metadata"]
            remove_in_use_finalizer(store, wl)
            if store.get("workloads", md["namespace"], md["name"], copy=False) is not None:
                store.delete("workloads", md["namespace"], md["name"])
            message = f"Deleted not matching Workload: {md['namespace']}/{md['name']}"
            store.record_event(job, "Normal", "DeletedWorkload", message, C.CONTROLLER_NAME)
        return True

    # -- parents and orphans -----------------------------------------------------------------------------------

    def _managed_ancestor(self, store, job: dict) -> dict | None:
        """FindAncestorJobManagedByKueue: the topmost job with a queue name up the chain of controlling owners,
        following only owners of enabled kinds whose uid matches the reference."""
        found, current, seen = None, job, {job["metadata"]["uid"]}
        while True:
            ref = next((r for r in current["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
            resource = self._kinds.get((ref.get("apiVersion"), ref.get("kind"))) if ref else None
            if ref is None or resource is None or ref.get("uid") in seen:
                return found
            parent = store.get(resource, job["metadata"]["namespace"], ref.get("name", ""), copy=False)
            if parent is None or parent["metadata"]["uid"] != ref.get("uid"):
                return found
            if (parent["metadata"].get("labels") or {}).get(C.QUEUE_NAME_LABEL):
                found = parent
            seen.add(ref["uid"])
            current = parent

    def _suspend_child(self, store, job: dict, ancestor: dict) -> bool:
        """shouldSuspendChildJob: a running child of a managed job stops while the ancestor's Workload is missing or
        not admitted. A Workload that finished while admitted keeps its Admitted condition, so the children of a
        finished ancestor (a RayJob's cluster waiting for its time to live) are left to their operator."""
        if self.kind.suspended(job) or self.kind.finished(job)[0]:
            return False
        uid = ancestor["metadata"]["uid"]
        wls = [wl for _, wl in store.dependents(uid, "workloads") if owner_uid(wl) == uid]
        live = [wl for wl in wls if not condition_true(wl, C.FINISHED)] or wls[-1:]
        if live and condition_true(live[-1], C.ADMITTED):
            return False
        job = clone(job)
        self.kind.suspend(job)
        store.update(self.kind.resource, job)
        store.record_event(job, "Normal", "Suspended", "Kueue managed child job suspended", C.CONTROLLER_NAME)
        return True

    def _release_deleted(self, store, wl: dict, job_exists: bool) -> bool:
        """A deleted Workload keeps the in-use finalizer only while its job exists and it is not finished."""
        if not wl["metadata"].get("deletionTimestamp"):
            return False
        if job_exists and not condition_true(wl, C.FINISHED):
            return False
        return remove_in_use_finalizer(store, wl)

    # -- one job -------------------------------------------------------------------------------------------------

    def _sync(self, store, job: dict, wl: dict | None, now: datetime) -> bool:
        job, wl = clone(job), clone(wl)  # listed objects are the store's own: change copies only
        finished, succeeded, message = self.kind.finished(job)
        if wl is None:
            # No Workload for a finished job, nor for one being deleted (jobframework returns early for those).
            deleting = bool(job["metadata"].get("deletionTimestamp"))
            return False if finished or deleting else self._create_workload(store, job)
        md = wl["metadata"]
        if condition_true(wl, C.FINISHED):
            return remove_in_use_finalizer(store, wl)
        if md.get("deletionTimestamp"):
            self._stop(store, job, wl, "Workload is deleted")
            remove_in_use_finalizer(store, wl)
            return True
        if finished:
            ws.set_condition(wl, C.FINISHED, "True", "Succeeded" if succeeded else "Failed", message, now)
            store.update_status("workloads", wl)
            note = f"Workload '{md['namespace']}/{md['name']}' is declared finished"
            store.record_event(job, "Normal", "FinishedWorkload", note, C.CONTROLLER_NAME)
            return True
        if self._drop_mismatch(store, job, wl) or self._match_job(store, job, wl):
            return True
        if self._sync_reclaimable(store, job, wl):
            return True
        wrote = self._sync_priority_class(store, job, wl)
        wrote = self._sync_queue_name(store, job, wl) or wrote
        if self.config.wait_for_pods_ready.enable:
            wrote = self._sync_pods_ready(store, job, wl, now) or wrote
        if condition_true(wl, C.EVICTED):
            return self._evicted(store, job, wl, now) or wrote
        admitted = condition_true(wl, C.ADMITTED)
        suspended = self.kind.suspended(job)
        if suspended and admitted:
            return self._start(store, job, wl, now) or wrote
        if not suspended and not admitted:
            return self._stop(store, job, wl, "Not admitted by cluster queue") or wrote
        return wrote

    def _evicted(self, store, job: dict, wl: dict, now: datetime) -> bool:
        """Stop the job; once it runs no pods, clear the quota reservation (and set Requeued)."""
        wrote = self._stop(store, job, wl, (find_condition(wl, C.EVICTED) or {}).get("message", ""))
        job = store.get(self.kind.resource, job["metadata"]["namespace"], job["metadata"]["name"]) or job
        at = release_time(wl)
        if condition_true(wl, C.QUOTA_RESERVED) and not self.kind.active(job) and (at is None or at <= now):
            md = wl["metadata"]
            wl = store.get("workloads", md["namespace"], md["name"]) or wl
            if ws.release_after_eviction(wl, now):
                store.update_status("workloads", wl)
                wrote = True
        return wrote

    def _create_workload(self, store, job: dict) -> bool:
        md = job["metadata"]
        wl_spec = self._desired_spec(store, job)
        if wl_spec is None:
            return self._warn_missing_priority_class(store, job)
        name = podsets.workload_name(md["name"], md["uid"], self.kind.kind, self.kind.group)
        wl_md: dict = {
            "name": name,
            "namespace": md["namespace"],
            "labels": {C.JOB_UID_LABEL: md["uid"]},
            "finalizers": [C.RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": [controller_reference(job)],
        }
        # the job's ProvisioningRequest parameters travel with its Workload (Kueue copies that prefix only)
        provreq = {k: v for k, v in (md.get("annotations") or {}).items() if k.startswith(PROVREQ_PREFIX)}
        if provreq:
            wl_md["annotations"] = provreq
        store.create("workloads", {"apiVersion": C.KUEUE_API, "kind": "Workload", "metadata": wl_md, "spec": wl_spec})
        message = f"Created Workload: {md['namespace']}/{name}"
        store.record_event(job, "Normal", "CreatedWorkload", message, C.CONTROLLER_NAME)
        return True

    def _desired_spec(self, store, job: dict) -> dict | None:
        """The Workload spec Kueue constructs for this job; None when its WorkloadPriorityClass is missing."""
        labels = job["metadata"].get("labels") or {}
        wl_spec: dict = {"active": True, "queueName": labels[C.QUEUE_NAME_LABEL], "priority": 0}
        pc_name = labels.get(C.PRIORITY_CLASS_LABEL)
        if pc_name:
            pc = store.get("workloadpriorityclasses", None, pc_name)
            if pc is None:
                return None
            wl_spec["priorityClassRef"] = {"group": C.KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": pc_name}
            wl_spec["priority"] = int(pc.get("value", 0))
        max_exec = labels.get(C.MAX_EXEC_TIME_LABEL)
        if max_exec and max_exec.isascii() and max_exec.isdigit():
            wl_spec["maximumExecutionTimeSeconds"] = int(max_exec)
        wl_spec["podSets"] = self.kind.pod_sets(store, job)
        return wl_spec

    def _warn_missing_priority_class(self, store, job: dict) -> bool:
        md = job["metadata"]
        pc_name = md["labels"][C.PRIORITY_CLASS_LABEL]
        if (md["uid"], pc_name) in self._warned:
            return False
        self._warned.add((md["uid"], pc_name))
        message = f'WorkloadPriorityClass "{pc_name}" not found'
        store.record_event(job, "Warning", "WorkloadPriorityClassNotFound", message, C.CONTROLLER_NAME)
        return True

    def _drop_mismatch(self, store, job: dict, wl: dict) -> bool:
        """A job whose pod sets (names, counts) no longer match its Workload once that holds quota (or once the job
        runs): the job is stopped with its pod templates restored and the Workload deleted; the next pass creates a
        new one (jobframework's ensureOneWorkload). A suspended job's unreserved Workload is rewritten instead."""
        suspended = self.kind.suspended(job)
        if (suspended and not condition_true(wl, C.QUOTA_RESERVED)) or self._counts_match(store, job, wl):
            return False
        if not suspended:
            self._stop(store, job, wl, "No matching Workload; restoring pod templates according to existent Workload")
        md = wl["metadata"]
        remove_in_use_finalizer(store, wl)
        if store.get("workloads", md["namespace"], md["name"], copy=False) is not None:
            store.delete("workloads", md["namespace"], md["name"])
        message = f"Deleted not matching Workload: {md['namespace']}/{md['name']}"
        store.record_event(job, "Normal", "DeletedWorkload", message, C.CONTROLLER_NAME)
        return True

    def _counts_match(self, store, job: dict, wl: dict) -> bool:
        """The job's pod sets have the Workload's names and counts (or the counts a partial admission gave)."""
        have = (wl.get("spec") or {}).get("podSets") or []
        want = self.kind.pod_sets(store, job)
        if [p.get("name") for p in want] != [p.get("name") for p in have]:
            return False
        admitted = {
            psa.get("name"): psa.get("count")
            for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
        }
        return all(w["count"] in (h.get("count"), admitted.get(w["name"])) for w, h in zip(want, have, strict=True))

    def _match_job(self, store, job: dict, wl: dict) -> bool:
        """EquivalentToWorkload / updateWorkloadToMatchJob: a suspended job edited before admission gets its
        Workload's pod sets (and maximum execution time) rewritten to match."""
        if not self.kind.suspended(job) or condition_true(wl, C.QUOTA_RESERVED):
            return False
        desired = self._desired_spec(store, job)
        if desired is None:
            return False
        key = ("podSets", "maximumExecutionTimeSeconds")
        if all(desired.get(k) == (wl.get("spec") or {}).get(k) for k in key):
            return False
        wl["spec"] = {**desired, "active": (wl.get("spec") or {}).get("active", True)}
        store.update("workloads", wl)
        md = wl["metadata"]
        message = f"Updated not matching Workload for suspended job: {md['namespace']}/{md['name']}"
        store.record_event(job, "Normal", "UpdatedWorkload", message, C.CONTROLLER_NAME)
        return True

    def _sync_reclaimable(self, store, job: dict, wl: dict) -> bool:
        """status.reclaimablePods, each capped at its pod set's size (LimitReclaimablePodsToPodSetSizes)."""
        sizes = {ps.get("name"): int(ps.get("count", 0)) for ps in (wl.get("spec") or {}).get("podSets") or []}
        wanted = [
            {"name": r["name"], "count": min(r["count"], sizes[r["name"]])}
            for r in self.kind.reclaimable_pods(store, job)
            if r["name"] in sizes and r["count"] > 0
        ]
        have = (wl.get("status") or {}).get("reclaimablePods") or []
        if have == wanted:
            return False
        if wanted:
            wl.setdefault("status", {})["reclaimablePods"] = wanted
        else:
            wl["status"].pop("reclaimablePods", None)
        store.update_status("workloads", wl)
        return True

    def _sync_priority_class(self, store, job: dict, wl: dict) -> bool:
        """The job's priority-class label names another WorkloadPriorityClass: the Workload follows it, admitted or
        not, so a running workload whose class is lowered becomes a preemption candidate. Only a Workload without a
        class (before quota is reserved: the CRD freezes its presence after) or with a WorkloadPriorityClass moves;
        a change of a class's value reaches no existing Workload (as in Kueue)."""
        pc_name = (job["metadata"].get("labels") or {}).get(C.PRIORITY_CLASS_LABEL)
        spec = wl.setdefault("spec", {})
        ref = spec.get("priorityClassRef")
        if not pc_name or (ref is not None and ref.get("group") != C.KUEUE_GROUP):
            return False
        if (ref is None and condition_true(wl, C.QUOTA_RESERVED)) or (ref is not None and ref["name"] == pc_name):
            return False
        pc = store.get("workloadpriorityclasses", None, pc_name)
        if pc is None:  # the Workload keeps its class; the job is told (as on creation)
            return self._warn_missing_priority_class(store, job)
        spec["priorityClassRef"] = {"group": C.KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": pc_name}
        spec["priority"] = int(pc.get("value", 0))
        store.update("workloads", wl)
        md = wl["metadata"]
        message = f"Updated workload priority class: {md['namespace']}/{md['name']}"
        store.record_event(job, "Normal", "UpdatedWorkload", message, C.CONTROLLER_NAME)
        return True

    def _sync_queue_name(self, store, job: dict, wl: dict) -> bool:
        """The queue-name label may change while the job is suspended and not admitted: follow it."""
        queue = job["metadata"]["labels"][C.QUEUE_NAME_LABEL]
        if wl["spec"].get("queueName") == queue or condition_true(wl, C.QUOTA_RESERVED):
            return False
        if not self.kind.suspended(job):
            return False
        wl["spec"]["queueName"] = queue
        store.update("workloads", wl)
        return True

    def _sync_pods_ready(self, store, job: dict, wl: dict, now: datetime) -> bool:
        """generatePodsReadyCondition."""
        cur = find_condition(wl, C.PODS_READY)
        if not condition_true(wl, C.ADMITTED):
            new = ("False", "WaitForStart", "Not all pods are ready or succeeded")
        elif self.kind.pods_ready(store, job, wl):
            recovered = cur is not None and cur.get("reason") in ("WaitForRecovery", "Recovered")
            reason = "Recovered" if recovered else "Started"
            new = ("True", reason, "All pods reached readiness and the workload is running")
        elif cur is not None and (cur.get("status") == "True" or cur.get("reason") == "WaitForRecovery"):
            new = ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")
        else:
            new = ("False", "WaitForStart", "Not all pods are ready or succeeded")
        if cur is not None and (cur.get("status"), cur.get("reason"), cur.get("message")) == new:
            return False
        ws.set_condition(wl, C.PODS_READY, *new, now)
        store.update_status("workloads", wl)
        return True

    def _start(self, store, job: dict, wl: dict, now: datetime) -> bool:
        """startJob: the admission's pod set infos into the job, unsuspended; a conflict finishes the Workload."""
        admission = (wl.get("status") or {}).get("admission") or {}
        try:
            self.kind.run(job, podsets.from_admission(store, wl))
        except PodSetConflict as exc:
            ws.set_condition(wl, C.FINISHED, "True", FAILED_TO_START, str(exc), now)
            store.update_status("workloads", wl)
            return True
        store.update(self.kind.resource, job)
        message = f"Admitted by clusterQueue {admission.get('clusterQueue')}"
        store.record_event(job, "Normal", "Started", message, C.CONTROLLER_NAME)
        return True

    def _stop(self, store, job: dict, wl: dict, message: str) -> bool:
        """stopJob: suspend and restore the pod templates the Workload recorded."""
        if self.kind.suspended(job):
            return False
        self.kind.suspend(job)
        self.kind.restore(job, podsets.from_workload(wl))
        store.update(self.kind.resource, job)
        store.record_event(job, "Normal", "Stopped", message, C.CONTROLLER_NAME)
        return True
