"""The queue and node pages without a cluster: a fixed number of queries however many queues, cohorts and nodes
the mirror holds, polls answered 304 while nothing changed, and the scope of each tab (tests/worker/
test_queue_pages.py runs them against kubesim and the real watcher)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.cluster.models import ClusterQueueState, CohortState, LocalQueueState, NodeState
from apps.org.models import NodePool, Project

TABS = ["cluster-queues", "local-queues", "cohorts", "flavors"]


def mirror(project: str, pool: str = "h100") -> None:
    """The mirror rows the watcher writes for one project on one pool (figures made up; the shape is what matters)."""
    now = timezone.now()
    row = Project.objects.select_related("department").get(slug=project)
    node_pool = NodePool.objects.get(slug=pool)
    department, _ = CohortState.objects.get_or_create(
        name=f"dept-{row.department.slug}-{pool}",
        defaults={"node_pool": node_pool, "department": row.department, "parent": f"portal-{pool}", "observed_at": now},
    )
    CohortState.objects.get_or_create(name=f"portal-{pool}", defaults={"node_pool": node_pool, "observed_at": now})
    CohortState.objects.update_or_create(
        name=f"proj-{project}-{pool}",
        defaults={
            "node_pool": node_pool,
            "department": row.department,
            "project": row,
            "parent": department.name,
            "observed_at": now,
        },
    )
    for kind, used in (("guaranteed", 1), ("elastic", 2)):
        guaranteed = kind == "guaranteed"
        ClusterQueueState.objects.update_or_create(
            name=f"proj-{project}-{pool}-{kind}",
            defaults={
                "project": row,
                "node_pool": node_pool,
                "guaranteed": guaranteed,
                "cohort": f"proj-{project}-{pool}",
                "nominal": 4 if guaranteed else 0,
                "used": used,
                "used_borrowed": 0 if guaranteed else 2,
                "pending_workloads": 1,
                "admitted_workloads": 1,
                "observed_at": now,
            },
        )
        LocalQueueState.objects.update_or_create(
            namespace=row.namespace,
            name=f"{kind}-{pool}",
            defaults={
                "project": row,
                "cluster_queue": f"proj-{project}-{pool}-{kind}",
                "pending_workloads": 1,
                "admitted_workloads": 1,
                "observed_at": now,
            },
        )


def node(name: str, pool: str = "h100") -> None:
    NodeState.objects.create(
        name=name,
        node_pool=NodePool.objects.get(slug=pool),
        allocatable_gpus=8,
        ready=True,
        labels={"nvidia.com/gpu.product": "H100"},
        allocatable={"nvidia.com/gpu": "8"},
        observed_at=timezone.now(),
    )


@pytest.mark.parametrize("tab", TABS)
def test_each_tab_makes_a_fixed_number_of_queries(
    client_for, django_assert_num_queries, django_assert_max_num_queries, tab
):
    client = client_for("lead")
    url = reverse("usage:queues_tab", args=[tab])
    mirror("vision")
    node("h100-a")
    with django_assert_max_num_queries(20) as few:
        assert client.get(url).status_code == 200
    for project in ("nlp", "forecasting", "serving"):
        for pool in ("h100", "l40s-shared"):
            mirror(project, pool)
    for number in range(8):
        node(f"l40s-{number}", "l40s-shared")
    with django_assert_num_queries(len(few.captured_queries)):
        assert client.get(url).status_code == 200


def test_nodes_page_makes_a_fixed_number_of_queries(
    client_for, django_assert_num_queries, django_assert_max_num_queries
):
    client = client_for("admin")
    url = reverse("usage:nodes", args=["h100"])
    node("h100-a")
    with django_assert_max_num_queries(20) as few:
        assert client.get(url).status_code == 200
    for number in range(10):
        node(f"h100-{number}")
    with django_assert_num_queries(len(few.captured_queries)):
        content = client.get(url).content.decode()
    assert content.count('data-node="h100-') == 11


def test_polls_answer_304_until_the_mirror_changes(client_for, django_assert_max_num_queries):
    mirror("vision")
    client = client_for("alice")
    url = reverse("usage:queues_tab", args=["cluster-queues"])
    first = client.get(url, HTTP_HX_REQUEST="true")
    assert first.status_code == 200 and 'id="queues-live"' in first.content.decode()
    with django_assert_max_num_queries(10):  # session, user, grants and the marker's aggregates
        again = client.get(url, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    ClusterQueueState.objects.filter(name="proj-vision-h100-elastic").update(used=3, observed_at=timezone.now())
    changed = client.get(url, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=first["ETag"])
    assert changed.status_code == 200 and changed["ETag"] != first["ETag"]


def test_each_tab_is_scoped(client_for):
    for project in ("vision", "nlp", "forecasting"):
        mirror(project)
    alice = {tab: client_for("alice").get(reverse("usage:queues_tab", args=[tab])).content.decode() for tab in TABS}
    assert "proj-vision-h100-elastic" in alice["cluster-queues"] and "proj-nlp-h100" not in alice["cluster-queues"]
    assert "proj-vision/elastic-h100" in alice["local-queues"] and "proj-nlp/" not in alice["local-queues"]
    assert 'data-cohort="dept-research-h100"' in alice["cohorts"]
    assert 'data-cohort="proj-nlp-h100"' not in alice["cohorts"] and 'data-cohort="portal-h100"' not in alice["cohorts"]
    assert 'data-flavor="h100"' in alice["flavors"] and 'data-fact="used"' not in alice["flavors"]
    lead = client_for("lead").get(reverse("usage:queues_tab", args=["cohorts"])).content.decode()
    assert 'data-cohort="proj-nlp-h100"' in lead and 'data-cohort="proj-forecasting-h100"' not in lead
    admin = client_for("admin").get(reverse("usage:queues_tab", args=["cohorts"])).content.decode()
    row = admin[admin.index('data-cohort="portal-h100"') :]
    assert 'data-fact="used">9<' in row[: row.index("</tr>")]  # 3 projects x (1 + 2), the whole tree
    assert client_for("alice").get(reverse("usage:queues_tab", args=["nope"])).status_code == 404


def test_the_two_borrowed_figures_are_labelled_so_they_cannot_be_read_as_one(client_for):
    """Vision runs 1 in its guaranteed queue and 2 preemptible in its elastic one (nominal 0), 3 of its deserved 4:
    the Quota usage page's borrowed (over the project's deserved) is 0, Kueue's per-queue borrowed is 2. Each page
    names its own figure and says how it differs from the other's."""
    mirror("vision")
    client = client_for("alice")
    quota = client.get(reverse("usage:quota")).content.decode()
    vision = quota[quota.index('<tr data-level="project" data-slug="vision">'):]
    assert 'data-fact="borrowed">0<' in vision[: vision.index("</tr>")]
    assert '<th class="num">Borrowed (over deserved)</th>' in quota and '<th class="num">Borrowed</th>' not in quota
    assert "Kueue's per-queue borrowed" in quota
    for tab in ("cohorts", "cluster-queues"):
        page = client.get(reverse("usage:queues_tab", args=[tab])).content.decode()
        assert '<th class="num">Borrowed (Kueue, per queue)</th>' in page
        assert '<th class="num">Borrowed</th>' not in page
        assert "not the Quota usage page's borrowed (over deserved)" in page
    cohorts = client.get(reverse("usage:queues_tab", args=["cohorts"])).content.decode()
    row = cohorts[cohorts.index('data-cohort="proj-vision-h100"'):]
    assert 'data-fact="borrowed">2<' in row[: row.index("</tr>")]
