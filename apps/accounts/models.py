"""Who may do what where: a role bound to a user or a group at a scope that covers everything below it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q


class Role(models.TextChoices):
    ADMIN = "admin", "Admin"
    DEPARTMENT_ADMIN = "department_admin", "Department admin"
    TEAM_LEAD = "team_lead", "Team lead"
    RESEARCHER = "researcher", "Researcher"
    VIEWER = "viewer", "Viewer"


class Scope(models.TextChoices):
    EVERYTHING = "everything", "Everything"
    DEPARTMENT = "department", "Department"
    PROJECT = "project", "Project"


class RoleBinding(models.Model):
    """(user or group, role, scope). A binding applies to its scope and everything below it."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="role_bindings"
    )
    group = models.ForeignKey(Group, on_delete=models.CASCADE, null=True, blank=True, related_name="role_bindings")
    role = models.CharField(max_length=20, choices=Role.choices)
    scope = models.CharField(max_length=20, choices=Scope.choices)
    department = models.ForeignKey(
        "org.Department", on_delete=models.CASCADE, null=True, blank=True, related_name="role_bindings"
    )
    project = models.ForeignKey(
        "org.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="role_bindings"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["role", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(user__isnull=False) & Q(group__isnull=True))
                | (Q(user__isnull=True) & Q(group__isnull=False)),
                name="rolebinding_exactly_one_subject",
                violation_error_message="Bind the role to a user or to a group, not both.",
            ),
            models.CheckConstraint(
                condition=(Q(scope="everything") & Q(department__isnull=True) & Q(project__isnull=True))
                | (Q(scope="department") & Q(department__isnull=False) & Q(project__isnull=True))
                | (Q(scope="project") & Q(department__isnull=True) & Q(project__isnull=False)),
                name="rolebinding_scope_matches_target",
                violation_error_message="The scope must name exactly its department or project.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject_display} {self.role} @ {self.scope_display}"

    @property
    def subject_display(self) -> str:
        return f"user:{self.user.get_username()}" if self.user_id else f"group:{self.group.name}"  # type: ignore[union-attr]

    @property
    def scope_object(self) -> Any:
        """The department or project the binding is scoped to; None for everything."""
        if self.scope == Scope.PROJECT:
            return self.project
        if self.scope == Scope.DEPARTMENT:
            return self.department
        return None

    @property
    def scope_display(self) -> str:
        if self.scope == Scope.DEPARTMENT:
            return f"department:{self.department.slug}"  # type: ignore[union-attr]
        if self.scope == Scope.PROJECT:
            return f"project:{self.project.slug}"  # type: ignore[union-attr]
        return "everything"


class NotificationPreference(models.Model):
    """Which workload events a user wants by e-mail (opt-in: nothing is sent until the user says so)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="notification_preference")
    on_admitted = models.BooleanField(default=False)
    on_preempted = models.BooleanField(default=False)
    on_finished = models.BooleanField(default=False)
    on_failed = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"notifications for {self.user}"

    def wants(self, status: str) -> bool:
        field = {"admitted": "on_admitted", "preempted": "on_preempted", "succeeded": "on_finished",
                 "failed": "on_failed"}.get(status)
        return bool(field and getattr(self, field))


def scope_models() -> tuple[Any, Any]:
    """The department and project models a binding's scope names. They are org's; accounts sits below org, so it
    reaches them through its own relations instead of importing them."""
    return RoleBinding._meta.get_field("department").related_model, RoleBinding._meta.get_field("project").related_model
