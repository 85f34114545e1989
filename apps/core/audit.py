"""Audit rows for privileged changes; services call these inside their own transaction."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import models

from .actors import Actor
from .models import AuditEvent


def snapshot(obj: models.Model) -> dict[str, Any]:
    """The object's concrete fields as JSON-safe values (foreign keys by id)."""
    data: dict[str, Any] = {}
    for model_field in obj._meta.concrete_fields:
        if model_field.name in {"created_at", "updated_at"}:
            continue
        value = getattr(obj, model_field.attname)
        if isinstance(value, Decimal):
            value = format(value.normalize(), "f")
        data[model_field.attname if model_field.is_relation else model_field.name] = value
    return data


def audit_record(
    *,
    actor: Actor | None,
    action: str,
    obj: models.Model,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    department: Any = None,
    project: Any = None,
) -> AuditEvent:
    """Write one audit row; the department/project scope lets department admins read their own rows. The actor is
    None for what the portal does by itself (single sign-on, the worker)."""
    # A project's department by its id: no read of the department in the caller's (write) transaction.
    department_id = department.pk if department is not None else getattr(project, "department_id", None)
    return AuditEvent.objects.create(
        actor=actor,
        action=action,
        object_type=obj._meta.model_name or "",
        object_id=str(obj.pk),
        object_repr=str(obj)[:200],
        department_id=department_id,
        project=project,
        before=before,
        after=after,
    )
