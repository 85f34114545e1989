"""Budgets against kubesim with real work, the real watcher (the ledger) and a real Celery worker (the e-mails and the
Kueue sync): each crossed threshold notifies once; an exceeded hold_preemptible budget holds the project's elastic
LocalQueues, so new preemptible work waits and "why am I waiting" names the budget; the period's rollover releases."""

from datetime import datetime, timedelta

import pytest
from django.core import mail

from apps.cluster.models import LocalQueueState
from apps.org import services as org_services
from apps.org.models import Budget, BudgetCrossing, Project, budget_period
from apps.usage.budgets import budget_status, budgets_evaluate
from apps.workloads.models import Status, Workload
from tests.worker.conftest import signed_in, wait_for
from tests.worker.test_explain_cluster import status_of, submit, waiting

pytestmark = pytest.mark.slow


def cluster_now(kubesim) -> datetime:
    return datetime.fromisoformat(kubesim.advance(0).replace("Z", "+00:00"))


def run_to_the_end(kubesim, user, name: str, seconds: int = 600) -> Workload:
    workload = submit(kubesim, user, gpus=4, seconds=seconds, name=name)
    wait_for(lambda: status_of(workload) == Status.RUNNING)
    kubesim.advance(seconds + 1)
    wait_for(lambda: status_of(workload) == Status.SUCCEEDED and not workload.usage_intervals.filter(
        ended_at__isnull=True).exists())
    return workload


def elastic_stop_policy(cluster) -> str:
    return cluster.get("LocalQueue", "elastic-h100", namespace="proj-vision")["spec"].get("stopPolicy", "None")


def test_thresholds_notify_once_hold_explains_and_rollover_releases(kubesim, cluster, org, watcher, celery_worker,
                                                                      settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    mail.outbox.clear()
    vision = Project.objects.get(slug="vision")
    budget = org_services.budget_create(actor=org["admin"], project=vision, amount=1, thresholds=[50, 100],
                                        on_exceed=Budget.OnExceed.HOLD_PREEMPTIBLE)
    assert elastic_stop_policy(cluster) == "None"

    # 4 cards for 10 minutes: 2/3 of a GPU-hour, past 50 %.
    run_to_the_end(kubesim, org["alice"], "first")
    now = cluster_now(kubesim)
    assert float(budget_status(budget, now=now).spent) == pytest.approx(4 * 601 / 3600, abs=0.02)
    assert budgets_evaluate(now=now) == 1
    assert budgets_evaluate(now=now) == 0  # once per period, however often the sweep runs
    wait_for(lambda: len(mail.outbox) == 1)
    (first,) = mail.outbox
    assert "vision at 50% of its budget" in first.subject and "lead@gpu-portal.example" in first.to
    assert Budget.objects.get(pk=budget.pk).held_period_start is None

    # Another 10 minutes: past 100 %, so the elastic queue is held.
    run_to_the_end(kubesim, org["alice"], "second")
    now = cluster_now(kubesim)
    assert budgets_evaluate(now=now) == 1
    wait_for(lambda: len(mail.outbox) == 2)
    assert "at 100% of its budget" in mail.outbox[1].subject
    assert Budget.objects.get(pk=budget.pk).held_period_start == budget_period("month", now)[0]
    wait_for(lambda: elastic_stop_policy(cluster) == "Hold")
    wait_for(lambda: LocalQueueState.objects.filter(name="elastic-h100", namespace="proj-vision",
                                                    active=False).exists())

    held = submit(kubesim, org["alice"], gpus=4, name="held")
    kubesim.advance(5)
    wait_for(lambda: Workload.objects.get(pk=held.pk).status_reason not in ("", "Created"))
    assert status_of(held) == Status.QUEUED
    data = waiting(signed_in(org["alice"]), held)
    assert data["reason"] == "budget_hold"
    assert "held: project Vision has spent its 1 GPU-hours budget for" in data["sentence"]
    # Non-preemptible work of the project is not held: its guaranteed queue admits it.
    guaranteed = submit(kubesim, org["alice"], gpus=2, preemptible=False, name="guaranteed")
    wait_for(lambda: status_of(guaranteed) in (Status.ADMITTED, Status.RUNNING))
    assert status_of(held) == Status.QUEUED
    assert budgets_evaluate(now=now) == 0 and len(mail.outbox) == 2

    # The month rolls over: the hold is released and the waiting work is admitted.
    next_period = budget_period("month", now)[1] + timedelta(minutes=1)
    budgets_evaluate(now=next_period)
    assert Budget.objects.get(pk=budget.pk).held_period_start is None
    wait_for(lambda: elastic_stop_policy(cluster) == "None")
    kubesim.advance(1)
    wait_for(lambda: status_of(held) in (Status.ADMITTED, Status.RUNNING), timeout=60)
    assert BudgetCrossing.objects.filter(budget=budget).count() == 2
