"""Kueue's JobSet integration (upstream pkg/controller/jobs/jobset, framework `jobset.x-k8s.io/jobset`): what the
jobframework needs to know of a jobset.x-k8s.io/v1alpha2 JobSet.

One pod set per replicatedJob, in order, named after it (lowercased), of replicas x min(parallelism, completions)
pods, with the topology request TopologyAwareScheduling (on in v0.20) records for every JobSet (pods indexed by
batch.kubernetes.io/job-completion-index, sub-groups by jobset.sigs.k8s.io/job-index). Admission is merged into each
replicatedJob's pod template and the JobSet unsuspended; the JobSet operator carries the templates into its child
Jobs when it resumes them (kubesim.apiserver.controllers.jobset_controller). Active while any child Job runs pods;
finished on Completed or Failed; ready when every replicatedJob's Jobs are ready or succeeded; reclaimable pods are
the pods of its succeeded Jobs. Admission is all or nothing: a JobSet has no partial admission.
"""

from __future__ import annotations

from kubesim.kernel.store import clone
from kubesim.kueue.integrations.podsets import PodSetConflict, PodSetInfo, merge_into, restore_template

FRAMEWORK = "jobset.x-k8s.io/jobset"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"


def _rjobs(js: dict) -> list[dict]:
    return (js.get("spec") or {}).get("replicatedJobs") or []


def _pod_template(rj: dict) -> dict:
    return rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})


def pods_per_replica(rj: dict) -> int:
    """PodsCountPerReplica: parallelism (default 1), capped by completions."""
    spec = (rj.get("template") or {}).get("spec") or {}
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    return min(parallelism, int(completions)) if completions is not None else parallelism


def _replicas(rj: dict) -> int:
    return int(rj.get("replicas", 1))


def _topology_request(rj: dict) -> dict:
    annotations = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("metadata") or {}
    annotations = annotations.get("annotations") or {}
    request: dict = {}
    if REQUIRED_TOPOLOGY in annotations:
        request["required"] = annotations[REQUIRED_TOPOLOGY]
    elif PREFERRED_TOPOLOGY in annotations:
        request["preferred"] = annotations[PREFERRED_TOPOLOGY]
    return {
        **request,
        "podIndexLabel": COMPLETION_INDEX,
        "subGroupIndexLabel": JOB_INDEX,
        "subGroupCount": _replicas(rj),
    }


class JobSet:
    """The jobframework's view of a JobSet (kubesim.kueue.integrations.jobframework.JobKind)."""

    framework = FRAMEWORK
    resource = "jobsets"
    inputs: tuple[str, ...] = ()
    api_version = "jobset.x-k8s.io/v1alpha2"
    kind = "JobSet"
    group = "jobset.x-k8s.io"

    def pod_sets(self, store, job: dict) -> list[dict]:
        return [
            {
                "name": rj["name"].lower(),
                "count": _replicas(rj) * pods_per_replica(rj),
                "template": clone(((rj.get("template") or {}).get("spec") or {}).get("template") or {}),
                "topologyRequest": _topology_request(rj),
            }
            for rj in _rjobs(job)
        ]

    def suspended(self, job: dict) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: dict) -> None:
        job["spec"]["suspend"] = True

    def active(self, job: dict) -> bool:
        return any(int(s.get("active") or 0) > 0 for s in (job.get("status") or {}).get("replicatedJobsStatus") or [])

    def finished(self, job: dict) -> tuple[bool, bool, str]:
        conditions = (job.get("status") or {}).get("conditions") or []
        for ctype, succeeded in (("Completed", True), ("Failed", False)):
            for c in conditions:
                if c.get("type") == ctype and c.get("status") == "True":
                    return True, succeeded, c.get("message", "")
        return False, True, ""

    def pods_ready(self, store, job: dict, wl: dict) -> bool:
        statuses = (job.get("status") or {}).get("replicatedJobsStatus") or []
        done = sum(int(s.get("ready") or 0) + int(s.get("succeeded") or 0) for s in statuses)
        return sum(_replicas(rj) for rj in _rjobs(job)) == done

    def reclaimable_pods(self, store, job: dict) -> list[dict]:
        statuses = {s.get("name"): s for s in (job.get("status") or {}).get("replicatedJobsStatus") or []}
        out = []
        for rj in _rjobs(job):
            succeeded = int((statuses.get(rj["name"]) or {}).get("succeeded") or 0)
            if 0 < succeeded <= _replicas(rj):
                out.append({"name": rj["name"].lower(), "count": succeeded * pods_per_replica(rj)})
        return out

    def run(self, job: dict, infos: list[PodSetInfo]) -> None:
        """RunWithPodSetsInfo: one info per replicatedJob, merged into its pod template; then unsuspended."""
        rjobs = _rjobs(job)
        if len(infos) != len(rjobs):
            raise PodSetConflict(f"invalid podset infos: expecting {len(rjobs)} podset, got {len(infos)}")
        for rj, info in zip(rjobs, infos, strict=True):
            merge_into(_pod_template(rj), info)
        job["spec"]["suspend"] = False

    def restore(self, job: dict, infos: list[PodSetInfo]) -> None:
        """RestorePodSetsInfo: a no-op unless there is one recorded pod set per replicatedJob."""
        rjobs = _rjobs(job)
        if len(infos) != len(rjobs):
            return
        for rj, info in zip(rjobs, infos, strict=True):
            restore_template(_pod_template(rj), info)
