"""Policies (docs/architecture.md, Policies): who sets them, one per scope, and the rule that a scope only narrows
what the scope above allows, checked from both sides (a project policy allowing more than its department's, a
department policy below what one of its projects' already asks for). Every refusal is reported at once, by field."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from apps.accounts import access
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.services import model_update, version_check, version_check_locked
from apps.org.models import Department, Policy, PriorityClass
from apps.org.policies import contradiction_errors, merge
from apps.org.selectors import policies_above

from .common import DENIED, _field_errors

POLICY_FIELDS = {"department", "project", "required_labels", "max_gpus_per_workload", "max_runtime_seconds",
                 "default_runtime_seconds", "allowed_images", "allowed_priority_classes", "default_priority_class",
                 "max_notebook_idle_minutes", "pod_security"}
POLICY_CHANGEABLE = POLICY_FIELDS - {"department", "project"}


def _require_manager(actor: Actor, policy: Policy) -> None:
    if not access.can_manage_policy(actor, policy):
        raise PermissionDenied(DENIED)


def _above(policy: Policy) -> list[Policy]:
    """The saved policies of the scopes above `policy`'s, widest first."""
    if policy.project_id:
        return policies_above(department_id=policy.department_under)
    if policy.department_id:
        return policies_above(department_id=None)
    return []


def _scope_order(policy: Policy) -> int:
    return 2 if policy.project_id else 1 if policy.department_id else 0


def _below_errors(policy: Policy) -> dict[str, list[str]]:
    """The contradictions `policy` as proposed would create with the saved policies of the scopes under it, named on
    its own fields (two queries: those policies, and the organisation's and departments' they inherit from)."""
    if policy.project_id:
        return {}
    children = Policy.objects.exclude(pk=policy.pk).select_related("department", "project__department",
                                                                    "default_priority_class")
    if policy.department_id:
        children = children.filter(project__department_id=policy.department_id)
    children_list = list(children)
    if not children_list:
        return {}
    wide = [*Policy.objects.filter(project__isnull=True).exclude(pk=policy.pk).select_related(
        "department", "default_priority_class"), policy]
    errors: dict[str, list[str]] = {}
    for child in children_list:
        department_id = child.department_under if child.project_id else None
        chain = sorted((row for row in wide if row.pk != child.pk and (
            row.department_id is None or row.department_id == department_id)), key=_scope_order)
        above = merge(chain, pod_security=settings.MANIFEST_POD_SECURITY)
        for name, messages in contradiction_errors(child, above).items():
            if above.source(name) == policy.scope_text():
                errors.setdefault(name, []).extend(f"{message} Change {child.scope_text()} first."
                                                   for message in messages)
    return errors


def _priority_class_errors(policy: Policy) -> dict[str, list[str]]:
    names = policy.allowed_priority_classes
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return {}
    unknown = sorted(set(names) - set(PriorityClass.objects.filter(name__in=names).values_list("name", flat=True)))
    return {"allowed_priority_classes": [f"No priority class is named {', '.join(unknown)}."]} if unknown else {}


def _check(policy: Policy) -> None:
    errors = _field_errors(policy, _priority_class_errors(policy))
    if not errors:
        above = merge(_above(policy), pod_security=settings.MANIFEST_POD_SECURITY)
        errors = contradiction_errors(policy, above)
        for name, messages in _below_errors(policy).items():
            errors.setdefault(name, []).extend(messages)
    if errors:
        raise ValidationError(errors)


def _lock_tree(policy: Policy) -> None:
    """Lock the department the policy falls under (every department for the organisation's) while the scopes above
    and below are compared: two policies of one tree checked at once cannot both slip through."""
    department_id = policy.department_under
    rows = Department.objects.select_for_update().order_by("pk")
    list(rows.filter(pk=department_id) if department_id else rows)


def _save(policy: Policy, **kwargs: Any) -> None:
    """Save; two writers racing to one scope meet the unique constraint (a 400, not a 500)."""
    try:
        with transaction.atomic():
            policy.save(**kwargs)
    except IntegrityError as exc:
        raise ValidationError({"non_field_errors": ["This scope already has a policy; change that one."]}) from exc


def policy_create(*, actor: Actor, **fields: Any) -> Policy:
    """A policy for a department, a project, or (neither given) the whole organisation."""
    policy = Policy()
    model_update(policy, fields, POLICY_FIELDS)
    _require_manager(actor, policy)
    with transaction.atomic():
        _lock_tree(policy)
        _check(policy)
        _save(policy)
        audit_record(actor=actor, action="policy.create", obj=policy, before=None, after=snapshot(policy),
                     department=policy.department, project=policy.project)
    return policy


def policy_update(*, actor: Actor, policy: Policy, expected_version: int | None = None, **changes: Any) -> Policy:
    """Change its limits and defaults; its scope is fixed (delete and create instead)."""
    fixed = sorted(set(changes) & {"department", "project"})
    if fixed:
        raise ValidationError({name: ["A policy's scope cannot change; delete it and create another."]
                               for name in fixed})
    _require_manager(actor, policy)
    with transaction.atomic():
        _lock_tree(policy)
        policy = Policy.objects.select_for_update(of=("self",)).select_related(
            "project__department", "department", "default_priority_class").get(pk=policy.pk)
        version_check(policy, expected_version)
        before = snapshot(policy)
        changed = model_update(policy, changes, POLICY_CHANGEABLE)
        if not changed:
            return policy
        _check(policy)
        _save(policy, update_fields=[*changed, "updated_at"])
        audit_record(actor=actor, action="policy.update", obj=policy, before=before, after=snapshot(policy),
                     department=policy.department, project=policy.project)
    return policy


def policy_delete(*, actor: Actor, policy: Policy, expected_version: int | None = None) -> None:
    """Delete: the scope inherits every field from the scope above again (which never allows less than the policies
    under it, so nothing below becomes a contradiction)."""
    _require_manager(actor, policy)
    with transaction.atomic():
        version_check_locked(policy, expected_version)
        audit_record(actor=actor, action="policy.delete", obj=policy, before=snapshot(policy), after=None,
                     department=policy.department, project=policy.project)
        policy.delete()
