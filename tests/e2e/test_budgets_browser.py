"""Browser: a team lead opens Budgets from the navigation, sets a budget for a project with a bad threshold list and a
negative amount (every mistake shown at once, nothing saved), fixes it, and sees it listed with its figures, its bar
drawn by the portal's script (no inline styles: the login fixture fails on CSP violations)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_a_lead_sets_a_budget_after_fixing_every_mistake_and_sees_its_figures(login):
    from django.utils import timezone

    from apps.core.models import AuditEvent
    from apps.org.models import Budget, Project, budget_period
    from tests.apps.usage.reports_support import interval, workload
    from tests.conftest import demo_users

    # Vision holds 2 cards since up to an hour ago, within this month.
    now = timezone.now()
    since = max(budget_period("month", now)[0], now - timedelta(hours=1))
    interval(workload(demo_users()["alice"], gpus=2), since.isoformat(), None)

    page = login("lead")
    page.click("nav >> text=Budgets")
    page.wait_for_url(re.compile(r"/usage/budgets/$"))
    expect(page.locator("main")).to_contain_text("No budgets yet.")
    page.click("text=New budget")
    page.wait_for_url(re.compile(r"/usage/budgets/new/$"))

    vision = Project.objects.get(slug="vision")
    page.select_option("#id_project", str(vision.pk))
    page.fill("#id_amount", "-1")
    page.fill("#id_thresholds", "120, 80, 80")
    page.click("main button[type=submit]")
    page.wait_for_load_state()
    assert "/usage/budgets/new/" in page.url
    errors = page.locator(".field-error .errorlist")
    expect(errors).to_have_count(2)
    thresholds = page.inner_text("#id_thresholds_errors")
    assert "120 is outside" in thresholds and "rising order" in thresholds
    assert "greater than or equal to 0" in page.inner_text("#id_amount_errors")
    assert not Budget.objects.exists()
    # What was typed stays, to be corrected.
    assert page.input_value("#id_thresholds") == "120, 80, 80"

    page.fill("#id_amount", "10")
    page.fill("#id_thresholds", "50, 80, 100")
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/usage/budgets/$"))
    assert "Budget created." in page.inner_text(".messages")
    budget = Budget.objects.get(project=vision)
    assert AuditEvent.objects.filter(action="budget.create", object_id=str(budget.pk)).exists()

    row = page.locator(f"tr[data-budget='{budget.pk}']")
    expect(row).to_contain_text("Research / Vision")
    spent = float(row.locator("[data-figure=spent]").inner_text().split(" / ")[0])
    assert spent > 0 and "/ 10 GPU-hours" in row.locator("[data-figure=spent]").inner_text()
    assert float(row.locator("[data-figure=burn]").inner_text().split(" ")[0]) > 0
    # The running cards go on to the end of the month: far beyond 10 GPU-hours.
    assert float(row.locator("[data-figure=projected]").inner_text().split(" ")[0]) > spent
    expect(row.locator("[data-figure=thresholds] .badge")).to_have_count(3)
    # The bar's widths come from data attributes through portal.js: the spent part has a width.
    used = row.locator(".budget-bar .qbar-used")
    page.wait_for_function("el => el.getBoundingClientRect().width > 0", arg=used.element_handle())
    assert row.locator(".budget-bar").get_attribute("aria-label").startswith(f"{spent:g} of 10 GPU-hours spent")
