"""The jobframework's webhook part every job kind shares (upstream pkg/controller/jobframework/{defaults.go,
validation.go,base_webhook.go}): on create, the namespace's `default` LocalQueue and the `default`
WorkloadPriorityClass (WorkloadPriorityClassDefaulting, beta and on in v0.20) unless the job's controlling owner is a
job of an enabled integration, and suspend when it names a queue and no ancestor is Kueue-managed; Kueue's rules for
the labels and annotations it reads (ValidateJobOnCreate, ValidateJobOnUpdate). A kind's webhook module builds on
JobFrameworkWebhook."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubesim.kernel.metadata import DNS1123_SUBDOMAIN, SUBDOMAIN_ERROR
from kubesim.kueue import constants as C
from kubesim.kueue.webhooks.common import (
    ADMISSION_GATED_BY,
    ELASTIC_JOB,
    IMMUTABLE,
    Errors,
    as_dict,
    as_list,
    forbidden,
    gated_by_format_errors,
    gated_by_update_errors,
    invalid,
)

MAX_EXEC_TIME = "kueue.x-k8s.io/max-exec-time-seconds"
PREBUILT_WORKLOAD = "kueue.x-k8s.io/prebuilt-workload-name"
DEFAULT_PRIORITY_CLASS = "default"


def meta(obj: dict, key: str) -> dict:
    return as_dict(as_dict(obj.get("metadata")).get(key))


def atoi(value: str) -> int | None:
    """strconv.Atoi: an optional sign and decimal digits."""
    return int(value) if re.fullmatch(r"[+-]?[0-9]+", value) else None


class JobFrameworkWebhook:
    """A job kind's Kueue webhook (kubesim.kernel.protocols.Webhook): the shared defaulting and validation; a kind
    subclasses it with its resource, names and suspend field, and adds its own rules."""

    resource: str  # the kind's plural
    name: str  # the validating webhook's name (vjob.kb.io, vjobset.kb.io)
    gvk: str  # as Go prints a GroupVersionKind: "batch/v1, Kind=Job"
    elastic_supported: bool = False  # the kueue.x-k8s.io/elastic-job annotation (Job, RayCluster, RayJob, RayService)

    def __init__(self, owner_kinds: Mapping[tuple[str, str], str]) -> None:
        """owner_kinds: (apiVersion, kind) -> plural of every enabled integration: a job controlled by one is its
        owner's business (no default queue or priority class; not suspended when that owner names a queue)."""
        self.owner_kinds = dict(owner_kinds)

    # -- the kind's part -------------------------------------------------------------------------------------

    def suspended(self, obj: dict) -> bool:
        return as_dict(obj.get("spec")).get("suspend") is True

    def suspend(self, obj: dict) -> None:
        obj.setdefault("spec", {})["suspend"] = True

    # -- Webhook protocol ------------------------------------------------------------------------------------

    def webhook_name(self, resource: str) -> str:
        return self.name if resource == self.resource else ""

    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        if resource == self.resource and operation == "CREATE":
            self.apply_defaults(obj, store)
        return obj

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource != self.resource:
            return []
        if operation == "CREATE" or old is None:
            return self.on_create(obj)
        return self.on_update(old, obj, store) + self.on_create(obj)

    # -- defaults --------------------------------------------------------------------------------------------

    def _owned_by_integration(self, obj: dict) -> bool:
        """IsOwnerManagedByKueueForObject: the controlling owner is of a kind Kueue integrates."""
        return any(
            isinstance(ref, dict)
            and ref.get("controller")
            and (ref.get("apiVersion"), ref.get("kind")) in self.owner_kinds
            for ref in as_list(as_dict(obj.get("metadata")).get("ownerReferences"))
        )

    def _managed_ancestor(self, obj: dict, store) -> bool:
        """FindAncestorJobManagedByKueue, for the suspend default: some controlling owner up the chain, of an enabled
        kind and matching its reference's uid, names a queue."""
        namespace, current, seen = as_dict(obj.get("metadata")).get("namespace"), obj, set()
        while True:
            ref = next(
                (
                    r
                    for r in as_list(as_dict(current.get("metadata")).get("ownerReferences"))
                    if as_dict(r).get("controller")
                ),
                None,
            )
            resource = self.owner_kinds.get((ref.get("apiVersion"), ref.get("kind"))) if ref else None
            if ref is None or resource is None or ref.get("uid") in seen:
                return False
            parent = store.get(resource, namespace, ref.get("name", ""), copy=False)
            if parent is None or parent["metadata"].get("uid") != ref.get("uid"):
                return False
            if (parent["metadata"].get("labels") or {}).get(C.QUEUE_NAME_LABEL):
                return True
            seen.add(ref["uid"])
            current = parent

    def apply_defaults(self, obj: dict, store) -> None:
        """ApplyDefaultLocalQueue, ApplyDefaultWorkloadPriorityClass, ApplyDefaultForSuspend."""
        md = obj.setdefault("metadata", {})
        labels = md.get("labels") or {}
        owned = self._owned_by_integration(obj)
        if (
            not labels.get(C.QUEUE_NAME_LABEL)
            and not owned
            and md.get("namespace") not in C.UNMANAGED_NAMESPACES
            and store.get("localqueues", md.get("namespace"), "default")
        ):
            md.setdefault("labels", {})[C.QUEUE_NAME_LABEL] = "default"
        if (
            not labels.get(C.PRIORITY_CLASS_LABEL)
            and not owned
            and store.get("workloadpriorityclasses", None, DEFAULT_PRIORITY_CLASS)
        ):
            md.setdefault("labels", {})[C.PRIORITY_CLASS_LABEL] = DEFAULT_PRIORITY_CLASS
        if (md.get("labels") or {}).get(C.QUEUE_NAME_LABEL) and not self._managed_ancestor(obj, store):
            self.suspend(obj)

    # -- validation ------------------------------------------------------------------------------------------

    @staticmethod
    def _subdomain(obj: dict, where: str, key: str) -> Errors:
        """ValidateLabelAsCRDName / ValidateAnnotationAsCRDName: the label or annotation names an object."""
        value = meta(obj, where).get(key)
        if value is None or (len(value) <= 253 and DNS1123_SUBDOMAIN.match(value)):
            return []
        message = "must be no more than 253 characters" if len(value) > 253 else SUBDOMAIN_ERROR
        return [invalid(f"metadata.{where}[{key}]", value, message)]

    @staticmethod
    def _prebuilt(obj: dict) -> tuple[str, str]:
        """PrebuiltWorkloadNameFor and GetPrebuiltWorkloadPath (WorkloadIdentifierAnnotations, beta and on in v0.20:
        the annotation first, then the label)."""
        annotation = meta(obj, "annotations").get(PREBUILT_WORKLOAD, "")
        if annotation:
            return annotation, f"metadata.annotations[{PREBUILT_WORKLOAD}]"
        return meta(obj, "labels").get(PREBUILT_WORKLOAD, ""), f"metadata.labels[{PREBUILT_WORKLOAD}]"

    def on_create(self, obj: dict) -> Errors:
        """ValidateJobOnCreate: queue name and prebuilt Workload name are object names, a positive maximum execution
        time, the elastic-job annotation only on kinds that support it, the admission-gated-by annotation's form."""
        errors = self._subdomain(obj, "labels", C.QUEUE_NAME_LABEL)
        if meta(obj, "annotations").get(PREBUILT_WORKLOAD):
            errors += self._subdomain(obj, "annotations", PREBUILT_WORKLOAD)
        else:
            errors += self._subdomain(obj, "labels", PREBUILT_WORKLOAD)
        max_exec = meta(obj, "labels").get(MAX_EXEC_TIME)
        if max_exec is not None:
            path = f"metadata.labels[{MAX_EXEC_TIME}]"
            value = atoi(max_exec)
            if value is None:
                errors.append(invalid(path, max_exec, f'strconv.Atoi: parsing "{max_exec}": invalid syntax'))
            elif value <= 0:
                errors.append(invalid(path, value, "should be greater than 0"))
        if not self.elastic_supported and meta(obj, "annotations").get(ELASTIC_JOB) == "true":
            errors.append(
                forbidden(f"metadata.annotations[{ELASTIC_JOB}]", f'elastic job is not supported for "{self.gvk}"')
            )
        return errors + gated_by_format_errors(meta(obj, "annotations").get(ADMISSION_GATED_BY) or "")

    def on_update(self, old: dict, new: dict, store) -> Errors:
        """ValidateJobOnUpdate: the queue name is fixed while the job runs and may not be dropped where a `default`
        LocalQueue exists; prebuilt Workload and maximum execution time fixed unless suspended; a WorkloadPriorityClass
        is not added to a running job nor ever removed; the elastic-job annotation and admission gates as Kueue
        allows."""
        errors: Errors = []
        queue_path = f"metadata.labels[{C.QUEUE_NAME_LABEL}]"
        new_q = meta(new, "labels").get(C.QUEUE_NAME_LABEL, "")
        old_q = meta(old, "labels").get(C.QUEUE_NAME_LABEL, "")
        new_suspended, old_suspended = self.suspended(new), self.suspended(old)
        if not new_suspended and new_q != old_q:
            errors.append(invalid(queue_path, new_q, IMMUTABLE))
        if not new_q and old_q and store.get("localqueues", as_dict(new.get("metadata")).get("namespace"), "default"):
            errors.append(invalid(queue_path, "", "queue-name must not be empty in namespace with default queue"))
        (new_pre, pre_path), (old_pre, _) = self._prebuilt(new), self._prebuilt(old)
        if not (new_suspended or meta(old, "annotations").get(ELASTIC_JOB) == "true") and new_pre != old_pre:
            errors.append(invalid(pre_path, new_pre, IMMUTABLE))
        new_exec, old_exec = meta(new, "labels").get(MAX_EXEC_TIME, ""), meta(old, "labels").get(MAX_EXEC_TIME, "")
        if (not new_suspended or not old_suspended) and new_exec != old_exec:
            errors.append(invalid(f"metadata.labels[{MAX_EXEC_TIME}]", new_exec, IMMUTABLE))
        new_wpc = meta(new, "labels").get(C.PRIORITY_CLASS_LABEL, "")
        old_wpc = meta(old, "labels").get(C.PRIORITY_CLASS_LABEL, "")
        wpc_path = f"metadata.labels[{C.PRIORITY_CLASS_LABEL}]"
        if not new_suspended and not old_wpc and new_wpc:
            errors.append(
                invalid(wpc_path, new_wpc, "WorkloadPriorityClass cannot be added to a non-suspended workload")
            )
        elif not new_wpc and old_wpc:
            errors.append(invalid(wpc_path, new_wpc, "WorkloadPriorityClass cannot be removed from a workload"))
        new_elastic = meta(new, "annotations").get(ELASTIC_JOB) == "true"
        if new_elastic != (meta(old, "annotations").get(ELASTIC_JOB) == "true"):
            errors.append(invalid(f"metadata.annotations[{ELASTIC_JOB}]", new_elastic, IMMUTABLE))
        return errors + gated_by_update_errors(
            meta(old, "annotations").get(ADMISSION_GATED_BY), meta(new, "annotations").get(ADMISSION_GATED_BY)
        )
