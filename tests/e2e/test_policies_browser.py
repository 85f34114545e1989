"""Browser: a department admin sets a project policy with a regular expression for an image pattern (refused, named,
nothing saved), fixes it, previews the running work the policy would refuse (htmx, nothing saved), saves it, and a
researcher's submit page then shows the limit and whose policy it is before anything is typed. The login fixture fails
the test on any Content-Security-Policy violation."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_a_department_admin_fixes_previews_and_saves_a_policy_the_submit_page_then_shows(login):
    from apps.org.models import Policy, Project
    from tests.apps.usage.reports_support import workload
    from tests.conftest import demo_users

    running = workload(demo_users()["alice"], gpus=4, name="big-run")
    vision = Project.objects.get(slug="vision")

    page = login("deptadmin")
    page.click("nav summary:has-text('Cluster')")
    page.click("nav >> text=Policies")
    page.wait_for_url(re.compile(r"/workloads/policies/$"))
    page.click("text=New policy")
    page.wait_for_url(re.compile(r"/workloads/policies/new/$"))

    page.select_option("#id_project", str(vision.pk))
    page.fill("#id_max_gpus_per_workload", "2")
    page.fill("#id_allowed_images", "pytorch/(torch)+$")
    page.click("main button:has-text('Create')")
    page.wait_for_load_state()
    assert "/workloads/policies/new/" in page.url
    expect(page.locator("#id_allowed_images_errors")).to_contain_text("no regular expressions")
    assert not Policy.objects.exists()
    assert page.input_value("#id_allowed_images") == "pytorch/(torch)+$"

    page.fill("#id_allowed_images", "pytorch/*")
    page.click("main button:has-text('Preview affected work')")
    row = page.locator(f"#breaking tr[data-breaking='{running.pk}']")
    expect(row).to_contain_text("allows at most 2 GPUs per workload")
    expect(row).to_contain_text("vision/big-run")
    assert "/workloads/policies/new/" in page.url and not Policy.objects.exists()

    page.click("main button:has-text('Create')")
    page.wait_for_url(re.compile(r"/workloads/policies/$"))
    assert "Policy created." in page.inner_text(".messages")
    policy = Policy.objects.get(project=vision)
    assert (policy.max_gpus_per_workload, policy.allowed_images) == (2, ["pytorch/*"])

    researcher = login("alice")
    researcher.goto(f"/workloads/submit/training/?project={vision.pk}")
    limit = researcher.locator("#policy-panel [data-policy=max_gpus_per_workload]")
    expect(limit).to_contain_text("2 GPU units")
    expect(limit).to_contain_text("The Vision project's policy")
    expect(researcher.locator("#policy-panel [data-policy=allowed_images]")).to_contain_text("pytorch/*")
