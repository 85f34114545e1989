"""Browser: an admin builds a department with a project and a quota (meeting a refused over-subscription on the way),
and the team lead changes a weight inline and sees it saved (and a weight outside the bounds refused)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_admin_creates_a_department_and_a_project_with_a_quota(login):
    from apps.core.models import AuditEvent
    from apps.org.models import Quota

    page = login("admin")
    page.goto("/departments/new/")
    page.fill("#id_slug", "robotics")
    page.fill("#id_name", "Robotics")
    page.fill("#id_max_project_weight", "5")
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/departments/$"))
    assert "Department created." in page.inner_text(".messages")

    # Every pool is fully handed out: the live check refuses Robotics a share of h100, next to the cell.
    page.goto("/departments/robotics/quotas/")
    page.get_by_label("Robotics deserved on h100").fill("2")
    page.wait_for_selector("#quota-live .badge.bad")
    cell = page.locator("td[data-cell] .cell-errors").filter(has_text="h100 has 16 units")
    assert "other departments hold 16, so at most 0 can be given here" in cell.inner_text()
    # Saving anyway saves nothing and says so.
    page.click("text=Save all")
    page.wait_for_load_state()
    assert "Nothing was saved" in page.inner_text(".messages")
    assert not Quota.objects.filter(department__slug="robotics").exists()

    # A new pool gives room.
    page.goto("/pools/new/")
    page.fill("#id_slug", "b200")
    page.fill("#id_name", "B200")
    page.fill("#id_node_labels", "portal.gpu/pool=b200")
    page.fill("#id_capacity", "8")
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/pools/$"))

    page.goto("/departments/robotics/projects/new/")
    page.fill("#id_slug", "arms")
    page.fill("#id_name", "Arms")
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/departments/$"))
    assert "proj-arms" in page.inner_text("[data-project=arms]")

    page.goto("/departments/robotics/quotas/")
    page.get_by_label("Robotics deserved on b200").fill("4")
    page.get_by_label("Arms deserved on b200").fill("3")
    page.get_by_label("Arms limit on b200").fill("6")
    expect(page.locator("#quota-totals td[data-pool=b200]")).to_contain_text("3 / 4")  # no eval: CSP
    assert "All cells valid" in page.inner_text("#quota-live")
    page.click("text=Save all")
    page.wait_for_load_state()
    assert "Saved 2 quota cells of Robotics." in page.inner_text(".messages")
    arms = Quota.objects.get(project__slug="arms")
    assert (arms.deserved, arms.limit) == (3, 6)
    assert AuditEvent.objects.filter(action="quota.create", project__slug="arms").exists()


def test_team_lead_changes_a_weight_and_sees_it_saved(login):
    from apps.org.models import Quota

    page = login("lead")
    page.click("nav >> text=Weights")
    page.wait_for_url(re.compile(r"/weights/$"))
    field = page.get_by_label("Over-quota weight of Vision on h100")
    field.fill("3")
    field.press("Tab")
    row = page.locator("tr[data-project=vision]")
    row.locator(".saved").wait_for()
    assert Quota.objects.get(project__slug="vision", node_pool__slug="h100").over_quota_weight == 3

    field = page.get_by_label("Over-quota weight of Vision on h100")
    field.fill("50")
    field.press("Tab")
    row.locator(".errorlist").wait_for()
    assert "Choose a weight between 0 and 10, the bounds set for Research." in row.inner_text()
    assert Quota.objects.get(project__slug="vision", node_pool__slug="h100").over_quota_weight == 3
