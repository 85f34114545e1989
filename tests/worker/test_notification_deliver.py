"""Delivering notifications: every channel kind against a local receiver on 127.0.0.1 (the signature checked with
the secret, a 500 retried then delivered, the delivery log keeping the error), the SSRF guard again at delivery, and
workload transitions reaching the channels that listen."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime

from django.core import mail
from django.utils import timezone

from apps.core.models import Intent
from apps.org import services as org_services
from apps.org.models import NodePool, NotificationDelivery, Project
from apps.workloads import services
from apps.workloads.models import Kind, Status, Workload
from apps.workloads.observation import Observation, Preemption
from tests.receiver import receiver
from worker import tasks

SECRET = "a-secret-of-enough-length"


def channel(user, kind: str, url: str = "", **extra):
    return org_services.notification_channel_create(
        actor=user, name=kind, kind=kind, url=url, events=["workload.admitted", "workload.preempted"], **extra)


def deliver_test(user, ch) -> NotificationDelivery:
    delivery = org_services.notification_channel_test(actor=user, channel=ch, link="http://portal.example/x")
    tasks.notification_deliver(delivery.pk)
    return NotificationDelivery.objects.get(pk=delivery.pk)


def test_a_webhook_is_signed_with_its_secret_over_the_raw_body(demo):
    with receiver() as hook:
        ch = channel(demo["alice"], "webhook", hook.url, secret=SECRET)
        delivery = deliver_test(demo["alice"], ch)
    assert delivery.status == "delivered" and delivery.status_code == 200 and delivery.attempts == 1
    [got] = hook.received
    expected = "sha256=" + hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    assert got.headers["X-Portal-Signature"] == expected
    assert got.headers["Content-Type"] == "application/json"
    body = json.loads(got.body)
    assert body["event"] == "test" and body["link"] == "http://portal.example/x"
    sent_at, occurred_at = (datetime.fromisoformat(body[name]) for name in ("timestamp", "occurred_at"))
    assert occurred_at <= sent_at <= timezone.now()
    assert body["object"] == {"type": "channel", "id": ch.pk, "name": "webhook"}
    wrong = "sha256=" + hmac.new(b"another secret", got.body, hashlib.sha256).hexdigest()
    assert got.headers["X-Portal-Signature"] != wrong


def test_slack_gets_block_kit_and_teams_an_adaptive_card(demo):
    with receiver() as slack, receiver() as teams:
        deliver_test(demo["alice"], channel(demo["alice"], "slack", slack.url))
        deliver_test(demo["alice"], channel(demo["alice"], "teams", teams.url))
    message = json.loads(slack.received[0].body)
    assert message["text"].startswith("GPU Portal: Test")
    assert message["blocks"][0]["type"] == "section" and message["blocks"][0]["text"]["type"] == "mrkdwn"
    assert message["blocks"][1]["elements"][0]["url"] == "http://portal.example/x"
    assert "X-Portal-Signature" not in slack.received[0].headers
    card = json.loads(teams.received[0].body)
    assert card["type"] == "message"
    [attachment] = card["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert attachment["content"]["type"] == "AdaptiveCard"
    assert attachment["content"]["actions"][0] == {"type": "Action.OpenUrl", "title": "Open in GPU Portal",
                                                   "url": "http://portal.example/x"}


def test_an_email_channel_mails_its_owner(demo, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    demo["alice"].email = "alice@example.com"
    demo["alice"].save()
    delivery = deliver_test(demo["alice"], channel(demo["alice"], "email"))
    assert delivery.status == "delivered"
    [sent] = mail.outbox
    assert sent.to == ["alice@example.com"] and "http://portal.example/x" in sent.body


def test_a_500_is_retried_with_backoff_and_the_log_keeps_the_error(demo):
    with receiver(500, 200) as hook:
        ch = channel(demo["alice"], "webhook", hook.url, secret=SECRET)
        delivery = org_services.notification_channel_test(actor=demo["alice"], channel=ch, link="http://p/")
        assert tasks.notification_deliver(delivery.pk) == "retry later"
        first = NotificationDelivery.objects.get(pk=delivery.pk)
        assert (first.status, first.status_code, first.attempts) == ("pending", 500, 1)
        assert first.last_error.startswith("HTTP 500")
        intent = Intent.objects.get(kind=org_services.NOTIFICATION_INTENT, target_id=delivery.pk)
        assert intent.done_at is None and intent.claimed_until is None and intent.next_attempt_at > first.attempted_at
        assert tasks.notification_deliver(delivery.pk) == "delivered"  # the sweep sends it again when due
    done = NotificationDelivery.objects.get(pk=delivery.pk)
    assert (done.status, done.status_code, done.attempts) == ("delivered", 200, 2)
    assert done.last_error.startswith("HTTP 500")  # the log says what went wrong on the way
    assert Intent.objects.get(pk=intent.pk).outcome == "delivered"
    first_body, second_body = (json.loads(got.body) for got in hook.received)
    # Each attempt signed afresh at its own moment (a receiver refusing old timestamps takes the retry); the event's
    # id and moment are the same.
    assert second_body["timestamp"] > first_body["timestamp"] >= first_body["occurred_at"]
    assert {**first_body, "timestamp": ""} == {**second_body, "timestamp": ""}
    for got in hook.received:
        assert got.headers["X-Portal-Signature"] == "sha256=" + hmac.new(SECRET.encode(), got.body,
                                                                        hashlib.sha256).hexdigest()


def test_a_4xx_fails_for_good_and_a_receiver_down_is_retried(demo):
    with receiver(404) as hook:
        failed = deliver_test(demo["alice"], channel(demo["alice"], "slack", hook.url))
    assert (failed.status, failed.status_code) == ("failed", 404)
    down_url = hook.url  # the receiver is gone: nothing listens on its port any more
    down = deliver_test(demo["alice"], channel(demo["alice"], "slack", down_url))
    assert down.status == "pending" and down.status_code is None and "Could not reach" in down.last_error


def test_the_ssrf_guard_is_checked_again_at_delivery(demo, settings):
    with receiver() as hook:
        ch = channel(demo["alice"], "webhook", hook.url, secret=SECRET)
        settings.NOTIFICATIONS_ALLOW_PRIVATE = False  # an admin turned private addresses off since
        delivery = deliver_test(demo["alice"], ch)
    assert delivery.status == "failed" and "loopback" in delivery.last_error and hook.received == []


def test_workload_transitions_reach_the_owner_and_project_channels_once(demo):
    with receiver() as mine, receiver() as team:
        own = channel(demo["alice"], "webhook", mine.url, secret=SECRET)
        project = org_services.notification_channel_create(
            actor=demo["lead"], project=Project.objects.get(slug="vision"), name="team", kind="slack", url=team.url,
            events=["workload.preempted"])
        workload = services.workload_submit(
            actor=demo["alice"], project=Project.objects.get(slug="vision"), kind=Kind.TRAINING, name="resnet",
            image="pytorch/pytorch:2.4.0", node_pool=NodePool.objects.get(slug="h100"), gpus=2, model_label="m",
            data_class="public")
        Workload.objects.filter(pk=workload.pk).update(status=Status.QUEUED)
        admitted = Observation(status=Status.ADMITTED, message="admitted")
        services.workload_observe(workload_id=workload.pk, observation=admitted)
        services.workload_observe(workload_id=workload.pk, observation=admitted)  # replayed: nothing new
        assert list(NotificationDelivery.objects.values_list("channel_id", "event")) == [
            (own.pk, "workload.admitted")]
        Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)
        preemption = Preemption(at=timezone.now(), reason="InCohortReclamation", message="Preempted (UID: x)",
                                preemptor_workload_uid="w", preemptor_job_uid="j")
        services.workload_observe(workload_id=workload.pk, observation=Observation(
            status=Status.PREEMPTED, reason="Preempted", message="Preempted (UID: x)", preemption=preemption))
        for delivery in NotificationDelivery.objects.order_by("pk"):
            tasks.notification_deliver(delivery.pk)
    assert sorted(NotificationDelivery.objects.values_list("channel_id", "event", "status")) == sorted([
        (own.pk, "workload.admitted", "delivered"), (own.pk, "workload.preempted", "delivered"),
        (project.pk, "workload.preempted", "delivered")])
    bodies = [json.loads(got.body) for got in mine.received]
    assert bodies[0]["event"] == "workload.admitted" and bodies[0]["object"]["id"] == workload.pk
    assert bodies[0]["object"]["project"] == "vision" and bodies[0]["link"].endswith(f"/workloads/{workload.pk}/")
    assert bodies[1]["object"]["plain_reason"] == "Preempted to give back borrowed quota to the project that " \
                                                  "deserves it."
    assert "give back borrowed quota" in json.loads(team.received[0].body)["text"]


def test_a_silent_receiver_pauses_its_channel_so_it_costs_one_timeout_not_one_per_delivery(demo, settings):
    """A receiver that does not answer within the timeout holds a worker process for the timeout once; the channel's
    other deliveries then wait without trying (the worker's processes also send submitted work to the cluster),
    until the pause ends and one delivery tries first; an answer ends the pause."""
    import time
    from datetime import timedelta

    from apps.org.models import NotificationChannel

    settings.NOTIFICATIONS_TIMEOUT = 1
    with receiver(delay=3) as hook:
        ch = channel(demo["alice"], "webhook", hook.url, secret=SECRET)
        for key in ("a", "b", "c"):
            org_services.notifications_emit(event="workload.admitted", key=key, obj={"type": "workload"},
                                             summary=key, link="http://p/", user_ids=[demo["alice"].pk])
        first, second, third = NotificationDelivery.objects.filter(channel=ch).order_by("pk")
        started = time.monotonic()
        assert tasks.notification_deliver(first.pk) == "retry later"
        assert 0.9 < time.monotonic() - started < 2.5  # one timeout, not the receiver's 3 s
        paused = NotificationChannel.objects.get(pk=ch.pk)
        assert paused.unreachable_since is not None and paused.paused_until > timezone.now() + timedelta(seconds=25)

        started = time.monotonic()
        assert tasks.notification_deliver(second.pk) == "receiver paused"
        assert tasks.notification_deliver(third.pk) == "receiver paused"
        assert time.monotonic() - started < 0.5 and len(hook.received) == 1
        waiting = NotificationDelivery.objects.get(pk=second.pk)
        assert (waiting.status, waiting.attempts) == ("pending", 0)
        intent = Intent.objects.get(kind=org_services.NOTIFICATION_INTENT, target_id=second.pk)
        assert intent.next_attempt_at >= paused.paused_until and "did not answer" in intent.last_error
        # "Send test" always tries: it is how the owner checks the receiver.
        assert deliver_test(demo["alice"], ch).status == "pending" and len(hook.received) == 2

    with receiver() as back:  # the receiver moves (a new URL ends the pause at once), and answers
        ch = org_services.notification_channel_update(actor=demo["alice"], channel=ch, url=back.url)
        assert tasks.notification_deliver(second.pk) == "delivered"
        answered = NotificationChannel.objects.get(pk=ch.pk)
        assert answered.unreachable_since is None and answered.paused_until is None
        assert tasks.notification_deliver(third.pk) == "delivered"
        assert tasks.notification_deliver(first.pk) == "delivered"
    assert [json.loads(got.body)["summary"] for got in back.received] == ["b", "c", "a"]


def test_after_a_pause_one_delivery_tries_while_the_others_keep_waiting(demo, settings):
    from datetime import timedelta

    from apps.org.models import NotificationChannel

    with receiver() as hook:
        ch = channel(demo["alice"], "webhook", hook.url, secret=SECRET)
    now = timezone.now()
    NotificationChannel.objects.filter(pk=ch.pk).update(unreachable_since=now - timedelta(minutes=4),
                                                        paused_until=now - timedelta(seconds=1))
    ch.refresh_from_db()
    assert org_services.notification_channel_turn(channel=ch) is None  # this one tries
    assert org_services.notification_channel_turn(channel=ch) > timezone.now()  # the rest wait for its outcome
    org_services.notification_channel_reached(channel=ch, answered=False)
    silent = NotificationChannel.objects.get(pk=ch.pk)
    # Silent for four minutes: paused for about as long again (between 30 s and 15 minutes).
    assert timedelta(minutes=3, seconds=50) < silent.paused_until - timezone.now() < timedelta(minutes=4, seconds=10)


def test_a_new_url_ends_the_pause(demo):
    from datetime import timedelta

    from apps.org.models import NotificationChannel

    with receiver() as hook:
        ch = channel(demo["alice"], "webhook", hook.url, secret=SECRET)
        NotificationChannel.objects.filter(pk=ch.pk).update(unreachable_since=timezone.now(),
                                                            paused_until=timezone.now() + timedelta(minutes=5))
        moved = org_services.notification_channel_update(actor=demo["alice"], channel=ch, url=hook.url + "/v2")
    assert (moved.unreachable_since, moved.paused_until) == (None, None)
    assert org_services.notification_channel_turn(channel=moved) is None


def test_a_delivery_still_paused_a_day_after_its_event_fails_for_good(demo):
    from datetime import timedelta

    from apps.org.models import NotificationChannel

    with receiver() as hook:
        ch = channel(demo["alice"], "webhook", hook.url, secret=SECRET)
    org_services.notifications_emit(event="workload.admitted", key="old", obj={"type": "workload"}, summary="old",
                                     link="http://p/", user_ids=[demo["alice"].pk])
    delivery = NotificationDelivery.objects.get(channel=ch)
    NotificationDelivery.objects.filter(pk=delivery.pk).update(created_at=timezone.now() - timedelta(days=1, minutes=1))
    NotificationChannel.objects.filter(pk=ch.pk).update(unreachable_since=timezone.now() - timedelta(days=1),
                                                        paused_until=timezone.now() + timedelta(minutes=10))
    assert tasks.notification_deliver(delivery.pk) == "failed"
    failed = NotificationDelivery.objects.get(pk=delivery.pk)
    assert failed.status == "failed" and "given up" in failed.last_error
