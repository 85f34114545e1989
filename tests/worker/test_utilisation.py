"""GPU utilisation without a (working) Prometheus, and the stored figures' arithmetic: what the worker keeps per
workload (chart, mean, idle stretch, flag) and per hour (measured, busy and idle card hours) and what showback,
its CSV and API make of them."""

from __future__ import annotations

import socket
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.usage import reports
from apps.usage.models import UtilisationHour
from apps.usage.services import utilisation_hours_add
from apps.workloads import selectors as workload_selectors
from apps.workloads import services as workload_services
from apps.workloads.models import IdlePolicy, Kind, WorkloadEvent, WorkloadUtilisation
from tests.apps.usage.reports_support import interval, workload
from worker import tasks, utilisation

START = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
MESSAGE = "utilisation not available (no prometheus configured)"


def samples(values: list[float], *, start: datetime = START, step: int = 60, memory: float = 1000.0):
    return [(start + timedelta(seconds=step * i), value, memory) for i, value in enumerate(values)]


@pytest.fixture
def no_prometheus(settings):
    settings.PROMETHEUS_URL = ""


@pytest.fixture
def silent_prometheus(settings):
    """A Prometheus address that accepts connections and never answers: whoever asks it waits for the timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{listener.getsockname()[1]}"
    settings.PROMETHEUS_TIMEOUT = 2
    yield settings.PROMETHEUS_URL
    listener.close()


def test_without_prometheus_pages_render_and_say_so(demo, client_for, no_prometheus):
    alice = client_for("alice")
    run = workload(alice_user(), name="plain")
    detail = alice.get(reverse("workloads:detail", args=[run.pk]))
    assert detail.status_code == 200 and MESSAGE in detail.content.decode().lower()
    showback = alice.get(reverse("usage:reports"))
    assert showback.status_code == 200 and MESSAGE in showback.content.decode().lower()
    api = alice.get("/api/v1/usage/", {"group_by": "project", "start": "2026-03-01", "end": "2026-04-01"}).json()
    assert api["utilisation_available"] is False and api["total"]["gpu_utilisation"] is None
    csv = b"".join(alice.get(reverse("usage:reports_csv"), {"start": "2026-03-01", "end": "2026-04-01"})
                   .streaming_content).decode()
    assert "GPU utilisation" not in csv.splitlines()[0]
    admin = client_for("admin")
    held = admin.get(reverse("workloads:held_idle"))
    assert held.status_code == 200 and MESSAGE in held.content.decode().lower()
    assert tasks.utilisation_refresh.apply().get() == 0


def alice_user():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="alice")


def test_a_silent_prometheus_never_holds_up_a_page(demo, client_for, silent_prometheus):
    alice = client_for("alice")
    run = workload(alice_user(), name="waiting")
    run.job_name, run.started_at = "job-waiting", START
    run.save(update_fields=["job_name", "started_at"])
    for url in (reverse("workloads:detail", args=[run.pk]), reverse("usage:reports"), "/api/v1/usage/?group_by="
                "pool&start=2026-03-01&end=2026-04-01"):
        began = time.monotonic()
        assert alice.get(url).status_code == 200
        assert time.monotonic() - began < 1.5, url  # the timeout is 2 s: no page asked Prometheus
    began = time.monotonic()
    assert tasks.utilisation_refresh.apply().get() == 0  # the worker waits, bounded by its timeout, and gives up
    assert 1.5 < time.monotonic() - began < 10
    with pytest.raises(utilisation.PrometheusUnavailable):
        utilisation.client().query_range("up", START, START + timedelta(minutes=1), 60)


def test_samples_count_once_and_the_idle_stretch_flags_after_the_policys_duration(demo, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    policy = IdlePolicy.objects.update_or_create(pk=1, defaults={"threshold_percent": 5, "idle_seconds": 300})[0]
    run = workload(alice_user(), name="nb", gpus=2)
    first = samples([90, 80, 2, 1])
    now = START + timedelta(minutes=10)
    assert workload_services.workload_utilisation_record(workload=run, samples=first, policy=policy, now=now) == first
    assert workload_services.workload_utilisation_record(workload=run, samples=first, policy=policy, now=now) == []
    row = WorkloadUtilisation.objects.get(workload=run)
    assert row.samples == 4 and row.mean_percent == pytest.approx(43.25)
    assert row.idle_since == START + timedelta(minutes=2) and row.idle_flagged_at is None
    later = samples([0, 0, 0, 0, 0], start=START + timedelta(minutes=3))
    accepted = workload_services.workload_utilisation_record(workload=run, samples=later, policy=policy, now=now)
    assert accepted == later[1:]  # the sample at 10:03 was counted already
    row.refresh_from_db()
    assert row.idle_flagged_at == now  # idle from 10:02 to 10:07: 5 minutes
    event = WorkloadEvent.objects.get(workload=run, reason=workload_services.GPU_IDLE_REASON)
    assert event.message == "GPUs below 5% for 5 minutes"
    busy_again = samples([50], start=START + timedelta(minutes=8))
    workload_services.workload_utilisation_record(workload=run, samples=busy_again, policy=policy, now=now)
    row.refresh_from_db()
    assert row.idle_since is None and row.idle_flagged_at is None
    assert not mail.outbox  # the e-mail goes out after commit, by the worker (the test's transaction never commits)


def test_the_idle_mail_goes_only_to_owners_who_opted_in(demo, django_capture_on_commit_callbacks):
    from apps.accounts.services import notification_preference_set

    policy = IdlePolicy.objects.update_or_create(pk=1, defaults={"threshold_percent": 5, "idle_seconds": 120})[0]
    now = START + timedelta(minutes=10)

    def flag(name: str) -> list:
        run = workload(alice_user(), name=name, gpus=1)
        with django_capture_on_commit_callbacks() as sent:
            workload_services.workload_utilisation_record(workload=run, samples=samples([0, 0, 0, 0]), policy=policy,
                                                          now=now)
        assert WorkloadUtilisation.objects.get(workload=run).idle_flagged_at == now  # flagged either way
        return sent

    assert flag("quiet") == []  # no opt-in row: nothing is sent
    notification_preference_set(user=alice_user(), on_admitted=True, on_preempted=False, on_finished=False,
                                on_failed=False, on_idle=False)
    assert flag("still-quiet") == []
    notification_preference_set(user=alice_user(), on_admitted=False, on_preempted=False, on_finished=False,
                                on_failed=False, on_idle=True)
    assert len(flag("told")) == 1


def test_the_workload_api_gives_what_was_measured(demo, client_for, django_assert_max_num_queries):
    policy = IdlePolicy.objects.update_or_create(pk=1, defaults={"threshold_percent": 5, "idle_seconds": 120})[0]
    measured = workload(alice_user(), name="measured", gpus=1)
    unmeasured = workload(alice_user(), name="unmeasured", gpus=1)
    workload_services.workload_utilisation_record(workload=measured, samples=samples([40, 0, 0, 0]), policy=policy,
                                                  now=START + timedelta(minutes=10))
    api = client_for("alice")
    shown = api.get(f"/api/v1/workloads/{measured.pk}/").json()["utilisation"]
    assert shown["mean_percent"] == pytest.approx(10) and shown["last_percent"] == 0 and shown["samples"] == 4
    assert shown["idle"] is True and shown["idle_since"].startswith("2026-03-02T10:01")
    assert api.get(f"/api/v1/workloads/{unmeasured.pk}/").json()["utilisation"] is None
    with django_assert_max_num_queries(12):  # joined into the list's one query, not one per row
        rows = {row["name"]: row["utilisation"] for row in api.get("/api/v1/workloads/").json()["results"]}
    assert rows["measured"]["idle"] is True and rows["unmeasured"] is None


def test_an_inference_service_keeps_each_replicas_figures_beside_the_mean(demo, client_for, settings):
    """The mean over the pods stays what idle and showback use; each pod's own figures are kept for the detail page
    and the API's detail (not its list), by pod name, a replaced pod dropping out an hour after its last sample."""
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"  # configured (never asked: pages read what the worker stored)
    policy = IdlePolicy.objects.update_or_create(pk=1, defaults={"threshold_percent": 5, "idle_seconds": 600})[0]
    served = workload(alice_user(), name="served", gpus=1)
    served.kind = Kind.INFERENCE
    served.save(update_fields=["kind"])

    def at(minutes: int) -> datetime:
        return START + timedelta(minutes=minutes)

    busy, idle = "wl-1-5d4f-busy", "wl-1-5d4f-idle"
    workload_services.workload_utilisation_record(
        workload=served, samples=samples([50, 50]), policy=policy, now=at(5),
        replicas={busy: [(at(0), 100.0), (at(1), 100.0)], idle: [(at(0), 0.0), (at(1), 0.0)]})
    workload_services.workload_utilisation_record(  # a replay counts nothing twice; the busy pod slows down
        workload=served, samples=samples([50, 30, 40], start=at(1)), policy=policy, now=at(5),
        replicas={busy: [(at(1), 100.0), (at(2), 60.0), (at(3), 80.0)], idle: [(at(1), 0.0), (at(2), 0.0),
                                                                              (at(3), 0.0)]})
    row = WorkloadUtilisation.objects.get(workload=served)
    assert row.mean_percent == pytest.approx(42.5) and row.samples == 4  # the mean over the pods, as before
    assert row.replicas == [
        {"pod": busy, "mean_percent": 85.0, "last_percent": 80.0, "samples": 4, "last_at": at(3).timestamp()},
        {"pod": idle, "mean_percent": 0.0, "last_percent": 0.0, "samples": 4, "last_at": at(3).timestamp()}]

    api = client_for("alice")
    with CaptureQueriesContext(connection) as queries:
        detail = api.get(f"/api/v1/workloads/{served.pk}/").json()["utilisation"]
    assert not [query for query in queries if 'FROM "workloads_workloadutilisation"' in query["sql"]]  # joined in
    assert [(r["pod"], r["mean_percent"], r["last_percent"], r["samples"]) for r in detail["replicas"]] == [
        (busy, 85.0, 80.0, 4), (idle, 0.0, 0.0, 4)]
    assert detail["replicas"][0]["last_at"].startswith("2026-03-02T10:03")
    listed = {row["name"]: row["utilisation"] for row in api.get("/api/v1/workloads/").json()["results"]}
    assert "replicas" not in listed["served"] and listed["served"]["mean_percent"] == pytest.approx(42.5)

    page = api.get(reverse("workloads:detail", args=[served.pk])).content.decode()
    table = page.split('data-utilisation="replicas"')[1].split("</table>")[0]
    assert f'data-replica="{busy}"' in table and f'data-replica="{idle}"' in table
    assert '"replica-mean">85%' in table and '"replica-mean">0%' in table

    rolled = "wl-1-7c8e-new"  # a rollout replaced both pods: an hour after their last sample they go
    workload_services.workload_utilisation_record(
        workload=served, samples=samples([70], start=at(64)), policy=policy, now=at(65),
        replicas={rolled: [(at(64), 70.0)]})
    assert [r["pod"] for r in WorkloadUtilisation.objects.get(workload=served).replicas] == [rolled]


