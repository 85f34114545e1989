"""An inference service's endpoint through the portal's relay (the notebooks' service proxy, proxy mode): its
project's members reach the model server (kubesim's stand-in) behind its Service, anyone else gets 404, and a visitor
who is not signed in is sent to sign in."""

import json

import pytest
from django.test import Client
from django.urls import reverse

from apps.org.models import Project
from apps.workloads import services
from apps.workloads.models import Status, Workload
from tests.worker.conftest import serving_pool, signed_in, wait_for
from worker import tasks

GPU = "nvidia.com/gpu"


@pytest.fixture
def serving(kubesim, org):
    return serving_pool(kubesim, org, cards=2)


def _status(workload: Workload) -> str:
    return Workload.objects.get(pk=workload.pk).status


def test_the_projects_members_reach_the_model_server_and_nobody_else(kubesim, cluster, org, watcher, serving,
                                                                      web_reaches_kubesim):
    workload = services.inference_submit(
        actor=org["alice"], project=Project.objects.get(slug="vision"), node_pool=serving, name="llama",
        image="vllm/vllm-openai:v0.6.3", args=["--model", "meta-llama/Llama-3.1-8B"], gpus=1, replicas=1,
        model_label="llama-3-8b", data_class="public", serving_port=8080)
    models = reverse("workloads:endpoint", args=[workload.pk, "v1/models"])
    alice = signed_in(org["alice"])
    assert alice.get(models).status_code == 404  # not running yet: nothing to reach
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    kubesim.advance(1)
    wait_for(lambda: _status(workload) == Status.RUNNING, describe=lambda: _status(workload))

    answer = alice.get(models)
    assert answer.status_code == 200, answer.content
    assert [model["id"] for model in json.loads(answer.content)["data"]] == ["meta-llama/Llama-3.1-8B"]
    assert "sandbox" in answer["Content-Security-Policy"]
    completion = alice.post(reverse("workloads:endpoint", args=[workload.pk, "v1/completions"]),
                            json.dumps({"prompt": "the relay carries bodies"}), content_type="application/json")
    assert completion.status_code == 200, completion.content
    assert json.loads(completion.content)["choices"][0]["text"] == "the relay carries bodies"
    assert alice.get(reverse("workloads:endpoint", args=[workload.pk, "nothing/here"])).status_code == 404
    detail = alice.get(reverse("workloads:detail", args=[workload.pk])).content.decode()
    assert reverse("workloads:endpoint_root", args=[workload.pk]) in detail
    # No climbing out of the Service's proxy to other API paths with the portal's credentials.
    climb = reverse("workloads:endpoint", args=[workload.pk, "v1"]).replace("/v1", "/../../../secrets")
    assert alice.get(climb).status_code == 404

    for name in ("bob", "carol", "viewer"):  # not members of vision
        assert signed_in(org[name]).get(models).status_code == 404
    anonymous = Client().get(models)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("accounts:login"))

    services.workload_stop(actor=org["alice"], workload=Workload.objects.get(pk=workload.pk))
    assert tasks.workload_stop.apply(args=[workload.pk]).get() == "stopped"
    wait_for(lambda: _status(workload) == Status.STOPPED)
    assert alice.get(models).status_code == 404
