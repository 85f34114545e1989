"""Personal access tokens: named, expiring, revocable, stored as digests, from the "My tokens" page and the API."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from apps.accounts import services
from apps.accounts.models import PersonalAccessToken
from apps.core.models import AuditEvent
from tests.api_support import call


def me(secret: str, scheme: str = "Token"):
    return call(Client(), "GET", "me/", HTTP_AUTHORIZATION=f"{scheme} {secret}")


def test_page_creates_a_token_shown_once_and_stored_as_a_digest(client_for, demo):
    client = client_for("alice")
    response = client.post("/accounts/tokens/", {"name": "laptop", "expires_on": ""})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    token = PersonalAccessToken.objects.get(user=demo["alice"])
    secret = response.text.split('id="new-token-secret">')[1].split("<")[0]
    assert secret.startswith("gpp_") and len(secret) == 40
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest() and token.prefix == secret[:8]
    assert token.name == "laptop"
    assert abs(token.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    # Never in clear: not in the token's row, not in the audit log; not on the page again.
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM accounts_personalaccesstoken")
        assert not any(secret in str(value) for row in cursor.fetchall() for value in row)
    event = AuditEvent.objects.get(action="api_token.create")
    assert secret not in str(event.after) and "digest" not in event.after
    page = client.get("/accounts/tokens/").text
    assert secret not in page and "laptop" in page and token.prefix in page and "never" in page
    assert me(secret).json()["username"] == "alice"
    assert me(secret, "Bearer").json()["username"] == "alice"


def test_page_expiry_bounds_and_all_errors_at_once(client_for, settings):
    client = client_for("alice")
    too_late = (timezone.now() + timedelta(days=settings.API_TOKEN_MAX_DAYS + 3)).date()
    response = client.post("/accounts/tokens/", {"name": "", "expires_on": too_late.isoformat()})
    assert response.status_code == 200
    assert "This field is required." in response.text  # the name
    assert not PersonalAccessToken.objects.exists()
    response = client.post("/accounts/tokens/", {"name": "ci", "expires_on": too_late.isoformat()})
    assert f"Tokens live at most {settings.API_TOKEN_MAX_DAYS} days" in response.text
    past = (timezone.now() - timedelta(days=2)).date()
    response = client.post("/accounts/tokens/", {"name": "ci", "expires_on": past.isoformat()})
    assert "Choose an expiry in the future." in response.text
    assert not PersonalAccessToken.objects.exists()
    day = (timezone.now() + timedelta(days=7)).date()
    client.post("/accounts/tokens/", {"name": "ci", "expires_on": day.isoformat()})
    token = PersonalAccessToken.objects.get()
    assert token.expires_at.date() == day + timedelta(days=1) and token.expires_at.hour == 0  # end of that day


def test_expired_and_revoked_tokens_answer_401(demo):
    _, secret = services.personal_token_create(user=demo["bob"], name="script")
    token = PersonalAccessToken.objects.get()
    assert me(secret).status_code == 200
    PersonalAccessToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = me(secret)
    assert expired.status_code == 401 and expired["WWW-Authenticate"] == 'Token realm="api"'
    assert expired.json() == {"detail": "This token has expired; create a new one."}
    PersonalAccessToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() + timedelta(days=1))
    services.personal_token_revoke(actor=demo["bob"], token=token)
    revoked = me(secret)
    assert revoked.status_code == 401 and revoked.json() == {"detail": "This token has been revoked."}
    demo["bob"].is_active = False
    demo["bob"].save()
    _, other = services.personal_token_create(user=demo["bob"], name="again")
    assert me(other).status_code == 401


def test_revoke_from_the_page_only_own_tokens(client_for, demo):
    _, secret = services.personal_token_create(user=demo["alice"], name="laptop")
    token = PersonalAccessToken.objects.get()
    assert client_for("bob").post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 404
    assert client_for("alice").get(f"/accounts/tokens/{token.pk}/revoke/").status_code == 405
    response = client_for("alice").post(f"/accounts/tokens/{token.pk}/revoke/")
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None and me(secret).status_code == 401
    event = AuditEvent.objects.get(action="api_token.revoke")
    assert event.actor == demo["alice"] and event.after["revoked_at"]
    assert "revoked" in client_for("alice").get("/accounts/tokens/").text


def test_api_lists_creates_and_revokes(client_for, demo):
    client = client_for("carol")
    created = call(client, "POST", "tokens/", {"name": "notebook"})
    assert created.status_code == 201 and created["Cache-Control"] == "no-store"
    body = created.json()
    secret = body.pop("token")
    assert secret.startswith("gpp_") and body["name"] == "notebook" and body["state"] == "active"
    listed = call(client, "GET", "tokens/").json()["results"]
    assert [row["name"] for row in listed] == ["notebook"] and "token" not in listed[0]
    # A token cannot mint tokens (a stolen one could otherwise live for ever).
    minted = call(Client(), "POST", "tokens/", {"name": "more"}, HTTP_AUTHORIZATION=f"Token {secret}")
    assert minted.status_code == 403
    # But it can revoke (itself, here).
    revoked = call(Client(), "DELETE", f"tokens/{body['id']}/", HTTP_AUTHORIZATION=f"Token {secret}")
    assert revoked.status_code == 204
    assert call(client, "GET", f"tokens/{body['id']}/").json()["state"] == "revoked"
    assert me(secret).status_code == 401
    # Others' tokens are not there.
    assert call(client_for("alice"), "GET", f"tokens/{body['id']}/").status_code == 404
    assert call(client_for("alice"), "DELETE", f"tokens/{body['id']}/").status_code == 404


def test_api_expiry_validation(client_for, settings):
    client = client_for("carol")
    late = (timezone.now() + timedelta(days=settings.API_TOKEN_MAX_DAYS + 5)).isoformat()
    response = call(client, "POST", "tokens/", {"name": "", "expires_at": late})
    assert response.status_code == 400 and "name" in response.json()
    response = call(client, "POST", "tokens/", {"name": "x", "expires_at": late})
    assert response.status_code == 400
    assert response.json()["expires_at"][0].startswith(f"Tokens live at most {settings.API_TOKEN_MAX_DAYS} days")
    assert not PersonalAccessToken.objects.exists()


def test_password_endpoint_makes_a_named_token_with_the_default_lifetime(demo):
    secret = Client().post("/api/v1/auth/token/", {"username": "viewer", "password": "demo"}).json()["token"]
    token = PersonalAccessToken.objects.get(user=demo["viewer"])
    assert token.name.startswith("API sign-in ") and token.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert abs(token.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)


def test_last_used_is_stamped_at_most_once_a_minute(demo, django_assert_num_queries):
    _, secret = services.personal_token_create(user=demo["viewer"], name="probe")
    with django_assert_num_queries(3):  # the token with its user, the first "last used" stamp, the bindings
        assert me(secret).status_code == 200
    first = PersonalAccessToken.objects.get().last_used_at
    assert first is not None
    with django_assert_num_queries(2):  # within the minute: no write (the token with its user, the bindings)
        assert me(secret).status_code == 200
    PersonalAccessToken.objects.update(last_used_at=first - timedelta(minutes=2))
    me(secret)
    assert PersonalAccessToken.objects.get().last_used_at > first


@pytest.mark.parametrize("header", ["Token", "Token a b", "Bearer"])
def test_malformed_headers_answer_401(demo, header):
    response = call(Client(), "GET", "me/", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401


def test_admin_revokes_a_leaked_token_in_the_django_admin(client_for, demo):
    _, secret = services.personal_token_create(user=demo["alice"], name="leaked")
    token = PersonalAccessToken.objects.get()
    response = client_for("admin").post("/django-admin/accounts/personalaccesstoken/", {
        "action": "revoke", "_selected_action": [token.pk]})
    assert response.status_code == 302
    assert me(secret).status_code == 401
    assert AuditEvent.objects.get(action="api_token.revoke").actor == demo["admin"]
