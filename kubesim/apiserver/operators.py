"""The workload operators kubesim installs beside Kubernetes' own controllers, as a cluster running Kueue's integrations
has them: each brings its CRD (kubesim.apiserver.registry.resources.OPERATORS, served with or without the Kueue half),
the objects its install adds (namespace and controller Deployment), its controller, and its admission webhooks.

- JobSet v0.12.0: `controllers/jobset_controller.py` (and `jobset_status.py`), `validation/jobset_webhook.py`.
- LeaderWorkerSet v0.10.0: `controllers/lws_controller.py` (its CRD's defaults; its own webhooks are not emulated).
- Kubeflow Trainer v2.3.0 (TrainJob, ClusterTrainingRuntime, TrainingRuntime): `controllers/trainjob_controller.py`
  on the runtime library kubesim.kernel.trainer, `validation/trainjob_webhook.py`; its install adds the
  `torch-distributed` ClusterTrainingRuntime.
- Kubeflow training-operator v1.9.4 (PyTorchJob): `controllers/pytorchjob_controller.py`,
  `validation/pytorchjob_webhook.py`.
- KubeRay v1.7.0: `controllers/raycluster_controller.py`, `controllers/rayjob_controller.py` (its webhook is off in a
  default install, so it has none here).

An operator's webhooks run in the API server's admission as kube-apiserver calls them: its defaulting before the
Kueue half's mutating webhooks (create only), its validation after schema and CEL validation and before the Kueue
half's. Its refusals are the operator's apierrors.NewInvalid, relayed by the API server with their code: 422 Invalid
with causes, the message prefixed `admission webhook "<name>" denied the request: `.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubesim.apiserver.controllers.jobset_controller import JobSetController
from kubesim.apiserver.controllers.lws_controller import Admit, LeaderWorkerSetController
from kubesim.apiserver.controllers.pytorchjob_controller import PyTorchJobController
from kubesim.apiserver.controllers.raycluster_controller import RayClusterController
from kubesim.apiserver.controllers.rayjob_controller import RayJobController
from kubesim.apiserver.controllers.trainjob_controller import TrainJobController
from kubesim.apiserver.errors import APIError, denied, invalid
from kubesim.apiserver.registry.resources import RESOURCES
from kubesim.apiserver.validation import jobset_webhook, pytorchjob_webhook, trainjob_webhook
from kubesim.kernel.deployments import controller_manager
from kubesim.kernel.metadata import Cause
from kubesim.kernel.protocols import Controller


@dataclass(frozen=True)
class OperatorWebhooks:
    """One operator's webhooks for one resource: defaulting on create (None: the operator has none), validation on
    create and update, answered 422 with causes (NewInvalid) or 403 (a plain error list, `forbidden`)."""

    validating_name: str
    default: Callable[[dict], None] | None
    validate: Callable[[dict, dict | None], list[Cause]]
    forbidden: bool = False


WEBHOOKS = {
    "jobsets": OperatorWebhooks(jobset_webhook.VALIDATING, jobset_webhook.default, jobset_webhook.validate),
    "trainjobs": OperatorWebhooks(trainjob_webhook.VALIDATING, None, trainjob_webhook.validate, forbidden=True),
    "pytorchjobs": OperatorWebhooks(pytorchjob_webhook.VALIDATING, None, pytorchjob_webhook.validate, forbidden=True),
}
JOBSET_VERSION = "v0.12.0"
LWS_VERSION = "v0.10.0"
TRAINER_VERSION = "v2.3.0"
TRAINING_OPERATOR_VERSION = "v1.9.4"


def controllers(admit: Admit) -> list[Controller]:
    """admit: what the API server does to a pod an operator creates (defaults, mutating webhooks)."""
    return [
        TrainJobController(),
        JobSetController(),
        PyTorchJobController(),
        RayJobController(),
        RayClusterController(),
        LeaderWorkerSetController(admit),
    ]


def default(resource: str, obj: dict, old: dict | None) -> None:
    hooks = WEBHOOKS.get(resource)
    if hooks is not None and hooks.default is not None and old is None:
        hooks.default(obj)


def refusal(resource: str, obj: dict, old: dict | None) -> APIError | None:
    """The operator's validating webhook's answer, None when it allows the write."""
    hooks = WEBHOOKS.get(resource)
    causes = hooks.validate(obj, old) if hooks is not None else []
    if not causes:
        return None
    assert hooks is not None
    if hooks.forbidden:
        return denied(hooks.validating_name, causes)
    error = invalid(RESOURCES[resource], (obj.get("metadata") or {}).get("name", ""), causes)
    message = f'admission webhook "{hooks.validating_name}" denied the request: {error.message}'
    return APIError(error.code, message, error.reason, error.details)


def torch_distributed_runtime() -> dict:
    """The `torch-distributed` ClusterTrainingRuntime Trainer v2.3.0 installs (manifests/base/runtimes/, the one
    Kueue's tests use): one replicatedJob `node`, the trainer step, whose container `node` runs PyTorch; one node
    unless the TrainJob says otherwise."""
    pod_spec = {"containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"}]}
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": pod_spec}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-distributed", "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [node]}}},
    }


def installation() -> list[tuple[str, dict]]:
    """(resource plural, object) of what installing the operators adds besides their CRDs, in creation order."""
    out: list[tuple[str, dict]] = []
    for namespace, name, labels, container in (
        (
            "jobset-system",
            "jobset-controller-manager",
            {"app.kubernetes.io/name": "jobset", "control-plane": "controller-manager"},
            {"name": "manager", "image": f"registry.k8s.io/jobset/jobset:{JOBSET_VERSION}"},
        ),
        (
            "lws-system",
            "lws-controller-manager",
            {"app.kubernetes.io/name": "lws", "control-plane": "controller-manager"},
            {"name": "manager", "image": f"registry.k8s.io/lws/lws:{LWS_VERSION}"},
        ),
        (
            "kubeflow-system",
            "kubeflow-trainer-controller-manager",
            {"app.kubernetes.io/name": "trainer", "app.kubernetes.io/component": "manager",
             "app.kubernetes.io/part-of": "kubeflow"},
            {"name": "manager", "image": f"ghcr.io/kubeflow/trainer/trainer-controller-manager:{TRAINER_VERSION}"},
        ),
        (
            "kubeflow",
            "training-operator",
            {"control-plane": "kubeflow-training-operator"},
            {"name": "training-operator",
             "image": f"ghcr.io/kubeflow/training-v1/training-operator:{TRAINING_OPERATOR_VERSION}"},
        ),
    ):
        deployment = controller_manager(name=name, namespace=namespace, labels=labels, container=container)
        out += [
            ("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
            ("deployments", deployment),
        ]
    return [*out, ("clustertrainingruntimes", torch_distributed_runtime())]
