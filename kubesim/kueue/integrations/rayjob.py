"""Kueue's RayJob integration (upstream pkg/controller/jobs/rayjob, framework `ray.io/rayjob`): what the jobframework
needs to know of a ray.io/v1 RayJob.

Pod sets: the cluster's (kubesim.kueue.integrations.raycluster: `head`, then one per worker group) and, in
K8sJobMode (the CRD's default), `submitter`: one pod of spec.submitterPodTemplate or of KubeRay's default submitter
template; in SidecarMode the submitter container KubeRay injects is counted in the head pod set. A RayJob on an
existing cluster (spec.clusterSelector) is not Kueue's: it gets no Workload. Admission is merged into the cluster's
templates and the submitter template (written into spec.submitterPodTemplate when the RayJob had none, so the
constraints persist) and the RayJob unsuspended; KubeRay creates the RayCluster and the submitter Job from them. Active
while jobDeploymentStatus is neither "" nor Suspended; finished on Complete or Failed (succeeded only with jobStatus
SUCCEEDED); ready when the cluster KubeRay reports is `ready`. The RayCluster and Job it makes get no Workload (their
controlling owner is a Kueue-managed RayJob).
"""

from __future__ import annotations

from kubesim.kernel.store import clone
from kubesim.kueue.integrations.podsets import PodSetConflict, PodSetInfo, merge_into, restore_template
from kubesim.kueue.integrations.raycluster import cluster_pod_sets, restore_cluster, run_cluster, worker_groups

FRAMEWORK = "ray.io/rayjob"
SUBMITTER = "ray-job-submitter"
SUBMITTER_RESOURCES = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}


def default_submitter_template(cluster_spec: dict) -> dict:
    """KubeRay's default submitter pod template, which Kueue takes from KubeRay's library (the API server half's
    KubeRay emulation builds the same): one container on the head's image, restartPolicy Never."""
    head = ((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    image = ((head.get("containers") or [{}])[0]).get("image", "")
    container = {"name": SUBMITTER, "image": image, "resources": clone(SUBMITTER_RESOURCES)}
    return {"spec": {"containers": [container], "restartPolicy": "Never"}}


def _spec(job: dict) -> dict:
    return job.setdefault("spec", {})


def _cluster_spec(job: dict) -> dict:
    return _spec(job).setdefault("rayClusterSpec", {})


def _has_submitter_pod(job: dict) -> bool:
    return (_spec(job).get("submissionMode") or "K8sJobMode") == "K8sJobMode"


def _submitter_template(job: dict) -> dict:
    return clone(_spec(job).get("submitterPodTemplate") or default_submitter_template(_cluster_spec(clone(job))))


class RayJob:
    """The jobframework's view of a RayJob (kubesim.kueue.integrations.jobframework.JobKind)."""

    framework = FRAMEWORK
    resource = "rayjobs"
    inputs: tuple[str, ...] = ()
    api_version = "ray.io/v1"
    kind = "RayJob"
    group = "ray.io"

    def skip(self, job: dict) -> bool:
        """A RayJob that runs on an existing RayCluster is left alone."""
        return bool((job.get("spec") or {}).get("clusterSelector"))

    def pod_sets(self, store, job: dict) -> list[dict]:
        job = clone(job)
        pod_sets = cluster_pod_sets(_cluster_spec(job))
        if (_spec(job).get("submissionMode") or "K8sJobMode") == "SidecarMode":
            sidecar = default_submitter_template(_cluster_spec(job))["spec"]["containers"][0]
            pod_sets[0]["template"].setdefault("spec", {}).setdefault("containers", []).append(sidecar)
        if _has_submitter_pod(job):
            pod_sets.append({"name": "submitter", "count": 1, "template": _submitter_template(job)})
        return pod_sets

    def suspended(self, job: dict) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: dict) -> None:
        job["spec"]["suspend"] = True

    def active(self, job: dict) -> bool:
        return (job.get("status") or {}).get("jobDeploymentStatus", "") not in ("", "Suspended")

    def finished(self, job: dict) -> tuple[bool, bool, str]:
        status = job.get("status") or {}
        if status.get("jobDeploymentStatus") not in ("Complete", "Failed"):
            return False, True, ""
        return True, status.get("jobStatus") == "SUCCEEDED", status.get("message", "")

    def pods_ready(self, store, job: dict, wl: dict) -> bool:
        return ((job.get("status") or {}).get("rayClusterStatus") or {}).get("state") == "ready"

    def reclaimable_pods(self, store, job: dict) -> list[dict]:
        return []

    def _expected(self, job: dict) -> int:
        return 1 + len(worker_groups(_cluster_spec(job))) + (1 if _has_submitter_pod(job) else 0)

    def run(self, job: dict, infos: list[PodSetInfo]) -> None:
        """One info per head and worker group, then the submitter's (K8sJobMode); unsuspended."""
        expected = self._expected(job)
        if len(infos) != expected:
            raise PodSetConflict(f"invalid podset infos: expecting {expected} podset, got {len(infos)}")
        run_cluster(_cluster_spec(job), infos)
        if _has_submitter_pod(job):
            template = _submitter_template(job)
            merge_into(template, infos[-1])
            _spec(job)["submitterPodTemplate"] = template
        _spec(job)["suspend"] = False

    def restore(self, job: dict, infos: list[PodSetInfo]) -> None:
        """A no-op unless there is one recorded pod set per head, worker group and (K8sJobMode) submitter."""
        if len(infos) != self._expected(job):
            return
        restore_cluster(_cluster_spec(job), infos)
        template = _spec(job).get("submitterPodTemplate")
        if _has_submitter_pod(job) and template is not None:
            restore_template(template, infos[-1])
