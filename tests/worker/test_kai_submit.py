"""Work on the demo's KAI pool end to end in kubesim (KAI emulated for its nodes, its pod-grouper as KAI's): submitted
through the API and created by the submit task (every write Strict). One-pod work is a Job whose pod KAI's grouper
puts in a PodGroup of its own: halves of a card packed two to a card, a half waiting while the pool is full. A
training gang is the portal's PodGroup and ownerless pods: started whole or not at all, made again after KAI
reclaims it, its last ranks stopped when one fails, deleted with everything it owns at a stop."""

import pytest

from apps.core.models import Intent
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


def pod_group_of(cluster, pod):
    return cluster.get("PodGroup", pod["metadata"]["annotations"]["pod-group-name"], namespace=NAMESPACE)


def bound(pods):
    return [pod for pod in pods if pod["spec"].get("nodeName")]


def test_halves_of_a_card_share_one_and_a_third_half_takes_another(kai_pool, synced, client_for, kubesim):
    first = submitted(client_for, kubesim, gpu_fraction=0.5)
    assert first.status == Status.QUEUED and first.gpu_fraction == 0.5 and first.gpus == 0
    job = synced.get("Job", first.job_name, namespace=NAMESPACE)
    assert job["spec"]["suspend"] is False and "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]
    pod = only_pod(synced, first)
    # No PodGroup of the portal's: KAI's grouper made the pod's own from the Job's labels.
    group = pod_group_of(synced, pod)
    assert group["metadata"]["name"] == f"pg-{pod['metadata']['name']}-{job['metadata']['uid']}"
    assert group["spec"] == {"minMember": 1, "queue": "proj-vision-rtx-pro-6000", "priorityClassName": "train",
                             "preemptibility": "preemptible"}
    assert group["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert group["metadata"]["labels"]["kai.scheduler/node-pool"] == POOL
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
    assert len(bound(pods_of(synced, gang))) == 4  # all 16 cards
    half = submitted(client_for, kubesim, gpu_fraction=0.5)
    waiting = only_pod(synced, half)
    assert not waiting["spec"].get("nodeName")
    condition = pod_group_of(synced, waiting)["status"]["schedulingConditions"][0]
    assert condition["type"] == "UnschedulableOnNodePool" and condition["nodePool"] == POOL
    services.workload_stop(actor=demo["alice"], workload=Workload.objects.get(pk=gang.pk))
    assert tasks.workload_stop.apply(args=[gang.pk]).get() == "stopped"
    kubesim.advance(35)  # the gang's pods end within their grace period; its PodGroup and Service are gone
    assert pods_of(synced, gang) == []
    for kind in ("PodGroup", "Service"):
        with pytest.raises(ClusterError) as gone:
            synced.get(kind, gang.job_name, namespace=NAMESPACE)
        assert gone.value.not_found
    kubesim.advance(0)
    assert only_pod(synced, half)["spec"].get("nodeName")


def training(client_for, kubesim, **fields):
    return submitted(client_for, kubesim, kind="training", image="pytorch/pytorch:2.4.0", **{
        "name": "pair", "command": ["sleep", "3600"], "gpus": 2, "pods": 2, **fields})


def test_a_two_pod_training_is_the_portals_pod_group_and_ownerless_pods_started_together(kai_pool, synced,
                                                                                        client_for, kubesim):
    gang = training(client_for, kubesim, preemptible=False, priority_class="build")
    group = synced.get("PodGroup", gang.job_name, namespace=NAMESPACE)
    assert group["spec"] == {"minMember": 2, "queue": "proj-vision-rtx-pro-6000", "priorityClassName": "build",
                             "preemptibility": "non-preemptible"}
    assert "ownerReferences" not in group["metadata"] and gang.k8s_uid == group["metadata"]["uid"]
    pods = pods_of(synced, gang)
    assert [pod["metadata"]["name"] for pod in pods] == [f"{gang.job_name}-0", f"{gang.job_name}-1"]
    assert len(bound(pods)) == 2 and not any(pod["metadata"].get("ownerReferences") for pod in pods)
    assert {pod["metadata"]["annotations"]["pod-group-name"] for pod in pods} == {gang.job_name}  # KAI kept it
    assert {pod["metadata"]["labels"]["kai.scheduler/preemptibility"] for pod in pods} == {"non-preemptible"}
    assert {pod["spec"]["priority"] for pod in pods} == {100}
    assert [(pod["spec"]["hostname"], pod["spec"]["subdomain"]) for pod in pods] == [
        (f"{gang.job_name}-0", gang.job_name), (f"{gang.job_name}-1", gang.job_name)]
    ranks = [{env["name"]: env.get("value") for env in pod["spec"]["containers"][0]["env"]} for pod in pods]
    assert [(env["RANK"], env["MASTER_ADDR"], env["WORLD_SIZE"]) for env in ranks] == [
        ("0", f"{gang.job_name}-0.{gang.job_name}", "2"), ("1", f"{gang.job_name}-0.{gang.job_name}", "2")]
    service = synced.get("Service", gang.job_name, namespace=NAMESPACE)
    assert service["spec"]["clusterIP"] == "None"
    assert service["metadata"]["ownerReferences"][0]["kind"] == "PodGroup"  # it goes with the gang
    created = gang.events.get(reason="Created")
    assert created.message == (f"PodGroup {gang.job_name} and its 2 pods created in {NAMESPACE}; "
                               "waiting for KAI Scheduler")


def test_a_gang_binds_whole_or_not_at_all(kai_pool, synced, client_for, kubesim):
    filler = training(client_for, kubesim, name="filler", gpus=4, pods=3)  # 12 of the 16 cards: one node left
    assert len(bound(pods_of(synced, filler))) == 3
    gang = training(client_for, kubesim, gpus=4)  # two nodes' worth: one would fit, so neither is bound
    assert bound(pods_of(synced, gang)) == []
    condition = synced.get("PodGroup", gang.job_name, namespace=NAMESPACE)["status"]["schedulingConditions"][0]
    assert condition["message"].startswith("0/4 nodes are available")
    synced.delete("Pod", f"{filler.job_name}-0", namespace=NAMESPACE)
    kubesim.advance(35)
    assert len(bound(pods_of(synced, gang))) == 2  # both at once, once two nodes are free


def test_a_reclaimed_gang_is_made_again_and_waits_then_runs(kai_pool, synced, client_for, kubesim):
    # Vision borrows the whole pool (4 deserved); KAI reclaims its newest gang for NLP, which stays at its fair share.
    training(client_for, kubesim, name="filler", gpus=4, pods=3)
    gang = training(client_for, kubesim)
    assert len(bound(pods_of(synced, gang))) == 2
    body = {"project": "nlp", "kind": "training", "name": "reclaim", "image": "pytorch/pytorch:2.4.0",
            "command": ["sleep", "600"], "node_pool": POOL, "gpus": 4, "labels": {"model": "m", "data_class": "public"}}
    created = call(client_for("bob"), "POST", "workloads/", body)
    assert created.status_code == 201, created.content
    assert tasks.workload_submit.apply(args=[created.json()["id"]]).get() == "submitted"
    kubesim.advance(35)  # KAI evicts the gang's ranks (the filler's would take Vision below its fair share)
    assert pods_of(synced, gang) == [] and len(pods_of(synced, Workload.objects.get(name="filler"))) == 3
    assert tasks.kai_gang_repair.apply(args=[gang.pk]).get() == "made 2"
    kubesim.advance(0)
    again = pods_of(synced, gang)
    assert [pod["metadata"]["name"] for pod in again] == [f"{gang.job_name}-0", f"{gang.job_name}-1"]
    assert bound(again) == []  # NLP holds the cards it needs: it waits, as a Job's pods would
    assert tasks.kai_gang_repair.apply(args=[gang.pk]).get() == "complete"
    kubesim.advance(600)  # NLP's run ends
    kubesim.advance(0)
    assert len(bound(pods_of(synced, gang))) == 2


def test_a_retried_submit_adopts_the_job_and_a_gang_adopts_its_pod_group_and_pods(kai_pool, synced, client_for,
                                                                                 kubesim):
    workload = submitted(client_for, kubesim, gpu_fraction=0.25)
    Workload.objects.filter(pk=workload.pk).update(status=Status.SUBMITTING, submit_claimed_at=None)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    assert len(synced.list("PodGroup", namespace=NAMESPACE)) == 1  # KAI's, for the Job's one pod
    gang = training(client_for, kubesim)
    Workload.objects.filter(pk=gang.pk).update(status=Status.SUBMITTING, submit_claimed_at=None)
    assert tasks.workload_submit.apply(args=[gang.pk]).get() == "submitted"
    assert Workload.objects.get(pk=gang.pk).k8s_uid == gang.k8s_uid and len(pods_of(synced, gang)) == 2
    assert len(synced.list("PodGroup", namespace=NAMESPACE)) == 2


def test_a_repair_asked_for_a_finished_gang_stops_its_ranks_still_running(kai_pool, synced, client_for, kubesim):
    gang = training(client_for, kubesim)
    services.workload_gang_repair_request(workload_id=gang.pk)
    assert services.workload_gang_repair_request(workload_id=gang.pk) is False  # one open request per gang
    Workload.objects.filter(pk=gang.pk).update(status=Status.FAILED)  # as the watcher records a rank's failure
    assert tasks.kai_gang_repair.apply(args=[gang.pk]).get() == "stopped 2"
    assert all(pod["metadata"].get("deletionTimestamp") for pod in pods_of(synced, gang))
    assert not Intent.objects.filter(kind=services.GANG_REPAIR_INTENT, target_id=gang.pk, done_at=None).exists()


def test_a_repair_waits_while_a_lost_rank_still_terminates_then_makes_it_again(kai_pool, synced, client_for,
                                                                                kubesim):
    gang = training(client_for, kubesim)
    services.workload_gang_repair_request(workload_id=gang.pk)
    rank = f"{gang.job_name}-1"
    # the rank's container takes 20 s to stop on SIGTERM (kubesim's stop-seconds): it stays, terminating, meanwhile
    synced.raw_patch(f"/api/v1/namespaces/{NAMESPACE}/pods/{rank}",
                     {"metadata": {"annotations": {"kubesim.io/stop-seconds": "20"}}})
    synced.delete("Pod", rank, namespace=NAMESPACE)
    assert tasks.kai_gang_repair.apply(args=[gang.pk]).get() == "waiting"
    (intent,) = Intent.objects.filter(kind=services.GANG_REPAIR_INTENT, target_id=gang.pk)
    assert intent.done_at is None and intent.claimed_until is None and "terminating" in intent.last_error
    kubesim.advance(21)
    assert [pod["metadata"]["name"] for pod in pods_of(synced, gang)] == [f"{gang.job_name}-0"]
    assert tasks.kai_gang_repair.apply(args=[gang.pk]).get() == "made 1"
    kubesim.advance(0)
    assert len(bound(pods_of(synced, gang))) == 2  # the gang is whole again
    intent.refresh_from_db()
    assert intent.done_at is not None and intent.outcome == "made 1"
