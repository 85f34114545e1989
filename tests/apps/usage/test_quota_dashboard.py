"""Quota usage dashboards (page and API): figures from the mirror, scope from the access module, fixed queries."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from apps.cluster.models import ClusterQueueState, CohortState
from apps.org.models import Budget, Department, NodePool, Project
from apps.workloads.models import Status, Workload
from tests.apps.cluster import test_queue_pages as queue_pages

pytestmark = pytest.mark.django_db
PAGE = reverse("usage:quota")
API = "/api/v1/usage/quota/"


def mirror(project: str, pool: str = "h100", *, guaranteed: int = 0, elastic: int = 0, share: int | None = None):
    at = timezone.now()
    proj, node_pool = Project.objects.get(slug=project), NodePool.objects.get(slug=pool)
    for kind, used in (("guaranteed", guaranteed), ("elastic", elastic)):
        ClusterQueueState.objects.update_or_create(name=f"proj-{project}-{pool}-{kind}", defaults={
            "project": proj, "node_pool": node_pool, "guaranteed": kind == "guaranteed", "used": Decimal(used),
            "used_borrowed": Decimal(used) if kind == "elastic" else 0, "observed_at": at})
    CohortState.objects.update_or_create(name=f"proj-{project}-{pool}", defaults={
        "project": proj, "department": proj.department, "node_pool": node_pool, "weighted_share": share,
        "observed_at": at})


@pytest.fixture
def make_workload(demo):
    from apps.workloads import services

    def make(owner: str, *, project: str, gpus: int, pods: int = 1) -> Workload:
        # Serving lends nothing and has no over-quota on H100: only non-preemptible work can ever run there.
        return services.workload_submit(
            actor=demo[owner], project=Project.objects.get(slug=project), node_pool=NodePool.objects.get(slug="h100"),
            kind="training", name="run", image="pytorch/pytorch:2.4.0", gpus=gpus, pods=pods, model_label="resnet",
            data_class="public", command=["sleep", "60"], preemptible=project != "serving")

    return make


def serving_pool() -> NodePool:
    from apps.org import services

    return services.node_pool_create(actor=User.objects.get(username="admin"), slug="serve-l4", name="L4 serving",
                                     gpu_resource="nvidia.com/gpu", capacity=8, serving=True,
                                     node_labels={"portal.gpu/pool": "serve-l4"})


def reserve(project: str, pool: NodePool, cards: int) -> None:
    from apps.org import services

    services.serving_reservation_create(actor=User.objects.get(username="admin"),
                                        project=Project.objects.get(slug=project), node_pool=pool, cards=cards)


def serve(owner: str, project: str, pool: NodePool, *, replicas: int, gpus: int = 1) -> Workload:
    from apps.workloads import services

    return services.inference_submit(
        actor=User.objects.get(username=owner), project=Project.objects.get(slug=project), node_pool=pool,
        name="llama", image="vllm/vllm-openai:v0.6.3", gpus=gpus, replicas=replicas, model_label="llama",
        data_class="public")


def waiting(make_workload, owner: str, project: str, gpus: int, pods: int = 1) -> Workload:
    workload = make_workload(owner, project=project, gpus=gpus, pods=pods)
    Workload.objects.filter(pk=workload.pk).update(status=Status.QUEUED)
    return workload


def figures(client, pool: str = "h100") -> dict:
    data = client.get(API).json()
    (entry,) = [p for p in data["pools"] if p["pool"] == pool]
    return entry


def test_project_and_department_figures(client_for, make_workload):
    mirror("vision", guaranteed=4, elastic=2, share=120)
    mirror("nlp", guaranteed=1)
    waiting(make_workload, "alice", "vision", 2, pods=2)
    entry = figures(client_for("admin"))
    research = next(d for d in entry["departments"] if d["slug"] == "research")
    vision = next(p for p in research["projects"] if p["slug"] == "vision")
    nlp = next(p for p in research["projects"] if p["slug"] == "nlp")
    assert vision == {**vision, "deserved": 4, "limit": 8, "used": 6, "borrowed": 2, "lent": 0, "pending": 4,
                      "weighted_share": 120}
    assert nlp["used"] == 1 and nlp["lent"] == 3 and nlp["borrowed"] == 0
    assert {q["name"] for q in vision["queues"]} == {"proj-vision-h100-guaranteed", "proj-vision-h100-elastic"}
    # The department's figures are its projects' sums: Vision borrows 2 while NLP lends 3 of its idle 4.
    assert research["deserved"] == 8 and research["used"] == 7 and research["pending"] == 4
    assert research["borrowed"] == vision["borrowed"] + nlp["borrowed"] == 2
    assert research["lent"] == vision["lent"] + nlp["lent"] == 3
    assert entry["cluster"]["used"] == 7 and entry["cluster"]["deserved"] == 16


def test_projects_that_do_not_lend_lend_nothing(client_for):
    mirror("serving", guaranteed=1)
    production = next(d for d in figures(client_for("admin"))["departments"] if d["slug"] == "production")
    serving = next(p for p in production["projects"] if p["slug"] == "serving")
    assert serving["used"] == 1 and serving["lent"] == 0


def test_weighted_shares_are_those_of_each_owners_cohort_on_the_pool(client_for):
    """A project's row shows its own cohort's share, a department's the cohort of the department with no project (the
    last by name should two be mirrored for one owner), each on its own pool; no other department's cohort."""
    mirror("vision", share=120)
    mirror("vision", "l40s-shared", share=7)
    at = timezone.now()
    research, production = Department.objects.get(slug="research"), Department.objects.get(slug="production")
    h100, l40s = NodePool.objects.get(slug="h100"), NodePool.objects.get(slug="l40s-shared")
    for name, department, pool, share in (("dept-research-h100", research, h100, 30),
                                          ("dept-research-h100-renamed", research, h100, 40),
                                          ("dept-research-l40s-shared", research, l40s, 50),
                                          ("dept-production-h100", production, h100, 60)):
        CohortState.objects.create(name=name, department=department, node_pool=pool, weighted_share=share,
                                   observed_at=at)
    for username in ("alice", "admin"):
        client = client_for(username)
        for pool, department_share, vision_share in (("h100", 40, 120), ("l40s-shared", 50, 7)):
            entry = figures(client, pool)
            shown = next(d for d in entry["departments"] if d["slug"] == "research")
            vision = next(p for p in shown["projects"] if p["slug"] == "vision")
            assert (shown["weighted_share"], vision["weighted_share"]) == (department_share, vision_share)
        nlp = [p for d in figures(client)["departments"] for p in d["projects"] if p["slug"] == "nlp"]
        assert all(p["weighted_share"] is None for p in nlp)  # no cohort of its own mirrored
    production_row = next(d for d in figures(client_for("admin"))["departments"] if d["slug"] == "production")
    assert production_row["weighted_share"] == 60


