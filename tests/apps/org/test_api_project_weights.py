"""A team lead's default priority class and weights in one project PATCH (project_update, quota_update inside)."""

from __future__ import annotations

import pytest

from apps.core.models import AuditEvent
from apps.org.models import Project, Quota
from tests.api_support import call, demo_ids, org_state


@pytest.fixture
def ids(demo) -> dict[str, int]:
    return demo_ids()


def weights() -> dict[str, str]:
    return {q.node_pool.slug: format(q.over_quota_weight.normalize(), "f")
            for q in Quota.objects.filter(project__slug="vision").select_related("node_pool")}


def test_team_lead_changes_priority_class_and_weights_together(client_for, demo, ids):
    audit = AuditEvent.objects.count()
    response = call(client_for("lead"), "PATCH", f"projects/{ids['vision']}/", {
        "default_priority_class": "build", "over_quota_weights": {"h100": "3.5", "l40s-shared": 4},
    })
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["default_priority_class"] == "build"
    assert "over_quota_weights" not in body
    assert {q["node_pool"]: q["over_quota_weight"] for q in body["quotas"]} == {
        "h100": "3.50", "a100-mig-3g40gb": "1.00", "l40s-shared": "4.00"}
    assert Project.objects.get(pk=ids["vision"]).default_priority_class.name == "build"
    assert weights() == {"h100": "3.5", "a100-mig-3g40gb": "1", "l40s-shared": "4"}
    events = AuditEvent.objects.order_by("id")[audit:]
    assert [(event.action, event.object_type) for event in events] == [
        ("project.default_priority_class", "project"), ("quota.weight", "quota"), ("quota.weight", "quota")]
    assert all(event.actor == demo["lead"] for event in events)


def test_weights_alone(client_for, ids):
    response = call(client_for("deptadmin"), "PATCH", f"projects/{ids['vision']}/",
                    {"over_quota_weights": {"a100-mig-3g40gb": "50"}})
    assert response.status_code == 200
    assert weights()["a100-mig-3g40gb"] == "50"


@pytest.mark.parametrize(("body", "errors"), [
    ({"default_priority_class": "build", "over_quota_weights": {"h100": "3", "l40s-shared": "11"}},
     {"over_quota_weights": ["l40s-shared: Choose a weight between 0 and 10, the bounds set for Research."]}),
    ({"default_priority_class": "build", "over_quota_weights": {"b200": "3", "h100": "12"}},
     {"over_quota_weights": ["Vision has no quota on b200.",
                             "h100: Choose a weight between 0 and 10, the bounds set for Research."]}),
    ({"over_quota_weights": {"h100": "heavy"}}, {"over_quota_weights": {"h100": ["A valid number is required."]}}),
    ({"over_quota_weights": ["h100"]}, {"over_quota_weights": ['Expected a dictionary of items but got type "list".']}),
    ({"over_quota_weights": {"h100": "1e30"}},
     {"over_quota_weights": {"h100": ["Ensure that there are no more than 8 digits in total."]}}),
])
def test_refusals_change_nothing(client_for, ids, body, errors):
    before = org_state()
    response = call(client_for("lead"), "PATCH", f"projects/{ids['vision']}/", body)
    assert response.status_code == 400
    assert response.json() == errors
    assert org_state() == before


@pytest.mark.parametrize(("username", "body", "status"), [
    ("lead", {"description": "x", "over_quota_weights": {"h100": "3"}}, 403),  # a field team leads may not change
    ("alice", {"over_quota_weights": {"h100": "3"}}, 403),
    ("bob", {"over_quota_weights": {"h100": "3"}}, 404),
    ("carol", {"over_quota_weights": {"h100": "3"}}, 404),
])
def test_the_access_rules_hold(client_for, ids, username, body, status):
    before = org_state()
    assert call(client_for(username), "PATCH", f"projects/{ids['vision']}/", body).status_code == status
    assert org_state() == before


def test_a_new_project_has_no_weights_to_set(client_for, ids):
    """Weights are set on an existing project's quotas; a create that names them is refused, not half-done."""
    response = call(client_for("deptadmin"), "POST", "projects/",
                    {"slug": "robots", "name": "Robots", "department": ids["research"],
                     "over_quota_weights": {"h100": "3"}})
    assert response.status_code == 400
    assert response.json() == {"over_quota_weights": ["Unknown field."]}
    assert not Project.objects.filter(slug="robots").exists()
