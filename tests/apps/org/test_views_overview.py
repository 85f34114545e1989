"""The organisation overview: scoped tree, links by role, and a query count that does not grow with projects."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.org import services
from apps.org.models import Department, NodePool

# session, user, grants, pools, departments (+ their quotas, + visible projects, + their quotas)
OVERVIEW_QUERIES = 8


def add_projects(admin, count: int) -> None:
    research = Department.objects.get(slug="research")
    pool = NodePool.objects.get(slug="h100")
    services.node_pool_update(actor=admin, node_pool=pool, over_subscribable=True)
    services.quota_set(actor=admin, node_pool=pool, department=research, deserved=8 + count, limit=None)
    for number in range(count):
        project = services.project_create(actor=admin, department=research, slug=f"extra-{number}",
                                          name=f"Extra {number}")
        services.quota_set(actor=admin, node_pool=pool, project=project, deserved=1, limit=2)


@pytest.mark.parametrize("username", ["admin", "deptadmin", "alice", "viewer"])
def test_query_count_is_constant_in_the_number_of_projects(page_client, users, django_assert_num_queries, username):
    client = page_client(username)
    with django_assert_num_queries(OVERVIEW_QUERIES):
        assert client.get(reverse("org:overview")).status_code == 200
    add_projects(users["admin"], 12)
    with django_assert_num_queries(OVERVIEW_QUERIES):
        response = client.get(reverse("org:overview"))
    if username in {"admin", "deptadmin", "viewer"}:
        assert 'data-project="extra-11"' in response.content.decode()


def test_tree_is_scoped_to_what_the_user_sees(page_client):
    html = page_client("carol").get(reverse("org:overview")).content.decode()
    assert 'data-department="data-science"' in html and 'data-project="forecasting"' in html
    assert 'data-department="research"' not in html and 'data-project="analytics"' not in html
    alice = page_client("alice").get(reverse("org:overview")).content.decode()
    assert 'data-project="vision"' in alice and 'data-project="nlp"' not in alice


def test_quota_links_only_where_the_user_manages_projects(page_client):
    quotas = reverse("org:department_quotas", args=["research"])
    assert quotas in page_client("deptadmin").get(reverse("org:overview")).content.decode()
    assert reverse("org:department_quotas", args=["production"]) not in page_client("deptadmin").get(
        reverse("org:overview")).content.decode()
    assert quotas not in page_client("lead").get(reverse("org:overview")).content.decode()
    assert reverse("org:department_create") in page_client("admin").get(reverse("org:overview")).content.decode()


def test_cells_show_deserved_limit_and_weight(page_client):
    html = page_client("admin").get(reverse("org:overview")).content.decode()
    assert "8 / 12 · 2" in html  # Research on h100
    assert "0 / 4 · 1" in html  # ETL on h100


NAV = {
    "admin": {"Departments", "Weights", "Access", "Audit log"},
    "deptadmin": {"Departments", "Weights", "Access", "Audit log"},
    "lead": {"Weights"},
    "alice": set(),
    "viewer": set(),
}


@pytest.mark.parametrize("username", sorted(NAV))
def test_navigation_shows_what_the_roles_allow(page_client, username):
    html = page_client(username).get(reverse("org:overview")).content.decode()
    nav = html[html.index('<nav class="nav"'):html.index("</nav>")]
    for entry in ("Organisation", "Node pools", "Priority classes"):
        assert f">{entry}</a>" in nav
    for entry in ("Departments", "Weights", "Access", "Audit log"):
        assert (f">{entry}</a>" in nav) == (entry in NAV[username]), f"{username}: {entry}"
