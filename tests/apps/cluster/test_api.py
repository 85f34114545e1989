"""The queue and node API: the queue pages' rows, scoped as the pages scope them (another department's queue is a 404
and absent from the lists), in a fixed number of queries however many rows the mirror holds."""

from __future__ import annotations

import pytest

from apps.cluster.models import ClusterQueueState, LocalQueueState
from tests.api_support import call
from tests.apps.cluster.test_queue_pages import mirror, node

LISTS = {
    "cluster-queues/": 5,  # session, user, grants, count, rows with project, department and pool
    "local-queues/": 5,  # session, user, grants, count, rows with project and department
    "cohorts/": 6,  # session, user, grants, the visible cohorts, every cohort with pool/department/project, queues
    "flavors/": 5,  # session, user, grants, pools, nodes (admins: + the pools' use)
    "nodes/": 5,  # session, user, grants, count, rows with pool
    "nodes/?node_pool=h100": 5,
}


def names(response, key: str = "name") -> set[str]:
    assert response.status_code == 200, response.content
    return {row[key] for row in response.json()["results"]}


@pytest.mark.parametrize(("username", "path", "queries"), [
    (username, path, queries + (1 if username == "admin" and path == "flavors/" else 0))
    for path, queries in LISTS.items() for username in ("admin", "deptadmin", "alice")])
def test_lists_cost_a_fixed_number_of_queries(client_for, django_assert_num_queries, username, path, queries):
    mirror("vision")
    node("h100-a")
    client = client_for(username)
    with django_assert_num_queries(queries):
        first = call(client, "GET", path)
    assert first.status_code == 200
    for project in ("nlp", "forecasting", "serving"):
        for pool in ("h100", "l40s-shared"):
            mirror(project, pool)
    for number in range(6):
        node(f"l40s-{number}", "l40s-shared")
    with django_assert_num_queries(queries):
        second = call(client, "GET", path)
    assert second.status_code == 200
    if username == "admin" and path not in ("nodes/?node_pool=h100", "flavors/"):  # flavors: one per pool
        assert second.json()["count"] > first.json()["count"]


def test_queues_are_scoped_as_the_pages_are(client_for):
    for project in ("vision", "nlp", "forecasting"):
        mirror(project)
    alice, carol, admin = client_for("alice"), client_for("carol"), client_for("admin")
    assert names(call(alice, "GET", "cluster-queues/")) == {"proj-vision-h100-guaranteed", "proj-vision-h100-elastic"}
    assert names(call(carol, "GET", "cluster-queues/")) == {"proj-forecasting-h100-guaranteed",
                                                            "proj-forecasting-h100-elastic"}
    assert len(names(call(admin, "GET", "cluster-queues/"))) == 6
    # Another department's queue is not found, as a row the user may not see.
    theirs = ClusterQueueState.objects.get(name="proj-forecasting-h100-elastic")
    assert call(alice, "GET", f"cluster-queues/{theirs.pk}/").status_code == 404
    shown = call(carol, "GET", f"cluster-queues/{theirs.pk}/").json()
    assert shown == {**shown, "kind": "elastic", "project_slug": "forecasting", "node_pool": "h100", "nominal": 0.0,
                     "used": 2.0, "borrowed": 2.0, "lending": 0.0, "pending_workloads": 1, "admitted_workloads": 1}
    guaranteed = call(carol, "GET", "cluster-queues/").json()["results"]
    assert [row["lending"] for row in guaranteed if row["kind"] == "guaranteed"] == [3.0]  # 4 nominal, 1 used

    assert names(call(alice, "GET", "local-queues/")) == {"guaranteed-h100", "elastic-h100"}
    assert {row["namespace"] for row in call(alice, "GET", "local-queues/").json()["results"]} == {"proj-vision"}
    their_local = LocalQueueState.objects.get(namespace="proj-forecasting", name="elastic-h100")
    assert call(alice, "GET", f"local-queues/{their_local.pk}/").status_code == 404


def test_cohorts_and_flavors_show_what_the_tabs_show(client_for):
    for project in ("vision", "nlp", "forecasting"):
        mirror(project)
    node("h100-a")
    alice = {row["name"]: row for row in call(client_for("alice"), "GET", "cohorts/").json()["results"]}
    assert set(alice) == {"dept-research-h100", "proj-vision-h100"}  # no root, no other department's project
    assert alice["proj-vision-h100"] == {**alice["proj-vision-h100"], "level": "project", "depth": 2,
                                         "parent": "dept-research-h100", "department": "research", "project": "vision",
                                         "node_pool": "h100", "queues": 2, "used": 3.0, "borrowed": 2.0}
    admin = {row["name"]: row for row in call(client_for("admin"), "GET", "cohorts/").json()["results"]}
    assert admin["portal-h100"]["used"] == 9.0 and admin["portal-h100"]["level"] == "root"  # the whole tree
    assert admin["portal-h100"]["parent"] == "" and admin["portal-h100"]["project"] is None

    flavors = {row["node_pool"]: row for row in call(client_for("alice"), "GET", "flavors/").json()["results"]}
    assert flavors["h100"]["nodes"] == 1 and flavors["h100"]["allocatable"] == 8
    assert flavors["h100"]["used"] is None and flavors["h100"]["pending"] is None  # pool-wide: everything's viewers
    everything = {row["node_pool"]: row for row in call(client_for("admin"), "GET", "flavors/").json()["results"]}
    assert everything["h100"]["used"] == 9.0 and everything["h100"]["pending"] == 6


def test_nodes_of_a_pool(client_for):
    node("h100-a")
    node("l40s-a", "l40s-shared")
    alice = client_for("alice")
    assert names(call(alice, "GET", "nodes/")) == {"h100-a", "l40s-a"}
    (row,) = call(alice, "GET", "nodes/?node_pool=h100").json()["results"]
    assert row == {**row, "name": "h100-a", "node_pool": "h100", "gpu_product": "H100", "allocatable_gpus": 8,
                   "state": "ready", "mig_slices": {}, "taints": []}
    refused = call(alice, "GET", "nodes/?node_pool=no-such-pool")
    assert refused.status_code == 400 and "node_pool" in refused.json()


def test_someone_who_may_view_nothing_gets_403(client, db):
    from django.contrib.auth import get_user_model

    nobody = get_user_model().objects.create_user(username="nobody", password="x")
    client.force_login(nobody)
    for path in ("cluster-queues/", "local-queues/", "cohorts/", "flavors/", "nodes/"):
        assert call(client, "GET", path).status_code == 403, path
