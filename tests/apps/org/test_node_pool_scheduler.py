"""A pool's scheduler (Kueue or KAI) and its GPU fractions: pages, API and service refuse what cannot work, every
reason at once, and a scheduler never changes under live work."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import NodePool
from apps.workloads.models import Status
from tests.api_support import call, org_state
from tests.factories import WorkloadFactory

from .view_helpers import pool_payload

FRACTIONS_NEED_KAI = ("GPU fractions need KAI Scheduler: Kueue counts whole units. Choose the KAI scheduler for this "
                      "pool, or turn fractions off.")


def test_a_pool_is_kueue_without_fractions_unless_told(demo):
    pool = services.node_pool_create(actor=demo["admin"], slug="b200", name="B200", gpu_resource="nvidia.com/gpu",
                                     capacity=8)
    assert (pool.scheduler, pool.gpu_fractions) == ("kueue", False)


def test_a_kai_pool_with_fractions_is_created_and_audited(demo):
    pool = services.node_pool_create(actor=demo["admin"], slug="rtx", name="RTX", gpu_resource="nvidia.com/gpu",
                                     capacity=16, scheduler="kai", gpu_fractions=True)
    event = AuditEvent.objects.get(action="node_pool.create", object_id=str(pool.pk))
    assert event.after["scheduler"] == "kai" and event.after["gpu_fractions"] is True


def test_fractions_on_a_kueue_pool_and_kai_on_a_serving_pool_are_refused_together(demo):
    before = org_state()
    with pytest.raises(ValidationError) as caught:
        services.node_pool_create(actor=demo["admin"], slug="b200", name="", gpu_resource="nvidia.com/gpu",
                                  capacity=8, gpu_fractions=True)
    errors = caught.value.message_dict
    assert errors["gpu_fractions"] == [FRACTIONS_NEED_KAI]
    assert errors["name"] == ["This field cannot be blank."]
    with pytest.raises(ValidationError) as caught:
        services.node_pool_create(actor=demo["admin"], slug="serve", name="Serve", gpu_resource="nvidia.com/gpu",
                                  capacity=8, serving=True, scheduler="kai")
    assert "A serving pool has no queues" in caught.value.message_dict["scheduler"][0]
    assert org_state() == before


def test_scheduler_changes_while_the_pool_is_idle_and_is_audited(demo):
    pool = NodePool.objects.get(slug="h100")
    WorkloadFactory(node_pool=pool, status=Status.SUCCEEDED)  # finished work does not hold the pool
    services.node_pool_update(actor=demo["admin"], node_pool=pool, scheduler="kai", gpu_fractions=True)
    event = AuditEvent.objects.filter(action="node_pool.update", object_id=str(pool.pk)).latest("pk")
    assert (event.before["scheduler"], event.after["scheduler"]) == ("kueue", "kai")
    assert event.after["gpu_fractions"] is True


@pytest.mark.parametrize("status", [Status.QUEUED, Status.RUNNING, Status.STOPPING])
def test_scheduler_does_not_change_under_live_work(demo, status):
    pool = NodePool.objects.get(slug="h100")
    WorkloadFactory.create_batch(2, node_pool=pool, status=status)
    before = org_state()
    with pytest.raises(ValidationError) as caught:
        services.node_pool_update(actor=demo["admin"], node_pool=pool, scheduler="kai", capacity=15)
    errors = caught.value.message_dict
    assert errors["scheduler"] == [
        "2 workloads are live on h100 (queued, admitted, running or stopping); its scheduler cannot change until they "
        "finish or are stopped: that work sits in the queues of the scheduler the pool has now."]
    assert "more than a capacity of 15" in errors["capacity"][0]  # every reason at once
    assert org_state() == before
    # Other changes to a busy pool still go through.
    services.node_pool_update(actor=demo["admin"], node_pool=pool, description="busy")


def test_turning_fractions_on_for_a_kueue_pool_is_refused(demo):
    pool = NodePool.objects.get(slug="h100")
    with pytest.raises(ValidationError) as caught:
        services.node_pool_update(actor=demo["admin"], node_pool=pool, gpu_fractions=True)
    assert caught.value.message_dict == {"gpu_fractions": [FRACTIONS_NEED_KAI]}
    assert NodePool.objects.get(slug="h100").gpu_fractions is False


def test_api_reads_and_writes_the_scheduler(client_for, demo):
    admin = client_for("admin")
    created = call(admin, "POST", "node-pools/", {"slug": "rtx", "name": "RTX", "gpu_resource": "nvidia.com/gpu",
                                                  "capacity": 16, "scheduler": "kai", "gpu_fractions": True})
    assert created.status_code == 201, created.content
    assert (created.json()["scheduler"], created.json()["gpu_fractions"]) == ("kai", True)
    pools = call(client_for("alice"), "GET", "node-pools/?page_size=100").json()["results"]
    assert {pool["slug"]: pool["scheduler"] for pool in pools}["h100"] == "kueue"


def test_api_refuses_fractions_on_kueue_and_an_unknown_scheduler_with_every_field(client_for, demo):
    admin = client_for("admin")
    before = org_state()
    response = call(admin, "POST", "node-pools/", {"slug": "rtx", "name": "RTX", "gpu_resource": "nvidia.com/gpu",
                                                   "capacity": 16, "gpu_fractions": True})
    assert response.status_code == 400, response.content
    assert response.json() == {"gpu_fractions": [FRACTIONS_NEED_KAI]}
    response = call(admin, "POST", "node-pools/", {"slug": "rtx", "name": "RTX", "gpu_resource": "nvidia.com/gpu",
                                                   "capacity": "many", "scheduler": "volcano"})
    assert response.status_code == 400
    assert set(response.json()) == {"capacity", "scheduler"}
    assert org_state() == before


def test_api_refuses_a_scheduler_change_under_live_work(client_for, demo):
    pool = NodePool.objects.get(slug="h100")
    WorkloadFactory(node_pool=pool, status=Status.RUNNING)
    response = call(client_for("admin"), "PATCH", f"node-pools/{pool.pk}/",
                    {"scheduler": "kai", "version": pool.version})
    assert response.status_code == 400, response.content
    assert response.json()["scheduler"][0].startswith("1 workload is live on h100")
    assert NodePool.objects.get(slug="h100").scheduler == "kueue"


def test_pool_form_sets_and_shows_the_scheduler(page_client):
    client = page_client("admin")
    client.post(reverse("org:pool_create"), pool_payload(scheduler="kai", gpu_fractions="on"))
    pool = NodePool.objects.get(slug="b200")
    assert (pool.scheduler, pool.gpu_fractions) == ("kai", True)
    form = client.get(reverse("org:pool_edit", args=["b200"])).context["form"]
    assert (form.initial["scheduler"], form.initial["gpu_fractions"]) == ("kai", True)
    assert "KAI Scheduler; GPU fractions on" in client.get(reverse("org:pool", args=["b200"])).content.decode()


def test_pool_form_refuses_fractions_on_kueue_with_the_other_errors(page_client):
    response = page_client("admin").post(reverse("org:pool_create"), pool_payload(gpu_fractions="on", capacity=""))
    errors = {name: list(messages) for name, messages in response.context["form"].errors.items()}
    assert errors["gpu_fractions"] == [FRACTIONS_NEED_KAI]
    assert errors["capacity"] == ["This field is required."]
    assert not NodePool.objects.filter(slug="b200").exists()
