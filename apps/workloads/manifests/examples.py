"""One example manifest per kind the portal submits, to start the manifest page's editor from.

Each asks for one GPU unit of the chosen pool's resource (requests equal to limits), leaves the namespace, queue and
priority labels out (the portal sets them) and runs under the "restricted" Pod Security profile, so it passes the
portal's checks as it stands whichever profile the installation enforces (its tests hold every example to that).
The images and commands are placeholders to replace with the user's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from .schemas import MANIFEST_KINDS

IMAGE = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
RAY_IMAGE = "rayproject/ray:2.41.0-gpu"
# Restricted profile: no privilege escalation, not root, the runtime's seccomp profile, no capabilities.
SECURITY = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"}, "capabilities": {"drop": ["ALL"]}}


def _container(name: str, gpu_resource: str, *, gpus: int = 1, image: str = IMAGE,
               command: list[str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"memory": "16Gi"}}
    if gpus:
        resources["requests"][gpu_resource] = gpus
        resources["limits"][gpu_resource] = gpus
    return {"name": name, "image": image, "command": command or ["python", "train.py"], "resources": resources,
            "securityContext": dict(SECURITY)}


def _pod(container: dict[str, Any], restart: str | None = "Never") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container]}
    if restart:
        spec = {"restartPolicy": restart, **spec}
    return {"spec": spec}


def _job(gpu: str) -> dict[str, Any]:
    return {"parallelism": 2, "completions": 2, "backoffLimit": 0,
            "template": _pod(_container("trainer", gpu))}


def _ray_cluster(gpu: str) -> dict[str, Any]:
    head = _container("ray-head", gpu, gpus=0, image=RAY_IMAGE, command=["ray", "start", "--head", "--block"])
    worker = _container("ray-worker", gpu, image=RAY_IMAGE, command=["ray", "start", "--block"])
    return {"rayVersion": "2.41.0",
            "headGroupSpec": {"rayStartParams": {}, "template": _pod(head, restart=None)},
            "workerGroupSpecs": [{"groupName": "gpu-workers", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                                  "rayStartParams": {}, "template": _pod(worker, restart=None)}]}


class _Dumper(yaml.SafeDumper):
    """Writes every value out: the portal refuses YAML anchors and aliases (apps.workloads.manifests.parsing)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_SPECS: dict[str, Callable[[str], dict[str, Any]]] = {
    "Job": _job,
    "Pod": lambda gpu: _pod(_container("trainer", gpu))["spec"],
    "JobSet": lambda gpu: {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": {
        "parallelism": 1, "completions": 1, "backoffLimit": 0, "template": _pod(_container("trainer", gpu))}}}]},
    "TrainJob": lambda gpu: {"runtimeRef": {"name": "torch-distributed"}, "trainer": {
        "image": IMAGE, "command": ["torchrun", "train.py"], "numNodes": 2,
        "resourcesPerNode": {"requests": {gpu: 1}, "limits": {gpu: 1}}}},
    "PyTorchJob": lambda gpu: {"pytorchReplicaSpecs": {
        "Master": {"replicas": 1, "restartPolicy": "Never", "template": _pod(_container("pytorch", gpu), None)},
        "Worker": {"replicas": 1, "restartPolicy": "Never", "template": _pod(_container("pytorch", gpu), None)}}},
    "RayJob": lambda gpu: {"entrypoint": "python train.py", "shutdownAfterJobFinishes": True,
                           "rayClusterSpec": _ray_cluster(gpu)},
    "RayCluster": _ray_cluster,
    "LeaderWorkerSet": lambda gpu: {"replicas": 1, "leaderWorkerTemplate": {
        "size": 2, "workerTemplate": _pod(_container("worker", gpu, command=["python", "serve.py"]), None)}},
}


def example_manifest(kind_name: str, *, gpu_resource: str) -> str:
    """The example of the kind `kind_name` (as Kubernetes spells it: "JobSet"), as YAML text asking for
    `gpu_resource`; KeyError for a kind the portal does not submit."""
    entry = MANIFEST_KINDS[kind_name]
    obj = {"apiVersion": entry.api_version, "kind": entry.name,
           "metadata": {"name": f"my-{entry.name.lower()}"}, "spec": _SPECS[kind_name](gpu_resource)}
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


EXAMPLE_KINDS = tuple(_SPECS)
