"""Stale writes refused: an edit page or a PATCH based on an older read of a row changes nothing, writes no audit row
and says what changed meanwhile and who changed it; a fresh one saves and bumps the version."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.urls import reverse

from apps.core.forms import VERSION_MISSING
from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import Department, NodePool, PriorityClass, Project, Quota
from tests.api_support import call, org_state

from .view_helpers import pool_payload, quota_payload


def _pool() -> NodePool:
    return NodePool.objects.get(slug="h100")


def _research() -> Department:
    return Department.objects.get(slug="research")


def _vision() -> Project:
    return Project.objects.get(slug="vision")


def _train() -> PriorityClass:
    return PriorityClass.objects.get(name="train")


def _another_default() -> PriorityClass | None:
    return PriorityClass.objects.exclude(pk=_vision().default_priority_class_id).first()


def _vision_h100() -> Quota:
    return Quota.objects.get(project__slug="vision", node_pool__slug="h100")


# (case, editor, url, the page's payload, the change someone else makes meanwhile, words the refusal must hold)
PAGE_CASES: list[tuple[str, str, Callable[[], str], Callable[[], dict[str, Any]], Callable[[Any], Any], list[str]]] = [
    ("node pool", "admin", lambda: reverse("org:pool_edit", args=["h100"]),
     lambda: pool_payload(slug="h100", name="H100 mine", gpu_product="NVIDIA-H100-80GB-HBM3", capacity="16",
                          node_labels="portal.gpu/pool=h100"),
     lambda users: services.node_pool_update(actor=users["admin"], node_pool=_pool(), description="theirs"),
     ["Node pool h100 was changed by admin", "description"]),
    ("department", "admin", lambda: reverse("org:department_edit", args=["research"]),
     lambda: {"name": "Research", "description": "mine", "min_project_weight": "0", "max_project_weight": "10"},
     lambda users: services.department_update(actor=users["admin"], department=_research(), max_project_weight=8),
     ["Department Research was changed by admin", "max project weight"]),
    ("project", "deptadmin", lambda: reverse("org:project_edit", args=["vision"]),
     lambda: {"name": "Vision", "description": "mine"},
     lambda users: services.project_update(actor=users["lead"], project=_vision(),
                                           default_priority_class=_another_default()),
     ["Project vision was changed by lead", "default priority class"]),
    ("priority class", "admin", lambda: reverse("org:priority_class_edit", args=["train"]),
     lambda: {"value": "55", "preemptible": "on", "description": "mine"},
     lambda users: services.priority_class_update(actor=users["admin"], priority_class=_train(), value=70),
     ["Priority class train was changed by admin", "value"]),
]


def _read_version(client: Any, url: str) -> int:
    return int(client.get(url).context["form"]["version"].value())


@pytest.mark.parametrize(("case", "editor", "url", "payload", "meanwhile", "words"), PAGE_CASES,
                         ids=[case[0] for case in PAGE_CASES])
def test_a_stale_page_save_is_refused_saying_what_changed(page_client, users, case, editor, url, payload,
                                                          meanwhile, words):
    client = page_client(editor)
    read = _read_version(client, url())
    meanwhile(users)
    before, audit_rows = org_state(), AuditEvent.objects.count()
    response = client.post(url(), {**payload(), "version": read})
    assert response.status_code == 200
    message = " ".join(response.context["form"].non_field_errors())
    for word in words:
        assert word in message, message
    assert "Nothing was saved; reload" in message
    assert message in response.content.decode().replace("&#x27;", "'")
    assert org_state() == before and AuditEvent.objects.count() == audit_rows


@pytest.mark.parametrize(("case", "editor", "url", "payload", "meanwhile", "words"), PAGE_CASES,
                         ids=[case[0] for case in PAGE_CASES])
def test_a_fresh_page_save_saves_and_bumps_the_version(page_client, users, case, editor, url, payload, meanwhile,
                                                       words):
    client = page_client(editor)
    read = _read_version(client, url())
    response = client.post(url(), {**payload(), "version": read})
    assert response.status_code == 302, response.context["form"].errors
    assert _read_version(client, url()) == read + 1
    stale = client.post(url(), {**payload(), "description": "again", "version": read})  # the old copy again
    assert stale.status_code == 200 and "was changed by" in " ".join(stale.context["form"].non_field_errors())


@pytest.mark.parametrize(("case", "editor", "url", "payload", "meanwhile", "words"), PAGE_CASES,
                         ids=[case[0] for case in PAGE_CASES])
def test_a_page_save_without_its_version_is_refused(page_client, case, editor, url, payload, meanwhile, words):
    before, audit_rows = org_state(), AuditEvent.objects.count()
    for version in (None, "", "abc", "0", "²"):
        data = payload() if version is None else {**payload(), "version": version}
        response = page_client(editor).post(url(), data)
        assert response.status_code == 200
        assert VERSION_MISSING in response.context["form"].non_field_errors()
    assert org_state() == before and AuditEvent.objects.count() == audit_rows


# --- the quota table ------------------------------------------------------------------------------------------


def test_a_stale_quota_table_save_is_refused_naming_the_cell(page_client, users):
    research, nlp = _research(), Project.objects.get(slug="nlp")
    # The page as rendered (every cell with its value and version), then a change to one of nlp's cells.
    data = quota_payload(research, {(nlp, "l40s-shared", "weight"): 3})
    services.quota_update(actor=users["admin"], quota=_vision_h100(), over_quota_weight=5)
    before, audit_rows = org_state(), AuditEvent.objects.count()
    # Saved as it is, the page would silently put vision's weight back to what it read.
    response = page_client("deptadmin").post(reverse("org:department_quotas", args=["research"]), data)
    assert response.status_code == 200
    page = response.content.decode().replace("&#x27;", "'")
    assert "Someone changed this table since you opened it, so nothing was saved: reload" in page
    assert "The quota of Vision on h100 was changed by admin since you opened it" in page
    assert "over quota weight" in page
    assert org_state() == before and AuditEvent.objects.count() == audit_rows


def test_a_fresh_quota_table_save_bumps_each_changed_cell(page_client):
    research, nlp = _research(), Project.objects.get(slug="nlp")
    quota, untouched = Quota.objects.get(project=nlp, node_pool__slug="l40s-shared"), _vision_h100()
    response = page_client("deptadmin").post(reverse("org:department_quotas", args=["research"]),
                                             quota_payload(research, {(nlp, "l40s-shared", "weight"): 3}))
    assert response.status_code == 302
    assert Quota.objects.get(pk=quota.pk).version == quota.version + 1
    assert _vision_h100().version == untouched.version


def test_a_quota_created_meanwhile_makes_the_empty_cell_stale(page_client, users):
    research, nlp = _research(), Project.objects.get(slug="nlp")
    pool = NodePool.objects.get(slug="l40s-shared")
    services.quota_delete(actor=users["deptadmin"], quota=Quota.objects.get(project=nlp, node_pool=pool))
    data = quota_payload(research, {(nlp, pool.slug, "deserved"): 1})  # read with no quota there (version 0)
    services.quota_create(actor=users["deptadmin"], node_pool=pool, project=nlp, deserved=0)
    before = org_state()
    response = page_client("deptadmin").post(reverse("org:department_quotas", args=["research"]), data)
    assert response.status_code == 200
    assert f"The quota of NLP on {pool.slug} was created by deptadmin" in response.content.decode()
    assert org_state() == before


def test_a_quota_table_post_without_versions_is_refused(page_client):
    research, nlp = _research(), Project.objects.get(slug="nlp")
    data = {key: value for key, value in quota_payload(research, {(nlp, "l40s-shared", "weight"): 3}).items()
            if not key.endswith("-version")}
    before = org_state()
    response = page_client("deptadmin").post(reverse("org:department_quotas", args=["research"]), data)
    assert response.status_code == 200 and org_state() == before
    assert "does not say which version" in response.content.decode()


def test_the_quota_table_api_refuses_a_stale_row_and_honours_a_fresh_one(client_for, users):
    research = _research()
    quota = _vision_h100()
    services.quota_update(actor=users["admin"], quota=quota, over_quota_weight=5)
    before = org_state()
    response = call(client_for("deptadmin"), "PATCH", f"departments/{research.pk}/quotas/", [
        {"node_pool": "l40s-shared", "project": "nlp", "over_quota_weight": "3", "version": 1},
        {"node_pool": "h100", "project": "vision", "over_quota_weight": "2", "version": quota.version},
    ])
    assert response.status_code == 400
    assert list(response.json()) == ["1"]
    assert "The quota of Vision on h100 was changed by admin" in response.json()["1"]["version"][0]
    assert org_state() == before
    fresh = call(client_for("deptadmin"), "PATCH", f"departments/{research.pk}/quotas/", [
        {"node_pool": "h100", "project": "vision", "over_quota_weight": "2", "version": quota.version + 1}])
    assert fresh.status_code == 200
    row = next(row for row in fresh.json() if row["id"] == quota.pk)
    assert (row["over_quota_weight"], row["version"]) == ("2.00", quota.version + 2)


# --- the API: ETag, If-Match, version ----------------------------------------------------------------------------


def etag_version(etag: str) -> int:
    """The row's version in its ETag: W/"<version>", or W/"<version>.<digest of nested rows' versions>"."""
    assert etag.startswith('W/"') and etag.endswith('"'), etag
    return int(etag[3:-1].split(".")[0])


