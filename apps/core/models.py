"""Rows every app writes: the audit log of privileged changes, the outbox of intents; the versioned-row and
sealed-secret bases."""

from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from django.db import models

from .scopes import AccessPaths


class SealedSecretModel(models.Model):
    """A row whose values live in a Kubernetes Secret (a user's credential, a project's pull secret): the values wait
    here sealed (apps.core.sealed) until the worker has written the Secret (`sealed_secret_applied`), then they are
    cleared; a delete marks the row and the worker removes the Secret, then the row."""

    sealed = models.TextField(blank=True, editable=False, help_text="Encrypted values not yet in the cluster.")
    applied_at = models.DateTimeField(null=True, blank=True)
    apply_error = models.CharField(max_length=500, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True, help_text="Deleted here; the Secret is being removed.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class VersionedModel(models.Model):
    """A row people edit from pages and the API: `version` counts its saves, so a save based on an older read can
    be told apart and refused (apps.core.services.version_check). Every save of an existing row bumps it."""

    version = models.PositiveIntegerField(default=1, editable=False,
                                          help_text="Bumped by every save; edits carry the version they read.")

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding:
            super().save(*args, **kwargs)
            return
        self.version += 1
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = [*kwargs["update_fields"], "version"]
        try:
            super().save(*args, **kwargs)
        except Exception:
            self.version -= 1  # nothing was written: the row in memory still is the version it was read at
            raise


class AuditEvent(models.Model):
    """Who changed what, when, with the state before and after; written in the change's own transaction.

    The department/project scope (string references: core imports no app) lets department admins read their rows.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    action = models.CharField(max_length=60, db_index=True)
    object_type = models.CharField(max_length=60)
    object_id = models.CharField(max_length=60)
    object_repr = models.CharField(max_length=200)
    department = models.ForeignKey("org.Department", on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    project = models.ForeignKey("org.Project", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    # How the access module scopes these rows (see apps.accounts.access.restrict).
    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("department_id",), project="project_id")

    # Not a column: the audit page sets it (apps.org.selectors.audit_changes), the fields changed with names for ids.
    changes: list[Any]

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.action} {self.object_repr}"


class Intent(models.Model):
    """One change the portal asked of the cluster, recorded with the user's action: the outbox (apps.core.intents).

    Open while `done_at` is empty; the periodic sweep sends its task again once `next_attempt_at` passes.
    """

    kind = models.CharField(max_length=40, help_text="What is asked, e.g. workload.submit, workload.stop, kueue.sync.")
    task = models.CharField(max_length=100, help_text="The Celery task that does it (sent with target_id).")
    target_id = models.BigIntegerField(null=True, blank=True, help_text="The row it is about; empty for the org.")
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField(help_text="The deadline: not done by then, the sweep sends it again.")
    dispatches = models.PositiveIntegerField(default=0, help_text="Times its task was sent.")
    attempts = models.PositiveIntegerField(default=0, help_text="Times a task took it up.")
    claimed_until = models.DateTimeField(null=True, blank=True, help_text="A task's lease on it.")
    done_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=100, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["kind", "target_id"], condition=models.Q(done_at__isnull=True),
                         name="core_intent_open_target"),
            models.Index(fields=["next_attempt_at"], condition=models.Q(done_at__isnull=True),
                         name="core_intent_open_due"),
            models.Index(fields=["done_at"], name="core_intent_done"),
        ]

    def __str__(self) -> str:
        state = f"done ({self.outcome})" if self.done_at else f"open, next {self.next_attempt_at:%H:%M:%S}"
        return f"{self.kind} {self.target_id or ''} {state}".replace("  ", " ")