def test_the_chart_stays_bounded(demo):
    policy = IdlePolicy.current()
    run = workload(alice_user(), name="long")
    many = samples([float(i % 100) for i in range(1000)], step=1)
    workload_services.workload_utilisation_record(workload=run, samples=many, policy=policy, now=START)
    row = WorkloadUtilisation.objects.get(workload=run)
    assert row.samples == 1000 and len(row.series) <= WorkloadUtilisation.MAX_POINTS
    assert row.series[0][0] >= START.timestamp() and row.series[-1][0] <= many[-1][0].timestamp()


def test_hourly_figures_and_showback(demo, settings, django_assert_max_num_queries):
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    alice = alice_user()
    busy = workload(alice, name="busy", gpus=2)  # h100: full cards
    shared = workload(alice, name="shared", pool="l40s-shared", project="nlp")  # 1/8 of a card
    interval(busy, "2026-03-02 10:00", "2026-03-02 12:00")
    interval(shared, "2026-03-02 10:00", "2026-03-02 12:00")
    # Two hours of busy at 80 %, crossing an hour boundary; the shared one idle half the time.
    utilisation_hours_add(workload=busy, samples=samples([80.0] * 120), sample_seconds=60, threshold_percent=5)
    utilisation_hours_add(workload=shared, samples=samples([0.0] * 60 + [40.0] * 60), sample_seconds=60,
                          threshold_percent=5)
    assert UtilisationHour.objects.filter(workload=busy).count() == 2
    window = reports.month_window(2026, 3)
    settings.PROMETHEUS_URL = ""
    with django_assert_max_num_queries(100) as unmeasured:
        reports.usage_report(user=demo_admin(), group=reports.Group.PROJECT, window=window,
                             now=START + timedelta(days=30))
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    with django_assert_max_num_queries(len(unmeasured) + 1):  # one more aggregate query, however many rows
        report = reports.usage_report(user=demo_admin(), group=reports.Group.PROJECT, window=window,
                                      now=START + timedelta(days=30))
    rows = {row.slug: row for row in report.rows}
    assert rows["vision"].utilisation == pytest.approx(0.8) and rows["vision"].idle_hours == 0
    assert rows["vision"].measured_hours == pytest.approx(4.0)  # 2 cards x 2 hours
    assert rows["nlp"].utilisation == pytest.approx(0.2) and rows["nlp"].idle_hours == pytest.approx(1 / 8)
    assert report.total.measured_hours == pytest.approx(4.25)
    header = reports.report_header(report)
    assert header[-2:] == ["GPU utilisation", "Allocated but idle GPU-hours"]
    assert reports.report_cells(report, rows["nlp"])[-2:] == ["20.0%", "0.125"]
    months = reports.usage_report(user=demo_admin(), group=reports.Group.MONTH, window=window,
                                  now=START + timedelta(days=30))
    assert months.rows[0].utilisation == pytest.approx((4 * 0.8 + 0.25 * 0.2) / 4.25)
    # Only what the viewer may see counts: carol (Forecasting) sees neither.
    carol = reports.usage_report(user=user("carol"), group=reports.Group.PROJECT, window=window,
                                 now=START + timedelta(days=30))
    assert carol.total.measured_hours == 0


