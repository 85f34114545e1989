"""Kubeflow Trainer v2.3.0's runtime framework, as a library both halves use, as upstream Kueue imports the Trainer's
own runtime packages: the JobSet a TrainJob runs as, built from its ClusterTrainingRuntime or TrainingRuntime, the
TrainJob's runtimePatches (Kueue's admission among them) and its trainer overrides. The Trainer's controller
(kubesim.apiserver.controllers.trainjob_controller) creates that JobSet; Kueue's TrainJob integration
(kubesim.kueue.integrations.trainjob) takes its pod sets from it.

What the build does, in order (upstream pkg/runtime/core/trainingruntime.go and the jobset, torch and plainml
plugins): merge each runtimePatch's template into the runtime's (maps key by key, lists of named items by name,
other values replaced, as a strategic merge patch treats a JobSet spec); per replicatedJob, the pod count is its
parallelism, or for the trainer step (label trainer.kubeflow.org/trainjob-ancestor-step: trainer) mlPolicy.numNodes
when the runtime has an mlPolicy, either overridden by spec.trainer.numNodes; the trainer step's `node` container
takes the TrainJob's image, command, args, env and resourcesPerNode, and under a torch mlPolicy torchrun's PET_*
variables and port 29500; the trainer and initializer steps run one replica; every replicatedJob's parallelism and
completions become its pod count. MPI, JAX, XGBoost, Flux, DeepSpeed, the initializers' storage settings and pod
group policies are not emulated.
"""

from __future__ import annotations

from typing import Any

from kubesim.kernel.quantity import decimal_value
from kubesim.kernel.store import clone

GROUP = "trainer.kubeflow.org"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_STEP = "trainer"
INITIALIZER_STEPS = ("dataset-initializer", "model-initializer")
NODE_CONTAINER = "node"
TRAINER_PORT = 29500
COMPLETION_INDEX_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
RUNTIME_KINDS = {"ClusterTrainingRuntime": "clustertrainingruntimes", "TrainingRuntime": "trainingruntimes"}


class RuntimeUnavailable(ValueError):
    """The TrainJob's runtime is of a kind the Trainer does not know, or does not exist."""


def runtime_of(store: Any, trainjob: dict) -> dict:
    """The runtime spec.runtimeRef names (a ClusterTrainingRuntime by default, or a TrainingRuntime in the TrainJob's
    namespace); RuntimeUnavailable with the Trainer's and Kueue's wording otherwise."""
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    group, kind, name = ref.get("apiGroup", GROUP), ref.get("kind", "ClusterTrainingRuntime"), ref.get("name", "")
    plural = RUNTIME_KINDS.get(kind) if group == GROUP else None
    if plural is None:
        raise RuntimeUnavailable(f"unsupported runtime: {kind}.{group}")
    namespace = None if plural == "clustertrainingruntimes" else trainjob["metadata"]["namespace"]
    runtime = store.get(plural, namespace, name, copy=False)
    if runtime is None:
        raise RuntimeUnavailable(f"runtime '{name}' not found")
    return runtime


