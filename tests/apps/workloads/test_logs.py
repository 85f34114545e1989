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
    logs.workload_log_tails_store(workload_id=workload.pk, tails={"a": ("one\n", ""), "b": ("", "boom")}, at=at)
    logs.workload_log_tails_store(workload_id=workload.pk, tails={"a": ("two\n", "")}, at=at)
    assert list(WorkloadLogTail.objects.filter(workload=workload).values_list("pod", "text")) == [("a", "two\n")]
