"""Kueue's admission webhooks: the Job webhook (suspend on create, queue-name immutability) and the webhooks for
Kueue's own kinds (pkg/webhooks): ClusterQueue and ResourceFlavor (defaulting: the resource-in-use finalizer),
Cohort and Workload, with v0.20's default feature gates (PartialAdmission, ElasticJobsViaWorkloadSlices,
TopologyAwareScheduling, AdmissionGatedBy, WorkloadValidateResourcesAreNonNegative and
WorkloadValidationForPodSetMetadata on; ConcurrentAdmission, PriorityBoost and RejectUpdatesToCQWithInvalidOnFlavors
off). LocalQueue and WorkloadPriorityClass have no webhook upstream: their CRD rules (validation.py) do the work.

A validating webhook answers (field path, message) or (field path, message, StatusCause reason) per problem; the
message is field.Error's body (`Invalid value: "1": ...`, `Duplicate value: ...`, `Unsupported value: ...`,
`Required value: ...`, `Forbidden: ...`, `Not found: ...`). Schema and CEL validation run first: an object they
refuse never reaches these webhooks, as in kube-apiserver."""

from __future__ import annotations

import json
import re
from decimal import Decimal

from kubesim.kernel.metadata import (
    DNS1123_SUBDOMAIN,
    LABEL_VALUE,
    LABEL_VALUE_ERROR,
    SUBDOMAIN_ERROR,
    Cause,
    annotation_causes,
    label_causes,
    qualified_name_errors,
)
from kubesim.kernel.quantity import QuantityError, decimal_value, to_amount
from kubesim.kueue import constants as C
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler.model import condition_true

Error = tuple[str, str] | tuple[str, str, str]
Errors = list[Error]

ADMISSION_GATED_BY = "kueue.x-k8s.io/admission-gated-by"
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
SLICE_REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
IMMUTABLE = "field is immutable"
NEGATIVE = "must be greater than or equal to 0"
MAX_GATE_NAME = 63


# -- field.Error bodies -----------------------------------------------------------------------------------------------


def _shown(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _invalid(value: object, message: str) -> str:
    """k8s field.Invalid detail: `Invalid value: "1": must be ...`."""
    return f"Invalid value: {_shown(value)}: {message}"


def invalid(path: str, value: object, message: str) -> Error:
    return (path, _invalid(value, message), "FieldValueInvalid")


def duplicate(path: str, value: object, detail: str = "") -> Error:
    return (path, f"Duplicate value: {_shown(value)}" + (f": {detail}" if detail else ""), "FieldValueDuplicate")


def not_supported(path: str, value: object, valid: list[str]) -> Error:
    allowed = ", ".join(_shown(v) for v in valid)
    detail = f": supported values: {allowed}" if valid else ""
    return (path, f"Unsupported value: {_shown(value)}{detail}", "FieldValueNotSupported")


def required(path: str, detail: str = "") -> Error:
    return (path, "Required value" + (f": {detail}" if detail else ""), "FieldValueRequired")


def forbidden(path: str, detail: str) -> Error:
    return (path, f"Forbidden: {detail}", "FieldValueForbidden")


def not_found(path: str, value: object) -> Error:
    return (path, f"Not found: {_shown(value)}", "FieldValueNotFound")


def _from_causes(causes: list[Cause]) -> Errors:
    return [(c.field, c.message, c.reason) for c in causes]


def _labels(labels: object, path: str) -> Errors:
    return _from_causes(label_causes(labels, path)) if isinstance(labels, dict) else []


def _annotations(annotations: object, path: str) -> Errors:
    return _from_causes(annotation_causes(annotations, path)) if isinstance(annotations, dict) else []


def _label_name(name: object, path: str) -> Errors:
    """metav1validation.ValidateLabelName: a qualified name."""
    if not isinstance(name, str):
        return []
    return [invalid(path, name, m) for m in qualified_name_errors(name)]


def _quantity(value: object) -> Decimal | None:
    try:
        return decimal_value(value)
    except QuantityError:
        return None  # schema validation (or decoding) reports malformed quantities before webhooks run


def _list(value: object) -> list:
    return value if isinstance(value, list) else []


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


# -- Job -------------------------------------------------------------------------------------------------------------


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
    return _dict(_dict(obj.get("metadata")).get(key))


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
        for ref in _list(md.get("ownerReferences"))
    )


