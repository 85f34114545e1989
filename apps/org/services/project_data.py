"""A project's data sources and image pull secrets (admins and the department's admins)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts import access
from apps.core import intents
from apps.core.actors import Actor
from apps.core.audit import audit_record
from apps.core.sealed import seal
from apps.org.models import DataSource, ImagePullSecret, Project
from apps.org.validators import (
    mount_path_errors,
    nfs_path_errors,
    nfs_server_errors,
    registry_host_errors,
    validate_dns_subdomain,
)

PULL_SECRET_INTENT = "pull_secret.sync"  # noqa: S105 - an intent kind
PULL_SECRET_TASK = "worker.tasks.pull_secret_sync"  # noqa: S105 - a task name
SECRET_SYNC_DEADLINE = timedelta(seconds=60)


def _require_data_manager(actor: Actor, project: Project) -> None:
    if not access.can_manage_data_of(actor, project):
        raise PermissionDenied("Only admins and the department's admins manage a project's data and registries.")


def _data_source_state(source: DataSource) -> dict[str, Any]:
    return {"name": source.name, "kind": source.kind, "target": source.target, "mount_path": source.mount_path,
            "read_only": source.read_only}


def data_source_create(*, actor: Actor, project: Project, name: str, kind: str, mount_path: str,
                       read_only: bool = True, claim_name: str = "", nfs_server: str = "", nfs_path: str = "",
                       description: str = "") -> DataSource:
    """A PVC that exists in the project's namespace, or an NFS export, that the project's workloads may mount."""
    _require_data_manager(actor, project)
    source = DataSource(project=project, name=name, kind=kind, mount_path=mount_path, read_only=read_only,
                        claim_name=claim_name if kind == DataSource.Kind.PVC else "",
                        nfs_server=nfs_server if kind == DataSource.Kind.NFS else "",
                        nfs_path=nfs_path if kind == DataSource.Kind.NFS else "", description=description)
    errors: dict[str, list[str]] = {}
    try:
        source.full_clean()
    except ValidationError as exc:
        errors = exc.message_dict
    errors.setdefault("mount_path", []).extend(
        message for message in mount_path_errors(mount_path) if message not in errors.get("mount_path", []))
    if kind == DataSource.Kind.PVC:
        try:
            validate_dns_subdomain(claim_name)
        except ValidationError as exc:
            errors.setdefault("claim_name", []).extend(exc.messages)
    elif kind == DataSource.Kind.NFS:
        errors.setdefault("nfs_server", []).extend(nfs_server_errors(nfs_server))
        errors.setdefault("nfs_path", []).extend(nfs_path_errors(nfs_path))
    errors = {field: messages for field, messages in errors.items() if messages}
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        source.save()
        audit_record(actor=actor, action="data_source.create", obj=source, before=None,
                     after=_data_source_state(source), project=project)
    return source


def data_source_delete(*, actor: Actor, data_source: DataSource) -> None:
    """Workloads already submitted keep their mount (their Job has it); new ones cannot pick it."""
    _require_data_manager(actor, data_source.project)
    with transaction.atomic():
        audit_record(actor=actor, action="data_source.delete", obj=data_source,
                     before=_data_source_state(data_source), after=None, project=data_source.project)
        data_source.delete()


def _pull_secret_state(secret: ImagePullSecret) -> dict[str, Any]:
    return {"name": secret.name, "registry": secret.registry, "username": secret.username}  # never the password


def pull_secret_create(*, actor: Actor, project: Project, name: str, registry: str, username: str,
                       password: str) -> ImagePullSecret:
    """Registry credentials for every pod of the project; the password is sealed until the worker writes the
    Secret, then forgotten."""
    _require_data_manager(actor, project)
    secret = ImagePullSecret(project=project, name=name, registry=registry, username=username)
    errors: dict[str, list[str]] = {}
    try:
        secret.full_clean()
    except ValidationError as exc:
        errors = exc.message_dict
    if registry_problems := registry_host_errors(registry):
        errors["registry"] = registry_problems  # the field's own checks (length, blank) say less
    if not password or len(password) > 4096 or "\x00" in password:
        errors.setdefault("password", []).append("Give the registry password or token (at most 4096 characters).")
    if errors:
        raise ValidationError(errors)
    secret.sealed = seal({"registry": registry, "username": username, "password": password})
    with transaction.atomic():
        secret.save()
        audit_record(actor=actor, action="pull_secret.create", obj=secret, before=None,
                     after=_pull_secret_state(secret), project=project)
        intents.intent_record(kind=PULL_SECRET_INTENT, task=PULL_SECRET_TASK, target_id=secret.pk,
                              deadline=SECRET_SYNC_DEADLINE)
    return secret


def pull_secret_delete(*, actor: Actor, pull_secret: ImagePullSecret) -> None:
    """Marked deleted now (new pods stop naming it); the worker removes the Secret, then the row."""
    _require_data_manager(actor, pull_secret.project)
    with transaction.atomic():
        ImagePullSecret.objects.filter(pk=pull_secret.pk).update(deleted_at=timezone.now(), sealed="")
        audit_record(actor=actor, action="pull_secret.delete", obj=pull_secret,
                     before=_pull_secret_state(pull_secret), after=None, project=pull_secret.project)
        intents.intent_record(kind=PULL_SECRET_INTENT, task=PULL_SECRET_TASK, target_id=pull_secret.pk,
                              deadline=SECRET_SYNC_DEADLINE)
