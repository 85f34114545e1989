"""Django admin pages for sign-in: API tokens (read-only, with a revoke action) and single-sign-on identities.

Lockouts are django-axes' "Access attempts" (delete one to unlock; `manage.py axes_reset_username NAME` does it
from a shell). Role bindings and IdP group rules are edited in the portal's own pages, which audit every change.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from . import services
from .models import ExternalIdentity, PersonalAccessToken


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
            services.personal_token_revoke(actor=request.user, token=token)
        messages.success(request, f"Revoked {queryset.count()} token(s).")


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    list_display = ["user", "issuer", "subject", "last_sign_in_at"]
    search_fields = ["user__username", "subject"]
    readonly_fields = ["user", "issuer", "subject", "groups", "last_sign_in_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
