"""The workload operators kubesim installs beside Kubernetes' own controllers, as a cluster running Kueue's integrations
has them: each brings its CRD (kubesim.apiserver.registry.resources.OPERATORS, served with or without the Kueue half),
the objects its install adds (namespace and controller Deployment), its controller, and its admission webhooks.

- JobSet v0.12.0: `controllers/jobset_controller.py` (and `jobset_status.py`), `validation/jobset_webhook.py`.
- LeaderWorkerSet v0.10.0: `controllers/lws_controller.py` (its CRD's defaults; its own webhooks are not emulated).

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
from kubesim.apiserver.errors import APIError, invalid
from kubesim.apiserver.registry.resources import RESOURCES
from kubesim.apiserver.validation import jobset_webhook
from kubesim.kernel.deployments import controller_manager
from kubesim.kernel.metadata import Cause
from kubesim.kernel.protocols import Controller


@dataclass(frozen=True)
class OperatorWebhooks:
    """One operator's webhooks for one resource: defaulting on create, validation on create and update."""

    validating_name: str
    default: Callable[[dict], None]
    validate: Callable[[dict, dict | None], list[Cause]]


WEBHOOKS = {
    "jobsets": OperatorWebhooks(jobset_webhook.VALIDATING, jobset_webhook.default, jobset_webhook.validate),
}
JOBSET_VERSION = "v0.12.0"
LWS_VERSION = "v0.10.0"


def controllers(admit: Admit) -> list[Controller]:
    """admit: what the API server does to a pod an operator creates (defaults, mutating webhooks)."""
    return [JobSetController(), LeaderWorkerSetController(admit)]


def default(resource: str, obj: dict, old: dict | None) -> None:
    hooks = WEBHOOKS.get(resource)
    if hooks is not None and old is None:
        hooks.default(obj)


def refusal(resource: str, obj: dict, old: dict | None) -> APIError | None:
    """The operator's validating webhook's answer, None when it allows the write."""
    hooks = WEBHOOKS.get(resource)
    causes = hooks.validate(obj, old) if hooks is not None else []
    if not causes:
        return None
    assert hooks is not None
    error = invalid(RESOURCES[resource], (obj.get("metadata") or {}).get("name", ""), causes)
    message = f'admission webhook "{hooks.validating_name}" denied the request: {error.message}'
    return APIError(error.code, message, error.reason, error.details)


def installation() -> list[tuple[str, dict]]:
    """(resource plural, object) of what installing the operators adds besides their CRDs, in creation order."""
    out: list[tuple[str, dict]] = []
    for namespace, name, labels, image in (
        (
            "jobset-system",
            "jobset-controller-manager",
            {"app.kubernetes.io/name": "jobset"},
            f"registry.k8s.io/jobset/jobset:{JOBSET_VERSION}",
        ),
        (
            "lws-system",
            "lws-controller-manager",
            {"app.kubernetes.io/name": "lws"},
            f"registry.k8s.io/lws/lws:{LWS_VERSION}",
        ),
    ):
        container = {"name": "manager", "image": image}
        deployment = controller_manager(
            name=name,
            namespace=namespace,
            labels={**labels, "control-plane": "controller-manager"},
            container=container,
        )
        out += [
            ("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
            ("deployments", deployment),
        ]
    return out
