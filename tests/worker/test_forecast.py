"""Start forecasts from the database and against kubesim: what the worker stores, what the pages and the API show,
the "cannot estimate" reasons, and (end to end, with the real worker task and watcher) a forecast shown and then met.

The demo organisation's H100 pool: vision deserves 4 cards (limit 8); non-preemptible work runs only inside it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.urls import reverse

from apps.org.models import NodePool, Project
from apps.workloads import selectors, services
from apps.workloads.models import (
    ForecastBasis,
    ForecastReason,
    ForecastRecord,
    Kind,
    Status,
    Workload,
    WorkloadEvent,
    WorkloadForecast,
)
from tests.worker.conftest import signed_in, wait_for
from worker import tasks
from worker.forecast import WIDEN_MIN_RECORD, forecasts_refresh

NOW = datetime.fromisoformat("2026-06-01T12:00:00+00:00")


def workload(user, *, project="vision", gpus=4, preemptible=False, max_runtime=None, image="pytorch/pytorch:2.4.0",
             seconds=600, name="run"):
    return services.workload_submit(
        actor=user, project=Project.objects.get(slug=project), kind=Kind.TRAINING, name=name, image=image,
        command=["sleep", str(seconds)], node_pool=NodePool.objects.get(slug="h100"), gpus=gpus,
        model_label="resnet", data_class="public", preemptible=preemptible, max_runtime_seconds=max_runtime)


def running(row, *, since: float):
    Workload.objects.filter(pk=row.pk).update(status=Status.RUNNING, admitted_at=NOW - timedelta(seconds=since))


def queued(row, *, at: float = 0):
    Workload.objects.filter(pk=row.pk).update(status=Status.QUEUED, submitted_at=NOW - timedelta(hours=1, seconds=-at))


def finished(row, *, ran: float, ago: float):
    end = NOW - timedelta(seconds=ago)
    Workload.objects.filter(pk=row.pk).update(status=Status.SUCCEEDED, admitted_at=end - timedelta(seconds=ran),
                                              finished_at=end)


def offsets(row) -> tuple:
    forecast = WorkloadForecast.objects.get(workload=row)
    return tuple(None if t is None else (t - NOW).total_seconds()
                 for t in (forecast.earliest, forecast.likely, forecast.latest))


def test_max_runtime_then_history_then_nothing(demo):
    """vision's deserved 4 H100 held by a run with a max runtime of 10 min, 4 min in: the next one starts at +6
    min. Behind it, nothing can be estimated while the next one's own runtime is unknown; once three finished runs
    of its family (same project, kind and image without its tag: 5, 10 and 15 min) say it runs 6 / 10 / 14 min
    (10th, 50th and 90th percentiles), the one behind it starts at +12 / +16 / +20 min."""
    alice, bob = demo["alice"], demo["bob"]
    running(workload(alice, max_runtime=600, image="nvcr.io/nvidia/pytorch:24.01"), since=240)
    first = workload(alice, image="pytorch/pytorch:2.5.0", name="next")
    queued(first, at=0)
    old = [workload(alice, image="jax/jax:0.4", name=f"old-{minutes}") for minutes in (5, 10, 15)]
    for row, minutes in zip(old, (5, 10, 15), strict=True):
        finished(row, ran=minutes * 60, ago=3600)
    assert forecasts_refresh(now=NOW) == 1
    assert offsets(first) == (360, 360, 360)
    assert WorkloadForecast.objects.get(workload=first).basis == ForecastBasis.MAX_RUNTIME

    second = workload(alice, image="nvcr.io/other/thing:1", name="behind")
    queued(second, at=10)
    assert forecasts_refresh(now=NOW) == 2
    row = WorkloadForecast.objects.get(workload=second)
    assert row.likely is None and row.reason == ForecastReason.NO_RUNTIME
    assert row.message == "1 workload it waits for has no max runtime and no history of similar runs"
    assert row.phrase() == f"cannot estimate: {row.message}"

    Workload.objects.filter(pk__in=[w.pk for w in old]).update(image="pytorch/pytorch:2.1")
    forecasts_refresh(now=NOW)
    assert offsets(second) == (360 + 360, 360 + 600, 360 + 840)
    assert WorkloadForecast.objects.get(workload=second).basis == ForecastBasis.HISTORY

    never = workload(bob, project="nlp", gpus=4, name="huge")
    Workload.objects.filter(pk=never.pk).update(gpus=8)  # nlp deserves 4: non-preemptible 8 never fits
    queued(never)
    forecasts_refresh(now=NOW)
    assert WorkloadForecast.objects.get(workload=never).reason == ForecastReason.NEVER_FITS

    # Work that no longer waits loses its forecast at the next refresh.
    Workload.objects.filter(pk=never.pk).update(status=Status.STOPPED)
    forecasts_refresh(now=NOW)
    assert not WorkloadForecast.objects.filter(workload=never).exists()


def test_shown_on_the_list_the_detail_the_queue_and_the_api(demo, django_assert_max_num_queries):
    alice = demo["alice"]
    running(workload(alice, max_runtime=600), since=0)
    waiting = workload(alice, name="waits")
    queued(waiting)
    forecasts_refresh(now=NOW)
    stored = WorkloadForecast.objects.get(workload=waiting)
    client = signed_in(alice)
    data = client.get(f"/api/v1/workloads/{waiting.pk}/").json()["forecast"]
    assert data["likely"] == stored.likely.isoformat().replace("+00:00", "Z")
    assert data["basis"] == "max_runtime" and data["reason"] is None and data["summary"] == stored.phrase()
    for url in (reverse("workloads:list"), reverse("workloads:detail", args=[waiting.pk]),
                reverse("workloads:project_queue", args=["vision"])):
        html = client.get(url).content.decode()
        assert 'data-forecast="max_runtime"' in html, url
    # The list joins the forecast: more waiting rows cost no more queries.
    with django_assert_max_num_queries(40) as before:
        client.get("/api/v1/workloads/")
    for number in range(5):
        queued(workload(alice, name=f"more-{number}", gpus=1))
    forecasts_refresh(now=NOW)
    with django_assert_max_num_queries(len(before.captured_queries)):
        rows = client.get("/api/v1/workloads/").json()["results"]
    assert sum(1 for row in rows if row["forecast"]) == 6


def test_the_submit_panel_says_when_it_would_start(demo):
    """Vision's deserved 4 held by non-preemptible work (as mirrored): for non-preemptible work, the panel adds when
    the work ahead of it is forecast to start."""
    from django.utils import timezone

    from apps.cluster.models import ClusterQueueState

    alice = demo["alice"]
    vision, h100 = Project.objects.get(slug="vision"), NodePool.objects.get(slug="h100")
    running(workload(alice, max_runtime=600), since=0)
    queued(workload(alice, name="waits", max_runtime=600))
    ClusterQueueState.objects.create(name="proj-vision-h100-guaranteed", project=vision, node_pool=h100,
                                     guaranteed=True, used=4, nominal=4, observed_at=timezone.now())
    forecasts_refresh(now=NOW)
    page = signed_in(alice).get(reverse("workloads:submit", args=["training"]), {
        "panel": "1", "project": vision.pk, "node_pool": h100.pk, "gpus": "2", "pods": "1"},
        HTTP_HX_REQUEST="true").content.decode()
    assert "Would wait" in page and 'data-fact="start-forecast"' in page
    assert "If you submit this now: likely" in page and "after the 1 workload ahead of it" in page


@pytest.mark.slow
def test_forecast_shown_then_met(kubesim, org, watcher):
    """Against kubesim with the real worker task and watcher: vision's 4 deserved cards held by a 10-minute run
    with a 10-minute max runtime; the next one is forecast to start when it ends, the page says so, and after 10
    minutes of cluster time it has started within the range."""
    alice = org["alice"]
    holder = workload(alice, max_runtime=600, seconds=600, name="holder")
    assert tasks.workload_submit.apply(args=[holder.pk]).get() == "submitted"
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=holder.pk).status == Status.RUNNING)
    waiting = workload(alice, max_runtime=600, seconds=60, name="waiting")
    assert tasks.workload_submit.apply(args=[waiting.pk]).get() == "submitted"
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=waiting.pk).status == Status.QUEUED)
    cluster_now = datetime.fromisoformat(kubesim.advance(0).replace("Z", "+00:00"))
    forecasts_refresh(now=cluster_now)
    forecast = WorkloadForecast.objects.get(workload=waiting)
    admitted = Workload.objects.get(pk=holder.pk).admitted_at
    assert forecast.basis == ForecastBasis.MAX_RUNTIME
    assert admitted + timedelta(seconds=600) <= forecast.likely <= admitted + timedelta(seconds=660)
    page = signed_in(alice).get(reverse("workloads:detail", args=[waiting.pk])).content.decode()
    assert "data-start-forecast" in page and 'data-forecast="max_runtime"' in page
    kubesim.advance(600)
    wait_for(lambda: Workload.objects.get(pk=waiting.pk).admitted_at is not None)
    started = Workload.objects.get(pk=waiting.pk).admitted_at
    assert forecast.earliest - timedelta(seconds=60) <= started <= forecast.latest
    # The record of its first estimate gets that start from the mirrored admission.
    forecasts_refresh(now=datetime.fromisoformat(kubesim.advance(0).replace("Z", "+00:00")))
    assert ForecastRecord.objects.get(workload=waiting).started_at == started


def admitted(row, *, at: datetime) -> None:
    """What the mirror records when Kueue admits it: the status and the event at the cluster's time."""
    Workload.objects.filter(pk=row.pk).update(status=Status.ADMITTED, admitted_at=row.admitted_at or at)
    WorkloadEvent.objects.create(workload=row, at=at, cluster_at=at, from_status=Status.QUEUED,
                                 to_status=Status.ADMITTED)


