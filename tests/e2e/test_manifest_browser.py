"""Browser: alice starts a manifest from an example, breaks it, sees Check find every error at its line (the editor
marks those lines, a click on one goes there), fixes it, and submits it to land on the workload's page. The page runs
under the portal's Content-Security-Policy; the `login` fixture fails the test on any violation.

No worker runs here: the row stays `submitting`, which is all the workload's page needs to show.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

IMAGE_LINE = "image: pytorch/pytorch:"


def test_alice_checks_a_broken_example_fixes_it_and_submits_it(login):
    from apps.core.models import Intent
    from apps.workloads.models import Kind, Origin, Status, Workload

    page = login("alice")
    page.goto("/workloads/submit/training/")
    page.locator("nav.tabs").get_by_role("link", name="Manifest").click()
    page.wait_for_url(re.compile(r"/workloads/submit/manifest/$"))
    page.select_option("#id_node_pool", label="H100 80GB (h100)")

    # An example fills the editor for the chosen pool; the editor numbers its lines.
    page.select_option("#id_example", "Job")
    editor = page.locator("#id_manifest")
    expect(editor).to_have_value(re.compile(r"^apiVersion: batch/v1\nkind: Job\n"))
    example = editor.input_value()
    assert "nvidia.com/gpu: 1" in example
    expect(page.locator(".code-gutter span")).to_have_count(len(example.split("\n")))

    # Broken twice: a misspelt field (unknown) and so no image (required).
    broken = example.replace(IMAGE_LINE, "imag: pytorch/pytorch:")
    bad_line = next(number for number, line in enumerate(broken.split("\n"), 1) if "imag: " in line)
    editor.fill(broken)
    page.fill("#id_model_label", "resnet50")
    page.fill("#id_data_class", "public")
    page.get_by_role("button", name="Check", exact=True).click()
    errors = page.locator("#manifest-errors")
    expect(errors).to_contain_text("spec.template.spec.containers[0].imag: unknown field.")
    expect(errors).to_contain_text("spec.template.spec.containers[0].image: required.")
    expect(errors.locator(f"li[data-line='{bad_line}']")).to_contain_text("imag: unknown field")
    marked = page.locator(".code-gutter span.error-line")
    expect(marked.first).to_be_visible()
    assert str(bad_line) in marked.all_inner_texts()
    expect(editor).to_have_value(broken)  # a check never replaces what was typed
    errors.locator(f"[data-goto-line='{bad_line}']").first.click()
    expect(editor).to_be_focused()
    assert Workload.objects.count() == 0 and not Intent.objects.filter(kind="workload.submit").exists()

    # Fixed: the check says what would run, and the marks are gone.
    editor.fill(example)
    page.get_by_role("button", name="Check", exact=True).click()
    expect(page.locator("#manifest-accepted")).to_contain_text("would accept this")
    expect(page.locator("#manifest-accepted")).to_contain_text("elastic-h100")  # preemptible, the default
    expect(page.locator(".code-gutter span.error-line")).to_have_count(0)
    assert Workload.objects.count() == 0

    page.get_by_role("button", name="Submit", exact=True).click()
    page.wait_for_url(re.compile(r"/workloads/\d+/$"))
    expect(page.locator(".messages")).to_contain_text("Submitted my-job")
    workload = Workload.objects.get()
    assert page.url.endswith(f"/workloads/{workload.pk}/")
    assert (workload.kind, workload.origin, workload.status) == (Kind.JOB, Origin.PORTAL, Status.SUBMITTING)
    assert workload.owner.username == "alice" and workload.gpu_units == 2 and workload.model_label == "resnet50"
    assert Intent.objects.filter(kind="workload.submit", target_id=workload.pk).count() == 1


def test_a_refused_submit_keeps_the_text_and_tab_indents(login):
    from apps.workloads.models import Workload

    page = login("alice")
    page.goto("/workloads/submit/manifest/?project=vision")
    editor = page.locator("#id_manifest")
    editor.fill("apiVersion: batch/v1\nkind: Job\nmetadata:\n")
    editor.press("End")
    editor.press("Tab")
    editor.press_sequentially("name: x")
    text = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: x"
    expect(editor).to_have_value(text)
    page.get_by_role("button", name="Submit", exact=True).click()
    expect(page.locator(".messages")).to_contain_text("Nothing was submitted")
    expect(page.locator("#manifest-errors")).to_be_visible()
    expect(page.locator("#errors-model_label")).to_contain_text("This field is required")
    expect(editor).to_have_value(text)
    assert Workload.objects.count() == 0
