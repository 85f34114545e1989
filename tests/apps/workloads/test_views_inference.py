"""The inference service pages: the submit tab (serving pools of the project's reservations, every refusal at once,
CSRF, to the workload's page) and the scale / image form on an inference service's page."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from apps.core.models import AuditEvent
from apps.org import services as org_services
from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, Status, Workload

pytestmark = pytest.mark.django_db
PAGE = reverse("workloads:submit_inference")


@pytest.fixture
def pools(demo) -> dict[str, NodePool]:
    """Two serving pools: vision reserves 4 units of serve-l4, nlp 2 of serve-a10 (none of serve-l4)."""
    made = {}
    for slug, project, cards in (("serve-l4", "vision", 4), ("serve-a10", "nlp", 2)):
        made[slug] = org_services.node_pool_create(actor=demo["admin"], slug=slug, name=f"{slug} pool",
                                                   gpu_resource="nvidia.com/gpu", capacity=8, serving=True,
                                                   node_labels={"portal.gpu/pool": slug})
        org_services.serving_reservation_create(actor=demo["admin"], project=Project.objects.get(slug=project),
                                                node_pool=made[slug], cards=cards)
    return made


def form_data(pool: NodePool, **extra: str) -> dict[str, str]:
    return {"submission_token": "t" * 24, "project": str(Project.objects.get(slug="vision").pk), "name": "llama",
            "image": "vllm/vllm-openai:v0.6.3",
            "command": "", "args": "--model meta-llama/Llama-3.1-8B", "node_pool": str(pool.pk),
            "serving_port": "8000", "gpus": "1", "replicas": "2", "pods": "1", "model_label": "llama-3-8b",
            "data_class": "public", **extra}


def test_the_tab_offers_only_the_chosen_projects_serving_pools(client_for, pools):
    alice = client_for("alice").get(PAGE).content.decode()
    assert 'aria-current="page">Inference service</a>' in alice
    assert "serve-l4 pool (serve-l4)" in alice and "serve-a10" not in alice
    nlp = Project.objects.get(slug="nlp")
    bob = client_for("bob").get(f"{PAGE}?project={nlp.pk}").content.decode()
    assert "serve-a10 pool (serve-a10)" in bob and "serve-l4" not in bob
    assert "h100" not in bob.split('name="node_pool"')[1].split("</select>")[0]  # batch pools are never offered
    training = client_for("alice").get(reverse("workloads:submit", args=["training"])).content.decode()
    assert f'href="{PAGE}"' in training  # the other submit pages link the tab


def test_a_submit_records_the_service_and_goes_to_its_page(client_for, pools):
    response = client_for("alice").post(PAGE, form_data(pools["serve-l4"], command="vllm serve"))
    workload = Workload.objects.get(kind=Kind.INFERENCE)
    assert response.status_code == 302 and response["Location"] == reverse("workloads:detail", args=[workload.pk])
    assert (workload.project.slug, workload.node_pool.slug, workload.replicas, workload.gpus, workload.serving_port,
            workload.command, workload.args, workload.status) == (
        "vision", "serve-l4", 2, 1, 8000, ["vllm", "serve"], ["--model", "meta-llama/Llama-3.1-8B"], Status.SUBMITTING)


def test_every_refusal_comes_back_at_once_and_nothing_is_recorded(client_for, pools):
    client = client_for("alice")
    # The form's own refusals together: a pool the project has no reservation on, a bad port, a long name...
    refused = client.post(PAGE, form_data(pools["serve-a10"], serving_port="70000", command='vllm "serve',
                                          name="x" * 41, image=""))
    assert refused.status_code == 400
    form = refused.context["form"]
    assert set(form.errors) == {"node_pool", "serving_port", "command", "name", "image"}, form.errors
    assert "no serving reservation" in form.errors["node_pool"][0]
    # ...and the service's beside them in the same answer: more than the reservation holds, with no image.
    both = client.post(PAGE, form_data(pools["serve-l4"], replicas="3", gpus="2", image="", data_class=""))
    assert both.status_code == 400
    errors = both.context["form"].errors
    assert set(errors) == {"replicas", "image", "data_class"}, errors
    assert "vision reserves 4 units of serve-l4" in errors["replicas"][0]
    assert "Nothing was submitted" in both.content.decode()
    assert not Workload.objects.filter(kind=Kind.INFERENCE).exists()


def test_pods_per_replica_make_a_multi_node_service_held_to_the_reservation(client_for, pools):
    client = client_for("alice")
    refused = client.post(PAGE, form_data(pools["serve-l4"], pods="0", image=""))
    assert refused.status_code == 400 and set(refused.context["form"].errors) == {"pods", "image"}
    over = client.post(PAGE, form_data(pools["serve-l4"], replicas="1", pods="3", gpus="2", name="x" * 41))
    errors = over.context["form"].errors
    assert set(errors) == {"replicas", "name"}, errors
    assert errors["replicas"] == ["vision reserves 4 units of serve-l4 for serving and its other services hold 0, so "
                                  "this one can have at most 4; it asks for 6 (1 replicas x 3 pods x 2 GPUs)."]
    assert not Workload.objects.filter(kind=Kind.INFERENCE).exists()
    created = client.post(PAGE, form_data(pools["serve-l4"], pods="2"))
    workload = Workload.objects.get(kind=Kind.INFERENCE)
    assert created.status_code == 302 and (workload.replicas, workload.pods, workload.gpu_units) == (2, 2, 4)
    assert workload.object_api_version == "leaderworkerset.x-k8s.io/v1"
    page = client.get(created["Location"]).content.decode()
    assert "2 replicas of 2 pods each (a LeaderWorkerSet) wanted" in page


def test_a_form_posted_twice_makes_one_service(client_for, pools):
    client = client_for("alice")
    first = client.post(PAGE, form_data(pools["serve-l4"]))
    again = client.post(PAGE, form_data(pools["serve-l4"]), follow=True)
    workload = Workload.objects.get(kind=Kind.INFERENCE)
    assert first["Location"] == reverse("workloads:detail", args=[workload.pk])
    assert again.redirect_chain[-1][0] == reverse("workloads:detail", args=[workload.pk])
    assert "This form was submitted already" in again.content.decode()
    assert AuditEvent.objects.filter(action="workload.submit", object_id=str(workload.pk)).count() == 1
    # A refused post keeps its token (the page posts it again); a post without a token is refused, recording nothing.
    refused = client.post(PAGE, form_data(pools["serve-l4"], submission_token="u" * 24, replicas="9"))
    assert 'value="' + "u" * 24 + '"' in refused.content.decode()
    unguarded = client.post(PAGE, {**form_data(pools["serve-l4"]), "submission_token": ""})
    assert unguarded.status_code == 400 and "no valid submission token" in unguarded.content.decode()
    assert Workload.objects.filter(kind=Kind.INFERENCE).count() == 1
    page = client.get(PAGE).content.decode()
    assert page.count('name="submission_token"') == 1


def test_a_project_out_of_reach_is_not_found_and_csrf_is_enforced(client_for, demo, pools):
    forecasting = Project.objects.get(slug="forecasting")
    assert client_for("alice").get(f"{PAGE}?project={forecasting.pk}").status_code == 404
    assert client_for("alice").post(PAGE, form_data(pools["serve-l4"], project=str(forecasting.pk))).status_code == 404
    assert client_for("viewer").get(PAGE).status_code == 403
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(demo["alice"])
    assert strict.post(PAGE, form_data(pools["serve-l4"])).status_code == 403
    assert not Workload.objects.filter(kind=Kind.INFERENCE).exists()


@pytest.fixture
def service(demo, pools) -> Workload:
    return services.inference_submit(actor=demo["alice"], project=Project.objects.get(slug="vision"),
                                     node_pool=pools["serve-l4"], name="llama", image="vllm/vllm-openai:v0.6.3",
                                     gpus=1, replicas=1, model_label="llama", data_class="public")


def test_the_service_page_scales_and_changes_the_image(client_for, service):
    client = client_for("alice")
    page = client.get(reverse("workloads:detail", args=[service.pk])).content.decode()
    action = reverse("workloads:inference_update", args=[service.pk])
    assert f'action="{action}"' in page and 'name="replicas"' in page and "csrfmiddlewaretoken" in page
    response = client.post(action, {"replicas": "3", "image": "vllm/vllm-openai:v0.6.4"})
    assert response.status_code == 302 and response["Location"] == reverse("workloads:detail", args=[service.pk])
    changed = Workload.objects.get(pk=service.pk)
    assert (changed.replicas, changed.image) == (3, "vllm/vllm-openai:v0.6.4")
    assert AuditEvent.objects.filter(action="workload.inference_update", object_id=str(service.pk)).count() == 1


def test_a_refused_change_shows_its_errors_and_changes_nothing(client_for, service):
    action = reverse("workloads:inference_update", args=[service.pk])
    refused = client_for("alice").post(action, {"replicas": "5", "image": "vllm/vllm-openai:v0.6.4"})
    assert refused.status_code == 400 and "vision reserves 4 units of serve-l4" in refused.content.decode()
    both = client_for("alice").post(action, {"replicas": "0", "image": ""})
    assert both.status_code == 400 and set(both.context["form"].errors) == {"replicas", "image"}
    assert (Workload.objects.get(pk=service.pk).replicas, Workload.objects.get(pk=service.pk).image) == (
        1, "vllm/vllm-openai:v0.6.3")


@pytest.mark.parametrize(("username", "status"), [("bob", 404), ("carol", 404), ("viewer", 403), ("lead", 302)])
def test_the_change_is_for_those_the_api_lets_change_it(client_for, demo, service, username, status):
    action = reverse("workloads:inference_update", args=[service.pk])
    assert client_for(username).post(action, {"replicas": "2", "image": service.image}).status_code == status
    assert Workload.objects.get(pk=service.pk).replicas == (2 if status == 302 else 1)
    viewer_page = client_for("viewer").get(reverse("workloads:detail", args=[service.pk])).content.decode()
    assert action not in viewer_page  # no form for those who may not use it


def test_a_stopped_service_offers_no_change_and_refuses_one(client_for, service):
    Workload.objects.filter(pk=service.pk).update(status=Status.STOPPED)
    action = reverse("workloads:inference_update", args=[service.pk])
    assert action not in client_for("alice").get(reverse("workloads:detail", args=[service.pk])).content.decode()
    refused = client_for("alice").post(action, {"replicas": "2", "image": service.image})
    assert refused.status_code == 400 and "nothing to change" in refused.content.decode()
