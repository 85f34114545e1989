"""The objects a training on a framework is created as (docs/frameworks.md), as pure functions of the row, like the
portal's Job (worker/manifests.py): same deterministic name, same Kueue and portal labels, created suspended, GPU
requests equal to limits; each is checked against its kind's real schema before it is sent
(`framework_schema_errors`), and the gateway sends it with fieldValidation=Strict.

- PyTorch on Kubeflow Trainer: a TrainJob on the cluster's ClusterTrainingRuntime for torch (its name kept on the
  row at submission). The Trainer's torch plugin sets what
  torchrun reads (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT); the portal's
  labels, volumes, pull secrets and shared memory reach the pods through a runtime patch (the only way a TrainJob
  changes its runtime's pod template).
- PyTorch without Trainer: a JobSet with one replicated Job of `pods` indexed pods, wired with the same PET_*
  variables the Trainer would set (rank 0 is `<name>-node-0-0.<name>` under the JobSet's headless Service), so a
  script runs the same on either.
- Ray: a RayJob whose cluster has a head (no GPUs) and one worker group of `pods` workers with the GPUs, declared to
  Ray as `num-gpus`; KubeRay submits the entrypoint (with the working directory as its runtime environment) and shuts
  the cluster down when the job ends, as Kueue requires of a RayJob.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from apps.workloads.frameworks import framework_entry
from apps.workloads.manifests import MANIFEST_KINDS, portal_labels
from apps.workloads.manifests.schemas import schema_errors
from apps.workloads.models import Framework, Workload

from .manifests import (
    COMPLETION_INDEX,
    MASTER_PORT,
    Attachments,
    job_name,
    main_container,
    object_metadata,
    pod_spec,
    volumes_of,
)

NODE = "node"  # the torch runtime's trainer step and its container, as Trainer names them
PATCH_MANAGER = "portal.gpu/submit"  # who wrote the runtime patch (Trainer wants a domain-prefixed path)
RAY_HEAD = "ray-head"
RAY_WORKER = "ray-worker"
RAY_WORKER_GROUP = "workers"
RAY_PORTS = [{"name": "gcs", "containerPort": 6379, "protocol": "TCP"},
             {"name": "dashboard", "containerPort": 8265, "protocol": "TCP"},
             {"name": "client", "containerPort": 10001, "protocol": "TCP"}]


def framework_manifest(workload: Workload, *, request_id: str = "",
                       attachments: Attachments | None = None) -> dict[str, Any]:
    """The object a training on a framework is created as (its kind decided at submission)."""
    attachments = attachments or Attachments()
    entry = framework_entry(workload)
    if workload.framework == Framework.RAY:
        return ray_job(workload, request_id=request_id, attachments=attachments)
    if entry.name == "TrainJob":
        return torch_train_job(workload, request_id=request_id, attachments=attachments)
    return torch_job_set(workload, request_id=request_id, attachments=attachments)


def framework_schema_errors(manifest: dict[str, Any]) -> list[str]:
    """Every way the object departs from its kind's published schema (strict: unknown fields refused)."""
    return schema_errors(MANIFEST_KINDS[manifest["kind"]], manifest)


def _own_env(workload: Workload) -> list[dict[str, Any]]:
    return [{"name": "PORTAL_WORKLOAD_ID", "value": str(workload.pk)},
            {"name": "PORTAL_PROJECT", "value": workload.project.slug},
            *({"name": item["name"], "value": item["value"]} for item in workload.env)]


def _credential_env(attachments: Attachments) -> list[dict[str, Any]]:
    """A TrainJob's container takes no envFrom: each key of each credential by reference instead (the same
    variables envFrom would give)."""
    return [{"name": key, "valueFrom": {"secretKeyRef": {"name": credential.secret_name, "key": key}}}
            for credential in attachments.credentials for key in credential.keys]


def _torch_env(workload: Workload) -> list[dict[str, Any]]:
    """What the Trainer's torch plugin sets, for the JobSet to give torchrun the same rendezvous."""
    name = job_name(workload)
    return [
        {"name": "PET_NNODES", "value": str(workload.pods)},
        {"name": "PET_NPROC_PER_NODE", "value": str(workload.gpus)},
        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}},
        {"name": "PET_MASTER_ADDR", "value": f"{name}-{NODE}-0-0.{name}"},
        {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
    ]


def _resources(workload: Workload) -> dict[str, Any]:
    return main_container(workload, Attachments(), [])["resources"]


