"""The batch/v1 Job webhook (upstream pkg/controller/jobs/job/job_webhook.go, with jobframework's validation): the
namespace's `default` LocalQueue and the `default` WorkloadPriorityClass, suspend when queued, and Kueue's rules for
the labels and annotations it reads on create and update. Refusals answer under vjob.kb.io."""

from __future__ import annotations

import re

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

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"
STOPPING = "kueue.x-k8s.io/stopping"
MAX_EXEC_TIME = "kueue.x-k8s.io/max-exec-time-seconds"
PREBUILT_WORKLOAD = "kueue.x-k8s.io/prebuilt-workload-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
DEFAULT_PRIORITY_CLASS = "default"
# Configuration.managedJobsNamespaceSelector's default: every namespace but these.
UNMANAGED_NAMESPACES = frozenset({"kube-system", "kueue-system"})
_GO_BOOLS = {
    "1": True,
    "t": True,
    "T": True,
    "TRUE": True,
    "true": True,
    "True": True,
    "0": False,
    "f": False,
    "F": False,
    "FALSE": False,
    "false": False,
    "False": False,
}


def _meta(obj: dict, key: str) -> dict:
    return as_dict(as_dict(obj.get("metadata")).get(key))


def _atoi(value: str) -> int | None:
    """strconv.Atoi: an optional sign and decimal digits."""
    return int(value) if re.fullmatch(r"[+-]?[0-9]+", value) else None


def _owner_is_an_integration(md: dict) -> bool:
    """IsOwnerManagedByKueueForObject: the controlling owner is of a kind Kueue integrates (kubesim: batch/v1 Job),
    so Kueue manages the owner, not this Job: no default LocalQueue nor WorkloadPriorityClass."""
    return any(
        isinstance(ref, dict)
        and ref.get("controller")
        and (ref.get("apiVersion"), ref.get("kind")) == ("batch/v1", "Job")
        for ref in as_list(md.get("ownerReferences"))
    )


def _job_suspended(job: dict) -> bool:
    """Job.IsSuspended: spec.suspend, unless Kueue is stopping it."""
    return as_dict(job.get("spec")).get("suspend") is True and _meta(job, "annotations").get(STOPPING) != "true"


def _sync_completions(job: dict) -> bool:
    return _GO_BOOLS.get(_meta(job, "annotations").get(COMPLETIONS_EQUAL_PARALLELISM, ""), False)


