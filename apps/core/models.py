"""Rows every app writes: the audit log of privileged changes."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
    access_department_paths = ("department_id",)
    access_project_path = "project_id"

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.action} {self.object_repr}"
