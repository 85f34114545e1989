"""Each kind kubesim runs under Kueue, submitted outside the portal with the official client as a user would with
kubectl, against the real watcher: it appears with its kind, origin and attribution, waits with a queue position
and an explanation, is admitted, finishes, and its GPU-hours are its admitted time times its GPUs; an outside
JobSet is preempted by the portal's own work and requeued."""

from datetime import timedelta

import pytest
from kubernetes import client as k8s

from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.explain import explain_workloads
from apps.workloads.models import Kind, Origin, Status, Workload, WorkloadEvent
from tests.kubesim.conftest import (
    jobset_body,
    pytorch_replica,
    pytorchjob_body,
    replicated_job,
    trainjob_body,
)
from tests.kubesim.ray import raycluster_body, rayjob_body, worker_group
from tests.worker.conftest import signed_in, wait_for
from tests.worker.test_watcher import submit
from tests.worker.test_watcher_outside import batch_job
from worker import tasks

pytestmark = pytest.mark.slow
QUEUE = {"kueue.x-k8s.io/queue-name": "guaranteed-h100", "portal.gpu/user": "alice"}
GPU = "nvidia.com/gpu"

# kind -> (group, version, plural, body of an object asking for 4 H100 in all for 300 s)
KINDS = {
    Kind.JOB: ("batch", "v1", "jobs", lambda name: {**(job := batch_job(name, pods=2, gpus=2, seconds=300)),
                                                    "metadata": {**job["metadata"], "labels": QUEUE}}),
    Kind.JOBSET: ("jobset.x-k8s.io", "v1alpha2", "jobsets", lambda name: jobset_body(
        name, replicated_job("leader", command="sleep 300", requests={GPU: "2"}),
        replicated_job("workers", command="sleep 300", requests={GPU: "1"}, parallelism=2), labels=QUEUE)),
    Kind.PYTORCHJOB: ("kubeflow.org", "v1", "pytorchjobs", lambda name: pytorchjob_body(
        name, master=pytorch_replica(1, command="sleep 300", requests={GPU: "2"}),
        worker=pytorch_replica(2, command="sleep 300", requests={GPU: "1"}), labels=QUEUE)),
    Kind.TRAINJOB: ("trainer.kubeflow.org", "v1alpha1", "trainjobs", lambda name: trainjob_body(
        name, labels=QUEUE, numNodes=2, command=["sh", "-c", "sleep 300"],
        resourcesPerNode={"requests": {GPU: "2"}, "limits": {GPU: "2"}})),
    Kind.RAYJOB: ("ray.io", "v1", "rayjobs", lambda name: rayjob_body(
        name, worker_group("gpu", 2, {GPU: "2"}), entrypoint="sleep 300", labels=QUEUE)),
}


def create(kubesim, kind, name):
    group, version, plural, body = KINDS[kind]
    manifest = body(name)
    if kind == Kind.JOB:
        return k8s.BatchV1Api(kubesim.api_client()).create_namespaced_job("proj-vision", manifest)
    return k8s.CustomObjectsApi(kubesim.api_client()).create_namespaced_custom_object(
        group, version, "proj-vision", plural, manifest)


def row_of(name):
    return Workload.objects.filter(origin=Origin.OUTSIDE, object_name=name).select_related(
        "owner", "project__department", "node_pool").first()


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_waits_is_admitted_finishes_and_is_counted(kubesim, org, watcher, kind):
    # Vision's 4 guaranteed H100 are held by the portal's own non-preemptible run for 120 s.
    holder = submit(kubesim, org["alice"], gpus=4, preemptible=False, seconds=120, name="holder")
    wait_for(lambda: Workload.objects.get(pk=holder.pk).status == Status.RUNNING)
    create(kubesim, kind, f"outside-{kind}")
    row = wait_for(lambda: (found := row_of(f"outside-{kind}")) and found.queue_position_local is not None and found,
                   describe=lambda: row_of(f"outside-{kind}"))
    assert row.kind == kind and row.origin == Origin.OUTSIDE and row.owner.username == "alice"
    assert row.gpu_units == 4 and row.status == Status.QUEUED and row.queue_position_local == 0
    explanation = explain_workloads([row], viewer=org["alice"])[row.pk]
    assert explanation is not None and "4 x H100 80GB" in explanation.sentence
    assert signed_in(org["alice"]).get(f"/workloads/{row.pk}/").status_code == 200

    kubesim.advance(120)  # the holder ends; the outside work is admitted
    admitted = wait_for(lambda: (found := row_of(f"outside-{kind}")) and found.admitted_at and found)
    assert admitted.admission["pod_sets"] and admitted.cluster_queue == "proj-vision-h100-guaranteed"
    kubesim.advance(310)
    done = wait_for(lambda: (found := row_of(f"outside-{kind}")) and found.status == Status.SUCCEEDED and found,
                    describe=lambda: (row_of(f"outside-{kind}").status, row_of(f"outside-{kind}").status_message))
    interval = wait_for(lambda: UsageInterval.objects.filter(workload_id=done.pk, ended_at__isnull=False).first())
    held = (interval.ended_at - interval.started_at).total_seconds()
    assert interval.units == 4 and interval.user_id == org["alice"].pk
    assert 300 <= held <= 312  # its pods' 300 s, from admission to the finish Kueue records
    # The showback by user, as alice reads it: her portal run's 4 x 120 s and the outside work's 4 x its time.
    day = interval.started_at.date()
    window = {"group_by": "user", "start": (day - timedelta(days=1)).isoformat(),
              "end": (day + timedelta(days=1)).isoformat()}
    rows = signed_in(org["alice"]).get("/api/v1/usage/", window).json()["rows"]
    mine = next(row for row in rows if row["username"] == "alice")
    assert mine["gpu_hours"] == pytest.approx((4 * 120 + 4 * held) / 3600, abs=0.0002)


