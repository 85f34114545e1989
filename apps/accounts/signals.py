"""Sign-in signal receivers (connected in AccountsConfig.ready)."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest

from apps.core.actors import Actor

SIGNED_IN_AT = "_portal_signed_in_at"
LAST_SEEN_AT = "_portal_last_seen_at"

logger = logging.getLogger("apps.accounts.signin")


@receiver(user_logged_in, dispatch_uid="portal_stamp_session")
def stamp_session(sender: Any, request: HttpRequest | None, user: Actor, **kwargs: Any) -> None:
    """The session's start and last activity, for SessionIdleTimeoutMiddleware."""
    if request is not None and hasattr(request, "session"):
        now = int(time.time())
        request.session[SIGNED_IN_AT] = now
        request.session[LAST_SEEN_AT] = now


@receiver(user_login_failed, dispatch_uid="portal_log_failed_sign_in")
def log_failed_sign_in(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None,
                       **kwargs: Any) -> None:
    if "password" in credentials:
        logger.info("failed password sign-in as %r from %s", credentials.get("username"),
                    request.META.get("REMOTE_ADDR") if request is not None else "?")
