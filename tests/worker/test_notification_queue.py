"""A receiver that is down or slow never slows a submit: notification deliveries and e-mails go to a queue of their
own (portal.celery.route_task), whoever sends them, and a worker of their own consumes it.

The live test runs the deployments' shape with real processes: the worker of the default queue in a thread of this
process, the notifier (`celery worker --pool threads --queues <notifications>`) as a subprocess on the run's broker
and test database, and a local receiver that holds every delivery past its deadline. With the notifier's threads
all held, a submission still reaches kubesim within a fraction of one deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from apps.core.models import Intent
from apps.org import services as org_services
from apps.org.models import NotificationDelivery
from apps.workloads.models import Workload
from portal.celery import NOTIFICATION_TASKS, app
from tests.apps.workloads.helpers import submit_payload
from tests.receiver import receiver
from tests.worker.conftest import signed_in, wait_for
from worker import tasks

ROOT = Path(__file__).resolve().parents[2]
NOTIFIER_THREADS = 2
SECRET = "a-secret-of-enough-length"


def queued(queue: str) -> int:
    with app.connection_for_write() as connection:
        return connection.default_channel.queue_declare(queue=queue).message_count


def purge(*queues: str) -> None:
    with app.connection_for_write() as connection:
        for queue in queues:
            connection.default_channel.queue_purge(queue)


def test_every_task_that_waits_on_a_receiver_is_routed_to_the_notifications_queue_and_nothing_else():
    assert set(app.tasks) >= NOTIFICATION_TASKS  # the names are real tasks
    for name in app.tasks:
        if not name.startswith("worker.tasks."):
            continue
        queue = app.amqp.router.route({}, name)["queue"].name
        expected = settings.NOTIFICATIONS_QUEUE if name in NOTIFICATION_TASKS else settings.CELERY_TASK_DEFAULT_QUEUE
        assert queue == expected, name


def test_the_sweep_sends_a_notification_delivery_again_onto_the_notifications_queue(demo):
    purge(settings.CELERY_TASK_DEFAULT_QUEUE, settings.NOTIFICATIONS_QUEUE)
    ch = org_services.notification_channel_create(actor=demo["alice"], name="hook", kind="webhook",
                                                  url="http://127.0.0.1:9/hook", secret=SECRET,
                                                  events=["workload.admitted"])
    delivery = org_services.notification_channel_test(actor=demo["alice"], channel=ch, link="http://portal/x")
    # Its message lost (this test's transaction never commits, so none was sent): the deadline passes.
    Intent.objects.filter(kind=org_services.NOTIFICATION_INTENT, target_id=delivery.pk).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1))
    try:
        assert tasks.intents_sweep() >= 1
        assert queued(settings.NOTIFICATIONS_QUEUE) == 1
    finally:
        purge(settings.CELERY_TASK_DEFAULT_QUEUE, settings.NOTIFICATIONS_QUEUE)


class Notifier:
    """The notifier of the deployments, as a subprocess on this run's broker, queues and test database; stopped by
    the pid recorded here."""

    def __init__(self, log: Path) -> None:
        database = settings.DATABASES["default"]
        credentials = database["USER"] + (f":{database['PASSWORD']}" if database.get("PASSWORD") else "")
        self.env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{credentials}@{database['HOST'] or '127.0.0.1'}:{database['PORT'] or 5432}/"
                            f"{database['NAME']}",
            "REDIS_URL": settings.REDIS_URL, "CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
            "CELERY_NOTIFICATIONS_QUEUE": settings.NOTIFICATIONS_QUEUE, "PORTAL_RUN_DIR": str(log.parent),
            "NOTIFICATIONS_TIMEOUT": str(settings.NOTIFICATIONS_TIMEOUT), "NOTIFICATIONS_ALLOW_PRIVATE": "true",
            "WORKER_METRICS_PORT": "0", "DJANGO_SETTINGS_MODULE": "portal.settings", "LOG_LEVEL": "INFO",
        }
        self.log = log
        self.pid = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Notifier:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "portal.celery", "worker", "--pool", "threads", "--concurrency",
                 str(NOTIFIER_THREADS), "--queues", settings.NOTIFICATIONS_QUEUE, "--hostname", "notifier-test@%h",
                 "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"],
                env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        wait_for(lambda: b" ready." in self.log.read_bytes() or self.proc.poll() is not None, timeout=60)
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        return self

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


@pytest.fixture
def notifier(transactional_db, tmp_path):
    if not settings.REDIS_URL or "postgresql" not in settings.DATABASES["default"]["ENGINE"]:
        pytest.skip("the notifier subprocess shares the run's broker and test database: Redis and PostgreSQL")
    purge(settings.NOTIFICATIONS_QUEUE)
    process = Notifier(tmp_path / "notifier.log").start()
    yield process
    process.stop()
    purge(settings.NOTIFICATIONS_QUEUE)


@pytest.mark.slow
def test_a_submission_reaches_the_cluster_while_every_notifier_thread_waits_on_a_silent_receiver(
        org, cluster, default_queue_worker, notifier):
    deadline = settings.NOTIFICATIONS_TIMEOUT
    with receiver(delay=deadline + 3) as hook:  # answers only after the deliveries' deadline: silence, each time
        alice = org["alice"]
        ch = org_services.notification_channel_create(actor=alice, name="silent", kind="webhook", url=hook.url,
                                                      secret=SECRET, events=["workload.admitted"])
        # "send test" tries even a paused channel: each of these holds a notifier thread for the whole deadline.
        deliveries = [org_services.notification_channel_test(actor=alice, channel=ch, link="http://portal/x").pk
                      for _ in range(NOTIFIER_THREADS * 3)]
        wait_for(lambda: len(hook.received) >= NOTIFIER_THREADS, timeout=30,
                 describe=lambda: notifier.log.read_text()[-3000:])

        submitted = time.monotonic()
        response = signed_in(alice).post(reverse("workloads:submit", args=["training"]),
                                         submit_payload("training", gpus="1", command="sleep 600"))
        assert response.status_code == 302
        workload = wait_for(lambda: Workload.objects.filter(k8s_uid__gt="").first(), timeout=deadline * 2)
        took = time.monotonic() - submitted
        assert cluster.get("Job", workload.job_name, namespace=workload.project.namespace)
        # Well inside one deadline: not behind a single delivery, let alone the queued ones.
        assert took < deadline * 0.6, took
        assert NotificationDelivery.objects.filter(pk__in=deliveries, attempts=0).exists()  # still queued
        assert len(hook.received) <= NOTIFIER_THREADS  # every thread still held
