"""Projects: their namespace rule, their fields by role, and their over-quota weights (through the quotas)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.kueue_names import names as kueue_names
from apps.core.services import model_delete, model_save, model_update, version_check, version_check_locked
from apps.org.models import Department, Project, ProjectNamespace
from apps.org.validators import project_namespace_error, project_namespace_rule

from .common import DENIED, _require
from .kueue_sync import _org_changed
from .quotas import quota_update

PROJECT_FIELDS = set(access.PROJECT_FIELDS)


def _project_namespace_error(project: Project) -> str | None:
    """The namespace rule (validators.project_namespace_error) plus its database half: a namespace named after
    another project (`<prefix><its slug>`) is that project's. One that another project holds already is refused
    by the uniqueness check."""
    if error := project_namespace_error(project.namespace):
        return error
    if ProjectNamespace.objects.filter(namespace=project.namespace).exists():
        return f"{project_namespace_rule()}; '{project.namespace}' is mapped to a project already."
    prefix = kueue_names().project_prefix
    owner = project.namespace[len(prefix):] if project.namespace.startswith(prefix) else ""
    if owner and owner != project.slug and Project.objects.filter(slug=owner).exclude(pk=project.pk).exists():
        return f"{project_namespace_rule()}; '{project.namespace}' is reserved for project {owner}."
    return None


def _clean_project(project: Project) -> None:
    """full_clean plus the namespace rule, every error at once (a namespace that is no DNS label, or that another
    project holds, gets that one message)."""
    errors: dict[str, list[ValidationError]] = {}
    try:
        project.full_clean()
    except ValidationError as exc:
        errors = exc.update_error_dict(errors)
    if "namespace" not in errors and (namespace_error := _project_namespace_error(project)):
        errors["namespace"] = [ValidationError(namespace_error, code="project_namespace")]
    if errors:
        raise ValidationError(errors)


def project_create(*, actor: Actor, department: Department, **fields: Any) -> Project:
    _require(actor, Action.MANAGE_PROJECTS, department)
    project = Project(department=department)
    model_update(project, fields, PROJECT_FIELDS - {"department"})
    if not project.namespace and project.slug:
        project.namespace = kueue_names().project_namespace(project.slug)
    _clean_project(project)
    with transaction.atomic():
        model_save(project)
        audit_record(actor=actor, action="project.create", obj=project, before=None, after=snapshot(project),
                     project=project)
        _org_changed()
    return project


def project_update(
    *, actor: Actor, project: Project, over_quota_weights: Mapping[str, Any] | None = None,
    expected_version: int | None = None, **changes: Any
) -> Project:
    """Change a project: the fields `access.project_fields_editable` gives this actor (team leads: the default
    priority class; department admins and admins: every field), and, in the same transaction, its over-quota
    weights per pool (`over_quota_weights`: pool slug -> weight, each through `quota_update`).

    Resending a field's current value is no change. One audit row for the project ("project.default_priority_class"
    when only that changed, else "project.update") plus one per changed quota.
    """
    editable = access.project_fields_editable(actor, project)
    if not editable:
        raise PermissionDenied(DENIED)
    unknown = set(changes) - PROJECT_FIELDS
    if unknown:
        raise ValidationError(f"These fields cannot be changed here: {', '.join(sorted(unknown))}.")
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        version_check(project, expected_version)
        changed = [name for name, value in changes.items() if getattr(project, name) != value]
        if set(changed) - editable:
            raise PermissionDenied(DENIED)
        for immutable in ("slug", "namespace", "department"):
            if immutable in changed:
                raise ValidationError({immutable: "This cannot change once the project exists in the cluster."})
        if changed:
            before = snapshot(project)
            for name in changed:
                setattr(project, name, changes[name])
            model_save(project, update_fields=[*changed, "updated_at"])
            only_defaults = set(changed) <= access.PROJECT_DEFAULTS_FIELDS
            audit_record(actor=actor, action="project.default_priority_class" if only_defaults else "project.update",
                         obj=project, before=before, after=snapshot(project), project=project)
            if not only_defaults:  # the default priority class is the portal's; Kueue never sees it
                _org_changed()
        if over_quota_weights:
            _project_weights_set(actor=actor, project=project, weights=over_quota_weights)
    return project


def _project_weights_set(*, actor: Actor, project: Project, weights: Mapping[str, Any]) -> None:
    """Set a project's weight on several pools (pool slug -> weight); every refusal is reported, none is saved."""
    quotas = {quota.node_pool.slug: quota for quota in project.quotas.select_related("node_pool")}
    errors: list[str] = []
    for slug, weight in weights.items():
        quota = quotas.get(slug)
        if quota is None:
            errors.append(f"{project.name} has no quota on {slug}.")
            continue
        try:
            quota_update(actor=actor, quota=quota, over_quota_weight=weight)
        except ValidationError as exc:
            errors.extend(f"{slug}: {message}" for message in exc.messages)
    if errors:
        raise ValidationError({"over_quota_weights": errors})


def project_delete(*, actor: Actor, project: Project, expected_version: int | None = None) -> None:
    """`expected_version`: the version the delete was based on (a stale one raises StaleWrite)."""
    _require(actor, Action.MANAGE_PROJECTS, project)
    with transaction.atomic():
        version_check_locked(project, expected_version)
        audit_record(actor=actor, action="project.delete", obj=project, before=snapshot(project), after=None,
                     department=project.department)
        for quota in project.quotas.all():
            audit_record(actor=actor, action="quota.delete", obj=quota, before=snapshot(quota), after=None,
                         department=project.department)
        model_delete(project, what=f"project {project.slug}")
        _org_changed()
