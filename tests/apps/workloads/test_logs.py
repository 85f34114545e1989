"""When the detail page asks the worker for fresh pod logs: live holders at most every ~10 s, finished once more."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from apps.workloads import logs
from apps.workloads.models import Status, Workload, WorkloadLogTail
from tests.apps.workloads.test_views_queue import queued, running

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def clean_cache():
    cache.clear()
    yield
    cache.clear()


def test_a_running_workload_asks_at_most_once_per_window(make_workload, django_capture_on_commit_callbacks,
                                                         monkeypatch):
    sent = []
    monkeypatch.setattr(logs, "enqueue_on_commit", lambda name, *args: sent.append((name, args)))
    workload = running(make_workload("alice", gpus=1))
    assert logs.workload_logs_refresh_request(workload=workload)
    assert not logs.workload_logs_refresh_request(workload=workload)  # the window is taken
    assert sent == [("worker.tasks.workload_logs_fetch", (workload.pk,))]
    cache.clear()  # window over; a fresh stored tail still holds it back
    WorkloadLogTail.objects.create(workload=workload, pod="p", text="x", fetched_at=timezone.now())
    assert not logs.workload_logs_refresh_request(workload=workload)
    WorkloadLogTail.objects.filter(workload=workload).update(fetched_at=timezone.now() - timedelta(seconds=11))
    assert logs.workload_logs_refresh_request(workload=workload)


def test_queued_work_has_no_pods_to_ask_about(make_workload, monkeypatch):
    monkeypatch.setattr(logs, "enqueue_on_commit", lambda *a: pytest.fail("enqueued"))
    assert not logs.workload_logs_refresh_request(workload=queued(make_workload("alice", gpus=1), 0))


def test_finished_work_gets_one_last_fetch(make_workload, monkeypatch):
    sent = []
    monkeypatch.setattr(logs, "enqueue_on_commit", lambda name, *args: sent.append(args))
    workload = running(make_workload("alice", gpus=1))
    WorkloadLogTail.objects.create(workload=workload, pod="p", text="x", fetched_at=timezone.now())
    Workload.objects.filter(pk=workload.pk).update(status=Status.SUCCEEDED,
                                                   finished_at=timezone.now() + timedelta(seconds=1))
    workload.refresh_from_db()
    assert logs.workload_logs_refresh_request(workload=workload)
    WorkloadLogTail.objects.filter(workload=workload).update(fetched_at=timezone.now() + timedelta(seconds=2))
    cache.clear()
    assert not logs.workload_logs_refresh_request(workload=workload)
    assert len(sent) == 1


def test_the_detail_page_enqueues_after_commit(page_client, make_workload, django_capture_on_commit_callbacks,
                                               monkeypatch):
    from apps.core import tasks as portal_tasks

    sent = []
    monkeypatch.setattr(portal_tasks, "enqueue_now", lambda name, *args, **options: sent.append((name, args)))
    workload = running(make_workload("alice", gpus=1))
    with django_capture_on_commit_callbacks(execute=True):
        content = page_client("alice").get(reverse("workloads:detail", args=[workload.pk])).content.decode()
    assert sent == [("worker.tasks.workload_logs_fetch", (workload.pk,))]
    assert "Fetching the pods" in content


def test_storing_replaces_the_pods_tails(make_workload):
    workload = running(make_workload("alice", gpus=1))
    at = timezone.now()
    logs.workload_log_tails_store(workload_id=workload.pk, tails={
        "a": logs.PodLog(text="one\n"), "b": logs.PodLog(error="boom")}, at=at)
    logs.workload_log_tails_store(workload_id=workload.pk, tails={
        "a": logs.PodLog(text="two\n", exit_code=3, exit_reason="Error")}, at=at)
    assert list(WorkloadLogTail.objects.filter(workload=workload).values_list(
        "pod", "text", "exit_code", "exit_reason")) == [("a", "two\n", 3, "Error")]


def test_the_watcher_asks_for_a_read_when_work_starts_and_when_it_ends_after_running(make_workload, make_outside,
                                                                                     monkeypatch):
    sent = []
    monkeypatch.setattr(logs, "enqueue_on_commit", lambda name, *args: sent.append(args))
    workload = running(make_workload("alice", gpus=1))
    assert logs.workload_logs_read_on_commit(workload=workload, statuses=[Status.RUNNING], ran=True)
    assert logs.workload_logs_read_on_commit(workload=workload, statuses=[Status.FAILED], ran=True)
    assert not logs.workload_logs_read_on_commit(workload=workload, statuses=[Status.FAILED], ran=False)  # no pods
    assert not logs.workload_logs_read_on_commit(workload=workload, statuses=[Status.PREEMPTED], ran=True)
    outside = make_outside(job_name="kubectl-job")
    assert not logs.workload_logs_read_on_commit(workload=outside, statuses=[Status.RUNNING], ran=True)
    assert sent == [(workload.pk,), (workload.pk,)]


def test_observing_a_start_reads_the_logs_at_once(make_workload, django_capture_on_commit_callbacks, monkeypatch):
    from apps.core import tasks as portal_tasks
    from apps.workloads.observation import Observation
    from apps.workloads.services import workload_observe

    sent = []
    monkeypatch.setattr(portal_tasks, "enqueue_now", lambda name, *args, **options: sent.append((name, args)))
    workload = make_workload("alice", gpus=1)
    Workload.objects.filter(pk=workload.pk).update(status=Status.ADMITTED, job_name=f"wl-{workload.pk}")
    with django_capture_on_commit_callbacks(execute=True):
        workload_observe(workload_id=workload.pk, observation=Observation(
            status=Status.RUNNING, reason="Running", started_at=timezone.now(), admitted_at=timezone.now()))
    assert (logs.LOGS_TASK, (workload.pk,)) in sent


def test_final_read_pending_until_the_read_after_the_finish_is_stored(make_workload):
    workload = running(make_workload("alice", gpus=1))
    now = timezone.now()
    Workload.objects.filter(pk=workload.pk).update(status=Status.FAILED, finished_at=now)
    workload.refresh_from_db()
    assert logs.final_read_pending(workload=workload, last_fetch=None, now=now)
    assert logs.final_read_pending(workload=workload, last_fetch=now - timedelta(seconds=5), now=now)
    assert not logs.final_read_pending(workload=workload, last_fetch=now, now=now)
    later = now + timedelta(seconds=logs.FINAL_READ_SECONDS + 1)  # the pods may be gone: stop waiting
    assert not logs.final_read_pending(workload=workload, last_fetch=None, now=later)


def test_a_failed_workload_shows_its_exit_code_and_polls_for_the_final_read(page_client, make_workload,
                                                                            monkeypatch):
    monkeypatch.setattr(logs, "enqueue_on_commit", lambda *args: None)
    workload = running(make_workload("alice", gpus=1))
    Workload.objects.filter(pk=workload.pk).update(status=Status.FAILED, finished_at=timezone.now())
    url = reverse("workloads:detail", args=[workload.pk])
    page = page_client("alice").get(url).content.decode()
    assert 'hx-trigger="every 5s"' in page and "data-exit-code" not in page  # the final read is on its way
    WorkloadLogTail.objects.create(workload=workload, pod=f"wl-{workload.pk}-abcde", text="step 1\nboom\n",
                                   exit_code=3, exit_reason="Error", fetched_at=timezone.now())
    page = page_client("alice").get(url).content.decode()
    assert 'data-exit-code="3">Exit code <strong>3</strong> (Error)</p>' in page
    assert "exited with code 3 (Error)" in page and 'hx-trigger="every 5s"' not in page
