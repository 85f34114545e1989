"""Kueue's batch/v1 Job integration: Job -> Workload, start/stop of the Job on admission/eviction, Finished.

Mirrors pkg/controller/jobframework/reconciler.go for the subset kubesim needs.
"""

from __future__ import annotations

import copy
import hashlib
from datetime import datetime, timedelta

from kubesim.kernel.store import controller_reference
from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.cache import ChangeGate, Changes, Key, clone
from kubesim.kueue.scheduler.model import condition_true, find_condition, parse_time
from kubesim.kueue.state import KueueState

MAX_PREFIX = 253 - 1 - 5


PROVREQ_PREFIX = "provreq.kueue.x-k8s.io/"


def workload_name(job_name: str, job_uid: str, kind: str = "Job", group: str = "batch") -> str:
    """GetWorkloadNameForOwnerWithGVK: `job-<name>` truncated, `-`, first 5 hex of sha1(kind\\ngroup\\nname\\nuid)."""
    digest = hashlib.sha1(f"{kind}\n{group}\n{job_name}\n{job_uid}".encode(), usedforsecurity=False).hexdigest()
    prefix = f"{kind.lower()}-{job_name}"[:MAX_PREFIX]
    return f"{prefix}-{digest[:5]}"


def job_finished(job: dict) -> tuple[bool, bool, str]:
    """(finished, succeeded, message) from the Job's Complete/Failed condition."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return True, c["type"] == "Complete", c.get("message", "")
    return False, True, ""


def pod_count(job: dict) -> int:
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions")
    return min(parallelism, completions) if completions is not None else parallelism


def _indexes_count(ranges: str, completions: int) -> int:
    """How many indexes below completions a Job's completedIndexes/failedIndexes string ("0-2,4") names."""
    seen: set[int] = set()
    for part in (ranges or "").split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            continue
        seen.update(i for i in range(int(first), int(last or first) + 1) if i < completions)
    return len(seen)