SCOPE = [
    # user -> (departments shown, projects shown, cluster roll-up)
    ("admin", {"research", "production", "data-science"}, {"vision", "nlp", "serving", "etl", "forecasting",
                                                           "analytics"}, True),
    ("viewer", {"research", "production", "data-science"}, {"vision", "nlp", "serving", "etl", "forecasting",
                                                            "analytics"}, True),
    ("deptadmin", {"research"}, {"vision", "nlp"}, False),
    ("lead", {"research"}, {"vision", "nlp"}, False),
    ("alice", {"research"}, {"vision"}, False),
    ("bob", {"research"}, {"nlp"}, False),
    ("carol", {"data-science"}, {"forecasting"}, False),
]


@pytest.mark.parametrize(("username", "departments", "projects", "cluster"), SCOPE)
def test_the_api_is_scoped(client_for, username, departments, projects, cluster):
    mirror("nlp", guaranteed=3)
    entry = figures(client_for(username))
    assert {d["slug"] for d in entry["departments"]} == departments
    assert {p["slug"] for d in entry["departments"] for p in d["projects"]} == projects
    assert (entry["cluster"] is not None) == cluster
    if username == "alice":  # her department's roll-up counts NLP, whose own row she does not see
        assert entry["departments"][0]["used"] == 3


