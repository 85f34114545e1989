"""Notification channels' services: every refusal named at once, the SSRF guard at save, secrets sealed, audit rows
for project channels, and events recorded once per transition for the channels that listen."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.core.models import AuditEvent, Intent
from apps.org import services
from apps.org.models import NotificationChannel, NotificationDelivery, Project

HOOK = "http://127.0.0.1:9/hook"
SECRET = "s3cret-s3cret-s3cret"


def errors_of(call) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        call()
    return caught.value.message_dict


def test_a_webhook_needs_url_and_secret_and_known_events_all_named_at_once(demo):
    errors = errors_of(lambda: services.notification_channel_create(
        actor=demo["alice"], name="mine", kind="webhook", events=["workload.nope", "test"]))
    assert set(errors) == {"url", "secret", "events"}
    assert "workload.nope" in errors["events"][0]


@pytest.mark.parametrize("url, words", [
    ("ftp://example.com/hook", "Only http and https"),
    ("https://user:pw@example.com/hook", "Leave credentials out"),
    ("https://token@example.com/hook", "Leave credentials out"),
    ("javascript:alert(1)", "Only http and https"),
    ("https:///nohost", "host name"),
])
def test_bad_urls_are_refused_naming_the_url(demo, url, words):
    errors = errors_of(lambda: services.notification_channel_create(
        actor=demo["alice"], name="mine", kind="slack", url=url, events=["workload.failed"]))
    assert list(errors) == ["url"] and words in " ".join(errors["url"])


@pytest.mark.parametrize("url, kind", [
    ("http://127.0.0.1:8080/hook", "loopback"), ("http://localhost/hook", "loopback"),
    ("http://10.1.2.3/hook", "private"), ("http://192.168.0.10/", "private"),
    ("http://169.254.169.254/latest/meta-data", "link-local"), ("http://[::1]/hook", "loopback"),
    ("http://[::ffff:10.0.0.1]/hook", "private"), ("http://0.0.0.0/", "not a unicast"),
])
def test_private_and_loopback_addresses_are_refused_unless_allowed(demo, settings, url, kind):
    settings.NOTIFICATIONS_ALLOW_PRIVATE = False
    errors = errors_of(lambda: services.notification_channel_create(
        actor=demo["alice"], name="mine", kind="webhook", url=url, secret=SECRET, events=["workload.failed"]))
    assert f"a {kind} address" in errors["url"][0]
    settings.NOTIFICATIONS_ALLOW_PRIVATE = True
    create = lambda: services.notification_channel_create(  # noqa: E731
        actor=demo["alice"], name="mine", kind="webhook", url=url, secret=SECRET, events=["workload.failed"])
    if kind in ("link-local", "not a unicast"):  # no receiver lives there; a cloud's metadata service does
        assert errors_of(create)["url"] == [f"{url.split('/')[2]} resolves to {url.split('/')[2]}, a {kind} "
                                            "address; the portal never calls those."]
    else:
        assert create().pk


def test_the_url_and_secret_are_sealed_and_the_host_kept_readable(demo):
    channel = services.notification_channel_create(
        actor=demo["alice"], name="mine", kind="webhook", url=HOOK + "?token=abc", secret=SECRET,
        events=["workload.failed"])
    row = NotificationChannel.objects.get(pk=channel.pk)
    assert SECRET not in row.sealed and "token=abc" not in row.sealed and row.url_host == "http://127.0.0.1:9"
    assert services.channel_hook(row) == {"url": HOOK + "?token=abc", "secret": SECRET}


def test_project_channels_are_for_leads_and_audited_without_the_secret(demo):
    vision = Project.objects.get(slug="vision")
    with pytest.raises(PermissionDenied):
        services.notification_channel_create(actor=demo["alice"], project=vision, name="team", kind="webhook",
                                             url=HOOK, secret=SECRET, events=["workload.failed"])
    channel = services.notification_channel_create(actor=demo["lead"], project=vision, name="team", kind="webhook",
                                                   url=HOOK, secret=SECRET, events=["workload.failed"])
    event = AuditEvent.objects.get(action="notification_channel.create")
    assert event.project_id == vision.pk and "sealed" not in event.after and SECRET not in str(event.after)
    services.notification_channel_update(actor=demo["lead"], channel=channel, secret="another-secret-1234")
    assert services.channel_hook(NotificationChannel.objects.get(pk=channel.pk))["secret"] == "another-secret-1234"
    assert AuditEvent.objects.get(action="notification_channel.update").after["receiver_changed"] is True
    with pytest.raises(PermissionDenied):
        services.notification_channel_delete(actor=demo["alice"], channel=channel)


def test_an_email_channel_of_a_project_needs_an_address(demo):
    vision = Project.objects.get(slug="vision")
    errors = errors_of(lambda: services.notification_channel_create(
        actor=demo["lead"], project=vision, name="team", kind="email", events=["budget.threshold"]))
    assert list(errors) == ["email"]


def test_an_event_is_recorded_once_per_key_for_listening_enabled_channels(demo):
    vision = Project.objects.get(slug="vision")
    listening = services.notification_channel_create(actor=demo["lead"], project=vision, name="a", kind="webhook",
                                                     url=HOOK, secret=SECRET, events=["quota.changed"])
    services.notification_channel_create(actor=demo["lead"], project=vision, name="b", kind="webhook", url=HOOK,
                                         secret=SECRET, events=["workload.failed"])
    off = services.notification_channel_create(actor=demo["lead"], project=vision, name="c", kind="webhook",
                                               url=HOOK, secret=SECRET, events=["quota.changed"], enabled=False)
    for _ in range(2):
        services.notifications_emit(event="quota.changed", key="quota:1:audit:1", obj={"type": "quota"},
                                    summary="changed", link="http://portal/", project_ids=[vision.pk])
    deliveries = list(NotificationDelivery.objects.all())
    assert [d.channel_id for d in deliveries] == [listening.pk] and off.pk not in [d.channel_id for d in deliveries]
    payload = deliveries[0].payload
    assert payload["event"] == "quota.changed" and payload["timestamp"] and payload["link"] == "http://portal/"
    assert Intent.objects.filter(kind=services.NOTIFICATION_INTENT, target_id=deliveries[0].pk).count() == 1


def test_a_quota_change_reaches_the_projects_channels(demo):
    from apps.org.models import Quota

    vision = Project.objects.get(slug="vision")
    channel = services.notification_channel_create(actor=demo["lead"], project=vision, name="a", kind="slack",
                                                   url=HOOK, events=["quota.changed"])
    quota = Quota.objects.filter(project=vision).first()
    services.quota_update(actor=demo["admin"], quota=quota, over_quota_weight=quota.over_quota_weight + 1)
    delivery = NotificationDelivery.objects.get(channel=channel)
    assert delivery.event == "quota.changed" and delivery.payload["object"]["id"] == quota.pk
    assert "over-quota weight" in delivery.payload["summary"]