def test_the_first_estimate_is_recorded_and_outlives_the_wait(demo):
    """The record keeps a workload's first replayed range (later refreshes do not move it) and, once the workload
    has quota, when it started; its forecast row goes, the record stays. Records older than 30 days go."""
    alice = demo["alice"]
    running(workload(alice, max_runtime=600), since=0)
    waiting = workload(alice, name="waits")
    queued(waiting)
    forecasts_refresh(now=NOW)
    forecasts_refresh(now=NOW + timedelta(seconds=60))
    record = ForecastRecord.objects.get(workload=waiting)
    assert (record.forecast_at, record.likely, record.started_at) == (NOW, NOW + timedelta(seconds=600), None)
    assert selectors.forecast_record(now=NOW) == [(NOW, record.earliest, record.latest, None, False)]  # waits still

    admitted(waiting, at=NOW + timedelta(seconds=650))
    forecasts_refresh(now=NOW + timedelta(seconds=700))
    assert not WorkloadForecast.objects.filter(workload=waiting).exists()
    record.refresh_from_db()
    assert record.started_at == NOW + timedelta(seconds=650)
    assert selectors.forecast_record(now=NOW) == [
        (NOW, record.earliest, record.latest, NOW + timedelta(seconds=650), False)]
    forecasts_refresh(now=NOW + timedelta(days=31))
    assert not ForecastRecord.objects.filter(workload=waiting).exists()


