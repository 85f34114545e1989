"""The quota table API, GET and PATCH /api/v1/departments/<id or slug>/quotas/: the page's all-or-nothing save
(services.quota_table_save), 400 with every error by row and field, 403/404 by the access rules, hostile bodies
answered 400 (never 500), and a pinned number of queries."""

from __future__ import annotations

from typing import Any

import pytest

from apps.core.models import AuditEvent
from apps.org.models import Quota
from tests.api_support import call, demo_ids, org_state


@pytest.fixture
def ids(demo) -> dict[str, int]:
    return demo_ids()


def path(department: Any) -> str:
    return f"departments/{department}/quotas/"


def refused(client: Any, url: str, body: Any, status: int = 400) -> Any:
    before = org_state()
    response = call(client, "PATCH", url, body)
    assert response.status_code == status, response.content
    assert org_state() == before
    return response.json()


def cells(rows: list[dict]) -> dict[tuple, tuple]:
    return {(row["department"], row["project"], row["node_pool"]): (row["deserved"], row["limit"],
                                                                    row["over_quota_weight"]) for row in rows}


# --- reading ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["id", "slug"])
def test_get_lists_the_department_row_then_its_projects(client_for, ids, key):
    response = call(client_for("deptadmin"), "GET", path(ids["research"] if key == "id" else "research"))
    assert response.status_code == 200
    rows = response.json()
    assert [(row["department"], row["project"]) for row in rows] == (
        [(ids["research"], None)] * 3 + [(None, ids["nlp"])] * 3 + [(None, ids["vision"])] * 3
    )
    assert cells(rows)[(None, ids["vision"], "h100")] == (4, 8, "2.00")


def test_get_shows_only_the_rows_the_user_may_see(client_for, ids):
    rows = call(client_for("bob"), "GET", path("research")).json()
    assert {(row["department"], row["project"]) for row in rows} == {(ids["research"], None), (None, ids["nlp"])}


@pytest.mark.parametrize(("username", "department"), [
    ("carol", "research"), ("deptadmin", "data-science"), ("deptadmin", "9999999"), ("admin", "nowhere"),
    ("admin", "²"), ("admin", "0"), ("admin", "-1"), ("admin", "1e3"), ("admin", "%00"),
])
def test_departments_out_of_sight_answer_404(client_for, username, department):
    assert call(client_for(username), "GET", path(department)).status_code == 404
    refused(client_for(username), path(department), [{"node_pool": "h100", "project": "vision", "deserved": 1}],
            status=404)


# --- changing --------------------------------------------------------------------------------------------------


def test_patch_saves_every_row_and_answers_the_table(client_for, demo, ids):
    audit = AuditEvent.objects.count()
    response = call(client_for("deptadmin"), "PATCH", path(ids["research"]), [
        {"node_pool": "h100", "project": "vision", "deserved": 3, "limit": 6},
        {"node_pool": "h100", "project": ids["nlp"], "deserved": 5, "over_quota_weight": "4.5"},
        {"node_pool": "l40s-shared", "project": "vision", "memory_gib": 256, "cpu_cores": "32"},
        {"node_pool": "h100", "deserved": 8, "limit": 12},  # the department's own row, unchanged
    ])
    assert response.status_code == 200, response.content
    table = cells(response.json())
    assert table[(None, ids["vision"], "h100")] == (3, 6, "2.00")
    assert table[(None, ids["nlp"], "h100")] == (5, 8, "4.50")
    l40s = Quota.objects.get(pk=ids["q_vision_l40s_shared"])
    assert (l40s.memory_gib, l40s.cpu_cores, l40s.deserved) == (256, 32, 8)
    events = AuditEvent.objects.order_by("id")[audit:]
    assert [(event.action, event.object_id) for event in events] == [
        ("quota.update", str(ids["q_vision_h100"])), ("quota.update", str(ids["q_nlp_h100"])),
        ("quota.update", str(ids["q_vision_l40s_shared"])),
    ]
    assert all(event.actor == demo["deptadmin"] for event in events)


def test_patch_creates_missing_cells(client_for, ids):
    admin = client_for("admin")
    assert call(admin, "DELETE", f"quotas/{ids['q_etl_h100']}/").status_code == 204
    response = call(admin, "PATCH", path("production"), [{"node_pool": "h100", "project": "etl", "deserved": 0}])
    assert response.status_code == 200
    quota = Quota.objects.get(project_id=ids["etl"], node_pool__slug="h100")
    assert (quota.deserved, quota.limit, quota.over_quota_weight) == (0, None, 1)
    assert AuditEvent.objects.filter(action="quota.create", object_id=str(quota.pk)).exists()


