"""The Workload webhook (upstream pkg/webhooks/workload_webhook.go): pod sets and their resources, the admission
while quota is reserved, reclaimable pods, admission checks' pod set updates, the admission-gated-by annotation, and
what may not change on update. Refusals answer under vworkload.kb.io (status writes included)."""

from __future__ import annotations

from collections.abc import Iterator

from kubesim.kernel.quantity import QuantityError, to_amount
from kubesim.kueue import constants as C
from kubesim.kueue.scheduler.model import condition_true
from kubesim.kueue.webhooks.common import (
    ADMISSION_GATED_BY,
    ELASTIC_JOB,
    IMMUTABLE,
    NEGATIVE,
    Errors,
    annotation_errors,
    as_dict,
    as_list,
    decode_quantities,
    gated_by_format_errors,
    gated_by_update_errors,
    invalid,
    label_errors,
    not_found,
    not_supported,
    pod_spec_quantities,
    quantity_value,
    required,
    toleration_key_errors,
)

SLICE_REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"


def _reserved(wl: dict | None) -> bool:
    return wl is not None and condition_true(wl, C.QUOTA_RESERVED)


def _elastic(wl: dict) -> bool:
    return as_dict(as_dict(wl.get("metadata")).get("annotations")).get(ELASTIC_JOB) == "true"


def _podsets(wl: dict) -> list[dict]:
    return [as_dict(ps) for ps in as_list(as_dict(wl.get("spec")).get("podSets"))]


def _resource_list(resources: object, path: str) -> Errors:
    """validateResourceList: `pods` is Kueue's; quantities must not be negative."""
    errors: Errors = []
    for name, value in as_dict(resources).items():
        if name == "pods":
            errors.append(invalid(f"{path}[{name}]", "pods", "the key is reserved for internal kueue use"))
        q = quantity_value(value)
        if q is not None and q < 0:
            errors.append(invalid(f"{path}[{name}]", str(value), NEGATIVE))
    return errors


def _podset(ps: dict, path: str) -> Errors:
    template = as_dict(ps.get("template"))
    meta = as_dict(template.get("metadata"))
    errors = label_errors(meta.get("labels"), f"{path}.template.metadata.labels")
    errors += annotation_errors(meta.get("annotations"), f"{path}.template.metadata.annotations")
    pod = as_dict(template.get("spec"))
    for kind in ("initContainers", "containers"):
        for ci, c in enumerate(as_list(pod.get(kind))):
            res = as_dict(as_dict(c).get("resources"))
            cpath = f"{path}.template.spec.{kind}[{ci}].resources"
            errors += _resource_list(res.get("requests"), f"{cpath}.requests")
            errors += _resource_list(res.get("limits"), f"{cpath}.limits")
    if isinstance(pod.get("resources"), dict):
        errors += _resource_list(pod["resources"].get("requests"), f"{path}.template.spec.resources.requests")
        errors += _resource_list(pod["resources"].get("limits"), f"{path}.template.spec.resources.limits")
    return errors


def _admission(wl: dict, old: dict | None) -> Errors:
    """validateAdmission, reached on the QuotaReserved condition."""
    admission = as_dict(wl.get("status")).get("admission")
    if admission is None:
        if _reserved(old) and as_dict(old.get("status") if old else None).get("admission") is None:
            return []  # already like this: let it converge and be removed
        return [required("status.admission", "must be set while the QuotaReserved condition is true")]
    names = {ps.get("name") for ps in _podsets(wl)}
    errors: Errors = []
    for i, psa in enumerate(as_list(as_dict(admission).get("podSetAssignments"))):
        psa = as_dict(psa)
        path = f"status.admission.podSetAssignments[{i}]"
        if psa.get("name") not in names:
            errors.append(not_found(f"{path}.name", psa.get("name")))
        count = psa.get("count")
        if isinstance(count, int) and count > 0:
            for resource, value in as_dict(psa.get("resourceUsage")).items():
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
    old_rps = as_list(as_dict(old.get("status")).get("reclaimablePods")) if old is not None else []
    errors: Errors = []
    for rp in as_list(as_dict(wl.get("status")).get("reclaimablePods")):
        rp = as_dict(rp)
        name, count = rp.get("name"), rp.get("count", 0)
        path = f"status.reclaimablePods[{name}]"
        if name not in counts:
            errors.append(not_supported(f"{path}.name", name, [str(n) for n in names]))
        elif isinstance(count, int) and isinstance(counts[name], int) and count > counts[name]:
            stale = (
                old is not None
                and _elastic(wl)
                and any(as_dict(o).get("name") == name and as_dict(o).get("count", 0) == count for o in old_rps)
            )
            if not stale:
                errors.append(invalid(f"{path}.count", count, f"should be less or equal to {counts[name]}"))
    return errors


def _podset_updates(wl: dict) -> Errors:
    names = [ps.get("name") for ps in _podsets(wl)]
    errors: Errors = []
    for i, check in enumerate(as_list(as_dict(wl.get("status")).get("admissionChecks"))):
        for j, psu in enumerate(as_list(as_dict(check).get("podSetUpdates"))):
            psu = as_dict(psu)
            path = f"status.admissionChecks[{i}].podSetUpdates[{j}]"
            if psu.get("name") not in names:
                errors.append(not_supported(f"{path}.name", psu.get("name"), sorted(str(n) for n in names)))
            errors += toleration_key_errors(psu.get("tolerations"), f"{path}.tolerations")
            errors += annotation_errors(psu.get("annotations"), f"{path}.annotations")
            errors += label_errors(psu.get("nodeSelector"), f"{path}.nodeSelector")
            errors += label_errors(psu.get("labels"), f"{path}.labels")
    return errors


