"""The workload list: own work by default, everything in scope for leads, filters, pagination, polling only while
something is live, and a fixed number of queries however many rows there are; the detail page's parts."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps.workloads.models import LIVE_STATUSES, Kind, Status, Workload
from apps.workloads.views import PAGE_SIZE

LIST = "/workloads/"
POLL = 'hx-trigger="every 5s"'


def rows(response) -> list[int]:
    return [int(pk) for pk in re.findall(r'data-workload="(\d+)"', response.content.decode())]


def test_researchers_land_on_their_own_work_and_leads_on_their_scopes(page_client, make_workload):
    """The lead's landing view changed: it used to be their own rows only (an empty "my workloads" for most
    leads); leads and admins now land on their scope's workloads and switch to their own with scope=mine."""
    mine = make_workload("alice", name="mine")
    lead_own = make_workload("lead", name="leads")
    carols = make_workload("carol", project="forecasting")
    assert rows(page_client("alice").get(LIST)) == [mine.pk]
    for username in ("lead", "deptadmin"):
        landing = page_client(username).get(LIST)
        assert sorted(rows(landing)) == sorted([mine.pk, lead_own.pk]) and landing.context["scope"] == "all"
        assert rows(page_client(username).get(LIST, {"scope": "mine"})) == ([lead_own.pk] if username == "lead" else [])
    assert sorted(rows(page_client("admin").get(LIST))) == sorted([mine.pk, lead_own.pk, carols.pk])
    # A researcher switches to everything she may see: her project's work (kubectl's and pipelines' too), never
    # another department's.
    everything = rows(page_client("alice").get(LIST, {"scope": "all"}))
    assert mine.pk in everything and carols.pk not in everything
    assert sorted(everything) == sorted([mine.pk] + ([lead_own.pk] if lead_own.project.slug == "vision" else []))


def test_the_scope_switch_shows_the_scope_the_list_is_in(page_client, make_workload):
    make_workload("alice")
    selected = re.compile(r'<option value="(\w+)" selected>')
    for username in ("lead", "deptadmin", "admin"):
        landing = page_client(username).get(LIST)
        assert landing.context["scope"] == "all" and landing.context["form"]["scope"].value() == "all"
        scope_select = landing.content.decode().split('name="scope"')[1].split("</select>")[0]
        assert selected.findall(scope_select) == ["all"], username
        mine = page_client(username).get(LIST, {"scope": "mine"})
        assert mine.context["scope"] == "mine" and mine.context["form"]["scope"].value() == "mine"


def test_leads_and_department_admins_may_see_everything_in_scope(page_client, make_workload):
    alices = make_workload("alice")
    bobs = make_workload("bob", project="nlp")
    carols = make_workload("carol", project="forecasting")
    for username in ("lead", "deptadmin"):
        response = page_client(username).get(LIST, {"scope": "all"})
        assert sorted(rows(response)) == sorted([alices.pk, bobs.pk])
        assert 'name="scope"' in response.content.decode()
    assert sorted(rows(page_client("admin").get(LIST, {"scope": "all"}))) == sorted([alices.pk, bobs.pk, carols.pk])
    researcher = page_client("alice").get(LIST)
    assert 'name="scope"' in researcher.content.decode() and researcher.context["scope"] == "mine"


def test_viewers_see_everything_they_may_see(page_client, make_workload):
    alices = make_workload("alice")
    carols = make_workload("carol", project="forecasting")
    assert sorted(rows(page_client("viewer").get(LIST))) == sorted([alices.pk, carols.pk])


def test_filters_by_status_kind_and_project(page_client, make_workload):
    training = make_workload("alice", name="t")
    notebook = make_workload("alice", name="n", kind=Kind.NOTEBOOK)
    finished = make_workload("alice", name="f")
    Workload.objects.filter(pk=finished.pk).update(status=Status.SUCCEEDED)
    bobs = make_workload("bob", project="nlp")
    client = page_client("alice")
    assert rows(client.get(LIST, {"kind": "notebook"})) == [notebook.pk]
    assert rows(client.get(LIST, {"status": "succeeded"})) == [finished.pk]
    assert sorted(rows(client.get(LIST, {"status": "live"}))) == sorted([training.pk, notebook.pk])
    lead = page_client("lead")
    from apps.org.models import Project

    nlp = Project.objects.get(slug="nlp")
    assert rows(lead.get(LIST, {"scope": "all", "project": nlp.pk})) == [bobs.pk]