def test_every_error_at_once_keyed_by_row_and_field(client_for, ids):
    errors = refused(client_for("deptadmin"), path("research"), [
        {"node_pool": "h100", "project": "vision", "deserved": 3},
        {"node_pool": "h100", "project": "nlp", "deserved": 6},
        {"node_pool": "h100", "limit": 20},
        {"node_pool": "b200", "project": "vision", "deserved": 1},
        {"node_pool": "h100", "project": "forecasting", "deserved": 1},
        {"node_pool": "a100-mig-3g40gb", "project": "vision", "over_quota_weight": "1001", "limit": 1},
        {"node_pool": "l40s-shared", "project": ids["vision"], "deserved": 8, "limit": 12},  # fine
    ])
    # Vision's and NLP's h100 rows break the department's quota together: both are marked, with the proposed sums.
    assert errors == {
        "0": {"deserved": ["Research has 8 deserved units on h100 and its other projects hold 6, so this project "
                           "can have at most 2. Raise the department's quota first or lower another project's."]},
        "1": {"deserved": ["Research has 8 deserved units on h100 and its other projects hold 3, so this project "
                           "can have at most 5. Raise the department's quota first or lower another project's."]},
        "2": {"limit": ["You may not change this field of this quota."]},
        "3": {"node_pool": ["There is no node pool 'b200'."]},
        "4": {"project": ["Research has no project 'forecasting'."]},
        "5": {"over_quota_weight": ["Ensure this value is less than or equal to 1000."]},
    }


def test_shape_errors_are_reported_for_every_row_before_any_rule(client_for):
    errors = refused(client_for("admin"), path("research"), [
        {"node_pool": "h100", "project": "vision", "deserved": 3},
        {"node_pool": "h100", "project": "vision", "deserved": "lots"},
        {"project": "vision", "deserved": 1},
        {"node_pool": "h100", "project": "vision", "colour": "red"},
    ])
    assert errors == {
        "1": {"deserved": ["A valid integer is required."]},
        "2": {"node_pool": ["This field is required."]},
        "3": {"colour": ["No such field of a quota table row."]},
    }


@pytest.mark.parametrize("username", ["lead", "alice", "bob", "viewer"])
def test_users_who_do_not_manage_the_projects_get_403(client_for, username):
    errors = refused(client_for(username), path("research"),
                     [{"node_pool": "h100", "project": "vision", "over_quota_weight": 3}], status=403)
    assert errors == {"detail": "You may not make this change."}


def test_403_comes_before_the_body_is_read(client_for):
    assert refused(client_for("lead"), path("research"), "not a list", status=403) == {
        "detail": "You may not make this change."}


def test_anonymous_is_refused(client, demo):
    assert call(client, "GET", path("research")).status_code == 401
    assert call(client, "PATCH", path("research"), []).status_code == 401


# --- hostile input: always 400 with a message, never 500, nothing changed --------------------------------------

HOSTILE: list[tuple[str, Any, dict]] = [
    ("object body", {"node_pool": "h100"}, {"non_field_errors": ['Expected a list of items but got type "dict".']}),
    ("string body", '"rows"', {"non_field_errors": ['Expected a list of items but got type "str".']}),
    ("number body", 3, {"non_field_errors": ['Expected a list of items but got type "int".']}),
    ("row is a number", [7], {"0": {"non_field_errors": ["Invalid data. Expected a dictionary, but got int."]}}),
    ("row is a list", [["h100"]], {"0": {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]}}),
    ("superscript two as an id", [{"node_pool": "h100", "project": "²", "deserved": 1}],
     {"0": {"project": ["Give an id (a positive whole number) or a slug."]}}),
    ("arabic-indic digit as an id", [{"node_pool": "h100", "project": "٣", "deserved": 1}],
     {"0": {"project": ["Give an id (a positive whole number) or a slug."]}}),
    ("boolean as an id", [{"node_pool": "h100", "project": True, "deserved": 1}],
     {"0": {"project": ["Give an id (a positive whole number) or a slug."]}}),
    ("zero as an id", [{"node_pool": "h100", "project": 0, "deserved": 1}],
     {"0": {"project": ["Give an id (a positive whole number) or a slug."]}}),
    ("id beyond bigint", [{"node_pool": "h100", "project": 2**70, "deserved": 1}],
     {"0": {"project": ["Give an id (a positive whole number) or a slug."]}}),
    ("object as an id", [{"node_pool": "h100", "project": {"id": 1}, "deserved": 1}],
     {"0": {"project": ["Give an id (a positive whole number) or a slug."]}}),
    ("NUL in a slug", [{"node_pool": "h100", "project": "vision\x00", "deserved": 1}],
     {"0": {"project": ["Give an id (a positive whole number) or a slug."]}}),
    ("NUL in the pool", [{"node_pool": "h1\x0000", "project": "vision", "deserved": 1}],
     {"0": {"node_pool": ["Null characters are not allowed."]}}),
    ("NUL in a field name", [{"node_pool": "h100", "project": "vision", "dese\x00rved": 1}],
     {"0": {"dese\x00rved": ["No such field of a quota table row."]}}),
    ("huge deserved", [{"node_pool": "h100", "project": "vision", "deserved": 10**30}],
     {"0": {"deserved": ["Ensure this value is less than or equal to 100000."]}}),
    ("negative limit", [{"node_pool": "h100", "project": "vision", "limit": -1}],
     {"0": {"limit": ["Ensure this value is greater than or equal to 0."]}}),
    ("huge memory", [{"node_pool": "h100", "project": "vision", "memory_gib": 2**40}],
     {"0": {"memory_gib": ["Ensure this value is less than or equal to 2147483647."]}}),
    ("float deserved", [{"node_pool": "h100", "project": "vision", "deserved": 1.5}],
     {"0": {"deserved": ["A valid integer is required."]}}),
    ("infinite weight", [{"node_pool": "h100", "project": "vision", "over_quota_weight": "Infinity"}],
     {"0": {"over_quota_weight": ["A valid number is required."]}}),
    ("weight with too many digits", [{"node_pool": "h100", "project": "vision", "over_quota_weight": "1e30"}],
     {"0": {"over_quota_weight": ["Ensure that there are no more than 8 digits in total."]}}),
    ("long pool slug", [{"node_pool": "p" * 10_000, "deserved": 1}],
     {"0": {"node_pool": ["Ensure this field has no more than 40 characters."]}}),
]


