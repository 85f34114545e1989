"""The Kubeflow training-operator's PyTorchJob webhook (v1.9.4, validator.pytorchjob.training-operator.kubeflow.org),
as the API server calls it on create and update. It validates the object as stored: the operator has no defaulting
webhook (its defaults, kubesim.apiserver.controllers.pytorchjob_controller.defaulted, are applied in memory by its
controller), so a Master must say `replicas: 1` itself. Refusals are the operator's apierrors.NewInvalid (422)."""

from __future__ import annotations

import re

from kubesim.kernel.metadata import Cause

VALIDATING = "validator.pytorchjob.training-operator.kubeflow.org"
REPLICA_TYPES = ("Master", "Worker")
DEFAULT_CONTAINER = "pytorch"
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_ERROR = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, "
    "and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
    "'[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def validate(obj: dict, old: dict | None) -> list[Cause]:
    """validatePyTorchJob: the name a DNS-1035 label, replica types Master and Worker only, each with containers that
    name an image and one container called `pytorch`, exactly one Master, at least one of each other type."""
    causes: list[Cause] = []
    name = (obj.get("metadata") or {}).get("name", "")
    if len(name) > 63 or not _DNS1035.match(name):
        message = f'Invalid value: "{name}": should match: {_DNS1035_ERROR}'
        causes.append(Cause("metadata.name", "FieldValueInvalid", message))
    specs = (obj.get("spec") or {}).get("pytorchReplicaSpecs")
    base = "spec.pytorchReplicaSpecs"
    if specs is None:
        causes.append(Cause(base, "FieldValueRequired", "Required value: must be required"))
        return causes
    for rtype, rspec in specs.items():
        path = f"{base}[{rtype}]"
        containers_path = f"{path}.template.spec.containers"
        if rtype not in REPLICA_TYPES:
            supported = ", ".join(f'"{t}"' for t in REPLICA_TYPES)
            message = f'Unsupported value: "{rtype}": supported values: {supported}'
            causes.append(Cause(path, "FieldValueNotSupported", message))
        containers = (((rspec or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            causes.append(Cause(containers_path, "FieldValueRequired", "Required value: must be specified"))
        for i, container in enumerate(containers):
            if not container.get("image"):
                path_i = f"{containers_path}[{i}].image"
                causes.append(Cause(path_i, "FieldValueRequired", "Required value: must be required"))
        if not any(c.get("name") == DEFAULT_CONTAINER for c in containers):
            message = f"Required value: must have at least one container with name {DEFAULT_CONTAINER}"
            causes.append(Cause(containers_path, "FieldValueRequired", message))
        replicas = (rspec or {}).get("replicas")
        if rtype == "Master" and replicas != 1:
            causes.append(Cause(f"{path}.replicas", "FieldValueForbidden", "Forbidden: must be 1"))
        elif rtype != "Master" and replicas is not None and replicas < 1:
            causes.append(Cause(f"{path}.replicas", "FieldValueForbidden", "Forbidden: must be at least 1"))
    return causes
