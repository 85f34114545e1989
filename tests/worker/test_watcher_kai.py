"""The watcher on a KAI pool, against kubesim's KAI Scheduler (its pod-grouper as KAI's) and manual clock: statuses from
a Job's pods and the PodGroups KAI's grouper made for them, or from a gang's PodGroup and ownerless pods; preemption by
reclaim and what follows (a gang's ranks made again by the worker when the watcher asks), the GPU-hours of whole and
fractional GPUs, and why work waits."""

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from apps.cluster.models import ClusterQueueState
from apps.core.models import Intent
from apps.org import services as org_services
from apps.org.models import Department, NodePool, Project
from apps.usage import reports
from apps.usage.models import UsageInterval
from apps.usage.selectors import quota_dashboard
from apps.workloads.explain import explain_workloads
from apps.workloads.models import Status, Workload, WorkloadEvent
from apps.workloads.services import GANG_REPAIR_INTENT
from apps.workloads.services.claims import workload_mark_submitted
from kubesim.apiserver.nodes.cluster import demo_cluster
from kubesim.testing import serve
from tests.worker.conftest import stop_watcher, wait_for
from tests.worker.kai_work import kai_workload, submit_kai
from worker import tasks
from worker.kueue_sync import desired_from_database, reconcile
from worker.manifests import kai_gang_pod, kai_gang_pod_group
from worker.watcher import Watcher

pytestmark = pytest.mark.slow

GPU = "nvidia.com/gpu"
POOL_LABELS = {"kai.scheduler/node-pool": "rtx", "kubesim.io/kai-gpu-sharing": "true"}


@pytest.fixture(scope="module")
def kubesim():
    """The demo's Kueue pools and a KAI pool of two nodes of two cards, sharing cards between fractional pods."""
    rtx = [{"name": f"rtx-{i}", "labels": POOL_LABELS,
            "allocatable": {GPU: "2", "cpu": "64", "memory": "512Gi", "pods": "110"}} for i in range(2)]
    with serve(clock="manual", nodes=demo_cluster() + rtx) as served:
        yield served


@pytest.fixture
def rtx(org, cluster):
    """The KAI pool: Research deserves its 4 cards; Vision 2 (limit 4), NLP 2 (limit 2); reconciled to KAI Queues."""
    admin = org["admin"]
    pool = org_services.node_pool_create(actor=admin, slug="rtx", name="RTX PRO 6000", gpu_resource=GPU, capacity=4,
                                         scheduler="kai", gpu_fractions=True,
                                         node_labels={"kai.scheduler/node-pool": "rtx"})
    org_services.quota_set(actor=admin, node_pool=pool, department=Department.objects.get(slug="research"),
                           deserved=4, limit=None)
    org_services.quota_set(actor=admin, node_pool=pool, project=Project.objects.get(slug="vision"), deserved=2,
                           limit=4)
    org_services.quota_set(actor=admin, node_pool=pool, project=Project.objects.get(slug="nlp"), deserved=2, limit=2)
    reconcile(cluster, desired_from_database())
    return pool


@pytest.fixture
def watcher(kubesim, cluster, rtx):
    running = Watcher(cluster, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2)
    running.start()
    yield running
    stop_watcher(running, kubesim)


def submit(kubesim, cluster, owner, **fields):
    workload = submit_kai(cluster, kai_workload(owner, **fields))
    kubesim.advance(1)  # distinct creation times; KAI's cycle runs
    return workload


def row(workload):
    return Workload.objects.select_related("project__department", "node_pool").get(pk=workload.pk)


def status_of(workload):
    return row(workload).status


def statuses(workload):
    return list(WorkloadEvent.objects.filter(workload=workload).order_by("id").values_list("to_status", flat=True))


