"""Nothing lost, nothing hijacked: the outbox under faults, with real processes.

Each test runs the real Celery worker as a subprocess (so it can be SIGKILLed), on a redis-server the test starts
and stops itself (a free port, no persistence: it comes back empty, as the probe's did), against a kubesim
subprocess (manual clock, --state, so it can be restarted), with the real watcher in threads of this process and
PostgreSQL. Users act through the API. After each fault the test lets the deadlines pass, sends the sweep as beat
would, and checks that everything converged exactly once: one Job per workload that should have one (none for a
stopped one), no workload left submitting or stopping, every intent done, every GPU-hour interval of a finished or
stopped workload closed. Every process is started here and stopped by the pid recorded here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from apps.core.kueue_names import WORKLOAD_ID_LABEL
from apps.core.models import Intent
from apps.org.demo import seed_demo
from apps.usage.models import UsageInterval
from apps.workloads.models import HOLDING_STATUSES, Status, Workload, WorkloadEvent
from kubesim.testing import KubesimProcess
from tests.worker.conftest import wait_for
from worker.kueue_sync import desired_from_database, reconcile
from worker.watcher import Watcher

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.skipif("postgresql" not in settings.DATABASES["default"]["ENGINE"],
                       reason="the worker subprocess shares the test database: PostgreSQL"),
]

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "proj-vision"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    """A redis-server of this test's own on a free port, without persistence; stopped by the pid it recorded."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid = 0

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        wait_for(lambda: _pings(client), timeout=10)
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        os.kill(self.pid, signal.SIGTERM)
        self.proc.wait(timeout=10)
        self.proc = None

    def queued(self) -> int:
        """Messages waiting in the test run's queue."""
        return int(redis.Redis(port=self.port).llen(settings.CELERY_TASK_DEFAULT_QUEUE))


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.exceptions.ConnectionError:
        return False


