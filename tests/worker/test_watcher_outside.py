"""Work submitted outside the portal (kubectl, pipelines) against kubesim with the real watcher: mirrored with its
kind, origin and attribution, scoped, counted in GPU-hours; what cannot be mapped kept for admins."""

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from kubernetes import client as k8s

from apps.cluster.models import ClusterQueueState, UnmappedWork
from apps.core.models import AuditEvent
from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.history import preemptions
from apps.workloads.models import ForecastBasis, Kind, Origin, Status, Workload, WorkloadEvent, WorkloadForecast
from apps.workloads.selectors import preemptions_seen_by
from tests.worker.conftest import signed_in, wait_for
from tests.worker.test_watcher import submit
from worker import tasks
from worker.forecast import forecasts_refresh

pytestmark = pytest.mark.slow


def batch_job(name, *, namespace="proj-vision", queue="guaranteed-h100", pods=2, gpus=2, seconds=600, labels=None,
              annotations=None):
    """A batch/v1 Job as a researcher would `kubectl apply` it: the queue label, GPUs per pod, parallel pods."""
    metadata = {"name": name, "namespace": namespace, "labels": {**({"kueue.x-k8s.io/queue-name": queue}
                                                                     if queue else {}), **(labels or {})}}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
        "spec": {"parallelism": pods, "completions": pods, "suspend": True, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["sleep",
                                                                                                   str(seconds)],
                            "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "2", "memory": "8Gi"},
                                          "limits": {"nvidia.com/gpu": str(gpus)}}}]}}},
    }


def create_job(kubesim, manifest, *, manager="kubectl-create"):
    batch = k8s.BatchV1Api(kubesim.api_client())
    return batch.create_namespaced_job(manifest["metadata"]["namespace"], manifest, field_manager=manager)


def outside(name):
    return Workload.objects.filter(origin=Origin.OUTSIDE, object_name=name).select_related("owner").first()


def test_a_kubectl_job_is_mirrored_attributed_scoped_and_counted(kubesim, org, watcher):
    create_job(kubesim, batch_job("kubectl-train"))
    row = wait_for(lambda: (found := outside("kubectl-train")) and found.status in (
        Status.ADMITTED, Status.RUNNING) and found, describe=lambda: outside("kubectl-train"))
    assert row.kind == Kind.JOB and row.project.slug == "vision" and row.node_pool.slug == "h100"
    assert row.preemptible is False and row.gpu_units == 4 and row.pod_count == 2
    assert row.owner is None and row.submitted_by == "kubectl-create"
    assert row.submitter_label == "outside the portal (kubectl-create)"
    assert row.pod_sets == [{"name": "main", "count": 2, "gpus": 2, "cpu": "2.000", "memory_gib": "8.00"}]
    assert row.image == "nvcr.io/nvidia/pytorch:24.05-py3" and row.cluster_queue == "proj-vision-h100-guaranteed"
    assert row.admission["pod_sets"][0]["flavors"] == {"nvidia.com/gpu": "h100"}

    # Members of Vision see it in the list and on its page; another department gets 404.
    alice, carol = signed_in(org["alice"]), signed_in(org["carol"])
    listed = alice.get("/api/v1/workloads/", {"project": "vision"}).json()["results"]
    assert row.pk in [item["id"] for item in listed]
    page = alice.get(f"/workloads/{row.pk}/")
    assert page.status_code == 200 and b"Submitted outside the portal" in page.content
    assert carol.get(f"/workloads/{row.pk}/").status_code == 404
    assert carol.get(f"/api/v1/workloads/{row.pk}/").status_code == 404

    # It runs its 600 s on the cluster's clock: 4 GPUs x 600 s = 0.667 GPU-hours, as for the portal's own work.
    kubesim.advance(600)
    wait_for(lambda: Workload.objects.get(pk=row.pk).status == Status.SUCCEEDED)
    interval = wait_for(lambda: UsageInterval.objects.filter(workload_id=row.pk, ended_at__isnull=False).first())
    assert interval.units == 4 and interval.user_id is None
    assert interval.ended_at - interval.started_at == timedelta(seconds=600)
    assert Decimal(4 * 600) / 3600 == pytest.approx(Decimal("0.6667"), abs=Decimal("0.0001"))
    events = list(WorkloadEvent.objects.filter(workload_id=row.pk).values_list("to_status", flat=True))
    assert events[0] == Status.QUEUED and events[-1] == Status.SUCCEEDED


