"""Single sign-on end to end through a real OpenID Connect provider (django-oauth-toolkit on loopback): the portal's
login redirects to it, its login form is filled like a browser would, and its code comes back to the portal, which
fetches and verifies the ID token over HTTP. Nothing of the portal is mocked."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.test import Client, override_settings

from apps.accounts import services
from apps.accounts.models import ExternalIdentity, GroupRoleRule, RoleBinding
from apps.accounts.oidc import PortalOIDCBackend
from apps.core.models import AuditEvent
from tests.oidc_provider.fixture import callback_path
from tests.oidc_provider.serve import OTHER_REDIRECT


@pytest.fixture
def sso(oidc_provider, settings, demo):
    """The portal configured for the provider, in production mode with local passwords off."""
    for name, value in oidc_provider.portal_settings().items():
        setattr(settings, name, value)
    settings.PRODUCTION = True
    settings.LOCAL_LOGIN = False
    return oidc_provider


def sign_in(provider, username: str, next_url: str = "/workloads/") -> tuple[Client, object]:
    """The whole code flow; returns the portal client and the callback's response."""
    portal = Client()
    start = portal.get(f"/accounts/oidc/authenticate/?next={next_url}")
    assert start.status_code == 302
    assert start["Location"].startswith(f"{provider.issuer}/authorize/?")
    assert "code_challenge=" in start["Location"] and "nonce=" in start["Location"]
    back = provider.sign_in(start["Location"], username)
    return portal, portal.get(callback_path(back))


def bindings(user) -> set[tuple[str, str, str]]:
    return {(b.role, b.scope_display, b.source) for b in RoleBinding.objects.filter(user=user)
            .select_related("department", "project")}


@pytest.fixture
def rules(demo, sso):
    admin = demo["admin"]
    vision = RoleBinding._meta.get_field("project").related_model.objects.get(slug="vision")
    research = RoleBinding._meta.get_field("department").related_model.objects.get(slug="research")
    return {
        "vision": services.group_role_rule_create(actor=admin, group_pattern="gpu-vision", role="researcher",
                                                  project=vision),
        "leads": services.group_role_rule_create(actor=admin, group_pattern="research-lead*", role="team_lead",
                                                 department=research),
        "viewers": services.group_role_rule_create(actor=admin, group_pattern="staff", role="viewer"),
    }


def test_login_page_offers_single_sign_on(sso):
    page = Client().get("/accounts/login/?next=/workloads/").content.decode()
    assert "Sign in with Example Org" in page
    assert 'href="/accounts/oidc/authenticate/?next=/workloads/"' in page
    assert 'name="password"' not in page  # local passwords are off in production


def test_first_sign_in_creates_the_user_and_rule_made_bindings(sso, rules):
    sso.set_user("dana", groups=["gpu-vision", "research-leads", "staff", "unrelated"], email="dana@example.org",
                 first_name="Dana", last_name="Scully")
    portal, response = sign_in(sso, "dana")
    assert response.status_code == 302 and response["Location"] == "/workloads/"
    dana = get_user_model().objects.get(username="dana")
    assert (dana.email, dana.first_name, dana.last_name) == ("dana@example.org", "Dana", "Scully")
    assert not dana.has_usable_password()
    identity = ExternalIdentity.objects.get(user=dana)
    assert identity.issuer == sso.issuer and identity.groups == ["gpu-vision", "research-leads", "staff", "unrelated"]
    assert bindings(dana) == {("researcher", "project:vision", "group_rule"),
                              ("team_lead", "department:research", "group_rule"),
                              ("viewer", "everything", "group_rule")}
    assert RoleBinding.objects.get(user=dana, role="researcher").rule == rules["vision"]
    # Signed in for real: the session reaches pages her bindings open.
    assert portal.get("/workloads/submit/training/").status_code == 200
    assert portal.get("/api/v1/me/").json()["username"] == "dana"
    # Audited: the user and each binding the rules made.
    assert AuditEvent.objects.filter(action="user.create", object_id=str(dana.pk)).count() == 1
    assert AuditEvent.objects.filter(action="role_binding.create", after__user_id=dana.pk,
                                     after__source="group_rule").count() == 3


def test_group_removed_at_the_provider_removes_its_binding_and_hand_made_ones_stay(sso, rules, demo):
    sso.set_user("eve", groups=["gpu-vision", "staff"])
    sign_in(sso, "eve")
    eve = get_user_model().objects.get(username="eve")
    nlp = RoleBinding._meta.get_field("project").related_model.objects.get(slug="nlp")
    by_hand = services.role_binding_create(actor=demo["admin"], user=eve, role="researcher", project=nlp)
    # The same role and scope a rule gives, also granted by hand: the hand-made one must survive the group's loss.
    vision_by_hand = services.role_binding_create(actor=demo["admin"], user=eve, role="viewer",
                                                  project=rules["vision"].project)
    sso.set_user("eve", groups=["staff"])
    _, response = sign_in(sso, "eve")
    assert response.status_code == 302
    assert bindings(eve) == {("viewer", "everything", "group_rule"), ("researcher", "project:nlp", "manual"),
                             ("viewer", "project:vision", "manual")}
    assert RoleBinding.objects.filter(pk__in=[by_hand.pk, vision_by_hand.pk]).count() == 2
    assert ExternalIdentity.objects.get(user=eve).groups == ["staff"]
    removed = AuditEvent.objects.get(action="role_binding.delete", before__user_id=eve.pk)
    assert removed.actor is None and removed.before["role"] == "researcher" and removed.before["source"] == "group_rule"
    # No groups at all: every rule-made binding goes, the hand-made ones stay.
    sso.set_user("eve", groups=[])
    sign_in(sso, "eve")
    assert bindings(eve) == {("researcher", "project:nlp", "manual"), ("viewer", "project:vision", "manual")}


