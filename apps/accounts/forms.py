"""Forms for the access pages: shape only; the access module and services decide what may be granted."""

from __future__ import annotations

import datetime
from typing import Any, cast

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.utils import timezone

from apps.core.actors import Actor
from apps.core.forms import StyledForm, VersionedForm

from . import access
from .access import Action
from .backends import LOCAL_LOGIN_OFF, refusal
from .models import Role, scope_models

USERNAME_MAX_LENGTH = 150  # auth.User.username


class PortalAuthenticationForm(AuthenticationForm):
    """Django's login form, saying why a sign-in was refused (passwords off, a demo account in production)."""

    def clean(self) -> dict[str, Any]:
        if not settings.LOCAL_LOGIN:
            raise ValidationError(LOCAL_LOGIN_OFF, code="local_login_off")
        # Credentials no account can have (a NUL, a username longer than any) are the usual refusal, said once and
        # never passed to authenticate(): the lockout's log would store them (and refuse them with a 500).
        raw = [self.data.get(self.add_prefix(name), "") for name in ("username", "password")]
        if any("\x00" in str(value) for value in raw) or len(str(raw[0])) > USERNAME_MAX_LENGTH:
            raise self.get_invalid_login_error()
        try:
            return super().clean()
        except ValidationError:
            reason = refusal(self.request)
            if reason:
                raise ValidationError(reason, code="refused") from None
            raise


class RoleBindingForm(StyledForm):
    username = forms.CharField(required=False, max_length=150, label="User",
                               help_text="The user's login name; leave empty to bind a group instead.")
    group = forms.ModelChoiceField(queryset=Group.objects.all(), required=False, empty_label="(none)",
                                   help_text="Bind the role to everyone in this group.")
    role = forms.ChoiceField()
    scope = forms.ChoiceField(help_text="The role applies to this scope and everything below it.")

    def __init__(self, *args: Any, actor: Actor, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        grantable = access.grantable_roles(actor)
        cast(forms.ChoiceField, self.fields["role"]).choices = [
            (value, label) for value, label in Role.choices if value in grantable]
        scopes: list[Any] = []
        if access.can(actor, Action.MANAGE_MEMBERS):
            scopes.append(("everything", "Everything"))
        department_model, project_model = scope_models()
        departments = access.restrict(department_model.objects.all(), actor, Action.MANAGE_MEMBERS)
        self._departments = {f"department:{d.pk}": d for d in departments}
        if self._departments:
            scopes.append(("Departments", [(key, d.name) for key, d in self._departments.items()]))
        projects = access.restrict(project_model.objects.select_related("department"), actor, Action.MANAGE_MEMBERS)
        self._projects = {f"project:{p.pk}": p for p in projects}
        if self._projects:
            scopes.append(("Projects", [(key, f"{p.department.name} / {p.name}") for key, p in self._projects.items()]))
        cast(forms.ChoiceField, self.fields["scope"]).choices = scopes

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        username, group = data.get("username", "").strip(), data.get("group")
        if bool(username) == bool(group):
            raise ValidationError("Choose a user or a group (exactly one).")
        if username:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                self.add_error("username", f"There is no user called {username!r}.")
            data["user"] = user
        else:
            data["user"] = None
        return data

    def service_fields(self) -> dict[str, Any]:
        data = self.cleaned_data
        scope = data["scope"]
        return {
            "user": data["user"], "group": data["group"], "role": data["role"],
            "department": self._departments.get(scope), "project": self._projects.get(scope),
        }


class NotificationPreferenceForm(StyledForm):
    on_admitted = forms.BooleanField(required=False, label="A workload of mine is admitted (gets its GPUs)")
    on_preempted = forms.BooleanField(required=False, label="A workload of mine is preempted")
    on_finished = forms.BooleanField(required=False, label="A workload of mine finishes successfully")
    on_failed = forms.BooleanField(required=False, label="A workload of mine fails")
    on_idle = forms.BooleanField(required=False, label="A workload of mine holds GPUs it does not use (held but idle)")


class _ScopeChoices:
    """Everything, then departments, then projects, as one grouped choice ("department:<id>", "project:<id>")."""

    def __init__(self) -> None:
        department_model, project_model = scope_models()
        self.departments = {f"department:{d.pk}": d for d in department_model.objects.order_by("name")}
        self.projects = {f"project:{p.pk}": p for p in project_model.objects.select_related("department")
                         .order_by("department__name", "name")}

    def choices(self) -> list[Any]:
        result: list[Any] = [("everything", "Everything")]
        if self.departments:
            result.append(("Departments", [(key, d.name) for key, d in self.departments.items()]))
        if self.projects:
            result.append(("Projects", [(key, f"{p.department.name} / {p.name}") for key, p in self.projects.items()]))
        return result


class GroupRoleRuleForm(VersionedForm):
    group_pattern = forms.CharField(max_length=200, label="IdP group",
                                    help_text="A group name as the identity provider sends it, or a pattern: * any "
                                              "characters, ? one character (case-sensitive).")
    role = forms.ChoiceField(choices=Role.choices)
    scope = forms.ChoiceField(help_text="The role applies to this scope and everything below it.")
    description = forms.CharField(max_length=200, required=False, help_text="Why the rule exists (optional).")

    def __init__(self, *args: Any, rule: Any = None, **kwargs: Any) -> None:
        if rule is not None and "initial" not in kwargs:
            scope = f"project:{rule.project_id}" if rule.project_id else (
                f"department:{rule.department_id}" if rule.department_id else "everything")
            kwargs["initial"] = {"group_pattern": rule.group_pattern, "role": rule.role, "scope": scope,
                                 "description": rule.description}
        super().__init__(*args, **kwargs)
        if rule is not None:
            self.carry_version(rule)
        self._scopes = _ScopeChoices()
        cast(forms.ChoiceField, self.fields["scope"]).choices = self._scopes.choices()

    def service_fields(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {"group_pattern": data["group_pattern"], "role": data["role"], "description": data["description"],
                "department": self._scopes.departments.get(data["scope"]),
                "project": self._scopes.projects.get(data["scope"])}


class PersonalTokenForm(StyledForm):
    name = forms.CharField(max_length=100, help_text="What will use it: a laptop, a CI pipeline, a notebook.")
    expires_on = forms.DateField(required=False, label="Expires on",
                                 widget=forms.DateInput(attrs={"type": "date"}),
                                 help_text="Empty: the default lifetime.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        latest = timezone.now().date() + datetime.timedelta(days=settings.API_TOKEN_MAX_DAYS)
        # The service refuses a day past the maximum; the last representable day must not overflow before it does.
        self.fields["expires_on"].validators.append(MaxValueValidator(
            datetime.date.max - datetime.timedelta(days=1), f"Pick a day up to {latest:%Y-%m-%d}."))
        self.fields["expires_on"].help_text = (
            f"The token works until the end of that day (UTC). Empty: {settings.API_TOKEN_DEFAULT_DAYS} days; at most "
            f"{settings.API_TOKEN_MAX_DAYS} days (until {latest:%Y-%m-%d}).")

    def expires_at(self) -> datetime.datetime | None:
        day = self.cleaned_data.get("expires_on")
        if day is None:
            return None
        return datetime.datetime.combine(day + datetime.timedelta(days=1), datetime.time.min, tzinfo=datetime.UTC)
