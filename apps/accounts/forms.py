"""Forms for the access pages: shape only; the access module and services decide what may be granted."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError

from apps.core.forms import StyledForm

from . import access
from .access import Action
from .models import Role, scope_models


class RoleBindingForm(StyledForm):
    username = forms.CharField(required=False, max_length=150, label="User",
                               help_text="The user's login name; leave empty to bind a group instead.")
    group = forms.ModelChoiceField(queryset=Group.objects.all(), required=False, empty_label="(none)",
                                   help_text="Bind the role to everyone in this group.")
    role = forms.ChoiceField()
    scope = forms.ChoiceField(help_text="The role applies to this scope and everything below it.")

    def __init__(self, *args: Any, actor: Any, **kwargs: Any) -> None:
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
