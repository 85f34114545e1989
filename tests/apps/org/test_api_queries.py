"""Query counts of the API lists, pinned and constant in the number of departments, projects, quotas and bindings.

Session-authenticated requests pay 2 queries (session, user); the access module adds 1 (the user's role bindings)
wherever rows are scoped; a page adds 1 for its count.
"""

from __future__ import annotations

import pytest

from tests.api_support import call, personal_token

LISTS = {
    "me/": 3,  # session, user, bindings
    "node-pools/": 5,  # session, user, count, rows, their price history
    "departments/": 6,  # session, user, grants, count, rows, quotas with their pools
    "projects/": 6,  # session, user, grants, count, rows with department and priority class, quotas with pools
    "quotas/": 5,  # session, user, grants, count, rows with pool, department and project
    "quotas/?project=vision": 5,
    "priority-classes/": 4,
    "role-bindings/": 5,  # session, user, grants, count, rows with user, group, department and project
    "audit-events/": 5,  # session, user, grants, count, rows with actor
    "audit-events/?department=research": 5,
}

GROWS = {"projects/", "quotas/", "role-bindings/", "audit-events/", "audit-events/?department=research"}


def grow_organisation(admin) -> None:
    """Many more departments, projects, quotas, bindings and audit rows, all visible to the users measured."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from apps.accounts.services import role_binding_create
    from apps.org import services
    from apps.org.models import Department, NodePool

    pools = list(NodePool.objects.all())
    research = Department.objects.get(slug="research")
    group = Group.objects.create(name="vision-students")
    for n in range(3):
        department = services.department_create(actor=admin, slug=f"extra-{n}", name=f"Extra {n}")
        for pool in pools:
            services.quota_set(actor=admin, node_pool=pool, department=department, deserved=0, limit=n)
    for n in range(8):
        project = services.project_create(actor=admin, department=research, slug=f"more-{n}", name=f"More {n}")
        for pool in pools:
            services.quota_set(actor=admin, node_pool=pool, project=project, deserved=0, limit=None,
                               over_quota_weight=n)
        user = get_user_model().objects.create(username=f"user-{n}")
        role_binding_create(actor=admin, role="researcher", user=user, project=project)
        role_binding_create(actor=admin, role="viewer", group=group, project=project)


@pytest.mark.parametrize(
    ("username", "path", "queries"),
    [(username, path, queries) for path, queries in LISTS.items() for username in ("admin", "deptadmin", "alice")
     if not (username == "alice" and path.startswith("audit-events/"))],  # researchers get 403 there
)
def test_list_query_count_is_pinned_and_constant(client_for, demo, django_assert_num_queries, username, path,
                                                 queries):
    client = client_for(username)
    with django_assert_num_queries(queries):
        first = call(client, "GET", path)
    assert first.status_code == 200
    grow_organisation(demo["admin"])
    with django_assert_num_queries(queries):
        second = call(client, "GET", path)
    assert second.status_code == 200
    if username != "alice" and path in GROWS:  # the second list really was longer
        assert second.json()["count"] > first.json()["count"]


def test_token_authenticated_list_costs_one_query_for_the_token(client, demo, django_assert_num_queries):
    token = personal_token(demo["deptadmin"])
    grow_organisation(demo["admin"])
    with django_assert_num_queries(5):  # token with its user, grants, count, rows, quotas with their pools
        response = call(client, "GET", "projects/", HTTP_AUTHORIZATION=f"Token {token}")
    assert response.status_code == 200
    assert response.json()["count"] == 10