def test_rule_changes_apply_at_once_from_the_groups_of_the_last_sign_in(sso, rules, demo):
    sso.set_user("fay", groups=["gpu-vision"])
    sign_in(sso, "fay")
    fay = get_user_model().objects.get(username="fay")
    assert bindings(fay) == {("researcher", "project:vision", "group_rule")}
    services.group_role_rule_update(actor=demo["admin"], rule=rules["vision"], group_pattern="gpu-*", role="viewer",
                                    project=rules["vision"].project)
    assert bindings(fay) == {("viewer", "project:vision", "group_rule")}
    services.group_role_rule_delete(actor=demo["admin"], rule=rules["vision"])
    assert bindings(fay) == set()
    assert not GroupRoleRule.objects.filter(pk=rules["vision"].pk).exists()


def test_existing_local_user_is_linked_and_a_second_identity_cannot_take_the_name(sso, rules, demo, settings):
    # alice exists (a demo user): her first single sign-on links her to the provider's identity for "alice".
    sso.set_user("alice", groups=["staff"], password="at-the-provider")
    _, response = sign_in(sso, "alice")
    assert response.status_code == 302 and response["Location"] == "/workloads/"
    alice = demo["alice"]
    assert ExternalIdentity.objects.get(user=alice).issuer == sso.issuer
    assert ("researcher", "project:vision", "manual") in bindings(alice)  # her hand-made binding is untouched
    # Another identity claiming the same username (here: the same provider, a different subject) is refused.
    ExternalIdentity.objects.filter(user=alice).update(subject="someone-else")
    portal, response = sign_in(sso, "alice")
    assert response["Location"] == "/accounts/login/"
    page = portal.get("/accounts/login/").content.decode()
    assert "linked to another single-sign-on identity" in page
    assert "_auth_user_id" not in portal.session


def test_inactive_user_is_refused(sso, rules):
    sso.set_user("gil", groups=["staff"])
    sign_in(sso, "gil")
    get_user_model().objects.filter(username="gil").update(is_active=False)
    portal, response = sign_in(sso, "gil")
    assert response["Location"] == "/accounts/login/"
    assert "deactivated" in portal.get("/accounts/login/").content.decode()
    assert "_auth_user_id" not in portal.session


def test_token_from_another_issuer_is_refused(sso, settings):
    """The ID token's issuer must be the configured one (checked by the portal's backend on top of the library)."""
    sso.set_user("hal", groups=[])
    settings.OIDC_OP_ISSUER = "https://idp.example.org/realms/other"
    portal, response = sign_in(sso, "hal")
    assert response["Location"] == "/accounts/login/"
    assert "Sign-in with Example Org failed" in portal.get("/accounts/login/").content.decode()
    assert not get_user_model().objects.filter(username="hal").exists()


def test_id_token_for_another_client_is_refused(sso):
    """A genuine ID token of the same provider, issued to another application, does not verify for the portal
    (mozilla-django-oidc skips the audience; the portal's backend checks it)."""
    sso.set_user("ida", groups=[])
    verifier, nonce = secrets.token_urlsafe(48), secrets.token_urlsafe(16)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    authorize = f"{sso.issuer}/authorize/?" + urlencode({
        "response_type": "code", "client_id": "another-app", "redirect_uri": OTHER_REDIRECT, "scope": "openid",
        "state": "s", "nonce": nonce, "code_challenge": challenge, "code_challenge_method": "S256"})
    code = parse_qs(urlsplit(sso.sign_in(authorize, "ida")).query)["code"][0]
    tokens = requests.post(f"{sso.issuer}/token/", timeout=10, data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": OTHER_REDIRECT, "client_id": "another-app",
        "client_secret": sso.client_secret, "code_verifier": verifier}).json()
    backend = PortalOIDCBackend()
    with pytest.raises(SuspiciousOperation, match="audience"):
        backend.verify_token(tokens["id_token"], nonce=nonce)
    # The same token passes every other check: only the audience made the difference.
    with override_settings(OIDC_RP_CLIENT_ID="another-app"):
        assert PortalOIDCBackend().verify_token(tokens["id_token"], nonce=nonce)["preferred_username"] == "ida"


def test_single_sign_on_is_off_until_configured(demo):
    assert Client().get("/accounts/oidc/authenticate/").status_code == 404
    assert Client().get("/accounts/oidc/callback/?code=x&state=y").status_code == 404
    assert "Sign in with" not in Client().get("/accounts/login/").content.decode()
