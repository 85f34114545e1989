"""Every quota and naming rule, refused through the API with the services' own message; nothing changes."""

from __future__ import annotations

from typing import Any

import pytest

from apps.core.models import AuditEvent
from apps.org.models import Quota
from tests.api_support import call, demo_ids, org_state

DNS_MESSAGE = (
    "Use lower-case letters, digits and '-', starting and ending with a letter or digit (a Kubernetes DNS-1123 label)."
)


@pytest.fixture
def ids(demo) -> dict[str, int]:
    return demo_ids()


def refused(client: Any, method: str, path: str, body: dict[str, Any], status: int = 400) -> dict[str, Any]:
    before = org_state()
    response = call(client, method, path, body)
    assert response.status_code == status, response.content
    assert org_state() == before
    return response.json()


def test_limit_below_deserved(client_for, ids):
    errors = refused(client_for("admin"), "PATCH", f"quotas/{ids['q_vision_h100']}/", {"limit": 2})
    assert errors == {"limit": ["The limit (2) cannot be below the deserved quota (4)."]}


def test_limit_below_deserved_on_create(client_for, ids):
    """Every rule's refusal in one answer: the limit below deserved, and the full pool."""
    department = call(client_for("admin"), "POST", "departments/", {"slug": "robotics", "name": "Robotics"}).json()
    errors = refused(client_for("admin"), "POST", "quotas/",
                     {"node_pool": "h100", "department": department["id"], "deserved": 2, "limit": 1})
    assert errors == {
        "limit": ["The limit (1) cannot be below the deserved quota (2)."],
        "deserved": ["h100 has 16 units and other departments hold 16, so at most 0 can be given here. Lower another "
                     "department's quota, or mark the pool over-subscribable."],
    }


def test_projects_above_their_department(client_for, ids):
    errors = refused(client_for("deptadmin"), "PATCH", f"quotas/{ids['q_vision_h100']}/", {"deserved": 5})
    assert errors == {"deserved": [
        "Research has 8 deserved units on h100 and its other projects hold 4, so this project can have at most 4. "
        "Raise the department's quota first or lower another project's."
    ]}


def test_new_project_quota_above_its_department(client_for, ids):
    project = call(client_for("deptadmin"), "POST", "projects/",
                   {"slug": "robots", "name": "Robots", "department": ids["research"]}).json()
    errors = refused(client_for("deptadmin"), "POST", "quotas/",
                     {"node_pool": "h100", "project": project["id"], "deserved": 1, "limit": 2})
    assert errors == {"deserved": [
        "Research has 8 deserved units on h100 and its other projects hold 8, so this project can have at most 0. "
        "Raise the department's quota first or lower another project's."
    ]}


def test_department_below_its_projects(client_for, ids):
    errors = refused(client_for("admin"), "PATCH", f"quotas/{ids['q_research_h100']}/", {"deserved": 6})
    assert errors == {"deserved": [
        "The department's projects hold 8 deserved units on h100; lower theirs before lowering the department's."
    ]}


def test_departments_above_pool_capacity_unless_over_subscribable(client_for, ids):
    admin = client_for("admin")
    errors = refused(admin, "PATCH", f"quotas/{ids['q_research_h100']}/", {"deserved": 12, "limit": 12})
    assert errors == {"deserved": [
        "h100 has 16 units and other departments hold 8, so at most 8 can be given here. "
        "Lower another department's quota, or mark the pool over-subscribable."
    ]}
    assert call(admin, "PATCH", f"node-pools/{ids['pool_h100']}/", {"over_subscribable": True}).status_code == 200
    response = call(admin, "PATCH", f"quotas/{ids['q_research_h100']}/", {"deserved": 12, "limit": 12})
    assert response.status_code == 200
    assert (response.json()["deserved"], response.json()["limit"]) == (12, 12)


def test_pool_capacity_below_its_departments(client_for, ids):
    errors = refused(client_for("admin"), "PATCH", f"node-pools/{ids['pool_h100']}/", {"capacity": 10})
    assert errors == {"capacity": [
        "Departments hold 16 deserved units on h100, more than a capacity of 10. "
        "Lower their quotas first, or mark the pool over-subscribable."
    ]}


