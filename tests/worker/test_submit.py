"""Submission end to end: service -> task -> Job in kubesim -> Kueue admits it per the quota tree."""

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.core.intents import intents_claim_due
from apps.core.models import Intent
from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, Status, Workload, WorkloadEvent
from tests.worker.conftest import kueue_workload, wait_for
from tests.write_transactions import described, transactions
from worker import tasks
from worker.manifests import job_manifest


def submit(user, *, project="vision", pool="h100", gpus=1, kind=Kind.TRAINING, preemptible=True, **extra):
    return services.workload_submit(
        actor=user, project=Project.objects.get(slug=project), kind=kind, name=extra.pop("name", "run"),
        image="pytorch/pytorch:2.4.0", command=extra.pop("command", ["sleep", "600"]),
        node_pool=NodePool.objects.get(slug=pool), gpus=gpus, model_label="resnet", data_class="public",
        preemptible=preemptible, **extra)


def condition(obj, kind):
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def test_submit_creates_a_suspended_kueue_job_that_kueue_admits(synced, demo, kubesim):
    workload = submit(demo["alice"], gpus=2)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    workload.refresh_from_db()
    assert workload.status == Status.QUEUED and workload.k8s_uid
    job = synced.get("Job", f"wl-{workload.pk}", namespace="proj-vision")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "elastic-h100"
    assert job["metadata"]["uid"] == workload.k8s_uid
    kubesim.advance(0)
    admitted = kueue_workload(synced, workload)
    assert condition(admitted, "Admitted")["status"] == "True"
    assert admitted["status"]["admission"]["clusterQueue"] == "proj-vision-h100-elastic"
    assert synced.get("Job", workload.job_name, namespace="proj-vision")["spec"]["suspend"] is False
    events = list(WorkloadEvent.objects.filter(workload=workload).values_list("to_status", flat=True))
    assert events == [Status.SUBMITTING, Status.QUEUED]


def test_non_preemptible_work_lands_in_the_guaranteed_queue(synced, demo, kubesim):
    workload = submit(demo["alice"], gpus=4, preemptible=False, priority_class=None)
    tasks.workload_submit.apply(args=[workload.pk])
    kubesim.advance(0)
    admitted = kueue_workload(synced, Workload.objects.get(pk=workload.pk))
    assert admitted["status"]["admission"]["clusterQueue"] == "proj-vision-h100-guaranteed"


def test_submit_twice_gives_one_job(synced, demo):
    workload = submit(demo["alice"])
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "not claimed"
    # Even a second worker that lost its claim and creates again adopts the existing Job.
    Workload.objects.filter(pk=workload.pk).update(status=Status.SUBMITTING, submit_claimed_at=None)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    assert len(synced.list("Job", namespace="proj-vision")) == 1


def test_the_worker_submits_in_two_write_transactions(synced, demo):
    """On SQLite every write transaction waits for the database's one writer: the task's are the claim (its intents
    leased and the row claimed) and the record of the Job; a change no notification channel listens to reads nothing
    of the workload's project, owner or pool inside the second."""
    workload = submit(demo["alice"])
    with CaptureQueriesContext(connection) as captured:
        assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    claim, mark = transactions(captured.captured_queries)
    assert described(claim) == ["SELECT core_intent", "UPDATE core_intent", "UPDATE workloads_workload"]
    # The claim read the row: the conditional UPDATE decides the transition, with no second read of it.
    assert described(mark) == ["UPDATE workloads_workload", "INSERT workloads_workloadevent", "UPDATE core_intent",
                               "SELECT org_notificationchannel"]
    # Between them, outside any transaction: the row with what the Job is built from, its data sources, credentials
    # and the project's pull secrets.
    assert len(captured.captured_queries) == 4 + len(claim) + len(mark) + 4