def held_hours(workload, admin):
    window = reports.Window(datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
    return sum(item.held_hours for item in reports.holders(user=admin, window=window, filters=reports.HolderFilters())
               if item.workload_id == workload.pk)


def explained(workload, viewer=None):
    return explain_workloads([row(workload)], viewer=viewer)[workload.pk]


def test_whole_gpus_queue_run_and_finish_counting_gpus_x_hours(kubesim, cluster, org, watcher):
    run = submit(kubesim, cluster, org["alice"], project="vision", gpus=2, seconds=1800)
    wait_for(lambda: status_of(run) == Status.RUNNING, describe=lambda: (status_of(run), row(run).status_message))
    running = row(run)
    assert running.cluster_queue == "proj-vision-rtx" and running.kueue_name == ""
    assert running.admitted_at and running.started_at and running.kueue_conditions == []
    assert running.queue_position_local is None  # KAI keeps no positions
    kubesim.advance(1800)
    wait_for(lambda: status_of(run) == Status.SUCCEEDED)
    assert statuses(run) in ([Status.QUEUED, Status.RUNNING, Status.SUCCEEDED],
                             [Status.QUEUED, Status.ADMITTED, Status.RUNNING, Status.SUCCEEDED])
    interval = UsageInterval.objects.get(workload=run)
    assert (interval.units, interval.card_fraction_numerator, interval.card_fraction_denominator) == (2, 1, 1)
    assert interval.ended_at - interval.started_at == timedelta(seconds=1800)
    assert held_hours(run, org["admin"]) == pytest.approx(1.0)  # 2 GPUs x half an hour


def test_half_gpus_share_a_card_and_count_half_the_hours(kubesim, cluster, org, watcher):
    halves = [submit(kubesim, cluster, org["alice"], project="vision", fraction="0.5", seconds=3600, name=f"nb-{i}")
              for i in range(2)]
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in halves))
    core = k8s.CoreV1Api(cluster.api_client)
    pods = core.list_namespaced_pod(row(halves[0]).project.namespace,
                                    label_selector="kai.scheduler/queue=proj-vision-rtx").items
    assert len({(pod.spec.node_name, pod.metadata.labels["runai-gpu-group"]) for pod in pods}) == 1  # one card
    # Quota in use on the KAI pool is the mirror of what KAI's Queue says the work holds: one card in halves.
    wait_for(lambda: ClusterQueueState.objects.filter(name="proj-vision-rtx/preemptible", used=1).exists())
    assert ClusterQueueState.objects.get(name="proj-vision-rtx/non-preemptible").used == 0
    (pool,) = [board for board in quota_dashboard(user=org["admin"]) if board.pool.slug == "rtx"]
    (vision,) = [p for d in pool.departments for p in d.children if p.slug == "vision"]
    assert (vision.used, vision.deserved, pool.cluster.used) == (1, 2, 1)
    kubesim.advance(3600)
    wait_for(lambda: all(status_of(w) == Status.SUCCEEDED for w in halves))
    for half in halves:
        interval = UsageInterval.objects.get(workload=half)
        assert (interval.units, interval.card_fraction_numerator, interval.card_fraction_denominator) == (1, 1, 2)
        assert interval.ended_at - interval.started_at == timedelta(seconds=3600)
        assert held_hours(half, org["admin"]) == pytest.approx(0.5)  # half a card for an hour


