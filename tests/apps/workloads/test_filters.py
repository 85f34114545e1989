"""WorkloadFilterSet: the list page and the API list answer the same rows for the same query string, order them the
same way over a whitelist, keep to the user's scope, and refuse bad input (400 / a form error), never a 500."""

from __future__ import annotations

import re

import pytest

from apps.accounts.models import RoleBinding
from apps.org.models import Project
from apps.workloads.models import Kind, Status, Workload
from tests.api_support import call

LIST = "/workloads/"
INVALID_CHOICE = "Select a valid choice. That choice is not one of the available choices."


def page_ids(client, query: str) -> list[int]:
    response = client.get(f"{LIST}?{query}")
    assert response.status_code == 200
    assert not response.context["form"].errors, response.context["form"].errors
    return [int(pk) for pk in re.findall(r'data-workload="(\d+)"', response.content.decode())]


def api_ids(client, query: str) -> list[int]:
    response = call(client, "GET", f"workloads/?{query}&limit=25")
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


@pytest.fixture
def spread(make_workload):
    """Workloads of three owners in three projects, of every kind, some finished."""
    made = {
        "alice-train": make_workload("alice", name="alpha"),
        "alice-notebook": make_workload("alice", name="notes", kind=Kind.NOTEBOOK),
        "alice-done": make_workload("alice", name="done", pool="l40s-shared"),
        "bob-train": make_workload("bob", name="bravo", project="nlp"),
        "bob-batch": make_workload("bob", name="batch", project="nlp", kind=Kind.BATCH, completions=2,
                                   parallelism=1),
        "lead-train": make_workload("lead", name="lead", project="nlp"),
        "carol-train": make_workload("carol", name="charlie", project="forecasting"),
    }
    Workload.objects.filter(pk=made["alice-done"].pk).update(status=Status.SUCCEEDED)
    return made


QUERIES = [
    "scope=all", "scope=mine", "scope=all&status=live", "scope=all&status=succeeded", "scope=all&kind=notebook",
    "scope=all&kind=batch,notebook", "scope=all&status=live,succeeded&kind=training", "scope=all&project=nlp",
    "scope=all&project={vision}", "scope=all&owner=bob", "scope=all&owner={alice}", "scope=all&ordering=name",
    "scope=all&ordering=-name", "scope=all&ordering=owner,-created_at", "scope=all&ordering=project,kind",
    "scope=mine&status=live&ordering=status",
]


@pytest.mark.parametrize("username", ["lead", "admin", "deptadmin"])
@pytest.mark.parametrize("query", QUERIES)
def test_the_list_page_and_api_answer_the_same_rows(page_client, users, spread, username, query):
    query = query.format(vision=Project.objects.get(slug="vision").pk, alice=users["alice"].pk)
    client = page_client(username)
    rows = page_ids(client, query)
    assert rows == api_ids(client, query)
    if "mine" not in query:
        assert rows  # every "all" query here matches something, so the comparison means something


@pytest.mark.parametrize("query", ["scope=mine", "scope=mine&status=live", "scope=mine&kind=notebook",
                                   "scope=mine&project=vision", "scope=mine&ordering=-name",
                                   "scope=mine&status=live,succeeded"])
def test_a_researchers_own_list_is_the_same_on_both_sides(page_client, spread, query):
    client = page_client("alice")
    rows = page_ids(client, query)
    assert rows and rows == api_ids(client, query)


def test_without_scope_the_page_starts_researchers_on_their_own_work_and_the_api_lists_everything(page_client,
                                                                                                   spread):
    """The lead's default changed: the page used to start them on their own work only; it now starts them
    on their scope's work, the same rows as the API. Researchers still start on their own."""
    alice = page_client("alice")
    assert set(page_ids(alice, "")) == {w.pk for w in spread.values() if w.owner.username == "alice"}
    assert set(api_ids(alice, "")) >= set(page_ids(alice, ""))
    client = page_client("lead")
    assert set(page_ids(client, "")) == {w.pk for key, w in spread.items() if key != "carol-train"}
    assert set(api_ids(client, "")) == {w.pk for key, w in spread.items() if key != "carol-train"}
    viewer = page_client("viewer")
    assert page_ids(viewer, "") == api_ids(viewer, "")