def test_an_older_refresh_never_replaces_a_newer_one(demo):
    """Refreshes overlap (beat's and the watcher's); one computed before the stored forecasts were, committing after
    them, is dropped: the newer rows and their time stay."""
    alice = demo["alice"]
    running(workload(alice, max_runtime=600), since=0)
    waiting = workload(alice, name="waits")
    queued(waiting)
    forecasts_refresh(now=NOW + timedelta(seconds=60))
    def stored():
        return WorkloadForecast.objects.filter(workload=waiting).values_list("computed_at", "likely", "reason").get()

    assert stored() == (NOW + timedelta(seconds=60), NOW + timedelta(seconds=600), "")
    assert services.workload_forecasts_store(computed_at=NOW, forecasts={waiting.pk: {
        "earliest": None, "likely": None, "latest": None, "basis": "", "reason": ForecastReason.NO_RUNTIME,
        "message": "older"}}) == 0
    assert stored() == (NOW + timedelta(seconds=60), NOW + timedelta(seconds=600), "")


def test_the_start_recorded_is_the_first_admission_after_the_estimate(demo):
    """Work admitted, preempted and requeued before its first estimate: its start is its next admission, not the
    one before (Workload.admitted_at keeps the first). Kueue's times have whole seconds: an admission in the second
    of the estimate counts."""
    alice = demo["alice"]
    running(workload(alice, max_runtime=600), since=0)
    requeued = workload(alice, name="requeued")
    admitted(requeued, at=NOW - timedelta(seconds=300))
    Workload.objects.filter(pk=requeued.pk).update(status=Status.REQUEUED)
    soon = workload(alice, name="soon", gpus=1, max_runtime=600)
    queued(soon, at=5)
    estimated_at = NOW + timedelta(microseconds=400_000)
    forecasts_refresh(now=estimated_at)
    assert not ForecastRecord.objects.filter(started_at__isnull=False).exists()
    admitted(soon, at=NOW)
    admitted(Workload.objects.get(pk=requeued.pk), at=NOW + timedelta(seconds=650))
    forecasts_refresh(now=NOW + timedelta(seconds=700))
    starts = dict(ForecastRecord.objects.values_list("workload_id", "started_at"))
    assert starts == {requeued.pk: NOW + timedelta(seconds=650), soon.pk: NOW}


