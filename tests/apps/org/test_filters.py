"""The organisation's FilterSets: the audit page and the audit API filter and order the same rows from the same
query string; references are scoped to the user; bad input is a 400 in the API and a form error on the page."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import RoleBinding
from apps.core.models import AuditEvent
from apps.org import services
from apps.org.filters import AUDITED_OBJECT_TYPES, AuditEventFilterSet
from apps.org.models import (
    Budget,
    Department,
    KueueSyncState,
    NodePool,
    NotificationChannel,
    PriorityClass,
    Project,
    Quota,
)
from apps.workloads.models import Workload, WorkloadTemplate
from tests.api_support import call, demo_ids

AUDIT_PAGE = reverse("org:audit")
INVALID_CHOICE = "Select a valid choice. That choice is not one of the available choices."


def page_ids(client, query: str) -> list[int]:
    response = client.get(f"{AUDIT_PAGE}?{query}")
    assert response.status_code == 200
    assert not response.context["form"].errors, response.context["form"].errors
    return [event.pk for event in response.context["page"]]


def api_ids(client, path: str, query: str) -> list[int]:
    response = call(client, "GET", f"{path}?{query}&limit=50" if query else f"{path}?limit=50")
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


@pytest.fixture
def history(users):
    """A few more audit rows by different actors, spread over three days."""
    quota = Quota.objects.get(project__slug="vision", node_pool__slug="h100")
    services.quota_update(actor=users["lead"], quota=quota, over_quota_weight=3)
    services.project_update(actor=users["deptadmin"], project=Project.objects.get(slug="nlp"), name="NLP 2")
    services.department_update(actor=users["admin"], department=Department.objects.get(slug="production"),
                               name="Production 2")
    AuditEvent.objects.filter(actor=users["lead"]).update(at=timezone.now() - dt.timedelta(days=2))


AUDIT_QUERIES = [
    "", "action=QUOTA", "action=quota.weight", "action=update&actor=deptadmin", "object_type=project",
    "object_type=quota&ordering=actor", "department=research", "project=nlp", "actor=lead",
    "since={today}", "until={yesterday}", "since={two_days_ago}&until={two_days_ago}", "ordering=action",
    "ordering=-object_type,at", "ordering=-at",
]


@pytest.mark.parametrize("username", ["admin", "deptadmin"])
@pytest.mark.parametrize("query", AUDIT_QUERIES)
def test_the_audit_page_and_api_answer_the_same_rows(client_for, history, username, query):
    today = timezone.localdate()
    query = query.format(today=today.isoformat(), yesterday=(today - dt.timedelta(days=1)).isoformat(),
                         two_days_ago=(today - dt.timedelta(days=2)).isoformat())
    client = client_for(username)
    rows = page_ids(client, query)
    assert rows  # every query here matches something, so the comparison means something
    assert rows == api_ids(client, "audit-events/", query)


def test_a_department_id_and_slug_name_the_same_rows(client_for, history):
    client = client_for("admin")
    by_slug = api_ids(client, "audit-events/", "department=research")
    assert by_slug
    assert by_slug == api_ids(client, "audit-events/", f"department={demo_ids()['research']}")
    assert by_slug == page_ids(client, f"department={demo_ids()['research']}")


def test_action_is_case_insensitive_contains_on_both_sides(client_for, history):
    client = client_for("admin")
    expected = sorted(AuditEvent.objects.filter(action__contains="quota").values_list("pk", flat=True))
    assert expected
    for query in ("action=quota", "action=QUOTA", "action=Quota"):
        assert sorted(page_ids(client, query)) == sorted(api_ids(client, "audit-events/", query)) == expected


def test_since_and_until_are_whole_days_in_the_current_timezone(client_for, users):
    tz = timezone.get_current_timezone()
    day = dt.date(2025, 3, 14)
    inside = [dt.datetime.combine(day, dt.time.min, tzinfo=tz), dt.datetime.combine(day, dt.time.max, tzinfo=tz)]
    outside = [inside[0] - dt.timedelta(microseconds=1), inside[1] + dt.timedelta(microseconds=1)]
    events = []
    for at in (*inside, *outside):
        event = AuditEvent.objects.create(actor=users["admin"], action="probe.day", object_type="project",
                                          object_id="0", object_repr="probe")
        AuditEvent.objects.filter(pk=event.pk).update(at=at)
        events.append(event.pk)
    client = client_for("admin")
    query = f"action=probe.day&since={day}&until={day}"
    assert sorted(page_ids(client, query)) == sorted(api_ids(client, "audit-events/", query)) == sorted(events[:2])
    assert sorted(api_ids(client, "audit-events/", f"action=probe.day&since={day}")) == sorted(
        [events[0], events[1], events[3]])
    assert sorted(api_ids(client, "audit-events/", f"action=probe.day&until={day}")) == sorted(
        [events[0], events[1], events[2]])


def test_a_window_ending_before_it_starts_is_refused_on_both_sides(client_for):
    client = client_for("admin")
    query = {"since": "2026-02-01", "until": "2026-01-31"}
    response = client.get("/api/v1/audit-events/", query)
    assert response.status_code == 400
    assert response.json() == {"until": ["The end date is before the start date."]}
    assert client.get(AUDIT_PAGE, query).context["form"].errors == response.json()


def test_ordering_is_stable_and_whitelisted(client_for, history):
    client = client_for("admin")
    rows = call(client, "GET", "audit-events/?ordering=actor&limit=1000").json()["results"]
    actors = [row["actor"] for row in rows if row["actor"] is not None]
    assert len(set(actors)) > 1 and actors == sorted(actors)
    # ties keep the default order (newest first, then by id)
    for name in set(actors):
        same = [(dt.datetime.fromisoformat(row["at"]), row["id"]) for row in rows if row["actor"] == name]
        assert same == sorted(same, reverse=True)
    for bad in ("before", "password", "actor__password", "-", "at,nope"):
        response = call(client, "GET", f"audit-events/?ordering={bad}")
        assert response.status_code == 400, bad
        assert list(response.json()) == ["ordering"]
        page = client.get(AUDIT_PAGE, {"ordering": bad})
        assert page.status_code == 200 and "ordering" in page.context["form"].errors
        assert list(page.context["page"]) == []


BAD_AUDIT_INPUT = [
    ("department", "²"), ("department", "\u0661"), ("department", "1e20"), ("department", "99999999999999999999"),
    ("department", "-1"), ("department", "no-such-department"), ("department", "research\x00"),
    ("project", "\u0663"), ("project", "0"), ("project", "vision'--"),
    ("object_type", "user"), ("object_type", "\x00"),
    ("action", "quota\x00"), ("actor", "a" * 151),
    ("since", "10000-01-01"), ("since", "0001-01-01"), ("until", "9999-12-31"), ("until", "2026-02-30"),
    ("since", "2026-01-31T12:00:00Z"), ("since", "\x00"), ("ordering", "at\x00"),
]


@pytest.mark.parametrize(("name", "value"), BAD_AUDIT_INPUT)
def test_bad_audit_filters_are_a_400_and_a_form_error(client_for, name, value):
    client = client_for("admin")
    response = client.get("/api/v1/audit-events/", {name: value})
    assert response.status_code == 400
    assert list(response.json()) == [name]
    assert all(isinstance(message, str) and message for message in response.json()[name])
    page = client.get(AUDIT_PAGE, {name: value})
    assert page.status_code == 200
    assert list(page.context["form"].errors) == [name]
    assert list(page.context["page"]) == []
    assert 'class="errorlist"' in page.content.decode()
    partial = client.get(AUDIT_PAGE, {name: value}, HTTP_HX_REQUEST="true")
    assert "data-filter-errors" in partial.content.decode()


def test_null_characters_get_one_clear_message(client_for):
    response = call(client_for("admin"), "GET", "audit-events/?object_type=%00")
    assert response.json() == {"object_type": ["Null characters are not allowed."]}


@pytest.mark.parametrize("params", [{"limit": "1e20"}, {"limit": "0"}, {"limit": "-1"}, {"limit": "²"},
                                    {"limit": "10" * 20}, {"offset": "99999999999999999999"}, {"offset": "\u0661"},
                                    {"offset": "\x00"}])
def test_absurd_api_pages_are_a_400(client_for, params):
    response = client_for("admin").get("/api/v1/audit-events/", params)
    assert response.status_code == 400
    assert list(response.json()) == list(params)


@pytest.mark.parametrize("number", ["99999999999999999999", "1e20", "\u0661", "²", "-3", "\x00", "0"])
def test_absurd_page_numbers_on_the_page_read_as_the_nearest_page(client_for, number):
    response = client_for("admin").get(AUDIT_PAGE, {"page": number})
    assert response.status_code == 200
    assert response.context["page"].number in (1, response.context["page"].paginator.num_pages)


def test_a_department_admin_never_sees_another_departments_choices_or_rows(client_for, history):
    client = client_for("deptadmin")
    form = client.get(AUDIT_PAGE).context["form"]
    assert [d.slug for d in form.fields["department"].queryset] == ["research"]
    assert {p.department.slug for p in form.fields["project"].queryset} == {"research"}
    html = client.get(AUDIT_PAGE).content.decode()
    select = html[html.index('<select name="department"'):]
    select = select[:select.index("</select>")]
    assert f'value="{demo_ids()["research"]}"' in select
    assert select.count("<option") == 2  # "(any)" and research: no option names another department
    ids = demo_ids()
    for name, value in (("department", "production"), ("department", ids["production"]), ("project", "forecasting"),
                        ("project", ids["forecasting"])):
        response = call(client, "GET", f"audit-events/?{name}={value}")
        assert response.status_code == 400
        assert response.json() == {name: [INVALID_CHOICE]}
        # the same answer as for a row that does not exist: nothing tells the two apart
        assert response.json() == call(client, "GET", f"audit-events/?{name}=999999").json() == {
            name: [INVALID_CHOICE]}
        page = client.get(AUDIT_PAGE, {name: value})
        assert page.context["form"].errors == {name: [INVALID_CHOICE]}
        assert list(page.context["page"]) == []


def test_a_valid_reference_with_no_rows_is_an_empty_answer(client_for, users):
    department = services.department_create(actor=users["admin"], slug="quiet", name="Quiet")
    AuditEvent.objects.filter(department=department).delete()
    client = client_for("admin")
    response = call(client, "GET", "audit-events/?department=quiet")
    assert response.status_code == 200 and response.json()["count"] == 0
    page = client.get(AUDIT_PAGE, {"department": department.pk})
    assert not page.context["form"].errors and list(page.context["page"]) == []


def test_the_filter_set_needs_scoped_rows(rf, users):
    request = rf.get("/")
    request.user = users["admin"]
    with pytest.raises(TypeError):
        AuditEventFilterSet({}, request=request)


def test_every_audited_model_is_an_object_type_choice():
    models = (NodePool, Department, Project, Quota, PriorityClass, RoleBinding, Workload, WorkloadTemplate,
              KueueSyncState, Budget, NotificationChannel)
    assert sorted(AUDITED_OBJECT_TYPES) == sorted(model._meta.model_name for model in models)


# --- projects and quotas (API lists) ------------------------------------------------------------------------


def names(client, path: str) -> list[str]:
    response = call(client, "GET", path)
    assert response.status_code == 200, response.content
    return [row.get("slug") or row["id"] for row in response.json()["results"]]


def test_project_filters_and_ordering(client_for):
    client = client_for("admin")
    research = names(client, "projects/?department=research")
    assert research and set(research) == set(
        Project.objects.filter(department__slug="research").values_list("slug", flat=True))
    assert names(client, f"projects/?department={demo_ids()['research']}") == research
    slugs = names(client, "projects/?ordering=-slug")
    assert slugs == sorted(slugs, reverse=True)
    assert names(client, "projects/") == list(Project.objects.order_by("department__name", "name", "id")
                                              .values_list("slug", flat=True))
    assert call(client, "GET", "projects/?ordering=namespace").status_code == 400


def test_a_researcher_never_filters_projects_by_a_department_they_cannot_see(client_for):
    client = client_for("alice")
    assert set(names(client, "projects/?department=research")) == {"vision"}
    for value in ("data-science", demo_ids()["data_science"], "²", "1e20"):
        response = call(client, "GET", f"projects/?department={value}")
        assert response.status_code == 400 and response.json() == {"department": [INVALID_CHOICE]}


def test_quota_filters_and_ordering(client_for):
    client = client_for("admin")
    ids = demo_ids()
    by_slug = names(client, "quotas/?node_pool=h100")
    assert by_slug and by_slug == names(client, f"quotas/?node_pool={ids['pool_h100']}")
    rows = call(client, "GET", "quotas/?ordering=-deserved&limit=1000").json()["results"]
    deserved = [row["deserved"] for row in rows]
    assert deserved == sorted(deserved, reverse=True)
    assert call(client, "GET", "quotas/?ordering=department__slug").status_code == 400
    assert call(client, "GET", "quotas/?node_pool=nope").json() == {"node_pool": [INVALID_CHOICE]}


def test_a_researchers_quota_filters_never_reach_another_department(client_for):
    client = client_for("carol")
    visible = call(client, "GET", "quotas/?limit=1000").json()["results"]
    data_science = set(Project.objects.filter(department__slug="data-science").values_list("pk", flat=True))
    assert visible and {row["project"] for row in visible if row["project"]} <= data_science
    for name, value in (("project", "vision"), ("department", "research")):
        response = call(client, "GET", f"quotas/?{name}={value}")
        assert response.status_code == 400 and response.json() == {name: [INVALID_CHOICE]}
