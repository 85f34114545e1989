"""Who may do what where: a role bound to a user or a group at a scope that covers everything below it."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Protocol

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q

from apps.core.models import VersionedModel
from apps.core.scopes import ScopeNode


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


class BindingSource(models.TextChoices):
    MANUAL = "manual", "Granted by hand"
    GROUP_RULE = "group_rule", "From an IdP group rule"


# A binding or rule at a scope names exactly its department or project (none for everything).
SCOPE_NAMES_ITS_TARGET = (
    (Q(scope="everything") & Q(department__isnull=True) & Q(project__isnull=True))
    | (Q(scope="department") & Q(department__isnull=False) & Q(project__isnull=True))
    | (Q(scope="project") & Q(department__isnull=True) & Q(project__isnull=False))
)


class ScopeTargetNode(ScopeNode, Protocol):
    """A binding's department or project, as this app reads it (org's models, which it cannot import)."""

    @property
    def slug(self) -> str: ...


class ScopeTarget:
    """What a binding or a group rule is scoped to: everything, one department or one project."""

    scope: str
    department: ScopeTargetNode | None
    project: ScopeTargetNode | None

    @property
    def scope_object(self) -> ScopeTargetNode | None:
        """The department or project named; None for everything."""
        if self.scope == Scope.PROJECT:
            return self.project
        if self.scope == Scope.DEPARTMENT:
            return self.department
        return None

    @property
    def scope_display(self) -> str:
        target = self.scope_object
        return "everything" if target is None else f"{self.scope}:{target.slug}"


class RoleBinding(ScopeTarget, models.Model):
    """(user or group, role, scope). A binding applies to its scope and everything below it.

    `source` says who keeps it: bindings granted by hand stay until someone removes them; bindings made by IdP group
    rules (GroupRoleRule) are kept in step with the user's groups at each single sign-on and with the rules.
    """

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
    source = models.CharField(max_length=20, choices=BindingSource.choices, default=BindingSource.MANUAL)
    rule = models.ForeignKey("GroupRoleRule", on_delete=models.SET_NULL, null=True, blank=True,
                             related_name="bindings", help_text="The rule that made this binding, if one did.")

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
                condition=SCOPE_NAMES_ITS_TARGET,
                name="rolebinding_scope_matches_target",
                violation_error_message="The scope must name exactly its department or project.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject_display} {self.role} @ {self.scope_display}"

    @property
    def subject_display(self) -> str:
        return f"user:{self.user.get_username()}" if self.user_id else f"group:{self.group.name}"  # type: ignore[union-attr]


class GroupRoleRule(ScopeTarget, VersionedModel):
    """Who in the identity provider's groups gets which role where (README "Groups and roles").

    A rule matches a group name exactly or, when the pattern holds `*` or `?`, as a shell-style wildcard (`*` any
    run of characters, `?` one character; case-sensitive). At each single sign-on a user gets one binding per
    matching (rule, role, scope); bindings made by rules that no longer match go away. Rule changes apply at once
    to every single-sign-on user, from the groups their identity provider gave at their last sign-in.
    """

    group_pattern = models.CharField(max_length=200, help_text="An IdP group name, or a pattern with * and ?.")
    role = models.CharField(max_length=20, choices=Role.choices)
    scope = models.CharField(max_length=20, choices=Scope.choices)
    department = models.ForeignKey("org.Department", on_delete=models.CASCADE, null=True, blank=True,
                                   related_name="group_role_rules")
    project = models.ForeignKey("org.Project", on_delete=models.CASCADE, null=True, blank=True,
                                related_name="group_role_rules")
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["group_pattern", "id"]
        constraints = [
            models.CheckConstraint(
                condition=SCOPE_NAMES_ITS_TARGET,
                name="grouprolerule_scope_matches_target",
                violation_error_message="The scope must name exactly its department or project.",
            ),
        ]

    def __str__(self) -> str:
        return f"group {self.group_pattern} -> {self.role} @ {self.scope_display}"

    @property
    def is_pattern(self) -> bool:
        return any(char in self.group_pattern for char in "*?")

    def matches(self, group: str) -> bool:
        if not self.is_pattern:
            return group == self.group_pattern
        return fnmatchcase(group, self.group_pattern.replace("[", "[[]"))


class ExternalIdentity(models.Model):
    """The single-sign-on identity (issuer, subject) a portal user signs in with, and the groups it last had."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="externalidentity_unique_subject")]

    def __str__(self) -> str:
        return f"{self.issuer} {self.subject}"


class PersonalAccessToken(models.Model):
    """A named API credential of one user. Only a SHA-256 digest of the secret is stored; the secret is shown once.

    Valid while not revoked and not expired; used as `Authorization: Token <secret>` or `Bearer <secret>`.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, help_text="The secret's first characters, to recognise it.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def state(self, now: Any) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= now:
            return "expired"
        return "active"


class NotificationPreference(models.Model):
    """Which workload events a user wants by e-mail (opt-in: nothing is sent until the user says so)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="notification_preference")
    on_admitted = models.BooleanField(default=False)
    on_preempted = models.BooleanField(default=False)
    on_finished = models.BooleanField(default=False)
    on_failed = models.BooleanField(default=False)
    on_idle = models.BooleanField(default=False, help_text="A workload of theirs holds GPUs it does not use.")

    def __str__(self) -> str:
        return f"notifications for {self.user}"

    def wants(self, status: str) -> bool:
        field = {"admitted": "on_admitted", "preempted": "on_preempted", "succeeded": "on_finished",
                 "failed": "on_failed", "idle": "on_idle"}.get(status)
        return bool(field and getattr(self, field))


def scope_models() -> tuple[Any, Any]:
    """The department and project models a binding's scope names. They are org's; accounts sits below org, so it
    reaches them through its own relations instead of importing them."""
    return RoleBinding._meta.get_field("department").related_model, RoleBinding._meta.get_field("project").related_model