def test_a_job_the_watcher_saw_first_gets_its_details_in_the_same_transaction(synced, demo):
    workload = submit(demo["alice"])
    claimed = services.workload_claim_submit(workload_id=workload.pk).workload
    synced.create(job_manifest(claimed))
    Workload.objects.filter(pk=workload.pk).update(status=Status.QUEUED)  # the watcher saw the Job before the mark
    with CaptureQueriesContext(connection) as captured:
        assert services.workload_mark_submitted(workload=claimed, uid="uid-1", manifest={"kind": "Job"}) is True
    [mark] = transactions(captured.captured_queries)
    assert described(mark) == ["UPDATE workloads_workload", "UPDATE workloads_workload"]  # the transition found none
    marked = Workload.objects.get(pk=workload.pk)
    assert (marked.status, marked.k8s_uid, marked.submit_claimed_at) == (Status.QUEUED, "uid-1", None)
    assert list(WorkloadEvent.objects.filter(workload=workload).values_list("to_status", flat=True)) == [
        Status.SUBMITTING]  # the watcher's own transition writes its event; the mark writes none


@pytest.mark.slow
def test_retry_after_a_500_gives_one_job(synced, demo, kubesim, celery_worker):
    kubesim.faults(error_rate=1.0, verbs=["create"], resources=["jobs"])
    try:
        workload = submit(demo["alice"])  # the real worker picks it up after commit
        wait_for(lambda: Workload.objects.filter(pk=workload.pk, submit_attempts__gte=1,
                                                 submit_claimed_at__isnull=True).exists())
        assert Workload.objects.get(pk=workload.pk).status == Status.SUBMITTING
    finally:
        kubesim.clear_faults()
    wait_for(lambda: Workload.objects.get(pk=workload.pk).status == Status.QUEUED)
    assert len(synced.list("Job", namespace="proj-vision")) == 1
    assert Workload.objects.get(pk=workload.pk).submit_attempts >= 2


def test_exhausted_retries_mark_submit_failed(synced, demo, kubesim):
    workload = submit(demo["alice"])
    kubesim.faults(error_rate=1.0, verbs=["create"], resources=["jobs"])
    try:
        task = tasks.workload_submit
        result = task.apply(args=[workload.pk], retries=task.max_retries)
    finally:
        kubesim.clear_faults()
    assert result.get() == "submit_failed"
    workload.refresh_from_db()
    assert workload.status == Status.SUBMIT_FAILED and "Gave up after" in workload.status_message


def test_api_refusal_marks_rejected_with_the_api_message(synced, demo):
    workload = submit(demo["alice"])
    # A row the API server refuses (written before today's label rule, say): its label value has a space.
    Workload.objects.filter(pk=workload.pk).update(data_class="not public")
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "rejected"
    workload.refresh_from_db()
    assert workload.status == Status.REJECTED
    assert "The cluster refused the job" in workload.status_message and "metadata.labels" in workload.status_message
    assert not synced.list("Job", namespace="proj-vision")


def test_notebook_gets_a_service_owned_by_its_job(synced, demo):
    workload = submit(demo["alice"], kind=Kind.NOTEBOOK, pool="l40s-shared", name="nb", command=[])
    tasks.workload_submit.apply(args=[workload.pk])
    service = synced.get("Service", workload.job_name, namespace="proj-vision")
    assert service["metadata"]["ownerReferences"][0]["uid"] == Workload.objects.get(pk=workload.pk).k8s_uid
    assert service["spec"]["ports"][0]["targetPort"] == 8888


def test_stop_deletes_the_job(synced, demo, kubesim):
    workload = submit(demo["alice"])
    tasks.workload_submit.apply(args=[workload.pk])
    services.workload_stop(actor=demo["alice"], workload=Workload.objects.get(pk=workload.pk))
    assert Workload.objects.get(pk=workload.pk).status == Status.STOPPING
    assert tasks.workload_stop.apply(args=[workload.pk]).get() == "stopped"
    kubesim.advance(0)
    assert not synced.list("Job", namespace="proj-vision")
    assert not synced.list("Workload", namespace="proj-vision")
    stopped = Workload.objects.get(pk=workload.pk)
    assert stopped.status == Status.STOPPED and stopped.status_message == "Stopped by alice"