def test_the_row_shows_status_project_pool_units_kind_age_and_actions(page_client, make_workload):
    workload = make_workload("alice", name="wide", gpus=2, pods=3)
    content = page_client("alice").get(LIST).content.decode()
    row = content[content.index(f'data-workload="{workload.pk}"'):]
    row = row[:row.index("</tr>")]
    assert "Submitting" in row and "badge" in row and "vision" in row and "h100" in row
    assert '<td data-col="gpus_requested" class="num">6</td>' in row and "Training" in row and "minute" in row
    assert reverse("workloads:stop", args=[workload.pk]) in row
    assert f"/workloads/submit/training/?from={workload.pk}" in row


def test_no_stop_button_for_finished_work_or_for_viewers(page_client, make_workload):
    workload = make_workload("alice")
    stop = reverse("workloads:stop", args=[workload.pk])
    assert stop not in page_client("viewer").get(LIST).content.decode()
    Workload.objects.filter(pk=workload.pk).update(status=Status.FAILED)
    assert stop not in page_client("alice").get(LIST).content.decode()


def test_the_list_polls_only_while_a_listed_workload_is_live(page_client, make_workload):
    workload = make_workload("alice")
    client = page_client("alice")
    assert POLL in client.get(LIST).content.decode()
    for status in sorted(set(Status.values) - LIVE_STATUSES):
        Workload.objects.filter(pk=workload.pk).update(status=status)
        assert POLL not in client.get(LIST).content.decode(), status
    for status in sorted(LIVE_STATUSES):
        Workload.objects.filter(pk=workload.pk).update(status=status)
        assert POLL in client.get(LIST).content.decode(), status


def test_the_htmx_poll_returns_the_table_only_and_keeps_the_filters(page_client, make_workload):
    make_workload("alice", kind=Kind.NOTEBOOK)
    response = page_client("alice").get(LIST, {"kind": "notebook"}, HTTP_HX_REQUEST="true")
    content = response.content.decode()
    assert "<html" not in content and content.lstrip().startswith("<div id=\"workload-table\"")
    assert 'hx-get="/workloads/?kind=notebook"' in content


