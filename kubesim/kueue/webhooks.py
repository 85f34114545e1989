"""Kueue's admission webhooks: the Job webhook (suspend on create, queue-name immutability) and the validating
webhooks for ClusterQueues, Cohorts, LocalQueues and Workloads (pkg/webhooks)."""

from __future__ import annotations

import json

from kubesim.kueue import constants as C
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler.model import condition_true
from kubesim.quantity import QuantityError, decimal_value

Errors = list[tuple[str, str]]


def _invalid(value: object, message: str) -> str:
    """k8s field.Invalid detail: `Invalid value: "1": must be ...`."""
    shown = json.dumps(value) if isinstance(value, str) else json.dumps(value, default=str)
    return f"Invalid value: {shown}: {message}"


class JobWebhook:
    """pkg/controller/jobs/job/job_webhook.go: Default() and ValidateUpdate() for Kueue-managed Jobs."""

    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        if resource != "jobs" or operation != "CREATE":
            return obj
        md = obj.setdefault("metadata", {})
        labels = md.get("labels") or {}
        if not labels.get(C.QUEUE_NAME_LABEL) and store.get("localqueues", md.get("namespace"), "default"):
            md.setdefault("labels", {})[C.QUEUE_NAME_LABEL] = "default"
        if (md.get("labels") or {}).get(C.QUEUE_NAME_LABEL):
            obj.setdefault("spec", {})["suspend"] = True
        return obj

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource != "jobs" or operation != "UPDATE" or old is None:
            return []
        path = f"metadata.labels[{C.QUEUE_NAME_LABEL}]"
        new_q = ((obj.get("metadata") or {}).get("labels") or {}).get(C.QUEUE_NAME_LABEL, "")
        old_q = ((old.get("metadata") or {}).get("labels") or {}).get(C.QUEUE_NAME_LABEL, "")
        errors: Errors = []
        if not (obj.get("spec") or {}).get("suspend") and new_q != old_q:
            errors.append((path, _invalid(new_q, "field is immutable")))
        if not new_q and old_q and store.get("localqueues", obj["metadata"].get("namespace"), "default"):
            errors.append((path, _invalid("", "queue-name must not be empty in namespace with default queue")))
        return errors


def _validate_quotas(spec: dict, has_parent: bool, is_cohort: bool) -> Errors:
    errors: Errors = []
    parent_word = "parent" if is_cohort else "cohort"
    for i, rg in enumerate(spec.get("resourceGroups") or []):
        for j, fq in enumerate(rg.get("flavors") or []):
            for k, r in enumerate(fq.get("resources") or []):
                base = f"spec.resourceGroups[{i}].flavors[{j}].resources[{k}]"
                values = {}
                for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if r.get(key) is None:
                        continue
                    try:
                        values[key] = decimal_value(r[key])
                    except QuantityError:
                        continue  # schema validation reports malformed quantities (before webhooks run)
                    if values[key] < 0:
                        errors.append((f"{base}.{key}", _invalid(str(r[key]), "must be greater than or equal to 0")))
                for key in ("borrowingLimit", "lendingLimit"):
                    if r.get(key) is not None and not has_parent:
                        errors.append(
                            (f"{base}.{key}", _invalid(str(r[key]), f"must be nil when {parent_word} is empty"))
                        )
                if (
                    not is_cohort
                    and has_parent
                    and "lendingLimit" in values
                    and "nominalQuota" in values
                    and values["lendingLimit"] > values["nominalQuota"]
                ):
                    errors.append(
                        (
                            f"{base}.lendingLimit",
                            _invalid(str(r["lendingLimit"]), "must be less than or equal to the nominalQuota"),
                        )
                    )
    return errors


def _validate_weight(spec: dict) -> Errors:
    weight = (spec.get("fairSharing") or {}).get("weight")
    if weight is None:
        return []
    try:
        w = decimal_value(weight)
    except QuantityError:
        return []  # schema validation reports malformed quantities (before webhooks run)
    if w < 0:
        return [("spec.fairSharing.weight", _invalid(str(weight), "must be greater than or equal to 0"))]
    if 0 < w < decimal_value("1e-9"):
        return [("spec.fairSharing.weight", _invalid(str(weight), "must be 0 or greater than 1e-9"))]
    return []


class KueueValidation:
    """Validating webhooks for Kueue's own objects: what the CRD schema cannot express."""

    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        return obj

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        spec = obj.get("spec") or {}
        if resource == "clusterqueues":
            return _validate_quotas(spec, bool(spec.get("cohortName")), False) + _validate_weight(spec)
        if resource == "cohorts":
            return _validate_quotas(spec, bool(spec.get("parentName")), True) + _validate_weight(spec)
        if resource == "localqueues" and operation == "UPDATE" and old is not None:
            old_cq = (old.get("spec") or {}).get("clusterQueue")
            if spec.get("clusterQueue") != old_cq:
                return [("spec.clusterQueue", _invalid(spec.get("clusterQueue"), "field is immutable"))]
        if resource in ("workloads", "workloads/status"):
            return self._workload(obj, old)
        return []

    @staticmethod
    def _workload(obj: dict, old: dict | None) -> Errors:
        errors: Errors = []
        podsets = (obj.get("spec") or {}).get("podSets") or []
        if sum(1 for ps in podsets if ps.get("minCount") is not None) > 1:
            errors.append(("spec.podSets", _invalid(len(podsets), "at most one podSet can use minCount")))
        if old is None:
            return errors
        if condition_true(old, C.QUOTA_RESERVED):
            old_ps = (old.get("spec") or {}).get("podSets") or []
            if _strip_counts(podsets) != _strip_counts(old_ps):
                errors.append(("spec.podSets", _invalid("podSets", "field is immutable")))
        old_adm = (old.get("status") or {}).get("admission")
        new_adm = (obj.get("status") or {}).get("admission")
        if old_adm is not None and new_adm is not None and old_adm != new_adm:
            errors.append(("status.admission", _invalid("admission", "field is immutable")))
        return errors


def _strip_counts(podsets: list[dict]) -> list[dict]:
    return [{k: v for k, v in ps.items() if k != "count"} for ps in podsets]


def kueue_webhooks(config: KueueConfig) -> list:
    return [JobWebhook(), KueueValidation()]
