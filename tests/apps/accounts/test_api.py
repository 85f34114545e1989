"""Token authentication, /me/ and role bindings through the API."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.accounts.models import RoleBinding
from apps.core.models import AuditEvent
from apps.org.demo import DEMO_PASSWORD
from tests.api_support import call, demo_ids, org_state


@pytest.fixture
def ids(demo) -> dict[str, int]:
    return demo_ids()


def token_for(username: str, password: str = DEMO_PASSWORD) -> tuple[int, dict]:
    response = Client().post("/api/v1/auth/token/", {"username": username, "password": password},
                             content_type="application/json")
    return response.status_code, response.json()


def test_token_with_good_credentials(demo):
    status, body = token_for("alice")
    assert status == 200
    assert set(body) == {"token"}
    assert len(body["token"]) == 40
    # Since personal tokens each sign-in makes a new named token with the default lifetime: the secret
    # is stored only as a digest, so an earlier one cannot be answered again. Both work until revoked or expired.
    again = token_for("alice")[1]
    assert again != body and len(again["token"]) == 40
    for secret in (body["token"], again["token"]):
        assert call(Client(), "GET", "me/", HTTP_AUTHORIZATION=f"Token {secret}").json()["username"] == "alice"


def test_token_accepts_form_posts(demo):
    response = Client().post("/api/v1/auth/token/", {"username": "bob", "password": "demo"})
    assert response.status_code == 200
    assert "token" in response.json()


@pytest.mark.parametrize(("username", "password"), [("alice", "wrong"), ("nobody", "demo"), ("alice", "")])
def test_token_with_bad_credentials(demo, username, password):
    status, body = token_for(username, password)
    assert status == 400
    assert "token" not in body


def test_token_refused_for_inactive_user(demo):
    demo["carol"].is_active = False
    demo["carol"].save(update_fields=["is_active"])
    assert token_for("carol")[0] == 400


def test_token_header_authenticates(demo, ids):
    token = token_for("deptadmin")[1]["token"]
    client = Client()
    me = call(client, "GET", "me/", HTTP_AUTHORIZATION=f"Token {token}")
    assert me.status_code == 200
    assert me.json()["username"] == "deptadmin"
    # Writes with a token need no CSRF token and go through the same services and checks.
    response = call(client, "PATCH", f"quotas/{ids['q_vision_h100']}/", {"deserved": 3},
                    HTTP_AUTHORIZATION=f"Token {token}")
    assert response.status_code == 200
    assert AuditEvent.objects.filter(action="quota.update", actor=demo["deptadmin"]).count() == 1
    refused = call(client, "PATCH", f"quotas/{ids['q_forecasting_h100']}/", {"deserved": 1},
                   HTTP_AUTHORIZATION=f"Token {token}")
    assert refused.status_code == 404


def test_bad_token_and_no_credentials_are_refused(demo):
    response = call(Client(), "GET", "me/", HTTP_AUTHORIZATION="Token " + "0" * 40)
    # 401 with a challenge for a bad token and for no credentials at all: a script tells "sign in" from
    # "not allowed" (403).
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Token realm="api"'
    assert response.json() == {"detail": "Invalid token."}
    response = call(Client(), "GET", "me/")
    assert response.status_code == 401 and response["WWW-Authenticate"] == 'Token realm="api"'
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_session_writes_need_csrf(demo, ids):
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo["admin"])
    response = call(client, "PATCH", f"node-pools/{ids['pool_h100']}/", {"description": "x"})
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_me_lists_direct_and_group_bindings(client_for, demo, ids):
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="forecasters")
    demo["alice"].groups.add(group)
    RoleBinding.objects.create(group=group, role="viewer", scope="department", department_id=ids["data_science"])
    body = call(client_for("alice"), "GET", "me/").json()
    assert body["username"] == "alice"
    assert {(b["user"], b["group"], b["role"], b["scope"], b["department"], b["project"])
            for b in body["role_bindings"]} == {
        ("alice", None, "researcher", "project", None, ids["vision"]),
        (None, "forecasters", "viewer", "department", ids["data_science"], None),
    }


def test_role_binding_scope_follows_the_target(client_for, ids):
    deptadmin = client_for("deptadmin")
    response = call(deptadmin, "POST", "role-bindings/", {"user": "carol", "role": "viewer",
                                                           "department": ids["research"]})
    assert response.status_code == 201
    assert response.json() | {"id": 0, "created_at": ""} == {
        "id": 0, "user": "carol", "group": None, "role": "viewer", "scope": "department",
        "department": ids["research"], "project": None, "created_at": "", "source": "manual",
    }
    # carol now sees Research
    assert call(client_for("carol"), "GET", f"departments/{ids['research']}/").status_code == 200


@pytest.mark.parametrize(
    ("username", "body", "status", "errors"),
    [
        ("deptadmin", {"user": "alice", "role": "researcher", "project": "vision"}, 400,
         {"non_field_errors": ["This binding already exists."]}),
        ("deptadmin", {"user": "carol", "role": "admin", "project": "vision"}, 403,
         {"detail": "You may not grant this role at this scope."}),
        ("deptadmin", {"user": "carol", "role": "viewer"}, 403,
         {"detail": "You may not grant this role at this scope."}),
        ("admin", {"user": "carol", "role": "viewer", "department": "research", "project": "vision"}, 400,
         {"non_field_errors": ["Choose a department or a project as the scope, not both."]}),
        ("admin", {"role": "viewer"}, 400, {"non_field_errors": ["Bind the role to a user or to a group, not both."]}),
        ("admin", {"user": "carol", "role": "boss"}, 400, {"role": ['"boss" is not a valid choice.']}),
        ("admin", {"user": "nobody", "role": "viewer"}, 400,
         {"user": ["Object with username=nobody does not exist."]}),
    ],
)
def test_role_binding_refusals(client_for, ids, username, body, status, errors):
    body = {key: ids[value] if key in {"department", "project"} else value for key, value in body.items()}
    before = org_state()
    response = call(client_for(username), "POST", "role-bindings/", body)
    assert (response.status_code, response.json()) == (status, errors)
    assert org_state() == before


def test_the_last_admin_binding_cannot_be_removed(client_for, ids):
    before = org_state()
    response = call(client_for("admin"), "DELETE", f"role-bindings/{ids['rb_admin']}/")
    assert response.status_code == 400
    assert response.json() == {"non_field_errors": ["This is the last admin binding; add another admin first."]}
    assert org_state() == before


@pytest.mark.parametrize("field", ["user", "group"])
def test_a_form_post_with_a_nul_in_a_reference_is_a_400(client_for, field):
    """A form-encoded body (the browsable API's) names its references by text too: one holding a NUL is refused by
    field, never looked up (PostgreSQL refuses NUL in a query: a 500). Found by schemathesis's stateful phase."""
    from apps.accounts.models import RoleBinding

    before = RoleBinding.objects.count()
    response = client_for("admin").post("/api/v1/role-bindings/", {"role": "viewer", field: "bo\x00b"})
    assert response.status_code == 400, response.content
    assert response.json()[field] == ["Null characters are not allowed."]
    assert RoleBinding.objects.count() == before
