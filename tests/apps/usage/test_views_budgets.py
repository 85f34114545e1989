"""The budgets page: who sees it and which budgets (404 for the rest, 403 for those seen but not theirs to change),
forms naming every mistake at once, create / edit / delete through the services with their audit rows, and each
budget's figures from the ledger (spent of the amount, burn rate, projection, thresholds crossed, hold)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.core.models import AuditEvent
from apps.org.models import Budget, BudgetCrossing, Department, Project

from .reports_support import interval, workload

pytestmark = pytest.mark.django_db
PAGE = reverse("usage:budgets")
NEW = reverse("usage:budget_create")


def edit(budget: Budget) -> str:
    return reverse("usage:budget_edit", args=[budget.pk])


def delete(budget: Budget) -> str:
    return reverse("usage:budget_delete", args=[budget.pk])


def budget(owner: str, *, amount: str = "100", **fields) -> Budget:
    scope = {"project": Project.objects.get(slug=owner)} if Project.objects.filter(slug=owner).exists() else {
        "department": Department.objects.get(slug=owner)}
    return Budget.objects.create(amount=Decimal(amount), **scope, **fields)


def payload(**overrides) -> dict[str, str]:
    data = {"department": "", "project": "", "period": "month", "metric": "gpu_hours", "amount": "100",
            "thresholds": "50, 80, 100", "on_exceed": "notify"}
    data.update(overrides)
    return data


def errors_of(response) -> dict[str, list[str]]:
    return {name: list(messages) for name, messages in response.context["form"].errors.items()}


def state() -> tuple[list[tuple], int]:
    return list(Budget.objects.order_by("pk").values_list("pk", "amount", "thresholds", "version")), \
        AuditEvent.objects.count()


@pytest.mark.parametrize(("username", "status"), [
    ("admin", 200), ("deptadmin", 200), ("lead", 200),
    ("alice", 403), ("bob", 403), ("carol", 403), ("viewer", 403)])
def test_the_page_and_the_form_are_for_those_who_set_budgets(page_client, username, status):
    client = page_client(username)
    assert client.get(PAGE).status_code == status
    assert client.get(NEW).status_code == status
    nav = client.get(reverse("usage:reports")).content.decode()
    assert (f'href="{PAGE}"' in nav) == (status == 200)


def test_anonymous_visitors_are_sent_to_sign_in(client):
    response = client.get(PAGE)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_each_sees_the_budgets_of_their_scopes_and_changes_only_theirs(page_client):
    research, vision, forecasting = budget("research", amount="500"), budget("vision"), budget("forecasting")
    listed = {name: {int(pk) for pk in _listed(page_client(name))} for name in ("admin", "deptadmin", "lead")}
    assert listed == {"admin": {research.pk, vision.pk, forecasting.pk}, "deptadmin": {research.pk, vision.pk},
                      "lead": {research.pk, vision.pk}}
    lead, deptadmin = page_client("lead"), page_client("deptadmin")
    # Another department's budget does not exist for them; the department's own is the lead's to read only.
    for url in (edit(forecasting), delete(forecasting)):
        assert lead.get(url).status_code == 404 and deptadmin.get(url).status_code == 404
        assert lead.post(url).status_code == 404
    assert lead.get(edit(research)).status_code == 403 and lead.post(delete(research)).status_code == 403
    assert deptadmin.get(edit(research)).status_code == 200
    assert lead.get(edit(vision)).status_code == 200
    content = lead.get(PAGE).content.decode()
    assert edit(vision) in content and edit(research) not in content
    assert Budget.objects.count() == 3


def _listed(client) -> list[str]:
    import re

    return re.findall(r'data-budget="(\d+)"', client.get(PAGE).content.decode())


def test_the_form_names_every_mistake_at_once_and_saves_nothing(page_client):
    before = state()
    response = page_client("lead").post(NEW, payload(amount="-5", thresholds="120, 80, 80", period="week"))
    assert response.status_code == 200
    errors = errors_of(response)
    assert set(errors) == {"department", "project", "period", "amount", "thresholds"}
    assert any("1 to 100; 120 is outside" in message for message in errors["thresholds"])
    assert any("rising order" in message for message in errors["thresholds"])
    assert "Choose a department or a project." in errors["department"]
    content = response.content.decode()
    assert "120 is outside" in content and "rising order" in content and "greater than or equal to 0" in content
    assert state() == before


@pytest.mark.parametrize(("thresholds", "message"), [
    ("50, eighty", "eighty is not one"),
    ("50 80 \u0661\u0660\u0660", "is not one"),  # Arabic-Indic digits are refused, not read as 100
    (", ".join(str(n) for n in range(1, 12)), "at most 10 thresholds"),
])
def test_thresholds_that_are_no_list_of_percents_are_refused(page_client, thresholds, message):
    vision = Project.objects.get(slug="vision")
    response = page_client("lead").post(NEW, payload(project=str(vision.pk), thresholds=thresholds))
    assert any(message in text for text in errors_of(response)["thresholds"])
    assert not Budget.objects.exists()


def test_a_lead_may_not_set_the_department_budget_nor_another_departments(page_client):
    lead = page_client("lead")
    research, forecasting = Department.objects.get(slug="research"), Project.objects.get(slug="forecasting")
    errors = errors_of(lead.post(NEW, payload(department=str(research.pk))))
    assert "department" in errors and "valid choice" in errors["department"][0]
    errors = errors_of(lead.post(NEW, payload(project=str(forecasting.pk))))
    assert "project" in errors and "valid choice" in errors["project"][0]
    assert not Budget.objects.exists()


def test_create_edit_and_delete_go_through_the_services_with_audit_rows(page_client, users):
    lead = page_client("lead")
    vision = Project.objects.get(slug="vision")
    response = lead.post(NEW, payload(project=str(vision.pk), amount="120.5", thresholds="25 75,100",
                                      on_exceed="hold_preemptible"), follow=True)
    assert "Budget created." in response.content.decode()
    created = Budget.objects.get(project=vision)
    assert (created.amount, created.thresholds, created.on_exceed) == (Decimal("120.5"), [25, 75, 100],
                                                                       "hold_preemptible")
    event = AuditEvent.objects.get(action="budget.create", object_id=str(created.pk))
    assert event.actor == users["lead"] and event.project_id == vision.pk

    form = lead.get(edit(created)).context["form"]
    assert form.initial["thresholds"] == "25, 75, 100" and form.fields["project"].disabled
    response = lead.post(edit(created), payload(project="", amount="200", thresholds="90", period="quarter",
                                                version=str(created.version)), follow=True)
    assert "Budget saved." in response.content.decode()
    created.refresh_from_db()
    assert (created.amount, created.thresholds, created.period, created.project_id) == (
        Decimal("200"), [90], "quarter", vision.pk)  # the owner is fixed whatever the form sends
    update = AuditEvent.objects.get(action="budget.update", object_id=str(created.pk))
    assert update.before["amount"] != update.after["amount"]

    # A form read before that change saves nothing over it.
    stale = lead.post(edit(created), payload(amount="300", version="1"))
    assert stale.status_code == 200 and stale.context["form"].non_field_errors()
    assert Budget.objects.get(pk=created.pk).amount == Decimal("200")

    confirm = lead.get(delete(created))
    assert confirm.status_code == 200 and "Delete" in confirm.content.decode()
    assert "Budget deleted." in lead.post(delete(created), follow=True).content.decode()
    assert not Budget.objects.filter(pk=created.pk).exists()
    assert AuditEvent.objects.filter(action="budget.delete", object_id=str(created.pk), actor=users["lead"]).exists()


def test_the_departments_cap_is_named_on_the_amount(page_client):
    budget("research", amount="100")
    budget("nlp", amount="70")
    before = state()
    vision = Project.objects.get(slug="vision")
    errors = errors_of(page_client("deptadmin").post(NEW, payload(project=str(vision.pk), amount="40")))
    assert list(errors) == ["amount"] and "can be at most 30" in errors["amount"][0]
    assert state() == before
    errors = errors_of(page_client("deptadmin").post(NEW, payload(project=str(vision.pk), department=str(
        Department.objects.get(slug="research").pk))))
    assert errors == {"project": ["Choose a department or a project, not both."]}


def test_each_budget_shows_its_figures(page_client, users):
    now = timezone.now()
    vision = budget("vision", amount="10", thresholds=[10, 50, 100], on_exceed="hold_preemptible")
    start = vision.current_period(now)[0]
    # Two cards for a stretch of this period that has passed, and one card running since.
    begin = max(start, now - timedelta(hours=4))
    stretch = (now - begin) / 2
    interval(workload(users["alice"], gpus=2), begin.isoformat(), (begin + stretch).isoformat())
    running = workload(users["alice"], gpus=1)
    interval(running, (begin + stretch).isoformat(), None)
    BudgetCrossing.objects.create(budget=vision, period_start=start, threshold=10, spent=Decimal(1))
    BudgetCrossing.objects.create(budget=vision, period_start=start - timedelta(days=100), threshold=50,
                                  spent=Decimal(5))  # another period's
    Budget.objects.filter(pk=vision.pk).update(held_period_start=start)
    nlp = budget("nlp", amount="5")

    content = page_client("lead").get(PAGE).content.decode()
    row = content.split(f'data-budget="{vision.pk}"')[1].split("</tr>")[0]
    spent = 2 * stretch.total_seconds() / 3600 + (timezone.now() - begin - stretch).total_seconds() / 3600
    assert f"{Decimal(repr(spent)).quantize(Decimal('0.1')).normalize():f} / 10 GPU-hours" in row
    days = (now - start).total_seconds() / 86400
    shown_burn = float(row.split('data-figure="burn">')[1].split(" ")[0])
    assert shown_burn == pytest.approx(spent / max(days, 1 / 1440), rel=0.05, abs=0.1)
    end = vision.current_period(now)[1]
    projected = float(row.split('data-figure="projected">')[1].split(" ")[0])
    assert projected == pytest.approx(spent + (end - now).total_seconds() / 3600, rel=0.01)
    assert "10 % crossed" in row and "50 % crossed" not in row and ">50 %<" in row
    assert "holding new preemptible work" in row and 'class="qbar budget-bar"' in row
    nlp_row = content.split(f'data-budget="{nlp.pk}"')[1].split("</tr>")[0]
    assert "0 / 5 GPU-hours" in nlp_row and "holding" not in nlp_row


def test_the_page_makes_as_many_queries_for_many_budgets_as_for_one(page_client, users):
    client = page_client("admin")
    budget("vision", metric="cost")
    interval(workload(users["alice"]), (timezone.now() - timedelta(minutes=30)).isoformat(), None)
    client.get(PAGE)  # warm: the session's first use

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(PAGE).status_code == 200
        return len(queries)

    one = count()
    for slug in ("nlp", "forecasting", "research", "production", "etl"):
        for metric in ("gpu_hours", "cost"):
            budget(slug, amount="100000", metric=metric)
    interval(workload(users["bob"], project="nlp"), (timezone.now() - timedelta(minutes=20)).isoformat(), None)
    assert count() == one
