"""Priority classes: never renamed, since running work refers to them by name."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.services import model_delete, model_save, model_update, version_check, version_check_locked
from apps.org.models import PriorityClass

from .common import _require
from .kueue_sync import _org_changed

PRIORITY_CLASS_FIELDS = {"name", "value", "preemptible", "description"}


def priority_class_create(*, actor: Actor, **fields: Any) -> PriorityClass:
    _require(actor, Action.MANAGE)
    priority_class = PriorityClass()
    model_update(priority_class, fields, PRIORITY_CLASS_FIELDS)
    with transaction.atomic():
        model_save(priority_class)
        audit_record(actor=actor, action="priority_class.create", obj=priority_class, before=None,
                     after=snapshot(priority_class))
        _org_changed()
    return priority_class


def priority_class_update(*, actor: Actor, priority_class: PriorityClass, expected_version: int | None = None,
                          **changes: Any) -> PriorityClass:
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        priority_class = PriorityClass.objects.select_for_update().get(pk=priority_class.pk)
        version_check(priority_class, expected_version)
        before = snapshot(priority_class)
        if "name" in changes and changes["name"] != priority_class.name:
            raise ValidationError({"name": "A priority class cannot be renamed: running work refers to it by name."})
        changed = model_update(priority_class, changes, PRIORITY_CLASS_FIELDS)
        if not changed:
            return priority_class
        model_save(priority_class, update_fields=[*changed, "updated_at"])
        audit_record(actor=actor, action="priority_class.update", obj=priority_class, before=before,
                     after=snapshot(priority_class))
        _org_changed()
    return priority_class


def priority_class_delete(*, actor: Actor, priority_class: PriorityClass, expected_version: int | None = None) -> None:
    """`expected_version`: the version the delete was based on (a stale one raises StaleWrite)."""
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        version_check_locked(priority_class, expected_version)
        audit_record(actor=actor, action="priority_class.delete", obj=priority_class, before=snapshot(priority_class),
                     after=None)
        model_delete(priority_class, what=f"priority class {priority_class.name}")
        _org_changed()
