"""API authentication by personal access token: `Authorization: Token <secret>` (or `Bearer <secret>`)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from apps.core.actors import Actor

from . import services
from .models import PersonalAccessToken

KEYWORDS = (b"token", b"bearer")


def _presented_secret(request: Request) -> str | None:
    """The secret in the Authorization header, None when the header names another scheme or none."""
    parts = get_authorization_header(request).split()
    if not parts or parts[0].lower() not in KEYWORDS:
        return None
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed("Invalid token header: give the scheme, one space and the token.")
    try:
        return parts[1].decode("ascii")
    except UnicodeError:
        raise exceptions.AuthenticationFailed("Invalid token.") from None


class PersonalTokenAuthentication(BaseAuthentication):
    """Looks the token up by the digest of the presented secret (one query, with its user).

    Unknown, revoked and expired tokens, and tokens of deactivated users, answer 401 with a `WWW-Authenticate`
    challenge; requests that present no token fall through to session authentication, and answer the same 401 when
    no session signs them in either.
    """

    def authenticate(self, request: Request) -> tuple[Actor, PersonalAccessToken] | None:
        secret = _presented_secret(request)
        if secret is None:
            return None
        token = (PersonalAccessToken.objects.select_related("user")
                 .filter(digest=services.token_digest(secret)).first())
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        now = timezone.now()
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This token has been revoked.")
        if token.expires_at <= now:
            raise exceptions.AuthenticationFailed("This token has expired; create a new one.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        services.personal_token_touch(token=token, now=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        # Every refused call without valid credentials (none, or a bad token) answers 401 with this challenge
        # (RFC 9110 section 11.6.1): a script can tell "sign in" from "not allowed" (403).
        return 'Token realm="api"'


class PersonalTokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes the token header (securitySchemes.tokenAuth)."""

    target_class = PersonalTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "A personal access token: `Token <secret>` (or `Bearer <secret>`)."}
