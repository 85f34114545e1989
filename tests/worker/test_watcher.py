"""The watcher against kubesim's manual clock: statuses, events, positions, preemption, restarts."""

import pytest
from kubernetes import client as k8s

from apps.cluster.models import ClusterQueueState, NodeState
from apps.org.models import NodePool, Project
from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.explain import explain_workloads
from apps.workloads.history import preemptions
from apps.workloads.models import Kind, Status, Workload, WorkloadEvent
from tests.worker.conftest import run_submit_task, wait_for
from worker.watcher import Watcher

pytestmark = pytest.mark.slow


def submit(kubesim, user, *, project="vision", gpus=4, preemptible=True, seconds=600, name="run"):
    """Submit through the service, run the submit task, then let a second pass on the emulated clock."""
    workload = services.workload_submit(
        actor=user, project=Project.objects.get(slug=project), kind=Kind.TRAINING, name=name,
        image="pytorch/pytorch:2.4.0", command=["sleep", str(seconds)], node_pool=NodePool.objects.get(slug="h100"),
        gpus=gpus, model_label="resnet", data_class="public", preemptible=preemptible)
    run_submit_task(workload)
    kubesim.advance(1)  # distinct creation times keep FIFO order deterministic
    return workload


def status_of(workload):
    return Workload.objects.get(pk=workload.pk).status


def positions(workloads):
    return [Workload.objects.get(pk=w.pk).queue_position_local for w in workloads]


def test_positions_admission_and_finish(kubesim, org, watcher):
    alice = org["alice"]
    # Vision may hold 8 H100 (limit): two 4-GPU runs fit, the next three wait in order.
    running = [submit(kubesim, alice, name=f"run-{i}") for i in range(2)]
    waiting = [submit(kubesim, alice, name=f"wait-{i}", seconds=300) for i in range(3)]
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in running))
    wait_for(lambda: positions(waiting) == [0, 1, 2])
    head = Workload.objects.get(pk=waiting[0].pk)
    assert head.status == Status.QUEUED and head.status_reason
    assert head.queue_position_cluster == 0
    rows = list(Workload.objects.filter(pk__in=[w.pk for w in waiting]).select_related("project__department",
                                                                                       "node_pool").order_by("pk"))
    sentences = {pk: e.sentence for pk, e in explain_workloads(rows).items()}
    assert sentences[waiting[0].pk].startswith("Waiting for 4 x H100 80GB: Vision is at its limit there, 8 of 8 in "
                                               "use, so 4 more are needed; 8 of the pool's 16 are idle")
    assert sentences[waiting[2].pk].endswith("2 workloads are ahead of you.")
    kubesim.advance(600)  # the first two finish; two of the waiting start
    wait_for(lambda: all(status_of(w) == Status.SUCCEEDED for w in running))
    wait_for(lambda: [status_of(w) for w in waiting[:2]] == [Status.RUNNING, Status.RUNNING])
    wait_for(lambda: positions(waiting) == [None, None, 0])
    events = list(WorkloadEvent.objects.filter(workload=running[0]).values_list("to_status", flat=True))
    assert events == [Status.SUBMITTING, Status.QUEUED, Status.ADMITTED, Status.RUNNING, Status.SUCCEEDED] or \
        events == [Status.SUBMITTING, Status.QUEUED, Status.RUNNING, Status.SUCCEEDED]
    done = Workload.objects.get(pk=running[0].pk)
    assert done.admitted_at and done.started_at and done.finished_at
    assert done.admission["pod_sets"][0]["flavors"] == {"nvidia.com/gpu": "h100"}
    assert done.cluster_queue == "proj-vision-h100-elastic"