def test_the_owner_label_and_the_admission_stamp_name_a_portal_user(kubesim, org, watcher):
    create_job(kubesim, batch_job("pipeline-run", labels={"portal.gpu/user": "alice"}, pods=1, gpus=1),
               manager="argo")
    create_job(kubesim, batch_job("stamped-run", annotations={"portal.gpu/submitted-by": "alice"}, pods=1, gpus=1))
    create_job(kubesim, batch_job("stranger-run", annotations={"portal.gpu/submitted-by": "system:serviceaccount:"
                                                                                       "ci:runner"}, pods=1, gpus=1))
    labelled = wait_for(lambda: outside("pipeline-run"))
    stamped = wait_for(lambda: outside("stamped-run"))
    stranger = wait_for(lambda: outside("stranger-run"))
    assert labelled.owner.username == "alice" and labelled.submitted_by == "argo"
    assert stamped.owner.username == "alice" and stamped.submitted_by == "alice"
    assert stranger.owner is None and stranger.submitter_label == \
        "outside the portal (system:serviceaccount:ci:runner)"
    # alice's own list (the default for a researcher) holds the two attributed to her.
    mine = signed_in(org["alice"]).get("/api/v1/workloads/", {"owner": "alice"}).json()["results"]
    names = {item["name"] for item in mine}
    assert {"pipeline-run", "stamped-run"} <= names and "stranger-run" not in names


def test_what_cannot_be_mapped_is_kept_for_admins_and_never_half_written(kubesim, org, watcher):
    core = k8s.CoreV1Api(kubesim.api_client())
    core.create_namespace({"metadata": {"name": "team-x"}})
    create_job(kubesim, batch_job("elsewhere", namespace="team-x", queue="default"))
    create_job(kubesim, batch_job("odd-queue", queue="someone-elses-queue"))
    gone_wrong = wait_for(lambda: UnmappedWork.objects.filter(name__startswith="job-odd-queue").first())
    assert gone_wrong.reason == UnmappedWork.Reason.NO_QUEUE and gone_wrong.project.slug == "vision"
    assert gone_wrong.gpus == 4
    assert not Workload.objects.filter(object_name__in=["elsewhere", "odd-queue"]).exists()