def test_reclaim_preempts_over_quota_work_which_waits_again(kubesim, cluster, org, watcher):
    # Vision borrows NLP's idle deserved cards (4 of 2 deserved); NLP's work takes them back (KAI reclaims only for a
    # queue below its fair share, from preemptible work above its own).
    borrowed = [submit(kubesim, cluster, org["alice"], project="vision", gpus=2, seconds=3600, name=f"b-{i}")
                for i in range(2)]
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in borrowed))
    reclaimer = submit(kubesim, cluster, org["bob"], project="nlp", gpus=2, seconds=600, name="reclaim")
    kubesim.advance(1)  # the victim's pods are gone: the reclaimer binds in the next cycle
    wait_for(lambda: status_of(reclaimer) == Status.RUNNING,
             describe=lambda: (status_of(reclaimer), row(reclaimer).status_message))
    wait_for(lambda: WorkloadEvent.objects.filter(workload__in=borrowed, to_status=Status.PREEMPTED).exists())
    (victim,) = [w for w in borrowed if WorkloadEvent.objects.filter(workload=w, to_status=Status.PREEMPTED).exists()]
    event = WorkloadEvent.objects.get(workload=victim, to_status=Status.PREEMPTED)
    # KAI names the PodGroup its grouper made for the reclaimer's pod; the preemptor is the Job that owns it
    assert event.reason == "PreemptionByScheduler" and "nlp/pg-wl-" in event.message
    assert event.details["preemptor_job_uid"] == row(reclaimer).k8s_uid
    wait_for(lambda: status_of(victim) == Status.REQUEUED, describe=lambda: statuses(victim))
    (interval,) = UsageInterval.objects.filter(workload=victim)
    assert interval.ended_at == event.cluster_at and interval.end_reason.startswith("Preempted")
    note = explained(victim, org["admin"])
    assert note.preemption is not None and note.preemption.preemptor.id == reclaimer.pk
    assert note.preemption.sentence.startswith(
        f"Preempted on {event.cluster_at:%Y-%m-%d %H:%M:%S} UTC by #{reclaimer.pk} reclaim (NLP), as KAI Scheduler "
        "gives GPUs back")
    # The reclaimer finishes: the victim runs again, a second stretch in the ledger.
    kubesim.advance(600)
    wait_for(lambda: status_of(victim) == Status.RUNNING,
             describe=lambda: (statuses(victim), row(victim).status_message))
    assert UsageInterval.objects.filter(workload=victim).count() == 2
    assert status_of(borrowed[0] if victim != borrowed[0] else borrowed[1]) == Status.RUNNING


def waiting(workload, reason):
    wait_for(lambda: row(workload).status_reason == reason,
             describe=lambda: (status_of(workload), row(workload).status_reason, row(workload).status_message))
    return explained(workload)


def test_limits_and_deserved_quota_explained_with_kais_numbers(kubesim, cluster, org, watcher):
    # NLP's limit is 2: with 2 in use, one more waits (OverLimit on its queue).
    full = submit(kubesim, cluster, org["bob"], project="nlp", gpus=2, name="full")
    wait_for(lambda: status_of(full) == Status.RUNNING)
    over = submit(kubesim, cluster, org["bob"], project="nlp", gpus=1, name="over")
    said = waiting(over, "OverLimit")
    assert status_of(over) == Status.QUEUED and row(over).cluster_queue == "proj-nlp-rtx"
    assert (said.reason, said.kind) == ("project_limit", "quota")
    assert said.sentence == ("Waiting for 1 x RTX PRO 6000: NLP is at its limit on RTX PRO 6000, 2 of 2 in use, so 1 "
                             "more are needed. It starts when NLP's own work frees them, or when an admin raises the "
                             "limit. KAI Scheduler keeps no place in line, so none is shown.")
    assert said.headline == "1 more RTX PRO 6000 needed: NLP is at its limit (2 of 2)"
    assert (said.numbers["limit"], said.numbers["project_used"], said.numbers["position"]) == (2, 2, None)
    # Vision's non-preemptible work holds its 2 deserved: more of it waits (NonPreemptibleOverQuota).
    guaranteed = submit(kubesim, cluster, org["alice"], project="vision", gpus=2, preemptible=False, name="np")
    wait_for(lambda: status_of(guaranteed) == Status.RUNNING)
    beyond = submit(kubesim, cluster, org["alice"], project="vision", gpus=1, preemptible=False, name="beyond")
    said = waiting(beyond, "NonPreemptibleOverQuota")
    assert said.reason == "project_deserved"
    assert said.sentence.startswith("Waiting for 1 x RTX PRO 6000: non-preemptible work runs only inside Vision's "
                                    "deserved quota on RTX PRO 6000, and its non-preemptible work holds 2 of the 2 "
                                    "deserved, so 1 more are needed. Mark it preemptible")
    assert (said.numbers["queue_used"], said.numbers["deserved"], said.numbers["more_needed"]) == (2, 2, 1)