def test_reclaim_preempts_borrowed_work_then_requeues_it(kubesim, org, watcher):
    # Data Science fills its 4 cards and Serving keeps its 4 (does not lend): Research's 8 are all there is.
    # Vision then borrows NLP's idle deserved cards, and NLP takes them back with non-preemptible work.
    other = submit(kubesim, org["carol"], project="forecasting", name="ds")
    wait_for(lambda: status_of(other) == Status.RUNNING)
    borrowed = [submit(kubesim, org["alice"], name=f"b-{i}") for i in range(2)]
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in borrowed),
             describe=lambda: [(w.pk, status_of(w), Workload.objects.get(pk=w.pk).status_message) for w in borrowed])
    reclaimer = submit(kubesim, org["bob"], project="nlp", preemptible=False)
    wait_for(lambda: status_of(reclaimer) == Status.RUNNING)
    # The watcher may record the reclaimer's admission before the victim's preemption: wait for both.
    wait_for(lambda: WorkloadEvent.objects.filter(workload__in=borrowed, to_status=Status.PREEMPTED).exists())
    victims = [w for w in borrowed if WorkloadEvent.objects.filter(workload=w, to_status=Status.PREEMPTED).exists()]
    assert len(victims) == 1
    victim = victims[0]
    # Kueue may preempt the same workload again if it was readmitted in between; each is recorded once.
    events = list(WorkloadEvent.objects.filter(workload=victim, to_status=Status.PREEMPTED).order_by("id"))
    assert events and len({e.cluster_at for e in events}) == len(events)
    event = events[0]
    assert event.reason == "InCohortReclamation", event.reason  # NLP's guaranteed queue reclaims its lent quota
    assert event.details["preemptor_job_uid"] == Workload.objects.get(pk=reclaimer.pk).k8s_uid
    preemption = preemptions(victim)[0]
    assert preemption["preemptor"] == {"id": reclaimer.pk, "name": "run", "project": "nlp"}
    assert preemption["reason"] == event.reason and preemption["at"] == event.cluster_at
    wait_for(lambda: status_of(victim) == Status.REQUEUED)
    history = list(WorkloadEvent.objects.filter(workload=victim).values_list("to_status", "reason"))
    assert (Status.REQUEUED, "Requeued") in history
    # The non-preemptible reclaimer is never a victim, whatever else arrives.
    submit(kubesim, org["alice"], name="more")
    kubesim.advance(5)
    assert not WorkloadEvent.objects.filter(workload=reclaimer, to_status=Status.PREEMPTED).exists()
    assert not WorkloadEvent.objects.filter(workload=other, to_status=Status.PREEMPTED).exists()
    # When the reclaimer finishes, the victim is admitted again.
    kubesim.advance(600)
    wait_for(lambda: status_of(victim) in {Status.ADMITTED, Status.RUNNING})
    # The ledger has two stretches for the victim: until the preemption, and from the new admission.
    try:
        wait_for(lambda: UsageInterval.objects.filter(workload=victim).count() == len(events) + 1)
    except AssertionError:
        raise AssertionError(list(UsageInterval.objects.filter(workload=victim).values_list(
            "started_at", "ended_at", "end_reason")) + list(WorkloadEvent.objects.filter(workload=victim).values_list(
            "to_status", "reason", "cluster_at"))) from None
    intervals = list(UsageInterval.objects.filter(workload=victim).order_by("started_at"))
    first, last = intervals[0], intervals[-1]
    assert first.ended_at == event.cluster_at and first.end_reason.startswith("Preempted")
    assert last.ended_at is None and last.started_at >= first.ended_at
    assert first.queue == "elastic" and first.units == 4
    wait_for(lambda: status_of(reclaimer) == Status.SUCCEEDED)
    reclaimer_interval = UsageInterval.objects.get(workload=reclaimer)
    assert reclaimer_interval.queue == "guaranteed" and reclaimer_interval.ended_at is not None
    assert (reclaimer_interval.ended_at - reclaimer_interval.started_at).total_seconds() == pytest.approx(600, abs=2)


