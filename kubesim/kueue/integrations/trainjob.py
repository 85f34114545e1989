"""Kueue's TrainJob integration (upstream pkg/controller/jobs/trainjob, framework `trainer.kubeflow.org/trainjob`):
what the jobframework needs to know of a Kubeflow Trainer v2 trainer.kubeflow.org/v1alpha1 TrainJob.

Its pod sets are those of the JobSet the Trainer would run it as (kubesim.kernel.trainer builds it from the
referenced runtime, as Kueue uses the Trainer's runtime library; kubesim.kueue.integrations.jobset reads its pod
sets): for the torch-distributed runtime one pod set `node` of spec.trainer.numNodes pods. Without its runtime a
TrainJob gets no Workload. Admission is passed to the Trainer as Kueue's own runtimePatch (manager
kueue.x-k8s.io/manager): per pod set, the labels, annotations, nodeSelector, tolerations and scheduling gates of the
replicatedJob's pod template; then spec.suspend is cleared and the Trainer carries the patch into its JobSet.
Stopping suspends the TrainJob and empties that patch. Active while a replicatedJob has active Jobs; finished on
Complete or Failed; ready when every replicatedJob's Jobs are ready or succeeded; reclaimable pods as for a JobSet.
"""

from __future__ import annotations

from kubesim.kernel import trainer
from kubesim.kueue.integrations.jobframework import PodSetsUnavailable
from kubesim.kueue.integrations.jobset import JobSet, pods_per_replica
from kubesim.kueue.integrations.podsets import PodSetInfo

FRAMEWORK = "trainer.kubeflow.org/trainjob"
KUEUE_MANAGER = "kueue.x-k8s.io/manager"


def kueue_patch(job: dict) -> dict:
    """Kueue's runtimePatch, added when missing (the webhook adds it on create)."""
    patches = job.setdefault("spec", {}).setdefault("runtimePatches", [])
    patch = next((p for p in patches if p.get("manager") == KUEUE_MANAGER), None)
    if patch is None:
        patch = {"manager": KUEUE_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}
        patches.append(patch)
    return patch


def _patch_spec(job: dict) -> dict:
    return kueue_patch(job).setdefault("trainingRuntimeSpec", {}).setdefault("template", {}).setdefault("spec", {})


def _derived(store, job: dict) -> dict:
    try:
        return trainer.jobset(job, trainer.runtime_of(store, job))
    except trainer.RuntimeUnavailable as exc:
        raise PodSetsUnavailable(str(exc)) from exc


def _jobs_status(job: dict) -> list[dict]:
    return (job.get("status") or {}).get("jobsStatus") or []


def _pod_template(info: PodSetInfo) -> dict:
    """What Kueue's patch says of one pod set's pod template: only the fields it sets."""
    metadata = {k: dict(v) for k, v in (("labels", info.labels), ("annotations", info.annotations)) if v}
    spec: dict = {}
    if info.node_selector:
        spec["nodeSelector"] = dict(info.node_selector)
    if info.tolerations:
        spec["tolerations"] = list(info.tolerations)
    if info.scheduling_gates:
        spec["schedulingGates"] = list(info.scheduling_gates)
    return {**({"metadata": metadata} if metadata else {}), **({"spec": spec} if spec else {})}


class TrainJob:
    """The jobframework's view of a TrainJob (kubesim.kueue.integrations.jobframework.JobKind)."""

    framework = FRAMEWORK
    resource = "trainjobs"
    inputs: tuple[str, ...] = ("clustertrainingruntimes", "trainingruntimes")
    api_version = "trainer.kubeflow.org/v1alpha1"
    kind = "TrainJob"
    group = "trainer.kubeflow.org"

    def pod_sets(self, store, job: dict) -> list[dict]:
        return JobSet().pod_sets(store, _derived(store, job))

    def suspended(self, job: dict) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: dict) -> None:
        job.setdefault("spec", {})["suspend"] = True

    def active(self, job: dict) -> bool:
        return any(int(s.get("active") or 0) > 0 for s in _jobs_status(job))

    def finished(self, job: dict) -> tuple[bool, bool, str]:
        conditions = (job.get("status") or {}).get("conditions") or []
        for ctype, succeeded in (("Complete", True), ("Failed", False)):
            for c in conditions:
                if c.get("type") == ctype and c.get("status") == "True":
                    return True, succeeded, c.get("message", "")
        return False, True, ""

    def pods_ready(self, store, job: dict, wl: dict) -> bool:
        rjobs = _derived(store, job)["spec"].get("replicatedJobs") or []
        done = sum(int(s.get("ready") or 0) + int(s.get("succeeded") or 0) for s in _jobs_status(job))
        return sum(int(rj.get("replicas", 1)) for rj in rjobs) == done

    def reclaimable_pods(self, store, job: dict) -> list[dict]:
        rjobs = {rj["name"]: rj for rj in _derived(store, job)["spec"].get("replicatedJobs") or []}
        out = []
        for status in _jobs_status(job):
            rj = rjobs.get(status.get("name", ""))
            succeeded = int(status.get("succeeded") or 0)
            if rj is not None and 0 < succeeded <= int(rj.get("replicas", 1)):
                out.append({"name": rj["name"].lower(), "count": succeeded * pods_per_replica(rj)})
        return out

    def run(self, job: dict, infos: list[PodSetInfo]) -> None:
        """RunWithPodSetsInfo: Kueue's patch lists one replicatedJob per pod set (replacing what it held); then
        unsuspended."""
        _patch_spec(job)["replicatedJobs"] = [
            {"name": info.name, "template": {"spec": {"template": _pod_template(info)}}} for info in infos
        ]
        job["spec"]["suspend"] = False

    def restore(self, job: dict, infos: list[PodSetInfo]) -> None:
        """RestorePodSetsInfo: Kueue's patch is emptied; the runtime's templates are the recorded ones again."""
        _patch_spec(job).pop("replicatedJobs", None)
