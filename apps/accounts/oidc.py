"""OpenID Connect single sign-on through mozilla-django-oidc: the authorization code flow with PKCE and a nonce.

The ID token is verified (signature from the provider's JWKS, expiry and issue time within OIDC_CLOCK_LEEWAY seconds
of the portal's clock, nonce, and here also issuer and audience);
its claims (with the userinfo endpoint's filling gaps, when one is configured) create or update the user and bring
the user's rule-made role bindings in step with the groups claim (services.oidc_sign_in).
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from apps.core.actors import Actor

from . import services
from .backends import refusal, refuse

logger = logging.getLogger("apps.accounts.signin")


def _failed(provider: str) -> str:
    return f"Sign-in with {provider} failed. Try again, or ask an admin if it keeps failing."


class PortalOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend, keyed on the identity (issuer, subject) rather than the e-mail address."""

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Actor | None:
        if request is None or not settings.OIDC_ENABLED or "password" in kwargs or "username" in kwargs:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except (requests.RequestException, SuspiciousOperation, jwt.PyJWTError, ValueError, KeyError) as exc:
            logger.warning("single sign-on failed: %s: %s", type(exc).__name__, exc)
            refuse(request, _failed(settings.OIDC_PROVIDER_NAME))
            return None

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        """The signature and the time claims, as mozilla-django-oidc checks them but with a clock leeway: PyJWT
        refuses an `iat` even a second in its future, so an identity provider whose clock runs ahead of the portal's
        would fail every sign-in. `exp` and `iat` are required (OpenID Connect Core 1.0, section 2)."""
        algorithm = jwt.get_unverified_header(payload).get("alg")
        if algorithm != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"ID token algorithm {algorithm!r} is not {self.OIDC_RP_SIGN_ALGO!r}")
        try:
            return jwt.decode(payload, key, algorithms=[algorithm], leeway=settings.OIDC_CLOCK_LEEWAY,
                              options={"verify_aud": False, "require": ["exp", "iat"]})  # audience: verify_token
        except jwt.DecodeError as exc:
            raise SuspiciousOperation("ID token signature verification failed") from exc

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload = super().verify_token(token, **kwargs)
        if settings.OIDC_OP_ISSUER and payload.get("iss") != settings.OIDC_OP_ISSUER:
            raise SuspiciousOperation(f"ID token issuer {payload.get('iss')!r} is not {settings.OIDC_OP_ISSUER!r}")
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if settings.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("ID token was not issued to this portal (audience)")
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Actor | None:
        claims = dict(payload)
        if settings.OIDC_OP_USER_ENDPOINT:
            for name, value in self.get_userinfo(access_token, id_token, payload).items():
                claims.setdefault(name, value)
        groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
        if isinstance(groups, str):
            groups = [groups]
        username = claims.get(settings.OIDC_USERNAME_CLAIM)
        try:
            user = services.oidc_sign_in(
                issuer=str(claims.get("iss") or settings.OIDC_OP_ISSUER), subject=str(claims.get("sub") or ""),
                username=username if isinstance(username, str) else "",
                email=_text(claims.get("email")), first_name=_text(claims.get("given_name")),
                last_name=_text(claims.get("family_name")), groups=groups if isinstance(groups, list) else [],
            )
        except services.SignInRefused as exc:
            logger.warning("refused single sign-on of %r (sub %r): %s", username, claims.get("sub"), exc)
            refuse(self.request, f"Sign-in with {settings.OIDC_PROVIDER_NAME} refused: {exc}")
            return None
        logger.info("single sign-on as %r with groups %s", user.get_username(), groups)
        return user


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class PortalOIDCAuthenticateView(OIDCAuthenticationRequestView):
    """Starts the code flow: redirects to the identity provider (404 while single sign-on is not configured)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        return super().get(request)


class PortalOIDCCallbackView(OIDCAuthenticationCallbackView):
    """Where the identity provider sends the browser back; a failure says why on the login page."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        if request.GET.get("error"):
            logger.warning("identity provider answered %s: %s", request.GET.get("error"),
                           request.GET.get("error_description", ""))
        return super().get(request)

    def login_failure(self) -> HttpResponse:
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            message = "Your portal account is deactivated; ask an admin."
        else:
            message = refusal(self.request) or _failed(settings.OIDC_PROVIDER_NAME)
        messages.error(self.request, message)
        return super().login_failure()