@pytest.mark.parametrize(("username", "departments", "projects", "cluster"), SCOPE)
def test_the_page_is_scoped(client_for, username, departments, projects, cluster):
    content = client_for(username).get(PAGE).content.decode()
    shown_projects = {slug for slug in ("vision", "nlp", "serving", "etl", "forecasting", "analytics")
                      if f'data-level="project" data-slug="{slug}"' in content}
    shown_departments = {d.slug for d in Department.objects.all()
                         if f'data-level="department" data-slug="{d.slug}"' in content}
    assert shown_projects == projects and shown_departments == departments
    assert ('data-level="cluster"' in content) == cluster


def test_anonymous_users_are_sent_to_sign_in_and_the_api_refuses_them(client):
    assert client.get(PAGE).status_code == 302
    assert client.get(API).status_code in (401, 403)


def test_the_page_draws_bars_a_tree_and_a_table(client_for):
    mirror("vision", guaranteed=4, elastic=2)
    content = client_for("alice").get(PAGE).content.decode()
    assert 'class="qbar"' in content and 'class="cohort-tree"' in content and 'class="quota-usage"' in content
    assert "6 in use of 4 deserved, 2 borrowed over deserved, limit 8" in content
    assert "<script" not in content.split("</head>")[1]  # no chart library


# Session, user and grants, then one round trip (apps/usage/reads.py) of the quota rows (with their owners' names),
# the cohort mirrors (their weighted shares), the serving reservations with the units held of them
# (docs/architecture.md, Inference services), the queue mirrors and the waiting work's tallies, and for the full page
# whether any budget is held in the departments on show: the scope is read as conditions of those, not as reads of
# the departments and projects. Viewers who do not see everything read the pools' headings with the rows that put
# them on show; those who do read every pool and the cluster's use in the same round trip (bench/README.md,
# "Live-state pages and the watcher").
@pytest.mark.parametrize(("username", "expected"), [("admin", 4), ("alice", 4), ("lead", 4)])
@pytest.mark.parametrize("poll", [False, True])
def test_dashboard_queries_are_fixed(client_for, make_workload, django_assert_num_queries, username, expected, poll):
    client = client_for(username)
    headers = {"HTTP_HX_REQUEST": "true"} if poll else {}
    # A poll also fingerprints the figures for its ETag: the queue and cohort mirrors, the quotas and reservations,
    # the waiting work's tallies, the live inference services, five reads in one round trip.
    expected += 1 if poll else 0
    # The full page also shows the budgets the viewer may see, in 6 queries however many (the budgets, prices now,
    # price history, the month's sums, the running work, the recent runs of its projects for its forecast ends:
    # apps/usage/budgets.py budget_statuses), when the round trip found one; polls leave them be.
    expected += 0 if poll else 6
    for metric in ("gpu_hours", "cost"):
        Budget.objects.create(department=Department.objects.get(slug="research"), metric=metric, amount=100)
    with django_assert_num_queries(expected):
        client.get(PAGE, **headers)
    pool = serving_pool()
    for project in ("vision", "nlp", "forecasting", "serving"):
        mirror(project, guaranteed=1, elastic=1, share=5)
        waiting(make_workload, "admin", project, 1)
        Budget.objects.create(project=Project.objects.get(slug=project), amount=10)
        reserve(project, pool, 2)
        serve("admin", project, pool, replicas=1)
    with django_assert_num_queries(expected):
        client.get(PAGE, **headers)