def _annotation(wl: dict | None, key: str) -> str | None:
    return None if wl is None else as_dict(as_dict(wl.get("metadata")).get("annotations")).get(key)


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
        errors += gated_by_format_errors(_annotation(wl, ADMISSION_GATED_BY) or "")
    return errors


def validate_workload_update(wl: dict, old: dict) -> Errors:
    errors = validate_workload(wl, old)
    if _reserved(old):
        errors += _immutable_podsets(_podsets(wl), _podsets(old))
    if _reserved(wl) and _reserved(old):
        errors += _reclaimable_update(wl, old)
    errors += _admission_update(as_dict(wl.get("status")).get("admission"), as_dict(old.get("status")).get("admission"))
    errors += _immutable_podset_updates(wl, old)
    errors += _cluster_name_update(wl, old)
    errors += gated_by_update_errors(_annotation(old, ADMISSION_GATED_BY), _annotation(wl, ADMISSION_GATED_BY))
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
    new_rps = [as_dict(rp) for rp in as_list(as_dict(wl.get("status")).get("reclaimablePods"))]
    old_rps = [as_dict(rp) for rp in as_list(as_dict(old.get("status")).get("reclaimablePods"))]
    as_map = lambda rps: {rp.get("name"): rp.get("count", 0) for rp in rps}  # noqa: E731
    if as_map(new_rps) == as_map(old_rps) or not old_rps:
        return []
    previous = as_map(old_rps)
    scaled_down: set = set()
    admission = as_dict(wl.get("status")).get("admission")
    if _elastic(wl) and isinstance(admission, dict):
        sizes = {ps.get("name"): ps.get("count", 1) for ps in _podsets(wl)}
        for psa in as_list(admission.get("podSetAssignments")):
            psa = as_dict(psa)
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
    new_psa, old_psa = as_list(new.get("podSetAssignments")), as_list(old.get("podSetAssignments"))
    if len(new_psa) == len(old_psa):
        tas = ("topologyAssignment", "delayedTopologyRequest")
        old = {
            **old,
            "podSetAssignments": [
                {
                    **{k: v for k, v in as_dict(o).items() if k not in tas},
                    **{k: as_dict(n)[k] for k in tas if k in as_dict(n)},
                }
                for n, o in zip(new_psa, old_psa, strict=True)
            ],
        }
    if _semantic(new) != _semantic(old):
        return [invalid("status.admission", new, IMMUTABLE)]
    return []


def _immutable_podset_updates(wl: dict, old: dict) -> Errors:
    """validateImmutablePodSetUpdates: a check that stays Ready keeps its podSetUpdates."""
    new_checks = {as_dict(c).get("name"): as_dict(c) for c in as_list(as_dict(wl.get("status")).get("admissionChecks"))}
    errors: Errors = []
    for i, check in enumerate(as_list(as_dict(old.get("status")).get("admissionChecks"))):
        check = as_dict(check)
        new = new_checks.get(check.get("name"))
        if new is None or check.get("state") != "Ready" or new.get("state") != "Ready":
            continue
        if _semantic(new.get("podSetUpdates") or []) != _semantic(check.get("podSetUpdates") or []):
            errors.append(invalid(f"status.admissionChecks[{i}].podSetUpdates", new.get("podSetUpdates"), IMMUTABLE))
    return errors


def _cluster_name_update(wl: dict, old: dict) -> Errors:
    if _annotation(wl, SLICE_REPLACEMENT_FOR) is not None:
        return []  # an elastic job's replacement slice
    status, old_status = as_dict(wl.get("status")), as_dict(old.get("status"))
    name = status.get("clusterName")
    if (
        old_status.get("clusterName") is None
        and name is not None
        and name not in as_list(old_status.get("nominatedClusterNames"))
    ):
        message = "when setting clusterName it must be one of the nominatedClusterNames"
        return [invalid("status.clusterName", name, message)]
    return []


def _quantities(wl: dict) -> Iterator[object]:
    """The Workload's quantities its Go type decodes: pod templates, resource requests, admitted usage."""
    for podset in as_list(as_dict(wl.get("spec")).get("podSets")):
        yield from pod_spec_quantities(as_dict(as_dict(podset).get("template")).get("spec"))
    status = as_dict(wl.get("status"))
    for request in as_list(status.get("resourceRequests")):
        yield from as_dict(as_dict(request).get("resources")).values()
    for psa in as_list(as_dict(status.get("admission")).get("podSetAssignments")):
        yield from as_dict(as_dict(psa).get("resourceUsage")).values()


class WorkloadWebhook:
    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        if resource == "workloads" and operation == "CREATE":  # mworkload.kb.io serves creates only
            decode_quantities("mworkload.kb.io", _quantities(obj))
        return obj

    @staticmethod
    def webhook_name(resource: str) -> str:
        return "vworkload.kb.io" if resource in ("workloads", "workloads/status") else ""

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource not in ("workloads", "workloads/status"):
            return []
        decode_quantities("vworkload.kb.io", _quantities(obj))
        if operation == "UPDATE" and old is not None:
            return validate_workload_update(obj, old)
        return validate_workload(obj, None)