def test_a_missing_queue_is_an_admins_problem(kubesim, cluster, org, watcher):
    cluster.delete("Queue", "proj-vision-rtx")  # by hand: the organisation still gives Vision quota there
    lost = submit(kubesim, cluster, org["alice"], project="vision", gpus=1)
    said = waiting(lost, "QueueDoesNotExist")
    assert (said.reason, said.kind) == ("misconfigured", "misconfigured")
    assert said.sentence.startswith("Waiting for 1 x RTX PRO 6000: KAI Scheduler has no queue proj-vision-rtx for "
                                    "Vision on RTX PRO 6000 (Queue 'proj-vision-rtx' does not exist). This is for an "
                                    "admin to fix")
    assert said.headline == "The proj-vision-rtx queue is missing on RTX PRO 6000: ask an admin"


def test_no_node_with_room_says_what_is_lacking_and_no_forecast(kubesim, cluster, org, watcher):
    from worker.forecast import forecasts_refresh

    wide = submit(kubesim, cluster, org["alice"], project="vision", gpus=3, name="wide")  # no node has 3 cards
    said = waiting(wide, "Unschedulable")
    assert (said.reason, said.headline) == ("pool_full", "No room on RTX PRO 6000: the nodes lack GPUs")
    assert said.sentence.startswith("Waiting for 3 x RTX PRO 6000: it is within Vision's quota and limits, but no "
                                    "node of RTX PRO 6000 has room for it now (KAI Scheduler: 0/2 nodes are available, "
                                    "2 node(s) didn't have enough resources: GPUs.). The nodes lack GPUs")
    assert said.numbers["lacking"] == ["GPUs"]
    forecasts_refresh()
    assert Workload.objects.select_related("forecast").get(pk=wide.pk).forecast.phrase() == "no forecast on KAI pools"


def test_a_cluster_without_kais_crds_is_watched_as_before(kubesim, cluster, org, monkeypatch):
    """KAI's PodGroup and Queue kinds answer 404 (KAI Scheduler not installed): the watcher lists and watches the rest,
    and Kueue work is followed as ever."""
    from kubernetes.client.exceptions import ApiException

    from apps.workloads import services
    from worker import tasks

    running = Watcher(cluster, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2)
    listed = running.custom.list_cluster_custom_object

    def without_kai(group, *args, **kwargs):
        if group == "scheduling.run.ai":
            raise ApiException(status=404, reason="Not Found")
        return listed(group, *args, **kwargs)

    monkeypatch.setattr(running.custom, "list_cluster_custom_object", without_kai)
    running.start()
    try:
        work = services.workload_submit(
            actor=org["alice"], project=Project.objects.get(slug="vision"), kind="training", name="kueue",
            image="pytorch/pytorch:2.4.0", command=["sleep", "600"], node_pool=NodePool.objects.get(slug="h100"),
            gpus=1, model_label="resnet", data_class="public", preemptible=True)
        assert tasks.workload_submit.apply(args=[work.pk]).get() == "submitted"
        kubesim.advance(1)
        wait_for(lambda: status_of(work) == Status.RUNNING)
        assert running.resource_versions["PodGroup"] == running.resource_versions["Queue"] == ""  # none listed
        assert running.stalled() == [] and running.pod_groups == {}
    finally:
        stop_watcher(running, kubesim)


def test_the_first_sync_reads_pod_groups_and_pods_already_there(kubesim, cluster, org, rtx):
    """Work that ran and waited before the watcher started (or while a watch was down) is seen by the relist."""
    full = submit(kubesim, cluster, org["bob"], project="nlp", gpus=2, name="full")
    over = submit(kubesim, cluster, org["bob"], project="nlp", gpus=1, name="over")
    running = Watcher(cluster, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2)
    running.resync()  # what start() does first
    with running.lock:
        assert {len(pods) for pods in running.kai_pods.values()} == {1} and len(running.pod_groups) == 2
    assert (status_of(full), status_of(over), row(over).status_reason) == (Status.RUNNING, Status.QUEUED, "OverLimit")
    assert UsageInterval.objects.filter(workload=full, ended_at__isnull=True).exists()