def test_dropped_watches_and_a_restart_converge_without_duplicate_events(kubesim, cluster, org, watcher):
    first = submit(kubesim, org["alice"], name="first")
    wait_for(lambda: status_of(first) == Status.RUNNING)
    kubesim.faults(drop_watches=True)
    second = submit(kubesim, org["alice"], name="second", seconds=30)
    kubesim.clear_faults()
    kubesim.advance(31)
    wait_for(lambda: status_of(second) == Status.SUCCEEDED, timeout=30)
    watcher.stop()
    before = list(WorkloadEvent.objects.order_by("id").values_list("workload_id", "to_status", "reason"))
    intervals = list(UsageInterval.objects.order_by("id").values_list("workload_id", "started_at", "ended_at",
                                                                       "end_reason"))
    assert len(intervals) == 2 and intervals[1][2] is not None, [(i[0], i[3], str(i[2])) for i in intervals]
    restarted = Watcher(cluster, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2)
    restarted.start()
    try:
        restarted.resync()
        wait_for(lambda: restarted.synced.is_set())
        after = list(WorkloadEvent.objects.order_by("id").values_list("workload_id", "to_status", "reason"))
        assert after == before
        assert list(UsageInterval.objects.order_by("id").values_list("workload_id", "started_at", "ended_at",
                                                                     "end_reason")) == intervals
    finally:
        restarted.stop()


def test_queue_mirror_equals_kubesim_status(kubesim, cluster, org, watcher):
    for i in range(3):
        submit(kubesim, org["alice"], name=f"m-{i}")
    wait_for(lambda: ClusterQueueState.objects.filter(name="proj-vision-h100-elastic",
                                                      pending_workloads=1).exists())
    status = cluster.get("ClusterQueue", "proj-vision-h100-elastic")["status"]
    row = ClusterQueueState.objects.get(name="proj-vision-h100-elastic")
    assert row.admitted_workloads == status["admittedWorkloads"] == 2
    usage = status["flavorsUsage"][0]["resources"][0]
    assert str(row.used.normalize()) == str(usage["total"]) and str(row.used_borrowed.normalize()) == str(
        usage["borrowed"])
    assert row.project.slug == "vision" and row.node_pool.slug == "h100" and not row.guaranteed


def open_stop_intents(workload):
    from apps.core.models import Intent

    return Intent.objects.filter(kind="workload.stop", target_id=workload.pk, done_at__isnull=True).count()


def test_stops_the_worker_never_ran_are_finished_from_the_cluster(kubesim, cluster, org, watcher):
    """The broker lost both stops: one Job runs to Complete meanwhile, the other is deleted by a worker that died
    before recording it. The watcher closes both, their stop intents and their GPU-hour intervals, on the cluster's
    clock."""
    finishing = submit(kubesim, org["alice"], name="finishing", seconds=30)
    deleted = submit(kubesim, org["alice"], name="deleted", seconds=600)
    wait_for(lambda: status_of(finishing) == status_of(deleted) == Status.RUNNING)
    wait_for(lambda: UsageInterval.objects.filter(workload__in=[finishing, deleted], ended_at=None).count() == 2)
    for workload in (finishing, deleted):
        services.workload_stop(actor=org["alice"], workload=Workload.objects.get(pk=workload.pk))
        assert status_of(workload) == Status.STOPPING and open_stop_intents(workload) == 1
    kubesim.advance(31)  # the first Job completes before any worker deleted it
    wait_for(lambda: status_of(finishing) == Status.SUCCEEDED)
    done = Workload.objects.get(pk=finishing.pk)
    interval = UsageInterval.objects.get(workload=finishing)
    assert interval.ended_at == done.finished_at and interval.end_reason
    assert (interval.ended_at - interval.started_at).total_seconds() == pytest.approx(30, abs=2)
    assert open_stop_intents(finishing) == 0
    # The second still holds its cards while it runs: its interval stays open, its row stopping.
    assert status_of(deleted) == Status.STOPPING
    assert UsageInterval.objects.get(workload=deleted).ended_at is None
    answer = cluster.delete("Job", f"wl-{deleted.pk}", namespace="proj-vision", propagation="Foreground")
    deleted_at = answer["metadata"]["deletionTimestamp"]
    wait_for(lambda: status_of(deleted) == Status.STOPPED)
    row = Workload.objects.get(pk=deleted.pk)
    assert row.status_reason == "Stopped" and row.status_message == "Stopped by alice"
    assert row.finished_at.isoformat().replace("+00:00", "Z") == deleted_at
    assert UsageInterval.objects.get(workload=deleted).ended_at == row.finished_at
    assert open_stop_intents(deleted) == 0
    last = WorkloadEvent.objects.filter(workload=deleted).order_by("-id").first()
    assert (last.from_status, last.to_status, last.cluster_at) == (Status.STOPPING, Status.STOPPED, row.finished_at)


