"""Browser: the small things a person trips over. Stop and role-binding removal ask first (a dialog with
JavaScript, a confirmation page without); the last hand-made admin binding offers no "Remove"; the error pages are
styled and keep the navigation; no page scrolls sideways on a 390 px phone; the admin's bar fits on one line at
1400 px.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
# Every page of the navigation (and the pages they lead to), for every role: those a role may not open answer the
# styled 403 page, which must not scroll sideways either. Django's admin and the Swagger UI bring their own CSS.
MAIN_PAGES = ["/", "/workloads/", "/usage/quota/", "/usage/reports/", "/usage/holders/",
              "/workloads/submit/training/", "/workloads/submit/notebook/", "/workloads/submit/batch/",
              "/workloads/submit/inference/", "/departments/", "/departments/research/quotas/", "/weights/",
              "/pools/", "/pools/h100/",
              "/priority-classes/", "/audit/", "/cluster-sync/", "/accounts/role-bindings/", "/accounts/group-rules/",
              "/accounts/tokens/", "/accounts/settings/", "/workloads/templates/", "/workloads/projects/vision/queue/",
              "/workloads/999999/", "/usage/queues/", "/usage/queues/local-queues/", "/usage/queues/cohorts/",
              "/usage/queues/flavors/", "/usage/nodes/h100/", "/usage/quota/history/", "/usage/budgets/",
              "/usage/budgets/new/", "/notifications/", "/notifications/new/", "/usage/over-time/"]


def alice_workload(name: str = "resnet-train", **extra):
    """A live training job of alice's in Vision (no worker runs: it stays where the test puts it)."""
    from django.contrib.auth import get_user_model

    from apps.org.models import NodePool, Project
    from apps.workloads import services
    from apps.workloads.models import Kind

    fields = {"image": "pytorch/pytorch:2.4.0", "command": ["sleep", "600"], "gpus": 1, "model_label": "resnet",
              "data_class": "public", **extra}
    return services.workload_submit(
        actor=get_user_model().objects.get(username="alice"), project=Project.objects.get(slug="vision"),
        kind=Kind.TRAINING, name=name, node_pool=NodePool.objects.get(slug="l40s-shared"), **fields)


def status_of(workload) -> str:
    from apps.workloads.models import Workload

    return Workload.objects.get(pk=workload.pk).status


def test_stop_asks_first_cancel_keeps_it_running_and_confirm_stops_it(login):
    from apps.workloads.models import Status, Workload

    workload = alice_workload()
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)
    page = login("alice")
    detail = f"/workloads/{workload.pk}/"
    page.goto(detail)
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_be_hidden()

    page.locator(".panel-head a[data-confirm]", has_text="Stop").click()
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Stop training resnet-train?")
    expect(dialog).to_contain_text("Its Job and pods are deleted")
    dialog.locator("[data-confirm-cancel]").click()
    expect(dialog).to_be_hidden()
    assert page.url.endswith(detail) and status_of(workload) == Status.RUNNING

    page.locator(".panel-head a[data-confirm]", has_text="Stop").click()  # Escape cancels too
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert status_of(workload) == Status.RUNNING

    page.locator(".panel-head a[data-confirm]", has_text="Stop").click()
    dialog.locator("[data-confirm-submit]", has_text="Stop").click()
    expect(page.locator(".messages")).to_contain_text("Stopping resnet-train")
    assert page.url.endswith(detail) and status_of(workload) == Status.STOPPING


def test_a_lead_stops_from_the_list_and_comes_back_to_it(login):
    from apps.workloads.models import Status

    workload = alice_workload()
    page = login("lead")
    page.click("nav >> text=Workloads")
    page.wait_for_url(re.compile(r"/workloads/$"))
    row = page.locator(f"tr[data-workload='{workload.pk}']")  # leads land on their scope's work: alice's is listed
    row.locator("a[data-confirm]", has_text="Stop").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_contain_text("Stop training resnet-train?")
    dialog.locator("[data-confirm-submit]").click()
    expect(page.locator(".messages")).to_contain_text("Stopping resnet-train")
    assert re.search(r"/workloads/(\?.*)?$", page.url) and status_of(workload) == Status.STOPPING


def test_removing_a_role_binding_asks_first_and_the_last_admin_binding_offers_no_remove(login):
    from apps.accounts.models import RoleBinding

    admin_binding = RoleBinding.objects.get(user__username="admin", role="admin")
    alice_binding = RoleBinding.objects.get(user__username="alice")
    page = login("admin")
    page.goto("/accounts/role-bindings/")
    expect(page.locator(f"tr[data-binding='{admin_binding.pk}'] a", has_text="Remove")).to_have_count(0)

    dialog = page.locator("#confirm-dialog")
    remove = page.locator(f"tr[data-binding='{alice_binding.pk}'] a", has_text="Remove")
    remove.click()
    expect(dialog).to_contain_text("Remove role binding user:alice researcher @ project:vision?")
    dialog.locator("[data-confirm-cancel]").click()
    expect(dialog).to_be_hidden()
    assert RoleBinding.objects.filter(pk=alice_binding.pk).exists()

    remove.click()
    dialog.locator("[data-confirm-submit]", has_text="Remove").click()
    expect(page.locator(".messages")).to_contain_text("Removed user:alice researcher @ project:vision.")
    assert not RoleBinding.objects.filter(pk=alice_binding.pk).exists()
    expect(page.locator(f"tr[data-binding='{alice_binding.pk}']")).to_have_count(0)