def test_a_preemption_while_the_watcher_was_away_is_found_in_kais_evict_event(kubesim, cluster, org, rtx):
    """KAI evicts while no watcher runs: the evicted pods are gone and the Job's new ones wait, so only the Evict Event
    KAI recorded on the victim's PodGroup tells why; the watcher's first sync finds it."""
    borrowed = [submit(kubesim, cluster, org["alice"], project="vision", gpus=2, seconds=3600, name=f"b-{i}")
                for i in range(2)]
    Watcher(cluster, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2).resync()
    assert [status_of(w) for w in borrowed] == [Status.RUNNING, Status.RUNNING]
    reclaimer = submit(kubesim, cluster, org["bob"], project="nlp", gpus=2, seconds=600, name="reclaim")
    kubesim.advance(35)
    running = Watcher(cluster, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2)
    running.start()
    try:
        wait_for(lambda: WorkloadEvent.objects.filter(workload__in=borrowed, to_status=Status.PREEMPTED).exists())
        (event,) = WorkloadEvent.objects.filter(workload__in=borrowed, to_status=Status.PREEMPTED)
        assert event.reason == "PreemptionByScheduler" and event.details["preemptor_job_uid"] == row(reclaimer).k8s_uid
        wait_for(lambda: status_of(event.workload) == Status.REQUEUED, describe=lambda: statuses(event.workload))
    finally:
        stop_watcher(running, kubesim)


def test_a_gang_runs_once_all_its_pods_are_bound_and_holds_them_all(kubesim, cluster, org, watcher):
    gang = submit(kubesim, cluster, org["alice"], project="vision", gpus=2, pods=2, seconds=600, name="gang")
    wait_for(lambda: status_of(gang) == Status.RUNNING, describe=lambda: (status_of(gang), row(gang).status_message))
    with watcher.lock:
        pod_group = watcher.pod_groups[f"{row(gang).project.namespace}/{gang.job_name}"]
    assert pod_group["spec"]["minMember"] == 2 and pod_group["metadata"]["uid"] == row(gang).k8s_uid
    # Another gang of two finds no room: the first holds every card of the pool (Vision's limit allows 4).
    second = submit(kubesim, cluster, org["alice"], project="vision", gpus=1, pods=2, seconds=600, name="second")
    said = waiting(second, "OverLimit")
    assert said.headline == "2 more RTX PRO 6000 needed: Vision is at its limit (4 of 4)"
    kubesim.advance(600)
    wait_for(lambda: status_of(gang) == Status.SUCCEEDED)
    interval = UsageInterval.objects.get(workload=gang)
    assert interval.units == 4 and interval.ended_at - interval.started_at == timedelta(seconds=600)
    wait_for(lambda: status_of(second) == Status.RUNNING)


def repair_asked(workload):
    return Intent.objects.filter(kind=GANG_REPAIR_INTENT, target_id=workload.pk, done_at=None).exists()


def gang_pods(cluster, workload):
    return cluster.list("Pod", namespace=row(workload).project.namespace,
                        label_selector=f"portal.gpu/workload-id={workload.pk}")


