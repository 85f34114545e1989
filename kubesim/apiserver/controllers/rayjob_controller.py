"""KubeRay's RayJob controller (ray-project/kuberay v1.7.0, K8sJobMode and SidecarMode), as the cluster runs it beside
Kubernetes' own controllers. jobDeploymentStatus moves as KubeRay moves it: "" (New: finalizer, jobId and
rayClusterName `<rayjob>-<suffix>`, startTime) -> Initializing (the RayCluster, controlled by the RayJob and carrying
its labels and annotations, created from spec.rayClusterSpec; waits for its state `ready`) -> Running (K8sJobMode:
the submitter Job, named like the RayJob, `backoffLimit` 2) -> Complete or Failed (endTime; with
shutdownAfterJobFinishes the RayCluster is deleted ttlSecondsAfterFinished later). spec.suspend moves a Running or
Initializing RayJob to Suspending (its RayCluster and submitter Job deleted, status reset) then Suspended; unsuspended,
it starts again from New.

Ray's own view of the job (jobStatus, read by KubeRay from the Ray dashboard) is the submitter's run here: RUNNING
once a submitter pod started, SUCCEEDED or FAILED with the first submitter pod's exit code (the kubelet runs the
entrypoint's `sleep N` / `exit N` and honours `kubesim.io/run-seconds` on the submitter pod template). The submitter's
command is KubeRay's `ray job submit` line without its dashboard health wait loop, whose `sleep 2` the kubelet would
take for the job's run time."""

from __future__ import annotations

import secrets
import shlex
import uuid
from datetime import datetime, timedelta

from kubesim.apiserver.controllers import raycluster_controller as rc
from kubesim.apiserver.validation import builtin, schema
from kubesim.kernel.clock import parse_rfc3339, rfc3339
from kubesim.kernel.store import ChangeFeed, Store, clone, controller_reference

COMPONENT = "rayjob-controller"
FINALIZER = "ray.io/rayjob-finalizer"
SUBMITTER = "ray-job-submitter"
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' rand.String alphabet
TERMINAL = ("Complete", "Failed")
SUBMITTER_RESOURCES = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}


def submission_mode(rayjob: dict) -> str:
    return rc.spec_of(rayjob).get("submissionMode") or "K8sJobMode"


