"""Browser: a team lead finds Notification channels in the navigation, creates a webhook channel with bad input (every
mistake named at once, nothing saved), fixes it, sends a test to a local receiver and watches the delivery appear in
the channel's log (htmx polls it while it is pending; the worker's task is run here, as a worker would). The login
fixture fails the test on any Content-Security-Policy violation."""

from __future__ import annotations

import hashlib
import hmac
import json
import re

import pytest
from playwright.sync_api import expect

from tests.receiver import receiver

pytestmark = pytest.mark.browser
SECRET = "a-secret-of-enough-length"


def test_a_lead_fixes_a_webhook_channel_sends_a_test_and_sees_it_delivered(login):
    from apps.core.models import AuditEvent
    from apps.org.models import NotificationChannel, NotificationDelivery, Project
    from worker import tasks

    vision = Project.objects.get(slug="vision")
    page = login("lead")
    page.click("nav summary:has-text('Cluster')")
    page.click("nav >> text=Notification channels")
    page.wait_for_url(re.compile(r"/notifications/$"))
    page.click("text=New channel")
    page.wait_for_url(re.compile(r"/notifications/new/$"))

    page.select_option("#id_project", str(vision.pk))
    page.select_option("#id_kind", "webhook")
    page.fill("#id_url", "ftp://user:pw@example.org/hook")
    page.fill("#id_secret", "short")
    page.click("main button:has-text('Create')")
    page.wait_for_load_state()
    assert "/notifications/new/" in page.url
    expect(page.locator("#id_name_errors")).to_be_visible()
    expect(page.locator("#id_url_errors")).to_contain_text("credentials")
    expect(page.locator("#id_secret_errors")).to_contain_text("16 to 256")
    expect(page.locator("#id_events_errors")).to_contain_text("Choose at least one event")
    assert not NotificationChannel.objects.exists()
    assert page.input_value("#id_url") == "ftp://user:pw@example.org/hook"

    with receiver() as hook:
        page.fill("#id_name", "vision-alerts")
        page.fill("#id_url", hook.url)
        page.fill("#id_secret", SECRET)
        page.check("input[name=events][value='budget.threshold']")
        page.click("main button:has-text('Create')")
        page.wait_for_url(re.compile(r"/notifications/\d+/$"))
        assert "Channel created." in page.inner_text(".messages")
        channel = NotificationChannel.objects.get()
        assert (channel.project, channel.events) == (vision, ["budget.threshold"])
        assert AuditEvent.objects.filter(action="notification_channel.create", actor__username="lead").exists()
        expect(page.locator("#channel-deliveries")).to_contain_text("Nothing sent yet")

        page.click("main button:has-text('Send test')")
        row = page.locator("#channel-deliveries tr[data-delivery]")
        expect(row).to_contain_text("pending")
        delivery = NotificationDelivery.objects.get(channel=channel)
        tasks.notification_deliver(delivery.pk)  # the worker sends it; the log's poll picks the result up
        expect(row.locator("[data-status]")).to_have_attribute("data-status", "delivered", timeout=10_000)
        expect(row).to_contain_text("200")

    [got] = hook.received
    assert got.headers["X-Portal-Signature"] == "sha256=" + hmac.new(SECRET.encode(), got.body,
                                                                     hashlib.sha256).hexdigest()
    assert json.loads(got.body)["event"] == "test"
    page.goto("/notifications/")
    expect(page.locator(f"tr[data-channel='{channel.pk}'] [data-status]")).to_have_attribute(
        "data-status", "delivered")
