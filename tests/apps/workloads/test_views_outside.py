"""Work submitted outside the portal on the workload pages: the list (kind, "outside the portal (<user>)" as creator,
an origin badge, the origin and kind filters), the detail page (no resubmit, no log fetching, the kubectl commands
instead), the project queue, bulk stop, held but idle and the CSV; members see it, another department gets 404."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.workloads.models import Kind, Status, Workload, WorkloadUtilisation

pytestmark = pytest.mark.django_db
LIST = reverse("workloads:list")


def row_html(response, workload: Workload) -> str:
    """The table row of `workload` on a page (asserts there is one)."""
    content = response.content.decode()
    found = re.search(rf'<tr data-workload="{workload.pk}".*?</tr>', content, re.S)
    assert found, f"workload {workload.pk} is not on the page"
    return found.group(0)


def running(workload: Workload) -> Workload:
    now = timezone.now()
    Workload.objects.filter(pk=workload.pk).update(
        status=Status.RUNNING, admitted_at=now - timedelta(minutes=5), started_at=now - timedelta(minutes=5),
        cluster_queue="proj-vision-h100-guaranteed")
    return Workload.objects.get(pk=workload.pk)


def test_the_list_shows_its_kind_creator_and_origin(page_client, make_outside):
    workload = make_outside(name="kubectl-train")
    row = row_html(page_client("lead").get(LIST), workload)
    assert "outside the portal (kubectl-create)" in row and 'data-origin="outside"' in row
    assert '<td data-col="kind">Job</td>' in row and "no priority class" in row and "None" not in row
    assert '<td data-col="gpus_requested" class="num">4</td>' in row


def test_a_researcher_lands_on_their_own_work_and_finds_outside_work_among_all(page_client, make_outside, users):
    stranger = make_outside()
    attributed = make_outside(owner=users["alice"], submitted_by="argo")
    alice = page_client("alice")
    landing = alice.get(LIST)
    assert f'data-workload="{attributed.pk}"' in landing.content.decode()
    assert f'data-workload="{stranger.pk}"' not in landing.content.decode()
    assert "alice" in row_html(landing, attributed) and 'data-origin="outside"' in row_html(landing, attributed)


def test_filters_by_origin_and_by_cluster_kinds(page_client, make_outside, make_workload):
    job = make_outside()
    jobset = make_outside(kind=Kind.JOBSET, object_api_version="jobset.x-k8s.io/v1alpha2")
    own = make_workload("lead", name="own")
    lead = page_client("lead")

    def ids(**params):
        response = lead.get(LIST, {"scope": "all", **params})
        assert response.status_code == 200 and not response.context["form"].errors
        return {int(pk) for pk in re.findall(r'data-workload="(\d+)"', response.content.decode())}

    assert ids(origin="outside") == {job.pk, jobset.pk}
    assert ids(origin="portal") == {own.pk}
    assert ids(kind="jobset") == {jobset.pk}
    assert ids(kind="job,training") == {job.pk, own.pk}
    assert ids(q="kubectl-create") == {job.pk, jobset.pk}
    assert ids(q="outside portal") == {job.pk, jobset.pk}
    refused = lead.get(LIST, {"origin": "elsewhere"})
    assert refused.status_code == 200 and "origin" in refused.context["form"].errors


def test_the_detail_page_offers_only_what_makes_sense(page_client, make_outside):
    workload = running(make_outside(name="kubectl-train"))
    page = page_client("alice").get(reverse("workloads:detail", args=[workload.pk]))
    assert page.status_code == 200
    content = page.content.decode()
    assert "Submitted outside the portal" in content and "outside the portal (kubectl-create)" in content
    assert "Submit again" not in content and "Keep alive" not in content and "Connect" not in content
    assert "Fetching the pods" not in content and "Manifest as submitted" not in content
    assert "kubectl logs -n proj-vision -l batch.kubernetes.io/job-name=kubectl-train" in content
    assert "kubectl get job kubectl-train -n proj-vision -o yaml" in content
    assert ">None<" not in content and "None (" not in content
    live = page_client("alice").get(reverse("workloads:detail", args=[workload.pk]), HTTP_HX_REQUEST="true")
    assert live.status_code == 200 and "Fetching the pods" not in live.content.decode()


def test_the_detail_page_asks_for_no_log_fetch(page_client, make_outside, django_capture_on_commit_callbacks):
    workload = running(make_outside())
    with django_capture_on_commit_callbacks() as callbacks:
        page_client("alice").get(reverse("workloads:detail", args=[workload.pk]))
    assert callbacks == []


def test_submitting_it_again_from_the_form_is_a_400(page_client, make_outside):
    workload = make_outside()
    response = page_client("alice").get(reverse("workloads:submit", args=["training"]), {"from": workload.pk})
    assert response.status_code == 400


@pytest.mark.parametrize(("username", "expected"), [("alice", 200), ("lead", 200), ("viewer", 200),
                                                    ("admin", 200), ("carol", 404)])
def test_pages_are_scoped_like_every_workload(page_client, make_outside, username, expected):
    workload = make_outside()
    client = page_client(username)
    assert client.get(reverse("workloads:detail", args=[workload.pk])).status_code == expected
    # Researchers' list is their own work (no switch): they find the project's other work on its queue page.
    listing = reverse("workloads:project_queue", args=["vision"]) if username == "alice" else LIST
    listed = client.get(listing, {"scope": "all"}).content.decode()
    assert (f'data-workload="{workload.pk}"' in listed) is (expected == 200)


def test_the_project_queue_shows_outside_work_waiting_and_running(page_client, make_outside):
    waiting = make_outside(name="kubectl-wait")
    Workload.objects.filter(pk=waiting.pk).update(queue_position_local=0, queue_position_cluster=0,
                                                  positions_at=timezone.now())
    holding = running(make_outside(name="kubectl-run"))
    page = page_client("alice").get(reverse("workloads:project_queue", args=["vision"]))
    for workload in (waiting, holding):
        row = row_html(page, workload)
        assert "outside the portal (kubectl-create)" in row and 'data-origin="outside"' in row
        assert "None" not in row
    assert "no priority class" in row_html(page, waiting)
    assert page_client("carol").get(reverse("workloads:project_queue", args=["vision"])).status_code == 404


def test_bulk_stop_names_who_submitted_it(page_client, make_outside):
    workload = make_outside(name="kubectl-stop")
    question = page_client("lead").post(reverse("workloads:bulk_stop"), {"ids": [workload.pk]})
    assert question.status_code == 200
    assert "kubectl-stop</strong> · vision · outside the portal (kubectl-create) · queued" in \
        question.content.decode()
    assert page_client("carol").post(reverse("workloads:bulk_stop"), {"ids": [workload.pk]}).status_code == 404


def test_held_but_idle_lists_it_with_its_submitter(page_client, make_outside):
    workload = running(make_outside(name="kubectl-idle"))
    now = timezone.now()
    WorkloadUtilisation.objects.create(workload=workload, mean_percent=1.0, samples=10,
                                       idle_since=now - timedelta(hours=1), idle_flagged_at=now)
    page = page_client("admin").get(reverse("workloads:held_idle"))
    content = page.content.decode()
    assert "kubectl-idle" in content and "<td>outside the portal (kubectl-create)</td>" in content
    assert "<td>None</td>" not in content


def test_the_csv_names_its_creator_and_kind(page_client, make_outside):
    workload = make_outside(name="kubectl-csv")
    response = page_client("lead").get(reverse("workloads:export"), {"scope": "all"})
    lines = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    line = next(entry for entry in lines if entry["id"] == str(workload.pk))
    assert line["Creator"] == "outside the portal (kubectl-create)" and line["Kind"] == "Job"
    assert line["GPUs requested"] == "4" and "None" not in line.values()
    carol = page_client("carol").get(reverse("workloads:export"), {"scope": "all"})
    assert "kubectl-csv" not in b"".join(carol.streaming_content).decode()
