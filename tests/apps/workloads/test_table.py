"""The workload table: search, sort, department filter, CSV export and bulk stop, through the page
and the API alike (one FilterSet), with the access rules: no row of another project ever appears, and a bulk stop
that names a row the user may not stop is refused whole. Query counts stay fixed as rows grow."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest

from apps.core.models import AuditEvent
from apps.workloads.models import Kind, Status, Workload
from apps.workloads.table import COLUMNS
from tests.api_support import call

LIST = "/workloads/"
EXPORT = "/workloads/export.csv"
BULK_STOP = "/workloads/stop/"


def rows(response) -> list[int]:
    return [int(pk) for pk in re.findall(r'data-workload="(\d+)"', response.content.decode())]


def api_ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def csv_table(response) -> list[dict[str, str]]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


# --- search, sort, filters -------------------------------------------------------------------------------------


def test_search_finds_words_in_name_project_and_creator_on_the_page_and_in_the_api(page_client, make_workload):
    sweep = make_workload("alice", name="resnet-sweep")
    other = make_workload("alice", name="bert-tune")
    leads = make_workload("lead", name="lead-resnet")
    bobs = make_workload("bob", name="resnet-nlp", project="nlp")
    lead = page_client("lead")
    assert sorted(rows(lead.get(LIST, {"q": "resnet"}))) == sorted([sweep.pk, leads.pk, bobs.pk])
    assert sorted(api_ids(call(lead, "GET", "workloads/?q=resnet"))) == sorted([sweep.pk, leads.pk, bobs.pk])
    # Every word must match: one in the name, one in the creator.
    assert rows(lead.get(LIST, {"q": "RESNET alice"})) == [sweep.pk]
    assert api_ids(call(lead, "GET", "workloads/?q=tune+vision")) == [other.pk]
    # A researcher's search never reaches into another project, however well the words match.
    alice = page_client("alice")
    assert rows(alice.get(LIST, {"q": "nlp", "scope": "all"})) == []
    assert api_ids(call(alice, "GET", "workloads/?q=resnet-nlp")) == []
    assert bobs.pk not in api_ids(call(alice, "GET", "workloads/?q=resnet"))


def test_department_filter_is_scoped_like_the_project_filter(page_client, make_workload, demo):
    from apps.org.models import Department

    research = make_workload("alice")
    forecasting = make_workload("carol", project="forecasting")
    admin = page_client("admin")
    assert api_ids(call(admin, "GET", "workloads/?department=research")) == [research.pk]
    data_science = Department.objects.get(slug="data-science")
    assert rows(admin.get(LIST, {"department": data_science.pk})) == [forecasting.pk]
    # The lead sees research only: another department is "not a valid choice" (a 400 in the API, an error on the page).
    lead = page_client("lead")
    refused = call(lead, "GET", "workloads/?department=data-science")
    assert refused.status_code == 400 and "department" in refused.json()
    page = lead.get(LIST, {"department": "data-science"})
    assert rows(page) == [] and "not one of the available choices" in page.content.decode()


def test_sorting_by_gpus_department_and_position_on_the_page_and_in_the_api(page_client, make_workload):
    small = make_workload("alice", name="small", gpus=1)
    gang = make_workload("alice", name="gang", gpus=2, pods=3)  # 6 units
    batch = make_workload("alice", name="batch", kind=Kind.BATCH, gpus=1, completions=10, parallelism=4)  # 4
    client = page_client("alice")
    assert rows(client.get(LIST, {"ordering": "gpus"})) == [small.pk, batch.pk, gang.pk]
    assert rows(client.get(LIST, {"ordering": "-gpus"})) == [gang.pk, batch.pk, small.pk]
    assert api_ids(call(client, "GET", "workloads/?ordering=-gpus")) == [gang.pk, batch.pk, small.pk]
    Workload.objects.filter(pk=small.pk).update(status=Status.QUEUED, queue_position_cluster=1)
    Workload.objects.filter(pk=gang.pk).update(status=Status.QUEUED, queue_position_cluster=0)
    assert api_ids(call(client, "GET", "workloads/?ordering=position"))[:2] == [gang.pk, small.pk]
    assert call(client, "GET", "workloads/?ordering=nonsense").status_code == 400


def test_headings_sort_and_reverse_and_every_column_is_offered_in_the_chooser(page_client, make_workload):
    make_workload("alice")
    content = page_client("alice").get(LIST, {"ordering": "gpus", "kind": "training"}).content.decode()
    # The sorted column links to the reverse order and keeps the filters; the others sort ascending.
    assert (
        'href="?ordering=-gpus&amp;kind=training" data-sort="gpus_requested"' in content
        or 'href="?kind=training&amp;ordering=-gpus" data-sort="gpus_requested"' in content
    )
    assert 'aria-sort="ascending"' in content
    for column in COLUMNS:
        assert f'data-column-toggle="{column.key}"' in content
        assert f'<th data-col="{column.key}"' in content


def test_the_row_shows_department_creator_allocation_pods_and_forecast_cells(page_client, make_workload):
    running = make_workload("alice", name="gang", gpus=2, pods=3)
    queued = make_workload("alice", name="waits", gpus=1)
    Workload.objects.filter(pk=running.pk).update(status=Status.RUNNING)
    Workload.objects.filter(pk=queued.pk).update(status=Status.QUEUED, queue_position_local=2)
    content = page_client("alice").get(LIST).content.decode()

    def row(workload: Workload) -> str:
        found = content[content.index(f'data-workload="{workload.pk}"') :]
        return found[: found.index("</tr>")]

    assert '<td data-col="department">research</td>' in row(running)
    assert '<td data-col="creator">alice</td>' in row(running)
    assert '<td data-col="gpus_allocated" class="num">6</td>' in row(running)
    assert '<td data-col="pods" class="num">3/3</td>' in row(running)
    assert '<td data-col="gpus_allocated" class="num">0</td>' in row(queued)
    assert '<td data-col="pods" class="num">0/1</td>' in row(queued)
    assert "#3 in elastic-h100" in row(queued)
    assert 'data-col="forecast"' in row(queued)


# --- CSV ---------------------------------------------------------------------------------------------------------


def test_csv_export_has_the_filtered_rows_of_the_page_and_the_api(page_client, make_workload):
    training = make_workload("alice", name="plain", gpus=2)
    Workload.objects.filter(pk=training.pk).update(name="=HYPERLINK(1)")  # the forms refuse it; a CSV must cope
    make_workload("alice", name="nb", kind=Kind.NOTEBOOK)
    bobs = make_workload("bob", project="nlp", name="bobs")
    client = page_client("alice")
    table = csv_table(client.get(EXPORT, {"kind": "training"}))
    assert [int(line["id"]) for line in table] == [training.pk]
    line = table[0]
    assert line["Workload"] == "'=HYPERLINK(1)"  # a spreadsheet shows it, never runs it
    assert line["Project"] == "vision" and line["Department"] == "research" and line["Creator"] == "alice"
    assert line["GPUs requested"] == "2" and line["Status"] == "Submitting"
    api = csv_table(call(client, "GET", "workloads/export/?kind=training"))
    assert [int(line["id"]) for line in api] == [training.pk]
    everything = csv_table(call(client, "GET", "workloads/export/"))
    assert bobs.pk not in {int(line["id"]) for line in everything} and len(everything) == 2
    assert client.get(EXPORT, {"status": "nonsense"}).status_code == 400
    assert call(client, "GET", "workloads/export/?status=nonsense").status_code == 400


def test_the_list_page_links_its_csv_with_the_filters(page_client, make_workload):
    make_workload("alice")
    content = page_client("alice").get(LIST, {"kind": "training"}).content.decode()
    assert f'href="{EXPORT}?kind=training" data-export' in content


# --- bulk stop ---------------------------------------------------------------------------------------------------


def test_bulk_stop_asks_then_stops_all_of_them(page_client, make_workload):
    first, second = make_workload("alice", name="one"), make_workload("alice", name="two")
    untouched = make_workload("alice", name="three")
    client = page_client("alice")
    listed = client.get(LIST).content.decode()
    assert f'name="ids" value="{first.pk}"' in listed and "Stop selected" in listed
    question = client.post(BULK_STOP, {"ids": [first.pk, second.pk], "next": LIST})
    assert question.status_code == 200 and "Stop 2 workloads?" in question.content.decode()
    assert Workload.objects.filter(status=Status.STOPPING).count() == 0  # asking changes nothing
    done = client.post(BULK_STOP, {"ids": [first.pk, second.pk], "next": LIST, "confirmed": "1"})
    assert done.status_code == 302 and done["Location"] == LIST
    assert set(Workload.objects.filter(status=Status.STOPPING).values_list("pk", flat=True)) == {first.pk, second.pk}
    assert Workload.objects.get(pk=untouched.pk).status == Status.SUBMITTING


def test_bulk_stop_refuses_rows_the_user_may_not_stop_and_stops_none(page_client, make_workload):
    mine = make_workload("alice", name="mine")
    leads = make_workload("lead", name="leads")  # in vision: alice sees it, but may not stop it
    bobs = make_workload("bob", project="nlp", name="bobs")  # alice does not even see it
    alice = page_client("alice")
    assert f'name="ids" value="{leads.pk}"' not in alice.get(LIST, {"scope": "all"}).content.decode()
    for confirmed in ("", "1"):
        refused = alice.post(BULK_STOP, {"ids": [mine.pk, leads.pk], "confirmed": confirmed})
        assert refused.status_code == 403
        assert alice.post(BULK_STOP, {"ids": [mine.pk, bobs.pk], "confirmed": confirmed}).status_code == 404
    response = call(alice, "POST", "workloads/stop/", {"ids": [mine.pk, leads.pk]})
    assert response.status_code == 403 and "leads" in response.json()["detail"]
    assert call(alice, "POST", "workloads/stop/", {"ids": [mine.pk, bobs.pk]}).status_code == 404
    assert not Workload.objects.filter(status=Status.STOPPING).exists()
    # Nothing to stop in one of them: a 400 naming it, and the others keep running too.
    finished = make_workload("alice", name="finished")
    Workload.objects.filter(pk=finished.pk).update(status=Status.SUCCEEDED)
    response = call(alice, "POST", "workloads/stop/", {"ids": [mine.pk, finished.pk]})
    assert response.status_code == 400 and "finished" in str(response.json())
    assert not Workload.objects.filter(status=Status.STOPPING).exists()


@pytest.mark.parametrize(
    "body",
    [{}, {"ids": []}, {"ids": ["²"]}, {"ids": [0]}, {"ids": "1"}, {"ids": [2**63]}, {"ids": list(range(1, 300))}],
)
def test_bulk_stop_api_refuses_bad_bodies_with_a_400(page_client, make_workload, body):
    make_workload("alice")
    response = call(page_client("alice"), "POST", "workloads/stop/", body)
    assert response.status_code == 400 and "ids" in response.json()
    assert not Workload.objects.filter(status=Status.STOPPING).exists()


def test_a_lead_bulk_stops_others_work_in_scope_through_the_api_with_audit_rows(page_client, make_workload):
    alices, bobs = make_workload("alice"), make_workload("bob", project="nlp")
    carols = make_workload("carol", project="forecasting")
    lead = page_client("lead")
    assert call(lead, "POST", "workloads/stop/", {"ids": [alices.pk, carols.pk]}).status_code == 404
    response = call(lead, "POST", "workloads/stop/", {"ids": [alices.pk, bobs.pk]})
    assert response.status_code == 202
    assert sorted((row["id"], row["status"]) for row in response.json()) == sorted(
        [(alices.pk, "stopping"), (bobs.pk, "stopping")]
    )
    assert AuditEvent.objects.filter(action="workload.stop").count() == 2
    assert Workload.objects.get(pk=carols.pk).status == Status.SUBMITTING


def test_bulk_stop_without_ticks_says_so(page_client, make_workload):
    make_workload("alice")
    response = page_client("alice").post(BULK_STOP, {}, follow=True)
    assert "Tick the workloads to stop first" in response.content.decode()
    assert not Workload.objects.filter(status=Status.STOPPING).exists()


# --- query counts ------------------------------------------------------------------------------------------------


def _grow(make_workload, count: int) -> None:
    for number in range(count):
        make_workload(
            "alice", name=f"more-{number}", pool="l40s-shared", kind=Kind.NOTEBOOK if number % 2 else Kind.TRAINING
        )
        make_workload("bob", name=f"more-{number}", project="nlp", pool="l40s-shared")


@pytest.mark.parametrize(
    "url",
    [
        LIST + "?q=more&ordering=-gpus",
        EXPORT + "?q=more",
        "/api/v1/workloads/?q=more&ordering=department",
        "/api/v1/workloads/export/?ordering=-gpus",
    ],
)
def test_search_sort_and_export_make_a_fixed_number_of_queries(
    page_client, make_workload, django_assert_num_queries, django_assert_max_num_queries, url
):
    client = page_client("lead")
    _grow(make_workload, 1)

    def fetch() -> None:
        response = client.get(url)
        assert response.status_code == 200
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)

    with django_assert_max_num_queries(20) as baseline:
        fetch()
    _grow(make_workload, 12)
    with django_assert_num_queries(len(baseline.captured_queries)):
        fetch()


def test_bulk_stop_makes_a_fixed_number_of_queries_per_row(page_client, make_workload, django_assert_max_num_queries):
    """A stop is a few writes per row (lock, update, event, intent, audit); reading and checking the rows is not."""
    client = page_client("lead")
    few = [make_workload("alice", name=f"a-{n}").pk for n in range(2)]
    with django_assert_max_num_queries(100) as small:
        assert call(client, "POST", "workloads/stop/", {"ids": few}).status_code == 202
    many = [make_workload("alice", name=f"b-{n}").pk for n in range(8)]
    with django_assert_max_num_queries(1000) as large:
        assert call(client, "POST", "workloads/stop/", {"ids": many}).status_code == 202
    per_row = (len(large.captured_queries) - len(small.captured_queries)) / 6
    assert per_row == int(per_row) and per_row <= 12


# --- the forecast column ---------------------------------------------------------------------------------------------


def _forecast_model():
    from apps.workloads import models

    model = getattr(models, "WorkloadForecast", None)
    if model is None:
        pytest.skip("the forecast engine's WorkloadForecast is not in this tree yet")
    return model


def _forecast(model, workload: Workload, minutes: int) -> None:
    from django.utils import timezone

    now = timezone.now()
    model.objects.create(
        workload=workload,
        computed_at=now,
        basis="history",
        earliest=now + timedelta(minutes=minutes - 5),
        likely=now + timedelta(minutes=minutes),
        latest=now + timedelta(minutes=minutes + 10),
    )


def test_the_forecast_column_shows_the_engines_estimate_on_the_page_and_in_the_csv(page_client, make_workload):
    model = _forecast_model()
    waiting = make_workload("alice", name="waits")
    Workload.objects.filter(pk=waiting.pk).update(status=Status.QUEUED)
    _forecast(model, waiting, 30)
    client = page_client("alice")
    content = client.get(LIST).content.decode()
    cell = content[content.index(f'data-workload="{waiting.pk}"') :]
    cell = cell[cell.index('data-col="forecast"') : cell.index("</td>", cell.index('data-col="forecast"'))]
    assert "likely in" in cell
    (line,) = csv_table(client.get(EXPORT))
    assert line["Forecast"].startswith("likely in")


def test_forecasts_cost_no_query_per_row(page_client, make_workload, django_assert_num_queries):
    model = _forecast_model()
    client = page_client("alice")
    first = make_workload("alice", name="first")
    _forecast(model, first, 10)
    with django_assert_num_queries(7):  # the list's queries (test_views_list.EXPECTED_QUERIES): the forecast is joined
        client.get(LIST)
    for number in range(10):
        _forecast(model, make_workload("alice", name=f"w-{number}"), 20 + number)
    with django_assert_num_queries(7):
        client.get(LIST)