def reclaimable_pods(job: dict) -> int:
    """Parallel slots no longer needed: parallelism minus the completions still to go, once a pod has finished."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    parallelism = int(spec.get("parallelism", 1))
    raw_completions = spec.get("completions")
    completions = parallelism if raw_completions is None else int(raw_completions)
    terminal = int(status.get("succeeded") or 0)
    if spec.get("completionMode") == "Indexed":
        terminal = _indexes_count(
            ",".join(x for x in (status.get("completedIndexes"), status.get("failedIndexes")) if x), completions
        )
    if parallelism <= 1 or terminal <= 0:
        return 0
    remaining = max(completions - terminal, 0)
    return parallelism - remaining if remaining < parallelism else 0


def owner_uid(wl: dict) -> str | None:
    for ref in (wl.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job":
            return ref.get("uid")
    return None


REPEAT_PREEMPTIONS = 3


def release_time(wl: dict) -> datetime | None:
    """When an evicted workload's quota may be released once its Job stopped: at once, except after repeated
    preemptions, which wait one emulated second. Pods take time to terminate in a real cluster, so a preemption
    livelock (possible in Kueue, e.g. with capacity held for an unreclaimable preemptor) then advances with the
    clock instead of spinning forever inside one settle."""
    evictions = ((wl.get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
    preempted = sum(int(e.get("count", 0)) for e in evictions if e.get("reason") == C.EVICTED_PREEMPTED)
    if preempted < REPEAT_PREEMPTIONS:
        return None
    evicted = parse_time((find_condition(wl, C.EVICTED) or {}).get("lastTransitionTime"))
    return None if evicted is None else evicted + timedelta(seconds=1)


class JobIntegration:
    """The Job reconciler of Kueue's jobframework, for Jobs labelled with a queue name."""

    name = "kueue-job-controller"

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self.config = state.config
        self._warned: set[tuple[str, str]] = set()
        self._gate = ChangeGate({"jobs", "workloads", "resourceflavors", "workloadpriorityclasses"})
        self._quiet: dict[str, tuple[str, str]] = {}  # job uid -> (job rv, workload rv) when a sync wrote nothing
        self._changes = Changes("jobs", "workloads", "resourceflavors", "workloadpriorityclasses")
        self._busy: set[Key] = set()  # Jobs to sync again next pass although neither they nor their Workload changed

    def next_deadline(self, store) -> datetime | None:
        """Paced releases of repeatedly preempted workloads (see release_time)."""
        now = store.clock.now()
        times = [
            at
            for wl in self.state.listed(store, "workloads")
            if condition_true(wl, C.EVICTED) and condition_true(wl, C.QUOTA_RESERVED)
            if (at := release_time(wl)) is not None and at > now
        ]
        return min(times) if times else None

    def reconcile(self, store) -> bool:
        if not self._gate.should_run(store):
            return False
        now = store.clock.now()
        changes = self._changes.since_last(store)
        if changes is None or changes["resourceflavors"] or changes["workloadpriorityclasses"]:
            return self._full_pass(store, now)
        jobs = set(changes["jobs"]) | self._busy
        workloads: dict[Key, dict] = {}
        orphans = False
        for key, seen in changes["workloads"].items():
            uid = owner_uid(seen)
            owner = store.by_uid(uid) if uid else None
            if owner is not None and owner[0] == "jobs":
                jobs.add((owner[1], owner[2]))
            if (wl := store.get("workloads", key[0], key[1], copy=False)) is not None:
                workloads[key] = wl
        for key, seen in changes["jobs"].items():
            if store.get("jobs", key[0], key[1], copy=False) is None:  # deleted: its Workloads may be unblocked
                uid = seen["metadata"]["uid"]
                self._quiet.pop(uid, None)
                for _, wl in store.dependents(uid, "workloads"):
                    workloads[(wl["metadata"]["namespace"], wl["metadata"]["name"])] = wl
                orphans = self._finalize_orphans(store, key[0], uid, now) or orphans
        self._busy = set()
        wrote = orphans
        for key in sorted(jobs):
            job = store.get("jobs", key[0], key[1], copy=False)
            if job is not None:
                uid = job["metadata"]["uid"]
                owned = [wl for _, wl in store.dependents(uid, "workloads") if owner_uid(wl) == uid]
                wrote = self._visit(store, job, owned[-1] if owned else None, now) or wrote
        for _, wl in sorted(workloads.items()):
            uid = owner_uid(wl)
            owner = store.by_uid(uid) if uid else None
            wrote = self._release_deleted(store, wl, owner is not None and owner[0] == "jobs") or wrote
        return wrote

    def _full_pass(self, store, now: datetime) -> bool:
        """Every Job and Workload: on the first pass, after the change history ran out, or after a flavor or
        priority class changed."""
        workloads = self.state.listed(store, "workloads")
        by_owner = {uid: wl for wl in workloads if (uid := owner_uid(wl))}
        self._busy = set()
        wrote = False
        job_uids = set()
        for job in self.state.listed(store, "jobs"):
            job_uids.add(job["metadata"]["uid"])
            wrote = self._visit(store, job, by_owner.get(job["metadata"]["uid"]), now) or wrote
        for uid in set(self._quiet) - job_uids:
            del self._quiet[uid]
        for wl in workloads:
            wrote = self._release_deleted(store, wl, owner_uid(wl) in job_uids) or wrote
        return wrote

    def _visit(self, store, job: dict, wl: dict | None, now: datetime) -> bool:
        """Sync one Job unless it and its Workload are as they were after a sync that wrote nothing."""
        md = job["metadata"]
        if not (md.get("labels") or {}).get(C.QUEUE_NAME_LABEL):
            return False
        versions = (md.get("resourceVersion", ""), (wl or {}).get("metadata", {}).get("resourceVersion", ""))
        if wl is not None and self._quiet.get(md["uid"]) == versions:
            return False
        if self._sync(store, job, wl, now):
            self._quiet.pop(md["uid"], None)
            self._busy.add((md["namespace"], md["name"]))
            return True
        releasing = wl is not None and condition_true(wl, C.EVICTED) and condition_true(wl, C.QUOTA_RESERVED)
        if not releasing:
            self._quiet[md["uid"]] = versions  # not waiting for a paced release
        if wl is None or releasing:
            self._busy.add((md["namespace"], md["name"]))
        return False

    @staticmethod
    def _finalize_orphans(store, namespace: str, job_uid: str, now: datetime) -> bool:
        """The Job is gone and left its Workloads behind (orphan deletion strips their owner references): Kueue
        drops their in-use finalizer (FinalizeOrphanedWorkload; one still controlled by the Job would be finished
        with OwnerNotFound first, which an orphaning delete never leaves)."""
        wrote = False
        for wl in store.list("workloads", namespace, {C.JOB_UID_LABEL: job_uid}, copy=False):
            md = wl["metadata"]
            if md.get("deletionTimestamp") or C.RESOURCE_IN_USE_FINALIZER not in (md.get("finalizers") or []):
                continue
            if owner_uid(wl) == job_uid and not condition_true(wl, C.FINISHED):
                new = clone(wl)
                message = "The workload's owner no longer exists"
                ws.set_condition(new, C.FINISHED, "True", "OwnerNotFound", message, now)
                store.update_status("workloads", new)
            store.remove_finalizer("workloads", md["namespace"], md["name"], C.RESOURCE_IN_USE_FINALIZER)
            wrote = True
        return wrote

    @staticmethod
    def _release_deleted(store, wl: dict, job_exists: bool) -> bool:
        """A deleted Workload keeps the in-use finalizer only while its Job exists and it is not finished."""
        md = wl["metadata"]
        if not (md.get("deletionTimestamp") and C.RESOURCE_IN_USE_FINALIZER in (md.get("finalizers") or [])):
            return False
        if owner_uid(wl) is not None and job_exists and not condition_true(wl, C.FINISHED):
            return False
        store.remove_finalizer("workloads", md["namespace"], md["name"], C.RESOURCE_IN_USE_FINALIZER)
        return True

    # -- one Job -------------------------------------------------------------------------------------------

    def _sync(self, store, job: dict, wl: dict | None, now: datetime) -> bool:
        job, wl = clone(job), clone(wl)  # listed objects are the store's own: change copies only
        finished, succeeded, message = job_finished(job)
        if wl is None:
            # No Workload for a finished Job, nor for one being deleted (jobframework returns early for those).
            deleting = bool(job["metadata"].get("deletionTimestamp"))
            return False if finished or deleting else self._create_workload(store, job)
        md = wl["metadata"]
        if condition_true(wl, C.FINISHED):
            if C.RESOURCE_IN_USE_FINALIZER in (md.get("finalizers") or []):
                store.remove_finalizer("workloads", md["namespace"], md["name"], C.RESOURCE_IN_USE_FINALIZER)
                return True
            return False
        if md.get("deletionTimestamp"):
            self._stop(store, job, wl, "Workload is deleted")
            store.remove_finalizer("workloads", md["namespace"], md["name"], C.RESOURCE_IN_USE_FINALIZER)
            return True
        if finished:
            reason = "Succeeded" if succeeded else "Failed"
            ws.set_condition(wl, C.FINISHED, "True", reason, message, now)
            store.update_status("workloads", wl)
            store.record_event(
                job,
                "Normal",
                "FinishedWorkload",
                f"Workload '{md['namespace']}/{md['name']}' is declared finished",
                C.CONTROLLER_NAME,
            )
            return True
        if self._drop_mismatch(store, job, wl):
            return True
        if self._match_job(store, job, wl):
            return True
        if self._sync_reclaimable(store, job, wl):
            return True
        wrote = self._sync_priority_class(store, job, wl)
        wrote = self._sync_queue_name(store, job, wl) or wrote
        if self.config.wait_for_pods_ready.enable:
            wrote = self._sync_pods_ready(store, job, wl, now) or wrote
        evicted = find_condition(wl, C.EVICTED)
        if evicted is not None and evicted.get("status") == "True":
            wrote = self._stop(store, job, wl, evicted.get("message", "")) or wrote
            job = store.get("jobs", job["metadata"]["namespace"], job["metadata"]["name"]) or job
            inactive = not (job.get("status") or {}).get("active")
            at = release_time(wl)
            if condition_true(wl, C.QUOTA_RESERVED) and inactive and (at is None or at <= now):
                wl = store.get("workloads", md["namespace"], md["name"]) or wl
                if ws.release_after_eviction(wl, now):
                    store.update_status("workloads", wl)
                    wrote = True
            return wrote
        admitted = condition_true(wl, C.ADMITTED)
        suspended = bool((job.get("spec") or {}).get("suspend"))
        if suspended and admitted:
            return self._start(store, job, wl) or wrote
        if not suspended and not admitted:
            return self._stop(store, job, wl, "Not admitted by cluster queue") or wrote
        return wrote

    def _create_workload(self, store, job: dict) -> bool:
        md = job["metadata"]
        wl_spec = self._desired_spec(store, job)
        if wl_spec is None:
            return self._warn_missing_priority_class(store, job)
        name = workload_name(md["name"], md["uid"])
        wl_md: dict = {
            "name": name,
            "namespace": md["namespace"],
            "labels": {C.JOB_UID_LABEL: md["uid"]},
            "finalizers": [C.RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": [controller_reference(job)],
        }
        # the Job's ProvisioningRequest parameters travel with its Workload (Kueue copies that prefix only)
        provreq = {k: v for k, v in (md.get("annotations") or {}).items() if k.startswith(PROVREQ_PREFIX)}
        if provreq:
            wl_md["annotations"] = provreq
        wl = {"apiVersion": C.KUEUE_API, "kind": "Workload", "metadata": wl_md, "spec": wl_spec}
        store.create("workloads", wl)
        store.record_event(
            job, "Normal", "CreatedWorkload", f"Created Workload: {md['namespace']}/{name}", C.CONTROLLER_NAME
        )
        return True

    @staticmethod
    def _desired_spec(store, job: dict) -> dict | None:
        """The Workload spec Kueue constructs for this Job; None when its WorkloadPriorityClass is missing."""
        md = job["metadata"]
        labels = md.get("labels") or {}
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
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        podset: dict = {"name": "main", "count": pod_count(job), "template": template}
        min_par = (md.get("annotations") or {}).get(C.MIN_PARALLELISM_ANNOTATION)
        if min_par and min_par.isascii() and min_par.isdigit() and int(min_par) < podset["count"]:
            podset["minCount"] = int(min_par)
        wl_spec["podSets"] = [podset]
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
        """A Job whose pod count no longer matches its Workload once that holds quota (or once the Job runs):
        the Job is stopped with its pod template restored and the Workload deleted; the next pass creates a new
        one (jobframework's ensureOneWorkload). A suspended Job's unreserved Workload is rewritten instead."""
        suspended = bool((job.get("spec") or {}).get("suspend"))
        if suspended and not condition_true(wl, C.QUOTA_RESERVED):
            return False
        podsets = (wl.get("spec") or {}).get("podSets") or []
        if len(podsets) != 1:
            return False
        counts = {podsets[0].get("count")}
        for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
            counts.add(psa.get("count"))  # a partial admission runs the Job with fewer pods
        if pod_count(job) in counts:
            return False
        if not suspended:
            self._stop(store, job, wl, "No matching Workload; restoring pod templates according to existent Workload")
        md = wl["metadata"]
        if C.RESOURCE_IN_USE_FINALIZER in (md.get("finalizers") or []):
            store.remove_finalizer("workloads", md["namespace"], md["name"], C.RESOURCE_IN_USE_FINALIZER)
        if store.get("workloads", md["namespace"], md["name"], copy=False) is not None:
            store.delete("workloads", md["namespace"], md["name"])
        message = f"Deleted not matching Workload: {md['namespace']}/{md['name']}"
        store.record_event(job, "Normal", "DeletedWorkload", message, C.CONTROLLER_NAME)
        return True

    def _match_job(self, store, job: dict, wl: dict) -> bool:
        """EquivalentToWorkload / updateWorkloadToMatchJob: a suspended Job edited before admission gets its
        Workload's pod sets (and maximum execution time) rewritten to match."""
        if not (job.get("spec") or {}).get("suspend") or condition_true(wl, C.QUOTA_RESERVED):
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

    @staticmethod
    def _sync_reclaimable(store, job: dict, wl: dict) -> bool:
        """status.reclaimablePods: the parallel slots fewer remaining completions leave idle (Job.ReclaimablePods),
        capped at the pod set's size."""
        want = reclaimable_pods(job)
        podsets = (wl.get("spec") or {}).get("podSets") or []
        if want and podsets:
            want = min(want, int(podsets[0].get("count", 0)))
        have = (wl.get("status") or {}).get("reclaimablePods") or []
        wanted = [{"name": podsets[0].get("name", "main") if podsets else "main", "count": want}] if want else []
        if have == wanted:
            return False
        if wanted:
            wl.setdefault("status", {})["reclaimablePods"] = wanted
        else:
            wl["status"].pop("reclaimablePods", None)
        store.update_status("workloads", wl)
        return True

    def _sync_priority_class(self, store, job: dict, wl: dict) -> bool:
        """The Job's priority-class label names another WorkloadPriorityClass: the Workload follows it, admitted or
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
        if pc is None:  # the Workload keeps its class; the Job is told (as on creation)
            return self._warn_missing_priority_class(store, job)
        spec["priorityClassRef"] = {"group": C.KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": pc_name}
        spec["priority"] = int(pc.get("value", 0))
        store.update("workloads", wl)
        md = wl["metadata"]
        message = f"Updated workload priority class: {md['namespace']}/{md['name']}"
        store.record_event(job, "Normal", "UpdatedWorkload", message, C.CONTROLLER_NAME)
        return True

    def _sync_queue_name(self, store, job: dict, wl: dict) -> bool:
        """The queue-name label may change while the Job is suspended and not admitted: follow it."""
        queue = job["metadata"]["labels"][C.QUEUE_NAME_LABEL]
        if wl["spec"].get("queueName") == queue or condition_true(wl, C.QUOTA_RESERVED):
            return False
        if not (job.get("spec") or {}).get("suspend"):
            return False
        wl["spec"]["queueName"] = queue
        store.update("workloads", wl)
        return True

    def _sync_pods_ready(self, store, job: dict, wl: dict, now: datetime) -> bool:
        """generatePodsReadyCondition."""
        cur = find_condition(wl, C.PODS_READY)
        status = job.get("status") or {}
        count = sum(
            int(p.get("count", 0))
            for p in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
        )
        # pods ready, succeeded, and succeeded but not yet counted by the job controller (Job.PodsReady)
        uncounted = len((status.get("uncountedTerminatedPods") or {}).get("succeeded") or [])
        done = int(status.get("ready") or 0) + int(status.get("succeeded") or 0) + uncounted
        ready = condition_true(wl, C.ADMITTED) and done >= max(count, 1)
        if not condition_true(wl, C.ADMITTED):
            new = ("False", "WaitForStart", "Not all pods are ready or succeeded")
        elif ready:
            recovered = cur is not None and cur.get("reason") in ("WaitForRecovery", "Recovered")
            new = (
                "True",
                "Recovered" if recovered else "Started",
                "All pods reached readiness and the workload is running",
            )
        elif cur is not None and (cur.get("status") == "True" or cur.get("reason") == "WaitForRecovery"):
            new = ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")
        else:
            new = ("False", "WaitForStart", "Not all pods are ready or succeeded")
        if cur is not None and (cur.get("status"), cur.get("reason"), cur.get("message")) == new:
            return False
        ws.set_condition(wl, C.PODS_READY, *new, now)
        store.update_status("workloads", wl)
        return True

    def _start(self, store, job: dict, wl: dict) -> bool:
        """startJob: inject the flavors' node labels and tolerations, set parallelism, unsuspend."""
        admission = (wl.get("status") or {}).get("admission") or {}
        psa = next(iter(admission.get("podSetAssignments") or []), None)
        template = job["spec"].setdefault("template", {})
        pod_spec = template.setdefault("spec", {})
        if psa is not None:
            for flavor_name in sorted(set((psa.get("flavors") or {}).values())):
                flavor = store.get("resourceflavors", None, flavor_name) or {}
                fspec = flavor.get("spec") or {}
                if fspec.get("nodeLabels"):
                    pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **fspec["nodeLabels"]}
                for tol in fspec.get("tolerations") or []:
                    tols = pod_spec.setdefault("tolerations", [])
                    if tol not in tols:
                        tols.append(tol)
            count = psa.get("count")
            if count is not None and count != pod_count(job):
                job["spec"]["parallelism"] = count
            template.setdefault("metadata", {}).setdefault("labels", {})[C.PODSET_LABEL] = psa.get("name", "main")
            self._apply_check_updates(wl, psa.get("name", "main"), template)
        job["spec"]["suspend"] = False
        store.update("jobs", job)
        store.record_event(
            job, "Normal", "Started", f"Admitted by clusterQueue {admission.get('clusterQueue')}", C.CONTROLLER_NAME
        )
        return True

    @staticmethod
    def _apply_check_updates(wl: dict, podset: str, template: dict) -> None:
        """The admission checks' podSetUpdates (labels, annotations, nodeSelector, tolerations) for this pod set."""
        for check in (wl.get("status") or {}).get("admissionChecks") or []:
            for update in check.get("podSetUpdates") or []:
                if update.get("name") != podset:
                    continue
                md = template.setdefault("metadata", {})
                for key in ("labels", "annotations"):
                    if update.get(key):
                        md[key] = {**(md.get(key) or {}), **update[key]}
                pod_spec = template.setdefault("spec", {})
                if update.get("nodeSelector"):
                    pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **update["nodeSelector"]}
                for tol in update.get("tolerations") or []:
                    if tol not in pod_spec.setdefault("tolerations", []):
                        pod_spec["tolerations"].append(tol)

    def _stop(self, store, job: dict, wl: dict, message: str) -> bool:
        """stopJob: suspend and restore the pod template and parallelism the Workload recorded."""
        if (job.get("spec") or {}).get("suspend"):
            return False
        podsets = (wl.get("spec") or {}).get("podSets") or []
        if podsets:
            original = copy.deepcopy(podsets[0].get("template") or {})
            template = job["spec"].setdefault("template", {})
            tspec = template.setdefault("spec", {})
            for key in ("nodeSelector", "tolerations"):
                if key in (original.get("spec") or {}):
                    tspec[key] = original["spec"][key]
                else:
                    tspec.pop(key, None)
            if "metadata" in original:
                template["metadata"] = original["metadata"]
            else:
                template.pop("metadata", None)
            if job["spec"].get("parallelism") != podsets[0].get("count") and podsets[0].get("minCount") is not None:
                job["spec"]["parallelism"] = podsets[0].get("count")
        job["spec"]["suspend"] = True
        store.update("jobs", job)
        store.record_event(job, "Normal", "Stopped", message, C.CONTROLLER_NAME)
        return True
