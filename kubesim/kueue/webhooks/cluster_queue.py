"""The ClusterQueue webhook (upstream pkg/webhooks/clusterqueue_webhook.go): the defaulter adds the resource-in-use
finalizer; validation covers resource groups and quotas, the namespace selector, preemption and flavor fungibility
combinations, Fair Sharing weight, totals and admission-check flavors. Refusals answer under vclusterqueue.kb.io.
The resource-group and Fair Sharing rules are shared with Cohorts, as upstream."""

from __future__ import annotations

from decimal import Decimal

from kubesim.kernel.metadata import LABEL_VALUE, LABEL_VALUE_ERROR, qualified_name_errors
from kubesim.kueue.webhooks.common import (
    IMMUTABLE,
    NEGATIVE,
    Errors,
    add_in_use_finalizer,
    as_dict,
    as_list,
    decode_quantities,
    duplicate,
    forbidden,
    invalid,
    label_errors,
    label_name_errors,
    not_supported,
    quantity_value,
    required,
    resource_group_quantities,
)


def validate_resource_groups(groups: list, has_parent: bool, is_cohort: bool) -> Errors:
    """validateResourceGroups: covered resource names (label keys, each in one group only), flavor names (each in
    one group only), each flavor's resources in coveredResources' order, quotas >= 0, limits only with a parent,
    and (ClusterQueues) lendingLimit <= nominalQuota."""
    errors: Errors = []
    seen_resources: set[str] = set()
    seen_flavors: set[object] = set()
    parent_word = "parent" if is_cohort else "cohort"
    for i, rg in enumerate(groups):
        rg = as_dict(rg)
        base = f"spec.resourceGroups[{i}]"
        covered = [r for r in as_list(rg.get("coveredResources")) if isinstance(r, str)]
        for j, name in enumerate(covered):
            path = f"{base}.coveredResources[{j}]"
            errors += [invalid(path, name, m) for m in qualified_name_errors(name)]
            if name in seen_resources:
                errors.append(duplicate(path, name))
            seen_resources.add(name)
        for j, fq in enumerate(as_list(rg.get("flavors"))):
            fq = as_dict(fq)
            fpath = f"{base}.flavors[{j}]"
            for k, r in enumerate(as_list(fq.get("resources"))[: len(covered)]):
                errors += _resource_quota(
                    as_dict(r), covered[k], f"{fpath}.resources[{k}]", has_parent, is_cohort, parent_word
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
    nominal = quantity_value(r.get("nominalQuota"))
    if nominal is not None and nominal < 0:
        errors.append(invalid(f"{path}.nominalQuota", str(r["nominalQuota"]), NEGATIVE))
    limit_message = f"must be nil when {parent_word} is empty"
    if r.get("borrowingLimit") is not None:
        raw = str(r["borrowingLimit"])
        if not has_parent:
            errors.append(invalid(f"{path}.borrowingLimit", raw, limit_message))
        value = quantity_value(r["borrowingLimit"])
        if value is not None and value < 0:
            errors.append(invalid(f"{path}.borrowingLimit", raw, NEGATIVE))
    if r.get("lendingLimit") is not None:
        raw = str(r["lendingLimit"])
        value = quantity_value(r["lendingLimit"])
        if value is not None and value < 0:
            errors.append(invalid(f"{path}.lendingLimit", raw, NEGATIVE))
        if not has_parent:
            errors.append(invalid(f"{path}.lendingLimit", raw, limit_message))
        if not is_cohort and value is not None and nominal is not None and value > nominal:
            errors.append(invalid(f"{path}.lendingLimit", raw, "must be less than or equal to the nominalQuota"))
    return errors


def validate_fair_sharing(spec: dict) -> Errors:
    """validateFairSharing: the weight is reported on spec.fairSharing."""
    weight = as_dict(spec.get("fairSharing")).get("weight")
    value = None if weight is None else quantity_value(weight)
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
    errors = label_errors(selector.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in enumerate(as_list(selector.get("matchExpressions"))):
        expr = as_dict(expr)
        epath = f"{path}.matchExpressions[{i}]"
        operator, values = expr.get("operator"), as_list(expr.get("values"))
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
        errors += label_name_errors(expr.get("key"), f"{epath}.key")
        for j, value in enumerate(values):
            if isinstance(value, str) and (len(value) > 63 or not LABEL_VALUE.match(value)):
                message = "must be no more than 63 characters" if len(value) > 63 else LABEL_VALUE_ERROR
                errors.append(invalid(f"{epath}.values[{j}]", value, message))
    return errors


def _all_flavors(spec: dict) -> list[str]:
    return [
        fq["name"]
        for rg in as_list(spec.get("resourceGroups"))
        for fq in as_list(as_dict(rg).get("flavors"))
        if isinstance(fq, dict) and isinstance(fq.get("name"), str)
    ]


def _on_flavors(spec: dict, old_spec: dict | None) -> Errors:
    """validateAdmissionCheckOnFlavors: onFlavors name flavors of the queue. With RejectUpdatesToCQWithInvalidOnFlavors
    off (v0.20's default), an update that keeps the flavors keeps a rule whose onFlavors it does not change."""
    rules = as_list(as_dict(spec.get("admissionChecksStrategy")).get("admissionChecks"))
    flavors = _all_flavors(spec)
    kept: dict[str, set] = {}
    old_strategy = None if old_spec is None else old_spec.get("admissionChecksStrategy")
    if old_spec is not None and old_strategy is not None and set(_all_flavors(old_spec)) == set(flavors):
        for rule in as_list(as_dict(old_strategy).get("admissionChecks")):
            rule = as_dict(rule)
            kept[rule.get("name", "")] = set(as_list(rule.get("onFlavors")))
    errors: Errors = []
    for i, rule in enumerate(rules):
        rule = as_dict(rule)
        on = as_list(rule.get("onFlavors"))
        if rule.get("name", "") in kept and kept[rule.get("name", "")] == set(on):
            continue
        for j, flavor in enumerate(on):
            if flavor not in flavors:
                path = f"spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]"
                errors.append(not_supported(path, flavor, flavors))
    return errors


def _totals(groups: list) -> Errors:
    """validateTotalFlavors, validateTotalCoveredResources, validateFlavorResourceCombinations."""
    groups = [as_dict(rg) for rg in groups]
    errors: Errors = []
    flavors = sum(len(as_list(rg.get("flavors"))) for rg in groups)
    if flavors > 256:
        message = f"total number of flavors across all resourceGroups must be ≤ 256, got {flavors}"
        errors.append(invalid("spec.resourceGroups", flavors, message))
    covered = sum(len(as_list(rg.get("coveredResources"))) for rg in groups)
    if covered > 256:
        message = f"total number of covered resources across all resourceGroups must be ≤ 256, got {covered}"
        errors.append(invalid("spec.resourceGroups", covered, message))
    for i, rg in enumerate(groups):
        combos = sum(len(as_list(as_dict(fq).get("resources"))) for fq in as_list(rg.get("flavors")))
        if combos > 512:
            message = f"number of flavor-resource combinations in a resourceGroup must be ≤ 512, got {combos}"
            errors.append(invalid(f"spec.resourceGroups[{i}]", combos, message))
    return errors


def validate_cluster_queue(obj: dict, old: dict | None) -> Errors:
    """ValidateClusterQueue / ValidateClusterQueueUpdate (ConcurrentAdmission off: its policy is only immutable)."""
    spec = as_dict(obj.get("spec"))
    groups = as_list(spec.get("resourceGroups"))
    errors = validate_resource_groups(groups, bool(spec.get("cohortName")), False)
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
    errors += validate_fair_sharing(spec)
    errors += _totals(groups)
    old_spec = None if old is None else as_dict(old.get("spec"))
    errors += _on_flavors(spec, old_spec)
    if old_spec is not None and spec.get("concurrentAdmissionPolicy") != old_spec.get("concurrentAdmissionPolicy"):
        errors.append(invalid("spec.concurrentAdmissionPolicy", spec.get("concurrentAdmissionPolicy"), IMMUTABLE))
    return errors


class ClusterQueueWebhook:
    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        if resource == "clusterqueues" and operation == "CREATE":  # mclusterqueue.kb.io serves creates only
            decode_quantities("mclusterqueue.kb.io", resource_group_quantities(as_dict(obj.get("spec"))))
            add_in_use_finalizer(obj)
        return obj

    @staticmethod
    def webhook_name(resource: str) -> str:
        return "vclusterqueue.kb.io" if resource == "clusterqueues" else ""

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource != "clusterqueues":
            return []
        decode_quantities("vclusterqueue.kb.io", resource_group_quantities(as_dict(obj.get("spec"))))
        return validate_cluster_queue(obj, old if operation == "UPDATE" else None)