@pytest.mark.parametrize("weight", ["11", "-1", "10.5"])
def test_team_lead_weight_outside_the_department_bounds(client_for, ids, weight):
    errors = refused(client_for("lead"), "PATCH", f"quotas/{ids['q_vision_h100']}/", {"over_quota_weight": weight})
    assert errors == {"over_quota_weight": ["Choose a weight between 0 and 10, the bounds set for Research."]}


def test_department_admin_is_not_bound_by_team_lead_bounds_but_by_the_maximum(client_for, ids):
    deptadmin = client_for("deptadmin")
    path = f"quotas/{ids['q_vision_h100']}/"
    assert call(deptadmin, "PATCH", path, {"over_quota_weight": "50"}).json()["over_quota_weight"] == "50.00"
    errors = refused(deptadmin, "PATCH", path, {"over_quota_weight": "1001"})
    assert errors == {"over_quota_weight": ["Ensure this value is less than or equal to 1000."]}


def test_team_lead_may_patch_the_weight(client_for, demo, ids):
    response = call(client_for("lead"), "PATCH", f"quotas/{ids['q_vision_h100']}/", {"over_quota_weight": 7})
    assert response.status_code == 200
    assert response.json() == {**response.json(), "over_quota_weight": "7.00", "deserved": 4, "limit": 8,
                               "node_pool": "h100", "project": ids["vision"], "department": None}
    event = AuditEvent.objects.get(action="quota.weight")
    assert event.actor == demo["lead"]
    assert (event.before["over_quota_weight"], event.after["over_quota_weight"]) == ("2", "7")
    assert event.project_id == ids["vision"]


def test_team_lead_may_resend_unchanged_values_with_the_weight(client_for, ids):
    response = call(client_for("lead"), "PATCH", f"quotas/{ids['q_vision_h100']}/",
                    {"over_quota_weight": 3, "deserved": 4, "limit": 8})
    assert response.status_code == 200
    assert Quota.objects.get(pk=ids["q_vision_h100"]).over_quota_weight == 3


@pytest.mark.parametrize("change", [{"deserved": 3}, {"limit": 6}, {"limit": None},
                                    {"deserved": 3, "over_quota_weight": 3}])
def test_team_lead_may_not_patch_deserved_or_limit(client_for, ids, change):
    errors = refused(client_for("lead"), "PATCH", f"quotas/{ids['q_vision_h100']}/", change, status=403)
    assert errors == {"detail": "You may not make this change."}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("projects/", {"slug": "Vision_2", "name": "Vision 2", "department": "research", "namespace": "proj-vision-2"},
         "slug"),
        ("projects/", {"slug": "vision-2", "name": "Vision 2", "department": "research", "namespace": "Bad.NS"},
         "namespace"),
        ("departments/", {"slug": "-robotics", "name": "Robotics"}, "slug"),
        ("node-pools/", {"slug": "B200", "name": "B200", "gpu_resource": "nvidia.com/gpu", "capacity": 8}, "slug"),
        ("priority-classes/", {"name": "Urgent", "value": 200}, "name"),
    ],
)
def test_names_must_be_dns_1123_labels(client_for, ids, path, body, field):
    if "department" in body:
        body = {**body, "department": ids[body["department"]]}
    assert refused(client_for("admin"), "POST", path, body) == {field: [DNS_MESSAGE]}


def test_slugs_are_limited_in_length(client_for, ids):
    # The length is part of the shape the serializer checks (and the schema documents), so DRF words it.
    errors = refused(client_for("admin"), "POST", "departments/", {"slug": "a" * 41, "name": "Long"})
    assert errors == {"slug": ["Ensure this field has no more than 40 characters."]}


@pytest.mark.parametrize(
    ("path", "body", "errors"),
    [
        ("projects/", {"slug": "vision", "name": "Vision 2", "department": "research"},
         {"slug": ["Project with this Slug already exists."],
          "namespace": ["Project with this Namespace already exists."]}),
        ("projects/", {"slug": "vision-2", "name": "Vision", "department": "research"},
         {"non_field_errors": ["This department already has a project with that name."]}),
        ("departments/", {"slug": "research", "name": "Research 2"},
         {"slug": ["Department with this Slug already exists."]}),
        ("node-pools/", {"slug": "h100", "name": "H100", "gpu_resource": "nvidia.com/gpu", "capacity": 8},
         {"slug": ["Node pool with this Slug already exists."]}),
        ("priority-classes/", {"name": "train", "value": 1},
         {"name": ["Priority class with this Name already exists."]}),
        ("quotas/", {"node_pool": "h100", "project": "vision", "deserved": 4, "limit": 8},
         {"non_field_errors": ["This project already has a quota on that pool."]}),
    ],
)
def test_duplicates_are_refused(client_for, ids, path, body, errors):
    for key in ("department", "project"):
        if key in body:
            body = {**body, key: ids[body[key]]}
    assert refused(client_for("admin"), "POST", path, body) == errors


