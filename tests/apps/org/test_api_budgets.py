"""/api/v1/budgets/: who sets which budgets, every refusal a 400 naming its field (all at once), the department's cap
over its projects', audit rows, and that refusals change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from apps.core.models import AuditEvent
from apps.org.models import Budget
from tests.api_support import call, demo_ids


@pytest.fixture
def ids(demo) -> dict[str, int]:
    return demo_ids()


def state() -> tuple[list[tuple], int]:
    return list(Budget.objects.order_by("pk").values_list("pk", "amount", "thresholds", "version")), \
        AuditEvent.objects.count()


def refused(client: Any, method: str, path: str, body: dict[str, Any], status: int = 400) -> dict[str, Any]:
    before = state()
    response = call(client, method, path, body)
    assert response.status_code == status, response.content
    assert state() == before
    return response.json()


def test_a_lead_sets_a_project_budget_and_it_is_audited(client_for, ids):
    response = call(client_for("lead"), "POST", "budgets/", {
        "project": ids["vision"], "period": "month", "metric": "gpu_hours", "amount": "100",
        "thresholds": [50, 100], "on_exceed": "hold_preemptible"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["project"] == ids["vision"] and body["department"] is None
    assert body["thresholds"] == [50, 100] and body["held"] is False and body["version"] == 1
    event = AuditEvent.objects.get(action="budget.create")
    assert event.project_id == ids["vision"] and event.after["amount"] == "100"


def test_defaults_are_monthly_gpu_hours_notify_at_50_80_100(client_for, ids):
    body = call(client_for("deptadmin"), "POST", "budgets/", {"department": ids["research"], "amount": 500}).json()
    assert (body["period"], body["metric"], body["thresholds"], body["on_exceed"]) == (
        "month", "gpu_hours", [50, 80, 100], "notify")


def test_every_bad_field_is_named_at_once(client_for, ids):
    errors = refused(client_for("admin"), "POST", "budgets/", {
        "project": ids["vision"], "period": "year", "amount": "-1", "thresholds": [80, 50], "on_exceed": "panic"})
    assert set(errors) == {"period", "on_exceed"}  # shape first: the choices the API offers
    errors = refused(client_for("admin"), "POST", "budgets/", {
        "project": ids["vision"], "amount": "-1", "thresholds": [0, 50, 120]})
    assert errors["amount"] == ["Ensure this value is greater than or equal to 0."]
    assert errors["thresholds"] == ["Thresholds are percents from 1 to 100; 0, 120 is outside."]
    errors = refused(client_for("admin"), "POST", "budgets/", {
        "project": ids["vision"], "amount": "10", "thresholds": [80, 50, 50]})
    assert errors == {"thresholds": ["List the thresholds in rising order, each once (e.g. [50, 80, 100])."]}


def test_a_budget_needs_exactly_one_owner(client_for, ids):
    errors = refused(client_for("admin"), "POST", "budgets/", {"amount": "10"})
    assert errors == {"department": ["Give a department or a project."], "project": ["Give a department or a project."]}
    errors = refused(client_for("admin"), "POST", "budgets/", {
        "department": ids["research"], "project": ids["vision"], "amount": "10"})
    assert errors == {"non_field_errors": ["A budget belongs to exactly one department or project."]}


def test_the_department_caps_the_sum_of_its_projects(client_for, ids):
    admin = client_for("admin")
    assert call(admin, "POST", "budgets/", {"department": ids["research"], "amount": "100"}).status_code == 201
    assert call(admin, "POST", "budgets/", {"project": ids["vision"], "amount": "60"}).status_code == 201
    errors = refused(admin, "POST", "budgets/", {"project": ids["nlp"], "amount": "50"})
    assert errors == {"amount": [
        "Research's monthly GPU-hours budget is 100 and its other projects' budgets add up to 60, so this project's "
        "can be at most 40. Raise the department's budget first or lower another project's."]}
    department_budget = Budget.objects.get(department_id=ids["research"])
    errors = refused(admin, "PATCH", f"budgets/{department_budget.pk}/", {"amount": "59"})
    assert errors == {"amount": [
        "The department's projects' monthly GPU-hours budgets add up to 60; a department's budget caps theirs, so "
        "lower theirs before lowering the department's."]}
    # Another period or metric is another budget: no cap from the monthly one.
    assert call(admin, "POST", "budgets/", {"project": ids["nlp"], "amount": "500", "period": "quarter"}
                ).status_code == 201


def test_one_budget_per_scope_period_and_metric(client_for, ids):
    admin = client_for("admin")
    assert call(admin, "POST", "budgets/", {"project": ids["vision"], "amount": "1"}).status_code == 201
    errors = refused(admin, "POST", "budgets/", {"project": ids["vision"], "amount": "2"})
    assert "This project already has a budget of that kind for that period." in str(errors)


@pytest.mark.parametrize(("username", "owner", "status"), [
    ("alice", "vision", 403),  # researchers see budgets, never set them
    ("lead", "research", 403),  # a team lead sets project budgets only
    ("deptadmin", "production", 400),  # a department the user cannot see is not a choice
    ("deptadmin", "serving", 400),
])
def test_who_may_not_set_budgets(client_for, ids, username, owner, status):
    field = "project" if owner in {"vision", "serving"} else "department"
    refused(client_for(username), "POST", "budgets/", {field: ids[owner], "amount": "1"}, status=status)


def test_scoped_reads_filters_and_unseen_rows(client_for, ids):
    admin = client_for("admin")
    vision = call(admin, "POST", "budgets/", {"project": ids["vision"], "amount": "1"}).json()
    serving = call(admin, "POST", "budgets/", {"project": ids["serving"], "amount": "2", "metric": "cost"}).json()
    listed = call(client_for("alice"), "GET", "budgets/").json()["results"]
    assert [row["id"] for row in listed] == [vision["id"]]
    assert call(client_for("alice"), "GET", f"budgets/{serving['id']}/").status_code == 404
    assert call(client_for("alice"), "PATCH", f"budgets/{vision['id']}/", {"amount": "5"}).status_code == 403
    costs = call(admin, "GET", "budgets/?metric=cost").json()["results"]
    assert [row["id"] for row in costs] == [serving["id"]]
    assert call(admin, "GET", "budgets/?period=year").status_code == 400


def test_update_and_delete_are_audited(client_for, ids):
    lead = client_for("lead")
    budget = call(lead, "POST", "budgets/", {"project": ids["vision"], "amount": "10"}).json()
    changed = call(lead, "PATCH", f"budgets/{budget['id']}/", {"amount": "20", "thresholds": [90]}).json()
    assert changed["amount"] == "20.00" and changed["thresholds"] == [90] and changed["version"] == 2
    refused(lead, "PATCH", f"budgets/{budget['id']}/", {"project": ids["nlp"]})
    assert call(lead, "DELETE", f"budgets/{budget['id']}/").status_code == 204
    assert list(AuditEvent.objects.filter(object_type="budget").order_by("pk").values_list("action", flat=True)) == [
        "budget.create", "budget.update", "budget.delete"]


def test_a_raise_asks_the_sweep_to_judge_the_hold_and_turning_the_hold_off_releases_it_at_once(
        client_for, ids, django_capture_on_commit_callbacks):
    """Only the sweep counts what was spent (apps.usage): a raise keeps the hold and has that budget judged right
    after commit (tests/apps/usage/test_budgets.py follows the judgement); `notify` needs no count."""
    from django.utils import timezone

    from apps.core.models import Intent
    from apps.org import services
    from apps.org.models import budget_period
    from worker.tasks import budget_evaluate

    lead = client_for("lead")
    created = call(lead, "POST", "budgets/", {"project": ids["vision"], "amount": "10",
                                              "on_exceed": "hold_preemptible"}).json()
    budget = Budget.objects.get(pk=created["id"])
    start = budget_period("month", timezone.now())[0]
    assert services.budget_hold_set(budget=budget, period_start=start)
    assert not services.budget_hold_set(budget=budget, period_start=start)  # once
    assert call(lead, "GET", f"budgets/{budget.pk}/").json()["held"] is True
    before = Intent.objects.count()
    # Thresholds only: still held.
    version = Budget.objects.get(pk=budget.pk).version
    assert call(lead, "PATCH", f"budgets/{budget.pk}/", {"thresholds": [90], "version": version}).json()["held"]
    with django_capture_on_commit_callbacks() as callbacks:
        changed = call(lead, "PATCH", f"budgets/{budget.pk}/", {"amount": "20"}).json()
    assert changed["held"] is True and len(callbacks) == 1  # the budget's own sweep, sent after commit
    assert Intent.objects.count() == before
    budget_evaluate(budget.pk)  # what that task does: nothing spent this month, so no longer exceeded
    assert call(lead, "GET", f"budgets/{budget.pk}/").json()["held"] is False
    assert Intent.objects.count() == before + 1  # the Kueue sync is asked to lift the hold

    assert services.budget_hold_set(budget=Budget.objects.get(pk=budget.pk), period_start=start)
    changed = call(lead, "PATCH", f"budgets/{budget.pk}/", {"on_exceed": "notify"}).json()
    assert changed["held"] is False and Budget.objects.get(pk=budget.pk).held_period_start is None
    assert Intent.objects.count() == before + 3  # hold set, then lifted with the change itself
    assert list(AuditEvent.objects.filter(object_type="budget").values_list("action", flat=True).order_by("pk")) == [
        "budget.create", "budget.hold", "budget.update", "budget.update", "budget.release", "budget.hold",
        "budget.update"]