def test_the_htmx_poll_answers_304_while_nothing_listed_changed(page_client, make_workload,
                                                               django_assert_num_queries):
    from django.utils import timezone

    from tests.apps.workloads.test_views_queue import queued

    client = page_client("alice")
    waiting = queued(make_workload("alice", name="waits", gpus=4), 0)
    first = client.get(LIST, HTTP_HX_REQUEST="true")
    etag = first["ETag"]
    assert first.status_code == 200 and "HX-Request" in first["Vary"]
    with django_assert_num_queries(5):  # session, user, grants, the two queries of the marker
        again = client.get(LIST, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again["ETag"] == etag
    assert client.get(LIST, HTTP_IF_NONE_MATCH=etag).status_code == 200  # the full page: never 304
    other_filter = client.get(LIST, {"kind": "training"}, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=etag)
    assert other_filter.status_code == 200 and other_filter["ETag"] != etag
    # Any change of what is listed: a new row, a status, a position, Kueue's reason.
    changes = [
        lambda: make_workload("alice", name="another"),
        lambda: Workload.objects.filter(pk=waiting.pk).update(status=Status.ADMITTED),
        lambda: Workload.objects.filter(pk=waiting.pk).update(queue_position_local=3, positions_at=timezone.now()),
        lambda: Workload.objects.filter(pk=waiting.pk).update(status_reason="WaitingForPreemptedWorkloads"),
        # Every status weighs its row differently (the marker's `states`).
        *(lambda status=status: Workload.objects.filter(pk=waiting.pk).update(status=status)
          for status in Status if status != Status.ADMITTED),
    ]
    for change in changes:
        change()
        changed = client.get(LIST, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=etag)
        assert changed.status_code == 200 and changed["ETag"] != etag
        etag = changed["ETag"]


def test_the_list_paginates(page_client, make_workload):
    for number in range(PAGE_SIZE + 3):
        make_workload("alice", name=f"run-{number}", pool="l40s-shared")
    client = page_client("alice")
    first, second = client.get(LIST), client.get(LIST, {"page": 2})
    assert len(rows(first)) == PAGE_SIZE and len(rows(second)) == 3
    assert not set(rows(first)) & set(rows(second))
    assert "Page 1 of 2" in first.content.decode()


def test_past_the_pager_cap_the_list_says_more_than_and_stops_there(page_client, make_workload, monkeypatch):
    monkeypatch.setattr("apps.core.filters.PAGER_COUNT_CAP", PAGE_SIZE + 1)
    for number in range(PAGE_SIZE + 3):
        make_workload("alice", name=f"run-{number}", pool="l40s-shared")
    client = page_client("alice")
    first, last = client.get(LIST).content.decode(), client.get(LIST, {"page": 9})
    assert f"Page 1 of 2+ · more than {PAGE_SIZE + 1} workloads" in first and "Older" in first
    assert len(rows(last)) == 1  # the cap's last row; the two past it are on no page
    assert "narrow the filters to see older ones" in last.content.decode() and "Older" not in last.content.decode()


# session, user, grants, count, the page of rows (all joined), the filter's project and department choices
EXPECTED_QUERIES = 7


@pytest.mark.parametrize(("username", "params"), [("alice", {}), ("lead", {"scope": "all"}),
                                                  ("viewer", {"status": "live"})])
def test_the_list_makes_a_fixed_number_of_queries(page_client, make_workload, make_outside, users,
                                                  django_assert_num_queries, username, params):
    client = page_client(username)
    make_workload("alice", pool="l40s-shared")
    make_workload("bob", project="nlp", pool="l40s-shared")
    with django_assert_num_queries(EXPECTED_QUERIES):
        client.get(LIST, params)
    # Work from outside the portal waits in Kueue (queued gangs of two pods): explain_workloads' three queries and
    # the pools' nodes for a waiting gang, once, however many rows.
    make_outside(pool="l40s-shared", owner=users["alice"])
    make_outside(project="nlp", pool="l40s-shared")
    with django_assert_num_queries(EXPECTED_QUERIES + 4):
        first = client.get(LIST, params)
    for number in range(12):
        make_workload("alice", name=f"more-{number}", pool="l40s-shared",
                      kind=Kind.NOTEBOOK if number % 2 else Kind.TRAINING)
        make_workload("bob", name=f"more-{number}", project="nlp", pool="l40s-shared")
        # Work from outside the portal mixed in: some attributed to alice, the rest to no one.
        make_outside(pool="l40s-shared", owner=users["alice"] if number % 3 == 0 else None)
        make_outside(project="nlp", pool="l40s-shared", kind=Kind.JOBSET if number % 2 else Kind.POD_GROUP)
    with django_assert_num_queries(EXPECTED_QUERIES + 4):
        second = client.get(LIST, params)
    assert first.content.decode().count('data-origin="outside"') < second.content.decode().count(
        'data-origin="outside"')
    # The table's poll: the marker's two queries, then the page's reads but the filter's choices (no form in it).
    with django_assert_num_queries(EXPECTED_QUERIES + 4):
        poll = client.get(LIST, params, HTTP_HX_REQUEST="true")
    assert poll.status_code == 200 and poll.content.decode().count('data-origin="outside"') == second.content.decode(
    ).count('data-origin="outside"')
    with django_assert_num_queries(5):  # unchanged: session, user, grants, the marker's two queries
        assert client.get(LIST, params, HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=poll["ETag"]).status_code == 304


# --- detail -------------------------------------------------------------------------------------------------------


def test_detail_shows_fields_status_events_and_manifest(page_client, make_workload):
    workload = make_workload("alice", name="detailed", env=[{"name": "SEED", "value": "1"}])
    Workload.objects.filter(pk=workload.pk).update(
        status=Status.QUEUED, status_reason="Pending",
        status_message="couldn't assign flavors to pod set main: insufficient quota",
        manifest={"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"wl-{workload.pk}"}})
    content = page_client("alice").get(reverse("workloads:detail", args=[workload.pk])).content.decode()
    assert "detailed" in content and "SEED=1" in content and "pytorch/pytorch:2.4.0" in content
    assert "Queued" in content and "Pending" in content and "insufficient quota" in content
    assert 'data-to="submitting"' in content
    assert "&quot;apiVersion&quot;: &quot;batch/v1&quot;" in content  # pretty JSON, escaped
    assert POLL in content


def test_detail_shows_the_max_runtime_in_the_forms_unit(page_client, make_workload):
    workload = make_workload("alice", max_runtime_seconds=90 * 60)
    content = page_client("alice").get(reverse("workloads:detail", args=[workload.pk])).content.decode()
    assert "<dd data-max-runtime>90 min (1 h 30 min)</dd>" in content and "5400 s" not in content


@pytest.mark.parametrize(("seconds", "shown"), [
    (45 * 60, "45 min"), (60 * 60, "60 min (1 h)"), (90 * 60, "90 min (1 h 30 min)"),
    (5415, "1 h 30 min 15 s"), (30, "30 s"), (None, ""),
])
def test_runtime_limits_read_in_minutes_like_the_form(seconds, shown):
    from apps.workloads.templatetags.workload_tags import runtime_limit

    assert runtime_limit(seconds) == shown


def test_detail_stops_polling_once_final(page_client, make_workload):
    workload = make_workload("alice")
    Workload.objects.filter(pk=workload.pk).update(status=Status.SUCCEEDED)
    content = page_client("alice").get(reverse("workloads:detail", args=[workload.pk])).content.decode()
    assert POLL not in content


def test_detail_htmx_returns_the_live_part(page_client, make_workload):
    workload = make_workload("alice")
    content = page_client("alice").get(reverse("workloads:detail", args=[workload.pk]),
                                   HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in content and 'id="workload-live"' in content and "History" in content


def test_stop_from_the_detail_page_moves_to_stopping_with_an_event(page_client, make_workload,
                                                                   django_capture_on_commit_callbacks):
    workload = make_workload("alice")
    client = page_client("lead")
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(reverse("workloads:stop", args=[workload.pk]))
    assert len(callbacks) == 1
    page = client.get(response["Location"]).content.decode()
    assert "Stopping run" in page and "Stop requested by lead" in page


def test_keep_alive_pushes_the_idle_deadline_back(page_client, make_workload):
    notebook = make_workload("alice", kind=Kind.NOTEBOOK, notebook_idle_timeout_minutes=30)
    Workload.objects.filter(pk=notebook.pk).update(status=Status.RUNNING)
    client = page_client("alice")
    detail = client.get(reverse("workloads:detail", args=[notebook.pk])).content.decode()
    assert "Keep alive" in detail
    response = client.post(reverse("workloads:keep_alive", args=[notebook.pk]), follow=True)
    assert "idle timeout of 30 minutes starts again" in response.content.decode()
    notebook.refresh_from_db()
    assert notebook.last_activity_at is not None


def test_keep_alive_of_a_training_job_is_404(page_client, make_workload):
    workload = make_workload("alice")
    assert page_client("alice").post(reverse("workloads:keep_alive", args=[workload.pk])).status_code == 404


def test_a_finished_rows_reason_is_shown_only_when_it_says_more_than_its_status(page_client, make_workload):
    stopped = make_workload("alice", name="stopped")
    idle = make_workload("alice", name="idle")
    Workload.objects.filter(pk=stopped.pk).update(status=Status.STOPPED, status_reason="Stopped")
    Workload.objects.filter(pk=idle.pk).update(status=Status.STOPPED, status_reason="IdleTimeout")
    html = page_client("alice").get(LIST).content.decode()

    def reason_cell(pk: int) -> str:
        row = html[html.index(f'data-workload="{pk}"'):]
        cell = row[row.index('data-col="waiting_for"'):]
        return cell[:cell.index("</td>")]

    assert "<code>" not in reason_cell(stopped.pk)
    assert "<code>IdleTimeout</code>" in reason_cell(idle.pk)