def test_the_record_reads_recent_waits_that_started_in_one_query(demo, django_assert_num_queries):
    """Of each kind (preemptible or not) the latest waits of the last 30 days that started or wait still, newest
    first."""
    alice = demo["alice"]
    rows = [workload(alice, name=f"w{number}", gpus=1, preemptible=number >= 5) for number in range(7)]

    def record(row, *, likely: float, started: float | None, days_ago: float = 0):
        at = NOW - timedelta(days=days_ago)
        ForecastRecord.objects.create(workload=row, forecast_at=at, earliest=at, likely=at + timedelta(seconds=likely),
                                      latest=at + timedelta(seconds=likely + 60),
                                      started_at=None if started is None else at + timedelta(seconds=started))

    record(rows[0], likely=300, started=400, days_ago=1)
    record(rows[1], likely=300, started=200)
    record(rows[2], likely=0, started=30)  # it was to start at once: no wait to learn from
    record(rows[3], likely=300, started=None)  # still waiting
    record(rows[4], likely=300, started=400, days_ago=40)  # too old
    stopped = workload(alice, name="stopped", gpus=1)
    Workload.objects.filter(pk=stopped.pk).update(status=Status.STOPPED)
    record(stopped, likely=300, started=None)  # stopped before it started: says nothing
    record(rows[5], likely=300, started=500, days_ago=2)
    record(rows[6], likely=300, started=600, days_ago=3)
    with django_assert_num_queries(1):
        got = selectors.forecast_record(now=NOW)
    def waits(rows):
        return [(started and started - at, preemptible) for at, _, _, started, preemptible in rows]

    assert waits(got) == [(None, False), (timedelta(seconds=200), False), (timedelta(seconds=400), False),
                          (timedelta(seconds=500), True), (timedelta(seconds=600), True)]
    assert waits(selectors.forecast_record(now=NOW, size=2)) == [
        (None, False), (timedelta(seconds=200), False), (timedelta(seconds=500), True), (timedelta(seconds=600), True)]


def test_ranges_are_widened_by_the_record(demo):
    """Twenty recorded waits of non-preemptible work that all started at twice their latest: the next range shown
    reaches twice as far; the record keeps the replay's own range."""
    alice = demo["alice"]
    for number in range(WIDEN_MIN_RECORD):
        old = workload(alice, name=f"old-{number}", gpus=1)
        at = NOW - timedelta(hours=2)
        ForecastRecord.objects.create(workload=old, forecast_at=at, earliest=at + timedelta(seconds=300),
                                      likely=at + timedelta(seconds=300), latest=at + timedelta(seconds=300),
                                      started_at=at + timedelta(seconds=600))
    running(workload(alice, max_runtime=600), since=0)
    waiting = workload(alice, name="waits")
    queued(waiting)
    forecasts_refresh(now=NOW)
    assert offsets(waiting) == (600, 600, 1200)
    record = ForecastRecord.objects.get(workload=waiting)
    assert record.latest == NOW + timedelta(seconds=600)