def test_ordering_is_stable_and_whitelisted(page_client, spread, make_workload):
    twin = make_workload("bob", name="bravo", project="nlp")  # same name as bob-train: the tie keeps newest first
    client = page_client("admin")
    rows = call(client, "GET", "workloads/?ordering=name&limit=100").json()["results"]
    assert [row["name"] for row in rows] == sorted(row["name"] for row in rows)
    bravos = [row["id"] for row in rows if row["name"] == "bravo"]
    assert bravos == [twin.pk, spread["bob-train"].pk]
    for bad in ("image", "owner__password", "gpu_units", "-", "name,nope"):
        response = call(client, "GET", f"workloads/?ordering={bad}")
        assert response.status_code == 400 and list(response.json()) == ["ordering"], bad
        page = client.get(LIST, {"ordering": bad, "scope": "all"})
        assert page.status_code == 200 and list(page.context["form"].errors) == ["ordering"]
        assert "data-workload=" not in page.content.decode()


@pytest.fixture
def mixed(spread, make_outside, users):
    """The spread and work from outside the portal: in vision (one attributed to alice), in nlp, in forecasting."""
    return {**spread, "outside-vision": make_outside(submitted_by="system:serviceaccount:ci:runner"),
            "outside-alice": make_outside(owner=users["alice"], submitted_by="argo"),
            "outside-nlp": make_outside(project="nlp", kind=Kind.JOBSET, submitted_by=""),
            "outside-carol": make_outside(project="forecasting", kind=Kind.RAYJOB)}


MIXED_QUERIES = [
    "scope=all&origin=outside", "scope=all&origin=portal", "scope=all&kind=job", "scope=all&kind=jobset,training",
    "scope=all&origin=outside&kind=job", "scope=all&ordering=owner", "scope=all&ordering=-owner",
    "scope=all&ordering=gpus", "scope=all&ordering=-gpus,name", "scope=all&owner=alice", "scope=all&q=outside",
    "scope=all&q=serviceaccount", "scope=all&origin=outside&owner=alice", "scope=all&status=queued&ordering=kind",
]


@pytest.mark.parametrize("username", ["lead", "admin"])
@pytest.mark.parametrize("query", MIXED_QUERIES)
def test_outside_work_is_filtered_and_sorted_the_same_on_both_sides(page_client, mixed, username, query):
    client = page_client(username)
    rows = page_ids(client, query)
    assert rows and rows == api_ids(client, query)


def test_origin_and_owner_select_the_right_rows(page_client, mixed):
    client = page_client("admin")
    outside = {mixed[key].pk for key in ("outside-vision", "outside-alice", "outside-nlp", "outside-carol")}
    assert set(api_ids(client, "origin=outside")) == outside
    assert not set(api_ids(client, "origin=portal")) & outside
    assert mixed["outside-alice"].pk in api_ids(client, "owner=alice")
    assert not set(api_ids(client, "owner=alice")) & (outside - {mixed["outside-alice"].pk})
    assert set(api_ids(client, "q=outside+portal")) == outside - {mixed["outside-alice"].pk}


def test_sorting_by_creator_places_outside_work_as_the_list_names_it(page_client, mixed):
    """Null owners sort by what the Creator column shows ("outside the portal (...)"), not first or last."""
    rows = call(page_client("admin"), "GET", "workloads/?ordering=owner&limit=100").json()["results"]
    labels = [row["submitter_label"] for row in rows]
    assert labels == sorted(labels)
    assert "outside the portal" in labels and "outside the portal (argo)" not in labels  # argo's is alice's
    descending = call(page_client("admin"), "GET", "workloads/?ordering=-owner&limit=100").json()["results"]
    assert [row["submitter_label"] for row in descending] == sorted(labels, reverse=True)


