"""Work on KAI pools is not submitted by the portal yet: every way in refuses it with a message saying so, and
nothing is created."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from apps.org import services as org_services
from apps.org.models import Department, Project
from apps.workloads import services
from apps.workloads.models import Workload
from tests.api_support import call

from .helpers import submit_payload

REFUSAL = ("RTX PRO 6000 is scheduled by KAI Scheduler, and work on KAI pools is not yet submitted by the portal. "
           "Choose a Kueue pool.")


@pytest.fixture
def kai_pool(demo):
    pool = org_services.node_pool_create(actor=demo["admin"], slug="rtx", name="RTX PRO 6000",
                                         gpu_resource="nvidia.com/gpu", capacity=16, scheduler="kai",
                                         gpu_fractions=True)
    org_services.quota_set(actor=demo["admin"], node_pool=pool, department=Department.objects.get(slug="research"),
                           deserved=4, limit=None)
    org_services.quota_set(actor=demo["admin"], node_pool=pool, project=Project.objects.get(slug="vision"),
                           deserved=4, limit=None)
    return pool


@pytest.mark.parametrize("kind", ["training", "batch", "notebook"])
def test_work_on_a_kai_pool_is_refused_everywhere(client_for, page_client, demo, kai_pool, kind):
    with pytest.raises(ValidationError) as caught:
        services.workload_submit(
            actor=demo["alice"], project=Project.objects.get(slug="vision"), kind=kind, name="x",
            image="pytorch/pytorch:2.4.0", command=["sleep", "60"], node_pool=kai_pool, gpus=1, model_label="m",
            data_class="public", preemptible=True)
    assert caught.value.message_dict["node_pool"] == [REFUSAL]
    body = {"project": "vision", "kind": kind, "name": "x", "image": "pytorch/pytorch:2.4.0", "node_pool": "rtx",
            "gpus": 1, "labels": {"model": "m", "data_class": "public"}}
    refused = call(client_for("alice"), "POST", "workloads/", body)
    assert refused.status_code == 400 and refused.json()["node_pool"] == [REFUSAL], refused.content
    posted = page_client("alice").post(reverse("workloads:submit", args=[kind]), submit_payload(kind, pool="rtx"))
    assert posted.status_code == 200
    assert list(posted.context["form"].errors["node_pool"]) == [REFUSAL]
    assert not Workload.objects.filter(node_pool=kai_pool).exists()
