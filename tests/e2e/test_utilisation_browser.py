"""Browser: the workload page's utilisation chart (an inline SVG under the portal's Content-Security-Policy, which
the login fixture checks), the idle flag, the admins' held-but-idle list, and the "not available" message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.e2e.test_ux_browser import alice_workload

pytestmark = pytest.mark.browser


def measured_idle_workload():
    from apps.workloads import services
    from apps.workloads.models import IdlePolicy, Status, Workload

    workload = alice_workload(name="idle-run")
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)
    workload.refresh_from_db()
    policy = IdlePolicy.objects.update_or_create(pk=1, defaults={"threshold_percent": 5, "idle_seconds": 120})[0]
    now = datetime.now(UTC)
    values = [90.0, 85.0, 70.0, 3.0, 1.0, 0.0, 0.0, 0.0]
    samples = [(now - timedelta(minutes=len(values) - i), value, 2000.0 + 100 * value)
               for i, value in enumerate(values)]
    services.workload_utilisation_record(workload=workload, samples=samples, policy=policy, now=now)
    return workload


def test_the_chart_and_the_idle_flag_render_and_admins_see_the_list(login, settings):
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"  # configured; the page never asks it
    workload = measured_idle_workload()
    page = login("alice")
    page.goto(f"/workloads/{workload.pk}/")
    panel = page.locator("#utilisation")
    expect(panel.locator("svg.sparkline polyline")).to_have_count(2)
    expect(panel.locator('[data-utilisation="idle"]')).to_contain_text("Held but idle")
    expect(panel.locator('[data-utilisation="mean"]')).to_have_text("31%")
    admin = login("admin")
    admin.goto("/")
    admin.click("nav.nav summary >> text=Cluster")
    admin.click("nav.nav a >> text=Held but idle")
    expect(admin.locator("#held-idle")).to_contain_text("idle-run")


def test_without_prometheus_the_page_says_so(login, settings):
    settings.PROMETHEUS_URL = ""
    workload = alice_workload(name="unmeasured")
    page = login("alice")
    page.goto(f"/workloads/{workload.pk}/")
    expect(page.locator('#utilisation [data-utilisation="unavailable"]')).to_have_text(
        "Utilisation not available (no Prometheus configured).")
