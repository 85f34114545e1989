"""Work on the demo's KAI pool end to end in kubesim (KAI emulated for its nodes): submitted through the API, created
by the submit task as a Job and its PodGroup (every write Strict), scheduled by KAI: halves of a card packed two to a
card, a half waiting while the pool is full, a training gang started whole, a stop deleting the Job and its PodGroup
with it."""

import pytest

from apps.org.demo import seed_demo_kai_pool
from apps.workloads import services
from apps.workloads.models import Status, Workload
from kubesim.apiserver.nodes.cluster import demo_cluster, kai_demo_pool
from kubesim.testing import serve
from tests.api_support import call
from worker import tasks
from worker.gateway import ClusterError

from .conftest import reconcile_organisation

POOL = "rtx-pro-6000"
NAMESPACE = "proj-vision"


@pytest.fixture(scope="module")
def kubesim():
    """The demo's cluster with the demo's KAI pool beside it (four nodes of four RTX PRO 6000, fractions on)."""
    with serve(clock="manual", nodes=demo_cluster() + kai_demo_pool()) as served:
        yield served


@pytest.fixture
def kai_pool(demo, kubesim, cluster):
    """The demo organisation with its KAI pool, reconciled (Queues and PriorityClasses for KAI)."""
    pool = seed_demo_kai_pool()
    reconcile_organisation(kubesim, cluster)
    return pool


def submitted(client_for, kubesim, **fields):
    """A workload submitted through the API as alice in vision on the KAI pool, created by the submit task."""
    body = {"project": "vision", "kind": "notebook", "name": "nb", "image": "jupyter/base-notebook:latest",
            "node_pool": POOL, "labels": {"model": "m", "data_class": "public"}, **fields}
    created = call(client_for("alice"), "POST", "workloads/", body)
    assert created.status_code == 201, created.content
    workload_id = created.json()["id"]
    assert tasks.workload_submit.apply(args=[workload_id]).get() == "submitted"
    kubesim.advance(0)
    return Workload.objects.get(pk=workload_id)


def pods_of(cluster, workload):
    return sorted(cluster.list("Pod", namespace=NAMESPACE, label_selector=f"portal.gpu/workload-id={workload.pk}"),
                  key=lambda pod: pod["metadata"]["name"])


def only_pod(cluster, workload):
    (pod,) = pods_of(cluster, workload)
    return pod


def test_halves_of_a_card_share_one_and_a_third_half_takes_another(kai_pool, synced, client_for, kubesim):
    first = submitted(client_for, kubesim, gpu_fraction=0.5)
    assert first.status == Status.QUEUED and first.gpu_fraction == 0.5 and first.gpus == 0
    job = synced.get("Job", first.job_name, namespace=NAMESPACE)
    assert job["spec"]["suspend"] is False and "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]
    group = synced.get("PodGroup", first.job_name, namespace=NAMESPACE)
    assert group["spec"] == {"minMember": 1, "queue": "proj-vision-rtx-pro-6000", "priorityClassName": "train",
                             "preemptibility": "preemptible"}
    assert group["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    pod = only_pod(synced, first)
    assert pod["spec"]["schedulerName"] == "kai-scheduler" and pod["spec"]["nodeName"].startswith(POOL)
    assert pod["spec"]["priority"] == 50  # from the organisation's PriorityClass, which KAI reads
    assert pod["metadata"]["annotations"]["gpu-fraction"] == "0.5"
    assert "nvidia.com/gpu" not in pod["spec"]["containers"][0]["resources"].get("limits", {})
    kubesim.advance(5)
    assert only_pod(synced, first)["status"]["phase"] == "Running"
    card = pod["metadata"]["labels"]["runai-gpu-group"]
    second = only_pod(synced, submitted(client_for, kubesim, name="nb-2", gpu_fraction=0.5))
    assert second["spec"]["nodeName"] == pod["spec"]["nodeName"]
    assert second["metadata"]["labels"]["runai-gpu-group"] == card  # two halves on one card
    third = only_pod(synced, submitted(client_for, kubesim, name="nb-3", gpu_fraction=0.5))
    assert third["spec"].get("nodeName") and third["metadata"]["labels"]["runai-gpu-group"] != card


def test_a_half_waits_while_the_pool_is_full_and_starts_when_the_gang_holding_it_stops(kai_pool, synced,
                                                                                       client_for, kubesim, demo):
    gang = submitted(client_for, kubesim, kind="training", name="big", image="pytorch/pytorch:2.4.0",
                     command=["sleep", "3600"], gpus=4, pods=4)
    assert len([pod for pod in pods_of(synced, gang) if pod["spec"].get("nodeName")]) == 4  # all 16 cards
    half = submitted(client_for, kubesim, gpu_fraction=0.5)
    assert not only_pod(synced, half)["spec"].get("nodeName")
    condition = synced.get("PodGroup", half.job_name, namespace=NAMESPACE)["status"]["schedulingConditions"][0]
    assert condition["type"] == "UnschedulableOnNodePool" and condition["nodePool"] == POOL
    services.workload_stop(actor=demo["alice"], workload=Workload.objects.get(pk=gang.pk))
    assert tasks.workload_stop.apply(args=[gang.pk]).get() == "stopped"
    kubesim.advance(35)  # the gang's pods end within their grace period, the Job goes and its PodGroup with it
    assert pods_of(synced, gang) == []
    with pytest.raises(ClusterError) as gone:
        synced.get("PodGroup", gang.job_name, namespace=NAMESPACE)
    assert gone.value.not_found
    kubesim.advance(0)
    assert only_pod(synced, half)["spec"].get("nodeName")


def test_a_two_pod_training_gang_starts_both_pods_together(kai_pool, synced, client_for, kubesim):
    gang = submitted(client_for, kubesim, kind="training", name="pair", image="pytorch/pytorch:2.4.0",
                     command=["sleep", "3600"], gpus=2, pods=2, preemptible=False, priority_class="build")
    assert synced.get("PodGroup", gang.job_name, namespace=NAMESPACE)["spec"]["minMember"] == 2
    pods = pods_of(synced, gang)
    assert len(pods) == 2 and all(pod["spec"].get("nodeName") for pod in pods)
    assert {pod["metadata"]["labels"]["kai.scheduler/preemptibility"] for pod in pods} == {"non-preemptible"}
    assert {pod["spec"]["priority"] for pod in pods} == {100}
    assert synced.get("Service", gang.job_name, namespace=NAMESPACE)["spec"]["clusterIP"] == "None"


def test_a_retried_submit_adopts_the_job_and_its_pod_group(kai_pool, synced, client_for, kubesim):
    workload = submitted(client_for, kubesim, gpu_fraction=0.25)
    Workload.objects.filter(pk=workload.pk).update(status=Status.SUBMITTING, submit_claimed_at=None)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    assert len(synced.list("PodGroup", namespace=NAMESPACE)) == 1
