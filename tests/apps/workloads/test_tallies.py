"""The workload tallies (apps.workloads.selectors.tallies, apps.workloads.services.tallies): after every kind of
write to workloads, folded or not, concurrent or not, they are what counting the rows gives."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import Count, Sum
from django.utils import timezone

from apps.org import services as org_services
from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, Origin, Status, Workload, WorkloadTally, WorkloadTallyChange
from apps.workloads.observation import Observation, Preemption
from apps.workloads.selectors import requested_hundredths, tallies_by_pool, workload_tallies
from tests.factories import WorkloadFactory

EVERY_STATUS = [status.value for status in Status]


def counted() -> dict[tuple[int, int, str], tuple[int, Decimal]]:
    """(project id, pool id, status) -> (workloads, GPU units), counted from the rows (`Workload.gpu_amount`)."""
    sums: dict[tuple[int, int, str], tuple[int, Decimal]] = {}
    for workload in Workload.objects.all():
        key = (workload.project_id, workload.node_pool_id, workload.status)
        count, units = sums.get(key, (0, Decimal(0)))
        sums[key] = (count + 1, units + workload.gpu_amount)
    in_sql = {(project_id, pool_id, status): (count, Decimal(hundredths or 0) / 100)
              for project_id, pool_id, status, count, hundredths in Workload.objects.values_list(
                  "project_id", "node_pool_id", "status").annotate(
                  count=Count("pk"), hundredths=Sum(requested_hundredths())).order_by()}
    assert in_sql == sums  # the rebuild's SQL counts what the rows' Python does
    return sums


def kept() -> dict[tuple[int, int, str], tuple[int, Decimal]]:
    """The same from the tallies (a tally left at nothing is no figure)."""
    return {key: (tally.workloads, tally.units) for key, tally in workload_tallies(statuses=EVERY_STATUS).items()
            if tally.workloads or tally.units}


def assert_kept(*, fold: bool = False) -> None:
    assert kept() == counted()
    if fold:
        services.workload_tallies_fold()
        assert not WorkloadTallyChange.objects.exists()
        assert kept() == counted()


def observe(workload: Workload, status: Status, **extra) -> None:
    services.workload_observe(workload_id=workload.pk, observation=Observation(
        status=status, at=timezone.now(), kueue_name=f"job-{workload.pk}", **extra))


@pytest.mark.django_db
def test_every_kind_of_write_keeps_the_tallies_what_counting_the_rows_gives(make_workload, users):
    assert_kept(fold=True)  # the demo's rows, filled in by the migration or counted since
    training = make_workload(gpus=2, pods=3, name="gang")  # submitted: 6 units
    batch = make_workload(kind="batch", gpus=3, parallelism=2, completions=5, name="batch")
    doomed = make_workload(name="doomed")
    refused = make_workload(name="refused")
    failed = make_workload(name="failed")
    assert_kept()
    assert services.workload_mark_submitted(workload=training, uid="uid-1", manifest={})
    observe(batch, Status.QUEUED)
    observe(doomed, Status.QUEUED)
    services.workload_mark_rejected(workload=refused, message="no")
    services.workload_mark_submit_failed(workload_id=failed.pk, message="broken")
    assert_kept(fold=True)
    now = timezone.now()
    observe(training, Status.ADMITTED, admitted_at=now)
    observe(training, Status.RUNNING, admitted_at=now, started_at=now)
    observe(batch, Status.RUNNING, admitted_at=now, started_at=now)
    assert_kept()
    observe(training, Status.PREEMPTED, preemption=Preemption(
        at=now + timedelta(seconds=1), reason="InClusterQueue", message="preempted", preemptor_workload_uid="",
        preemptor_job_uid=""))
    assert_kept()
    observe(training, Status.QUEUED)  # back in the queue: requeued
    assert Workload.objects.get(pk=training.pk).status == Status.REQUEUED
    services.workload_stop(actor=users["alice"], workload=Workload.objects.get(pk=batch.pk))
    assert_kept(fold=True)
    services.workload_stop_finish(workload_id=batch.pk, cluster_at=timezone.now())
    services.workloads_gone(workload_ids=[doomed.pk], at=timezone.now())
    observe(training, Status.SUCCEEDED, finished_at=timezone.now())
    assert {row.status for row in Workload.objects.filter(pk__in=[training.pk, batch.pk, doomed.pk])} == {
        Status.SUCCEEDED, Status.STOPPED}
    assert_kept(fold=True)


@pytest.mark.django_db
def test_bulk_writes_moves_between_projects_and_deletes_are_kept_too(demo):
    vision, nlp = Project.objects.get(slug="vision"), Project.objects.get(slug="nlp")
    h100 = NodePool.objects.get(slug="h100")
    Workload.objects.bulk_create([
        Workload(project=vision, node_pool=h100, kind=Kind.TRAINING, gpus=1 + index % 3, pods=1 + index % 2,
                 name=f"bulk-{index}", image="busybox", status=[Status.QUEUED, Status.RUNNING][index % 2])
        for index in range(40)])
    outside = WorkloadFactory(outside=True, project=vision, node_pool=h100, pod_set_units=7)
    assert_kept()
    Workload.objects.filter(name__startswith="bulk-", status=Status.QUEUED).update(status=Status.PREEMPTED)
    assert_kept(fold=True)
    # What the mirror of outside work does when Kueue's object moves to another project's namespace or resizes.
    Workload.objects.filter(pk=outside.pk).update(project=nlp, pod_set_units=3)
    Workload.objects.filter(name__startswith="bulk-1").update(gpus=8)
    assert_kept()
    changes = WorkloadTallyChange.objects.count()
    Workload.objects.filter(name__startswith="bulk-").update(status_message="Kueue said something", positions_at=None)
    assert WorkloadTallyChange.objects.count() == changes  # writes that change no figure append nothing
    Workload.objects.filter(name__startswith="bulk-2").delete()
    assert_kept(fold=True)


@pytest.mark.django_db
def test_the_beat_task_folds_them(make_workload):
    from worker.tasks import workload_tallies_fold

    observe(make_workload(name="queued"), Status.QUEUED)
    assert WorkloadTallyChange.objects.exists()
    assert workload_tallies_fold() > 0
    assert not WorkloadTallyChange.objects.exists()
    assert_kept()


@pytest.mark.django_db
def test_a_rebuild_counts_them_afresh_and_the_count_of_changes_only_grows(make_workload):
    workload = make_workload(name="queued")
    observe(workload, Status.QUEUED)
    services.workload_tallies_fold()
    key = (workload.project_id, workload.node_pool_id, Status.QUEUED.value)
    before = workload_tallies(statuses=[Status.QUEUED])[key].changes
    WorkloadTally.objects.filter(status=Status.QUEUED).update(workloads=999, unit_hundredths=999)  # a bad restore, say
    assert kept() != counted()
    call_command("workload_tallies_rebuild", stdout=open("/dev/null", "w"))  # noqa: SIM115 - closed at exit
    assert kept() == counted()
    assert workload_tallies(statuses=[Status.QUEUED])[key].changes > before
    observe(workload, Status.ADMITTED, admitted_at=timezone.now())
    assert workload_tallies(statuses=[Status.QUEUED])[key].changes > before + 1


@pytest.fixture
def rtx(demo) -> NodePool:
    """A KAI pool that shares cards, where notebooks ask for a fraction of one."""
    return org_services.node_pool_create(actor=demo["admin"], slug="rtx", name="RTX", gpu_resource="nvidia.com/gpu",
                                         capacity=16, scheduler="kai", gpu_fractions=True)


def half(demo, pool: NodePool, fraction: str = "0.5", **extra) -> Workload:
    return WorkloadFactory(project=Project.objects.get(slug="vision"), owner=demo["alice"], node_pool=pool,
                           kind=Kind.NOTEBOOK, gpus=0, gpu_fraction=Decimal(fraction), **extra)


@pytest.mark.django_db
def test_a_share_of_a_card_is_tallied_as_that_share(demo, rtx):
    """A notebook asking for half a card on a KAI pool counts 0.5 units (not 0) in its tally, through every kind of
    write: a transition, a change of its fraction, a bulk insert, a delete, a fold and a rebuild."""
    notebook = half(demo, rtx, status=Status.QUEUED)
    quarter = half(demo, rtx, "0.25", status=Status.QUEUED)
    key = (notebook.project_id, rtx.pk, Status.QUEUED.value)
    assert workload_tallies(statuses=[Status.QUEUED])[key].units == Decimal("0.75")
    assert_kept(fold=True)
    assert workload_tallies(statuses=[Status.QUEUED])[key].units == Decimal("0.75")
    Workload.objects.filter(pk=quarter.pk).update(gpu_fraction=Decimal("0.3"))
    assert workload_tallies(statuses=[Status.QUEUED])[key].units == Decimal("0.8")
    observe(notebook, Status.ADMITTED, admitted_at=timezone.now())
    assert workload_tallies(statuses=[Status.QUEUED, Status.ADMITTED])[key].units == Decimal("0.3")
    assert_kept()
    Workload.objects.bulk_create([Workload(project=notebook.project, node_pool=rtx, kind=Kind.NOTEBOOK, gpus=0,
                                           gpu_fraction=Decimal("0.33"), name=f"nb-{index}", image="busybox",
                                           status=Status.QUEUED) for index in range(3)])
    assert workload_tallies(statuses=[Status.QUEUED])[key].units == Decimal("1.29")
    Workload.objects.filter(pk=quarter.pk).delete()
    assert_kept(fold=True)
    assert workload_tallies(statuses=[Status.QUEUED])[key].units == Decimal("0.99")
    WorkloadTally.objects.filter(status=Status.QUEUED).update(unit_hundredths=0)
    services.workload_tallies_rebuild()
    assert workload_tallies(statuses=[Status.QUEUED])[key].units == Decimal("0.99")
    assert_kept()


@pytest.mark.django_db
def test_tallies_by_pool_add_up_the_statuses_asked_for(make_workload):
    first, second = make_workload(name="a", gpus=2), make_workload(name="b", gpus=3)
    observe(first, Status.QUEUED)
    tallies = workload_tallies(statuses=[Status.SUBMITTING, Status.QUEUED], project=first.project)
    by_pool = tallies_by_pool(tallies, statuses=[Status.SUBMITTING, Status.QUEUED])
    here = by_pool[(first.project_id, first.node_pool_id)]
    assert (here.workloads, here.department_id) == (
        Workload.objects.filter(project=first.project, node_pool=first.node_pool,
                                status__in=[Status.SUBMITTING, Status.QUEUED]).count(), first.project.department_id)
    assert tallies_by_pool(tallies, statuses=[Status.QUEUED])[(first.project_id, first.node_pool_id)].units == sum(
        w.gpu_units for w in Workload.objects.filter(project=first.project, node_pool=first.node_pool,
                                                     status=Status.QUEUED))
    assert second.pk


@pytest.mark.django_db(transaction=True)
def test_writers_of_one_tally_never_wait_for_each_other(demo):
    """One transaction has moved a workload and not committed; another moving a workload of the same project and
    pool into the same status commits at once (no tally row is locked by writers), and both count."""
    if connection.vendor != "postgresql":
        pytest.skip("the concurrency is PostgreSQL's")
    vision, h100 = Project.objects.get(slug="vision"), NodePool.objects.get(slug="h100")
    first, second = (WorkloadFactory(project=vision, node_pool=h100, owner=demo["alice"]) for _ in range(2))
    moved, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                Workload.objects.filter(pk=first.pk).update(status=Status.QUEUED)
                moved.set()
                release.wait(10)
        except BaseException as error:  # reported below
            failures.append(error)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert moved.wait(10)
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '2s'")
            Workload.objects.filter(pk=second.pk).update(status=Status.QUEUED)
        services.workload_tallies_fold()  # folds the committed change, leaves the open one
    finally:
        release.set()
        holder.join(10)
    assert not failures
    assert kept() == counted()
    services.workload_tallies_fold()
    assert not WorkloadTallyChange.objects.exists()
    assert kept() == counted()


@pytest.mark.django_db(transaction=True)
def test_concurrent_transitions_and_folds_lose_no_change(demo):
    """Eight appliers move workloads of one project and pool through the watcher's state machine at once while
    folds run: no deadlock, no error, and the tallies are what counting gives."""
    if connection.vendor != "postgresql":
        pytest.skip("the concurrency is PostgreSQL's")
    vision, h100 = Project.objects.get(slug="vision"), NodePool.objects.get(slug="h100")
    works = [WorkloadFactory(project=vision, node_pool=h100, owner=demo["alice"], gpus=1 + index % 4,
                             origin=Origin.PORTAL) for index in range(16)]
    barrier = threading.Barrier(9)
    failures: list[BaseException] = []
    done = threading.Event()

    def apply(index: int) -> None:
        try:
            barrier.wait(10)
            for workload in works[index::8]:
                now = timezone.now()
                for status, extra in ((Status.QUEUED, {}), (Status.ADMITTED, {"admitted_at": now}),
                                      (Status.RUNNING, {"admitted_at": now, "started_at": now}),
                                      (Status.SUCCEEDED, {"finished_at": now})):
                    observe(workload, status, **extra)
        except BaseException as error:  # reported below
            failures.append(error)
        finally:
            connection.close()

    def fold() -> None:
        try:
            barrier.wait(10)
            while not done.is_set():
                services.workload_tallies_fold()
        except BaseException as error:  # reported below
            failures.append(error)
        finally:
            connection.close()

    appliers = [threading.Thread(target=apply, args=(index,)) for index in range(8)]
    folder = threading.Thread(target=fold)
    for thread in [*appliers, folder]:
        thread.start()
    for thread in appliers:
        thread.join(60)
    done.set()
    folder.join(30)
    assert not failures
    assert set(Workload.objects.filter(pk__in=[w.pk for w in works]).values_list("status", flat=True)) == {
        Status.SUCCEEDED}
    assert_kept(fold=True)
