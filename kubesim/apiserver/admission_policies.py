"""MutatingAdmissionPolicies (admissionregistration.k8s.io/v1beta1), as kube-apiserver's admission plugin runs them:
every binding whose policy's matchConstraints and whose own matchResources select the request (operation, resource,
namespace labels, object labels), whose matchConditions all hold, applies the policy's mutations in order.

kubesim honours the ApplyConfiguration patch type with its CEL subset (kubesim.apiserver.validation.cel): the
expression's object is merged into the request's object as server-side apply merges (mappings key by key, lists and
values replaced). The variables `object`, `oldObject`, `request` (operation, namespace, name, userInfo) and
`variables` are bound; `params` is not (a policy with a paramKind is stored, never applied). A policy that fails
(an expression error, a JSONPatch mutation kubesim cannot run) denies the request under failurePolicy Fail, is
skipped under Ignore.
"""

from __future__ import annotations

from typing import Any

from kubesim.apiserver.auth.rbac import User
from kubesim.apiserver.errors import APIError
from kubesim.apiserver.registry.resources import Resource
from kubesim.apiserver.storage.store import ObjectStore
from kubesim.apiserver.validation import cel
from kubesim.kernel.selectors import selector_matches


class PolicyFailure(Exception):
    """A policy that could not be applied to this request."""


def mutate(
    store: ObjectStore, res: Resource, namespace: str | None, obj: dict, old: dict | None, requester: User
) -> dict:
    """`obj` after every matching binding's policy; raises 403 for a failing policy whose failurePolicy is Fail."""
    operation = "UPDATE" if old is not None else "CREATE"
    namespace_labels = _namespace_labels(store, res, namespace, obj)
    for binding in store.list("mutatingadmissionpolicybindings", copy=False):
        spec = binding.get("spec") or {}
        policy = store.get("mutatingadmissionpolicies", None, spec.get("policyName", ""), copy=False)
        if policy is None:
            continue
        policy_spec = policy.get("spec") or {}
        constraints, narrowed = policy_spec.get("matchConstraints") or {}, spec.get("matchResources") or {}
        if not (
            _selects(constraints, res, operation, namespace_labels, obj, old)
            and _selects(narrowed, res, operation, namespace_labels, obj, old, every_resource=True)
        ):
            continue
        try:
            obj = _apply(policy_spec, obj, old, _request(operation, res, namespace, obj, requester))
        except PolicyFailure as failure:
            if policy_spec.get("failurePolicy", "Fail") == "Fail":
                raise APIError(
                    403,
                    f"policy '{policy['metadata']['name']}' with binding '{binding['metadata']['name']}' denied "
                    f"request: {failure}",
                    "Forbidden",
                ) from failure
    return obj


def expressions(policy: dict) -> list[tuple[str, str]]:
    """(field path, CEL source) of every expression of a policy, for validation on create and update."""
    spec = policy.get("spec") or {}
    found = []
    for list_name in ("matchConditions", "variables"):
        for index, entry in enumerate(spec.get(list_name) or []):
            if isinstance(entry, dict):
                found.append((f"spec.{list_name}[{index}].expression", str(entry.get("expression", ""))))
    for index, mutation in enumerate(spec.get("mutations") or []):
        for kind in ("applyConfiguration", "jsonPatch"):
            if isinstance(mutation, dict) and isinstance(mutation.get(kind), dict):
                found.append((f"spec.mutations[{index}].{kind}.expression", str(mutation[kind].get("expression", ""))))
    return found


def _namespace_labels(store: ObjectStore, res: Resource, namespace: str | None, obj: dict) -> dict | None:
    """The labels a namespaceSelector is matched against: the object's own for a Namespace, None for another
    cluster-scoped object (never skipped by a namespaceSelector)."""
    if res.plural == "namespaces":
        return (obj.get("metadata") or {}).get("labels") or {}
    if not res.namespaced:
        return None
    ns = store.get("namespaces", None, namespace or "", copy=False) or {}
    return (ns.get("metadata") or {}).get("labels") or {}


def _rule_matches(rule: dict, res: Resource, operation: str) -> bool:
    def has(values: list | None, value: str) -> bool:
        return bool(values) and ("*" in values or value in values)  # type: ignore[operator]

    scope = rule.get("scope", "*")
    return (
        has(rule.get("operations"), operation)
        and has(rule.get("apiGroups"), res.group)
        and has(rule.get("apiVersions"), res.version)
        and has(rule.get("resources"), res.plural)
        and (scope == "*" or scope == ("Namespaced" if res.namespaced else "Cluster"))
    )


def _selects(
    match: dict,
    res: Resource,
    operation: str,
    namespace_labels: dict | None,
    obj: dict,
    old: dict | None,
    *,
    every_resource: bool = False,
) -> bool:
    """MatchResources: an including rule and no excluding one, the namespace and object selectors. A binding's
    (`every_resource`) without resourceRules narrows nothing the policy matches."""
    rules = match.get("resourceRules") or []
    if not (every_resource and not rules) and not any(_rule_matches(rule, res, operation) for rule in rules):
        return False
    if any(_rule_matches(rule, res, operation) for rule in match.get("excludeResourceRules") or []):
        return False
    if namespace_labels is not None and not selector_matches(match.get("namespaceSelector") or {}, namespace_labels):
        return False
    object_selector = match.get("objectSelector") or {}
    return any(
        selector_matches(object_selector, (candidate.get("metadata") or {}).get("labels") or {})
        for candidate in (obj, old)
        if candidate is not None
    )


def _request(operation: str, res: Resource, namespace: str | None, obj: dict, requester: User) -> dict:
    return {
        "operation": operation,
        "namespace": namespace or "",
        "name": (obj.get("metadata") or {}).get("name", ""),
        "kind": {"group": res.group, "version": res.version, "kind": res.kind},
        "resource": {"group": res.group, "version": res.version, "resource": res.plural},
        "userInfo": {"username": requester.name, "groups": list(requester.groups)},
    }


def _evaluate(source: str, env: dict) -> Any:
    try:
        return cel.evaluate(cel.compile_rule(source), env)
    except cel.CELError as error:
        raise PolicyFailure(f"expression {source!r}: {error}") from error


def _apply(spec: dict, obj: dict, old: dict | None, request: dict) -> dict:
    env: dict[str, Any] = {"object": obj, "oldObject": old, "request": request, "variables": {}}
    for condition in spec.get("matchConditions") or []:
        if _evaluate(condition.get("expression", ""), env) is not True:
            return obj  # a false condition skips the policy
    for variable in spec.get("variables") or []:
        env["variables"][variable.get("name", "")] = _evaluate(variable.get("expression", ""), env)
    for mutation in spec.get("mutations") or []:
        if mutation.get("patchType") != "ApplyConfiguration":
            raise PolicyFailure(f"kubesim applies ApplyConfiguration mutations only, not {mutation.get('patchType')}")
        applied = _evaluate((mutation.get("applyConfiguration") or {}).get("expression", ""), env)
        if not isinstance(applied, dict):
            raise PolicyFailure("an apply configuration must evaluate to an object")
        obj = _merge(obj, applied)
        env["object"] = obj
    return obj


def _merge(base: Any, applied: Any) -> Any:
    """Server-side apply's merge of an apply configuration: mappings merged key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(applied, dict):
        return {**base, **{key: _merge(base.get(key), value) for key, value in applied.items()}}
    return applied
