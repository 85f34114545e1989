"""Browser: the workload table's column chooser is remembered across reloads and applies to polled tables, a
heading sorts, ticked rows stop together; the quota history chart is drawn by the kept uPlot under the portal's
Content-Security-Policy (the `login` fixture fails the test on any violation)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _submit(username: str, name: str, gpus: int = 1):
    from django.contrib.auth import get_user_model

    from apps.org.models import NodePool, Project
    from apps.workloads import services

    return services.workload_submit(
        actor=get_user_model().objects.get(username=username),
        project=Project.objects.get(slug="vision"),
        node_pool=NodePool.objects.get(slug="h100"),
        kind="training",
        name=name,
        image="pytorch/pytorch:2.4.0",
        gpus=gpus,
        model_label="resnet",
        data_class="public",
        command=["sleep", "60"],
    )


def test_the_column_chooser_is_remembered_and_headings_sort(login):
    small, large = _submit("alice", "small", gpus=1), _submit("alice", "large", gpus=3)
    page = login("alice")
    page.goto("/workloads/")
    department_cells = page.locator('table[data-columns-table="workloads"] [data-col="department"]')
    expect(department_cells.first).to_be_visible()
    expect(page.locator('table [data-col="pool"]').first).to_be_hidden()  # hidden until chosen
    page.locator("details.column-chooser summary").click()
    page.locator('[data-column-toggle="department"]').uncheck()
    page.locator('[data-column-toggle="pool"]').check()
    expect(department_cells.first).to_be_hidden()
    expect(page.locator('table [data-col="pool"]').first).to_be_visible()

    page.reload()
    expect(page.locator('table[data-columns-table="workloads"] [data-col="department"]').first).to_be_hidden()
    expect(page.locator('table [data-col="pool"]').first).to_be_visible()
    expect(page.locator('[data-column-toggle="department"]')).not_to_be_checked()

    # The poll swaps the table in again: the choice still holds.
    with page.expect_response(
        lambda response: "/workloads/" in response.url and response.request.headers.get("hx-request") == "true",
        timeout=15_000,
    ):
        pass
    page.wait_for_timeout(200)
    expect(page.locator('table[data-columns-table="workloads"] [data-col="department"]').first).to_be_hidden()

    page.locator('a[data-sort="gpus_requested"]').click()
    page.wait_for_url("**ordering=gpus**")
    order = page.locator("tr[data-workload]").evaluate_all("rows => rows.map(r => r.dataset.workload)")
    assert order == [str(small.pk), str(large.pk)]
    page.locator('a[data-sort="gpus_requested"]').click()
    page.wait_for_url("**ordering=-gpus**")
    order = page.locator("tr[data-workload]").evaluate_all("rows => rows.map(r => r.dataset.workload)")
    assert order == [str(large.pk), str(small.pk)]

    page.locator("details.column-chooser summary").click()
    page.locator('[data-column-toggle="department"]').check()
    expect(page.locator('table[data-columns-table="workloads"] [data-col="department"]').first).to_be_visible()


def test_ticked_rows_stop_together_after_one_question(login):
    from apps.workloads.models import Status, Workload

    first, second, kept = _submit("alice", "one"), _submit("alice", "two"), _submit("alice", "three")
    page = login("alice")
    page.goto("/workloads/")
    page.locator(f'input[name="ids"][value="{first.pk}"]').check()
    page.locator(f'input[name="ids"][value="{second.pk}"]').check()
    page.locator("button[data-bulk-stop]").click()
    expect(page.locator("h1")).to_have_text("Stop 2 workloads?")
    page.get_by_role("button", name="Stop 2").click()
    expect(page.locator(".message")).to_contain_text("Stopping 2 workloads")
    assert set(Workload.objects.filter(status=Status.STOPPING).values_list("pk", flat=True)) == {first.pk, second.pk}
    assert Workload.objects.get(pk=kept.pk).status == Status.SUBMITTING


def test_the_quota_history_chart_is_drawn_with_the_kept_library(login):
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from tests.apps.usage.reports_support import interval, workload

    now = timezone.now()
    run = workload(get_user_model().objects.get(username="alice"), name="held", gpus=6)
    interval(
        run,
        (now - timedelta(hours=3)).strftime("%Y-%m-%d %H:%M"),
        (now - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M"),
    )
    page = login("alice")
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto("/usage/quota/")
    page.locator('a[data-history-link][href*="project=vision&pool=h100"]').click()
    page.wait_for_url("**/usage/quota/history/**")
    page.select_option("#id_span", "day")
    page.locator("form[data-history-form] button[type=submit]").click()
    chart = page.locator("#quota-history-chart")
    expect(chart).to_have_attribute("data-drawn", "96")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart.locator(".u-legend")).to_contain_text("Borrowed")
    expect(chart.locator(".u-legend")).to_contain_text("Deserved")
    box = chart.locator("canvas").bounding_box()
    assert box and box["width"] >= 200 and box["height"] >= 200
    assert any(url.endswith("/static/vendor/uplot/uPlot.iife.min.js") for url in requested)
    live = page.context.pages[0].url.split("/usage/")[0]
    assert all(url.startswith(live) or url.startswith("data:") for url in requested), requested