def test_a_reclaimed_gang_is_made_again_by_the_worker_and_runs_again(kubesim, cluster, org, watcher):
    # Vision borrows NLP's deserved cards, the newest with a gang of two; NLP's run reclaims them (taking Vision back
    # to its fair share, no further): the gang's ranks are evicted and deleted, the watcher asks the worker to make
    # them again, and the gang waits, then runs once NLP's run ends.
    filler = submit(kubesim, cluster, org["alice"], project="vision", gpus=2, seconds=7200, name="filler")
    wait_for(lambda: status_of(filler) == Status.RUNNING)
    gang = submit(kubesim, cluster, org["alice"], project="vision", gpus=1, pods=2, seconds=3600, name="gang")
    wait_for(lambda: status_of(gang) == Status.RUNNING, describe=lambda: (status_of(gang), row(gang).status_message))
    reclaimer = submit(kubesim, cluster, org["bob"], project="nlp", gpus=2, seconds=600, name="reclaim")
    kubesim.advance(35)  # the evicted ranks end within their grace period and are gone
    wait_for(lambda: WorkloadEvent.objects.filter(workload=gang, to_status=Status.PREEMPTED).exists(),
             describe=lambda: statuses(gang))
    event = WorkloadEvent.objects.get(workload=gang, to_status=Status.PREEMPTED)
    assert event.details["preemptor_job_uid"] == row(reclaimer).k8s_uid
    wait_for(lambda: repair_asked(gang) and gang_pods(cluster, gang) == [])
    assert tasks.kai_gang_repair.apply(args=[gang.pk]).get() == "made 2"
    wait_for(lambda: status_of(gang) == Status.REQUEUED, describe=lambda: (statuses(gang), row(gang).status_message))
    kubesim.advance(600)
    wait_for(lambda: status_of(gang) == Status.RUNNING, describe=lambda: (statuses(gang), row(gang).status_message))
    assert UsageInterval.objects.filter(workload=gang).count() == 2


def test_a_gang_fails_with_its_first_failed_rank_and_the_rest_is_stopped(kubesim, cluster, org, watcher):
    gang = kai_workload(org["alice"], project="vision", gpus=1, pods=2, name="crash")
    group = cluster.create(kai_gang_pod_group(gang))
    for index, command in enumerate((["sh", "-c", "sleep 5; exit 3"], ["sleep", "3600"])):
        rank = kai_gang_pod(gang, index)  # rank 0 fails after 5 s; rank 1 would go on
        rank["spec"]["containers"][0]["command"] = command
        rank["spec"]["containers"][0].pop("args", None)
        cluster.create(rank)
    assert workload_mark_submitted(workload=gang, uid=group["metadata"]["uid"], manifest=group)
    kubesim.advance(1)
    wait_for(lambda: status_of(gang) == Status.RUNNING, describe=lambda: (status_of(gang), row(gang).status_message))
    kubesim.advance(5)
    wait_for(lambda: status_of(gang) == Status.FAILED, describe=lambda: (status_of(gang), row(gang).status_message))
    assert row(gang).status_message == f"Pod {gang.job_name}-0 failed: Error (exit code 3)"
    wait_for(lambda: repair_asked(gang))
    assert tasks.kai_gang_repair.apply(args=[gang.pk]).get() == "stopped 1"
    kubesim.advance(35)
    assert [pod["metadata"]["name"] for pod in gang_pods(cluster, gang)] == [f"{gang.job_name}-0"]  # kept, for its log


def test_a_half_card_notebook_is_explained_from_the_pod_group_kai_made(kubesim, cluster, org, watcher):
    full = submit(kubesim, cluster, org["bob"], project="nlp", gpus=2, seconds=600, name="full")
    wait_for(lambda: status_of(full) == Status.RUNNING)
    half = submit(kubesim, cluster, org["bob"], project="nlp", fraction="0.5", seconds=600, name="nb")
    said = waiting(half, "OverLimit")  # NLP's limit is 2: the condition of the PodGroup KAI's grouper made
    assert (said.reason, said.kind) == ("project_limit", "quota")
    (pod,) = gang_pods(cluster, half)
    assert pod["metadata"]["annotations"]["pod-group-name"].startswith(f"pg-{pod['metadata']['name']}-")
    kubesim.advance(600)
    wait_for(lambda: status_of(half) == Status.RUNNING, describe=lambda: (status_of(half), row(half).status_message))
