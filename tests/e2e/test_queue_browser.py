"""Browser: alice's journey through the queue. She submits from the form while Vision's H100 limit is full, sees her
workload's position, and sees it admitted without reloading the page.

Beside Django's live server run an in-process kubesim (manual clock), the real watcher in threads, and the submit
task (applied from the test after the form post, as a worker would run it).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def submit_holder(kubesim, name: str):
    """A 4-GPU preemptible training run of alice's, submitted by the service and the real submit task."""
    from django.contrib.auth import get_user_model

    from apps.org.models import NodePool, Project
    from apps.workloads import services
    from apps.workloads.models import Kind
    from worker import tasks

    workload = services.workload_submit(
        actor=get_user_model().objects.get(username="alice"), project=Project.objects.get(slug="vision"),
        kind=Kind.TRAINING, name=name, image="pytorch/pytorch:2.4.0", command=["sleep", "60"],
        node_pool=NodePool.objects.get(slug="h100"), gpus=4, model_label="resnet", data_class="public")
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    kubesim.advance(1)
    return workload


def test_alice_sees_her_position_then_the_admission_without_reloading(kubesim, live_cluster, login):
    from apps.workloads.models import Status, Workload
    from tests.worker.conftest import wait_for
    from worker import tasks

    # Vision may hold 8 H100 units: two 4-unit runs fill it.
    holders = [submit_holder(kubesim, f"holder-{i}") for i in range(2)]
    wait_for(lambda: all(Workload.objects.get(pk=w.pk).status == Status.RUNNING for w in holders))

    page = login("alice")
    page.goto("/workloads/submit/training/")
    page.select_option("#id_node_pool", label="H100 80GB (h100)")
    page.fill("#id_gpus", "4")
    page.fill("#id_name", "my-run")
    page.fill("#id_image", "pytorch/pytorch:2.4.0")
    page.fill("#id_command", "sleep 300")
    page.fill("#id_model_label", "resnet50")
    page.fill("#id_data_class", "public")
    page.click("button[type=submit] >> text=Submit training")
    page.wait_for_url(re.compile(r"/workloads/\d+/$"))
    mine = Workload.objects.get(name="my-run")
    assert tasks.workload_submit.apply(args=[mine.pk]).get() == "submitted"

    # The page polls: the position and the reason appear without a reload.
    live = page.locator("#workload-live")
    expect(live).to_contain_text("#1 in elastic-h100", timeout=30_000)  # no eval (wait_for_function): CSP
    text = live.inner_text()
    assert "Queued" in text and "You are next in line." in text and "Waiting for 4 x H100 80GB" in text
    url = page.url

    # The holders finish on the emulated clock; Kueue admits alice's run and the page follows.
    kubesim.advance(61)
    wait_for(lambda: Workload.objects.get(pk=mine.pk).status in (Status.ADMITTED, Status.RUNNING))
    expect(page.locator("#workload-live .status-line")).to_contain_text(re.compile("Admitted|Running"),
                                                                         timeout=30_000)
    assert page.url == url
    text = live.inner_text()
    assert "#1 in elastic-h100" not in text and "proj-vision-h100-elastic" in text
    assert live.locator(".timeline li[data-to=admitted], .timeline li[data-to=running]").count() >= 1

    # Her list shows it too, with the runtime running.
    page.click("nav >> text=Workloads")
    row = page.locator(f"tr[data-workload='{mine.pk}']")
    assert row.get_attribute("data-status") in ("admitted", "running")
