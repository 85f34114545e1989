"""Kueue's PyTorchJob integration (upstream pkg/controller/jobs/kubeflow/jobs/pytorchjob on the shared kubeflowjob
adapter, framework `kubeflow.org/pytorchjob`; deprecated in Kueue, still present in v0.20): what the jobframework
needs to know of a kubeflow.org/v1 PyTorchJob.

One pod set per replica type present, Master first then Worker, named after it (lowercased), of `replicas`
(default 1) pods, with the topology request TopologyAwareScheduling (on in v0.20) records (pods indexed by
training.kubeflow.org/replica-index). Admission is merged into each replica type's pod template and
spec.runPolicy.suspend cleared; the training-operator then creates the pods. Active while any replica type has
active pods; finished on Succeeded or Failed; ready on Running=True. Kueue reports no reclaimable pods for it.
"""

from __future__ import annotations

from kubesim.kernel.store import clone
from kubesim.kueue.integrations.podsets import PodSetConflict, PodSetInfo, merge_into, restore_template

FRAMEWORK = "kubeflow.org/pytorchjob"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
REPLICA_TYPES = ("Master", "Worker")
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"


def ordered_replica_types(job: dict) -> list[str]:
    """OrderedReplicaTypes: Master, Worker, those the job has."""
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return [t for t in REPLICA_TYPES if specs.get(t) is not None]


def _replica(job: dict, rtype: str) -> dict:
    return job["spec"]["pytorchReplicaSpecs"][rtype]


def _template(job: dict, rtype: str) -> dict:
    return _replica(job, rtype).setdefault("template", {})


def _topology_request(template: dict) -> dict:
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    request: dict = {}
    if REQUIRED_TOPOLOGY in annotations:
        request["required"] = annotations[REQUIRED_TOPOLOGY]
    elif PREFERRED_TOPOLOGY in annotations:
        request["preferred"] = annotations[PREFERRED_TOPOLOGY]
    return {**request, "podIndexLabel": REPLICA_INDEX}


def _run_policy(job: dict) -> dict:
    return (job.get("spec") or {}).get("runPolicy") or {}


class PyTorchJob:
    """The jobframework's view of a PyTorchJob (kubesim.kueue.integrations.jobframework.JobKind)."""

    framework = FRAMEWORK
    resource = "pytorchjobs"
    inputs: tuple[str, ...] = ()
    api_version = "kubeflow.org/v1"
    kind = "PyTorchJob"
    group = "kubeflow.org"

    def pod_sets(self, store, job: dict) -> list[dict]:
        out = []
        for rtype in ordered_replica_types(job):
            template = clone(_replica(job, rtype).get("template") or {})
            count = int(_replica(job, rtype).get("replicas", 1))
            out.append(
                {"name": rtype.lower(), "count": count, "template": template,
                 "topologyRequest": _topology_request(template)}
            )
        return out

    def suspended(self, job: dict) -> bool:
        return bool(_run_policy(job).get("suspend"))

    def suspend(self, job: dict) -> None:
        job.setdefault("spec", {}).setdefault("runPolicy", {})["suspend"] = True

    def active(self, job: dict) -> bool:
        statuses = (job.get("status") or {}).get("replicaStatuses") or {}
        return any(int((s or {}).get("active") or 0) != 0 for s in statuses.values())

    def finished(self, job: dict) -> tuple[bool, bool, str]:
        for c in (job.get("status") or {}).get("conditions") or []:
            if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True":
                return True, c["type"] != "Failed", c.get("message", "")
        return False, True, ""

    def pods_ready(self, store, job: dict, wl: dict) -> bool:
        conditions = (job.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Running" and c.get("status") == "True" for c in conditions)

    def reclaimable_pods(self, store, job: dict) -> list[dict]:
        return []

    def run(self, job: dict, infos: list[PodSetInfo]) -> None:
        """RunWithPodSetsInfo: one info per replica type, in order, merged into its pod template; unsuspended."""
        types = ordered_replica_types(job)
        if len(infos) != len(types):
            raise PodSetConflict(f"invalid podset infos: expecting {len(types)} podset, got {len(infos)}")
        for rtype, info in zip(types, infos, strict=True):
            merge_into(_template(job, rtype), info)
        job["spec"].setdefault("runPolicy", {})["suspend"] = False

    def restore(self, job: dict, infos: list[PodSetInfo]) -> None:
        """RestorePodSetsInfo: a no-op unless there is one recorded pod set per replica type."""
        types = ordered_replica_types(job)
        if len(infos) != len(types):
            return
        for rtype, info in zip(types, infos, strict=True):
            restore_template(_template(job, rtype), info)