class WorkerProcess:
    """`celery worker` (solo pool) in a subprocess on the test's broker, database and cluster."""

    count = 0

    def __init__(self, *, broker_url: str, kubeconfig: str, log_dir: Path) -> None:
        database = settings.DATABASES["default"]
        credentials = database["USER"] + (f":{database['PASSWORD']}" if database.get("PASSWORD") else "")
        self.env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{credentials}@{database['HOST'] or '127.0.0.1'}:{database['PORT'] or 5432}/"
                            f"{database['NAME']}",
            "REDIS_URL": broker_url, "KUBECONFIG": kubeconfig, "CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
            "PORTAL_RUN_DIR": str(log_dir), "DJANGO_SETTINGS_MODULE": "portal.settings", "LOG_LEVEL": "INFO",
        }
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid = 0

    def start(self) -> WorkerProcess:
        WorkerProcess.count += 1
        self.log = self.log_dir / f"worker-{WorkerProcess.count}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "portal.celery", "worker", "--pool", "solo", "--loglevel",
                 "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
                 "--queues", settings.CELERY_TASK_DEFAULT_QUEUE, "--hostname", f"faults-{WorkerProcess.count}@%h"],
                env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        wait_for(lambda: b" ready." in self.log.read_bytes() or self.proc.poll() is not None, timeout=60)
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        return self

    def kill(self) -> None:
        """SIGKILL by its pid: no warm shutdown, no acknowledgement of the task in hand."""
        assert self.proc is not None
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        os.kill(self.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture(scope="module")
def kubesim(tmp_path_factory):
    """kubesim as a subprocess on a fixed free port with its state in a file, so a restart keeps the cluster."""
    workdir = tmp_path_factory.mktemp("kubesim")
    process = KubesimProcess(str(workdir), "--port", str(free_port()), "--state", str(workdir / "state.json"),
                             clock="manual")
    process.start()
    yield process
    process.stop()


@pytest.fixture
def broker(transactional_db):
    """This test's own Redis; the portal (this process) sends its tasks there while the test runs."""
    from portal.celery import app

    server = RedisServer().start()
    original = app.conf.broker_url
    _point(app, server.url)
    yield server
    app.pool.force_close_all()  # this test's connections (kombu keeps pools per URL; the port is never reused)
    server.stop()
    _point(app, original)


def _point(app, url: str) -> None:
    """Send to `url` from now on; the pools of other URLs stay as they are, for whoever uses them next."""
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.broker_url = url
    app.conf.CELERY_BROKER_URL = url  # the settings' own key, which Celery 5.6 reads before broker_url


@pytest.fixture
def org(broker, cluster, transactional_db):
    seed_demo()
    reconcile(cluster, desired_from_database())
    Intent.objects.filter(kind="kueue.sync").update(done_at=timezone.now(), outcome="reconciled by the test")
    from portal.celery import app

    with app.connection_for_write() as connection:  # the seed's reconcile requests: done above
        connection.default_channel.queue_purge(settings.CELERY_TASK_DEFAULT_QUEUE)
    return {user.username: user for user in get_user_model().objects.all()}


@pytest.fixture
def worker_process(broker, kubesim, tmp_path):
    started: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        process = WorkerProcess(broker_url=broker.url, kubeconfig=kubesim.kubeconfig_path, log_dir=tmp_path)
        started.append(process.start())
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def api(org):
    client = Client()
    client.force_login(org["alice"])
    return client


def submit(api, name: str, seconds: int, gpus: int = 1) -> int:
    response = api.post("/api/v1/workloads/", data=json.dumps({
        "project": "vision", "kind": "training", "name": name, "image": "pytorch/pytorch:2.4.0",
        "command": ["sleep", str(seconds)], "node_pool": "l40s-shared", "gpus": gpus, "cpu": "1", "memory": "4Gi",
        "labels": {"model": "resnet50", "data_class": "public"}}), content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def stop(api, workload_id: int) -> None:
    response = api.post(f"/api/v1/workloads/{workload_id}/stop/")
    assert response.status_code == 202, response.content


def statuses(ids) -> dict[int, str]:
    return dict(Workload.objects.filter(pk__in=ids).values_list("pk", "status"))


def deadlines_pass() -> None:
    """Time passes: every open intent is past its deadline (the sweep runs every 15 s; a deadline is 30 s)."""
    Intent.objects.filter(done_at__isnull=True).update(next_attempt_at=timezone.now() - timedelta(seconds=1))


def leases_run_out() -> None:
    """Time passes beyond the hard task time limit: leases and submit claims of a killed worker have run out."""
    past = timezone.now() - timedelta(minutes=10)
    Intent.objects.filter(done_at__isnull=True, claimed_until__isnull=False).update(claimed_until=past)
    Workload.objects.filter(status=Status.SUBMITTING, submit_claimed_at__isnull=False).update(submit_claimed_at=past)


def sweep() -> None:
    """What beat sends every 15 s."""
    from worker import tasks

    tasks.intents_sweep.delay()


def problems(cluster, ids, *, stopped: set[int]) -> list[str]:
    """Everything that is not converged yet, or not exactly once; empty when all is well."""
    found: list[str] = []
    rows = {w.pk: w for w in Workload.objects.filter(pk__in=ids)}
    jobs: dict[int, list[dict]] = {}
    for job in cluster.list("Job", namespace=NAMESPACE):
        jobs.setdefault(int(job["metadata"]["labels"][WORKLOAD_ID_LABEL]), []).append(job)
    for pk in ids:
        row = rows[pk]
        if row.status in {Status.SUBMITTING, Status.STOPPING}:
            found.append(f"{pk} still {row.status}")
        if row.status in {Status.SUBMIT_FAILED, Status.REJECTED}:
            found.append(f"{pk} {row.status}: {row.status_message}")
        if pk in stopped and row.status not in {Status.STOPPED, Status.SUCCEEDED}:
            found.append(f"{pk} was stopped but is {row.status}")
        if pk not in stopped and row.status == Status.STOPPED:
            found.append(f"{pk} stopped without a stop: {row.status_reason} {row.status_message}")
        held = jobs.get(pk, [])
        if len(held) > 1:
            found.append(f"{pk} has {len(held)} Jobs")
        if row.status == Status.STOPPED and held:
            found.append(f"{pk} is stopped but its Job is still there")
        if row.status not in {Status.STOPPED, Status.SUBMITTING} and len(held) != 1:
            found.append(f"{pk} is {row.status} with {len(held)} Jobs")
        if held and row.k8s_uid and held[0]["metadata"]["uid"] != row.k8s_uid:
            found.append(f"{pk} records Job uid {row.k8s_uid}, the cluster has {held[0]['metadata']['uid']}")
        created = WorkloadEvent.objects.filter(workload_id=pk, to_status=Status.QUEUED, reason="Created").count()
        if created > 1:
            found.append(f"{pk} was created {created} times")
        ended = WorkloadEvent.objects.filter(workload_id=pk, to_status__in=[Status.STOPPED, Status.SUCCEEDED]).count()
        if ended > 1:
            found.append(f"{pk} ended {ended} times")
        open_intervals = UsageInterval.objects.filter(workload_id=pk, ended_at__isnull=True).count()
        if row.status in HOLDING_STATUSES and open_intervals != 1:
            found.append(f"{pk} is {row.status} with {open_intervals} open GPU-hour intervals")
        if row.status not in HOLDING_STATUSES and open_intervals:
            found.append(f"{pk} is {row.status} with an open GPU-hour interval")
        for started, ended_at in UsageInterval.objects.filter(workload_id=pk).values_list("started_at", "ended_at"):
            if ended_at is not None and not started <= ended_at <= started + timedelta(hours=2):
                found.append(f"{pk} has an interval {started} .. {ended_at}, not on the cluster's clock")
    left = Intent.objects.filter(done_at__isnull=True, kind__startswith="workload.", target_id__in=ids)
    found += [f"intent open: {intent} (attempts {intent.attempts}, {intent.last_error[:80]})" for intent in left]
    return found


def converge(kubesim, cluster, ids, *, stopped: set[int], timeout: float = 90.0) -> None:
    def done() -> bool:
        kubesim.advance(0)
        return not problems(cluster, ids, stopped=stopped)

    wait_for(done, timeout=timeout, interval=0.5, describe=lambda: problems(cluster, ids, stopped=stopped))


def restart_watcher(cluster, watcher) -> Watcher:
    watcher.stop()
    restarted = Watcher(cluster, resync_seconds=3600, positions_seconds=0.5, watch_timeout_seconds=2)
    restarted.start()
    return restarted


# --- the faults ----------------------------------------------------------------------------------------------------


def test_broker_outage_during_submits_and_stops(api, kubesim, cluster, broker, worker_process, watcher):
    worker_process()
    short = [submit(api, f"short-{i}", 30) for i in range(4)]
    long = [submit(api, f"long-{i}", 3600) for i in range(4)]
    wait_for(lambda: all(s != Status.SUBMITTING for s in statuses(short + long).values()), timeout=60)
    kubesim.advance(1)
    wait_for(lambda: all(s == Status.RUNNING for s in statuses(short + long).values()), timeout=30)

    broker.stop()  # the broker goes away; users carry on
    during = [submit(api, f"during-{i}", 3600) for i in range(6)]
    stopped = set(short[:3] + long[:3] + during[:2])
    for pk in sorted(stopped):
        stop(api, pk)
    assert set(statuses(during).values()) == {Status.SUBMITTING, Status.STOPPING}
    assert Intent.objects.filter(kind="workload.stop", target_id__in=stopped, done_at__isnull=True).count() == 8
    # The watcher restarts while the short Jobs run to Complete, their stops still pending (the probe's case).
    watcher.stop()
    kubesim.advance(31)
    broker.start()  # back, and empty
    assert broker.queued() == 0
    watcher = Watcher(cluster, resync_seconds=3600, positions_seconds=0.5, watch_timeout_seconds=2)
    watcher.start()
    try:
        deadlines_pass()
        sweep()
        ids = short + long + during
        converge(kubesim, cluster, ids, stopped=stopped)
    finally:
        watcher.stop()
    final = statuses(ids)
    assert [final[pk] for pk in short] == [Status.SUCCEEDED] * 4  # finished before their stops took effect
    assert [final[pk] for pk in long[:3] + during[:2]] == [Status.STOPPED] * 5
    assert final[long[3]] == Status.RUNNING
    assert all(final[pk] in {Status.QUEUED, Status.ADMITTED, Status.RUNNING} for pk in during[2:])
    for pk in short[:3]:  # closed on the cluster's clock, at the Job's completion
        row = Workload.objects.get(pk=pk)
        interval = UsageInterval.objects.get(workload_id=pk)
        assert interval.ended_at == row.finished_at
        assert (interval.ended_at - interval.started_at).total_seconds() == pytest.approx(30, abs=2)
    for pk in during[:2]:  # stopped before they were ever submitted: no Job, no GPU-hours
        assert not UsageInterval.objects.filter(workload_id=pk).exists()


def test_kubernetes_api_errors_and_latency(api, kubesim, cluster, worker_process, watcher):
    worker_process()
    kubesim.faults(error_rate=0.3, latency_ms=200, verbs=["create", "delete"], resources=["jobs"], seed=7)
    try:
        ids = [submit(api, f"flaky-{i}", 3600) for i in range(12)]
        wait_for(lambda: all(s != Status.SUBMITTING for s in statuses(ids).values()), timeout=120,
                 describe=lambda: statuses(ids))
        kubesim.advance(1)
        stopped = set(ids[:4])
        for pk in ids[:4]:
            stop(api, pk)
        wait_for(lambda: all(s != Status.STOPPING for s in statuses(ids).values()), timeout=120,
                 describe=lambda: statuses(ids))
    finally:
        kubesim.clear_faults()
    converge(kubesim, cluster, ids, stopped=stopped)
    retried = Intent.objects.filter(kind__startswith="workload.", target_id__in=ids).exclude(last_error="")
    assert retried.exists() and all("500" in intent.last_error for intent in retried)  # the faults were real
    assert Workload.objects.filter(pk__in=ids, submit_attempts__gt=1).exists()


def test_worker_killed_mid_task(api, kubesim, cluster, broker, worker_process, watcher):
    running = [submit(api, f"run-{i}", 3600) for i in range(4)]
    worker = worker_process()
    wait_for(lambda: all(s != Status.SUBMITTING for s in statuses(running).values()), timeout=60)
    kubesim.advance(1)
    # The API server now answers Job creates and deletes after 3 s, with an error: a task is inside such a call when
    # its worker is SIGKILLed, and nothing reached the cluster (so the watcher cannot finish it either).
    kubesim.faults(error_rate=1.0, latency_ms=3000, verbs=["create", "delete"], resources=["jobs"])
    try:
        stop(api, running[0])
        wait_for(lambda: Intent.objects.filter(kind="workload.stop", target_id=running[0],
                                               claimed_until__isnull=False).exists(), timeout=30)
        worker.kill()  # in the middle of the stop
        killed_submit = submit(api, "killed", 3600)
        worker = worker_process()
        wait_for(lambda: Workload.objects.filter(pk=killed_submit, submit_claimed_at__isnull=False).exists(),
                 timeout=30)
        worker.kill()  # in the middle of the submit
        # More work queued behind them, for the next worker.
        later = [submit(api, f"later-{i}", 3600) for i in range(3)]
        stop(api, running[1])
    finally:
        kubesim.clear_faults()
    ids = [*running, killed_submit, *later]
    stopped = {running[0], running[1]}
    worker_process()
    wait_for(lambda: {pk for pk, s in statuses(ids).items() if s in {Status.SUBMITTING, Status.STOPPING}}
             == {running[0], killed_submit}, timeout=60, describe=lambda: statuses(ids))
    # What the killed tasks held: their messages are unacknowledged (acks_late) and come back after the broker's
    # visibility timeout (minutes); their leases and claims keep other tasks out until they run out. Then the sweep
    # sends both again.
    for pk in (running[0], killed_submit):
        assert Intent.objects.get(target_id=pk, done_at__isnull=True).claimed_until is not None
    leases_run_out()
    deadlines_pass()
    sweep()
    converge(kubesim, cluster, ids, stopped=stopped)
    for pk in (running[0], killed_submit):
        assert Intent.objects.get(target_id=pk, kind__startswith="workload.", done_at__isnull=False,
                                  dispatches=2).attempts == 2  # the killed attempt, then the sweep's


def test_kubesim_restart_and_a_watcher_restart(api, kubesim, cluster, worker_process, watcher):
    worker_process()
    before = [submit(api, f"before-{i}", 3600) for i in range(5)]
    wait_for(lambda: all(s != Status.SUBMITTING for s in statuses(before).values()), timeout=60)
    kubesim.advance(1)
    wait_for(lambda: all(s == Status.RUNNING for s in statuses(before).values()), timeout=30)
    kubesim.stop()  # SIGTERM: it saves its state
    try:
        during = [submit(api, f"during-{i}", 3600) for i in range(3)]
        stopped = {before[0], before[1], during[0]}
        for pk in sorted(stopped):
            stop(api, pk)
        time.sleep(2)  # the worker tries, fails (connection refused) and schedules retries
    finally:
        kubesim.start()
    watcher = restart_watcher(cluster, watcher)
    try:
        deadlines_pass()
        sweep()
        ids = before + during
        converge(kubesim, cluster, ids, stopped=stopped)
    finally:
        watcher.stop()
    assert Intent.objects.filter(target_id__in=ids, kind__startswith="workload.").exclude(last_error="").exists()
