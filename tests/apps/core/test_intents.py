"""The outbox (apps.core.intents): recorded with the user's action, leased by tasks, swept when late, closed by the
transition that does what it asked."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.core import intents
from apps.core.models import Intent
from apps.org import services as org_services
from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, Status, Workload

SUBMIT = ("workload.submit", "worker.tasks.workload_submit")
STOP = ("workload.stop", "worker.tasks.workload_stop")


def submit(user, **overrides):
    values = {"project": Project.objects.get(slug="vision"), "kind": Kind.TRAINING, "name": "run",
              "image": "nvcr.io/nvidia/pytorch:24.05-py3", "node_pool": NodePool.objects.get(slug="h100"),
              "gpus": 1, "model_label": "resnet50", "data_class": "public"}
    values.update(overrides)
    return services.workload_submit(actor=user, **values)


def open_intents(kind, target_id):
    return list(Intent.objects.filter(kind=kind, target_id=target_id, done_at__isnull=True))


def age(intent, seconds=1):
    """Its deadline passes."""
    Intent.objects.filter(pk=intent.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=seconds))


def test_a_submission_is_an_intent_sent_after_commit(demo, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        workload = submit(demo["alice"])
    [intent] = open_intents("workload.submit", workload.pk)
    assert (intent.kind, intent.task) == SUBMIT and intent.dispatches == 1 and intent.attempts == 0
    assert timedelta(seconds=25) < intent.next_attempt_at - intent.created_at <= timedelta(seconds=30)
    assert len(callbacks) == 1  # the send, after commit


def test_a_refused_or_rolled_back_action_leaves_no_intent(demo):
    before = Intent.objects.count()
    with pytest.raises(ValidationError):
        submit(demo["alice"], gpus=99)
    with pytest.raises(RuntimeError), transaction.atomic():
        submit(demo["alice"])
        raise RuntimeError("the request failed after the service")
    workload = submit(demo["alice"])
    services.workload_stop(actor=demo["alice"], workload=workload)
    with pytest.raises(ValidationError, match="nothing to stop"):
        services.workload_stop(actor=demo["alice"], workload=Workload.objects.get(pk=workload.pk))
    assert Intent.objects.count() == before + 2  # one submit, one stop


def test_stop_records_an_intent_and_leaving_the_status_closes_it(demo):
    workload = submit(demo["alice"])
    services.workload_stop(actor=demo["lead"], workload=workload)
    # Stopped before it was ever submitted: the submission is over, so is its intent.
    assert not open_intents("workload.submit", workload.pk)
    assert Intent.objects.get(kind="workload.submit", target_id=workload.pk).outcome == Status.STOPPING
    [stop] = open_intents("workload.stop", workload.pk)
    assert (stop.kind, stop.task) == STOP
    assert services.workload_stop_finish(workload_id=workload.pk) is True
    stop.refresh_from_db()
    assert stop.done_at is not None and stop.outcome == Status.STOPPED
    assert Workload.objects.get(pk=workload.pk).status_message == "Stopped by lead"
    assert services.workload_stop_finish(workload_id=workload.pk) is False  # once


def test_a_stop_during_a_live_submission_leaves_a_follow_up(demo):
    workload = submit(demo["alice"])
    assert services.workload_claim_submit(workload_id=workload.pk).workload is not None  # a worker is creating its Job
    services.workload_stop(actor=demo["alice"], workload=workload)
    assert services.workload_stop_finish(workload_id=workload.pk) is True
    [follow_up] = open_intents("workload.stop", workload.pk)
    # Due when the submission's claim runs out (the worker holding it may yet create the Job, then die).
    claimed_at = Workload.objects.get(pk=workload.pk).submit_claimed_at
    assert abs(follow_up.next_attempt_at - (claimed_at + services.SUBMIT_CLAIM_TIMEOUT)) < timedelta(seconds=2)
    assert follow_up.dispatches == 0  # nothing sent now: the sweep sends it when due


def test_idle_notebooks_record_a_stop(demo):
    notebook = submit(demo["alice"], kind=Kind.NOTEBOOK, node_pool=NodePool.objects.get(slug="l40s-shared"))
    Workload.objects.filter(pk=notebook.pk).update(status=Status.RUNNING)
    assert services.notebook_cull(workload=Workload.objects.get(pk=notebook.pk)) is True
    assert len(open_intents("workload.stop", notebook.pk)) == 1
    assert services.notebook_cull(workload=Workload.objects.get(pk=notebook.pk)) is False
    assert len(open_intents("workload.stop", notebook.pk)) == 1


def test_org_changes_record_a_reconcile_intent(demo, django_capture_on_commit_callbacks):
    before = Intent.objects.filter(kind="kueue.sync", done_at__isnull=True).count()
    with django_capture_on_commit_callbacks() as callbacks:
        org_services.kueue_sync_request_by(actor=demo["admin"])
    assert Intent.objects.filter(kind="kueue.sync", done_at__isnull=True).count() == before + 1
    assert Intent.objects.filter(kind="kueue.sync").last().target_id is None
    assert len(callbacks) == 1


def test_a_lease_keeps_other_tasks_out_until_it_runs_out(demo):
    workload = submit(demo["alice"])
    first = intents.intent_claim(kind="workload.submit", target_id=workload.pk)
    assert len(first.ids) == 1 and not first.busy
    second = intents.intent_claim(kind="workload.submit", target_id=workload.pk)
    assert second.ids == () and second.busy
    assert intents.intent_claim(kind="workload.submit", target_id=workload.pk + 10_000) == intents.Claim(
        kind="workload.submit", target_id=workload.pk + 10_000, ids=(), busy=False)  # nothing recorded: not busy
    # The first task fails and gives the lease back with its error and when to try again.
    retry_at = timezone.now() + timedelta(minutes=1)
    intents.intent_release(first, error="500 InternalError: injected", retry_at=retry_at)
    intent = Intent.objects.get(pk=first.ids[0])
    assert intent.claimed_until is None and intent.last_error == "500 InternalError: injected"
    assert intent.next_attempt_at == retry_at and intent.attempts == 1
    third = intents.intent_claim(kind="workload.submit", target_id=workload.pk)
    assert third.ids == first.ids and Intent.objects.get(pk=first.ids[0]).attempts == 2
    # A sooner retry never pulls in a later deadline (one the sweep backed off).
    intents.intent_release(third, error="500 again", retry_at=timezone.now())
    assert Intent.objects.get(pk=first.ids[0]).next_attempt_at == retry_at
    # A lease past its end belonged to a killed worker.
    Intent.objects.filter(pk=first.ids[0]).update(claimed_until=timezone.now() - timedelta(seconds=1))
    assert intents.intent_claim(kind="workload.submit", target_id=workload.pk).ids == first.ids
    assert intents.lease() > timedelta(seconds=180)  # past the hard task time limit


def test_the_sweep_sends_late_intents_once_with_backoff(demo):
    workload = submit(demo["alice"])
    services.workload_stop(actor=demo["alice"], workload=workload)
    [stop] = open_intents("workload.stop", workload.pk)
    now = timezone.now()
    assert ("worker.tasks.workload_stop", workload.pk) not in intents.intents_claim_due(now=now)
    age(stop)
    waits = []
    for _ in range(7):
        assert ("worker.tasks.workload_stop", workload.pk) in intents.intents_claim_due(now=now)
        assert ("worker.tasks.workload_stop", workload.pk) not in intents.intents_claim_due(now=now)
        stop.refresh_from_db()
        waits.append(round((stop.next_attempt_at - now).total_seconds()))
        now = stop.next_attempt_at
    assert waits == [60, 120, 240, 480, 600, 600, 600]
    assert stop.dispatches == 8
    # Leased (a task is on it) or done: not sent.
    age(stop)
    claim = intents.intent_claim(kind="workload.stop", target_id=workload.pk)
    assert ("worker.tasks.workload_stop", workload.pk) not in intents.intents_claim_due()
    intents.intent_release(claim)
    assert ("worker.tasks.workload_stop", workload.pk) in intents.intents_claim_due()
    age(stop)
    intents.intents_complete(kind="workload.stop", target_id=workload.pk, outcome="stopped")
    assert ("worker.tasks.workload_stop", workload.pk) not in intents.intents_claim_due()


def test_the_sweep_sends_a_reconcile_once_for_many_requests(demo):
    Intent.objects.filter(kind="kueue.sync").delete()
    for _ in range(3):
        org_services.kueue_sync_request()
    Intent.objects.filter(kind="kueue.sync").update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    due = intents.intents_claim_due()
    assert due.count(("worker.tasks.kueue_sync", None)) == 1
    assert set(Intent.objects.filter(kind="kueue.sync").values_list("dispatches", flat=True)) == {2}


def test_done_intents_are_kept_a_week(demo):
    workload = submit(demo["alice"])
    intents.intents_complete(kind="workload.submit", target_id=workload.pk, outcome="queued")
    assert intents.intents_prune() == 0
    assert intents.intents_prune(now=timezone.now() + timedelta(days=8)) >= 1
    assert not Intent.objects.filter(kind="workload.submit", target_id=workload.pk).exists()
