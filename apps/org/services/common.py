"""What every organisation service shares: the access refusal and the collected field errors."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import Model

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.scopes import Scoped

DENIED = "You may not make this change."


def _require(actor: Actor, action: Action, obj: Scoped | None = None) -> None:
    access.require(actor, action, obj, DENIED)


def _field_errors(obj: Model, errors: dict[str, list[str]]) -> dict[str, list[str]]:
    """`errors` plus every field and constraint error of full_clean (a change refused for several reasons says them
    all at once)."""
    try:
        obj.full_clean()
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            errors.setdefault(name, []).extend(messages)
    return errors