def torch_train_job(workload: Workload, *, request_id: str = "", attachments: Attachments) -> dict[str, Any]:
    """A Kubeflow Trainer TrainJob on the torch runtime: `pods` nodes, one process per GPU."""
    trainer: dict[str, Any] = {
        "image": workload.image,
        "numNodes": workload.pods,
        "numProcPerNode": workload.gpus,
        "resourcesPerNode": _resources(workload),
        "env": [*_own_env(workload), *_credential_env(attachments)],
    }
    if workload.command:
        trainer["command"] = list(workload.command)
    if workload.args:
        trainer["args"] = list(workload.args)
    volumes, mounts = volumes_of(workload, attachments)
    patched_pod: dict[str, Any] = {}
    if volumes:
        patched_pod["volumes"] = volumes
        patched_pod["containers"] = [{"name": NODE, "volumeMounts": mounts}]
    if attachments.pull_secrets:
        patched_pod["imagePullSecrets"] = [{"name": secret.secret_name} for secret in attachments.pull_secrets]
    pod_template: dict[str, Any] = {"metadata": {"labels": portal_labels(workload)}}
    if patched_pod:
        pod_template["spec"] = patched_pod
    patch = {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": NODE, "template": {"spec": {"template": pod_template}}}]}}}}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": object_metadata(workload, request_id=request_id),
        "spec": {
            "suspend": True,  # Kueue starts it on admission
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                           "name": workload.training_runtime},
            "trainer": trainer,
            "runtimePatches": [patch],
        },
    }


def torch_job_set(workload: Workload, *, request_id: str = "", attachments: Attachments) -> dict[str, Any]:
    """A JobSet of one indexed Job of `pods` pods, wired for torchrun as the Trainer would wire it."""
    spec = pod_spec(workload, attachments)
    container = spec["containers"][0]
    container["env"] = [*container["env"], *_torch_env(workload)]
    container["ports"] = [{"name": "rendezvous", "containerPort": MASTER_PORT, "protocol": "TCP"}]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": object_metadata(workload, request_id=request_id),
        "spec": {
            "suspend": True,
            # Pods are <name>-node-<job>-<index>.<name>, published before they are ready so rank 0 is found at start.
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "replicatedJobs": [{"name": NODE, "replicas": 1, "template": {"spec": {
                "parallelism": workload.pods, "completions": workload.pods, "completionMode": "Indexed",
                "backoffLimit": 0,
                "template": {"metadata": {"labels": portal_labels(workload)}, "spec": spec},
            }}}],
        },
    }


def _ray_pod(workload: Workload, attachments: Attachments, *, name: str, gpus: bool) -> dict[str, Any]:
    spec = pod_spec(workload, attachments)
    container = spec["containers"][0]
    container["name"] = name
    container.pop("command", None)  # KubeRay starts Ray in the container; the entrypoint is the job
    container.pop("args", None)
    if not gpus:
        gpu = workload.node_pool.gpu_resource
        for group in ("requests", "limits"):
            container["resources"][group].pop(gpu, None)
        container["ports"] = copy.deepcopy(RAY_PORTS)
    spec.pop("restartPolicy", None)  # KubeRay's to choose for the cluster's pods
    return {"metadata": {"labels": portal_labels(workload)}, "spec": spec}


def ray_job(workload: Workload, *, request_id: str = "", attachments: Attachments) -> dict[str, Any]:
    """A RayJob: a head without GPUs and `pods` workers with `gpus` each, declared to Ray as num-gpus."""
    settings = workload.framework_settings
    spec: dict[str, Any] = {
        "suspend": True,
        "entrypoint": settings["ray_entrypoint"],
        "shutdownAfterJobFinishes": True,  # Kueue manages a RayJob only when its cluster goes with it
        "rayClusterSpec": {
            "rayVersion": settings["ray_version"],
            "headGroupSpec": {
                "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},  # noqa: S104 (in its pod),
                "template": _ray_pod(workload, attachments, name=RAY_HEAD, gpus=False),
            },
            "workerGroupSpecs": [{
                "groupName": RAY_WORKER_GROUP, "replicas": workload.pods, "minReplicas": workload.pods,
                "maxReplicas": workload.pods, "rayStartParams": {"num-gpus": str(workload.gpus)},
                "template": _ray_pod(workload, attachments, name=RAY_WORKER, gpus=True),
            }],
        },
    }
    if settings.get("ray_working_dir"):
        spec["runtimeEnvYAML"] = yaml.safe_dump({"working_dir": settings["ray_working_dir"]})
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": object_metadata(workload, request_id=request_id),
            "spec": spec}
