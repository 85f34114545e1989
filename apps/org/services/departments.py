"""Departments: created and changed by admins; deleted only once they have no project."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.services import model_delete, model_save, model_update, version_check, version_check_locked
from apps.org.models import Department

from .common import _field_errors, _require
from .kueue_sync import _org_changed

DEPARTMENT_FIELDS = {"slug", "name", "description", "min_project_weight", "max_project_weight"}


def department_create(*, actor: Actor, **fields: Any) -> Department:
    _require(actor, Action.MANAGE)
    department = Department()
    model_update(department, fields, DEPARTMENT_FIELDS)
    with transaction.atomic():
        model_save(department)
        audit_record(actor=actor, action="department.create", obj=department, before=None, after=snapshot(department),
                     department=department)
        _org_changed()
    return department


def department_update(*, actor: Actor, department: Department, expected_version: int | None = None,
                      **changes: Any) -> Department:
    _require(actor, Action.MANAGE, department)
    with transaction.atomic():
        department = Department.objects.select_for_update().get(pk=department.pk)
        version_check(department, expected_version)
        before = snapshot(department)
        errors: dict[str, list[str]] = {}
        if "slug" in changes and changes["slug"] != department.slug:
            errors["slug"] = ["A department's name in Kubernetes cannot change once created."]
        changed = model_update(department, changes, DEPARTMENT_FIELDS)
        if not changed:
            return department
        if _field_errors(department, errors):
            raise ValidationError(errors)
        model_save(department, update_fields=[*changed, "updated_at"])
        audit_record(actor=actor, action="department.update", obj=department, before=before,
                     after=snapshot(department), department=department)
        _org_changed()
    return department


def department_delete(*, actor: Actor, department: Department, expected_version: int | None = None) -> None:
    """`expected_version`: the version the delete was based on (a stale one raises StaleWrite)."""
    _require(actor, Action.MANAGE, department)
    with transaction.atomic():
        version_check_locked(department, expected_version)
        count = department.projects.count()
        if count:
            raise ValidationError(
                f"{department.name} still has {count} project{'s' if count != 1 else ''}; move or delete them first."
            )
        audit_record(actor=actor, action="department.delete", obj=department, before=snapshot(department), after=None)
        for quota in department.quotas.select_related("node_pool"):
            audit_record(actor=actor, action="quota.delete", obj=quota, before=snapshot(quota), after=None)
        model_delete(department, what=f"department {department.slug}")
        _org_changed()