def test_gpu_idle_notebooks_are_culled_unless_the_owner_is_active(demo):
    policy = IdlePolicy.objects.update_or_create(pk=1, defaults={"threshold_percent": 5, "idle_seconds": 60,
                                                                 "warning_minutes": 0})[0]
    notebook = workload(alice_user(), name="nb")
    notebook.kind = Kind.NOTEBOOK
    notebook.save(update_fields=["kind"])
    now = datetime.now(UTC)
    idle = samples([0.0] * 5, start=now - timedelta(minutes=5))
    workload_services.workload_utilisation_record(workload=notebook, samples=idle, policy=policy, now=now)
    notebook.last_activity_at = now - timedelta(seconds=10)  # the owner is still there
    notebook.save(update_fields=["last_activity_at"])
    assert workload_selectors.notebooks_gpu_idle(now=now) == []
    notebook.last_activity_at = now - timedelta(minutes=10)
    notebook.save(update_fields=["last_activity_at"])
    assert workload_selectors.notebooks_gpu_idle(now=now) == [notebook]
    IdlePolicy.objects.filter(pk=1).update(cull_notebooks=False)
    assert workload_selectors.notebooks_gpu_idle(now=now) == []


def test_only_admins_see_the_held_idle_list_and_set_the_rule(demo, client_for):
    assert client_for("deptadmin").get(reverse("workloads:held_idle")).status_code == 404
    admin = client_for("admin")
    refused = admin.post(reverse("workloads:held_idle"), {"threshold_percent": "0", "idle_minutes": "abc"})
    assert refused.status_code == 400 and IdlePolicy.current().threshold_percent == 5
    saved = admin.post(reverse("workloads:held_idle"), {"threshold_percent": "10", "idle_minutes": "45",
                                                        "cull_notebooks": "on", "warning_minutes": "20"})
    assert saved.status_code == 302
    policy = IdlePolicy.current()
    assert (policy.threshold_percent, policy.idle_seconds, policy.cull_notebooks, policy.warning_minutes) == (
        10, 2700, True, 20)
    from apps.core.models import AuditEvent

    assert AuditEvent.objects.filter(action="idle_policy.update").count() == 1


def demo_admin():
    return user("admin")


def user(username: str):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username)


def test_the_held_idle_list_costs_the_same_queries_for_one_row_or_many(demo, client_for, django_assert_num_queries,
                                                                      django_assert_max_num_queries):
    policy = IdlePolicy.objects.update_or_create(pk=1, defaults={"threshold_percent": 5, "idle_seconds": 60})[0]
    admin = client_for("admin")
    now = datetime.now(UTC)

    def idle_workload(name: str) -> None:
        run = workload(alice_user(), name=name)
        workload_services.workload_utilisation_record(
            workload=run, samples=samples([0.0] * 3, start=now - timedelta(minutes=3)), policy=policy, now=now)

    idle_workload("idle-0")
    with django_assert_max_num_queries(100) as one:
        assert "idle-0" in admin.get(reverse("workloads:held_idle")).content.decode()
    for index in range(1, 6):
        idle_workload(f"idle-{index}")
    with django_assert_num_queries(len(one)):
        page = admin.get(reverse("workloads:held_idle")).content.decode()
    assert all(f"idle-{index}" in page for index in range(6))