# (resource path, the row, a PATCH body, the change someone else makes meanwhile, a field the refusal names)
API_CASES: list[tuple[str, Callable[[], Any], dict[str, Any], Callable[[Any], Any], str]] = [
    ("node-pools", _pool, {"name": "H100 mine"},
     lambda users: services.node_pool_update(actor=users["admin"], node_pool=_pool(), description="theirs"),
     "description"),
    ("departments", _research, {"description": "mine"},
     lambda users: services.department_update(actor=users["admin"], department=_research(), max_project_weight=8),
     "max project weight"),
    ("projects", _vision, {"description": "mine"},
     lambda users: services.project_update(actor=users["lead"], project=_vision(),
                                           default_priority_class=_another_default()),
     "default priority class"),
    ("quotas", _vision_h100, {"over_quota_weight": "3"},
     lambda users: services.quota_update(actor=users["admin"], quota=_vision_h100(), over_quota_weight=5),
     "over quota weight"),
    ("priority-classes", _train, {"description": "mine"},
     lambda users: services.priority_class_update(actor=users["admin"], priority_class=_train(), value=70),
     "value"),
]
API_IDS = [case[0] for case in API_CASES]


@pytest.mark.parametrize(("resource", "row", "body", "meanwhile", "field"), API_CASES, ids=API_IDS)
def test_reads_carry_the_version_and_its_etag(client_for, resource, row, body, meanwhile, field):
    response = call(client_for("admin"), "GET", f"{resource}/{row().pk}/")
    assert response.status_code == 200
    assert etag_version(response["ETag"]) == row().version == response.json()["version"]
    listed = call(client_for("admin"), "GET", f"{resource}/")
    # A list's ETag tags its body (for If-None-Match) and names no version: sent as If-Match, no row matches it.
    assert listed["ETag"].startswith('W/"c-') and all("version" in item for item in listed.json()["results"])
    before = org_state()
    refused = call(client_for("admin"), "PATCH", f"{resource}/{row().pk}/", body, HTTP_IF_MATCH=listed["ETag"])
    assert refused.status_code == 412 and refused.json()["current_version"] == row().version
    assert etag_version(refused["ETag"]) == row().version and org_state() == before