def test_project_names_that_kubernetes_uses_cannot_change(client_for, ids):
    errors = refused(client_for("admin"), "PATCH", f"projects/{ids['vision']}/", {"slug": "vision-2"})
    assert errors == {"slug": ["This cannot change once the project exists in the cluster."]}


def test_quota_filters(client_for, ids):
    admin = client_for("admin")
    for value in (ids["vision"], "vision"):
        rows = call(admin, "GET", f"quotas/?project={value}").json()["results"]
        assert {row["node_pool"] for row in rows} == {"h100", "a100-mig-3g40gb", "l40s-shared"}
        assert {row["project"] for row in rows} == {ids["vision"]}
    for value in (ids["research"], "research"):
        rows = call(admin, "GET", f"quotas/?department={value}").json()["results"]
        assert len(rows) == 3
        assert {(row["department"], row["project"]) for row in rows} == {(ids["research"], None)}
    rows = call(admin, "GET", "quotas/?project=vision&node_pool=h100").json()["results"]
    assert [row["id"] for row in rows] == [ids["q_vision_h100"]]
    # A project the user cannot see is not a valid choice (the same answer as a project that does not exist).
    unseen = call(client_for("bob"), "GET", "quotas/?project=vision")
    assert unseen.status_code == 400 and "results" not in unseen.json()
    assert unseen.json() == call(client_for("bob"), "GET", "quotas/?project=no-such-project").json() == {
        "project": ["Select a valid choice. That choice is not one of the available choices."]}


def test_quota_create_defaults_to_unlimited_and_weight_one(client_for, ids):
    admin = client_for("admin")
    assert call(admin, "DELETE", f"quotas/{ids['q_etl_h100']}/").status_code == 204
    response = call(admin, "POST", "quotas/", {"node_pool": "h100", "project": ids["etl"], "deserved": 0})
    assert response.status_code == 201
    assert (response.json()["limit"], response.json()["over_quota_weight"]) == (None, "1.00")
    assert refused(admin, "POST", "quotas/", {"node_pool": "h100", "project": ids["etl"]}) == {
        "deserved": ["This field is required."]
    }


def test_pool_labels_and_taints_follow_kubernetes_rules(client_for, ids):
    admin = client_for("admin")
    path = f"node-pools/{ids['pool_h100']}/"
    errors = refused(admin, "PATCH", path, {"node_labels": {"bad key!": "x"}})
    assert errors == {"node_labels": ["'bad key!' is not a valid Kubernetes label key."]}
    errors = refused(admin, "PATCH", path, {"node_taints": [{"key": "gpu", "effect": "Sometimes"}]})
    assert errors == {"node_taints": {"0": {"effect": ['"Sometimes" is not a valid choice.']}}}
    errors = refused(admin, "PATCH", path, {"node_labels": ["portal.gpu/pool"]})
    assert errors == {"node_labels": ['Expected a dictionary of items but got type "list".']}
    nine_labels = {f"portal.gpu/l{i}": "x" for i in range(9)}
    twins = [{"key": "gpu", "value": "a", "effect": "NoSchedule"}, {"key": "gpu", "effect": "NoSchedule"}]
    assert refused(admin, "PATCH", path, {"node_labels": nine_labels, "node_taints": twins}) == {
        "node_labels": ["9 node labels: Kueue's ResourceFlavor takes at most 8. Select the pool's nodes with fewer "
                        "labels."],
        "node_taints": ["Taints 1 and 2 have the same key and effect (gpu:NoSchedule); Kueue takes one taint per key "
                        "and effect."]}
    taint = {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}
    response = call(admin, "PATCH", path, {"node_labels": {"portal.gpu/pool": "h100", "zone": "a"},
                                           "node_taints": [taint]})
    assert response.status_code == 200
    assert response.json()["node_taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert response.json()["node_labels"] == {"portal.gpu/pool": "h100", "zone": "a"}
