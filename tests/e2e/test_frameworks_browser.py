"""Browser: the training form's framework fields follow the framework chosen (static/js/framework-fields.js, under the
portal's Content-Security-Policy: the `login` fixture fails on any violation), and a PyTorch training submitted from
it lands on its page, which names the framework and the object it runs as.

No watcher runs here, so the cluster has said nothing of what it serves: PyTorch runs as a JobSet (docs/frameworks.md).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

RAY_FIELDS = ("#field-ray_version", "#field-ray_entrypoint", "#field-ray_working_dir")
NOT_RAY_FIELDS = ("#field-command", "#field-args")


def shown(page, selectors: tuple[str, ...]) -> None:
    for selector in selectors:
        expect(page.locator(selector)).to_be_visible()


def hidden(page, selectors: tuple[str, ...]) -> None:
    for selector in selectors:
        expect(page.locator(selector)).to_be_hidden()


def test_the_framework_fields_follow_the_choice_and_pytorch_lands_on_its_page(login):
    from apps.workloads.models import Framework, Workload

    page = login("alice")
    page.goto("/workloads/submit/training/")
    # No framework: the portal's own Job takes a command; Ray's fields are not offered.
    hidden(page, RAY_FIELDS)
    shown(page, NOT_RAY_FIELDS)

    page.select_option("#id_framework", "ray")
    shown(page, RAY_FIELDS)
    hidden(page, NOT_RAY_FIELDS)
    page.fill("#id_ray_entrypoint", "python tune.py")  # typed, then the choice changes: not sent for PyTorch

    page.select_option("#id_framework", "pytorch")
    hidden(page, RAY_FIELDS)
    shown(page, NOT_RAY_FIELDS)
    page.select_option("#id_node_pool", label="H100 80GB (h100)")
    page.fill("#id_gpus", "2")
    page.fill("#id_pods", "2")
    page.fill("#id_name", "ddp")
    page.fill("#id_image", "pytorch/pytorch:2.4.0")
    page.fill("#id_command", "torchrun train.py")
    page.fill("#id_model_label", "resnet50")
    page.fill("#id_data_class", "public")
    page.locator("#id_data_class").blur()
    page.wait_for_selector("#live-status .saved")
    assert page.inner_text("#errors-ray_entrypoint").strip() == ""  # the live check was not sent the hidden field
    page.click("button[type=submit] >> text=Submit training")
    page.wait_for_url(re.compile(r"/workloads/\d+/$"))

    workload = Workload.objects.get()
    assert (workload.framework, workload.framework_settings, workload.pods) == (Framework.PYTORCH, {}, 2)
    expect(page.locator("dd[data-framework]")).to_have_text("PyTorch")
    expect(page.locator("dd[data-object]")).to_contain_text(f"JobSet {workload.job_name}")
    expect(page.locator("dd[data-object]")).to_contain_text("jobset.x-k8s.io/v1alpha2")
