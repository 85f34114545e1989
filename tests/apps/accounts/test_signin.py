"""Password sign-in as organisations need it: lockout after repeated failures (django-axes) on the form and the
token endpoint, local passwords optional, demo accounts refused in production mode, sessions with an idle timeout
and a maximum age, and the browser-security headers."""

from __future__ import annotations

import logging
import time

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client, RequestFactory

from apps.accounts.backends import DEMO_REFUSED, DEMO_USERNAMES, LOCAL_LOGIN_OFF
from apps.accounts.lockout import client_ip
from apps.accounts.models import PersonalAccessToken
from apps.accounts.signals import LAST_SEEN_AT, SIGNED_IN_AT
from apps.org import demo as org_demo

LOGIN = "/accounts/login/"
TOKEN = "/api/v1/auth/token/"


def form_login(client: Client, username: str, password: str):
    return client.post(LOGIN, {"username": username, "password": password})


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def token_login(username: str, password: str, **extra):
    return Client().post(TOKEN, {"username": username, "password": password}, content_type="application/json",
                         **extra)


def test_demo_usernames_are_the_seeded_ones():
    assert {user.username for user in org_demo.USERS} == DEMO_USERNAMES
    assert org_demo.DEMO_PASSWORD == "demo"


# --- lockout --------------------------------------------------------------------------------------------------


