"""The access matrix of the organisation and access pages: every demo role, inside and outside its scope,
reading (GET) and writing (POST). Rows a user may not see answer 404, rows they see but may not change 403,
anonymous users are sent to the login page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.urls import reverse

from apps.accounts.models import RoleBinding
from apps.org import services
from apps.org.models import Department, NodePool, PriorityClass, Project, Quota
from tests.access_matrix import USERS, row

from .view_helpers import pool_payload, quota_payload

ALL = row(200, 200, 200, 200, 200, 200, 200)
ADMIN_ONLY = row(200, 403, 403, 403, 403, 403, 403)
# Research (deptadmin's and lead's department; alice and bob have projects in it, carol does not)
RESEARCH_MANAGE = row(200, 403, 403, 403, 403, 404, 403)
RESEARCH_PROJECTS = row(200, 200, 403, 403, 403, 404, 403)
PRODUCTION = row(200, 404, 404, 404, 404, 404, 403)  # nobody but admin and viewer is bound there
VISION = row(200, 200, 403, 403, 404, 404, 403)  # alice's project; bob sees only nlp
SERVING = row(200, 404, 404, 404, 404, 404, 403)

Url = Callable[[], str]


def binding_of(username: str) -> Callable[[], str]:
    return lambda: reverse("accounts:role_binding_delete",
                           args=[RoleBinding.objects.get(user__username=username).pk])


GET_MATRIX: list[tuple[str, Url, dict[str, int]]] = [
    ("overview", lambda: reverse("org:overview"), ALL),
    ("pools", lambda: reverse("org:pools"), ALL),
    ("pool", lambda: reverse("org:pool", args=["h100"]), ALL),
    ("pool_create", lambda: reverse("org:pool_create"), ADMIN_ONLY),
    ("pool_edit", lambda: reverse("org:pool_edit", args=["h100"]), ADMIN_ONLY),
    ("pool_delete", lambda: reverse("org:pool_delete", args=["h100"]), ADMIN_ONLY),
    ("departments", lambda: reverse("org:departments"), ALL),
    ("department_create", lambda: reverse("org:department_create"), ADMIN_ONLY),
    ("department_edit:inside", lambda: reverse("org:department_edit", args=["research"]), RESEARCH_MANAGE),
    ("department_edit:outside", lambda: reverse("org:department_edit", args=["production"]), PRODUCTION),
    ("department_delete:inside", lambda: reverse("org:department_delete", args=["research"]), RESEARCH_MANAGE),
    ("department_delete:outside", lambda: reverse("org:department_delete", args=["production"]), PRODUCTION),
    ("department_quotas:inside", lambda: reverse("org:department_quotas", args=["research"]), RESEARCH_PROJECTS),
    ("department_quotas:outside", lambda: reverse("org:department_quotas", args=["production"]), PRODUCTION),
    ("project_create:inside", lambda: reverse("org:project_create", args=["research"]), RESEARCH_PROJECTS),
    ("project_create:outside", lambda: reverse("org:project_create", args=["production"]), PRODUCTION),
    ("project_edit:inside", lambda: reverse("org:project_edit", args=["vision"]), VISION),
    ("project_edit:outside", lambda: reverse("org:project_edit", args=["serving"]), SERVING),
    ("project_delete:inside", lambda: reverse("org:project_delete", args=["vision"]), VISION),
    ("project_delete:outside", lambda: reverse("org:project_delete", args=["serving"]), SERVING),
    ("priority_classes", lambda: reverse("org:priority_classes"), ALL),
    ("priority_class_create", lambda: reverse("org:priority_class_create"), ADMIN_ONLY),
    ("priority_class_edit", lambda: reverse("org:priority_class_edit", args=["train"]), ADMIN_ONLY),
    ("priority_class_delete", lambda: reverse("org:priority_class_delete", args=["train"]), ADMIN_ONLY),
    ("weights", lambda: reverse("org:weights"), row(200, 200, 200, 403, 403, 403, 403)),
    ("audit", lambda: reverse("org:audit"), row(200, 200, 403, 403, 403, 403, 403)),
    ("role_bindings", lambda: reverse("accounts:role_bindings"), ALL),
    ("role_binding_create", lambda: reverse("accounts:role_binding_create"), row(200, 200, 403, 403, 403, 403, 403)),
    # alice's researcher binding on vision (inside Research), carol's on forecasting (outside)
    ("role_binding_delete:inside", binding_of("alice"), row(200, 200, 403, 403, 404, 404, 403)),
    ("role_binding_delete:outside", binding_of("carol"), row(200, 404, 404, 404, 404, 403, 403)),
]


def _cases(matrix: list[tuple[str, Any, dict[str, int]]]) -> list[Any]:
    return [pytest.param(page, url, user, expected[user], id=f"{page}-{user}")
            for page, url, expected in matrix for user in USERS]


@pytest.mark.parametrize(("page", "url", "user", "expected"), _cases(GET_MATRIX))
def test_get(page_client, page, url, user, expected):
    response = page_client(user).get(url())
    assert response.status_code == expected, f"{user} GET {page}"


@pytest.mark.parametrize(("page", "url"), [pytest.param(page, url, id=page) for page, url, _ in GET_MATRIX])
def test_anonymous_is_sent_to_login(users, client, page, url):
    response = client.get(url())
    assert response.status_code == 302
    assert response.url.startswith(reverse("accounts:login"))


# --- writes ----------------------------------------------------------------------------------------------------


def _research() -> Department:
    return Department.objects.get(slug="research")


def _pool_edit_payload() -> dict[str, Any]:
    return pool_payload(slug="h100", name="H100 renamed", gpu_product="NVIDIA-H100-80GB-HBM3", capacity="16",
                        node_labels="portal.gpu/pool=h100", version=NodePool.objects.get(slug="h100").version)


def _quota_change(slug: str) -> Callable[[], dict[str, str]]:
    def payload() -> dict[str, str]:
        department = Department.objects.get(slug=slug)
        project = department.projects.order_by("name").first()
        return quota_payload(department, {(project, "l40s-shared", "weight"): 3})
    return payload


def _weight(project_slug: str) -> Callable[[], dict[str, Any]]:
    def payload() -> dict[str, Any]:
        quota = Quota.objects.get(project__slug=project_slug, node_pool__slug="h100")
        return {"quota": quota.pk, "over_quota_weight": "3", "version": quota.version}
    return payload


WRITE_OK = 302
# (page, url, payload, expected per user, the change a 302 must have made)
POST_MATRIX: list[tuple[str, Url, Callable[[], dict[str, Any]], dict[str, int], Callable[[], bool]]] = [
    ("pool_create", lambda: reverse("org:pool_create"), lambda: pool_payload(), row(302, 403, 403, 403, 403, 403, 403),
     lambda: NodePool.objects.filter(slug="b200").exists()),
    ("pool_edit", lambda: reverse("org:pool_edit", args=["h100"]), _pool_edit_payload,
     row(302, 403, 403, 403, 403, 403, 403), lambda: NodePool.objects.get(slug="h100").name == "H100 renamed"),
    ("pool_delete", lambda: reverse("org:pool_delete", args=["spare"]), dict, row(302, 403, 403, 403, 403, 403, 403),
     lambda: not NodePool.objects.filter(slug="spare").exists()),
    ("department_create", lambda: reverse("org:department_create"),
     lambda: {"slug": "robotics", "name": "Robotics", "min_project_weight": "0", "max_project_weight": "5"},
     row(302, 403, 403, 403, 403, 403, 403), lambda: Department.objects.filter(slug="robotics").exists()),
    ("department_edit:inside", lambda: reverse("org:department_edit", args=["research"]),
     lambda: {"name": "Research", "description": "changed", "min_project_weight": "0", "max_project_weight": "10",
              "version": _research().version},
     row(302, 403, 403, 403, 403, 404, 403), lambda: _research().description == "changed"),
    ("department_edit:outside", lambda: reverse("org:department_edit", args=["production"]),
     lambda: {"name": "Production", "description": "changed", "min_project_weight": "0", "max_project_weight": "10",
              "version": Department.objects.get(slug="production").version},
     PRODUCTION | {"admin": 302}, lambda: Department.objects.get(slug="production").description == "changed"),
    ("department_delete:outside", lambda: reverse("org:department_delete", args=["empty"]),
     dict, row(302, 404, 404, 404, 404, 404, 403), lambda: not Department.objects.filter(slug="empty").exists()),
    ("department_quotas:inside", lambda: reverse("org:department_quotas", args=["research"]), _quota_change("research"),
     row(302, 302, 403, 403, 403, 404, 403),
     lambda: Quota.objects.get(project__slug="nlp", node_pool__slug="l40s-shared").over_quota_weight == 3),
    ("department_quotas:outside", lambda: reverse("org:department_quotas", args=["production"]),
     _quota_change("production"), PRODUCTION | {"admin": 302},
     lambda: Quota.objects.get(project__slug="etl", node_pool__slug="l40s-shared").over_quota_weight == 3),
    ("project_create:inside", lambda: reverse("org:project_create", args=["research"]),
     lambda: {"slug": "speech", "name": "Speech"}, row(302, 302, 403, 403, 403, 404, 403),
     lambda: Project.objects.filter(slug="speech", namespace="proj-speech").exists()),
    ("project_create:outside", lambda: reverse("org:project_create", args=["production"]),
     lambda: {"slug": "speech", "name": "Speech"}, PRODUCTION | {"admin": 302},
     lambda: Project.objects.filter(slug="speech").exists()),
    ("project_edit:inside", lambda: reverse("org:project_edit", args=["vision"]),
     lambda: {"name": "Vision 2", "version": Project.objects.get(slug="vision").version},
     row(302, 302, 403, 403, 404, 404, 403),
     lambda: Project.objects.get(slug="vision").name == "Vision 2"),
    ("project_edit:outside", lambda: reverse("org:project_edit", args=["serving"]),
     lambda: {"name": "Serving 2", "does_not_lend": "on", "version": Project.objects.get(slug="serving").version},
     SERVING | {"admin": 302},
     lambda: Project.objects.get(slug="serving").name == "Serving 2"),
    ("project_delete:inside", lambda: reverse("org:project_delete", args=["vision"]), dict,
     row(302, 302, 403, 403, 404, 404, 403), lambda: not Project.objects.filter(slug="vision").exists()),
    ("project_delete:outside", lambda: reverse("org:project_delete", args=["serving"]), dict,
     SERVING | {"admin": 302}, lambda: not Project.objects.filter(slug="serving").exists()),
    ("priority_class_create", lambda: reverse("org:priority_class_create"),
     lambda: {"name": "urgent", "value": "200"}, row(302, 403, 403, 403, 403, 403, 403),
     lambda: PriorityClass.objects.filter(name="urgent", preemptible=False).exists()),
    ("priority_class_edit", lambda: reverse("org:priority_class_edit", args=["train"]),
     lambda: {"value": "55", "preemptible": "on", "version": PriorityClass.objects.get(name="train").version},
     row(302, 403, 403, 403, 403, 403, 403),
     lambda: PriorityClass.objects.get(name="train").value == 55),
    ("priority_class_delete", lambda: reverse("org:priority_class_delete", args=["build"]), dict,
     row(302, 403, 403, 403, 403, 403, 403), lambda: not PriorityClass.objects.filter(name="build").exists()),
    ("weights:inside", lambda: reverse("org:weights"), _weight("vision"), row(302, 302, 302, 403, 403, 403, 403),
     lambda: Quota.objects.get(project__slug="vision", node_pool__slug="h100").over_quota_weight == 3),
    ("weights:outside", lambda: reverse("org:weights"), _weight("serving"), row(302, 404, 404, 403, 403, 403, 403),
     lambda: Quota.objects.get(project__slug="serving", node_pool__slug="h100").over_quota_weight == 3),
    ("role_binding_create:inside", lambda: reverse("accounts:role_binding_create"),
     lambda: {"username": "carol", "role": "viewer", "scope": f"department:{_research().pk}"},
     row(302, 302, 403, 403, 403, 403, 403),
     lambda: RoleBinding.objects.filter(user__username="carol", role="viewer", department__slug="research").exists()),
    ("role_binding_delete:inside", binding_of("alice"), dict, row(302, 302, 403, 403, 404, 404, 403),
     lambda: not RoleBinding.objects.filter(user__username="alice").exists()),
    ("role_binding_delete:outside", binding_of("carol"), dict, row(302, 404, 404, 404, 404, 403, 403),
     lambda: not RoleBinding.objects.filter(user__username="carol").exists()),
]


@pytest.fixture
def spare(users):
    """A pool without quotas and a department without projects, so deletes can succeed."""
    services.node_pool_create(actor=users["admin"], slug="spare", name="Spare", gpu_resource="nvidia.com/gpu",
                              capacity=2)
    services.department_create(actor=users["admin"], slug="empty", name="Empty")


@pytest.mark.parametrize(("page", "url", "payload", "user", "expected", "changed"), [
    pytest.param(page, url, payload, user, expected[user], changed, id=f"{page}-{user}")
    for page, url, payload, expected, changed in POST_MATRIX for user in USERS
])
def test_post(page_client, spare, page, url, payload, user, expected, changed):
    target, data = url(), payload()
    audit_before = _audit_count()
    response = page_client(user).post(target, data)
    assert response.status_code == expected, f"{user} POST {page}: {response.content[:2000]!r}"
    if expected == WRITE_OK:
        assert changed(), f"{user} POST {page} redirected without making the change"
        assert _audit_count() > audit_before, f"{user} POST {page} wrote no audit row"
    else:
        assert not changed()
        assert _audit_count() == audit_before


def _audit_count() -> int:
    from apps.core.models import AuditEvent

    return AuditEvent.objects.count()


@pytest.mark.parametrize("page", [page for page, *_ in POST_MATRIX])
def test_anonymous_post_changes_nothing(client, spare, page):
    _, url, payload, _, changed = next(entry for entry in POST_MATRIX if entry[0] == page)
    response = client.post(url(), payload())
    assert response.status_code == 302 and response.url.startswith(reverse("accounts:login"))
    assert not changed()