@pytest.mark.parametrize(("body", "errors"), [pytest.param(body, errors, id=name) for name, body, errors in HOSTILE])
def test_hostile_bodies_answer_400(client_for, body, errors):
    assert refused(client_for("admin"), path("research"), body) == errors


def test_an_overlong_list_is_refused(client_for):
    rows = [{"node_pool": "h100", "project": "vision", "deserved": 4}] * 5001
    assert refused(client_for("admin"), path("research"), rows) == {
        "non_field_errors": ["Ensure this field has no more than 5000 elements."]}


def test_malformed_json_answers_400(client_for):
    response = client_for("admin").patch("/api/v1/" + path("research"), data=b'[{"node_pool": "h1',
                                         content_type="application/json")
    assert response.status_code == 400
    response = client_for("admin").patch("/api/v1/" + path("research"), data=b"[" + b"9" * 5000 + b"]",
                                         content_type="application/json")
    assert response.status_code == 400


# --- queries ---------------------------------------------------------------------------------------------------


def grow(admin, tag: str = "") -> None:
    """More departments, projects, pools and quotas than the request touches."""
    from apps.org import services
    from apps.org.models import Department

    research = Department.objects.get(slug="research")
    pool = services.node_pool_create(actor=admin, slug=f"b200{tag}", name=f"B200{tag}", gpu_resource="nvidia.com/gpu",
                                     capacity=100)
    for n in range(4):
        department = services.department_create(actor=admin, slug=f"grown{tag}-{n}", name=f"Grown{tag} {n}")
        services.quota_set(actor=admin, node_pool=pool, department=department, deserved=1, limit=None)
        project = services.project_create(actor=admin, department=research, slug=f"grown{tag}-{n}",
                                          name=f"Grown{tag} {n}")
        services.quota_set(actor=admin, node_pool=pool, project=project, deserved=0, limit=None)


# session, user, grants, department; the savepoint; pools (locked), projects, quotas (locked), other departments'
# sums; per changed quota: its guard (a project's deserved), update, the GPU-hour ledger's deserved period upkeep
# (savepoint, timeline lock, close and open the period, the recomputes the watcher left pending, re-slice the
# project's intervals, and the daily rows of the use-over-time dashboard from that day on (read the day's closed
# slices, rewrite its rows): 13), audit row; the channels listening to quota changes (one query for all); the reconcile
# request (2) and its intent row; release; the table answered.
# Constant however large the table is.
PATCH_QUERIES = 4 + 1 + 4 + 2 * (1 + 1 + 13 + 1) + 1 + 2 + 1 + 1 + 1


def test_patch_query_count_is_pinned(client_for, demo, django_assert_num_queries):
    client = client_for("deptadmin")
    rows = [{"node_pool": "h100", "project": "vision", "deserved": 3},
            {"node_pool": "h100", "project": "nlp", "deserved": 5}]
    with django_assert_num_queries(PATCH_QUERIES):
        assert call(client, "PATCH", path("research"), rows).status_code == 200
    grow(demo["admin"])
    rows = [{"node_pool": "h100", "project": "vision", "deserved": 4},
            {"node_pool": "h100", "project": "nlp", "deserved": 4}]
    with django_assert_num_queries(PATCH_QUERIES):
        assert call(client, "PATCH", path("research"), rows).status_code == 200


def test_refused_patch_and_get_query_counts_are_pinned(client_for, demo, django_assert_num_queries):
    client = client_for("deptadmin")
    rows = [{"node_pool": "h100", "project": "vision", "deserved": 9}, {"node_pool": "h100", "limit": 1}]
    for tag in ("", "-more"):
        with django_assert_num_queries(4 + 1 + 4 + 2):  # no guard, save, audit or table once a row is refused
            assert call(client, "PATCH", path("research"), rows).status_code == 400
        with django_assert_num_queries(5):  # session, user, grants, department, the table
            assert call(client, "GET", path("research")).status_code == 200
        grow(demo["admin"], tag)
