"""Password sign-in: optional (settings.LOCAL_LOGIN), and never for the demo accounts in production mode."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from apps.core.actors import Actor

logger = logging.getLogger("apps.accounts.signin")

# The accounts `make run` seeds (apps/org/demo.py) and their shared password. Outside the demo they must not work,
# even when a database seeded for a demo ends up in production.
DEMO_PASSWORD = "demo"  # noqa: S105 - a published demo password; refused in production (see PasswordBackend)
DEMO_USERNAMES = frozenset({"admin", "deptadmin", "lead", "alice", "bob", "carol", "viewer"})

LOCAL_LOGIN_OFF = "Password sign-in is turned off here: use the single sign-on button."
DEMO_REFUSED = ("Demo accounts cannot sign in to a production portal. Sign in with your own account, and ask an "
                "admin to remove or re-password the demo accounts.")


def refuse(request: HttpRequest | None, message: str) -> None:
    """Remember why a sign-in was refused, for the login page or the API to say (authenticate only returns None)."""
    if request is not None:
        request.portal_sign_in_refusal = message  # type: ignore[attr-defined]


def refusal(request: HttpRequest | None) -> str | None:
    return getattr(request, "portal_sign_in_refusal", None)


def is_demo_account(user: Actor, password: str | None) -> bool:
    return user.get_username() in DEMO_USERNAMES and password == DEMO_PASSWORD


class PasswordBackend(ModelBackend):
    """Django's username + password check, when local passwords are on."""

    def authenticate(self, request: HttpRequest | None, username: str | None = None, password: str | None = None,
                     **kwargs: Any) -> Actor | None:
        if username is None and password is None:
            return None  # not a password attempt (single sign-on passes other credentials)
        if not settings.LOCAL_LOGIN:
            refuse(request, LOCAL_LOGIN_OFF)
            return None
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and settings.PRODUCTION and is_demo_account(user, password):
            logger.warning("refused a demo-account sign-in as %r in production mode from %s", user.get_username(),
                           request.META.get("REMOTE_ADDR") if request is not None else "?")
            refuse(request, DEMO_REFUSED)
            raise PermissionDenied(DEMO_REFUSED)  # stops the other backends; counts as a failed attempt
        return user
