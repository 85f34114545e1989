"""Django admin pages for sign-in: API tokens (read-only, with a revoke action) and single-sign-on identities.

Lockouts are django-axes' "Access attempts" (delete one to unlock; `manage.py axes_reset_username NAME` does it
from a shell). Role bindings and IdP group rules are edited in the portal's own pages; they are here too for
break-glass use (a superuser restoring access), and every add, change and delete goes through the same services,
so each leaves its audit row.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.core.actors import signed_in

from . import services
from .models import ExternalIdentity, GroupRoleRule, PersonalAccessToken, RoleBinding


@admin.register(PersonalAccessToken)
class PersonalAccessTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = ["user", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]
    exclude = ["digest"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tokens are created by their owners, who alone see the secret

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[PersonalAccessToken]) -> None:
        for token in queryset:
            services.personal_token_revoke(actor=signed_in(request.user), token=token)
        messages.success(request, f"Revoked {queryset.count()} token(s).")


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    list_display = ["user", "issuer", "subject", "last_sign_in_at"]
    search_fields = ["user__username", "subject"]
    readonly_fields = ["user", "issuer", "subject", "groups", "last_sign_in_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


def _scope_of(data: dict[str, Any]) -> str:
    """The scope follows from the department or project given, as in the services."""
    return "project" if data.get("project") else "department" if data.get("department") else "everything"


class RoleBindingForm(forms.ModelForm):
    class Meta:
        model = RoleBinding
        fields = ["user", "group", "role", "department", "project"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        self.instance.scope = _scope_of(data)
        if data.get("department") and data.get("project"):
            raise forms.ValidationError("Choose a department or a project as the scope, not both.")
        if services.role_binding_exists(user=data.get("user"), group=data.get("group"), role=data.get("role", ""),
                                        department=data.get("department"), project=data.get("project")):
            raise forms.ValidationError("This binding already exists.")
        return data


@admin.register(RoleBinding)
class RoleBindingAdmin(admin.ModelAdmin):
    """Add and delete only (a binding is changed by replacing it), through the audited services."""

    form = RoleBindingForm
    list_display = ["__str__", "role", "scope", "source", "created_at"]
    list_filter = ["role", "scope", "source"]
    search_fields = ["user__username", "group__name"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: RoleBinding, form: Any, change: bool) -> None:
        created = services.role_binding_create(actor=signed_in(request.user), role=obj.role, user=obj.user,
                                               group=obj.group, department=obj.department, project=obj.project)
        obj.pk = created.pk

    def delete_model(self, request: HttpRequest, obj: RoleBinding) -> None:
        self.delete_queryset(request, RoleBinding.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RoleBinding]) -> None:
        for binding in queryset:
            try:
                services.role_binding_delete(actor=signed_in(request.user), binding=binding)
            except ValidationError as error:  # the last admin binding, or one an IdP group rule keeps
                self.message_user(request, f"{binding} kept: {' '.join(error.messages)}", messages.ERROR)


class GroupRoleRuleForm(forms.ModelForm):
    class Meta:
        model = GroupRoleRule
        fields = ["group_pattern", "role", "department", "project", "description"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        self.instance.scope = _scope_of(data)
        errors = services.group_role_rule_errors(
            group_pattern=(data.get("group_pattern") or "").strip(), role=data.get("role", ""),
            department=data.get("department"), project=data.get("project"), exclude_pk=self.instance.pk)
        for field, messages_ in errors.items():
            for message in messages_:
                self.add_error(None if field == "__all__" else field, message)
        return data


@admin.register(GroupRoleRule)
class GroupRoleRuleAdmin(admin.ModelAdmin):
    form = GroupRoleRuleForm
    list_display = ["group_pattern", "role", "scope", "description", "updated_at"]
    search_fields = ["group_pattern", "description"]

    def save_model(self, request: HttpRequest, obj: GroupRoleRule, form: Any, change: bool) -> None:
        if change:
            services.group_role_rule_update(
                actor=signed_in(request.user), rule=GroupRoleRule.objects.get(pk=obj.pk),
                group_pattern=obj.group_pattern, role=obj.role, department=obj.department, project=obj.project,
                description=obj.description)
        else:
            obj.pk = services.group_role_rule_create(
                actor=signed_in(request.user), group_pattern=obj.group_pattern, role=obj.role,
                department=obj.department, project=obj.project, description=obj.description).pk

    def delete_model(self, request: HttpRequest, obj: GroupRoleRule) -> None:
        services.group_role_rule_delete(actor=signed_in(request.user), rule=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[GroupRoleRule]) -> None:
        for rule in queryset:
            services.group_role_rule_delete(actor=signed_in(request.user), rule=rule)
