"""The audit log page: scoped like access.audit_events_for, filtered, paginated, with a compact diff."""

from __future__ import annotations

import datetime as dt

from django.urls import reverse
from django.utils import timezone

from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import Department, Project, Quota

URL = reverse("org:audit")


def actions_in(response) -> list[str]:
    return [event.action for event in response.context["page"]]


def test_department_admin_sees_only_their_departments_rows(page_client):
    page = page_client("deptadmin").get(URL).context["page"]
    assert page.paginator.count > 0
    assert {event.department.slug for event in page.paginator.object_list} == {"research"}
    admin_count = page_client("admin").get(URL).context["page"].paginator.count
    assert admin_count == AuditEvent.objects.count() > page.paginator.count


def test_filters(page_client, users):
    client = page_client("admin")
    by_action = client.get(URL, {"action": "quota.create"})
    assert set(actions_in(by_action)) == {"quota.create"}
    by_type = client.get(URL, {"object_type": "rolebinding"})
    assert set(actions_in(by_type)) == {"role_binding.create"}
    by_department = client.get(URL, {"department": Department.objects.get(slug="production").pk})
    assert {e.department.slug for e in by_department.context["page"]} == {"production"}
    quota = Quota.objects.get(project__slug="vision", node_pool__slug="h100")
    services.quota_update(actor=users["lead"], quota=quota, over_quota_weight=3)
    by_actor = client.get(URL, {"actor": "lead"})
    assert actions_in(by_actor) == ["quota.weight"]
    today = timezone.now().date()
    assert client.get(URL, {"since": today.isoformat()}).context["page"].paginator.count == AuditEvent.objects.count()
    assert client.get(URL, {"until": (today - dt.timedelta(days=1)).isoformat()}).context["page"].paginator.count == 0
    AuditEvent.objects.filter(actor=users["lead"]).update(at=timezone.now() - dt.timedelta(days=3))
    window = client.get(URL, {"since": (today - dt.timedelta(days=4)).isoformat(),
                              "until": (today - dt.timedelta(days=2)).isoformat()})
    assert actions_in(window) == ["quota.weight"]


def test_department_filter_offers_only_audited_departments(page_client):
    form = page_client("deptadmin").get(URL).context["form"]
    assert [d.slug for d in form.fields["department"].queryset] == ["research"]
    production = Department.objects.get(slug="production").pk
    response = page_client("deptadmin").get(URL, {"department": production})
    assert "department" in response.context["form"].errors


def test_bad_date_range_is_explained(page_client):
    response = page_client("admin").get(URL, {"since": "2026-02-01", "until": "2026-01-01"})
    assert "The end date is before the start date." in response.content.decode()


def test_pagination_keeps_filters(page_client, users):
    quota = Quota.objects.get(project__slug="vision", node_pool__slug="h100")
    for weight in range(1, 62):
        services.quota_update(actor=users["admin"], quota=quota, over_quota_weight=weight % 10 + 1)
    client = page_client("admin")
    first = client.get(URL, {"action": "quota.weight"})
    assert first.context["page"].paginator.num_pages == 2
    html = first.content.decode()
    assert "?action=quota.weight&amp;page=2" in html
    second = client.get(URL, {"action": "quota.weight", "page": 2})
    assert len(second.context["page"]) == second.context["page"].paginator.count - 50 > 0


def test_diff_shows_only_changed_fields(page_client, users):
    vision = Project.objects.get(slug="vision")
    services.project_update(actor=users["admin"], project=vision, name="Vision 2")
    html = page_client("admin").get(URL, {"action": "project.update"}).content.decode()
    row = html[html.index('data-action="project.update"'):]
    row = row[:row.index("</tr>")]
    assert "<del>Vision</del> → <ins>Vision 2</ins>" in row
    assert "namespace" not in row


def test_htmx_request_gets_the_table_partial(page_client):
    response = page_client("admin").get(URL, {"action": "department"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert '<div id="audit-table">' in html and "<html" not in html
    assert set(actions_in(response)) == {"department.create"}


def test_query_count_does_not_grow_with_rows(page_client, users, django_assert_num_queries):
    client = page_client("admin")
    # session, user, grants, the department filter's choices, the count, the page (actor, scope joined), and one
    # per kind of row the page's changes name (users, projects, departments, node pools, priority classes)
    with django_assert_num_queries(11):
        client.get(URL)
    quota = Quota.objects.get(project__slug="vision", node_pool__slug="h100")
    for weight in range(2, 12):
        services.quota_update(actor=users["lead"], quota=quota, over_quota_weight=weight % 10)
    with django_assert_num_queries(11):
        client.get(URL)


def test_the_log_names_rows_instead_of_ids(page_client, users):
    from apps.accounts.models import RoleBinding
    from apps.accounts.services import role_binding_create, role_binding_delete
    from apps.org.models import PriorityClass

    vision = Project.objects.get(slug="vision")
    old_class = vision.default_priority_class
    new_class = PriorityClass.objects.exclude(pk=vision.default_priority_class_id).order_by("name").first()
    services.project_update(actor=users["lead"], project=vision, default_priority_class=new_class)
    binding = role_binding_create(actor=users["admin"], role="viewer", user=users["carol"], project=vision)
    role_binding_delete(actor=users["admin"], binding=RoleBinding.objects.get(pk=binding.pk))
    html = page_client("admin").get(URL).content.decode()
    moved = html[html.index('data-action="project.default_priority_class"'):]
    moved = moved[:moved.index("</tr>")]
    old_name = old_class.name if old_class else "∅"
    assert f"<del>{old_name}</del> → <ins>{new_class.name}</ins>" in moved and "priority_class_id" not in moved
    assert "Research / Vision" in moved  # the scope column reads as names too
    removed = html[html.index('data-action="role_binding.delete"'):]
    removed = removed[:removed.index("</tr>")]
    assert "<del>carol</del>" in removed and "<del>Vision</del>" in removed and "user_id" not in removed


def test_a_row_deleted_since_reads_as_deleted(page_client, users):
    from apps.core.audit import audit_record

    vision = Project.objects.get(slug="vision")
    audit_record(actor=users["admin"], action="project.update", obj=vision, before={"department_id": 999_999},
                 after={"department_id": vision.department_id})
    html = page_client("admin").get(URL, {"action": "project.update"}).content.decode()
    assert "<del>#999999 (deleted)</del> → <ins>Research</ins>" in html


def test_names_cost_one_query_per_kind_of_row_not_per_event(page_client, users):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.accounts.services import role_binding_create

    client = page_client("admin")
    client.get(URL)  # warm the session

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            client.get(URL)
        return len(queries)

    eve = users["carol"]
    role_binding_create(actor=users["admin"], role="viewer", user=eve, project=Project.objects.get(slug="vision"))
    before = count()
    for slug in ("nlp", "serving", "etl", "analytics", "forecasting"):
        role_binding_create(actor=users["admin"], role="viewer", user=eve, project=Project.objects.get(slug=slug))
    assert count() == before
