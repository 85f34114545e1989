"""Browser: alice submits a training job and a notebook from the forms and sees both in her list.

The submit task is enqueued after commit; no worker runs here, so the rows stay `submitting`, which is all the list
needs to show. The live check (htmx) runs while she fills the forms and must not disturb what she types.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def fill_common(page, *, name: str, image: str, model: str) -> None:
    page.fill("#id_name", name)
    page.fill("#id_image", image)
    page.fill("#id_model_label", model)
    page.fill("#id_data_class", "public")


def test_alice_submits_a_training_job_and_a_notebook_and_sees_both_listed(login):
    from apps.workloads.models import Kind, Workload

    page = login("alice")
    page.click("nav >> text=Submit")
    page.wait_for_url(re.compile(r"/workloads/submit/training/$"))
    assert page.locator("#pool-panel").inner_text().startswith("Vision on")

    # A live refusal first: more GPUs than Vision's limit on the pool shows next to the field, nothing is saved.
    page.select_option("#id_node_pool", label="H100 80GB (h100)")
    page.fill("#id_gpus", "9")
    page.locator("#id_gpus").blur()
    page.wait_for_selector("#errors-gpus .errorlist")
    assert "may use at most 8" in page.inner_text("#errors-gpus")
    assert "8 units" in page.inner_text("#pool-panel [data-fact=limit]")
    assert Workload.objects.count() == 0

    page.fill("#id_gpus", "2")
    fill_common(page, name="resnet-train", image="pytorch/pytorch:2.4.0", model="resnet50")
    page.fill("#id_command", "python train.py")
    page.fill("#id_env", "WANDB_MODE=offline")
    page.locator("#id_env").blur()
    page.wait_for_selector("#live-status .saved")
    assert page.inner_text("#errors-gpus").strip() == ""
    page.click("button[type=submit] >> text=Submit training")
    page.wait_for_url(re.compile(r"/workloads/\d+/$"))
    assert "Submitted resnet-train" in page.inner_text(".messages")
    assert "Submitting" in page.inner_text("#workload-live")

    page.goto("/workloads/submit/notebook/")
    page.select_option("#id_node_pool", label="L40S time-sliced (l40s-shared)")
    fill_common(page, name="explore", image="jupyter/base-notebook:latest", model="eda")
    page.fill("#id_notebook_idle_timeout_minutes", "60")
    # Choosing a non-preemptible priority class clears the preemptible box (the class's default).
    assert page.is_checked("#id_preemptible")
    page.select_option("#id_priority_class", label="build (100, non-preemptible)")
    expect(page.locator("#id_preemptible")).not_to_be_checked()  # no eval (wait_for_function): CSP
    page.click("button[type=submit] >> text=Submit notebook")
    page.wait_for_url(re.compile(r"/workloads/\d+/$"))

    page.click("nav >> text=Workloads")
    page.wait_for_url(re.compile(r"/workloads/$"))
    table = page.locator("#workload-table")
    assert table.locator("tr[data-workload]").count() == 2
    text = table.inner_text()
    assert "resnet-train" in text and "explore" in text and "Training" in text and "Notebook" in text
    assert table.get_attribute("hx-trigger") == "every 5s"  # live rows: the list polls

    rows = {w.name: w for w in Workload.objects.all()}
    assert rows["resnet-train"].kind == Kind.TRAINING and rows["resnet-train"].gpus == 2
    assert rows["resnet-train"].env == [{"name": "WANDB_MODE", "value": "offline"}]
    assert rows["explore"].kind == Kind.NOTEBOOK and rows["explore"].node_pool.slug == "l40s-shared"
    assert rows["explore"].notebook_idle_timeout_minutes == 60
    assert rows["explore"].preemptible is False and rows["explore"].priority_class.name == "build"


def test_submit_shows_every_error_at_once_and_says_whether_the_work_would_start_now_or_wait(login):
    from django.utils import timezone

    from apps.cluster.models import ClusterQueueState
    from apps.org.models import NodePool, Project
    from apps.workloads.models import Workload

    page = login("alice")
    page.goto("/workloads/submit/training/")
    assert page.locator("label[for=id_name] .required-mark").is_visible()
    assert page.locator("label[for=id_command] .required-mark").count() == 0

    # Before submitting, the panel says whether it would start now, and why, from the mirror.
    page.select_option("#id_node_pool", label="H100 80GB (h100)")
    page.fill("#id_gpus", "2")
    page.locator("#id_gpus").blur()
    expect(page.locator("#pool-panel [data-fact=forecast]")).to_have_text(
        "Would start now (4 of 4 deserved H100 80GB free).")
    vision, h100 = Project.objects.get(slug="vision"), NodePool.objects.get(slug="h100")
    ClusterQueueState.objects.create(name="proj-vision-h100-elastic", project=vision, node_pool=h100,
                                     guaranteed=False, used=8, observed_at=timezone.now())
    page.fill("#id_gpus", "4")
    page.locator("#id_gpus").blur()
    expect(page.locator("#pool-panel [data-fact=forecast]")).to_have_text(
        "Would wait: Vision is at its limit (8 of 8 H100 80GB); 4 more H100 80GB needed.")

    # Several mistakes at once: every one is shown after one submit, each at its field.
    fill_common(page, name="My_Run", image="Bad Image", model="resnet50")
    page.fill("#id_env", "no equals sign")
    page.fill("#id_gpus", "3")
    page.fill("#id_pods", "3")
    page.uncheck("#id_preemptible")
    page.click("button[type=submit] >> text=Submit training")
    page.wait_for_selector(".messages")
    assert "Nothing was submitted" in page.inner_text(".messages")
    assert "DNS-1123" in page.inner_text("#errors-name")
    assert "not a valid image reference" in page.inner_text("#errors-image")
    assert "NAME=value" in page.inner_text("#errors-env")
    assert "may use at most 8" in page.inner_text("#errors-gpus")
    assert "Non-preemptible work must fit" in page.inner_text("#errors-preemptible")
    assert Workload.objects.count() == 0