def test_polls_answer_304_until_a_figure_changes(client_for, django_assert_max_num_queries):
    client = client_for("alice")
    first = client.get(PAGE, HTTP_HX_REQUEST="true")
    assert first.status_code == 200 and 'id="quota-live"' in first.content.decode()
    with django_assert_max_num_queries(4):  # session, user, grants, the marker's five small reads in one trip
        again = client.get(PAGE, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    assert client.get(PAGE, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 200  # the full page is another body
    # Another viewer never shares the tag.
    assert client_for("bob").get(PAGE, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 200
    mirror("vision", guaranteed=2)
    assert client.get(PAGE, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 200


def test_a_poll_sees_a_waiting_workload_replaced_by_another_of_the_same_size(client_for, make_workload):
    """The marker reads the waiting work's tallies, whose count of changes moves even when the figures come back."""
    client = client_for("alice")
    first = waiting(make_workload, "alice", "vision", 2)
    before = client.get(PAGE, HTTP_HX_REQUEST="true")
    Workload.objects.filter(pk=first.pk).update(status=Status.SUCCEEDED)
    waiting(make_workload, "alice", "vision", 2)
    assert client.get(PAGE, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=before["ETag"]).status_code == 200


def aggregated_marker() -> str:
    """The marker's parts as the ORM's own aggregate() and tally reads give them, to compare the compiled reads with."""
    from django.db.models import Count, Max, Sum

    from apps.workloads.models import WAITING_STATUSES
    from apps.workloads.selectors import Tally, serving_services, serving_units, workload_tallies

    waiting = Tally()
    for tally in workload_tallies(statuses=WAITING_STATUSES).values():
        waiting.add(tally)
    parts = (*ClusterQueueState.objects.aggregate(n=Count("pk"), at=Max("observed_at")).values(),
             *CohortState.objects.aggregate(n=Count("pk"), at=Max("observed_at")).values(),
             *NodePool.objects.aggregate(n=Count("quotas", distinct=True), at=Max("quotas__updated_at"),
                                         reservations=Count("serving_reservations", distinct=True),
                                         reserved_at=Max("serving_reservations__updated_at")).values(),
             waiting.workloads, waiting.unit_hundredths, waiting.changes,
             *serving_services().aggregate(n=Count("pk"), newest=Max("pk"), units=Sum(serving_units())).values())
    return "|".join(str(part) for part in parts)


def test_the_marker_reads_what_the_orms_aggregates_read(demo, make_workload):
    """Compiled once and sent in one round trip, the marker's reads give one row each, over no rows too."""
    from apps.usage.selectors import quota_dashboard_marker

    assert quota_dashboard_marker() == aggregated_marker()  # no mirrors, no waiting work, no services
    mirror("vision", guaranteed=2, share=3)
    waiting(make_workload, "alice", "vision", 2)
    pool = serving_pool()
    reserve("vision", pool, 2)
    serve("alice", "vision", pool, replicas=2)
    marker = quota_dashboard_marker()
    assert marker == aggregated_marker() and "None" not in marker


@pytest.mark.parametrize("username", ["admin", "alice"])
def test_api_queries_are_fixed(client_for, make_workload, django_assert_max_num_queries, username):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_for(username)
    with CaptureQueriesContext(connection) as before:
        client.get(API)
    # ETL (deserved 0) can never hold H100: Production's only H100 are Serving's, which does not lend.
    for project in ("vision", "nlp", "analytics", "serving"):
        mirror(project, guaranteed=1, elastic=2, share=7)
        waiting(make_workload, "admin", project, 2)
    with django_assert_max_num_queries(len(before.captured_queries)):
        assert client.get(API).status_code == 200


def test_pending_counts_work_from_outside_by_its_pod_sets(client_for):
    """A kubectl Job of two pods with two GPUs each waits for 4 units, not its largest pod's 2."""
    from tests.factories import WorkloadFactory

    mirror("vision", guaranteed=1)
    WorkloadFactory(outside=True, project=Project.objects.get(slug="vision"),
                    node_pool=NodePool.objects.get(slug="h100"))
    research = next(d for d in figures(client_for("admin"))["departments"] if d["slug"] == "research")
    vision = next(p for p in research["projects"] if p["slug"] == "vision")
    assert vision["pending"] == research["pending"] == 4


def test_the_page_shows_the_budgets_the_viewer_may_see_and_the_polls_do_not(client_for):
    research, forecasting = Department.objects.get(slug="research"), Project.objects.get(slug="forecasting")
    shown = Budget.objects.create(department=research, amount=Decimal(40), on_exceed="hold_preemptible",
                                  held_period_start=research.created_at)
    hidden = Budget.objects.create(project=forecasting, amount=Decimal(10))
    content = client_for("bob").get(PAGE).content.decode()
    assert f'data-budget="{shown.pk}"' in content and f'data-budget="{hidden.pk}"' not in content
    assert "0 / 40 GPU-hours" in content and "Projected end of period" in content
    assert "holding new preemptible work" in content
    assert 'data-budget="' not in client_for("bob").get(PAGE, HTTP_HX_REQUEST="true").content.decode()
    assert f'data-budget="{hidden.pk}"' in client_for("carol").get(PAGE).content.decode()


def test_the_page_reads_no_budgets_when_none_is_held_in_the_viewers_departments(client_for,
                                                                                  django_assert_num_queries):
    """Whether a budget is held in the departments on show comes with the figures: without one the budgets' own
    queries do not run; with a budget of a project the viewer does not see, in their department, they read the
    budgets the viewer may see (none: nothing else to compute)."""
    client = client_for("alice")
    forecasting, nlp = Project.objects.get(slug="forecasting"), Project.objects.get(slug="nlp")
    Budget.objects.create(project=forecasting, amount=Decimal(10))  # data-science: not alice's department
    with django_assert_num_queries(4):  # session, user, grants, the figures' round trip
        content = client.get(PAGE).content.decode()
    assert 'data-budget="' not in content
    hidden = Budget.objects.create(project=nlp, amount=Decimal(10))
    with django_assert_num_queries(4 + 1):
        content = client.get(PAGE).content.decode()
    assert f'data-budget="{hidden.pk}"' not in content


def reservations_shown(content: str, pool: str = "serve-l4") -> dict[str, tuple[int, int, int]]:
    """slug -> (reserved, in use, free) as the page's table on `pool` says them."""
    import re

    (section,) = re.findall(rf'data-pool="{pool}".*?</section>', content, flags=re.S)
    return {slug: tuple(int(n) for n in figures) for slug, *figures in re.findall(
        r'data-level="reservation" data-slug="([\w-]+)">.*?data-fact="reserved">(\d+)<.*?data-fact="in-use">(\d+)<'
        r'.*?data-fact="free">(\d+)', section, flags=re.S)}


def test_serving_pools_show_the_reservations_in_scope_and_what_their_services_hold(demo, client_for):
    pool = serving_pool()
    reserve("vision", pool, 4)
    reserve("nlp", pool, 2)
    reserve("etl", pool, 1)
    serve("alice", "vision", pool, replicas=2)
    serve("alice", "vision", pool, replicas=1)
    stopped = serve("bob", "nlp", pool, replicas=2)
    Workload.objects.filter(pk=stopped.pk).update(status=Status.STOPPED)  # holds nothing any more
    serve("bob", "nlp", pool, replicas=1)
    assert reservations_shown(client_for("alice").get(PAGE).content.decode()) == {"vision": (4, 3, 1)}
    assert reservations_shown(client_for("lead").get(PAGE).content.decode()) == {"vision": (4, 3, 1),
                                                                                 "nlp": (2, 1, 1)}
    assert reservations_shown(client_for("admin").get(PAGE).content.decode()) == {
        "vision": (4, 3, 1), "nlp": (2, 1, 1), "etl": (1, 0, 1)}
    assert 'data-pool="serve-l4"' not in client_for("carol").get(PAGE).content.decode()  # Forecasting has none


def test_the_api_counts_serving_reservations_and_what_their_services_hold(demo, client_for,
                                                                           django_assert_max_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    pool = serving_pool()
    reserve("vision", pool, 4)
    serve("alice", "vision", pool, replicas=2)
    with CaptureQueriesContext(connection) as before:
        client_for("admin").get(API)
    reserve("nlp", pool, 2)
    reserve("etl", pool, 1)
    serve("alice", "vision", pool, replicas=1)
    stopped = serve("bob", "nlp", pool, replicas=2)
    Workload.objects.filter(pk=stopped.pk).update(status=Status.STOPPED)  # holds nothing any more
    serve("bob", "nlp", pool, replicas=1)
    with django_assert_max_num_queries(len(before.captured_queries)):
        admin = figures(client_for("admin"), "serve-l4")
    assert admin["serving"] is True and admin["departments"] == []
    assert admin["reservations"] == [
        {"name": "ETL", "slug": "etl", "reserved": 1, "in_use": 0, "free": 1},
        {"name": "NLP", "slug": "nlp", "reserved": 2, "in_use": 1, "free": 1},
        {"name": "Vision", "slug": "vision", "reserved": 4, "in_use": 3, "free": 1}], admin["reservations"]
    assert (admin["cluster"]["deserved"], admin["cluster"]["used"]) == (8, 4)  # the pool's use: every service's
    alice = figures(client_for("alice"), "serve-l4")
    assert [r["slug"] for r in alice["reservations"]] == ["vision"] and alice["cluster"] is None
    assert figures(client_for("alice"))["serving"] is False and figures(client_for("alice"))["reservations"] == []
    assert "serve-l4" not in {p["pool"] for p in client_for("carol").get(API).json()["pools"]}


def test_polls_see_a_reservation_or_a_service_change(demo, client_for):
    from apps.org import services as org_services
    from apps.org.models import ServingReservation
    from apps.workloads import services

    pool = serving_pool()
    reserve("vision", pool, 4)
    client = client_for("alice")

    def tag_after(change) -> str:
        before = client.get(PAGE, HTTP_HX_REQUEST="true")["ETag"]
        change()
        after = client.get(PAGE, HTTP_HX_REQUEST="true")
        assert after["ETag"] != before and after.status_code == 200
        return after.content.decode()

    workload = None

    def submit() -> None:
        nonlocal workload
        workload = serve("alice", "vision", pool, replicas=1)

    assert reservations_shown(tag_after(submit)) == {"vision": (4, 1, 3)}
    assert reservations_shown(tag_after(lambda: services.inference_update(
        actor=demo["alice"], workload=workload, replicas=3))) == {"vision": (4, 3, 1)}
    assert reservations_shown(tag_after(lambda: org_services.serving_reservation_update(
        actor=demo["admin"], serving_reservation=ServingReservation.objects.get(), cards=3))) == {"vision": (3, 3, 0)}


def test_a_kai_queues_rows_count_the_portals_waiting_work_as_pending(demo, client_for):
    """KAI's Queue status counts no workloads: the API's two rows of Vision's KAI queue count its waiting work of
    each kind, as a ClusterQueue's pendingWorkloads does."""
    pool = queue_pages.kai_pool(demo)
    queue_pages.waiting(demo, pool, preemptible=True)
    queue_pages.waiting(demo, pool, preemptible=True, status=Status.REQUEUED)
    queue_pages.waiting(demo, pool, preemptible=False)
    queue_pages.waiting(demo, pool, preemptible=False, status=Status.ADMITTED)
    entry = figures(client_for("alice"), "rtx")
    research = next(d for d in entry["departments"] if d["slug"] == "research")
    vision = next(p for p in research["projects"] if p["slug"] == "vision")
    assert {q["name"]: q["pending_workloads"] for q in vision["queues"]} == {
        "proj-vision-rtx/non-preemptible": 1, "proj-vision-rtx/preemptible": 2}


def test_waiting_shares_of_a_card_count_as_those_shares_of_pending(demo, client_for):
    """Two notebooks waiting for half a card and a quarter on a KAI pool are 0.75 units of pending demand (the kept
    tallies count shares): in the API, the page's row and bar, and the project queue page."""
    pool = queue_pages.kai_pool(demo)
    for fraction in ("0.5", "0.25"):
        notebook = queue_pages.waiting(demo, pool, preemptible=True)
        Workload.objects.filter(pk=notebook.pk).update(kind="notebook", gpus=0, gpu_fraction=Decimal(fraction))
    entry = figures(client_for("alice"), "rtx")
    research = next(d for d in entry["departments"] if d["slug"] == "research")
    vision = next(p for p in research["projects"] if p["slug"] == "vision")
    assert (vision["pending"], research["pending"]) == (0.75, 0.75)
    page = client_for("alice").get(PAGE).content.decode()
    assert "0.75 waiting" in page
    queue = client_for("alice").get(reverse("workloads:project_queue", args=["vision"])).content.decode()
    assert 'data-fact="pending">0.75<' in queue
