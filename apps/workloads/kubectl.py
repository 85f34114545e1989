"""The kubectl commands the pages and the API give for work submitted outside the portal: the portal keeps no
manifest of it and its worker reads the logs of its own pods only (found by the workload id label), so people read
those from the cluster (docs/architecture.md, Work submitted outside the portal)."""

from __future__ import annotations

from .models import Kind, Workload

# The label each integration puts on the pods of one object (a TrainJob's pods are its JobSet's, named after it).
POD_SELECTORS = {
    Kind.JOB: "batch.kubernetes.io/job-name", Kind.JOBSET: "jobset.sigs.k8s.io/jobset-name",
    Kind.TRAINJOB: "jobset.sigs.k8s.io/jobset-name", Kind.PYTORCHJOB: "training.kubeflow.org/job-name",
    Kind.RAYCLUSTER: "ray.io/cluster", Kind.LEADERWORKERSET: "leaderworkerset.sigs.k8s.io/name",
    Kind.POD_GROUP: "kueue.x-k8s.io/pod-group-name",
}
# Kinds kubectl names by the portal's kind value (its lowercased Kubernetes kind).
GETTABLE = frozenset({Kind.JOB, Kind.JOBSET, Kind.TRAINJOB, Kind.PYTORCHJOB, Kind.RAYJOB, Kind.RAYCLUSTER,
                      Kind.LEADERWORKERSET, Kind.POD})


def logs_command(workload: Workload) -> str:
    """Reads the logs of the workload's pods."""
    namespace = workload.cluster_namespace
    if workload.kind == Kind.POD:
        return f"kubectl logs -n {namespace} {workload.object_name}"
    label = POD_SELECTORS.get(Kind(workload.kind))
    if label is None:
        return f"kubectl get pods -n {namespace}"
    return f"kubectl logs -n {namespace} -l {label}={workload.object_name} --all-containers --prefix"


def logs_hint(workload: Workload) -> str:
    return (f"The portal reads the logs of its own work only; this {workload.get_kind_display()} was submitted "
            f"outside it. Read them with: {logs_command(workload)}")


def get_command(workload: Workload) -> str:
    """Shows the object as the cluster has it (a pod group: its pods; a kind the portal does not know: Kueue's
    Workload for it)."""
    namespace = workload.cluster_namespace
    if workload.kind in GETTABLE:
        return f"kubectl get {workload.kind} {workload.object_name} -n {namespace} -o yaml"
    if workload.kind == Kind.POD_GROUP:
        return f"kubectl get pods -n {namespace} -l {POD_SELECTORS[Kind.POD_GROUP]}={workload.object_name} -o yaml"
    return f"kubectl get workloads.kueue.x-k8s.io {workload.kueue_name} -n {namespace} -o yaml"