def default_submitter_template(cluster_spec: dict) -> dict:
    """GetSubmitterTemplate without a user template: one container on the head's image, restartPolicy Never."""
    head = ((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    image = ((head.get("containers") or [{}])[0]).get("image", "")
    container = {"name": SUBMITTER, "image": image, "resources": clone(SUBMITTER_RESOURCES)}
    return {"spec": {"containers": [container], "restartPolicy": "Never"}}


def _suffix() -> str:
    return "".join(secrets.choice(NAME_ALPHABET) for _ in range(5))


def _controller_uid(obj: dict) -> str | None:
    return next((r.get("uid") for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def _job_condition(job: dict) -> dict | None:
    """The submitter Job's terminal condition (Complete or Failed, True)."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return c
    return None


def _expiry(rayjob: dict) -> datetime | None:
    """When a finished RayJob's RayCluster is shut down (shutdownAfterJobFinishes)."""
    spec, status = rc.spec_of(rayjob), rayjob.get("status") or {}
    if not spec.get("shutdownAfterJobFinishes") or spec.get("clusterSelector"):
        return None
    if status.get("jobDeploymentStatus") not in TERMINAL or not status.get("endTime"):
        return None
    return parse_rfc3339(status["endTime"]) + timedelta(seconds=int(spec.get("ttlSecondsAfterFinished") or 0))


class RayJobController:
    """Controller protocol implementation for ray.io/v1 RayJobs."""

    name = COMPONENT

    def __init__(self) -> None:
        self._feed = ChangeFeed("rayjobs", "rayclusters", "jobs")
        self._deadline: tuple[int, datetime | None] | None = None

    def reconcile(self, store: Store) -> bool:
        events = self._feed.changed(store)
        if events is None:
            keys = {(j["metadata"]["namespace"], j["metadata"]["name"]) for j in store.list("rayjobs", copy=False)}
        else:
            keys = set()
            for ev in events:
                md = ev.obj["metadata"]
                if ev.resource == "rayjobs":
                    keys.add((md["namespace"], md["name"]))
                elif (uid := _controller_uid(ev.obj)) and (owner := store.by_uid(uid)) and owner[0] == "rayjobs":
                    keys.add((owner[1], owner[2]))
        now = store.now()
        if (deadline := self.next_deadline(store)) is not None and deadline <= now:
            for job in store.list("rayjobs", copy=False):
                if (at := _expiry(job)) is not None and at <= now and self._cluster(store, job) is not None:
                    keys.add((job["metadata"]["namespace"], job["metadata"]["name"]))
        wrote = False
        for namespace, name in sorted(keys):
            stored = store.get("rayjobs", namespace, name, copy=False)
            if stored is not None:
                wrote = self._sync(store, clone(stored)) or wrote
        return wrote

    def next_deadline(self, store: Store) -> datetime | None:
        """When the next finished RayJob's cluster is due to be shut down (recomputed after RayJob or RayCluster
        writes)."""
        version = store.last_change("rayjobs", "rayclusters")
        if self._deadline is None or self._deadline[0] != version:
            times = [
                at
                for job in store.list("rayjobs", copy=False)
                if (at := _expiry(job)) is not None and self._cluster(store, job) is not None
            ]
            self._deadline = (version, min(times) if times else None)
        return self._deadline[1]

    @staticmethod
    def _cluster(store: Store, rayjob: dict) -> dict | None:
        name = (rayjob.get("status") or {}).get("rayClusterName")
        return store.get("rayclusters", rayjob["metadata"]["namespace"], name, copy=False) if name else None

    # -- one RayJob ----------------------------------------------------------------------------------------------

    def _sync(self, store: Store, rayjob: dict) -> bool:
        md = rayjob["metadata"]
        managed_by = rc.spec_of(rayjob).get("managedBy")
        if managed_by is not None and managed_by != rc.OPERATOR:
            return False
        if md.get("deletionTimestamp"):
            if FINALIZER in (md.get("finalizers") or []):
                store.remove_finalizer("rayjobs", md["namespace"], md["name"], FINALIZER)
                return True
            return False
        status = rayjob.setdefault("status", {})
        old = clone(status)
        state = status.get("jobDeploymentStatus", "")
        wrote = False
        if state == "":
            if FINALIZER not in (md.get("finalizers") or []):
                md.setdefault("finalizers", []).append(FINALIZER)
                rayjob = store.update("rayjobs", rayjob)
                rayjob = clone(rayjob)
                status = rayjob.setdefault("status", {})
                wrote = True
            self._initialize(store, rayjob, status)
        elif state in ("Initializing", "Running") and rc.spec_of(rayjob).get("suspend"):
            status["jobDeploymentStatus"] = "Suspending"
        elif state == "Initializing":
            wrote = self._initializing(store, rayjob, status)
        elif state == "Running":
            wrote = self._running(store, rayjob, status)
        elif state == "Suspending":
            wrote = self._suspending(store, rayjob, status)
        elif state == "Suspended" and not rc.spec_of(rayjob).get("suspend"):
            status["jobStatus"] = ""
            status["jobDeploymentStatus"] = ""
        elif state in TERMINAL:
            wrote = self._finished(store, rayjob)
        return self._write(store, rayjob, old) or wrote

    def _write(self, store: Store, rayjob: dict, old: dict) -> bool:
        status = rayjob["status"]
        if status.get("jobDeploymentStatus") in TERMINAL and old.get("jobDeploymentStatus") not in TERMINAL:
            status["endTime"] = rfc3339(store.now())
            counter = "succeeded" if status.get("jobStatus") == "SUCCEEDED" else "failed"
            status[counter] = int(status.get(counter) or 0) + 1
        if status == old:
            return False
        status["observedGeneration"] = rayjob["metadata"].get("generation", 1)
        store.update_status("rayjobs", rayjob)
        return True

    @staticmethod
    def _initialize(store: Store, rayjob: dict, status: dict) -> None:
        """initRayJobStatusIfNeed."""
        spec, name = rc.spec_of(rayjob), rayjob["metadata"]["name"]
        if submission_mode(rayjob) != "InteractiveMode" and not status.get("jobId"):
            status["jobId"] = spec.get("jobId") or f"{name}-{_suffix()}"
        if not status.get("rayClusterName"):
            selected = (spec.get("clusterSelector") or {}).get(rc.CLUSTER_LABEL)
            status["rayClusterName"] = selected or f"{name}-{_suffix()}"
        status.setdefault("jobStatus", "")
        status["jobDeploymentStatus"] = "Initializing"
        status["startTime"] = rfc3339(store.now())

    def _initializing(self, store: Store, rayjob: dict, status: dict) -> bool:
        """Create the RayCluster, wait for it to be ready, then the submitter; Running."""
        cluster, wrote = self._cluster(store, rayjob), False
        if cluster is None and not rc.spec_of(rayjob).get("clusterSelector"):
            cluster = self._create_cluster(store, rayjob, status["rayClusterName"])
            wrote = True
        if cluster is None:
            return wrote
        if (cluster.get("status") or {}).get("state") != "ready":
            status["rayClusterStatus"] = clone(cluster.get("status") or {})
            return wrote
        namespace = rayjob["metadata"]["namespace"]
        status["dashboardURL"] = f"{rc.head_service_name(cluster)}.{namespace}.svc.cluster.local:{rc.DASHBOARD_PORT}"
        mode = submission_mode(rayjob)
        if mode == "InteractiveMode":
            status["jobDeploymentStatus"] = "Waiting"
            return wrote
        if mode == "K8sJobMode" and store.get("jobs", namespace, rayjob["metadata"]["name"], copy=False) is None:
            self._create_submitter(store, rayjob, status)
            wrote = True
        status["jobDeploymentStatus"] = "Running"
        return wrote

    def _create_cluster(self, store: Store, rayjob: dict, name: str) -> dict:
        """constructRayClusterForRayJob: the RayJob's labels and annotations, the originated-from labels."""
        md = rayjob["metadata"]
        spec = clone(rc.spec_of(rayjob).get("rayClusterSpec") or {})
        mode = submission_mode(rayjob)
        if mode == "SidecarMode":
            head = rc.spec_of({"spec": spec}).setdefault("headGroupSpec", {}).setdefault("template", {})
            head_spec = head.setdefault("spec", {})
            sidecar = default_submitter_template(spec)["spec"]["containers"][0]
            sidecar["command"], sidecar["args"] = ["/bin/bash", "-ce", "--"], [self._command(rayjob, "localhost")]
            head_spec.setdefault("containers", []).append(sidecar)
            head_spec["restartPolicy"] = "Never"
        labels = {
            **(md.get("labels") or {}),
            "ray.io/originated-from-cr-name": md["name"],
            "ray.io/originated-from-crd": "RayJob",
            "ray.io/job-submission-mode": mode,
        }
        cluster = {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {
                "name": name,
                "namespace": md["namespace"],
                "labels": labels,
                "annotations": dict(md.get("annotations") or {}),
                "ownerReferences": [controller_reference(rayjob)],
            },
            "spec": spec,
        }
        schema.default_and_prune("rayclusters", cluster)
        created = store.create("rayclusters", cluster)
        store.record_event(
            rayjob, "Normal", "CreatedRayCluster", f"Created RayCluster {md['namespace']}/{name}", COMPONENT
        )
        return created

    @staticmethod
    def _command(rayjob: dict, host: str) -> str:
        """BuildJobSubmitCommand (K8sJobMode: submit once, follow the logs), without the health wait loop."""
        status, spec = rayjob["status"], rc.spec_of(rayjob)
        address = f"http://{host}:{rc.DASHBOARD_PORT}"
        job_id = status.get("jobId", "")
        submit = ["ray", "job", "submit", "--address", address, "--no-wait", "--submission-id", job_id, "--"]
        entrypoint = str(spec.get("entrypoint") or "").strip()
        check = shlex.join(["ray", "job", "status", "--address", address, job_id])
        follow = shlex.join(["ray", "job", "logs", "--address", address, "--follow", job_id])
        return f"if ! {check} >/dev/null 2>&1 ; then {shlex.join(submit)} {entrypoint} ; fi ; {follow}"

    def _create_submitter(self, store: Store, rayjob: dict, status: dict) -> None:
        """createNewK8sJob: the submitter Job, controlled by the RayJob."""
        md, spec = rayjob["metadata"], rc.spec_of(rayjob)
        template = clone(
            spec.get("submitterPodTemplate") or default_submitter_template(spec.get("rayClusterSpec") or {})
        )
        containers = template.setdefault("spec", {}).setdefault("containers", [])
        host = status["dashboardURL"].rsplit(":", 1)[0]
        if containers and not containers[0].get("command"):
            containers[0]["command"] = ["/bin/bash", "-ce", "--"]
            containers[0]["args"] = [self._command(rayjob, host)]
        if containers:
            containers[0].setdefault("env", []).extend(
                [
                    {"name": "RAY_DASHBOARD_ADDRESS", "value": status["dashboardURL"]},
                    {"name": "RAY_JOB_SUBMISSION_ID", "value": status.get("jobId", "")},
                ]
            )
        backoff = (spec.get("submitterConfig") or {}).get("backoffLimit", 2)
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": md["name"],
                "namespace": md["namespace"],
                "labels": {
                    "ray.io/originated-from-cr-name": md["name"],
                    "ray.io/originated-from-crd": "RayJob",
                    "app.kubernetes.io/created-by": "kuberay-operator",
                },
                "ownerReferences": [controller_reference(rayjob)],
                "uid": str(uuid.uuid4()),
            },
            "spec": {"backoffLimit": backoff, "template": template},
        }
        builtin.apply_defaults("jobs", job, None)
        builtin.label_job(job)
        store.create("jobs", job)
        message = f"Created Kubernetes Job {md['namespace']}/{md['name']}"
        store.record_event(rayjob, "Normal", "CreatedRayJobSubmitter", message, COMPONENT)

    def _running(self, store: Store, rayjob: dict, status: dict) -> bool:
        """checkSubmitterAndUpdateStatusIfNeeded, then Ray's view of the job; Complete or Failed once the Ray job is
        terminal and the submitter finished."""
        namespace, name = rayjob["metadata"]["namespace"], rayjob["metadata"]["name"]
        cluster = self._cluster(store, rayjob)
        submitter = store.get("jobs", namespace, name, copy=False) if submission_mode(rayjob) == "K8sJobMode" else None
        end = _job_condition(submitter) if submitter is not None else None
        if end is not None and end["type"] == "Failed":
            status["jobDeploymentStatus"] = "Failed"
            if status.get("jobStatus") == "FAILED":
                status["reason"] = "AppFailed"
            else:
                status["reason"] = "SubmissionFailed"
                status["message"] = (
                    f"Job submission has failed. Reason: {end.get('reason', '')}. Message: {end.get('message', '')}"
                )
            return False
        ray_status, message = self._ray_job(store, submitter)
        if ray_status is None:
            if end is not None:
                status["jobDeploymentStatus"] = "Failed"
                status["reason"] = "AppFailed"
                status["message"] = "Submitter completed but Ray job not found in RayCluster."
            return False
        terminal = ray_status in ("SUCCEEDED", "FAILED", "STOPPED") and end is not None
        status["jobDeploymentStatus"] = "Running"
        status.pop("reason", None)
        if terminal:
            status["jobDeploymentStatus"] = "Failed" if ray_status == "FAILED" else "Complete"
            if ray_status == "FAILED":
                status["reason"] = "AppFailed"
        status["rayClusterStatus"] = clone((cluster or {}).get("status") or {})
        status["jobStatus"] = ray_status
        if message:
            status["message"] = message
        else:
            status.pop("message", None)
        return False

    @staticmethod
    def _ray_job(store: Store, submitter: dict | None) -> tuple[str | None, str]:
        """(Ray's job status, its message) as the dashboard would report them: from the first submitter pod."""
        if submitter is None:
            return None, ""
        pods = [p for _, p in store.dependents(submitter["metadata"]["uid"], "pods")]
        started = sorted(
            (p for p in pods if (p.get("status") or {}).get("startTime")),
            key=lambda p: p["metadata"]["creationTimestamp"],
        )
        if not started:
            return None, ""
        first = started[0]
        phase = (first.get("status") or {}).get("phase")
        if phase == "Succeeded":
            return "SUCCEEDED", "Job finished successfully."
        if phase == "Failed":
            codes = [
                ((cs.get("state") or {}).get("terminated") or {}).get("exitCode", 1)
                for cs in (first.get("status") or {}).get("containerStatuses") or []
            ]
            code = next((c for c in codes if c), 1)
            return "FAILED", f"Job entrypoint command failed with exit code {code}"
        return "RUNNING", ""

    def _suspending(self, store: Store, rayjob: dict, status: dict) -> bool:
        """Delete the RayCluster and the submitter Job; once both are gone, reset the status to Suspended."""
        namespace, name = rayjob["metadata"]["namespace"], rayjob["metadata"]["name"]
        wrote, gone = False, True
        cluster = self._cluster(store, rayjob)
        if cluster is not None and not rc.spec_of(rayjob).get("clusterSelector"):
            gone = False
            if not cluster["metadata"].get("deletionTimestamp"):
                store.delete("rayclusters", namespace, cluster["metadata"]["name"])
                message = f"Deleted RayCluster {namespace}/{cluster['metadata']['name']}"
                store.record_event(rayjob, "Normal", "DeletedRayCluster", message, COMPONENT)
                wrote = True
        submitter = store.get("jobs", namespace, name, copy=False)
        if submitter is not None and submission_mode(rayjob) == "K8sJobMode":
            gone = False
            if not submitter["metadata"].get("deletionTimestamp"):
                store.delete("jobs", namespace, name)
                message = f"Deleted Kubernetes Job {namespace}/{name}"
                store.record_event(rayjob, "Normal", "DeletedRayJobSubmitter", message, COMPONENT)
                wrote = True
        if not gone:
            return wrote
        for key in ("rayClusterStatus", "rayClusterName", "dashboardURL", "jobId", "message", "reason"):
            status.pop(key, None)
        status["jobStatus"] = ""
        status["jobDeploymentStatus"] = "Suspended"
        return wrote

    def _finished(self, store: Store, rayjob: dict) -> bool:
        """handleShutdownAfterJobFinishes: the RayCluster goes once the time to live after endTime ran out."""
        at = _expiry(rayjob)
        cluster = self._cluster(store, rayjob)
        if at is None or at > store.now() or cluster is None or cluster["metadata"].get("deletionTimestamp"):
            return False
        namespace, name = rayjob["metadata"]["namespace"], cluster["metadata"]["name"]
        store.delete("rayclusters", namespace, name)
        store.record_event(rayjob, "Normal", "DeletedRayCluster", f"Deleted RayCluster {namespace}/{name}", COMPONENT)
        return True