def test_gpu_pods_outside_the_queue_are_flagged(kubesim, org, watcher):
    core = k8s.CoreV1Api(kubesim.api_client())
    core.create_namespaced_pod("proj-vision", {"metadata": {"name": "rogue"}, "spec": {"containers": [{
        "name": "main", "image": "busybox", "command": ["sleep", "3600"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    watcher.unqueued_pods_scan()
    flagged = UnmappedWork.objects.get(name="rogue")
    assert flagged.reason == UnmappedWork.Reason.OUTSIDE_QUEUE and flagged.gpus == 1
    core.delete_namespaced_pod("rogue", "proj-vision", grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod("proj-vision", field_selector="metadata.name=rogue").items)
    watcher.unqueued_pods_scan()
    assert not UnmappedWork.objects.filter(name="rogue").exists()


def test_stop_deletes_the_object_for_its_owner_and_team_leads_audited(kubesim, org, watcher):
    create_job(kubesim, batch_job("to-stop", labels={"portal.gpu/user": "alice"}, pods=1, gpus=1))
    create_job(kubesim, batch_job("lead-stops", pods=1, gpus=1))
    mine = wait_for(lambda: (row := outside("to-stop")) and row.status in (Status.ADMITTED, Status.RUNNING) and row)
    theirs = wait_for(lambda: (row := outside("lead-stops")) and row.status in (Status.ADMITTED, Status.RUNNING)
                      and row)
    # bob (NLP) may not stop Vision's work; alice may not stop what is not attributed to her.
    with pytest.raises(PermissionDenied):
        services.workload_stop(actor=org["bob"], workload=mine)
    with pytest.raises(PermissionDenied):
        services.workload_stop(actor=org["alice"], workload=theirs)
    services.workload_stop(actor=org["alice"], workload=mine)
    services.workload_stop(actor=org["lead"], workload=theirs)
    for row in (mine, theirs):
        assert tasks.workload_stop.apply(args=[row.pk]).get() == "stopped"
        wait_for(lambda row=row: Workload.objects.get(pk=row.pk).status == Status.STOPPED)
    batch = k8s.BatchV1Api(kubesim.api_client())
    wait_for(lambda: not [job for job in batch.list_namespaced_job("proj-vision").items
                          if job.metadata.name in ("to-stop", "lead-stops")])
    audited = AuditEvent.objects.filter(action="workload.stop").values_list("actor__username", "object_id")
    assert {("alice", str(mine.pk)), ("lead", str(theirs.pk))} <= set(audited)


def test_a_kubectl_job_that_reclaims_quota_is_named_in_the_preemption(kubesim, org, watcher):
    # Forecasting fills Data Science's 4 cards and Serving keeps its 4: Research's 8 are all there is. Vision
    # borrows NLP's idle deserved cards with the portal; a kubectl Job of NLP's takes them back.
    ds = submit(kubesim, org["carol"], project="forecasting", name="ds")
    wait_for(lambda: Workload.objects.get(pk=ds.pk).status == Status.RUNNING)
    borrowed = [submit(kubesim, org["alice"], name=f"b-{i}") for i in range(2)]
    wait_for(lambda: all(Workload.objects.get(pk=w.pk).status == Status.RUNNING for w in borrowed))
    create_job(kubesim, batch_job("nlp-reclaims", namespace="proj-nlp", pods=1, gpus=4))
    wait_for(lambda: WorkloadEvent.objects.filter(workload__in=borrowed, to_status=Status.PREEMPTED).exists())
    reclaimer = wait_for(lambda: outside("nlp-reclaims"))
    victim = WorkloadEvent.objects.filter(workload__in=borrowed, to_status=Status.PREEMPTED).first().workload
    event = WorkloadEvent.objects.filter(workload=victim, to_status=Status.PREEMPTED).first()
    # The victim's preemption may be recorded before the reclaimer's row exists: it is found by its Job's uid.
    assert event.details["preemptor_job_uid"] == reclaimer.k8s_uid
    assert preemptions(victim)[0]["preemptor"] == {"id": reclaimer.pk, "name": "nlp-reclaims", "project": "nlp"}
    # Both are in the numbers: the portal's queue state and the outside work's interval on one ledger.
    wait_for(lambda: UsageInterval.objects.filter(workload_id=reclaimer.pk).exists())
    assert UsageInterval.objects.get(workload_id=reclaimer.pk).units == 4
    # alice reads the sentence without NLP's names; the admin reads who it was.
    admin_note = preemptions_seen_by(workload=victim, user=org["admin"])[0]["note"].sentence
    alice_note = preemptions_seen_by(workload=victim, user=org["alice"])[0]["note"].sentence
    assert "nlp-reclaims" in admin_note and "nlp-reclaims" not in alice_note

    # Every project's numbers add up to what Kueue reports for its queues, outside work included.
    def reported_and_counted():
        counted = {}
        for row in Workload.objects.filter(status__in=(Status.ADMITTED, Status.RUNNING)).exclude(cluster_queue=""):
            counted[row.cluster_queue] = counted.get(row.cluster_queue, 0) + row.gpu_units
        reported = {state.name: int(state.reserved) for state in ClusterQueueState.objects.filter(reserved__gt=0)}
        return reported, counted

    wait_for(lambda: (lambda pair: pair[0] == pair[1])(reported_and_counted()), describe=reported_and_counted)
    reported, _ = reported_and_counted()
    assert reported["proj-nlp-h100-guaranteed"] == 4


def test_the_forecast_replays_outside_work_with_its_max_execution_time(kubesim, org, watcher):
    """A kubectl Job holding Vision's 4 guaranteed H100 with Kueue's max-exec-time label: the portal's
    non-preemptible workload behind it is forecast to start when that Job's time is up."""
    create_job(kubesim, batch_job("holds-all", pods=1, gpus=4, seconds=600,
                                  labels={"kueue.x-k8s.io/max-exec-time-seconds": "600"}))
    holder = wait_for(lambda: (row := outside("holds-all")) and row.admitted_at and row)
    assert holder.max_runtime_seconds == 600
    waiting = submit(kubesim, org["alice"], gpus=4, preemptible=False, seconds=60, name="behind")
    wait_for(lambda: Workload.objects.get(pk=waiting.pk).status == Status.QUEUED)
    forecasts_refresh(now=datetime.fromisoformat(kubesim.advance(0).replace("Z", "+00:00")))
    forecast = WorkloadForecast.objects.get(workload=waiting)
    assert forecast.basis in (ForecastBasis.MAX_RUNTIME, ForecastBasis.MIXED)
    assert holder.admitted_at + timedelta(seconds=600) <= forecast.likely <= holder.admitted_at + timedelta(
        seconds=660)
