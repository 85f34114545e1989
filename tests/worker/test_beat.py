"""Celery beat's scheduler (worker/beat.py): celery's own beat Service in threads, publishing to the test broker,
the Lease in kubesim. Of two beats only the one holding the Lease sends; a stopped leader releases it and the
standby sends from its next retry on; both keep their heartbeat file fresh for the liveness probe. Without leader
election (`make run`) the one beat sends."""

import os
import threading
import time

import pytest
from celery.beat import Service
from celery.signals import before_task_publish

from portal.celery import app
from portal.container import check
from tests.worker.conftest import wait_for
from tests.worker.test_leader import JITTER, NAMESPACE, TIMING
from worker.beat import LeaderScheduler

QUEUE = f"beat-test-{os.getpid()}"
TASK = "worker.tasks.intents_sweep"
# A tick every 0.3 s keeps the file far younger than this even on a loaded CI machine; the stale case is 120 s old.
HEARTBEAT_FRESH = 10.0


@pytest.fixture
def sent():
    """(thread, task) of every task published: a beat's ticks run in its Service's thread."""
    records = []

    def record(sender=None, **_):
        records.append((threading.current_thread().name, sender))

    before_task_publish.connect(record, weak=False)
    yield records
    before_task_publish.disconnect(record)
    with app.connection_for_write() as connection:
        connection.default_channel.queue_delete(QUEUE)


@pytest.fixture
def beats(kubesim, settings, tmp_path):
    """Start beats by name, every 0.3 s sending one task to a queue of this test; leader election on, short timings."""
    kubesim.reset()
    kubesim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    settings.LEADER_ELECTION, settings.PORTAL_NAMESPACE, settings.KUBECONFIG = True, NAMESPACE, kubesim.kubeconfig_path
    settings.LEADER_ELECTION_LEASE_SECONDS = TIMING.lease_seconds
    settings.LEADER_ELECTION_RENEW_DEADLINE_SECONDS = TIMING.renew_deadline_seconds
    settings.LEADER_ELECTION_RETRY_SECONDS = TIMING.retry_seconds
    settings.BEAT_HEARTBEAT_FILE = tmp_path / "run" / "beat-heartbeat"
    settings.CELERY_BEAT_SCHEDULE = {"often": {"task": TASK, "schedule": 0.3,
                                               "options": {"queue": QUEUE, "expires": 5}}}
    started = []

    def start(name):
        service = Service(app, max_interval=0.2, schedule_filename=str(tmp_path / name),
                          scheduler_cls=LeaderScheduler)
        thread = threading.Thread(target=service.start, name=f"beat-{name}", daemon=True)
        thread.start()
        started.append((service, thread))
        return service

    yield start
    for service, thread in started:
        service.stop()
        thread.join(10)


def by(sent, name):
    return [task for thread, task in list(sent) if thread == f"beat-{name}"]


def test_only_the_beat_holding_the_lease_sends_and_a_stopped_one_hands_over(beats, sent, settings):
    first = beats("first")
    wait_for(lambda: len(by(sent, "first")) >= 2, timeout=30)
    second = beats("second")
    wait_for(lambda: second.scheduler.elector is not None and second.scheduler.elector.observed is not None)
    time.sleep(TIMING.lease_seconds + TIMING.retry_seconds)
    assert by(sent, "second") == [] and set(by(sent, "first")) == {TASK}
    assert first.scheduler.elector.is_leader() and not second.scheduler.elector.is_leader()
    assert check(None, str(settings.BEAT_HEARTBEAT_FILE), HEARTBEAT_FRESH) == 0  # ticks touch it, standby's too

    stopped = time.monotonic()
    first.stop(wait=True)  # beat's shutdown: the scheduler closes, releasing the Lease
    sent_by_first = len(by(sent, "first"))
    wait_for(lambda: by(sent, "second"), timeout=5)
    assert time.monotonic() - stopped < TIMING.retry_seconds * JITTER + 2
    time.sleep(1)
    assert len(by(sent, "first")) == sent_by_first  # nothing from the old leader after its stop
    assert second.scheduler.elector.is_leader()


def test_without_leader_election_the_one_beat_sends(beats, sent, settings):
    settings.LEADER_ELECTION = False
    only = beats("only")
    wait_for(lambda: len(by(sent, "only")) >= 2, timeout=30)
    assert only.scheduler.elector is None
    assert check(None, str(settings.BEAT_HEARTBEAT_FILE), HEARTBEAT_FRESH) == 0
    os.utime(settings.BEAT_HEARTBEAT_FILE, (time.time() - 120, time.time() - 120))
    assert check(None, str(settings.BEAT_HEARTBEAT_FILE), 60.0) == 1  # a beat that stopped ticking: not alive
