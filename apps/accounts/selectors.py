"""Reads of accounts' own rows for its pages (role bindings and tokens are scoped in the access module)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, QuerySet

from apps.core.actors import Actor

from .models import GroupRoleRule, NotificationPreference


def notification_preference(user: Actor | int) -> NotificationPreference | None:
    """The e-mail opt-ins of the user (or the user of that id), None until they first save them (nothing is sent
    then)."""
    return NotificationPreference.objects.filter(user=user).first()


def notification_preferences(user_ids: Iterable[int]) -> dict[int, NotificationPreference]:
    """User id -> their e-mail opt-ins, for those of these users who saved them; one query."""
    ids = set(user_ids)
    if not ids:
        return {}
    return {preference.user_id: preference for preference in NotificationPreference.objects.filter(user_id__in=ids)}


def group_rules() -> QuerySet[GroupRoleRule]:
    """Every IdP group rule with its scope and how many bindings it holds (only rule managers call it)."""
    return GroupRoleRule.objects.select_related("department", "project__department").annotate(
        binding_count=Count("bindings"))
