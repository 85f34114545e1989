"""Every privileged change made through the API leaves one audit row with the actor, the scope, before and after."""

from __future__ import annotations

from typing import Any

import pytest

from apps.core.models import AuditEvent
from tests.access_matrix import fill_ids
from tests.api_support import call, demo_ids

# (username, method, path, body, action, scope key, before subset, after subset); None = that side is absent
CHANGES: list[tuple[str, str, str, Any, str, str | None, dict | None, dict | None]] = [
    ("admin", "POST", "node-pools/", {"slug": "b200", "name": "B200", "gpu_resource": "nvidia.com/gpu",
                                      "capacity": 8}, "node_pool.create", None, None, {"slug": "b200", "capacity": 8}),
    ("admin", "PATCH", "node-pools/{pool_h100}/", {"capacity": 20}, "node_pool.update", None,
     {"capacity": 16}, {"capacity": 20}),
    ("admin", "DELETE", "node-pools/{spare_pool}/", None, "node_pool.delete", None, {"slug": "spare"}, None),
    ("admin", "POST", "departments/", {"slug": "robotics", "name": "Robotics"}, "department.create", "department",
     None, {"slug": "robotics"}),
    ("admin", "PATCH", "departments/{research}/", {"max_project_weight": "20"}, "department.update", "department",
     {"max_project_weight": "10"}, {"max_project_weight": "20"}),
    # The row outlives the department it names, so its department link is cleared (SET_NULL): admins read it.
    ("admin", "DELETE", "departments/{spare_department}/", None, "department.delete", None,
     {"slug": "spare-dept"}, None),
    ("deptadmin", "POST", "projects/", {"slug": "robots", "name": "Robots", "department": "{research}"},
     "project.create", "project", None, {"slug": "robots", "namespace": "proj-robots"}),
    ("deptadmin", "PATCH", "projects/{vision}/", {"does_not_lend": True}, "project.update", "project",
     {"does_not_lend": False}, {"does_not_lend": True}),
    ("lead", "PATCH", "projects/{vision}/", {"default_priority_class": None}, "project.default_priority_class",
     "project", {"default_priority_class_id": "{pc_train}"}, {"default_priority_class_id": None}),
    ("deptadmin", "DELETE", "projects/{vision}/", None, "project.delete", "department", {"slug": "vision"}, None),
    ("deptadmin", "POST", "quotas/", {"node_pool": "h100", "project": "{spare_project}", "deserved": 0, "limit": 2},
     "quota.create", "project", None, {"deserved": 0, "limit": 2, "project_id": "{spare_project}"}),
    ("deptadmin", "PATCH", "quotas/{q_vision_h100}/", {"deserved": 3, "limit": 5}, "quota.update", "project",
     {"deserved": 4, "limit": 8}, {"deserved": 3, "limit": 5}),
    ("admin", "PATCH", "quotas/{q_research_h100}/", {"limit": None}, "quota.update", "department",
     {"limit": 12}, {"limit": None}),
    ("lead", "PATCH", "quotas/{q_vision_h100}/", {"over_quota_weight": "4.5"}, "quota.weight", "project",
     {"over_quota_weight": "2"}, {"over_quota_weight": "4.5"}),
    ("deptadmin", "DELETE", "quotas/{q_vision_h100}/", None, "quota.delete", "project", {"deserved": 4}, None),
    ("admin", "POST", "priority-classes/", {"name": "urgent", "value": 200, "preemptible": False},
     "priority_class.create", None, None, {"name": "urgent", "value": 200, "preemptible": False}),
    ("admin", "PATCH", "priority-classes/{pc_train}/", {"value": 40}, "priority_class.update", None,
     {"value": 50}, {"value": 40}),
    ("admin", "DELETE", "priority-classes/{pc_build}/", None, "priority_class.delete", None, {"name": "build"}, None),
    ("deptadmin", "POST", "role-bindings/", {"user": "carol", "role": "team_lead", "project": "{vision}"},
     "role_binding.create", "project", None, {"role": "team_lead", "scope": "project", "project_id": "{vision}"}),
    ("deptadmin", "DELETE", "role-bindings/{rb_alice}/", None, "role_binding.delete", "project",
     {"role": "researcher", "project_id": "{vision}"}, None),
]


