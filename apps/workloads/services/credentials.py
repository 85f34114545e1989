"""Users' secrets in a project: sealed until the worker writes the Kubernetes Secret, then forgotten."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.access import Action, can
from apps.core import intents
from apps.core.actors import Actor
from apps.core.audit import audit_record
from apps.core.sealed import seal
from apps.org.models import Project
from apps.workloads.models import Credential
from apps.workloads.validation import env_errors

CREDENTIAL_INTENT = "credential.sync"
CREDENTIAL_TASK = "worker.tasks.credential_sync"
CREDENTIAL_DEADLINE = timedelta(seconds=60)
MAX_CREDENTIAL_KEYS = 32
MAX_CREDENTIAL_VALUE = 16_384


def _credential_values_errors(values: Any) -> list[str]:
    if not isinstance(values, dict) or not values:
        return ["Give at least one NAME=value pair."]
    if len(values) > MAX_CREDENTIAL_KEYS:
        return [f"At most {MAX_CREDENTIAL_KEYS} keys in one credential."]
    errors = env_errors([{"name": key, "value": value} for key, value in values.items()
                         if isinstance(key, str) and isinstance(value, str)])
    if any(not isinstance(value, str) or not value or len(value) > MAX_CREDENTIAL_VALUE for value in values.values()):
        errors.append(f"Every key needs a value of at most {MAX_CREDENTIAL_VALUE} characters.")
    return errors


def credential_create(*, actor: Actor, project: Project, name: str, values: dict[str, str]) -> Credential:
    """A user's secret in a project. Only the name and the keys are kept in clear; the values are sealed until the
    worker writes the Kubernetes Secret, then cleared (they are never shown again, nor audited)."""
    if not can(actor, Action.SUBMIT, project):
        raise PermissionDenied("You may not submit work in this project, so you cannot store credentials there.")
    credential = Credential(owner=actor, project=project, name=name, keys=sorted(values) if isinstance(
        values, dict) else [])
    errors: dict[str, list[str]] = {}
    try:
        credential.full_clean()
    except ValidationError as exc:
        errors = exc.message_dict
    if messages := _credential_values_errors(values):
        errors["values"] = messages
    if errors:
        raise ValidationError(errors)
    credential.sealed = seal(values)
    with transaction.atomic():
        credential.save()
        audit_record(actor=actor, action="credential.create", obj=credential, before=None,
                     after={"name": credential.name, "keys": credential.keys}, project=project)
        intents.intent_record(kind=CREDENTIAL_INTENT, task=CREDENTIAL_TASK, target_id=credential.pk,
                              deadline=CREDENTIAL_DEADLINE)
    return credential


def credential_values_replace(*, actor: Actor, credential: Credential, values: dict[str, str]) -> Credential:
    """Its owner rotates a credential: new values (and keys) sealed until the worker rewrites the Secret; workloads
    started before keep what they read at start."""
    if credential.owner_id != actor.pk or credential.deleted_at is not None:
        raise PermissionDenied("Only its owner changes a credential.")
    if messages := _credential_values_errors(values):
        raise ValidationError({"values": messages})
    before = {"name": credential.name, "keys": list(credential.keys)}
    with transaction.atomic():
        locked = Credential.objects.select_for_update().get(pk=credential.pk)
        locked.keys, locked.sealed, locked.applied_at, locked.apply_error = sorted(values), seal(values), None, ""
        locked.save(update_fields=["keys", "sealed", "applied_at", "apply_error"])
        audit_record(actor=actor, action="credential.replace_values", obj=locked, before=before,
                     after={"name": locked.name, "keys": locked.keys}, project=locked.project)
        intents.intent_record(kind=CREDENTIAL_INTENT, task=CREDENTIAL_TASK, target_id=locked.pk,
                              deadline=CREDENTIAL_DEADLINE)
    return locked


def credential_delete(*, actor: Actor, credential: Credential) -> None:
    """Its owner deletes it: new workloads cannot pick it; the worker removes the Secret, then the row."""
    if credential.owner_id != actor.pk:
        raise PermissionDenied("Only its owner deletes a credential.")
    with transaction.atomic():
        Credential.objects.filter(pk=credential.pk).update(deleted_at=timezone.now(), sealed="")
        audit_record(actor=actor, action="credential.delete", obj=credential,
                     before={"name": credential.name, "keys": credential.keys}, after=None, project=credential.project)
        intents.intent_record(kind=CREDENTIAL_INTENT, task=CREDENTIAL_TASK, target_id=credential.pk,
                              deadline=CREDENTIAL_DEADLINE)
