"""Browser: the research lead submits an inference service from its tab, under the portal's Content-Security-Policy.
The sizes (GPUs, replicas, pods per replica): the form has no script of its own, so the pods field always shows (1: a
Deployment, more: a LeaderWorkerSet) and a choice of project, which swaps the form (htmx), offers it again; every
refusal comes back at once, the form's own and the reservation's; a valid multi-node service is recorded.

No worker runs here: the row stays `submitting`, which is all its page needs to show.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
PAGE = "/workloads/submit/inference/"


def serving_pools() -> None:
    """vision reserves 4 units of serve-l4, nlp 2 of serve-a10 (committed: the live server's thread reads them)."""
    from django.contrib.auth import get_user_model

    from apps.org import services as org_services
    from apps.org.models import Project

    admin = get_user_model().objects.get(username="admin")
    for slug, project, cards in (("serve-l4", "vision", 4), ("serve-a10", "nlp", 2)):
        pool = org_services.node_pool_create(actor=admin, slug=slug, name=f"{slug} pool",
                                             gpu_resource="nvidia.com/gpu", capacity=8, serving=True,
                                             node_labels={"portal.gpu/pool": slug})
        org_services.serving_reservation_create(actor=admin, project=Project.objects.get(slug=project),
                                                node_pool=pool, cards=cards)


def fill(page, **values: str) -> None:
    for name, value in values.items():
        page.fill(f"#id_{name}", value)


def test_a_multi_node_service_is_sized_sees_every_refusal_at_once_and_submits_it(login):
    from apps.org.models import Project
    from apps.workloads.models import Kind, Status, Workload

    page = login("lead")  # lead is a member of vision and nlp: the project choice swaps the form
    serving_pools()
    page.goto(PAGE)
    for field in ("#id_replicas", "#id_pods", "#id_gpus"):
        expect(page.locator(field)).to_be_visible()
        expect(page.locator(field)).to_be_enabled()
    expect(page.locator("#id_pods")).to_have_value("1")  # one pod per replica: a Deployment
    assert "its leader serving the endpoint" in page.locator("#id_pods").locator(
        "xpath=ancestor::div[contains(@class, 'field')]").inner_text()

    # Another project: the form comes back from the server with that project's serving pools, the sizes offered
    # afresh (htmx swaps the whole form, no inline script). NLP is lead's first project, the form's at first.
    expect(page.locator("#id_node_pool option")).to_have_text(["serve-a10 pool (serve-a10)"])
    for project, pool in (("vision", "serve-l4"), ("nlp", "serve-a10"), ("vision", "serve-l4")):
        page.select_option("#id_project", value=str(Project.objects.get(slug=project).pk))
        expect(page.locator("#id_node_pool option")).to_have_text([f"{pool} pool ({pool})"])
        expect(page.locator("#id_pods")).to_be_visible()
        expect(page.locator("#id_pods")).to_have_value("1")

    # Several mistakes at once: the form's own (image, port) and, the sizes having passed theirs, the reservation's.
    fill(page, name="llama-70b", image="", serving_port="70000", gpus="1", replicas="3", pods="2",
         model_label="llama-3-70b", data_class="public")
    page.click("button[type=submit] >> text=Submit inference service")
    page.wait_for_selector(".messages")
    assert "Nothing was submitted" in page.inner_text(".messages")
    assert "This field is required." in page.inner_text("#id_image_errors")
    assert "At most 65535" in page.inner_text("#id_serving_port_errors")
    assert "it asks for 6 (3 replicas x 2 pods x 1 GPUs)" in page.inner_text("#id_replicas_errors")
    assert page.locator(".field .errorlist").count() == 3
    expect(page.locator("#id_pods")).to_have_value("2")  # what was typed comes back
    assert Workload.objects.count() == 0
    fill(page, image="vllm/vllm-openai:v0.6.3", serving_port="8000", pods="0")  # no pod per replica: refused
    page.click("button[type=submit] >> text=Submit inference service")
    page.wait_for_selector("#id_pods_errors")
    assert "At least 1 pods per replica." in page.inner_text("#id_pods_errors")
    assert page.locator(".field .errorlist").count() == 1  # the reservation is not counted without a size
    assert Workload.objects.count() == 0

    fill(page, pods="2", replicas="2")  # 2 x 2 x 1: the 4 reserved
    page.click("button[type=submit] >> text=Submit inference service")
    page.wait_for_url(re.compile(r"/workloads/\d+/$"))
    assert "Submitted llama-70b" in page.inner_text(".messages")
    service = Workload.objects.get()
    assert (service.kind, service.status, service.project.slug, service.node_pool.slug) == (
        Kind.INFERENCE, Status.SUBMITTING, "vision", "serve-l4")
    assert (service.replicas, service.pods, service.gpus, service.serving_port) == (2, 2, 1, 8000)
    assert service.object_api_version == "leaderworkerset.x-k8s.io/v1"  # a replica of two pods: a LeaderWorkerSet
    assert page.url.endswith(f"/workloads/{service.pk}/")