def merge(base: Any, patch: Any) -> Any:
    """A strategic-merge-like merge: maps key by key, lists whose items all have a name by name, the rest replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = merge(base[key], value) if key in base else clone(value)
        return out
    if _named(base) and _named(patch):
        out_list = [clone(item) for item in base]
        for item in patch:
            at = next((i for i, have in enumerate(out_list) if have["name"] == item["name"]), None)
            if at is None:
                out_list.append(clone(item))
            else:
                out_list[at] = merge(out_list[at], item)
        return out_list
    return clone(patch)


def _named(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) and "name" in item for item in value)


def _upsert_env(container: dict, env: list[dict]) -> None:
    have = container.setdefault("env", [])
    for var in env:
        at = next((i for i, e in enumerate(have) if e.get("name") == var.get("name")), None)
        if at is None:
            have.append(clone(var))
        else:
            have[at] = clone(var)


def _step(rj: dict) -> str | None:
    return (((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL)


def _pod_spec(rj: dict) -> dict:
    return rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})


def _per_node_processes(trainer: dict, resources: dict) -> str:
    """numProcPerNode: the TrainJob's, else `auto` with GPUs, else the node's CPUs (at least 1)."""
    if trainer.get("numProcPerNode") is not None:
        return str(trainer["numProcPerNode"])
    amounts = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    if any("gpu" in name and decimal_value(v) > 0 for name, v in amounts.items()):
        return "auto"
    cpu = (resources.get("requests") or {}).get("cpu") or (resources.get("limits") or {}).get("cpu")
    return str(max(1, int(decimal_value(cpu)) if cpu is not None else 1))


def jobset(trainjob: dict, runtime: dict) -> dict:
    """The JobSet the Trainer runs `trainjob` as (named like it, controller-owned by it, suspended with it)."""
    template = clone((runtime.get("spec") or {}).get("template") or {})
    spec = template.get("spec") or {}
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    annotations = dict((template.get("metadata") or {}).get("annotations") or {})
    tj_spec = trainjob.get("spec") or {}
    for patch in tj_spec.get("runtimePatches") or []:
        patched = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        labels.update((patched.get("metadata") or {}).get("labels") or {})
        annotations.update((patched.get("metadata") or {}).get("annotations") or {})
        if patched.get("spec"):
            spec = merge(spec, patched["spec"])
    ml_policy = (runtime.get("spec") or {}).get("mlPolicy")
    trainer = tj_spec.get("trainer") or {}
    name = trainjob["metadata"]["name"]
    for rj in spec.get("replicatedJobs") or []:
        job_spec = rj.setdefault("template", {}).setdefault("spec", {})
        count = int(job_spec.get("parallelism", 1))
        step = _step(rj)
        if step in INITIALIZER_STEPS:
            rj["replicas"] = 1
        if step == TRAINER_STEP:
            rj["replicas"] = 1
            if ml_policy is not None:
                count = int(ml_policy.get("numNodes") or 1)
            if trainer.get("numNodes") is not None:  # the torch and plain plugins alike
                count = int(trainer["numNodes"])
            _shape_trainer(_pod_spec(rj), trainer, ml_policy, name, count)
        job_spec["parallelism"] = job_spec["completions"] = count
    spec["suspend"] = bool(tj_spec.get("suspend"))
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": trainjob["metadata"]["namespace"], "labels": labels,
                     "annotations": annotations},
        "spec": spec,
    }


def _shape_trainer(pod_spec: dict, trainer: dict, ml_policy: dict | None, name: str, nodes: int) -> None:
    """The trainer step's `node` container: the TrainJob's overrides, then torchrun's environment and port."""
    container = next((c for c in pod_spec.get("containers") or [] if c.get("name") == NODE_CONTAINER), None)
    if container is None:
        return
    for key in ("image", "command", "args"):
        if trainer.get(key) is not None:
            container[key] = clone(trainer[key])
    if trainer.get("resourcesPerNode") is not None:
        container["resources"] = merge(container.get("resources") or {}, trainer["resourcesPerNode"])
    _upsert_env(container, trainer.get("env") or [])
    if ml_policy is None or ml_policy.get("torch") is None:
        return
    _upsert_env(container, [
        {"name": "PET_NNODES", "value": str(nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": _per_node_processes(trainer, container.get("resources") or {})},
        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}}},
        {"name": "PET_MASTER_ADDR", "value": f"{name}-{NODE_CONTAINER}-0-0.{name}"},
        {"name": "PET_MASTER_PORT", "value": str(TRAINER_PORT)},
    ])
    ports = container.setdefault("ports", [])
    if not any(p.get("containerPort") == TRAINER_PORT for p in ports):
        ports.append({"containerPort": TRAINER_PORT, "protocol": "TCP"})
