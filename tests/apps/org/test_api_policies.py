"""/api/v1/policies/: one per scope, who writes which, every refusal a 400 naming its field (all at once), a scope
only narrowing the scope above (from both sides), catastrophic patterns refused, audit rows, and that refusals
change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from apps.core.models import AuditEvent
from apps.org.models import Policy
from tests.api_support import call, demo_ids


@pytest.fixture
def ids(demo) -> dict[str, int]:
    return demo_ids()


def state() -> tuple[list[tuple], int]:
    return list(Policy.objects.order_by("pk").values_list("pk", "max_gpus_per_workload", "allowed_images",
                                                          "version")), AuditEvent.objects.count()


def refused(client: Any, method: str, path: str, body: dict[str, Any], status: int = 400) -> dict[str, Any]:
    before = state()
    response = call(client, method, path, body)
    assert response.status_code == status, response.content
    assert state() == before
    return response.json()


def created(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    response = call(client, "POST", "policies/", body)
    assert response.status_code == 201, response.content
    return response.json()


def test_an_admin_sets_the_organisations_policy_and_it_is_audited(client_for):
    body = created(client_for("admin"), {"max_gpus_per_workload": 16, "allowed_images": ["nvcr.io/*"],
                                         "pod_security": "restricted"})
    assert body["department"] is None and body["project"] is None and body["max_runtime_seconds"] is None
    event = AuditEvent.objects.get(action="policy.create")
    assert event.after["max_gpus_per_workload"] == 16 and event.department_id is None


def test_one_policy_per_scope_the_organisations_too(client_for, ids):
    admin = client_for("admin")
    created(admin, {"max_gpus_per_workload": 16})
    assert "This scope already has a policy" in str(refused(admin, "POST", "policies/", {"max_gpus_per_workload": 8}))
    created(admin, {"department": ids["research"], "max_gpus_per_workload": 8})
    assert "This scope already has a policy" in str(refused(admin, "POST", "policies/", {
        "department": ids["research"]}))
    errors = refused(admin, "POST", "policies/", {"department": ids["research"], "project": ids["vision"]})
    assert "not to both a department and a project" in str(errors)


def test_every_bad_field_is_named_at_once(client_for, ids):
    errors = refused(client_for("admin"), "POST", "policies/", {
        "project": ids["vision"], "max_gpus_per_workload": 0, "max_runtime_seconds": 10,
        "allowed_images": ["(a+)+$", "nvcr.io/*"], "allowed_priority_classes": ["train", "gold"],
        "required_labels": ["model", "team"]})
    assert set(errors) == {"required_labels"}  # shape first: the labels the API offers
    errors = refused(client_for("admin"), "POST", "policies/", {
        "project": ids["vision"], "max_gpus_per_workload": 0, "max_runtime_seconds": 10,
        "allowed_images": ["(a+)+$", "nvcr.io/*", "x" * 201], "allowed_priority_classes": ["train", "gold"]})
    assert set(errors) == {"max_gpus_per_workload", "max_runtime_seconds", "allowed_images",
                           "allowed_priority_classes"}
    assert len(errors["allowed_images"]) == 2 and "'(a+)+$' is not an image pattern" in errors["allowed_images"][0]
    assert errors["allowed_priority_classes"] == ["No priority class is named gold."]
    errors = refused(client_for("admin"), "POST", "policies/", {
        "project": ids["vision"], "max_runtime_seconds": 3600, "default_runtime_seconds": 7200,
        "allowed_priority_classes": ["train"], "default_priority_class": "build"})
    assert set(errors) == {"default_runtime_seconds", "default_priority_class"}


def test_a_project_policy_may_not_allow_more_than_its_departments(client_for, ids):
    admin = client_for("admin")
    created(admin, {"pod_security": "restricted", "required_labels": ["model", "data_class"]})
    created(admin, {"department": ids["research"], "max_gpus_per_workload": 8, "allowed_images": ["nvcr.io/*"],
                    "allowed_priority_classes": ["train", "build"], "max_runtime_seconds": 3600})
    errors = refused(admin, "POST", "policies/", {
        "project": ids["vision"], "max_gpus_per_workload": 16, "allowed_images": ["nvcr.io/nvidia/*", "docker.io/*"],
        "allowed_priority_classes": ["inference"], "default_runtime_seconds": 7200, "pod_security": "baseline",
        "required_labels": ["model"]})
    assert errors == {
        "max_gpus_per_workload": ["The Research department's policy allows at most 8 GPUs per workload; the Vision "
                                  "project's policy cannot allow 16."],
        "allowed_images": ["The Research department's policy allows images matching nvcr.io/* only; docker.io/* "
                           "goes beyond that."],
        "allowed_priority_classes": ["The Research department's policy allows the priority classes train, build "
                                     "only, not inference."],
        "default_runtime_seconds": ["The Research department's policy allows at most 3600 seconds of runtime; the "
                                    "Vision project's policy's default cannot be 7200."],
        "pod_security": ["The organisation's policy requires the restricted profile; the Vision project's policy "
                         "cannot lower it to baseline."],
        "required_labels": ["The organisation's policy requires the labels model, data_class; the Vision project's "
                            "policy cannot drop data_class."],
    }
    created(admin, {"project": ids["vision"], "max_gpus_per_workload": 4, "allowed_images": ["nvcr.io/nvidia/*"]})


def test_a_project_pattern_with_a_star_where_the_department_has_one_character_goes_beyond_it(client_for, ids):
    """`team-*` read as text matches `team-?` (the `?` takes the `*`), yet it allows `team-anything`."""
    admin = client_for("admin")
    created(admin, {"department": ids["research"], "allowed_images": ["registry.example/team-?", "nvcr.io/*"]})
    errors = refused(admin, "POST", "policies/", {
        "project": ids["vision"], "allowed_images": ["registry.example/team-*", "registry.example/team-a?"]})
    assert errors == {"allowed_images": [
        "The Research department's policy allows images matching registry.example/team-?, nvcr.io/* only; "
        "registry.example/team-*, registry.example/team-a? goes beyond that."]}
    created(admin, {"project": ids["vision"], "allowed_images": ["registry.example/team-v", "nvcr.io/nvidia/*"]})


def test_a_wider_scope_may_not_fall_below_what_a_narrower_one_allows(client_for, ids):
    admin = client_for("admin")
    vision = created(admin, {"project": ids["vision"], "max_gpus_per_workload": 8})
    research = created(admin, {"department": ids["research"], "max_runtime_seconds": 3600})
    errors = refused(admin, "PATCH", f"policies/{research['id']}/", {"max_gpus_per_workload": 4})
    assert errors == {"max_gpus_per_workload": [
        "The Research department's policy allows at most 4 GPUs per workload; the Vision project's policy cannot "
        "allow 8. Change the Vision project's policy first."]}
    errors = refused(admin, "POST", "policies/", {"max_gpus_per_workload": 2})
    assert errors["max_gpus_per_workload"][0].endswith("Change the Vision project's policy first.")
    assert call(admin, "PATCH", f"policies/{vision['id']}/", {"max_gpus_per_workload": 4}).status_code == 200
    assert call(admin, "PATCH", f"policies/{research['id']}/", {"max_gpus_per_workload": 4}).status_code == 200


@pytest.mark.parametrize(("username", "scope", "status"), [
    ("deptadmin", None, 403),  # the organisation's policy is admins' alone
    ("deptadmin", "production", 400),  # a department the user cannot see is not a choice
    ("lead", "vision", 403),  # team leads read policies
    ("alice", "vision", 403),
    ("viewer", "research", 403),
])
def test_who_may_not_set_policies(client_for, ids, username, scope, status):
    body: dict[str, Any] = {"max_gpus_per_workload": 4}
    if scope is not None:
        body["project" if scope == "vision" else "department"] = ids[scope]
    refused(client_for(username), "POST", "policies/", body, status=status)


def test_department_admins_write_their_departments_and_projects_policies(client_for, ids):
    deptadmin = client_for("deptadmin")
    research = created(deptadmin, {"department": ids["research"], "max_gpus_per_workload": 8})
    vision = created(deptadmin, {"project": ids["vision"], "max_gpus_per_workload": 4})
    assert call(deptadmin, "PATCH", f"policies/{vision['id']}/", {"max_gpus_per_workload": 2}).status_code == 200
    assert call(deptadmin, "DELETE", f"policies/{research['id']}/").status_code == 204
    assert AuditEvent.objects.filter(action__startswith="policy.").count() == 4


def test_scoped_reads_and_filters(client_for, ids):
    admin = client_for("admin")
    organisation = created(admin, {"max_gpus_per_workload": 16})
    vision = created(admin, {"project": ids["vision"], "max_gpus_per_workload": 8})
    serving = created(admin, {"project": ids["serving"], "max_gpus_per_workload": 2})
    listed = call(client_for("alice"), "GET", "policies/").json()["results"]
    assert sorted(row["id"] for row in listed) == sorted([organisation["id"], vision["id"]])
    assert call(client_for("alice"), "GET", f"policies/{serving['id']}/").status_code == 404
    assert call(client_for("lead"), "PATCH", f"policies/{vision['id']}/", {"max_gpus_per_workload": 1}
                ).status_code == 403
    only = call(admin, "GET", "policies/?organisation=true").json()["results"]
    assert [row["id"] for row in only] == [organisation["id"]]
    of_vision = call(admin, "GET", "policies/?project=vision").json()["results"]
    assert [row["id"] for row in of_vision] == [vision["id"]]