def _job_suspended(job: dict) -> bool:
    """Job.IsSuspended: spec.suspend, unless Kueue is stopping it."""
    return _dict(job.get("spec")).get("suspend") is True and _meta(job, "annotations").get(STOPPING) != "true"


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
        return errors + _gated_by_format(_meta(job, "annotations").get(ADMISSION_GATED_BY) or "")

    @staticmethod
    def _partial_admission(job: dict) -> Errors:
        """validatePartialAdmissionCreate: job-min-parallelism is an integer in [1, pods count - 1]."""
        annotations = _meta(job, "annotations")
        raw = annotations.get(MIN_PARALLELISM)
        if raw is None:
            return []
        path = f"metadata.annotations[{MIN_PARALLELISM}]"
        spec = _dict(job.get("spec"))
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
            spec = _dict(job.get("spec"))
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
        if not new_q and old_q and store.get("localqueues", _dict(new.get("metadata")).get("namespace"), "default"):
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
        errors += _gated_by_update(
            _meta(old, "annotations").get(ADMISSION_GATED_BY), _meta(new, "annotations").get(ADMISSION_GATED_BY)
        )
        old_spec, new_spec = _dict(old.get("spec")), _dict(new.get("spec"))
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


# -- ClusterQueue and Cohort -----------------------------------------------------------------------------------------


def _resource_groups(groups: list, has_parent: bool, is_cohort: bool) -> Errors:
    """validateResourceGroups: covered resource names (label keys, each in one group only), flavor names (each in
    one group only), each flavor's resources in coveredResources' order, quotas >= 0, limits only with a parent,
    and (ClusterQueues) lendingLimit <= nominalQuota."""
    errors: Errors = []
    seen_resources: set[str] = set()
    seen_flavors: set[object] = set()
    parent_word = "parent" if is_cohort else "cohort"
    for i, rg in enumerate(groups):
        rg = _dict(rg)
        base = f"spec.resourceGroups[{i}]"
        covered = [r for r in _list(rg.get("coveredResources")) if isinstance(r, str)]
        for j, name in enumerate(covered):
            path = f"{base}.coveredResources[{j}]"
            errors += [invalid(path, name, m) for m in qualified_name_errors(name)]
            if name in seen_resources:
                errors.append(duplicate(path, name))
            seen_resources.add(name)
        for j, fq in enumerate(_list(rg.get("flavors"))):
            fq = _dict(fq)
            fpath = f"{base}.flavors[{j}]"
            for k, r in enumerate(_list(fq.get("resources"))[: len(covered)]):
                errors += _resource_quota(
                    _dict(r), covered[k], f"{fpath}.resources[{k}]", has_parent, is_cohort, parent_word
                )
            flavor = fq.get("name")
            if flavor in seen_flavors:
                errors.append(duplicate(f"{fpath}.name", flavor))
            seen_flavors.add(flavor)
    return errors


def _resource_quota(r: dict, covered: str, path: str, has_parent: bool, is_cohort: bool, parent_word: str) -> Errors:
    errors: Errors = []
    if r.get("name") != covered:
        errors.append(invalid(f"{path}.name", r.get("name"), "must match the name in coveredResources"))
    nominal = _quantity(r.get("nominalQuota"))
    if nominal is not None and nominal < 0:
        errors.append(invalid(f"{path}.nominalQuota", str(r["nominalQuota"]), NEGATIVE))
    limit_message = f"must be nil when {parent_word} is empty"
    if r.get("borrowingLimit") is not None:
        raw = str(r["borrowingLimit"])
        if not has_parent:
            errors.append(invalid(f"{path}.borrowingLimit", raw, limit_message))
        value = _quantity(r["borrowingLimit"])
        if value is not None and value < 0:
            errors.append(invalid(f"{path}.borrowingLimit", raw, NEGATIVE))
    if r.get("lendingLimit") is not None:
        raw = str(r["lendingLimit"])
        value = _quantity(r["lendingLimit"])
        if value is not None and value < 0:
            errors.append(invalid(f"{path}.lendingLimit", raw, NEGATIVE))
        if not has_parent:
            errors.append(invalid(f"{path}.lendingLimit", raw, limit_message))
        if not is_cohort and value is not None and nominal is not None and value > nominal:
            errors.append(invalid(f"{path}.lendingLimit", raw, "must be less than or equal to the nominalQuota"))
    return errors


