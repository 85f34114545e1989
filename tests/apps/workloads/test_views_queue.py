"""The live queue pages: my workloads with positions and explanations, the project queue, the detail page."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.cluster.models import ClusterQueueState, CohortState
from apps.org.models import NodePool, Project
from apps.workloads.models import Status, Workload, WorkloadEvent, WorkloadLogTail

pytestmark = pytest.mark.django_db
LIST = reverse("workloads:list")


def queue_url(slug: str = "vision") -> str:
    return reverse("workloads:project_queue", args=[slug])


def queued(workload: Workload, position: int, *, reason: str = "Pending") -> Workload:
    Workload.objects.filter(pk=workload.pk).update(
        status=Status.QUEUED, status_reason=reason, status_message="couldn't assign flavors",
        queue_position_local=position, queue_position_cluster=position, positions_at=timezone.now(),
        kueue_name=f"job-wl-{workload.pk}", job_name=f"wl-{workload.pk}")
    return Workload.objects.get(pk=workload.pk)


def running(workload: Workload, *, cluster_queue: str = "proj-vision-h100-elastic") -> Workload:
    now = timezone.now()
    Workload.objects.filter(pk=workload.pk).update(
        status=Status.RUNNING, status_reason="Running", admitted_at=now - timedelta(minutes=5),
        started_at=now - timedelta(minutes=5), cluster_queue=cluster_queue, job_name=f"wl-{workload.pk}",
        admission={"pod_sets": [{"name": "main", "flavors": {"nvidia.com/gpu": "h100"}, "count": 1,
                                 "resource_usage": {"nvidia.com/gpu": "4"}}]},
        kueue_conditions=[{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                           "message": "Quota reserved in ClusterQueue proj-vision-h100-elastic",
                           "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    return Workload.objects.get(pk=workload.pk)


def mirror(project: str = "vision", pool: str = "h100", *, guaranteed: int = 0, elastic: int = 0,
           share: int | None = None) -> None:
    at = timezone.now()
    proj, node_pool = Project.objects.get(slug=project), NodePool.objects.get(slug=pool)
    for kind, used in (("guaranteed", guaranteed), ("elastic", elastic)):
        ClusterQueueState.objects.update_or_create(name=f"proj-{project}-{pool}-{kind}", defaults={
            "project": proj, "node_pool": node_pool, "guaranteed": kind == "guaranteed",
            "cohort": f"proj-{project}-{pool}", "used": Decimal(used), "observed_at": at,
            "used_borrowed": Decimal(used) if kind == "elastic" else 0})
    CohortState.objects.update_or_create(name=f"proj-{project}-{pool}", defaults={
        "project": proj, "department": proj.department, "node_pool": node_pool,
        "parent": f"dept-{proj.department.slug}-{pool}", "weighted_share": share, "observed_at": at})


# --- my workloads -------------------------------------------------------------------------------------------------


def test_my_workloads_show_position_explanation_runtime_and_units(page_client, make_workload):
    mirror(elastic=8)
    busy = running(make_workload("alice", name="busy", gpus=4))
    waiting = queued(make_workload("alice", name="waiting", gpus=4), 2)
    content = page_client("alice").get(LIST).content.decode()
    assert "#3 in elastic-h100" in content
    # Vision holds its limit (8 of 8) while the rest of the pool is idle: the limit is the cause, not the pool.
    assert ("Waiting for 4 x H100 80GB: Vision is at its limit there, 8 of 8 in use, so 4 more are needed; 8 of the "
            "pool&#x27;s 16 are idle") in content and "2 workloads are ahead of you." in content
    assert 'data-reason="project_limit"' in content
    assert f'data-workload="{busy.pk}"' in content and "5m 0" in content  # runtime of the running one
    assert f'data-workload="{waiting.pk}" data-status="queued"' in content


@pytest.mark.parametrize("username", ["alice", "lead"])
def test_the_list_with_waiting_and_running_work_makes_a_fixed_number_of_queries(page_client, make_workload,
                                                                     django_assert_num_queries, username):
    client = page_client(username)
    params = {"scope": "all"} if username == "lead" else {}
    mirror(elastic=8)
    queued(make_workload("alice", name="w0", gpus=4), 0)
    running(make_workload("alice", name="r0", gpus=4))
    expected = 7 + 3 + 1  # the list's seven, explain_workloads' three once anything waits, runtimes once anything runs
    with django_assert_num_queries(expected):
        client.get(LIST, params)
    for number in range(10):
        queued(make_workload("alice", name=f"w{number + 1}", gpus=4), number + 1)
        queued(make_workload("bob", name=f"b{number}", project="nlp", gpus=1), number)
        running(make_workload("alice", name=f"r{number + 1}", gpus=1))
    with django_assert_num_queries(expected):
        client.get(LIST, params)


# --- project queue ------------------------------------------------------------------------------------------------


def test_project_queue_orders_pending_work_and_shows_quota(page_client, make_workload):
    mirror(guaranteed=0, elastic=8, share=250)
    holder = running(make_workload("alice", name="holder", gpus=4))
    second = queued(make_workload("alice", name="second", gpus=4), 1)
    first = queued(make_workload("alice", name="first", gpus=4), 0)
    response = page_client("alice").get(queue_url())
    content = response.content.decode()
    assert response.status_code == 200
    assert content.index(f'data-workload="{first.pk}"') < content.index(f'data-workload="{second.pk}"')
    assert "#1 in elastic-h100" in content and "#2 in elastic-h100" in content
    assert f'data-workload="{holder.pk}" data-status="running"' in content
    row = content[content.index('data-pool="h100"'):]
    row = row[:row.index("</tr>")]
    assert 'data-fact="deserved">4<' in row and 'data-fact="used">8<' in row and 'data-fact="borrowed">4<' in row
    assert 'data-fact="pending">8<' in row and 'data-fact="weighted-share">250 ‰<' in row
    assert 'hx-trigger="every 5s"' in content
    assert "pytorch/pytorch" not in content  # images and commands stay on the detail page


def test_project_queue_stops_polling_when_nothing_is_live(page_client):
    content = page_client("alice").get(queue_url()).content.decode()
    assert "Nothing is waiting." in content and "hx-get" not in content.split('id="project-queue"')[1][:80]


def test_project_queue_answers_304_while_nothing_changed(page_client, make_workload, django_assert_num_queries):
    client = page_client("alice")
    workload = queued(make_workload("alice", name="w", gpus=4), 0)
    first = client.get(queue_url(), HTTP_HX_REQUEST="true")
    etag = first["ETag"]
    assert first.status_code == 200 and "HX-Request" in first["Vary"]
    assert 'id="project-queue"' in first.content.decode() and "<html" not in first.content.decode()
    with django_assert_num_queries(5):  # session, user, grants, project, the marker
        again = client.get(queue_url(), HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again["ETag"] == etag
    # The full page has its own tag: same URL, other body.
    assert client.get(queue_url(), HTTP_IF_NONE_MATCH=etag).status_code == 200
    Workload.objects.filter(pk=workload.pk).update(queue_position_local=1, positions_at=timezone.now())
    changed = client.get(queue_url(), HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag
    Workload.objects.filter(pk=workload.pk).update(status_reason="WaitingForPreemptedWorkloads")
    assert client.get(queue_url(), HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=changed["ETag"]).status_code == 200


def test_project_queue_makes_a_fixed_number_of_queries(page_client, make_workload, make_outside, users,
                                                       django_assert_num_queries):
    client = page_client("lead")
    mirror(elastic=8)
    queued(make_workload("alice", name="w0", gpus=4), 0)
    running(make_workload("alice", name="r0", gpus=4))
    # session, user, grants, project, the marker, the queue's head, the holders, the waiting counted by pool,
    # 3 explain, runtimes, quotas, queue states, cohorts
    expected = 15
    with django_assert_num_queries(expected):
        client.get(queue_url())
    # Work from outside the portal waiting (a gang of two pods): the pools' nodes, once, however many rows.
    queued(make_outside(name="o-w"), 1)
    running(make_outside(name="o-r"), cluster_queue="proj-vision-h100-guaranteed")
    expected += 1
    with django_assert_num_queries(expected):
        client.get(queue_url())
    for number in range(8):
        queued(make_workload("alice", name=f"w{number + 1}", gpus=2), number + 1)
        running(make_workload("lead", name=f"r{number + 1}", gpus=1))
        # Work from outside the portal in the same queues: waiting and running, attributed to alice or to no one.
        queued(make_outside(name=f"o-w{number}", owner=users["alice"] if number % 2 else None), number + 9)
        running(make_outside(name=f"o-r{number}"), cluster_queue="proj-vision-h100-guaranteed")
    with django_assert_num_queries(expected):
        page = client.get(queue_url())
    assert page.content.decode().count('data-origin="outside"') == 18
    with django_assert_num_queries(expected):  # the poll's partial reads what the page does
        poll = client.get(queue_url(), HTTP_HX_REQUEST="true")
    assert poll.content.decode().count('data-origin="outside"') == 18
    with django_assert_num_queries(5):  # unchanged: session, user, grants, project, the marker
        assert client.get(queue_url(), HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=poll["ETag"]).status_code == 304


def test_a_long_queue_shows_its_head_and_counts_the_rest(page_client, make_workload, monkeypatch):
    """Past PROJECT_QUEUE_ROWS waiting workloads the page shows the first ones in queue order with their
    explanations, counts the rest (their demand included) and links to all of them on the workload list."""
    monkeypatch.setattr("apps.workloads.selectors.queue.PROJECT_QUEUE_ROWS", 3)
    waiting = [queued(make_workload("alice", name=f"w{n}", gpus=1), n) for n in range(5)]
    content = page_client("alice").get(queue_url()).content.decode()
    shown = [w.pk for w in waiting if f'data-workload="{w.pk}"' in content]
    assert shown == [w.pk for w in waiting[:3]]
    assert "Waiting <span class=\"muted small\">(5)</span>" in content and 'data-queue-more="2"' in content
    link = (f'{LIST}?project=vision&amp;scope=all&amp;status=submitting,queued,requeued,preempted'
            f'&amp;ordering=position')
    assert f'<a href="{link}">all 5 on the workload list</a>' in content
    row = content[content.index('data-pool="h100"'):]
    assert 'data-fact="pending">5<' in row[:row.index("</tr>")]  # every waiting workload's demand
    listed = page_client("alice").get(link.replace("&amp;", "&")).content.decode()
    assert all(f'data-workload="{w.pk}"' in listed for w in waiting)


ACCESS = [
    # (user, project, status)
    ("admin", "vision", 200), ("admin", "serving", 200),
    ("deptadmin", "vision", 200), ("deptadmin", "nlp", 200), ("deptadmin", "serving", 404),
    ("lead", "vision", 200), ("lead", "forecasting", 404),
    ("alice", "vision", 200), ("alice", "nlp", 404), ("alice", "serving", 404),
    ("bob", "nlp", 200), ("bob", "vision", 404),
    ("carol", "forecasting", 200), ("carol", "vision", 404),
    ("viewer", "vision", 200), ("viewer", "serving", 200),
    ("alice", "no-such-project", 404),
]


@pytest.mark.parametrize(("username", "project", "expected"), ACCESS)
def test_project_queue_access(page_client, username, project, expected):
    assert page_client(username).get(queue_url(project)).status_code == expected


def test_project_queue_requires_sign_in(client):
    response = client.get(queue_url())
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_researchers_see_colleagues_rows_without_their_details(page_client, make_workload):
    queued(make_workload("lead", name="leads-run", gpus=2, image="secret/registry:1"), 0)
    content = page_client("alice").get(queue_url()).content.decode()
    assert "leads-run" in content and "lead" in content and "secret/registry" not in content


# --- detail ---------------------------------------------------------------------------------------------------------


def test_detail_shows_position_explanation_conditions_flavors_and_preemptor(page_client, make_workload):
    mirror(elastic=8)
    victim = running(make_workload("alice", name="victim", gpus=4))
    preemptor = running(make_workload("bob", name="reclaimer", project="nlp", gpus=4),
                        cluster_queue="proj-nlp-h100-guaranteed")
    Workload.objects.filter(pk=preemptor.pk).update(k8s_uid="uid-of-reclaimer")
    WorkloadEvent.objects.create(workload=victim, at=timezone.now(), from_status="running", to_status="preempted",
                                 reason="InCohortReclamation", message="Preempted to accommodate a workload",
                                 details={"preemptor_job_uid": "uid-of-reclaimer"}, cluster_at=timezone.now())
    WorkloadEvent.objects.create(workload=victim, at=timezone.now(), from_status="preempted", to_status="requeued",
                                 reason="Requeued")
    victim = queued(victim, 1)
    Workload.objects.filter(pk=victim.pk).update(status=Status.REQUEUED)  # requeued after a preemption: its own status
    alice = page_client("alice").get(reverse("workloads:detail", args=[victim.pk])).content.decode()
    assert "#2 in elastic-h100" in alice and "1 workload is ahead of you." in alice
    # Why, in plain words (Kueue's InCohortReclamation is not what people read).
    assert "by a workload of a project you cannot see, to give back borrowed quota to the project that deserves " \
           "it." in alice and "InCohortReclamation" not in alice
    assert reverse("workloads:detail", args=[preemptor.pk]) not in alice
    assert 'data-condition="QuotaReserved"' in alice
    lead = page_client("lead").get(reverse("workloads:detail", args=[victim.pk])).content.decode()
    assert f'href="{reverse("workloads:detail", args=[preemptor.pk])}"' in lead and "reclaimer" in lead


def test_the_conditions_panel_hides_a_preemptor_the_viewer_may_not_see(page_client, make_workload):
    """Kueue's Preempted condition names the preemptor (UIDs, cohort path): kept raw for the lead, who may see NLP;
    for alice, who may not, scoped as the sentence above it is."""
    victim = running(make_workload("alice", name="victim", gpus=4))
    preemptor = running(make_workload("bob", name="reclaimer", project="nlp", gpus=4),
                        cluster_queue="proj-nlp-h100-guaranteed")
    Workload.objects.filter(pk=preemptor.pk).update(k8s_uid="uid-of-reclaimer")
    message = ("Preempted to accommodate a workload (UID: wl-uid-of-reclaimer, JobUID: uid-of-reclaimer) due to "
               "reclamation within the cohort; preemptor path: /portal-h100/dept-research-h100/proj-nlp-h100/"
               "proj-nlp-h100-guaranteed; preemptee path: /portal-h100/dept-research-h100/proj-vision-h100/"
               "proj-vision-h100-elastic")
    Workload.objects.filter(pk=victim.pk).update(kueue_conditions=[
        {"type": "Preempted", "status": "True", "reason": "InCohortReclamation", "message": message,
         "lastTransitionTime": "2026-12-01T10:00:00Z"}])
    alice = page_client("alice").get(reverse("workloads:detail", args=[victim.pk])).content.decode()
    panel = alice[alice.index('aria-label="Kueue conditions"'):]
    panel = panel[: panel.index("</section>")]
    assert 'data-condition="Preempted"' in panel and "InCohortReclamation" in panel
    for hidden in ("proj-nlp", "uid-of-reclaimer", "wl-uid-of-reclaimer"):
        assert hidden not in alice
    assert ("Preempted to accommodate a workload of a project you cannot see due to reclamation within the cohort; "
            "preemptee path: /portal-h100/dept-research-h100/proj-vision-h100/proj-vision-h100-elastic") in panel
    lead = page_client("lead").get(reverse("workloads:detail", args=[victim.pk])).content.decode()
    assert message in lead


def test_detail_of_running_work_shows_flavors_and_the_stored_log_tail(page_client, make_workload, settings):
    workload = running(make_workload("alice", name="logs", gpus=4))
    WorkloadLogTail.objects.create(workload=workload, pod=f"wl-{workload.pk}-0-abc", text="step 1: elapsed 10s\n",
                                   fetched_at=timezone.now())
    content = page_client("alice").get(reverse("workloads:detail", args=[workload.pk])).content.decode()
    assert "step 1: elapsed 10s" in content and "proj-vision-h100-elastic" in content and "<code>h100</code>" in content


def test_runtime_of_live_work_counts_on_the_portal_clock(page_client, make_workload):
    workload = running(make_workload("alice", name="skewed", gpus=1))
    # The cluster's clock is far behind (kubesim's manual clock): the portal's own event time counts.
    Workload.objects.filter(pk=workload.pk).update(started_at=timezone.now() - timedelta(days=300))
    WorkloadEvent.objects.create(workload=workload, at=timezone.now() - timedelta(minutes=2), from_status="admitted",
                                 to_status="running", reason="Running")
    content = page_client("alice").get(LIST).content.decode()
    row = content[content.index(f'data-workload="{workload.pk}"'):]
    runtime = row[row.index("data-runtime>") + len("data-runtime>"):]
    assert runtime.startswith("2m ")


DETAIL_ACCESS = [("admin", 200), ("deptadmin", 200), ("lead", 200), ("alice", 200), ("bob", 404), ("carol", 404),
                 ("viewer", 200)]


@pytest.mark.parametrize(("username", "expected"), DETAIL_ACCESS)
def test_detail_with_its_live_parts_is_scoped(page_client, make_workload, username, expected):
    workload = running(make_workload("alice", name="scoped", gpus=1))
    WorkloadLogTail.objects.create(workload=workload, pod="p-0", text="secret step\n", fetched_at=timezone.now())
    for htmx in (False, True):
        response = page_client(username).get(reverse("workloads:detail", args=[workload.pk]),
                                         **({"HTTP_HX_REQUEST": "true"} if htmx else {}))
        assert response.status_code == expected
        assert ("secret step" in response.content.decode()) == (expected == 200)


def test_submitting_work_waits_in_the_list_but_is_not_yet_demand(page_client, make_workload):
    make_workload("alice", name="not-yet", gpus=4)  # still submitting: Kueue has not seen it
    content = page_client("alice").get(queue_url()).content.decode()
    assert "not-yet" in content
    row = content[content.index('data-pool="h100"'):]
    assert 'data-fact="pending">0<' in row[:row.index("</tr>")]


def test_detail_polls_answer_304_until_something_changes(page_client, make_workload, django_assert_max_num_queries):
    client = page_client("alice")
    workload = queued(make_workload("alice", name="polled", gpus=4), 1)
    url = reverse("workloads:detail", args=[workload.pk])
    first = client.get(url, HTTP_HX_REQUEST="true")
    assert first.status_code == 200 and 'id="workload-live"' in first.content.decode()
    with django_assert_max_num_queries(5):  # session, user, grants, the row, the marker
        again = client.get(url, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 200  # the full page: never 304
    queued(workload, 0)
    moved = client.get(url, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=first["ETag"])
    assert moved.status_code == 200 and "#1 in elastic-h100" in moved.content.decode()
    WorkloadLogTail.objects.create(workload=workload, pod="p", text="new line", fetched_at=timezone.now())
    assert client.get(url, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=moved["ETag"]).status_code == 200


# --- why it waits, for the viewer ---------------------------------------------------------------------------------


def why_texts(content: str) -> str:
    """The explanations on a page (list, project queue), without the rest of the page (menus, filters)."""
    import html
    import re

    return " ".join(html.unescape(m) for m in re.findall(r'data-explanation="[^"]*" data-reason="[^"]*">([^<]*)<',
                                                          content))


def test_pages_name_only_the_projects_the_viewer_may_see(page_client, make_workload):
    mirror(elastic=4)
    mirror(project="nlp", elastic=4)
    mirror(project="serving", guaranteed=4)
    mirror(project="forecasting", elastic=4)
    queued(make_workload("alice", name="more", gpus=4), 0)
    for url in (LIST, queue_url()):
        alice = why_texts(page_client("alice").get(url).content.decode())
        assert "16 of the pool's 16 are in use (Vision 4, others 12)" in alice
        for name in ("NLP", "Serving", "Forecasting"):
            assert name not in alice
        lead = why_texts(page_client("lead").get(url, {"scope": "all"}).content.decode())
        assert "(NLP 4, Vision 4, others 8)" in lead and "Forecasting" not in lead
    admin = why_texts(page_client("admin").get(queue_url()).content.decode())
    assert "(Forecasting 4, NLP 4, Serving 4, Vision 4)" in admin


def test_cached_polls_follow_the_whole_pool_and_the_viewers_scope(page_client, make_workload, users):
    from apps.accounts.models import Role
    from apps.accounts.services import role_binding_create
    from apps.org.models import Department

    mirror(elastic=8)
    workload = queued(make_workload("alice", name="w", gpus=4), 0)
    client = page_client("alice")
    for url in (queue_url(), reverse("workloads:detail", args=[workload.pk])):
        first = client.get(url, HTTP_HX_REQUEST="true")
        assert client.get(url, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    tags = {url: client.get(url, HTTP_HX_REQUEST="true")["ETag"]
            for url in (queue_url(), reverse("workloads:detail", args=[workload.pk]))}
    # Another project's queue changes: who holds the pool may be in the sentence, so the pages change.
    mirror(project="forecasting", elastic=4)
    for url, etag in tags.items():
        again = client.get(url, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=etag)
        assert again.status_code == 200
        tags[url] = again["ETag"]
    # The viewer's scope changes: the same numbers may name other projects now.
    role_binding_create(actor=users["admin"], role=Role.VIEWER, user=users["alice"],
                        department=Department.objects.get(slug="data-science"))
    client = page_client("alice")
    for url, etag in tags.items():
        assert client.get(url, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=etag).status_code == 200


def test_the_list_with_preemptions_makes_a_fixed_number_of_queries(page_client, make_workload,
                                                                   django_assert_num_queries):
    client = page_client("alice")
    mirror(elastic=8)

    def preemption_pair(number: int) -> None:
        victim = make_workload("alice", name=f"victim{number}", gpus=4)
        Workload.objects.filter(pk=victim.pk).update(status=Status.PREEMPTED, status_reason="InCohortReclamation")
        WorkloadEvent.objects.create(workload=victim, at=timezone.now(), from_status="running",
                                     to_status="preempted", reason="InCohortReclamation",
                                     details={"preemptor_job_uid": f"uid-{number}"})
        preemptor = queued(make_workload("alice", name=f"preemptor{number}", gpus=2), number,
                           reason="WaitingForPreemptedWorkloads")
        Workload.objects.filter(pk=preemptor.pk).update(k8s_uid=f"uid-{number}")

    preemption_pair(0)
    expected = 7 + 3 + 2  # the list's seven, explain_workloads' three, the preemption events and their preemptors
    with django_assert_num_queries(expected):
        content = client.get(LIST).content.decode()
    assert 'data-reason="preempted"' in content and 'data-reason="preempting"' in content
    assert "UTC by #" in content and "preemptor0 (Vision), to give back borrowed quota" in content
    for number in range(1, 8):
        preemption_pair(number)
    with django_assert_num_queries(expected):
        client.get(LIST)
