"""The API access matrix: every role x inside/outside its scope x every endpoint, read and write.

Expected codes are listed per demo user, in the order admin, deptadmin (Research), lead (Research), alice (vision),
bob (nlp), carol (forecasting, Data Science), viewer (everything). Rows a user may not see answer 404; rows they
see but may not change answer 403. Each user's call runs in a savepoint that is rolled back, so every user
starts from the same demo organisation; a refused call must leave everything as it was.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.access_matrix import USERS, as_every_user, fill_ids, matrix_params
from tests.api_support import call, demo_ids, org_state

# (id, method, path, body) -> codes for admin, deptadmin, lead, alice, bob, carol, viewer
# Paths and bodies name demo rows by the keys of demo_ids() (plus spare_* rows added by the fixture below).
MATRIX: list[tuple[str, str, str, Any, tuple[int, ...]]] = [
    # --- reads ---------------------------------------------------------------------------------------------
    ("me", "GET", "me/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("pools list", "GET", "node-pools/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("pool detail", "GET", "node-pools/{pool_h100}/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("departments list", "GET", "departments/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("department inside research", "GET", "departments/{research}/", None, (200, 200, 200, 200, 200, 404, 200)),
    ("department data-science", "GET", "departments/{data_science}/", None, (200, 404, 404, 404, 404, 200, 200)),
    ("projects list", "GET", "projects/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("project vision", "GET", "projects/{vision}/", None, (200, 200, 200, 200, 404, 404, 200)),
    ("project forecasting", "GET", "projects/{forecasting}/", None, (200, 404, 404, 404, 404, 200, 200)),
    ("quotas list", "GET", "quotas/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("quota vision", "GET", "quotas/{q_vision_h100}/", None, (200, 200, 200, 200, 404, 404, 200)),
    ("quota research dept", "GET", "quotas/{q_research_h100}/", None, (200, 200, 200, 200, 200, 404, 200)),
    ("quota forecasting", "GET", "quotas/{q_forecasting_h100}/", None, (200, 404, 404, 404, 404, 200, 200)),
    ("quota data-science dept", "GET", "quotas/{q_data_science_h100}/", None, (200, 404, 404, 404, 404, 200, 200)),
    ("priority classes list", "GET", "priority-classes/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("priority class", "GET", "priority-classes/{pc_train}/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("role bindings list", "GET", "role-bindings/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("binding of alice", "GET", "role-bindings/{rb_alice}/", None, (200, 200, 200, 200, 404, 404, 200)),
    ("binding of carol", "GET", "role-bindings/{rb_carol}/", None, (200, 404, 404, 404, 404, 200, 200)),
    ("my api tokens", "GET", "tokens/", None, (200, 200, 200, 200, 200, 200, 200)),
    # Scoped lists (tests/apps/org/test_api_data.py checks whose rows each sees).
    ("data sources list", "GET", "data-sources/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("pull secrets list", "GET", "pull-secrets/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("budgets list", "GET", "budgets/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("policies list", "GET", "policies/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("serving reservations list", "GET", "serving-reservations/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("my notification channels", "GET", "notification-channels/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("audit list", "GET", "audit-events/", None, (200, 200, 403, 403, 403, 403, 403)),
    ("audit research row", "GET", "audit-events/{ev_vision}/", None, (200, 200, 403, 403, 403, 403, 403)),
    ("audit data-science row", "GET", "audit-events/{ev_forecasting}/", None, (200, 404, 403, 403, 403, 403, 403)),
    ("audit installation row", "GET", "audit-events/{ev_pool}/", None, (200, 404, 403, 403, 403, 403, 403)),
    # --- node pools ----------------------------------------------------------------------------------------
    ("create pool", "POST", "node-pools/",
     {"slug": "b200", "name": "B200", "gpu_resource": "nvidia.com/gpu", "capacity": 8},
     (201, 403, 403, 403, 403, 403, 403)),
    ("change pool", "PATCH", "node-pools/{pool_h100}/", {"description": "changed"},
     (200, 403, 403, 403, 403, 403, 403)),
    ("delete pool", "DELETE", "node-pools/{spare_pool}/", None, (204, 403, 403, 403, 403, 403, 403)),
    # --- departments ---------------------------------------------------------------------------------------
    ("create department", "POST", "departments/", {"slug": "robotics", "name": "Robotics"},
     (201, 403, 403, 403, 403, 403, 403)),
    ("change research", "PATCH", "departments/{research}/", {"description": "changed"},
     (200, 403, 403, 403, 403, 404, 403)),
    ("change data-science", "PATCH", "departments/{data_science}/", {"description": "changed"},
     (200, 404, 404, 404, 404, 403, 403)),
    ("delete empty department", "DELETE", "departments/{spare_department}/", None,
     (204, 404, 404, 404, 404, 404, 403)),
    # --- projects ------------------------------------------------------------------------------------------
    ("create project in research", "POST", "projects/",
     {"slug": "robots", "name": "Robots", "department": "{research}"},
     (201, 201, 403, 403, 403, 403, 403)),
    ("create project in data-science", "POST", "projects/",
     {"slug": "robots", "name": "Robots", "department": "{data_science}"},
     (201, 400, 403, 403, 403, 403, 403)),
    ("change vision", "PATCH", "projects/{vision}/", {"description": "changed"},
     (200, 200, 403, 403, 404, 404, 403)),
    ("vision default priority", "PATCH", "projects/{vision}/", {"default_priority_class": "build"},
     (200, 200, 200, 403, 404, 404, 403)),
    ("change forecasting", "PATCH", "projects/{forecasting}/", {"description": "changed"},
     (200, 404, 404, 404, 404, 403, 403)),
    ("forecasting default priority", "PATCH", "projects/{forecasting}/", {"default_priority_class": "build"},
     (200, 404, 404, 404, 404, 403, 403)),
    ("map a namespace to vision", "POST", "project-namespaces/",
     {"project": "{vision}", "namespace": "vision-pipelines"}, (201, 403, 403, 403, 403, 403, 403)),
    ("project namespaces list", "GET", "project-namespaces/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("delete vision", "DELETE", "projects/{vision}/", None, (204, 204, 403, 403, 404, 404, 403)),
    ("delete forecasting", "DELETE", "projects/{forecasting}/", None, (204, 404, 404, 404, 404, 403, 403)),
    # --- quotas --------------------------------------------------------------------------------------------
    ("create research project quota", "POST", "quotas/",
     {"node_pool": "h100", "project": "{spare_project}", "deserved": 0, "limit": 2},
     (201, 201, 403, 403, 403, 403, 403)),
    ("create data-science project quota", "POST", "quotas/",
     {"node_pool": "h100", "project": "{spare_ds_project}", "deserved": 0, "limit": 2},
     (201, 400, 403, 403, 403, 403, 403)),
    ("create department quota", "POST", "quotas/",
     {"node_pool": "h100", "department": "{spare_department}", "deserved": 0, "limit": 2},
     (201, 400, 403, 403, 403, 403, 403)),
    ("vision weight", "PATCH", "quotas/{q_vision_h100}/", {"over_quota_weight": "3"},
     (200, 200, 200, 403, 404, 404, 403)),
    ("vision deserved", "PATCH", "quotas/{q_vision_h100}/", {"deserved": 3},
     (200, 200, 403, 403, 404, 404, 403)),
    ("vision limit", "PATCH", "quotas/{q_vision_h100}/", {"limit": 6},
     (200, 200, 403, 403, 404, 404, 403)),
    ("research dept limit", "PATCH", "quotas/{q_research_h100}/", {"limit": 16},
     (200, 403, 403, 403, 403, 404, 403)),
    ("research dept weight", "PATCH", "quotas/{q_research_h100}/", {"over_quota_weight": "3"},
     (200, 403, 403, 403, 403, 404, 403)),
    ("forecasting weight", "PATCH", "quotas/{q_forecasting_h100}/", {"over_quota_weight": "3"},
     (200, 404, 404, 404, 404, 403, 403)),
    ("forecasting deserved", "PATCH", "quotas/{q_forecasting_h100}/", {"deserved": 1},
     (200, 404, 404, 404, 404, 403, 403)),
    ("delete vision quota", "DELETE", "quotas/{q_vision_h100}/", None, (204, 204, 403, 403, 404, 404, 403)),
    ("delete forecasting quota", "DELETE", "quotas/{q_forecasting_h100}/", None,
     (204, 404, 404, 404, 404, 403, 403)),
    ("delete spare dept quota", "DELETE", "quotas/{q_spare_dept_l40s_shared}/", None,
     (204, 404, 404, 404, 404, 404, 403)),
    # --- a department's quota table ------------------------------------------------------------------------
    ("quota table research", "GET", "departments/{research}/quotas/", None, (200, 200, 200, 200, 200, 404, 200)),
    ("quota table data-science", "GET", "departments/{data_science}/quotas/", None,
     (200, 404, 404, 404, 404, 200, 200)),
    ("change quota table research", "PATCH", "departments/{research}/quotas/",
     [{"node_pool": "h100", "project": "{vision}", "over_quota_weight": "3"}], (200, 200, 403, 403, 403, 404, 403)),
    ("change quota table data-science", "PATCH", "departments/{data_science}/quotas/",
     [{"node_pool": "h100", "project": "{forecasting}", "over_quota_weight": "3"}],
     (200, 404, 404, 404, 404, 403, 403)),
    # --- priority classes ----------------------------------------------------------------------------------
    ("create priority class", "POST", "priority-classes/", {"name": "urgent", "value": 200, "preemptible": False},
     (201, 403, 403, 403, 403, 403, 403)),
    ("change priority class", "PATCH", "priority-classes/{pc_train}/", {"description": "changed"},
     (200, 403, 403, 403, 403, 403, 403)),
    ("delete priority class", "DELETE", "priority-classes/{pc_build}/", None, (204, 403, 403, 403, 403, 403, 403)),
    # --- role bindings -------------------------------------------------------------------------------------
    ("grant in vision", "POST", "role-bindings/", {"user": "carol", "role": "viewer", "project": "{vision}"},
     (201, 201, 403, 403, 403, 403, 403)),
    ("grant in data-science", "POST", "role-bindings/",
     {"user": "bob", "role": "viewer", "department": "{data_science}"},
     (201, 400, 403, 403, 403, 403, 403)),
    ("grant admin everywhere", "POST", "role-bindings/", {"user": "bob", "role": "admin"},
     (201, 403, 403, 403, 403, 403, 403)),
    ("revoke alice", "DELETE", "role-bindings/{rb_alice}/", None, (204, 204, 403, 403, 404, 404, 403)),
    ("revoke carol", "DELETE", "role-bindings/{rb_carol}/", None, (204, 404, 404, 404, 404, 403, 403)),
    ("role bindings are not edited", "PATCH", "role-bindings/{rb_alice}/", {"role": "viewer"},
     (405, 405, 405, 405, 405, 405, 405)),
    ("create my api token", "POST", "tokens/", {"name": "ci"}, (201, 201, 201, 201, 201, 201, 201)),
    # --- audit log is read only ----------------------------------------------------------------------------
    ("audit write", "POST", "audit-events/", {"action": "x"}, (405, 405, 403, 403, 403, 403, 403)),
    ("audit delete", "DELETE", "audit-events/{ev_vision}/", None, (405, 405, 403, 403, 403, 403, 403)),
]


@pytest.fixture
def ids(demo) -> dict[str, int]:
    """The demo ids plus spare rows that can be deleted or given quotas without breaking a rule."""
    from apps.core.models import AuditEvent
    from apps.org import services
    from apps.org.models import Department, NodePool

    admin = demo["admin"]
    spare_pool = services.node_pool_create(actor=admin, slug="spare", name="Spare", gpu_resource="nvidia.com/gpu",
                                           capacity=4)
    spare_department = services.department_create(actor=admin, slug="spare-dept", name="Spare")
    services.quota_set(actor=admin, node_pool=NodePool.objects.get(slug="l40s-shared"), department=spare_department,
                       deserved=0, limit=None)
    spare_project = services.project_create(actor=admin, department=Department.objects.get(slug="research"),
                                            slug="spare-research", name="Spare research")
    spare_ds_project = services.project_create(actor=admin, department=Department.objects.get(slug="data-science"),
                                               slug="spare-ds", name="Spare data science")
    found = demo_ids()
    found.update(
        spare_pool=spare_pool.pk, spare_department=spare_department.pk, spare_project=spare_project.pk,
        spare_ds_project=spare_ds_project.pk,
        ev_vision=AuditEvent.objects.filter(project__slug="vision").values_list("pk", flat=True)[0],
        ev_forecasting=AuditEvent.objects.filter(project__slug="forecasting").values_list("pk", flat=True)[0],
        ev_pool=AuditEvent.objects.filter(action="node_pool.create").values_list("pk", flat=True)[0],
    )
    return found


@pytest.mark.parametrize(("method", "path", "body", "expected"), matrix_params(MATRIX))
def test_access_matrix(client_for, ids, method, path, body, expected):
    clients = {username: client_for(username) for username in USERS}
    url, data = path.format(**ids), fill_ids(body, ids)
    outcomes = as_every_user(lambda username: call(clients[username], method, url, data), org_state)
    assert {username: code for username, (code, _) in outcomes.items()} == expected


def test_every_route_is_in_the_matrix():
    """A new organisation or accounts endpoint must get rows in the matrix above (other apps keep their own)."""
    from apps.accounts.api import urls as accounts_urls
    from apps.org.api import urls as org_urls

    routes = {str(route.pattern).lstrip("^").split("/")[0] for route in [*accounts_urls.urlpatterns,
                                                                            *org_urls.urlpatterns]}
    covered = {path.split("/")[0] for _, _, path, _, _ in MATRIX}
    assert routes - {"auth"} <= covered, routes - covered  # the token endpoint: tests/apps/accounts/test_api.py


@pytest.mark.parametrize("path", ["me/", "node-pools/", "departments/", "projects/", "quotas/", "priority-classes/",
                                  "role-bindings/", "audit-events/"])
def test_anonymous_is_refused(client, db, path):
    response = call(client, "GET", path)
    assert response.status_code == 401 and response["WWW-Authenticate"] == 'Token realm="api"'
    assert response.json() == {"detail": "Authentication credentials were not provided."}
    assert call(client, "POST", path, {}).status_code == 401


@pytest.mark.parametrize(
    ("username", "departments", "projects"),
    [
        ("admin", {"research", "production", "data-science"}, {"vision", "nlp", "serving", "etl", "forecasting",
                                                               "analytics"}),
        ("deptadmin", {"research"}, {"vision", "nlp"}),
        ("lead", {"research"}, {"vision", "nlp"}),
        ("alice", {"research"}, {"vision"}),
        ("bob", {"research"}, {"nlp"}),
        ("carol", {"data-science"}, {"forecasting"}),
        ("viewer", {"research", "production", "data-science"}, {"vision", "nlp", "serving", "etl", "forecasting",
                                                                "analytics"}),
    ],
)
def test_lists_show_only_the_scope(client_for, username, departments, projects):
    client = client_for(username)
    assert {row["slug"] for row in call(client, "GET", "departments/").json()["results"]} == departments
    assert {row["slug"] for row in call(client, "GET", "projects/").json()["results"]} == projects
    quotas = call(client, "GET", "quotas/").json()["results"]
    from apps.org.models import Department, Project

    department_ids = set(Department.objects.filter(slug__in=departments).values_list("pk", flat=True))
    project_ids = set(Project.objects.filter(slug__in=projects).values_list("pk", flat=True))
    assert len(quotas) == 3 * (len(departments) + len(projects))
    assert {row["department"] for row in quotas if row["department"]} == department_ids
    assert {row["project"] for row in quotas if row["project"]} == project_ids
