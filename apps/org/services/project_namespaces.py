"""Namespaces admins map to a project: existing namespaces whose Kueue work counts as the project's
(docs/architecture.md, Namespaces mapped to a project)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from apps.accounts import access
from apps.core.actors import Actor
from apps.core.audit import audit_record
from apps.org.models import Project, ProjectNamespace
from apps.org.validators import mapped_namespace_error

from .kueue_sync import _org_changed

DENIED_MAPPING = "Only admins map namespaces to projects."


def _require_mapper(actor: Actor) -> None:
    if not access.can_map_namespaces(actor):
        raise PermissionDenied(DENIED_MAPPING)


def _namespace_errors(namespace: str, mapping: ProjectNamespace) -> list[str]:
    """Every reason the namespace cannot be mapped: its shape, a system one, a project's own, mapped already."""
    errors: list[str] = []
    try:
        mapping.full_clean(exclude=["project"])
    except ValidationError as exc:
        errors.extend(exc.message_dict.get("namespace", []))
    if rule_error := mapped_namespace_error(namespace):
        errors.append(rule_error)
    if owner := Project.objects.filter(namespace=namespace).values_list("slug", flat=True).first():
        errors.append(f"'{namespace}' is the own namespace of project {owner}.")
    return errors


def project_namespace_map(*, actor: Actor, project: Project, namespace: str) -> ProjectNamespace:
    """Count the Kueue work of an existing namespace as the project's: the next Kueue sync puts the project's
    LocalQueues there and the watcher mirrors its Workloads. The namespace itself is never created by the portal."""
    _require_mapper(actor)
    mapping = ProjectNamespace(project=project, namespace=namespace)
    if errors := _namespace_errors(namespace, mapping):
        raise ValidationError({"namespace": errors})
    with transaction.atomic():
        mapping.save()
        audit_record(actor=actor, action="project.namespace_map", obj=mapping, before=None,
                     after={"namespace": namespace, "project": project.slug}, project=project)
        _org_changed()
    return mapping


def project_namespace_unmap(*, actor: Actor, project_namespace: ProjectNamespace) -> None:
    """Stop counting the namespace's work as the project's: the next Kueue sync removes the project's LocalQueues
    from it. Work mirrored from it keeps its rows and history; the watcher records what it sees there afterwards as
    unmapped (namespace of no project)."""
    _require_mapper(actor)
    project = project_namespace.project
    with transaction.atomic():
        audit_record(actor=actor, action="project.namespace_unmap", obj=project_namespace,
                     before={"namespace": project_namespace.namespace, "project": project.slug}, after=None,
                     project=project)
        project_namespace.delete()
        _org_changed()
