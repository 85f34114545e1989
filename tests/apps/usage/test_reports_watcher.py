"""End to end: kubesim's manual clock, the real watcher writing the ledger, the report reading it.

A borrowed workload is preempted by its sibling project's non-preemptible work and admitted again when that ends: the
ledger holds two intervals for it, and the GPU-hours of every workload equal the times on the emulated clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model

from apps.cluster.models import ClusterQueueState
from apps.org.demo import seed_demo
from apps.org.models import NodePool, Project
from apps.usage import reports, selectors
from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.models import Kind, Status, Workload, WorkloadEvent
from tests.worker.conftest import cluster, kubesim, wait_for, watcher  # noqa: F401 - fixtures
from worker import tasks
from worker.kueue_sync import desired_from_database, reconcile

pytestmark = pytest.mark.slow


@pytest.fixture
def org(cluster, transactional_db):  # noqa: F811 - the imported fixture
    seed_demo()
    reconcile(cluster, desired_from_database())
    return {user.username: user for user in get_user_model().objects.all()}


def submit(kubesim, user, *, project, name, preemptible=True):  # noqa: F811
    """Submit 4 x H100 for 600 s; returns the workload and the emulated time it was created (= admitted, if it fits)."""
    created = datetime.fromisoformat(kubesim.advance(0))
    workload = services.workload_submit(
        actor=user, project=Project.objects.get(slug=project), kind=Kind.TRAINING, name=name,
        image="pytorch/pytorch:2.4.0", command=["sleep", "600"], node_pool=NodePool.objects.get(slug="h100"),
        gpus=4, model_label="resnet", data_class="public", preemptible=preemptible)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    kubesim.advance(1)
    return workload, created


def status_of(workload):
    return Workload.objects.get(pk=workload.pk).status


def test_preempted_and_requeued_workload_is_two_intervals_equal_to_the_emulated_times(kubesim, org, watcher):  # noqa: F811
    ds, ds_at = submit(kubesim, org["carol"], project="forecasting", name="ds")
    wait_for(lambda: status_of(ds) == Status.RUNNING)
    borrowed = [submit(kubesim, org["alice"], project="vision", name=f"b-{i}") for i in range(2)]
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w, _ in borrowed))
    reclaimer, preempted_at = submit(kubesim, org["bob"], project="nlp", name="reclaim", preemptible=False)
    wait_for(lambda: status_of(reclaimer) == Status.RUNNING)

    def preempted() -> list:
        return [(w, at) for w, at in borrowed
                if WorkloadEvent.objects.filter(workload=w, to_status=Status.PREEMPTED).exists()]

    ((victim, victim_at),) = wait_for(preempted)  # the watcher may record the reclaimer's admission first
    ((survivor, survivor_at),) = [(w, at) for w, at in borrowed if w.pk != victim.pk]
    # The first cards to come free are Data Science's, 600 s after its admission: the victim is admitted again then
    # and runs its 600 s anew.
    kubesim.advance(600)
    wait_for(lambda: status_of(victim) in {Status.ADMITTED, Status.RUNNING},
             describe=lambda: list(WorkloadEvent.objects.filter(workload=victim).values_list("to_status", "reason")))
    kubesim.advance(600)
    wait_for(lambda: status_of(victim) == Status.SUCCEEDED)
    readmitted_at, finished_at = ds_at + timedelta(seconds=600), ds_at + timedelta(seconds=1200)
    wait_for(lambda: not UsageInterval.objects.filter(ended_at__isnull=True).exists())

    first, second = UsageInterval.objects.filter(workload=victim).order_by("started_at")
    assert (first.started_at, first.ended_at) == (victim_at, preempted_at)
    assert (second.started_at, second.ended_at) == (readmitted_at, finished_at)

    window = reports.Window(ds_at - timedelta(hours=1), finished_at + timedelta(hours=1))
    now = finished_at + timedelta(hours=2)
    held = {row.workload_id: 0.0 for row in UsageInterval.objects.all()}
    for row in reports.holders(user=org["admin"], window=window, filters=reports.HolderFilters(), now=now):
        held[row.workload_id] += row.held_hours
    hours = 4 / 3600  # 4 full cards, per second
    assert held[victim.pk] == pytest.approx(hours * ((preempted_at - victim_at).total_seconds() + 600))
    assert held[survivor.pk] == pytest.approx(hours * 600)
    assert held[reclaimer.pk] == pytest.approx(hours * 600)
    assert held[ds.pk] == pytest.approx(hours * 600)
    users = {row.slug: row for row in reports.usage_report(user=org["admin"], group=reports.Group.USER,
                                                           window=window, now=now).rows}
    # Alice's two preemptible 4 x H100 are within Vision's 4 deserved, except while both ran: then 4 of the 8 units
    # were over quota (shared by the two in proportion to units).
    survivor_span = (survivor_at, survivor_at + timedelta(seconds=600))

    def overlap(a: tuple, b: tuple) -> float:
        return max(0.0, (min(a[1], b[1]) - max(a[0], b[0])).total_seconds())

    both = overlap((victim_at, preempted_at), survivor_span) + overlap((readmitted_at, finished_at), survivor_span)
    assert both > 0
    # (abs: on SQLite, julianday() differences of a few seconds are exact only to ~50 us)
    assert users["alice"].borrowed == pytest.approx(hours * both, abs=1e-7)
    assert users["alice"].within_quota == pytest.approx(held[victim.pk] + held[survivor.pk] - hours * both, abs=1e-7)
    assert users["bob"].within_quota == pytest.approx(hours * 600) and users["bob"].borrowed == 0
    # Data Science's Forecasting deserves 2 H100: its preemptible 4 are half within, half over quota.
    assert users["carol"].within_quota == pytest.approx(hours * 300)
    assert users["carol"].borrowed == pytest.approx(hours * 300)
    assert sum(held.values()) == pytest.approx(sum(row.gpu_hours for row in users.values()))
    assert ds_at < survivor_at < preempted_at


def test_a_watcher_restart_in_the_middle_counts_each_stretch_once(kubesim, cluster, org, watcher):  # noqa: F811
    from worker.watcher import Watcher

    first, first_at = submit(kubesim, org["alice"], project="vision", name="first")
    wait_for(lambda: status_of(first) == Status.RUNNING)
    watcher.stop()  # down while the first finishes and a second is admitted
    kubesim.advance(300)
    second, second_at = submit(kubesim, org["bob"], project="nlp", name="second", preemptible=False)
    now = datetime.fromisoformat(kubesim.advance(400))  # the first ended at first_at + 600 s
    window = reports.Window(first_at - timedelta(hours=1), now + timedelta(hours=1))

    def totals() -> dict[str, tuple[float, float]]:
        report = reports.usage_report(user=org["admin"], group=reports.Group.PROJECT, window=window, now=now)
        return {row.slug: (row.within_quota, row.borrowed) for row in report.rows if row.gpu_hours}

    for _ in range(2):  # a restart, then another one: resyncs replay everything and count nothing twice
        restarted = Watcher(cluster, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2)
        restarted.start()
        try:
            restarted.resync()
            wait_for(restarted.synced.is_set)
            wait_for(lambda: status_of(first) == Status.SUCCEEDED and UsageInterval.objects.filter(
                workload=second).exists())
        finally:
            restarted.stop()
        assert list(UsageInterval.objects.filter(workload=first).values_list("started_at", "ended_at")) == [
            (first_at, first_at + timedelta(seconds=600))]
        assert list(UsageInterval.objects.filter(workload=second).values_list("started_at", "ended_at")) == [
            (second_at, None)]
        hours = 4 / 3600
        assert totals() == {"vision": (pytest.approx(hours * 600), 0.0),  # preemptible, inside its 4 deserved
                            "nlp": (pytest.approx(hours * (now - second_at).total_seconds()), 0.0)}


def test_bob_preemptible_inside_nlps_deserved_is_within_on_the_real_path(kubesim, org, watcher):  # noqa: F811
    """The issue's case through kubesim, the worker and the watcher: bob's preemptible 4 x H100 run in NLP's elastic
    queue, inside NLP's 4 deserved: within-deserved GPU-hours, and borrowed 0 on the quota dashboard too."""
    run, created = submit(kubesim, org["bob"], project="nlp", name="bob-4")
    wait_for(lambda: status_of(run) == Status.RUNNING)
    wait_for(lambda: ClusterQueueState.objects.filter(project__slug="nlp", guaranteed=False, used=4).exists())
    now = datetime.fromisoformat(kubesim.advance(360))
    (interval,) = UsageInterval.objects.filter(workload=run)
    assert interval.queue == UsageInterval.Queue.ELASTIC and interval.started_at == created
    hours = 4 * (now - interval.started_at).total_seconds() / 3600
    window = reports.Window(created - timedelta(hours=1), now + timedelta(hours=1))
    bob = {row.slug: row for row in reports.usage_report(user=org["bob"], group=reports.Group.USER, window=window,
                                                          now=now).rows}["bob"]
    assert (bob.gpu_hours, bob.within_quota, bob.borrowed) == (pytest.approx(hours), pytest.approx(hours), 0.0)
    (h100,) = [entry for entry in selectors.quota_dashboard(user=org["admin"]) if entry.pool.slug == "h100"]
    figures = {f.slug: f for d in h100.departments for f in (d, *d.children)}
    assert (figures["nlp"].used, figures["nlp"].borrowed, figures["nlp"].lent) == (4, 0, 0)
    assert (figures["research"].borrowed, figures["research"].lent) == (0, 4)  # Vision's idle 4
    assert figures["production"].lent == 0  # Serving does not lend, ETL deserves none