def test_a_restarted_watcher_finishes_stops_whose_job_is_gone(kubesim, cluster, org, watcher):
    workload = submit(kubesim, org["alice"], name="gone")
    wait_for(lambda: status_of(workload) == Status.RUNNING)
    watcher.stop()
    services.workload_stop(actor=org["lead"], workload=Workload.objects.get(pk=workload.pk))
    cluster.delete("Job", f"wl-{workload.pk}", namespace="proj-vision")  # Background: no deletion time is known
    restarted = Watcher(cluster, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2)
    restarted.start()
    try:
        wait_for(lambda: status_of(workload) == Status.STOPPED)
    finally:
        restarted.stop()
    row = Workload.objects.get(pk=workload.pk)
    assert row.status_message == "Stopped by lead" and open_stop_intents(workload) == 0
    assert UsageInterval.objects.get(workload=workload).ended_at is not None


def test_node_mirror_follows_the_cluster_nodes(kubesim, cluster, org, watcher):
    """The initial list mirrors kubesim's demo nodes into their pools by the pools' node labels; the watch then
    follows a cordon, a new node and a removed one, and a resync agrees."""
    wait_for(lambda: NodeState.objects.count() == 16)
    h100 = NodeState.objects.filter(node_pool__slug="h100")
    assert sorted(h100.values_list("name", "allocatable_gpus", "ready", "unschedulable")) == [
        ("h100-node-0", 8, True, False), ("h100-node-1", 8, True, False)]
    assert set(NodeState.objects.filter(node_pool__slug="a100-mig-3g40gb").values_list("allocatable_gpus",
                                                                                        flat=True)) == {2}
    core = k8s.CoreV1Api(kubesim.api_client())
    core.patch_node("h100-node-1", {"spec": {"unschedulable": True}})
    core.create_node({"metadata": {"name": "h100-node-9", "labels": {"portal.gpu/pool": "h100"}},
                      "status": {"allocatable": {"nvidia.com/gpu": "4"}}})
    core.create_node({"metadata": {"name": "cpu-node-0", "labels": {"kubernetes.io/os": "linux"}},
                      "status": {"allocatable": {"cpu": "8"}}})
    core.delete_node("a100-mig-3g40gb-node-7")
    wait_for(lambda: NodeState.objects.filter(name="h100-node-1", unschedulable=True).exists()
             and NodeState.objects.filter(name="h100-node-9").exists()
             and not NodeState.objects.filter(name="a100-mig-3g40gb-node-7").exists()
             and NodeState.objects.filter(name="cpu-node-0").exists(),
             describe=lambda: list(NodeState.objects.values_list("name", "unschedulable")))
    assert NodeState.objects.get(name="h100-node-9").allocatable_gpus == 4
    cpu = NodeState.objects.get(name="cpu-node-0")
    assert cpu.node_pool is None and cpu.allocatable_gpus == 0
    NodeState.objects.filter(name="h100-node-0").delete()  # a row a watch missed: the resync brings it back
    watcher.resync()
    assert NodeState.objects.count() == 17 and NodeState.objects.get(name="h100-node-0").node_pool.slug == "h100"