def _fair_sharing(spec: dict) -> Errors:
    """validateFairSharing: the weight is reported on spec.fairSharing."""
    weight = _dict(spec.get("fairSharing")).get("weight")
    value = None if weight is None else _quantity(weight)
    if value is None:
        return []
    if value < 0:
        return [invalid("spec.fairSharing", str(weight), NEGATIVE)]
    if 0 < value <= Decimal("1e-9"):
        return [invalid("spec.fairSharing", str(weight), "When not 0, weight must be > 10e-9")]
    return []


def _label_selector(selector: object, path: str) -> Errors:
    """metav1validation.ValidateLabelSelector (invalid label values in selectors refused)."""
    if not isinstance(selector, dict):
        return []
    errors = _labels(selector.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in enumerate(_list(selector.get("matchExpressions"))):
        expr = _dict(expr)
        epath = f"{path}.matchExpressions[{i}]"
        operator, values = expr.get("operator"), _list(expr.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                errors.append(required(f"{epath}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errors.append(
                    forbidden(f"{epath}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
                )
        else:
            errors.append(invalid(f"{epath}.operator", operator, "not a valid selector operator"))
        errors += _label_name(expr.get("key"), f"{epath}.key")
        for j, value in enumerate(values):
            if isinstance(value, str) and (len(value) > 63 or not LABEL_VALUE.match(value)):
                message = "must be no more than 63 characters" if len(value) > 63 else LABEL_VALUE_ERROR
                errors.append(invalid(f"{epath}.values[{j}]", value, message))
    return errors


def _all_flavors(spec: dict) -> list[str]:
    return [
        fq["name"]
        for rg in _list(spec.get("resourceGroups"))
        for fq in _list(_dict(rg).get("flavors"))
        if isinstance(fq, dict) and isinstance(fq.get("name"), str)
    ]


def _on_flavors(spec: dict, old_spec: dict | None) -> Errors:
    """validateAdmissionCheckOnFlavors: onFlavors name flavors of the queue. With RejectUpdatesToCQWithInvalidOnFlavors
    off (v0.20's default), an update that keeps the flavors keeps a rule whose onFlavors it does not change."""
    rules = _list(_dict(spec.get("admissionChecksStrategy")).get("admissionChecks"))
    flavors = _all_flavors(spec)
    kept: dict[str, set] = {}
    old_strategy = None if old_spec is None else old_spec.get("admissionChecksStrategy")
    if old_spec is not None and old_strategy is not None and set(_all_flavors(old_spec)) == set(flavors):
        for rule in _list(_dict(old_strategy).get("admissionChecks")):
            rule = _dict(rule)
            kept[rule.get("name", "")] = set(_list(rule.get("onFlavors")))
    errors: Errors = []
    for i, rule in enumerate(rules):
        rule = _dict(rule)
        on = _list(rule.get("onFlavors"))
        if rule.get("name", "") in kept and kept[rule.get("name", "")] == set(on):
            continue
        for j, flavor in enumerate(on):
            if flavor not in flavors:
                path = f"spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]"
                errors.append(not_supported(path, flavor, flavors))
    return errors


def _totals(groups: list) -> Errors:
    """validateTotalFlavors, validateTotalCoveredResources, validateFlavorResourceCombinations."""
    groups = [_dict(rg) for rg in groups]
    errors: Errors = []
    flavors = sum(len(_list(rg.get("flavors"))) for rg in groups)
    if flavors > 256:
        message = f"total number of flavors across all resourceGroups must be ≤ 256, got {flavors}"
        errors.append(invalid("spec.resourceGroups", flavors, message))
    covered = sum(len(_list(rg.get("coveredResources"))) for rg in groups)
    if covered > 256:
        message = f"total number of covered resources across all resourceGroups must be ≤ 256, got {covered}"
        errors.append(invalid("spec.resourceGroups", covered, message))
    for i, rg in enumerate(groups):
        combos = sum(len(_list(_dict(fq).get("resources"))) for fq in _list(rg.get("flavors")))
        if combos > 512:
            message = f"number of flavor-resource combinations in a resourceGroup must be ≤ 512, got {combos}"
            errors.append(invalid(f"spec.resourceGroups[{i}]", combos, message))
    return errors


def validate_cluster_queue(obj: dict, old: dict | None) -> Errors:
    """ValidateClusterQueue / ValidateClusterQueueUpdate (ConcurrentAdmission off: its policy is only immutable)."""
    spec = _dict(obj.get("spec"))
    groups = _list(spec.get("resourceGroups"))
    errors = _resource_groups(groups, bool(spec.get("cohortName")), False)
    errors += _label_selector(spec.get("namespaceSelector"), "spec.namespaceSelector")
    preemption = spec.get("preemption")
    if isinstance(preemption, dict):
        borrow = preemption.get("borrowWithinCohort")
        if (
            preemption.get("reclaimWithinCohort") == "Never"
            and isinstance(borrow, dict)
            and borrow.get("policy", "Never") != "Never"
        ):
            errors.append(
                invalid("spec.preemption", preemption, "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
            )
    fungibility = spec.get("flavorFungibility")
    if (
        isinstance(fungibility, dict)
        and fungibility.get("preference") is not None
        and (
            fungibility.get("whenCanBorrow") != "TryNextFlavor" or fungibility.get("whenCanPreempt") != "TryNextFlavor"
        )
    ):
        preference = fungibility["preference"]
        message = f'preference "{preference}" requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor'
        errors.append(invalid("spec.flavorFungibility.preference", preference, message))
    errors += _fair_sharing(spec)
    errors += _totals(groups)
    old_spec = None if old is None else _dict(old.get("spec"))
    errors += _on_flavors(spec, old_spec)
    if old_spec is not None and spec.get("concurrentAdmissionPolicy") != old_spec.get("concurrentAdmissionPolicy"):
        errors.append(invalid("spec.concurrentAdmissionPolicy", spec.get("concurrentAdmissionPolicy"), IMMUTABLE))
    return errors


def validate_cohort(obj: dict) -> Errors:
    spec = _dict(obj.get("spec"))
    return _fair_sharing(spec) + _resource_groups(_list(spec.get("resourceGroups")), bool(spec.get("parentName")), True)


# -- ResourceFlavor --------------------------------------------------------------------------------------------------


def validate_resource_flavor(obj: dict) -> Errors:
    """ValidateResourceFlavor: node labels, node taints (key, value, unique by key and effect), toleration keys."""
    spec = _dict(obj.get("spec"))
    errors = _labels(spec.get("nodeLabels"), "spec.nodeLabels")
    seen: set[tuple] = set()
    for i, taint in enumerate(_list(spec.get("nodeTaints"))):
        taint = _dict(taint)
        path = f"spec.nodeTaints[{i}]"
        errors += _label_name(taint.get("key", ""), f"{path}.key")
        value = taint.get("value", "")
        if isinstance(value, str) and (len(value) > 63 or not LABEL_VALUE.match(value)):
            messages = (["must be no more than 63 characters"] if len(value) > 63 else []) + (
                [] if LABEL_VALUE.match(value) else [LABEL_VALUE_ERROR]
            )
            errors.append(invalid(f"{path}.value", value, ";".join(messages)))
        key = (taint.get("effect"), taint.get("key"))
        if key in seen:
            errors.append(duplicate(path, taint, "taints must be unique by key and effect pair"))
            continue
        seen.add(key)
    errors += _toleration_keys(spec.get("tolerations"), "spec.tolerations")
    return errors


def _toleration_keys(tolerations: object, path: str) -> Errors:
    errors: Errors = []
    for i, toleration in enumerate(_list(tolerations)):
        key = _dict(toleration).get("key")
        if key:
            errors += _label_name(key, f"{path}[{i}].key")
    return errors


# -- Workload --------------------------------------------------------------------------------------------------------


def _reserved(wl: dict | None) -> bool:
    return wl is not None and condition_true(wl, C.QUOTA_RESERVED)


def _elastic(wl: dict) -> bool:
    return _dict(_dict(wl.get("metadata")).get("annotations")).get(ELASTIC_JOB) == "true"


def _podsets(wl: dict) -> list[dict]:
    return [_dict(ps) for ps in _list(_dict(wl.get("spec")).get("podSets"))]


def _resource_list(resources: object, path: str) -> Errors:
    """validateResourceList: `pods` is Kueue's; quantities must not be negative."""
    errors: Errors = []
    for name, value in _dict(resources).items():
        if name == "pods":
            errors.append(invalid(f"{path}[{name}]", "pods", "the key is reserved for internal kueue use"))
        q = _quantity(value)
        if q is not None and q < 0:
            errors.append(invalid(f"{path}[{name}]", str(value), NEGATIVE))
    return errors


def _podset(ps: dict, path: str) -> Errors:
    template = _dict(ps.get("template"))
    meta = _dict(template.get("metadata"))
    errors = _labels(meta.get("labels"), f"{path}.template.metadata.labels")
    errors += _annotations(meta.get("annotations"), f"{path}.template.metadata.annotations")
    pod = _dict(template.get("spec"))
    for kind in ("initContainers", "containers"):
        for ci, c in enumerate(_list(pod.get(kind))):
            res = _dict(_dict(c).get("resources"))
            cpath = f"{path}.template.spec.{kind}[{ci}].resources"
            errors += _resource_list(res.get("requests"), f"{cpath}.requests")
            errors += _resource_list(res.get("limits"), f"{cpath}.limits")
    if isinstance(pod.get("resources"), dict):
        errors += _resource_list(pod["resources"].get("requests"), f"{path}.template.spec.resources.requests")
        errors += _resource_list(pod["resources"].get("limits"), f"{path}.template.spec.resources.limits")
    return errors


def _admission(wl: dict, old: dict | None) -> Errors:
    """validateAdmission, reached on the QuotaReserved condition."""
    admission = _dict(wl.get("status")).get("admission")
    if admission is None:
        if _reserved(old) and _dict(old.get("status") if old else None).get("admission") is None:
            return []  # already like this: let it converge and be removed
        return [required("status.admission", "must be set while the QuotaReserved condition is true")]
    names = {ps.get("name") for ps in _podsets(wl)}
    errors: Errors = []
    for i, psa in enumerate(_list(_dict(admission).get("podSetAssignments"))):
        psa = _dict(psa)
        path = f"status.admission.podSetAssignments[{i}]"
        if psa.get("name") not in names:
            errors.append(not_found(f"{path}.name", psa.get("name")))
        count = psa.get("count")
        if isinstance(count, int) and count > 0:
            for resource, value in _dict(psa.get("resourceUsage")).items():
                try:
                    amount = to_amount(resource, value)
                except QuantityError:
                    continue
                if amount % count:
                    errors.append(
                        invalid(f"{path}.resourceUsage[{resource}]", str(value), f"is not a multiple of {count}")
                    )
    return errors


def _reclaimable(wl: dict, old: dict | None) -> Errors:
    """validateReclaimablePods: a known podSet, at most its count (an elastic workload's unchanged count excepted)."""
    counts = {ps.get("name"): ps.get("count", 1) for ps in _podsets(wl)}
    names = [ps.get("name") for ps in _podsets(wl)]
    old_rps = _list(_dict(old.get("status")).get("reclaimablePods")) if old is not None else []
    errors: Errors = []
    for rp in _list(_dict(wl.get("status")).get("reclaimablePods")):
        rp = _dict(rp)
        name, count = rp.get("name"), rp.get("count", 0)
        path = f"status.reclaimablePods[{name}]"
        if name not in counts:
            errors.append(not_supported(f"{path}.name", name, [str(n) for n in names]))
        elif isinstance(count, int) and isinstance(counts[name], int) and count > counts[name]:
            stale = (
                old is not None
                and _elastic(wl)
                and any(_dict(o).get("name") == name and _dict(o).get("count", 0) == count for o in old_rps)
            )
            if not stale:
                errors.append(invalid(f"{path}.count", count, f"should be less or equal to {counts[name]}"))
    return errors


def _podset_updates(wl: dict) -> Errors:
    names = [ps.get("name") for ps in _podsets(wl)]
    errors: Errors = []
    for i, check in enumerate(_list(_dict(wl.get("status")).get("admissionChecks"))):
        for j, psu in enumerate(_list(_dict(check).get("podSetUpdates"))):
            psu = _dict(psu)
            path = f"status.admissionChecks[{i}].podSetUpdates[{j}]"
            if psu.get("name") not in names:
                errors.append(not_supported(f"{path}.name", psu.get("name"), sorted(str(n) for n in names)))
            errors += _toleration_keys(psu.get("tolerations"), f"{path}.tolerations")
            errors += _annotations(psu.get("annotations"), f"{path}.annotations")
            errors += _labels(psu.get("nodeSelector"), f"{path}.nodeSelector")
            errors += _labels(psu.get("labels"), f"{path}.labels")
    return errors


_GATE_PATH = f"metadata.annotations[{ADMISSION_GATED_BY}]"
_PATH_CHARS = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


def _gates(value: str) -> list[str]:
    return [g.strip() for g in value.split(",")]


def _gated_by_format(value: str) -> Errors:
    """validateAdmissionGatedByAnnotationFormat: distinct domain-prefixed paths of at most 63 characters."""
    if not value:
        return []
    errors: Errors = []
    seen: set[str] = set()
    for gate in _gates(value):
        if not gate:
            errors.append(invalid(_GATE_PATH, value, "cannot contain empty gate names"))
            continue
        if gate in seen:
            errors.append(invalid(_GATE_PATH, value, f"duplicate gate name: {gate}"))
            continue
        seen.add(gate)
        host, slash, rest = gate.partition("/")
        if not slash:
            errors.append(invalid(_GATE_PATH, gate, 'must be a domain-prefixed path (such as "acme.io/foo")'))
        else:
            if len(host) > 253 or not DNS1123_SUBDOMAIN.match(host):
                errors.append(invalid(_GATE_PATH, host, SUBDOMAIN_ERROR))
            if not _PATH_CHARS.match(rest):
                errors.append(invalid(_GATE_PATH, rest, "Invalid path"))
        if len(gate) > MAX_GATE_NAME:
            errors.append((_GATE_PATH, f"Too long: may not be more than {MAX_GATE_NAME} bytes", "FieldValueTooLong"))
    return errors


def _annotation(wl: dict | None, key: str) -> str | None:
    return None if wl is None else _dict(_dict(wl.get("metadata")).get("annotations")).get(key)


def validate_workload(wl: dict, old: dict | None) -> Errors:
    """ValidateWorkload (create, and the first half of an update)."""
    errors: Errors = []
    podsets = _podsets(wl)
    for i, ps in enumerate(podsets):
        errors += _podset(ps, f"spec.podSets[{i}]")
    variable = sum(1 for ps in podsets if ps.get("minCount") is not None)
    if variable > 1:
        errors.append(invalid("spec.podSets", variable, "at most one podSet can use minCount"))
    if variable and _elastic(wl):
        errors.append(invalid("spec.podSets", variable, "partial admission and elastic job cannot be used together"))
    if _reserved(wl):
        errors += _admission(wl, old)
    errors += _reclaimable(wl, old)
    errors += _podset_updates(wl)
    if old is None:
        errors += _gated_by_format(_annotation(wl, ADMISSION_GATED_BY) or "")
    return errors


def validate_workload_update(wl: dict, old: dict) -> Errors:
    errors = validate_workload(wl, old)
    if _reserved(old):
        errors += _immutable_podsets(_podsets(wl), _podsets(old))
    if _reserved(wl) and _reserved(old):
        errors += _reclaimable_update(wl, old)
    errors += _admission_update(_dict(wl.get("status")).get("admission"), _dict(old.get("status")).get("admission"))
    errors += _immutable_podset_updates(wl, old)
    errors += _cluster_name_update(wl, old)
    errors += _gated_by_update(_annotation(old, ADMISSION_GATED_BY), _annotation(wl, ADMISSION_GATED_BY))
    return errors


def _immutable_podsets(new: list[dict], old: list[dict]) -> Errors:
    """validateImmutablePodSets: everything but a smaller count (ElasticJobsViaWorkloadSlices) is immutable; the
    index is a path segment of its own (`spec.podSets.1`), as Kueue writes it."""
    if len(new) != len(old):
        return [invalid("spec.podSets", new, IMMUTABLE)]
    errors: Errors = []
    for i, (n, o) in enumerate(zip(new, old, strict=True)):
        compared = dict(n)
        if compared.get("count", 1) < o.get("count", 1):
            compared["count"] = o.get("count", 1)
        if _semantic(compared) != _semantic(o):
            errors.append(invalid(f"spec.podSets.{i}", n, IMMUTABLE))
    return errors


def _semantic(value: object) -> object:
    """apiequality.Semantic: empty and missing lists and maps are equal."""
    if isinstance(value, dict):
        return {k: _semantic(v) for k, v in value.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _reclaimable_update(wl: dict, old: dict) -> Errors:
    """validateReclaimablePodsUpdate: counts never go down nor disappear while quota is reserved, unless the podSet
    of an elastic workload was scaled down below its admitted count."""
    new_rps = [_dict(rp) for rp in _list(_dict(wl.get("status")).get("reclaimablePods"))]
    old_rps = [_dict(rp) for rp in _list(_dict(old.get("status")).get("reclaimablePods"))]
    as_map = lambda rps: {rp.get("name"): rp.get("count", 0) for rp in rps}  # noqa: E731
    if as_map(new_rps) == as_map(old_rps) or not old_rps:
        return []
    previous = as_map(old_rps)
    scaled_down: set = set()
    admission = _dict(wl.get("status")).get("admission")
    if _elastic(wl) and isinstance(admission, dict):
        sizes = {ps.get("name"): ps.get("count", 1) for ps in _podsets(wl)}
        for psa in _list(admission.get("podSetAssignments")):
            psa = _dict(psa)
            if isinstance(psa.get("count"), int) and psa["count"] > sizes.get(psa.get("name"), 0):
                scaled_down.add(psa.get("name"))
    errors: Errors = []
    for rp in new_rps:
        name, count = rp.get("name"), rp.get("count", 0)
        if name in previous and count < previous[name] and name not in scaled_down:
            errors.append(
                invalid(f"status.reclaimablePods[{name}].count", count, f"cannot be less than {previous[name]}")
            )
    names = {rp.get("name") for rp in new_rps}
    for name in previous:
        if name not in names and name not in scaled_down:
            errors.append(required(f"status.reclaimablePods[{name}]", "cannot be removed"))
    return errors


def _admission_update(new: object, old: object) -> Errors:
    """validateAdmissionUpdate: set or unset, never changed, but for topology assignments (TAS is on in v0.20)."""
    if not isinstance(new, dict) or not isinstance(old, dict):
        return []
    new_psa, old_psa = _list(new.get("podSetAssignments")), _list(old.get("podSetAssignments"))
    if len(new_psa) == len(old_psa):
        tas = ("topologyAssignment", "delayedTopologyRequest")
        old = {
            **old,
            "podSetAssignments": [
                {
                    **{k: v for k, v in _dict(o).items() if k not in tas},
                    **{k: _dict(n)[k] for k in tas if k in _dict(n)},
                }
                for n, o in zip(new_psa, old_psa, strict=True)
            ],
        }
    if _semantic(new) != _semantic(old):
        return [invalid("status.admission", new, IMMUTABLE)]
    return []


def _immutable_podset_updates(wl: dict, old: dict) -> Errors:
    """validateImmutablePodSetUpdates: a check that stays Ready keeps its podSetUpdates."""
    new_checks = {_dict(c).get("name"): _dict(c) for c in _list(_dict(wl.get("status")).get("admissionChecks"))}
    errors: Errors = []
    for i, check in enumerate(_list(_dict(old.get("status")).get("admissionChecks"))):
        check = _dict(check)
        new = new_checks.get(check.get("name"))
        if new is None or check.get("state") != "Ready" or new.get("state") != "Ready":
            continue
        if _semantic(new.get("podSetUpdates") or []) != _semantic(check.get("podSetUpdates") or []):
            errors.append(invalid(f"status.admissionChecks[{i}].podSetUpdates", new.get("podSetUpdates"), IMMUTABLE))
    return errors


def _cluster_name_update(wl: dict, old: dict) -> Errors:
    if _annotation(wl, SLICE_REPLACEMENT_FOR) is not None:
        return []  # an elastic job's replacement slice
    status, old_status = _dict(wl.get("status")), _dict(old.get("status"))
    name = status.get("clusterName")
    if (
        old_status.get("clusterName") is None
        and name is not None
        and name not in _list(old_status.get("nominatedClusterNames"))
    ):
        message = "when setting clusterName it must be one of the nominatedClusterNames"
        return [invalid("status.clusterName", name, message)]
    return []


def _gated_by_update(old: str | None, new: str | None) -> Errors:
    """ValidateAdmissionGatedByAnnotationOnUpdate: gates may only be removed."""
    errors: Errors = []
    if not old and new:
        errors.append(forbidden(_GATE_PATH, "cannot add admission gate after creation"))
    if old and new and any(g not in _gates(old) for g in _gates(new)):
        errors.append(forbidden(_GATE_PATH, "can only remove gates, not add new ones"))
    return errors + _gated_by_format(new or "")


# -- the webhooks ----------------------------------------------------------------------------------------------------


class KueueValidation:
    """Kueue's webhooks for its own kinds: what the CRD schema cannot express, and the ClusterQueue and
    ResourceFlavor defaulters (the resource-in-use finalizer, in the create's answer already)."""

    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        if resource in ("resourceflavors", "clusterqueues") and operation == "CREATE":
            finalizers = obj.setdefault("metadata", {}).setdefault("finalizers", [])
            if C.RESOURCE_IN_USE_FINALIZER not in finalizers:
                finalizers.append(C.RESOURCE_IN_USE_FINALIZER)
        return obj

    @staticmethod
    def webhook_name(resource: str) -> str:
        """The kubebuilder:webhook names; LocalQueue has no validating webhook (its CRD rule refuses a changed
        clusterQueue first), so its check below answers as the API server's own validation."""
        return WEBHOOK_NAMES.get(resource, "")

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource == "clusterqueues":
            return validate_cluster_queue(obj, old if operation == "UPDATE" else None)
        if resource == "cohorts":
            return validate_cohort(obj)
        if resource == "resourceflavors":
            return validate_resource_flavor(obj)
        if resource == "localqueues" and operation == "UPDATE" and old is not None:
            old_cq = (old.get("spec") or {}).get("clusterQueue")
            if (obj.get("spec") or {}).get("clusterQueue") != old_cq:  # the CRD's rule says it first
                return [invalid("spec.clusterQueue", (obj.get("spec") or {}).get("clusterQueue"), IMMUTABLE)]
        if resource in ("workloads", "workloads/status"):
            if operation == "UPDATE" and old is not None:
                return validate_workload_update(obj, old)
            return validate_workload(obj, None)
        return []


WEBHOOK_NAMES = {
    "clusterqueues": "vclusterqueue.kb.io",
    "cohorts": "vcohort.kb.io",
    "resourceflavors": "vresourceflavor.kb.io",
    "workloads": "vworkload.kb.io",
    "workloads/status": "vworkload.kb.io",
}


def kueue_webhooks(config: KueueConfig) -> list:
    return [JobWebhook(), KueueValidation()]
