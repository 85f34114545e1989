"""The events nothing but time emits, from their source to a local receiver: a workload stopped at its policy's
maximum runtime (Kueue's maximum execution time in kubesim, seen by the real watcher), a budget threshold crossed
(once per period, however often the sweep runs), and an idle notebook's warning with its keep-alive link."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core import kueue_conditions as kueue
from apps.org import services as org_services
from apps.org.models import Budget, NotificationChannel, NotificationDelivery, Policy, Project
from apps.usage.budgets import budgets_evaluate
from apps.workloads import selectors as workload_selectors
from apps.workloads import services as workload_services
from apps.workloads.models import IdlePolicy, Kind, Status, Workload, WorkloadUtilisation
from apps.workloads.observation import Observation
from tests.apps.usage.reports_support import at, interval, workload
from tests.receiver import receiver
from tests.worker.conftest import wait_for
from tests.worker.test_watcher import status_of, submit
from worker import tasks

SECRET = "a-secret-of-enough-length"


def webhook(actor, url: str, event: str, *, project: Project | None = None) -> NotificationChannel:
    return org_services.notification_channel_create(actor=actor, project=project, name=f"{event} hook",
                                                    kind="webhook", url=url, secret=SECRET, events=[event])


def deliver_all() -> list[NotificationDelivery]:
    """What the worker does with each pending delivery."""
    for delivery in NotificationDelivery.objects.filter(status="pending").order_by("pk"):
        tasks.notification_deliver(delivery.pk)
    return list(NotificationDelivery.objects.order_by("pk"))


@pytest.mark.slow
def test_work_stopped_at_the_policys_maximum_runtime_reaches_the_channel(kubesim, org, watcher):
    vision = Project.objects.get(slug="vision")
    Policy.objects.create(project=vision, max_runtime_seconds=120)
    with receiver() as hook:
        channel = webhook(org["alice"], hook.url, "workload.runtime_limit")
        run = submit(kubesim, org["alice"], seconds=3600, name="long")
        assert Workload.objects.get(pk=run.pk).max_runtime_seconds == 120  # the policy's maximum is its runtime
        wait_for(lambda: status_of(run) == Status.RUNNING)
        kubesim.advance(60)
        assert not NotificationDelivery.objects.exists()
        kubesim.advance(70)  # past 120 s admitted: Kueue deactivates it
        wait_for(lambda: status_of(run) == Status.STOPPED,
                 describe=lambda: Workload.objects.values_list("status", "status_reason").get(pk=run.pk))
        assert Workload.objects.get(pk=run.pk).status_reason == kueue.DEACTIVATED_AT_RUNTIME_LIMIT
        [delivery] = deliver_all()
    assert (delivery.channel_id, delivery.event, delivery.status) == (channel.pk, "workload.runtime_limit",
                                                                      "delivered")
    [got] = hook.received
    body = json.loads(got.body)
    assert body["event"] == "workload.runtime_limit" and body["object"]["id"] == run.pk
    assert body["object"]["max_runtime_seconds"] == 120 and body["object"]["status"] == Status.STOPPED
    assert "reached its runtime limit of 120 seconds" in body["summary"]
    assert body["link"].endswith(f"/workloads/{run.pk}/")


@pytest.mark.django_db
def test_other_stops_are_not_runtime_limits(demo):
    run = workload(demo["alice"], name="stopped")
    webhook(demo["alice"], "http://127.0.0.1:9/hook", "workload.runtime_limit")
    workload_services.workload_observe(workload_id=run.pk, observation=Observation(
        status=Status.STOPPED, reason=kueue.DEACTIVATED, message="The workload is deactivated"))
    assert Workload.objects.get(pk=run.pk).status == Status.STOPPED
    assert not NotificationDelivery.objects.exists()


@pytest.mark.django_db
def test_a_threshold_crossing_reaches_the_channels_once_per_period(demo):
    vision = Project.objects.get(slug="vision")
    budget = org_services.budget_create(actor=demo["admin"], project=vision, amount=1, thresholds=[50, 100],
                                        on_exceed=Budget.OnExceed.NOTIFY)
    run = workload(demo["alice"], name="burner")
    with receiver() as lead_hook, receiver() as team_hook:
        own = webhook(demo["lead"], lead_hook.url, "budget.threshold")  # the lead watches the project's budget
        team = webhook(demo["lead"], team_hook.url, "budget.threshold", project=vision)
        webhook(demo["alice"], "http://127.0.0.1:9/hook", "budget.threshold")  # not a watcher of the budget
        interval(run, "2026-03-10 10:00", "2026-03-10 10:40")  # 2/3 of a GPU-hour: past 50 %
        march = at("2026-03-10 12:00")
        assert budgets_evaluate(now=march) == 1
        assert budgets_evaluate(now=march + timedelta(hours=1)) == 0  # the sweep again: nothing new
        first = deliver_all()
        assert sorted((d.channel_id, d.status) for d in first) == [(own.pk, "delivered"), (team.pk, "delivered")]

        interval(run, "2026-04-02 10:00", "2026-04-02 10:40")  # the next month: 50 % is crossed afresh
        april = at("2026-04-02 12:00")
        assert budgets_evaluate(now=april) == 1 and budgets_evaluate(now=april) == 0
        deliveries = deliver_all()
    assert len(deliveries) == 4 and all(d.status == "delivered" for d in deliveries)
    assert [len(lead_hook.received), len(team_hook.received)] == [2, 2]
    bodies = [json.loads(got.body) for got in lead_hook.received]
    assert [(b["object"]["threshold"], b["object"]["period_start"][:10]) for b in bodies] == [
        (50, "2026-03-01"), (50, "2026-04-01")]
    assert bodies[0]["event"] == "budget.threshold" and bodies[0]["object"]["id"] == budget.pk
    assert "crossing 50%" in bodies[0]["summary"]


@pytest.mark.django_db
def test_an_idle_notebook_is_warned_ahead_with_its_keep_alive_link(demo):
    policy = IdlePolicy.objects.update_or_create(pk=1, defaults={"threshold_percent": 5, "idle_seconds": 300,
                                                                 "cull_notebooks": True, "warning_minutes": 10})[0]
    notebook = workload(demo["alice"], name="nb")
    Workload.objects.filter(pk=notebook.pk).update(kind=Kind.NOTEBOOK)
    notebook.refresh_from_db()
    start = at("2026-03-02 10:00")
    idle = [(start + timedelta(minutes=minute), 1.0, 1000.0) for minute in range(7)]
    with receiver() as hook:
        channel = webhook(demo["alice"], hook.url, "workload.idle_warning")
        workload_services.workload_utilisation_record(workload=notebook, samples=idle[:4], policy=policy,
                                                      now=start + timedelta(minutes=3))
        assert not NotificationDelivery.objects.exists()  # idle 3 minutes of the 5: no warning yet
        workload_services.workload_utilisation_record(workload=notebook, samples=idle[4:], policy=policy,
                                                      now=start + timedelta(minutes=6))
        more = [(start + timedelta(minutes=minute), 1.0, 1000.0) for minute in range(7, 9)]
        workload_services.workload_utilisation_record(workload=notebook, samples=more, policy=policy,
                                                      now=start + timedelta(minutes=8))  # still idle: warned once
        [delivery] = deliver_all()
    assert (delivery.channel_id, delivery.event, delivery.status) == (channel.pk, "workload.idle_warning",
                                                                      "delivered")
    body = json.loads(hook.received[0].body)
    keep_alive = body["object"]["keep_alive"]
    assert keep_alive.endswith(f"/workloads/{notebook.pk}/") and keep_alive in body["summary"]
    assert "will be stopped in 10 minutes" in body["summary"] and "5 minutes" in body["summary"]
    assert body["object"]["stops_at"] == (start + timedelta(minutes=16)).isoformat()  # warned at 6, stopped at 16
    # Culled only once the warning's time has passed, and only if the owner did not keep it alive.
    assert workload_selectors.notebooks_gpu_idle(now=start + timedelta(minutes=15)) == []
    assert workload_selectors.notebooks_gpu_idle(now=start + timedelta(minutes=16)) == [notebook]
    workload_services.workload_touch(actor=demo["alice"], workload=notebook)
    assert workload_selectors.notebooks_gpu_idle(now=timezone.now() + timedelta(minutes=30)) == []
    assert WorkloadUtilisation.objects.get(workload=notebook).idle_flagged_at is None  # a new stretch, a new warning


@pytest.mark.django_db
def test_an_idle_share_of_a_card_is_said_as_that_share(demo, mailoutbox):
    """A notebook holding half a card on a KAI pool is warned that it holds 0.5 GPU (it said 0 GPUs), in the
    channel's summary and object and in the owner's e-mail; the e-mail of a transition says 0.5 x the pool too."""
    policy = IdlePolicy.objects.update_or_create(pk=1, defaults={"threshold_percent": 5, "idle_seconds": 300,
                                                                 "cull_notebooks": False})[0]
    org_services.node_pool_create(actor=demo["admin"], slug="rtx", name="RTX", gpu_resource="nvidia.com/gpu",
                                  capacity=16, scheduler="kai", gpu_fractions=True)
    notebook = workload(demo["alice"], name="nb", pool="rtx")
    Workload.objects.filter(pk=notebook.pk).update(kind=Kind.NOTEBOOK, gpus=0, gpu_fraction="0.5")
    notebook.refresh_from_db()
    start = at("2026-03-02 10:00")
    with receiver() as hook:
        webhook(demo["alice"], hook.url, "workload.idle_warning")
        workload_services.workload_utilisation_record(
            workload=notebook, samples=[(start + timedelta(minutes=minute), 1.0, 1000.0) for minute in range(7)],
            policy=policy, now=start + timedelta(minutes=6))
        deliver_all()
    body = json.loads(hook.received[0].body)
    assert "holds 0.5 GPU not being used: GPUs below 5% for 5 minutes." in body["summary"]
    assert (body["object"]["gpus"], body["object"]["gpu_fraction"]) == (0, 0.5)
    assert tasks.workload_idle_notify(notebook.pk)
    assert "holds 0.5 GPU on RTX, not being used: GPUs below 5% for 5 minutes." in mailoutbox[-1].body
    assert tasks.workload_notify(notebook.pk, Status.RUNNING)
    assert "GPUs: 0.5 x RTX" in mailoutbox[-1].body