def test_stop_while_submitting_never_leaves_a_job(synced, demo):
    workload = submit(demo["alice"])
    claimed = services.workload_claim_submit(workload_id=workload.pk).workload  # a worker is mid-submit
    services.workload_stop(actor=demo["alice"], workload=workload)
    tasks.workload_stop.apply(args=[workload.pk])
    # The in-flight submit finishes its create and notices the stop.
    synced.create(job_manifest(claimed))
    assert services.workload_mark_submitted(workload=claimed, uid="x", manifest={}) is False
    assert Workload.objects.get(pk=workload.pk).status == Status.STOPPED


def test_sweep_re_enqueues_stuck_submissions(synced, demo):
    workload = submit(demo["alice"])
    intent = Intent.objects.get(kind="workload.submit", target_id=workload.pk)
    assert intent.task == "worker.tasks.workload_submit" and intent.dispatches == 1 and intent.done_at is None
    submit_task = ("worker.tasks.workload_submit", workload.pk)
    assert submit_task not in intents_claim_due()  # its deadline has not passed
    # Its deadline passes without a worker having done it (the broker lost the message).
    Intent.objects.filter(pk=intent.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert submit_task in intents_claim_due()
    assert submit_task not in intents_claim_due()  # sent once; its next deadline is further off
    intent.refresh_from_db()
    assert intent.dispatches == 2 and intent.next_attempt_at > timezone.now() + timedelta(seconds=50)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    intent.refresh_from_db()
    assert intent.done_at is not None and intent.outcome == Status.QUEUED and intent.attempts == 1


def test_a_stop_of_a_job_that_finished_meanwhile_records_its_final_state(synced, demo, kubesim):
    workload = submit(demo["alice"], command=["sleep", "5"])
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    kubesim.advance(6)  # it completes; no watcher has said so yet
    services.workload_stop(actor=demo["alice"], workload=Workload.objects.get(pk=workload.pk))
    assert tasks.workload_stop.apply(args=[workload.pk]).get() == "stopped"
    done = Workload.objects.get(pk=workload.pk)
    assert done.status == Status.SUCCEEDED and done.finished_at is not None
    assert Intent.objects.get(kind="workload.stop", target_id=workload.pk).outcome == Status.SUCCEEDED
    assert tasks.workload_stop.apply(args=[workload.pk]).get() == "not stopping"


def test_a_stop_records_the_cluster_time_of_the_deletion(synced, demo, kubesim):
    workload = submit(demo["alice"])
    tasks.workload_submit.apply(args=[workload.pk])
    cluster_now = kubesim.advance(7)
    services.workload_stop(actor=demo["alice"], workload=Workload.objects.get(pk=workload.pk))
    assert tasks.workload_stop.apply(args=[workload.pk]).get() == "stopped"
    stopped = Workload.objects.get(pk=workload.pk)
    assert stopped.finished_at == datetime.fromisoformat(cluster_now)  # the cluster's clock, not the portal's
    event = WorkloadEvent.objects.filter(workload=workload).order_by("-id").first()
    assert event.cluster_at == stopped.finished_at and event.message == "Stopped by alice"


def test_a_job_created_after_the_stop_is_deleted_by_the_follow_up(synced, demo):
    workload = submit(demo["alice"])
    claimed = services.workload_claim_submit(workload_id=workload.pk).workload  # a worker is mid-submit...
    services.workload_stop(actor=demo["alice"], workload=workload)
    assert tasks.workload_stop.apply(args=[workload.pk]).get() == "stopped"
    synced.create(job_manifest(claimed))  # ...creates the Job after the stop deleted nothing, and dies
    follow_up = Intent.objects.get(kind="workload.stop", target_id=workload.pk, done_at__isnull=True)
    assert tasks.workload_stop.apply(args=[workload.pk]).get() == "deleted again"  # the sweep sent it when due
    assert not synced.list("Job", namespace="proj-vision")
    follow_up.refresh_from_db()
    assert follow_up.done_at is not None and follow_up.outcome == "deleted again"
    assert Workload.objects.get(pk=workload.pk).status == Status.STOPPED
    assert tasks.workload_stop.apply(args=[workload.pk]).get() == "not stopping"
    assert follow_up.next_attempt_at > timezone.now() + timedelta(minutes=3)  # it waited for the claim to run out
