"""Writes to role bindings: access-checked, one transaction, audited."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from apps.core.audit import audit_record, snapshot

from .access import forget_grants, may_grant
from .models import NotificationPreference, Role, RoleBinding, Scope


def _audit_scope(binding: RoleBinding) -> dict[str, Any]:
    if binding.project_id:
        return {"project": binding.project}
    if binding.department_id:
        return {"department": binding.department}
    return {}


def role_binding_create(
    *,
    actor: Any,
    role: str,
    user: Any = None,
    group: Group | None = None,
    department: Any = None,
    project: Any = None,
) -> RoleBinding:
    """Bind a role to a user or group at everything, a department or a project (the narrowest one given)."""
    if project is not None and department is not None:
        raise ValidationError("Choose a department or a project as the scope, not both.")
    scope = Scope.PROJECT if project else Scope.DEPARTMENT if department else Scope.EVERYTHING
    binding = RoleBinding(user=user, group=group, role=role, scope=scope, department=department, project=project)
    if role not in Role.values:
        raise ValidationError({"role": f"Choose one of: {', '.join(Role.values)}."})
    if not may_grant(actor, role, project or department):
        raise PermissionDenied("You may not grant this role at this scope.")
    with transaction.atomic():
        binding.full_clean()
        duplicate = RoleBinding.objects.filter(
            user=user, group=group, role=role, scope=scope, department=department, project=project
        ).exists()
        if duplicate:
            raise ValidationError("This binding already exists.")
        binding.save()
        audit_record(actor=actor, action="role_binding.create", obj=binding, before=None, after=snapshot(binding),
                     **_audit_scope(binding))
    if user is not None:
        forget_grants(user)
    return binding


def role_binding_delete(*, actor: Any, binding: RoleBinding) -> None:
    if not may_grant(actor, binding.role, binding.scope_object):
        raise PermissionDenied("You may not remove this binding.")
    with transaction.atomic():
        if binding.role == Role.ADMIN and binding.scope == Scope.EVERYTHING:
            remaining = RoleBinding.objects.filter(role=Role.ADMIN, scope=Scope.EVERYTHING).exclude(pk=binding.pk)
            if not remaining.exists():
                raise ValidationError("This is the last admin binding; add another admin first.")
        audit_record(actor=actor, action="role_binding.delete", obj=binding, before=snapshot(binding), after=None,
                     **_audit_scope(binding))
        binding.delete()


def notification_preference_set(*, user: Any, on_admitted: bool, on_preempted: bool, on_finished: bool,
                                on_failed: bool) -> NotificationPreference:
    """A user's own e-mail opt-ins (their own setting: no audit row)."""
    preference, _ = NotificationPreference.objects.update_or_create(user=user, defaults={
        "on_admitted": on_admitted, "on_preempted": on_preempted, "on_finished": on_finished, "on_failed": on_failed,
    })
    return preference