@pytest.mark.parametrize("how", ["If-Match", "version"])
@pytest.mark.parametrize(("resource", "row", "body", "meanwhile", "field"), API_CASES, ids=API_IDS)
def test_a_stale_patch_is_refused_with_412(client_for, users, resource, row, body, meanwhile, field, how):
    client = client_for("admin")
    etag = call(client, "GET", f"{resource}/{row().pk}/")["ETag"]
    read = row().version
    meanwhile(users)
    before, audit_rows = org_state(), AuditEvent.objects.count()
    extra = {"HTTP_IF_MATCH": etag} if how == "If-Match" else {}
    response = call(client, "PATCH", f"{resource}/{row().pk}/", {**body, "version": read} if how == "version" else body,
                    **extra)
    assert response.status_code == 412, response.content
    error = response.json()
    assert "was changed by" in error["detail"] and field in error["detail"] and "reload" in error["detail"]
    assert error["current_version"] == row().version == read + 1 and etag_version(response["ETag"]) == read + 1
    assert org_state() == before and AuditEvent.objects.count() == audit_rows


@pytest.mark.parametrize(("resource", "row", "body", "meanwhile", "field"), API_CASES, ids=API_IDS)
def test_two_patches_with_one_etag_the_second_gets_412(client_for, resource, row, body, meanwhile, field):
    client = client_for("admin")
    etag = call(client, "GET", f"{resource}/{row().pk}/")["ETag"]
    first = call(client, "PATCH", f"{resource}/{row().pk}/", body, HTTP_IF_MATCH=etag)
    assert first.status_code == 200, first.content
    version = etag_version(etag)
    assert first.json()["version"] == version + 1 and etag_version(first["ETag"]) == version + 1
    second = call(client, "PATCH", f"{resource}/{row().pk}/", body, HTTP_IF_MATCH=etag)
    assert second.status_code == 412
    assert call(client, "PATCH", f"{resource}/{row().pk}/", body, HTTP_IF_MATCH=first["ETag"]).status_code == 200


