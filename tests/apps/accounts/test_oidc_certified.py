"""Single sign-on against an independent, OpenID Certified provider (panva's oidc-provider in Node on loopback,
tests/oidc_certified): the whole code flow with PKCE through the portal's login, its group rules, and the ID tokens
it must refuse (tampered, unsigned, expired, issued in the future) or accept from a provider whose clock is a few
seconds ahead (OIDC_CLOCK_LEEWAY). Nothing of the portal is mocked."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.test import Client

from apps.accounts import services
from apps.accounts.models import ExternalIdentity, RoleBinding
from apps.accounts.oidc import PortalOIDCBackend
from apps.org.models import Department, Project
from tests.oidc_certified.fixture import PORTAL_CALLBACK

pytestmark = pytest.mark.slow

AHEAD_WITHIN_LEEWAY = 3  # seconds: an NTP-less IdP host drifts like this
AHEAD_BEYOND_LEEWAY = 600
BEHIND_PAST_EXPIRY = -1800  # the provider's ID tokens live 600 s: these expired 20 minutes ago


@pytest.fixture
def configure(certified_oidc, settings, demo):
    """configure(clock_offset) -> the provider with that clock, the portal pointed at it (production mode, local
    passwords off)."""

    def point_at(clock_offset: int = 0):
        provider = certified_oidc(clock_offset)
        for name, value in provider.portal_settings().items():
            setattr(settings, name, value)
        settings.PRODUCTION, settings.LOCAL_LOGIN = True, False
        return provider

    return point_at


def sign_in(provider, username: str) -> tuple[Client, object]:
    """The portal's login through the provider; the portal client and the callback's answer."""
    portal = Client()
    start = portal.get("/accounts/oidc/authenticate/?next=/workloads/")
    assert start.status_code == 302 and start["Location"].startswith(provider.discovery["authorization_endpoint"])
    assert "code_challenge=" in start["Location"] and "nonce=" in start["Location"]
    back = urlsplit(provider.sign_in(start["Location"], username))
    assert f"{back.scheme}://{back.netloc}{back.path}" == PORTAL_CALLBACK
    return portal, portal.get(f"{back.path}?{back.query}")


def refused(portal: Client, response) -> str:
    """The login page's message after a refused sign-in (asserting nobody is signed in)."""
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert "_auth_user_id" not in portal.session
    return portal.get("/accounts/login/").content.decode()


def id_token(provider, username: str) -> tuple[str, str]:
    """A genuine ID token issued to the portal's client (the code flow played by hand) and its nonce."""
    verifier, nonce = secrets.token_urlsafe(48), secrets.token_urlsafe(16)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    authorize = provider.discovery["authorization_endpoint"] + "?" + urlencode({
        "response_type": "code", "client_id": provider.client_id, "redirect_uri": PORTAL_CALLBACK,
        "scope": "openid email profile groups", "state": "s", "nonce": nonce, "code_challenge": challenge,
        "code_challenge_method": "S256"})
    code = parse_qs(urlsplit(provider.sign_in(authorize, username)).query)["code"][0]
    tokens = requests.post(provider.discovery["token_endpoint"], timeout=10, data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": PORTAL_CALLBACK,
        "client_id": provider.client_id, "client_secret": provider.client_secret, "code_verifier": verifier})
    assert tokens.status_code == 200, tokens.text
    return tokens.json()["id_token"], nonce


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def bindings(user) -> set[tuple[str, str, str]]:
    return {(b.role, b.scope_display, b.source) for b in RoleBinding.objects.filter(user=user)
            .select_related("department", "project")}


