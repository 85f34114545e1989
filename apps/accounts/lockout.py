"""How django-axes' lockouts look (settings.AXES_LOCKOUT_CALLABLE) and which attempts it counts."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from .views import login_context


def lockout_message(username: str | None = None) -> str:
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    who = f"the username {username!r}" if username else "this username"
    return (f"Too many failed sign-ins: {who} is locked out from your address for {minutes} minutes after the last "
            "attempt. Try again later, or ask an admin to unlock it.")


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: dict[str, Any] | None = None) -> HttpResponse:
    """429 with a clear message: JSON for the API, the login page otherwise."""
    username = (credentials or {}).get("username")
    message = lockout_message(username if isinstance(username, str) else None)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=429)
    return render(request, "accounts/login.html", login_context(request, lockout=message), status=429)


def not_a_password_attempt(request: HttpRequest, credentials: dict[str, Any] | None) -> bool:
    """Axes counts password attempts only: single sign-on callbacks are the identity provider's to throttle."""
    return not (credentials or {}).get("password")


def client_ip(request: HttpRequest) -> str:
    """The address lockouts count by: the connection's, or behind settings.LOGIN_PROXY_COUNT proxies the one the
    outermost proxy saw (each appends to X-Forwarded-For; anything further left came from the client)."""
    remote = request.META.get("REMOTE_ADDR", "") or ""
    proxies = settings.LOGIN_PROXY_COUNT
    if proxies <= 0:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    return forwarded[-proxies] if len(forwarded) >= proxies else remote