BAD_INPUT = [
    ("origin", "elsewhere"), ("origin", "outside\x00"), ("kind", "Job"),
    ("project", "²"), ("project", "\u0661"), ("project", "1e20"), ("project", "99999999999999999999"), ("project", "0"),
    ("project", "vision\x00"), ("project", "no-such-project"), ("project", "vision;drop"),
    ("status", "sleeping"), ("status", "live,sleeping"), ("status", "\x00"), ("kind", "service"), ("kind", "²"),
    ("owner", "99999999999999999999"), ("owner", "bob\x00"), ("scope", "everything"), ("ordering", "name\x00"),
]


@pytest.mark.parametrize(("name", "value"), BAD_INPUT)
def test_bad_filters_are_a_400_and_a_form_error(page_client, spread, name, value):
    client = page_client("lead")
    response = client.get("/api/v1/workloads/", {name: value})
    assert response.status_code == 400
    assert list(response.json()) == [name]
    assert all(isinstance(message, str) and message for message in response.json()[name])
    page = client.get(LIST, {name: value, **({} if name == "scope" else {"scope": "all"})})
    assert page.status_code == 200
    assert list(page.context["form"].errors) == [name]
    assert "data-workload=" not in page.content.decode()
    assert 'class="errorlist"' in page.content.decode()
    partial = client.get(LIST, {name: value}, HTTP_HX_REQUEST="true")
    assert partial.status_code == 200 and "data-filter-errors" in partial.content.decode()


def test_status_errors_keep_their_message(page_client):
    response = call(page_client("lead"), "GET", "workloads/?status=live,sleeping")
    assert response.json()["status"][0].startswith("Unknown status sleeping; choose from live, submitting,")


@pytest.mark.parametrize("value", ["\u0661", "²"])
def test_non_ascii_digits_as_an_owner_are_a_name_not_an_id(page_client, spread, value):
    client = page_client("lead")
    assert api_ids(client, f"owner={value}") == [] == page_ids(client, f"scope=all&owner={value}")


@pytest.mark.parametrize("number", ["99999999999999999999", "1e20", "\u0661", "\x00", "-1"])
def test_absurd_page_numbers_never_fail(page_client, spread, number):
    assert page_client("lead").get(LIST, {"page": number, "scope": "all"}).status_code == 200
    assert page_client("lead").get("/api/v1/workloads/", {"offset": number}).status_code == 400


def test_a_researcher_never_sees_another_departments_choices_or_rows(page_client, spread):
    client = page_client("alice")
    form = client.get(LIST).context["form"]
    assert [p.slug for p in form.fields["project"].queryset] == ["vision"]
    assert "scope" in form.fields  # her own work, or her project's, never further (below)
    forecasting = Project.objects.get(slug="forecasting")
    for value in ("forecasting", forecasting.pk, "nlp"):
        response = call(client, "GET", f"workloads/?project={value}")
        assert response.status_code == 400 and response.json() == {"project": [INVALID_CHOICE]}
        page = client.get(LIST, {"project": value})
        assert page.context["form"].errors == {"project": [INVALID_CHOICE]}
        assert "data-workload=" not in page.content.decode()
    # the API's owner filter never widens the scope either
    assert api_ids(client, "owner=carol") == []
    assert spread["carol-train"].pk not in api_ids(client, "scope=all")
    assert spread["carol-train"].pk not in page_ids(client, "scope=all")


def test_own_work_in_a_project_no_longer_visible_is_listed_but_not_a_filter_choice(page_client, users, spread):
    RoleBinding.objects.filter(user=users["alice"]).delete()
    client = page_client("alice")
    assert set(api_ids(client, "")) == {spread[key].pk for key in ("alice-train", "alice-notebook", "alice-done")}
    response = call(client, "GET", "workloads/?project=vision")
    assert response.status_code == 400 and response.json() == {"project": [INVALID_CHOICE]}
