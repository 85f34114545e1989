"""Inference services end to end as far as the Deployment: the reservation checked at submit and at scale-up, a
Deployment (never a Kueue Workload) and its Service in kubesim, scaled and rolled to a new image by patches."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.core.models import AuditEvent
from apps.org import services as org_services
from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Status, Workload
from worker import tasks

GPU = "nvidia.com/gpu"


@pytest.fixture
def serving(demo):
    pool = org_services.node_pool_create(actor=demo["admin"], slug="serve-l4", name="L4 serving", gpu_resource=GPU,
                                         capacity=8, serving=True, node_labels={"portal.gpu/pool": "serve-l4"})
    org_services.serving_reservation_create(actor=demo["admin"], project=Project.objects.get(slug="vision"),
                                            node_pool=pool, cards=4)
    return pool


def serve(user, pool, **extra):
    values = {"project": Project.objects.get(slug="vision"), "node_pool": pool, "name": "llama", "image":
              "vllm/vllm-openai:v0.6.3", "gpus": 1, "model_label": "llama-3-8b", "data_class": "public",
              "args": ["--model", "meta-llama/Llama-3.1-8B"], **extra}
    return services.inference_submit(actor=user, **values)


def test_the_reservation_is_checked_at_submit(demo, serving):
    serve(demo["alice"], serving, replicas=2)
    with pytest.raises(ValidationError) as caught:
        serve(demo["alice"], serving, name="second", replicas=1, gpus=3)
    assert caught.value.message_dict == {"replicas": [
        "vision reserves 4 units of serve-l4 for serving and its other services hold 2, so this one can have at most "
        "2; it asks for 3 (1 replicas x 1 pods x 3 GPUs)."]}
    assert Workload.objects.filter(kind="inference").count() == 1
    assert serve(demo["alice"], serving, name="second", gpus=2).gpu_units == 2


def test_no_reservation_and_batch_pools_are_refused_with_every_bad_field(demo, serving):
    with pytest.raises(ValidationError) as caught:
        serve(demo["alice"], NodePool.objects.get(slug="h100"), replicas=0, serving_port=70000, image="")
    assert set(caught.value.message_dict) == {"replicas", "serving_port", "image"}
    with pytest.raises(ValidationError) as caught:
        serve(demo["alice"], NodePool.objects.get(slug="h100"))
    assert caught.value.message_dict == {"node_pool": [
        "h100 is not a serving pool; inference services run on serving pools only."]}
    with pytest.raises(ValidationError) as caught:
        services.inference_submit(actor=demo["bob"], project=Project.objects.get(slug="nlp"), node_pool=serving,
                                  name="x", image="vllm/vllm-openai:v0.6.3", gpus=1, model_label="m", data_class="d")
    assert caught.value.message_dict == {"node_pool": [
        "nlp has no serving reservation on serve-l4; ask an admin for one."]}
    with pytest.raises(PermissionDenied):
        serve(demo["carol"], serving)
    assert not Workload.objects.filter(kind="inference").exists()


def test_a_deployment_never_queued_then_scaled_and_rolled(synced, demo, serving):
    workload = serve(demo["alice"], serving, replicas=2)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    workload.refresh_from_db()
    assert workload.status == Status.ADMITTED and workload.k8s_uid and workload.admitted_at
    deployment = synced.raw_get(f"/apis/apps/v1/namespaces/proj-vision/deployments/wl-{workload.pk}")
    assert deployment["metadata"]["uid"] == workload.k8s_uid
    assert "kueue.x-k8s.io/queue-name" not in deployment["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"][GPU] == container["resources"]["limits"][GPU] == "1"
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {"portal.gpu/pool": "serve-l4"}
    service = synced.get("Service", f"wl-{workload.pk}", namespace="proj-vision")
    assert service["spec"]["ports"][0]["targetPort"] == 8000
    assert not synced.list("Workload", namespace="proj-vision")  # Kueue never saw it

    with pytest.raises(ValidationError) as caught:
        services.inference_update(actor=demo["alice"], workload=workload, replicas=5)
    assert list(caught.value.message_dict) == ["replicas"]
    services.inference_update(actor=demo["alice"], workload=workload, replicas=4, image="vllm/vllm-openai:v0.6.4")
    assert tasks.inference_patch.apply(args=[workload.pk]).get() == "patched"
    deployment = synced.raw_get(f"/apis/apps/v1/namespaces/proj-vision/deployments/wl-{workload.pk}")
    assert deployment["spec"]["replicas"] == 4
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "vllm/vllm-openai:v0.6.4"
    assert container["resources"]["limits"][GPU] == "1"  # the whole container, not only its image
    event = AuditEvent.objects.get(action="workload.inference_update", object_id=str(workload.pk))
    assert event.before == {"replicas": 2, "image": "vllm/vllm-openai:v0.6.3"}
    assert event.after == {"replicas": 4, "image": "vllm/vllm-openai:v0.6.4"}


def test_only_those_who_may_stop_it_change_it(demo, serving):
    workload = serve(demo["alice"], serving)
    with pytest.raises(PermissionDenied):
        services.inference_update(actor=demo["bob"], workload=workload, replicas=2)
    with pytest.raises(ValidationError) as caught:
        services.inference_update(actor=demo["alice"], workload=workload, gpus=2)
    assert list(caught.value.message_dict) == ["non_field_errors"]
    assert Workload.objects.get(pk=workload.pk).replicas == 1


def test_the_api_submits_scales_and_refuses_by_field(client_for, demo, serving):
    from tests.api_support import call

    alice = client_for("alice")
    body = {"project": "vision", "node_pool": "serve-l4", "name": "llama", "image": "vllm/vllm-openai:v0.6.3",
            "gpus": 2, "replicas": 3, "model_label": "llama", "data_class": "public"}
    over = call(alice, "POST", "inference-services/", body)
    assert over.status_code == 400 and list(over.json()) == ["replicas"], over.content
    # A field's own error and the reservation's refusal of the others come back together.
    both = call(alice, "POST", "inference-services/", {**body, "image": "", "serving_port": "x"})
    assert both.status_code == 400 and set(both.json()) == {"replicas", "image", "serving_port"}, both.content
    assert "vision reserves 4 units of serve-l4" in both.json()["replicas"][0]
    created = call(alice, "POST", "inference-services/", {**body, "replicas": 2})
    assert created.status_code == 201, created.content
    assert created.json()["status"] == Status.SUBMITTING and created.json()["replicas"] == 2
    path = f"inference-services/{created.json()['id']}/"
    assert call(alice, "PATCH", path, {"replicas": 3}).status_code == 400
    assert call(alice, "PATCH", path, {"gpus": 1}).status_code == 400
    assert call(alice, "PATCH", path, {"replicas": 1}).json()["replicas"] == 1
    assert call(client_for("carol"), "GET", path).status_code == 404
    assert call(client_for("carol"), "POST", "inference-services/", body).status_code == 400  # not her project


def test_the_api_takes_pods_per_replica_with_every_refusal_at_once(client_for, demo, serving):
    from tests.api_support import call

    alice = client_for("alice")
    body = {"project": "vision", "node_pool": "serve-l4", "name": "llama-70b", "image": "vllm/vllm-openai:v0.6.3",
            "gpus": 2, "replicas": 1, "pods": 3, "model_label": "llama", "data_class": "public"}
    over = call(alice, "POST", "inference-services/", {**body, "image": ""})
    assert over.status_code == 400 and set(over.json()) == {"replicas", "image"}, over.content
    assert over.json()["replicas"][0].endswith("it asks for 6 (1 replicas x 3 pods x 2 GPUs).")
    bad = call(alice, "POST", "inference-services/", {**body, "pods": 0, "serving_port": "x"})
    assert bad.status_code == 400 and set(bad.json()) == {"pods", "serving_port"}, bad.content
    created = call(alice, "POST", "inference-services/", {**body, "pods": 2})
    assert created.status_code == 201 and created.json()["pods"] == 2, created.content
    workload = Workload.objects.get(pk=created.json()["id"])
    assert workload.object_api_version == "leaderworkerset.x-k8s.io/v1" and workload.gpu_units == 4
    assert call(alice, "PATCH", f"inference-services/{workload.pk}/", {"pods": 1}).status_code == 400


def test_the_api_submits_once_per_idempotency_key(client_for, demo, serving):
    from tests.api_support import call

    alice = client_for("alice")
    body = {"project": "vision", "node_pool": "serve-l4", "name": "llama", "image": "vllm/vllm-openai:v0.6.3",
            "gpus": 1, "model_label": "llama", "data_class": "public"}
    first = call(alice, "POST", "inference-services/", body, HTTP_IDEMPOTENCY_KEY="k-1")
    again = call(alice, "POST", "inference-services/", body, HTTP_IDEMPOTENCY_KEY="k-1")
    assert (first.status_code, again.status_code) == (201, 201), again.content
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    other = call(alice, "POST", "inference-services/", {**body, "gpus": 2}, HTTP_IDEMPOTENCY_KEY="k-1")
    assert other.status_code == 422 and "used for another request" in other.json()["detail"]
    assert call(alice, "POST", "inference-services/", body, HTTP_IDEMPOTENCY_KEY="bad key").status_code == 400
    assert Workload.objects.filter(kind="inference").count() == 1
    assert AuditEvent.objects.filter(action="workload.submit").count() == 1


@pytest.mark.parametrize("kind", ["training", "batch", "notebook"])
def test_batch_work_is_refused_on_a_serving_pool_and_never_offered_one(client_for, demo, serving, kind):
    from django.urls import reverse

    from tests.api_support import call
    from tests.apps.workloads.helpers import submit_payload

    with pytest.raises(ValidationError) as caught:
        services.workload_submit(
            actor=demo["alice"], project=Project.objects.get(slug="vision"), kind=kind, name="x",
            image="pytorch/pytorch:2.4.0", command=["sleep", "60"], node_pool=serving, gpus=1, model_label="m",
            data_class="public", preemptible=True)
    assert caught.value.message_dict["node_pool"] == [
        "L4 serving is a serving pool: only inference services run there. Choose another pool, or submit an "
        "inference service."]
    body = {"project": "vision", "kind": kind, "name": "x", "image": "pytorch/pytorch:2.4.0", "node_pool": "serve-l4",
            "gpus": 1, "labels": {"model": "m", "data_class": "public"}}
    refused = call(client_for("alice"), "POST", "workloads/", body)
    assert refused.status_code == 400 and "serving pool" in refused.json()["node_pool"][0], refused.content
    alice = client_for("alice")
    page = alice.get(reverse("workloads:submit", args=[kind])).content.decode()
    assert "L4 serving" not in page and "H100" in page
    posted = alice.post(reverse("workloads:submit", args=[kind]), submit_payload(kind, pool="serve-l4"))
    assert posted.status_code == 200 and "Select a valid choice" in posted.content.decode()
    assert not Workload.objects.filter(name__in=["x", f"my-{kind}"]).exists()