@pytest.mark.parametrize(("resource", "row", "body", "meanwhile", "field"), API_CASES, ids=API_IDS)
def test_an_entity_tag_that_is_not_the_current_one_is_412(client_for, resource, row, body, meanwhile, field):
    """RFC 9110 section 13.1.1: a well-formed If-Match none of whose tags is current fails the precondition."""
    client = client_for("admin")
    version = row().version
    for header in ('"nope"', 'W/"nope"', 'W/"0"', f'W/"{version + 1}"', f'W/"{version + 1}", W/"{version + 2}"',
                   f'"{version + 5}.abc"'):
        before, audit_rows = org_state(), AuditEvent.objects.count()
        stale = call(client, "PATCH", f"{resource}/{row().pk}/", body, HTTP_IF_MATCH=header)
        assert stale.status_code == 412, (header, stale.content)
        assert stale.json()["current_version"] == version and etag_version(stale["ETag"]) == version
        assert org_state() == before and AuditEvent.objects.count() == audit_rows
    # One of several tags current: the condition holds.
    matched = call(client, "PATCH", f"{resource}/{row().pk}/", body,
                   HTTP_IF_MATCH=f'W/"{version + 7}", W/"{version}"')
    assert matched.status_code == 200 and matched.json()["version"] == version + 1


@pytest.mark.parametrize(("resource", "row", "body", "meanwhile", "field"), API_CASES, ids=API_IDS)
def test_a_patch_without_a_version_is_unconditional_and_bad_conditions_are_400(client_for, resource, row, body,
                                                                                meanwhile, field):
    client = client_for("admin")
    version = row().version
    for header in ("3", "nope", f'W/"{version}", nope'):
        before = org_state()
        bad = call(client, "PATCH", f"{resource}/{row().pk}/", body, HTTP_IF_MATCH=header)
        assert bad.status_code == 400 and "If-Match" in bad.json(), header
        assert org_state() == before
    disagree = call(client, "PATCH", f"{resource}/{row().pk}/", {**body, "version": version},
                    HTTP_IF_MATCH=f'W/"{version + 1}"')
    assert disagree.status_code == 400 and "version" in disagree.json()
    assert call(client, "PATCH", f"{resource}/{row().pk}/", body, HTTP_IF_MATCH="*").status_code == 200
    assert call(client, "PATCH", f"{resource}/{row().pk}/", body).status_code == 200


def test_a_create_may_not_name_a_version(client_for):
    before = org_state()
    response = call(client_for("admin"), "POST", "priority-classes/", {"name": "urgent", "value": 5, "version": 7})
    assert response.status_code == 400 and "version" in response.json()
    assert org_state() == before


# --- DELETE honours If-Match as PATCH does ---------------------------------------------------------------------------