def test_form_locks_out_after_five_failures_even_for_the_right_password(demo, settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    client = Client()
    for attempt in range(4):
        response = form_login(client, "alice", f"wrong-{attempt}")
        assert response.status_code == 200 and "Please enter a correct username and password" in response.text
    locked = form_login(client, "alice", "wrong-4")
    assert locked.status_code == 429
    assert "Too many failed sign-ins" in locked.text and "15 minutes" in locked.text
    assert 'id="id_username"' in locked.text  # the login page, saying why
    right = form_login(client, "alice", "demo")
    assert right.status_code == 429 and not signed_in(client)
    # Per username and address: bob, from the same address, still signs in.
    assert form_login(Client(), "bob", "demo").status_code == 302
    # An admin unlocks alice from a shell; then her password works at once.
    call_command("axes_reset_username", "alice")
    unlocked = Client()
    assert form_login(unlocked, "alice", "demo").status_code == 302 and signed_in(unlocked)


def test_other_address_is_not_locked_and_success_resets_the_count(demo):
    for attempt in range(5):
        form_login(Client(REMOTE_ADDR="10.0.0.1"), "carol", f"wrong-{attempt}")
    assert form_login(Client(REMOTE_ADDR="10.0.0.1"), "carol", "demo").status_code == 429
    assert form_login(Client(REMOTE_ADDR="10.0.0.2"), "carol", "demo").status_code == 302
    for attempt in range(4):
        form_login(Client(), "lead", f"wrong-{attempt}")
    assert form_login(Client(), "lead", "demo").status_code == 302  # the 4 failures are forgotten
    for attempt in range(4):
        assert form_login(Client(), "lead", f"wrong-again-{attempt}").status_code == 200


@pytest.mark.parametrize(("proxies", "forwarded", "expected"), [
    (0, "203.0.113.9", "10.1.1.1"),  # no proxy configured: X-Forwarded-For is the client's to forge, ignored
    (1, "198.51.100.7, 203.0.113.9", "203.0.113.9"),  # the address our one proxy saw, not what the client claimed
    (2, "198.51.100.7, 203.0.113.9, 10.0.0.5", "203.0.113.9"),
    (2, "203.0.113.9", "10.1.1.1"),  # fewer hops than proxies: fall back to the connection
])
def test_lockout_address_behind_proxies(settings, proxies, forwarded, expected):
    settings.LOGIN_PROXY_COUNT = proxies
    request = RequestFactory().post(LOGIN, REMOTE_ADDR="10.1.1.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


def test_forged_forwarded_for_does_not_escape_the_lockout(demo):
    for attempt in range(5):
        form_login(Client(HTTP_X_FORWARDED_FOR=f"198.51.100.{attempt}"), "alice", f"wrong-{attempt}")
    assert form_login(Client(HTTP_X_FORWARDED_FOR="198.51.100.99"), "alice", "demo").status_code == 429


def test_admin_sees_and_clears_lockouts_in_the_django_admin(demo, client_for):
    for attempt in range(5):
        form_login(Client(), "viewer", f"wrong-{attempt}")
    attempt = AccessAttempt.objects.get(username="viewer")
    admin = client_for("admin")
    listing = admin.get("/django-admin/axes/accessattempt/")
    assert listing.status_code == 200 and "viewer" in listing.text
    response = admin.post(f"/django-admin/axes/accessattempt/{attempt.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert form_login(Client(), "viewer", "demo").status_code == 302


def test_token_endpoint_locks_out_too(demo):
    for attempt in range(4):
        response = token_login("bob", f"wrong-{attempt}")
        assert response.status_code == 400 and "token" not in response.json()
    locked = token_login("bob", "wrong-4")
    assert locked.status_code == 429
    assert locked.json()["detail"].startswith("Too many failed sign-ins")
    right = token_login("bob", "demo")
    assert right.status_code == 429 and "token" not in right.json()
    assert not PersonalAccessToken.objects.filter(user__username="bob").exists()
    # The form shares the count: bob is locked there as well.
    assert form_login(Client(), "bob", "demo").status_code == 429


# --- local passwords and demo accounts ------------------------------------------------------------------------


def test_local_login_off(demo, settings):
    settings.LOCAL_LOGIN = False
    page = Client().get(LOGIN)
    assert 'name="password"' not in page.text
    assert "Nobody can sign in" in page.text  # and single sign-on is not configured here
    client = Client()
    response = form_login(client, "alice", "demo")
    assert response.status_code == 200 and LOCAL_LOGIN_OFF in response.text and not signed_in(client)
    refused = token_login("alice", "demo")
    assert refused.status_code == 403 and refused.json() == {"detail": LOCAL_LOGIN_OFF}
    assert not PersonalAccessToken.objects.exists()
    # The Django admin's login goes through the same backends.
    admin_client = Client()
    admin_login = admin_client.post("/django-admin/login/", {"username": "admin", "password": "demo"})
    assert admin_login.status_code == 200 and not signed_in(admin_client)


def test_demo_accounts_refused_in_production_mode(demo, settings, caplog):
    settings.PRODUCTION = True
    settings.LOCAL_LOGIN = True  # even with passwords on
    client = Client()
    with caplog.at_level(logging.WARNING, logger="apps.accounts.signin"):
        response = form_login(client, "admin", "demo")
    assert response.status_code == 200 and DEMO_REFUSED in response.text and not signed_in(client)
    assert any("refused a demo-account sign-in as 'admin'" in record.getMessage() for record in caplog.records)
    refused = token_login("alice", "demo")
    assert refused.status_code == 403 and refused.json() == {"detail": DEMO_REFUSED}
    assert not PersonalAccessToken.objects.exists()
    # A demo username with its own password, and other users, sign in as usual.
    alice = demo["alice"]
    alice.set_password("a-real-passphrase")
    alice.save()
    assert form_login(Client(), "alice", "a-real-passphrase").status_code == 302
    get_user_model().objects.create_user("zoe", password="zoes-passphrase")
    assert token_login("zoe", "zoes-passphrase").status_code == 200


def test_demo_accounts_work_in_the_embedded_mode(demo, settings):
    assert settings.PRODUCTION is False and settings.LOCAL_LOGIN is True
    assert form_login(Client(), "admin", "demo").status_code == 302


# --- sessions ---------------------------------------------------------------------------------------------------


def stamp(client: Client, *, idle: int = 0, age: int = 0) -> None:
    session = client.session
    now = int(time.time())
    session[SIGNED_IN_AT] = now - age
    session[LAST_SEEN_AT] = now - idle
    session.save()


def test_idle_session_is_signed_out(client_for, settings):
    assert settings.SESSION_IDLE_TIMEOUT == 30 * 60
    client = client_for("alice")
    assert client.get("/workloads/").status_code == 200
    stamp(client, idle=30 * 60 + 1, age=30 * 60 + 1)
    response = client.get("/workloads/?status=running")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=%2Fworkloads%2F%3Fstatus%3Drunning"
    assert not signed_in(client)
    page = client.get(response["Location"])
    assert "signed out after 30 minutes without activity" in page.text


def test_activity_slides_the_idle_timeout_but_polling_does_not(client_for):
    client = client_for("alice")
    stamp(client, idle=29 * 60, age=29 * 60)
    assert client.get("/workloads/", HTTP_X_PORTAL_BACKGROUND="1", HTTP_HX_REQUEST="true").status_code == 200
    assert time.time() - client.session[LAST_SEEN_AT] >= 29 * 60  # a poll is not activity
    assert client.get("/workloads/").status_code == 200
    assert time.time() - client.session[LAST_SEEN_AT] < 5  # a page view is
    stamp(client, idle=30 * 60 + 5, age=60 * 60)
    poll = client.get("/workloads/", HTTP_HX_REQUEST="true", HTTP_X_PORTAL_BACKGROUND="1")
    assert poll.status_code == 204 and poll["HX-Redirect"] == "/accounts/login/"  # the whole page goes there
    assert not signed_in(client)


def test_sessions_end_at_their_maximum_age_whatever_happens(client_for, settings):
    assert settings.SESSION_MAX_AGE == 12 * 60 * 60 == settings.SESSION_COOKIE_AGE
    client = client_for("alice")
    stamp(client, idle=0, age=12 * 60 * 60 + 1)
    response = client.get("/workloads/")
    assert response.status_code == 302 and not signed_in(client)
    assert "sessions last at most 12 hours" in client.get(response["Location"]).text


def test_expired_session_on_the_api_is_simply_unauthenticated(client_for):
    client = client_for("alice")
    stamp(client, idle=31 * 60, age=31 * 60)
    response = client.get("/api/v1/me/")
    assert response.status_code == 401
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_logout_ends_the_session_but_not_api_tokens(demo):
    """Tokens are separate personal credentials (README): signing out of the browser does not revoke them."""
    client = Client()
    assert form_login(client, "carol", "demo").status_code == 302
    secret = Client().post(TOKEN, {"username": "carol", "password": "demo"}).json()["token"]
    client.post("/accounts/logout/")
    assert not signed_in(client)
    assert Client().get("/api/v1/me/", HTTP_AUTHORIZATION=f"Token {secret}").status_code == 200


# --- headers -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [LOGIN, "/workloads/", "/api/v1/me/", "/api/v1/docs/"])
def test_content_security_policy_and_permissions_policy(client_for, path):
    response = (Client() if path == LOGIN else client_for("alice")).get(path)
    assert response.status_code == 200
    csp = dict(part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";"))
    assert csp["default-src"] == "'self'" and csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
    assert csp["object-src"] == "'none'" and csp["frame-ancestors"] == "'none'" and csp["base-uri"] == "'self'"
    assert "unsafe" not in response["Content-Security-Policy"]
    policy = response["Permissions-Policy"]
    for feature in ("camera", "microphone", "geolocation", "usb", "payment"):
        assert f"{feature}=()" in policy


def test_pages_carry_no_inline_scripts_or_styles(client_for):
    """What the policy would block: inline <script>/<style>, style attributes, on* handlers (browser tests check
    the rendered pages too)."""
    client = client_for("admin")
    for path in ["/", "/workloads/", "/usage/quota/", "/usage/reports/", "/accounts/tokens/", "/accounts/settings/",
                 "/accounts/role-bindings/", "/accounts/group-rules/", "/audit/", "/departments/research/quotas/",
                 "/weights/", "/workloads/submit/training/", LOGIN]:
        response = (Client() if path == LOGIN else client).get(path)
        assert response.status_code == 200, path
        html = response.text
        assert "<style" not in html and " style=" not in html, path
        assert "<script>" not in html and "<script " not in html.replace('<script src="', ""), path
        assert " onclick=" not in html and " onload=" not in html and "hx-on" not in html, path