@pytest.fixture
def ids(demo) -> dict[str, int]:
    from apps.org import services
    from apps.org.models import Department

    admin = demo["admin"]
    found = demo_ids()
    found["spare_pool"] = services.node_pool_create(
        actor=admin, slug="spare", name="Spare", gpu_resource="nvidia.com/gpu", capacity=4
    ).pk
    found["spare_department"] = services.department_create(actor=admin, slug="spare-dept", name="Spare").pk
    found["spare_project"] = services.project_create(
        actor=admin, department=Department.objects.get(slug="research"), slug="spare-research", name="Spare"
    ).pk
    return found


@pytest.mark.parametrize(
    ("username", "method", "path", "body", "action", "scope", "before", "after"),
    [pytest.param(*change, id=f"{change[4]}-by-{change[0]}") for change in CHANGES],
)
def test_privileged_change_is_audited(client_for, demo, ids, username, method, path, body, action, scope, before,
                                      after):
    from apps.org.models import Department, Project, Quota

    research_id = ids["research"]
    last = AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first()
    response = call(client_for(username), method, path.format(**ids), fill_ids(body, ids))
    assert response.status_code in {200, 201, 204}, response.content

    events = list(AuditEvent.objects.filter(pk__gt=last).order_by("pk"))
    main = [event for event in events if event.action == action]
    assert len(main) == 1, [event.action for event in events]
    event = main[0]
    assert event.actor == demo[username]
    if before is None:
        assert event.before is None
    else:
        assert event.before.items() >= fill_ids(before, ids).items()
    if after is None:
        assert event.after is None
    else:
        assert event.after.items() >= fill_ids(after, ids).items()
    if scope == "project":
        assert event.project_id is not None
        assert event.department_id == Project.objects.get(pk=event.project_id).department_id
    elif scope == "department":
        assert event.department_id is not None
        assert event.project_id is None or not Project.objects.filter(pk=event.project_id).exists()
    else:
        assert (event.department_id, event.project_id) == (None, None)
    # Every other row written alongside is a consequence of the same change (e.g. the quotas of a deleted project).
    assert {e.action for e in events} <= {action, "quota.delete"}
    assert Department.objects.filter(pk=research_id).exists()
    assert Quota.objects.exists()


def test_audit_log_filters(client_for, ids):
    admin = client_for("admin")
    call(client_for("lead"), "PATCH", f"quotas/{ids['q_vision_h100']}/", {"over_quota_weight": 3})
    rows = call(admin, "GET", "audit-events/?action=quota.weight").json()["results"]
    assert [(row["actor"], row["object_id"]) for row in rows] == [("lead", str(ids["q_vision_h100"]))]
    assert call(admin, "GET", "audit-events/?actor=lead").json()["count"] == 1
    assert call(admin, "GET", "audit-events/?actor=lead&action=quota.update").json()["count"] == 0
    by_project = call(admin, "GET", "audit-events/?project=vision").json()["results"]
    assert by_project
    assert {row["project"] for row in by_project} == {ids["vision"]}
    by_department = call(admin, "GET", f"audit-events/?department={ids['data_science']}").json()["results"]
    assert by_department
    assert {row["department"] for row in by_department} == {ids["data_science"]}
    quota_rows = call(admin, "GET", f"audit-events/?object_type=quota&object_id={ids['q_vision_h100']}").json()
    assert [row["action"] for row in quota_rows["results"]] == ["quota.weight", "quota.create"]
    assert call(admin, "GET", "audit-events/?since=2000-01-01").json()["count"] > 0
    assert call(admin, "GET", "audit-events/?until=2000-01-01").json()["count"] == 0
    assert call(admin, "GET", "audit-events/?since=yesterday").json() == {
        "since": ["Use a date such as 2026-01-31."]
    }


def test_department_admin_reads_only_their_departments_audit(client_for, ids):
    rows = call(client_for("deptadmin"), "GET", "audit-events/?limit=1000").json()["results"]
    assert rows
    assert {row["department"] for row in rows} == {ids["research"]}
