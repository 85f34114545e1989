"""The queue and node pages without a cluster: a fixed number of queries however many queues, cohorts and nodes
the mirror holds, polls answered 304 while nothing changed, and the scope of each tab (tests/worker/
test_queue_pages.py runs them against kubesim and the real watcher)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.cluster.models import ClusterQueueState, CohortState, LocalQueueState, NodeState
from apps.cluster.services import kai_queues_mirror
from apps.org import services as org_services
from apps.org.models import Department, NodePool, Project
from apps.workloads.models import Status
from tests.api_support import call
from tests.factories import WorkloadFactory

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


def kai_pool(demo) -> NodePool:
    """rtx, scheduled by KAI: Research 6 there, Vision 4; KAI's leaf Queue proj-vision-rtx mirrored as its two rows,
    from a status that (like KAI's) counts GPUs, no workloads."""
    pool = org_services.node_pool_create(actor=demo["admin"], slug="rtx", name="RTX", gpu_resource="nvidia.com/gpu",
                                         capacity=16, scheduler="kai", gpu_fractions=True)
    org_services.quota_set(actor=demo["admin"], node_pool=pool, department=Department.objects.get(slug="research"),
                           deserved=6, limit=None)
    org_services.quota_set(actor=demo["admin"], node_pool=pool, project=Project.objects.get(slug="vision"),
                           deserved=4, limit=None)
    labels = {"portal.gpu/managed-by": "gpu-portal", "portal.gpu/pool": "rtx", "portal.gpu/department": "research",
              "portal.gpu/project": "vision"}
    kai_queues_mirror(objs=[{
        "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
        "metadata": {"name": "proj-vision-rtx", "labels": labels},
        "spec": {"parentQueue": "dept-research-rtx", "resources": {"gpu": {"quota": 4, "limit": -1}}},
        "status": {"allocated": {"nvidia.com/gpu": "1"}, "requested": {"nvidia.com/gpu": "4"}}}], at=timezone.now())
    return pool


def waiting(demo, pool: NodePool, *, preemptible: bool, status: str = Status.QUEUED, project: str = "vision"):
    return WorkloadFactory(project=Project.objects.get(slug=project), owner=demo["alice"], node_pool=pool,
                           preemptible=preemptible, status=status)


def pending_cells(html: str) -> dict[str, str]:
    rows = {}
    for name in ("proj-vision-rtx/non-preemptible", "proj-vision-rtx/preemptible"):
        row = html[html.index(f'data-queue="{name}"'):]
        row = row[: row.index("</tr>")]
        rows[name] = row[row.index('data-fact="pending">') + len('data-fact="pending">'):].split("<", 1)[0]
    return rows


def test_a_kai_queues_rows_count_the_portals_waiting_work_as_pending(demo, client_for):
    """KAI's Queue status counts no workloads, so each of the two rows counts the portal's waiting work of its kind
    on the queue: queued, requeued and preempted, not running, not another pool's. The tab, its poll, the API and
    the pool's flavor figures all show it."""
    pool = kai_pool(demo)
    waiting(demo, pool, preemptible=True)
    waiting(demo, pool, preemptible=True, status=Status.PREEMPTED)
    waiting(demo, pool, preemptible=False, status=Status.REQUEUED)
    waiting(demo, pool, preemptible=False, status=Status.RUNNING)
    waiting(demo, NodePool.objects.get(slug="h100"), preemptible=False)
    client = client_for("alice")
    url = reverse("usage:queues_tab", args=["cluster-queues"])
    first = client.get(url, HTTP_HX_REQUEST="true")
    assert pending_cells(first.content.decode()) == {"proj-vision-rtx/non-preemptible": "1",
                                                     "proj-vision-rtx/preemptible": "2"}
    api = {row["name"]: row["pending_workloads"] for row in call(client, "GET", "cluster-queues/").json()["results"]}
    assert api == {"proj-vision-rtx/non-preemptible": 1, "proj-vision-rtx/preemptible": 2}
    one = ClusterQueueState.objects.get(name="proj-vision-rtx/preemptible")
    assert call(client, "GET", f"cluster-queues/{one.pk}/").json()["pending_workloads"] == 2
    flavors = client_for("admin").get(reverse("usage:queues_tab", args=["flavors"])).content.decode()
    rtx = flavors[flavors.index('data-flavor="rtx"'):]
    assert 'data-fact="pending">3<' in rtx[: rtx.index("</tr>")]
    # A new waiting workload moves the poll's marker, though KAI's Queue (the mirror) did not change.
    waiting(demo, pool, preemptible=False)
    again = client.get(url, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 200
    assert pending_cells(again.content.decode())["proj-vision-rtx/non-preemptible"] == "2"
