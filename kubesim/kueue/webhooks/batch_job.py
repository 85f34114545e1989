"""The batch/v1 Job webhook (upstream pkg/controller/jobs/job/job_webhook.go on jobframework's validation): the
jobframework's defaults and label rules (kubesim.kueue.webhooks.jobframework) plus the Job's own: partial admission
(job-min-parallelism) and completions kept equal to parallelism. Refusals answer under vjob.kb.io."""

from __future__ import annotations

from kubesim.kueue import constants as C
from kubesim.kueue.webhooks.common import ELASTIC_JOB, IMMUTABLE, Errors, as_dict, forbidden, invalid
from kubesim.kueue.webhooks.jobframework import JobFrameworkWebhook, atoi, meta

COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"
STOPPING = "kueue.x-k8s.io/stopping"
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


def _sync_completions(job: dict) -> bool:
    return _GO_BOOLS.get(meta(job, "annotations").get(COMPLETIONS_EQUAL_PARALLELISM, ""), False)


class JobWebhook(JobFrameworkWebhook):
    """pkg/controller/jobs/job/job_webhook.go: Default() and ValidateCreate() / ValidateUpdate()."""

    resource = "jobs"
    name = "vjob.kb.io"
    gvk = "batch/v1, Kind=Job"
    elastic_supported = True

    def suspended(self, obj: dict) -> bool:
        """Job.IsSuspended: spec.suspend, unless Kueue is stopping it."""
        return super().suspended(obj) and meta(obj, "annotations").get(STOPPING) != "true"

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource != self.resource:
            return []
        errors = self.on_create(obj)
        if operation == "CREATE" or old is None:
            return errors + self._partial_admission(obj) + self._sync_completion(obj)
        min_par = C.MIN_PARALLELISM_ANNOTATION
        if meta(obj, "annotations").get(min_par) != meta(old, "annotations").get(min_par):
            errors += self._partial_admission(obj)
        errors += self._sync_completion(obj)
        return errors + self.on_update(old, obj, store) + self._job_update(old, obj)

    @staticmethod
    def _partial_admission(job: dict) -> Errors:
        """validatePartialAdmissionCreate: job-min-parallelism is an integer in [1, pods count - 1]."""
        annotations = meta(job, "annotations")
        raw = annotations.get(C.MIN_PARALLELISM_ANNOTATION)
        if raw is None:
            return []
        path = f"metadata.annotations[{C.MIN_PARALLELISM_ANNOTATION}]"
        spec = as_dict(job.get("spec"))
        pods = spec.get("parallelism", 1)
        if isinstance(spec.get("completions"), int) and spec["completions"] < pods:
            pods = spec["completions"]
        errors: Errors = []
        value = atoi(raw)
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
        raw = meta(job, "annotations").get(COMPLETIONS_EQUAL_PARALLELISM)
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

    def _job_update(self, old: dict, new: dict) -> Errors:
        """validatePartialAdmissionUpdate and the completions-equal-parallelism annotation's immutability."""
        errors: Errors = []
        old_spec, new_spec = as_dict(old.get("spec")), as_dict(new.get("spec"))
        if (
            C.MIN_PARALLELISM_ANNOTATION in meta(old, "annotations")
            and old_spec.get("suspend") is not True  # spec.suspend itself: a Job being stopped may be resized
            and old_spec.get("parallelism", 1) != new_spec.get("parallelism", 1)
        ):
            errors.append(
                forbidden(
                    "spec.parallelism", "cannot change when partial admission is enabled and the job is not suspended"
                )
            )
        old_suspended, new_suspended = self.suspended(old), self.suspended(new)
        if old_suspended == new_suspended and not new_suspended and _sync_completions(old) != _sync_completions(new):
            path = f"metadata.annotations[{COMPLETIONS_EQUAL_PARALLELISM}]"
            errors.append(forbidden(path, f"{IMMUTABLE} while the job is not suspended"))
        return errors