class JobWebhook:
    """pkg/controller/jobs/job/job_webhook.go and jobframework's validation for batch/v1 Jobs: Default() (the
    namespace's `default` LocalQueue, the `default` WorkloadPriorityClass (WorkloadPriorityClassDefaulting, beta and
    on in v0.20), suspend when queued), ValidateCreate() and ValidateUpdate()."""

    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        if resource != "jobs" or operation != "CREATE":
            return obj
        md = obj.setdefault("metadata", {})
        labels = md.get("labels") or {}
        owned = _owner_is_an_integration(md)
        if (
            not labels.get(C.QUEUE_NAME_LABEL)
            and not owned
            and md.get("namespace") not in UNMANAGED_NAMESPACES
            and store.get("localqueues", md.get("namespace"), "default")
        ):
            md.setdefault("labels", {})[C.QUEUE_NAME_LABEL] = "default"
        if (
            not labels.get(PRIORITY_CLASS_LABEL)
            and not owned
            and store.get("workloadpriorityclasses", None, DEFAULT_PRIORITY_CLASS)
        ):
            md.setdefault("labels", {})[PRIORITY_CLASS_LABEL] = DEFAULT_PRIORITY_CLASS
        if (md.get("labels") or {}).get(C.QUEUE_NAME_LABEL):
            obj.setdefault("spec", {})["suspend"] = True
        return obj

    @staticmethod
    def webhook_name(resource: str) -> str:
        return "vjob.kb.io" if resource == "jobs" else ""

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource != "jobs":
            return []
        errors = self._on_create(obj)
        if operation == "CREATE" or old is None:
            return errors + self._partial_admission(obj) + self._sync_completion(obj)
        if _meta(obj, "annotations").get(MIN_PARALLELISM) != _meta(old, "annotations").get(MIN_PARALLELISM):
            errors += self._partial_admission(obj)
        errors += self._sync_completion(obj)
        return errors + self._on_update(old, obj, store)

    @staticmethod
    def _subdomain(job: dict, where: str, key: str) -> Errors:
        """ValidateLabelAsCRDName / ValidateAnnotationAsCRDName: the label or annotation names an object."""
        value = _meta(job, where).get(key)
        if value is None or (len(value) <= 253 and DNS1123_SUBDOMAIN.match(value)):
            return []
        message = "must be no more than 253 characters" if len(value) > 253 else SUBDOMAIN_ERROR
        return [invalid(f"metadata.{where}[{key}]", value, message)]

    @staticmethod
    def _prebuilt(job: dict) -> tuple[str, str]:
        """PrebuiltWorkloadNameFor and GetPrebuiltWorkloadPath (WorkloadIdentifierAnnotations, beta and on in v0.20:
        the annotation first, then the label)."""
        annotation = _meta(job, "annotations").get(PREBUILT_WORKLOAD, "")
        if annotation:
            return annotation, f"metadata.annotations[{PREBUILT_WORKLOAD}]"
        return _meta(job, "labels").get(PREBUILT_WORKLOAD, ""), f"metadata.labels[{PREBUILT_WORKLOAD}]"

    def _on_create(self, job: dict) -> Errors:
        """jobframework.ValidateJobOnCreate."""
        errors = self._subdomain(job, "labels", C.QUEUE_NAME_LABEL)
        if _meta(job, "annotations").get(PREBUILT_WORKLOAD):
            errors += self._subdomain(job, "annotations", PREBUILT_WORKLOAD)
        else:
            errors += self._subdomain(job, "labels", PREBUILT_WORKLOAD)
        max_exec = _meta(job, "labels").get(MAX_EXEC_TIME)
        if max_exec is not None:
            path = f"metadata.labels[{MAX_EXEC_TIME}]"
            value = _atoi(max_exec)
            if value is None:
                errors.append(invalid(path, max_exec, f'strconv.Atoi: parsing "{max_exec}": invalid syntax'))
            elif value <= 0:
                errors.append(invalid(path, value, "should be greater than 0"))
        return errors + gated_by_format_errors(_meta(job, "annotations").get(ADMISSION_GATED_BY) or "")

    @staticmethod
    def _partial_admission(job: dict) -> Errors:
        """validatePartialAdmissionCreate: job-min-parallelism is an integer in [1, pods count - 1]."""
        annotations = _meta(job, "annotations")
        raw = annotations.get(MIN_PARALLELISM)
        if raw is None:
            return []
        path = f"metadata.annotations[{MIN_PARALLELISM}]"
        spec = as_dict(job.get("spec"))
        pods = spec.get("parallelism", 1)
        if isinstance(spec.get("completions"), int) and spec["completions"] < pods:
            pods = spec["completions"]
        errors: Errors = []
        value = _atoi(raw)
        if value is None:
            errors.append(invalid(path, raw, f'strconv.Atoi: parsing "{raw}": invalid syntax'))
        elif value >= pods or value <= 0:
            errors.append(invalid(path, value, f"should be between 0 and {pods - 1}"))
        if annotations.get(ELASTIC_JOB) == "true":
            errors.append(invalid(path, raw, "partial admission and elastic job cannot be used together"))
        return errors

    @staticmethod
    def _sync_completion(job: dict) -> Errors:
        """validateSyncCompletionCreate: job-completions-equal-parallelism on Indexed Jobs with completions ==
        parallelism."""
        raw = _meta(job, "annotations").get(COMPLETIONS_EQUAL_PARALLELISM)
        if raw is None:
            return []
        path = f"metadata.annotations[{COMPLETIONS_EQUAL_PARALLELISM}]"
        errors: Errors = []
        if raw not in _GO_BOOLS:
            errors.append(invalid(path, raw, f'strconv.ParseBool: parsing "{raw}": invalid syntax'))
        if _GO_BOOLS.get(raw):
            spec = as_dict(job.get("spec"))
            if spec.get("completionMode", "NonIndexed") == "NonIndexed":
                errors.append(invalid(path, raw, "should not be enabled for NonIndexed jobs"))
            if spec.get("parallelism", 1) != spec.get("completions", 1):
                message = f"should be equal to parallelism when {COMPLETIONS_EQUAL_PARALLELISM} annotation is true"
                errors.append(invalid("spec.completions", spec.get("completions"), message))
        return errors

    def _on_update(self, old: dict, new: dict, store) -> Errors:
        """jobframework.ValidateJobOnUpdate and validatePartialAdmissionUpdate."""
        errors: Errors = []
        queue_path = f"metadata.labels[{C.QUEUE_NAME_LABEL}]"
        new_q = _meta(new, "labels").get(C.QUEUE_NAME_LABEL, "")
        old_q = _meta(old, "labels").get(C.QUEUE_NAME_LABEL, "")
        new_suspended, old_suspended = _job_suspended(new), _job_suspended(old)
        if not new_suspended and new_q != old_q:
            errors.append(invalid(queue_path, new_q, IMMUTABLE))
        if not new_q and old_q and store.get("localqueues", as_dict(new.get("metadata")).get("namespace"), "default"):
            errors.append(invalid(queue_path, "", "queue-name must not be empty in namespace with default queue"))
        (new_pre, pre_path), (old_pre, _) = self._prebuilt(new), self._prebuilt(old)
        if not (new_suspended or _meta(old, "annotations").get(ELASTIC_JOB) == "true") and new_pre != old_pre:
            errors.append(invalid(pre_path, new_pre, IMMUTABLE))
        new_exec, old_exec = _meta(new, "labels").get(MAX_EXEC_TIME, ""), _meta(old, "labels").get(MAX_EXEC_TIME, "")
        if (not new_suspended or not old_suspended) and new_exec != old_exec:
            errors.append(invalid(f"metadata.labels[{MAX_EXEC_TIME}]", new_exec, IMMUTABLE))
        new_wpc = _meta(new, "labels").get(PRIORITY_CLASS_LABEL, "")
        old_wpc = _meta(old, "labels").get(PRIORITY_CLASS_LABEL, "")
        wpc_path = f"metadata.labels[{PRIORITY_CLASS_LABEL}]"
        if not new_suspended and not old_wpc and new_wpc:
            errors.append(
                invalid(wpc_path, new_wpc, "WorkloadPriorityClass cannot be added to a non-suspended workload")
            )
        elif not new_wpc and old_wpc:
            errors.append(invalid(wpc_path, new_wpc, "WorkloadPriorityClass cannot be removed from a workload"))
        new_elastic = _meta(new, "annotations").get(ELASTIC_JOB) == "true"
        if new_elastic != (_meta(old, "annotations").get(ELASTIC_JOB) == "true"):
            errors.append(invalid(f"metadata.annotations[{ELASTIC_JOB}]", new_elastic, IMMUTABLE))
        errors += gated_by_update_errors(
            _meta(old, "annotations").get(ADMISSION_GATED_BY), _meta(new, "annotations").get(ADMISSION_GATED_BY)
        )
        old_spec, new_spec = as_dict(old.get("spec")), as_dict(new.get("spec"))
        if (
            MIN_PARALLELISM in _meta(old, "annotations")
            and old_spec.get("suspend") is not True  # spec.suspend itself: a Job being stopped may be resized
            and old_spec.get("parallelism", 1) != new_spec.get("parallelism", 1)
        ):
            errors.append(
                forbidden(
                    "spec.parallelism", "cannot change when partial admission is enabled and the job is not suspended"
                )
            )
        if old_suspended == new_suspended and not new_suspended and _sync_completions(old) != _sync_completions(new):
            path = f"metadata.annotations[{COMPLETIONS_EQUAL_PARALLELISM}]"
            errors.append(forbidden(path, f"{IMMUTABLE} while the job is not suspended"))
        return errors