def test_an_outside_jobset_is_preempted_by_the_portal_and_requeued(kubesim, org, watcher):
    # Forecasting fills Data Science's cards and Serving keeps its own: Vision borrows NLP's idle deserved cards
    # with an outside JobSet in its elastic queue; NLP's portal run reclaims them.
    ds = submit(kubesim, org["carol"], project="forecasting", name="ds")
    wait_for(lambda: Workload.objects.get(pk=ds.pk).status == Status.RUNNING)
    k8s.CustomObjectsApi(kubesim.api_client()).create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", "proj-vision", "jobsets", jobset_body(
            "borrower", replicated_job("main", command="sleep 3600", requests={GPU: "4"}, parallelism=2),
            labels={"kueue.x-k8s.io/queue-name": "elastic-h100"}))
    # Admitted: Kueue says running only through PodsReady (waitForPodsReady), which this cluster leaves off.
    borrower = wait_for(lambda: (found := row_of("borrower")) and found.status in (Status.ADMITTED, Status.RUNNING)
                        and found,
                        describe=lambda: row_of("borrower"))
    assert borrower.gpu_units == 8 and borrower.preemptible
    reclaimer = submit(kubesim, org["bob"], project="nlp", preemptible=False, gpus=4, name="reclaim")
    wait_for(lambda: Workload.objects.get(pk=reclaimer.pk).status == Status.RUNNING)
    event = wait_for(lambda: WorkloadEvent.objects.filter(workload=borrower, to_status=Status.PREEMPTED).first())
    assert event.details["preemptor_job_uid"] == Workload.objects.get(pk=reclaimer.pk).k8s_uid
    wait_for(lambda: row_of("borrower").status == Status.REQUEUED)
    first = UsageInterval.objects.filter(workload_id=borrower.pk).order_by("started_at").first()
    assert first.ended_at == event.cluster_at and first.units == 8
    assert first.ended_at - first.started_at >= timedelta(seconds=0)


def test_an_outside_raycluster_holds_its_gpus_until_stopped_through_the_portal(kubesim, org, watcher):
    """A RayCluster never finishes on its own: it holds its workers' GPUs until someone deletes it."""
    k8s.CustomObjectsApi(kubesim.api_client()).create_namespaced_custom_object(
        "ray.io", "v1", "proj-vision", "rayclusters", raycluster_body(
            "notebook-cluster", worker_group("gpu", 2, {GPU: "1"}), labels=QUEUE))
    row = wait_for(lambda: (found := row_of("notebook-cluster")) and found.admitted_at and found,
                   describe=lambda: row_of("notebook-cluster"))
    assert row.kind == Kind.RAYCLUSTER and row.gpu_units == 2
    assert [(s["name"], s["count"], s["gpus"]) for s in row.pod_sets] == [("head", 1, 0), ("gpu", 2, 1)]
    kubesim.advance(900)
    services.workload_stop(actor=org["alice"], workload=row)
    assert tasks.workload_stop.apply(args=[row.pk]).get() == "stopped"
    wait_for(lambda: row_of("notebook-cluster").status == Status.STOPPED)
    interval = wait_for(lambda: UsageInterval.objects.filter(workload_id=row.pk, ended_at__isnull=False).first())
    assert interval.units == 2 and (interval.ended_at - interval.started_at).total_seconds() >= 900
    assert not k8s.CustomObjectsApi(kubesim.api_client()).list_namespaced_custom_object(
        "ray.io", "v1", "proj-vision", "rayclusters")["items"]
