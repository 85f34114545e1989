"""Navigation entries the signed-in user's roles allow (the access module decides)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from .access import Action, can, can_anywhere, can_manage_budgets_somewhere, can_view_unmapped_work


def navigation(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)  # absent when a 400 comes before the authentication middleware
    if user is None or not user.is_authenticated:
        return {"nav": {}}
    return {
        "nav": {
            "manage_installation": can(user, Action.MANAGE),
            "manage_projects": can_anywhere(user, Action.MANAGE_PROJECTS),
            "edit_weights": can_anywhere(user, Action.EDIT_WEIGHT),
            "set_budgets": can_manage_budgets_somewhere(user),
            "manage_members": can_anywhere(user, Action.MANAGE_MEMBERS),
            "view_audit": can_anywhere(user, Action.VIEW_AUDIT),
            "view_workloads": can_anywhere(user, Action.VIEW),
            "submit": can_anywhere(user, Action.SUBMIT),
            "view_unmapped_work": can_view_unmapped_work(user),
        }
    }