def test_sign_in_creates_the_user_and_the_group_rules_give_the_roles(configure, demo):
    provider = configure()
    admin = demo["admin"]
    services.group_role_rule_create(actor=admin, group_pattern="gpu-vision", role="researcher",
                                    project=Project.objects.get(slug="vision"))
    services.group_role_rule_create(actor=admin, group_pattern="research-lead*", role="team_lead",
                                    department=Department.objects.get(slug="research"))
    provider.set_user("nina", groups=["gpu-vision", "research-leads", "other"], email="nina@example.org",
                      given_name="Nina", family_name="Simone")
    portal, response = sign_in(provider, "nina")
    assert response.status_code == 302 and response["Location"] == "/workloads/"
    nina = get_user_model().objects.get(username="nina")
    assert (nina.email, nina.first_name, nina.last_name) == ("nina@example.org", "Nina", "Simone")
    identity = ExternalIdentity.objects.get(user=nina)
    assert (identity.issuer, identity.subject) == (provider.issuer, "sub-" + b"nina".hex())
    assert bindings(nina) == {("researcher", "project:vision", "group_rule"),
                              ("team_lead", "department:research", "group_rule")}
    assert portal.get("/api/v1/me/").json()["username"] == "nina"
    # The provider drops a group: the next sign-in drops the role it gave.
    provider.set_user("nina", groups=["gpu-vision"])
    _, again = sign_in(provider, "nina")
    assert again["Location"] == "/workloads/"
    assert bindings(nina) == {("researcher", "project:vision", "group_rule")}


def test_a_tampered_id_token_is_refused(configure):
    provider = configure()
    provider.set_user("oscar", groups=["staff"])
    token, nonce = id_token(provider, "oscar")
    assert PortalOIDCBackend().verify_token(token, nonce=nonce)["groups"] == ["staff"]  # genuine: accepted
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = ".".join([header, b64({**claims, "groups": ["admins"]}), signature])
    with pytest.raises(SuspiciousOperation):
        PortalOIDCBackend().verify_token(forged, nonce=nonce)


def test_an_unsigned_alg_none_id_token_is_refused(configure):
    provider = configure()
    provider.set_user("pia", groups=["staff"])
    token, nonce = id_token(provider, "pia")
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    unsigned = f"{b64({**header, 'alg': 'none'})}.{b64({**claims, 'groups': ['admins']})}."
    with pytest.raises(SuspiciousOperation):
        PortalOIDCBackend().verify_token(unsigned, nonce=nonce)


def test_an_expired_id_token_is_refused(configure, caplog):
    provider = configure(BEHIND_PAST_EXPIRY)
    provider.set_user("quinn", groups=[])
    with caplog.at_level(logging.WARNING, logger="apps.accounts.signin"):
        portal, response = sign_in(provider, "quinn")
    assert "Sign-in with Certified IdP failed" in refused(portal, response)
    assert "ExpiredSignatureError" in caplog.text
    assert not get_user_model().objects.filter(username="quinn").exists()


def test_a_provider_clock_a_few_seconds_ahead_signs_in_within_the_leeway(configure, settings):
    assert settings.OIDC_CLOCK_LEEWAY == 60  # the default
    provider = configure(AHEAD_WITHIN_LEEWAY)
    provider.set_user("rosa", groups=[])
    _, response = sign_in(provider, "rosa")
    assert response.status_code == 302 and response["Location"] == "/workloads/"
    assert get_user_model().objects.filter(username="rosa").exists()


def test_without_leeway_the_same_few_seconds_refuse_the_sign_in(configure, settings, caplog):
    settings.OIDC_CLOCK_LEEWAY = 0
    provider = configure(AHEAD_WITHIN_LEEWAY)
    provider.set_user("sam", groups=[])
    with caplog.at_level(logging.WARNING, logger="apps.accounts.signin"):
        portal, response = sign_in(provider, "sam")
    refused(portal, response)
    assert "not yet valid (iat)" in caplog.text


def test_a_provider_clock_far_ahead_is_refused(configure, caplog):
    provider = configure(AHEAD_BEYOND_LEEWAY)
    provider.set_user("tess", groups=[])
    with caplog.at_level(logging.WARNING, logger="apps.accounts.signin"):
        portal, response = sign_in(provider, "tess")
    assert "Sign-in with Certified IdP failed" in refused(portal, response)
    assert "not yet valid (iat)" in caplog.text
    assert not get_user_model().objects.filter(username="tess").exists()
