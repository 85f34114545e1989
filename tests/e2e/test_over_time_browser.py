"""Browser: a team lead opens "Use over time" from the GPU-hours page and sees one chart per pool drawn by the
portal's own uPlot (a canvas with one point per day of the default 30), the top consumers, and the fairness table;
switching to a week by hour redraws with 168 points (no CSP violations: the login fixture fails on them)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_a_lead_sees_the_use_over_time_charts_and_the_fairness_table(login):
    from django.utils import timezone

    from tests.apps.usage.reports_support import interval, workload
    from tests.conftest import demo_users

    now = timezone.now()
    interval(workload(demo_users()["alice"], gpus=2), (now - timedelta(hours=5)).isoformat(),
             (now - timedelta(hours=1)).isoformat())

    page = login("lead")
    page.click("nav >> text=GPU-hours")
    page.click("main >> text=Use over time")
    page.wait_for_url(re.compile(r"/usage/over-time/$"))
    chart = page.locator("section[data-pool='h100'] [data-over-time-chart]")
    expect(chart).to_have_attribute("data-drawn", "30")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(page.locator("[data-top-consumers]")).to_contain_text("Vision")
    expect(page.locator("[data-fairness-row='vision/h100']")).to_contain_text("66.7%")

    today = timezone.localdate()
    page.fill("#id_start", (today - timedelta(days=6)).isoformat())
    page.fill("#id_end", today.isoformat())
    page.select_option("#id_granularity", "hour")
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r"granularity=hour"))
    expect(page.locator("section[data-pool='h100'] [data-over-time-chart]")).to_have_attribute("data-drawn", "168")