def test_without_javascript_remove_leads_to_a_confirmation_page(browser, live_server, login):
    """`login` seeds the demo; this context signs in by itself, with JavaScript off (so without the CSP watch)."""
    from apps.accounts.models import RoleBinding

    alice_binding = RoleBinding.objects.get(user__username="alice")
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", "demo")
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/accounts/login/" not in url)
        page.goto("/accounts/role-bindings/")
        page.locator(f"tr[data-binding='{alice_binding.pk}'] a", has_text="Remove").click()
        page.wait_for_url(re.compile(rf"/accounts/role-bindings/{alice_binding.pk}/"))
        assert "Remove role binding user:alice researcher @ project:vision?" in page.inner_text("main h1")
        page.click("main a >> text=Cancel")
        page.wait_for_url(re.compile(r"/accounts/role-bindings/$"))
        assert RoleBinding.objects.filter(pk=alice_binding.pk).exists()
        page.locator(f"tr[data-binding='{alice_binding.pk}'] a", has_text="Remove").click()
        page.click("main button[type=submit] >> text=Remove")
        page.wait_for_url(re.compile(r"/accounts/role-bindings/$"))
        assert not RoleBinding.objects.filter(pk=alice_binding.pk).exists()
    finally:
        context.close()


def test_error_pages_are_styled_with_the_navigation_and_the_views_message(login):
    page = login("viewer")
    response = page.goto("/workloads/submit/training/")
    assert response is not None and response.status == 403
    panel = page.locator(".error-page[data-error='403']")
    expect(panel).to_contain_text("You may not submit work in any project.")
    assert panel.evaluate("e => getComputedStyle(e).borderTopLeftRadius") == "8px"  # the portal's stylesheet
    expect(page.locator("nav.nav a", has_text="Workloads")).to_have_count(1)

    response = page.goto("/workloads/999999/")
    assert response is not None and response.status == 404
    expect(page.locator(".error-page[data-error='404']")).to_contain_text("No such workload.")
    page.click("nav >> text=Workloads")
    page.wait_for_url(re.compile(r"/workloads/$"))

    response = page.goto("/no-such-page/")
    assert response is not None and response.status == 404
    expect(page.locator(".error-page")).to_contain_text("There is nothing at this address")


@pytest.mark.parametrize("username", ["admin", "deptadmin", "lead", "alice", "viewer"])
def test_no_page_scrolls_sideways_on_a_390px_phone(login, username):
    workload = alice_workload(
        name="a-rather-long-name-for-a-phone-run",
        image="registry.example.org/research/vision/pytorch-training-image:2.4.0-cuda12.4-cudnn9-runtime",
        command=["python", "-m", "train.resnet", "--data=/datasets/imagenet/2012/train", "--epochs=90"],
        max_runtime_seconds=90 * 60)
    page = login(username)
    page.set_viewport_size(PHONE)
    too_wide = {}
    for path in [*MAIN_PAGES, f"/workloads/{workload.pk}/"]:
        page.goto(path)
        page.wait_for_load_state("networkidle")
        width = page.evaluate("() => document.scrollingElement.scrollWidth")
        if width > PHONE["width"]:
            too_wide[path] = width
    # The phone menu open, with its Cluster section expanded.
    page.goto("/")
    page.click("label.nav-toggle-label")
    page.click("nav.nav summary >> text=Cluster")
    expect(page.locator("nav.nav a", has_text="Node pools")).to_be_visible()
    width = page.evaluate("() => document.scrollingElement.scrollWidth")
    if width > PHONE["width"]:
        too_wide["/ (menu open)"] = width
    assert not too_wide, f"{username}: pages wider than {PHONE['width']} px: {too_wide}"


def test_the_admin_navigation_fits_on_one_line_at_1400px(login):
    page = login("admin")
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto("/workloads/")
    tops = page.eval_on_selector_all(
        ".topbar .brand, nav.nav > a, nav.nav > details > summary, .user-menu > details > summary",
        "els => els.map(e => Math.round(e.getBoundingClientRect().top))")
    assert len(tops) >= 11 and max(tops) - min(tops) <= 4, tops  # brand, 9 links, the Cluster and user menus
    bar = page.locator(".topbar").bounding_box()
    assert bar is not None and bar["height"] <= 64, bar
    # The Cluster menu opens as a dropdown and leads on; a click elsewhere closes it.
    page.click("nav.nav summary >> text=Cluster")
    expect(page.locator("nav.nav a", has_text="Cluster sync")).to_be_visible()
    page.click("main h1")
    expect(page.locator("nav.nav a", has_text="Cluster sync")).to_be_hidden()
    page.click("nav.nav summary >> text=Cluster")
    page.click("nav.nav a >> text=Node pools")
    page.wait_for_url(re.compile(r"/pools/$"))
    expect(page.locator("nav.nav summary.current")).to_have_text("Cluster")
