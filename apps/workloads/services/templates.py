"""Admins' presets for the submission forms."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction

from apps.accounts.access import Action, can
from apps.core.actors import Actor
from apps.core.audit import audit_record
from apps.core.services import version_check
from apps.workloads.models import WorkloadTemplate


def workload_template_create(*, actor: Actor, name: str, kind: str, values: dict[str, Any],
                             description: str = "") -> WorkloadTemplate:
    """An admin's preset for a submission form (the form checks that `values` names only its fields)."""
    if not can(actor, Action.MANAGE):
        raise PermissionDenied("Only admins manage workload templates.")
    template = WorkloadTemplate(name=name, kind=kind, values=values, description=description)
    template.full_clean()
    with transaction.atomic():
        template.save()
        audit_record(actor=actor, action="workload_template.create", obj=template, before=None,
                     after=_template_state(template))
    return template


def workload_template_update(*, actor: Actor, template: WorkloadTemplate, expected_version: int | None = None,
                             **changes: Any) -> WorkloadTemplate:
    """`expected_version`: the version the change was read at (a stale one raises StaleWrite)."""
    if not can(actor, Action.MANAGE):
        raise PermissionDenied("Only admins manage workload templates.")
    with transaction.atomic():
        template = WorkloadTemplate.objects.select_for_update().get(pk=template.pk)
        version_check(template, expected_version)
        before = _template_state(template)
        for field, value in changes.items():
            if field not in {"name", "kind", "values", "description"}:
                raise TypeError(f"unknown template field {field}")
            setattr(template, field, value)
        template.full_clean()
        template.save()
        audit_record(actor=actor, action="workload_template.update", obj=template, before=before,
                     after=_template_state(template))
    return template


def workload_template_delete(*, actor: Actor, template: WorkloadTemplate) -> None:
    if not can(actor, Action.MANAGE):
        raise PermissionDenied("Only admins manage workload templates.")
    with transaction.atomic():
        audit_record(actor=actor, action="workload_template.delete", obj=template, before=_template_state(template),
                     after=None)
        template.delete()


def _template_state(template: WorkloadTemplate) -> dict[str, Any]:
    return {"name": template.name, "kind": template.kind, "description": template.description,
            "values": template.values, "version": template.version}