def _scratch_project(users: Any) -> Project:
    return services.project_create(actor=users["admin"], department=_research(), slug="scratch", name="Scratch",
                                   default_priority_class=_train())


# (resource, a deletable row made for the test, someone else's change to it meanwhile)
DELETE_CASES: list[tuple[str, Callable[[Any], Any], Callable[[Any, Any], Any]]] = [
    ("node-pools",
     lambda users: services.node_pool_create(
         actor=users["admin"], slug="b200", name="B200", gpu_resource="nvidia.com/gpu", gpu_product="NVIDIA-B200",
         cut=NodePool.Cut.FULL, capacity=8, node_labels={"portal.gpu/pool": "b200"}),
     lambda users, row: services.node_pool_update(actor=users["admin"], node_pool=row, description="theirs")),
    ("departments",
     lambda users: services.department_create(actor=users["admin"], slug="lab", name="Lab"),
     lambda users, row: services.department_update(actor=users["admin"], department=row, max_project_weight=8)),
    ("projects", _scratch_project,
     lambda users, row: services.project_update(actor=users["admin"], project=row, description="theirs")),
    ("quotas",
     lambda users: services.quota_set(actor=users["admin"], node_pool=_pool(), project=_scratch_project(users),
                                      deserved=0, limit=2, over_quota_weight=1),
     lambda users, row: services.quota_update(actor=users["admin"], quota=row, over_quota_weight=2)),
    ("priority-classes",
     lambda users: services.priority_class_create(actor=users["admin"], name="urgent", value=5, preemptible=True),
     lambda users, row: services.priority_class_update(actor=users["admin"], priority_class=row, value=6)),
]


@pytest.mark.parametrize(("resource", "make", "meanwhile"), DELETE_CASES, ids=[case[0] for case in DELETE_CASES])
def test_a_delete_with_a_stale_if_match_is_refused_with_412_and_a_fresh_one_deletes(client_for, users, resource,
                                                                                   make, meanwhile):
    row = make(users)
    model = type(row)
    client = client_for("admin")
    etag = call(client, "GET", f"{resource}/{row.pk}/")["ETag"]
    meanwhile(users, row)
    audit_rows = AuditEvent.objects.count()
    stale = call(client, "DELETE", f"{resource}/{row.pk}/", HTTP_IF_MATCH=etag)
    assert stale.status_code == 412, stale.content
    current = model.objects.get(pk=row.pk).version
    assert stale.json()["current_version"] == current == etag_version(etag) + 1
    assert "was changed by admin" in stale.json()["detail"] and AuditEvent.objects.count() == audit_rows
    assert call(client, "DELETE", f"{resource}/{row.pk}/", HTTP_IF_MATCH='"nope"').status_code == 412
    assert call(client, "DELETE", f"{resource}/{row.pk}/", HTTP_IF_MATCH="nope").status_code == 400
    assert model.objects.filter(pk=row.pk).exists()
    fresh = call(client, "GET", f"{resource}/{row.pk}/")["ETag"]
    assert call(client, "DELETE", f"{resource}/{row.pk}/", HTTP_IF_MATCH=fresh).status_code == 204
    assert not model.objects.filter(pk=row.pk).exists()


def test_a_delete_without_if_match_stays_unconditional(client_for, users):
    row = services.priority_class_create(actor=users["admin"], name="urgent", value=5, preemptible=True)
    services.priority_class_update(actor=users["admin"], priority_class=row, value=6)
    assert call(client_for("admin"), "DELETE", f"priority-classes/{row.pk}/").status_code == 204


def test_the_schema_documents_if_match_on_every_versioned_delete(client_for):
    schema = client_for("admin").get("/api/v1/schema/", {"format": "json"}).json()
    for resource, *_ in DELETE_CASES:
        parameters = schema["paths"][f"/api/v1/{resource}/{{id}}/"]["delete"].get("parameters", [])
        assert any(p["name"] == "If-Match" and p["in"] == "header" for p in parameters), resource
        assert "412" in schema["paths"][f"/api/v1/{resource}/{{id}}/"]["delete"]["responses"], resource
