"""Kubeflow Trainer v2.3.0's TrainJob validating webhook (validator.trainjob.trainer.kubeflow.org), the part kubesim
emulates: runtimePatches (how Kueue passes an admission to the Trainer) change only while the TrainJob is suspended
before or after the update, and name their manager as a domain-prefixed path. Its refusal is a plain error list,
which the API server relays as 403 `admission webhook "..." denied the request: ...`. Not emulated: the check that
the JobSet has no active replicatedJob, the runtime plugins' own checks (reserved PET_* variables, initializers)."""

from __future__ import annotations

import re

from kubesim.kernel.metadata import Cause

VALIDATING = "validator.trainjob.trainer.kubeflow.org"
_DOMAIN_PATH = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[^/]+(/[^/]+)*$")


def _suspended(obj: dict | None) -> bool:
    return bool(((obj or {}).get("spec") or {}).get("suspend"))


def validate(obj: dict, old: dict | None) -> list[Cause]:
    causes: list[Cause] = []
    patches = (obj.get("spec") or {}).get("runtimePatches") or []
    changed = old is not None and patches != ((old.get("spec") or {}).get("runtimePatches") or [])
    if changed and not _suspended(old) and not _suspended(obj):
        message = (
            "Forbidden: RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
        )
        causes.append(Cause("spec.runtimePatches", "FieldValueForbidden", message))
    for patch in patches:
        manager = patch.get("manager", "")
        if not _DOMAIN_PATH.match(manager):
            message = f'Invalid value: "{manager}": must be a domain-prefixed path (such as "acme.io/foo")'
            causes.append(Cause("spec.runtimePatches.manager", "FieldValueInvalid", message))
    return causes
