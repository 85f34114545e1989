"""Sign-in and browser-security middleware: session idle timeout and maximum age, Permissions-Policy."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode

from .signals import LAST_SEEN_AT, SIGNED_IN_AT

# Requests the page makes by itself (htmx polling) say so; they do not count as activity (static/js/portal.js).
BACKGROUND_HEADER = "HTTP_X_PORTAL_BACKGROUND"


class SessionIdleTimeoutMiddleware:
    """Signs a browser session out after settings.SESSION_IDLE_TIMEOUT seconds without activity (sliding), and
    after settings.SESSION_MAX_AGE seconds whatever happened. Token-authenticated API calls carry no session."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            expired = self._expired(request)
            if expired:
                return self._sign_out(request, expired)
        return self.get_response(request)

    @staticmethod
    def _expired(request: HttpRequest) -> str | None:
        session = request.session
        now = int(time.time())
        signed_in_at = session.get(SIGNED_IN_AT)
        last_seen_at = session.get(LAST_SEEN_AT)
        if not isinstance(signed_in_at, int) or not isinstance(last_seen_at, int):
            # A session from before these stamps existed: start counting now.
            session[SIGNED_IN_AT] = session[LAST_SEEN_AT] = now
            return None
        if now - signed_in_at >= settings.SESSION_MAX_AGE:
            hours = settings.SESSION_MAX_AGE / 3600
            return f"You were signed out: sessions last at most {hours:g} hours. Please sign in again."
        if now - last_seen_at >= settings.SESSION_IDLE_TIMEOUT:
            minutes = settings.SESSION_IDLE_TIMEOUT / 60
            return f"You were signed out after {minutes:g} minutes without activity. Please sign in again."
        if not request.META.get(BACKGROUND_HEADER) and now - last_seen_at >= settings.SESSION_IDLE_TOUCH_INTERVAL:
            session[LAST_SEEN_AT] = now  # sliding; written at most once a minute
        return None

    def _sign_out(self, request: HttpRequest, message: str) -> HttpResponse:
        logout(request)
        if request.path.startswith("/api/"):
            return self.get_response(request)  # carries on unauthenticated: a token may still authenticate it
        messages.info(request, message)
        login = reverse(settings.LOGIN_URL)
        if request.headers.get("HX-Request"):
            response = HttpResponse(status=204)
            response["HX-Redirect"] = login  # the whole page goes to the login page, not a fragment of it
            return response
        if request.method == "GET":
            return redirect(f"{login}?{urlencode({'next': request.get_full_path()})}")
        return redirect(login)


class PermissionsPolicyMiddleware:
    """Sends Permissions-Policy from settings.PERMISSIONS_POLICY ({feature: [allowed origins]}; [] denies)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.header = ", ".join(
            f"{feature}=({' '.join(origins)})" for feature, origins in settings.PERMISSIONS_POLICY.items()
        )

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.header:
            response.headers.setdefault("Permissions-Policy", self.header)
        return response
