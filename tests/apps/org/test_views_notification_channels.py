"""The notification channel pages: who sees which channels (404 for another person's own and another scope's project
channels, on every page), the list through the API's FilterSet in fixed queries, forms naming every mistake at once,
create / edit / delete through the services with audit rows for projects' channels, and "send test" writing a
delivery the worker sends to a local receiver, its result and last error in the channel's log."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import NotificationChannel, NotificationDelivery, Project
from tests.receiver import receiver
from worker import tasks

pytestmark = pytest.mark.django_db
LIST = reverse("org:notification_channels")
NEW = reverse("org:notification_channel_create")
SECRET = "a-secret-of-enough-length"


def url(name: str, channel: NotificationChannel) -> str:
    return reverse(f"org:notification_channel{name}", args=[channel.pk])


def own(user, name: str = "mine", **fields) -> NotificationChannel:
    values = {"kind": "email", "events": ["workload.finished"], **fields}
    return services.notification_channel_create(actor=user, name=name, **values)


def of_project(actor, slug: str, name: str = "team") -> NotificationChannel:
    return services.notification_channel_create(actor=actor, project=Project.objects.get(slug=slug), name=name,
                                                kind="email", email="team@gpu-portal.example",
                                                events=["quota.changed"])


def payload(**overrides) -> dict:
    data = {"project": "", "name": "hook", "kind": "webhook", "email": "", "url": "http://127.0.0.1:9/hook",
            "secret": SECRET, "events": ["workload.finished", "budget.threshold"], "enabled": "on"}
    data.update(overrides)
    return data


def errors_of(response) -> dict[str, list[str]]:
    return {name: list(messages) for name, messages in response.context["form"].errors.items()}


def listed(response) -> set[int]:
    return {row["channel"].pk for row in response.context["page"].object_list}


def test_each_lists_their_own_and_the_channels_of_the_projects_they_lead(demo, page_client):
    alices, bobs, admins = own(demo["alice"]), own(demo["bob"]), own(demo["admin"])
    vision, forecasting = of_project(demo["admin"], "vision"), of_project(demo["admin"], "forecasting")
    seen = {name: listed(page_client(name).get(LIST)) for name in ("alice", "lead", "deptadmin", "admin")}
    assert seen == {"alice": {alices.pk}, "lead": {vision.pk}, "deptadmin": {vision.pk},
                    "admin": {admins.pk, vision.pk, forecasting.pk}}
    assert bobs.pk not in seen["admin"]  # a person's own channels are theirs alone


@pytest.mark.parametrize("page", ["", "_edit", "_delete"])
def test_a_channel_one_may_not_set_up_is_not_found(demo, page_client, page):
    bobs, forecasting = own(demo["bob"]), of_project(demo["admin"], "forecasting")
    assert page_client("admin").get(url(page, bobs)).status_code == 404
    assert page_client("lead").get(url(page, forecasting)).status_code == 404
    assert page_client("alice").get(url(page, of_project(demo["admin"], "vision", "v2"))).status_code == 404


def test_nobody_sends_a_test_to_a_channel_they_may_not_see(demo, page_client):
    bobs = own(demo["bob"])
    assert page_client("admin").post(url("_test", bobs)).status_code == 404
    assert not NotificationDelivery.objects.exists()


def test_the_list_filters_through_the_api_filterset_and_explains_bad_filters(demo, page_client):
    mine, vision = own(demo["admin"]), of_project(demo["admin"], "vision")
    client = page_client("admin")
    assert listed(client.get(LIST, {"mine": "true"})) == {mine.pk}
    assert listed(client.get(LIST, {"project": "vision"})) == {vision.pk}
    response = client.get(LIST, {"kind": "pigeon"})
    assert "kind" in response.context["form"].errors and not listed(response)
    partial = client.get(LIST, {"kind": "email"}, headers={"HX-Request": "true"})
    assert partial.status_code == 200 and "<html" not in partial.content.decode()


def test_the_list_takes_the_same_queries_however_many_channels(demo, page_client):
    client = page_client("admin")
    own(demo["admin"], "one")
    services.notification_channel_test(actor=demo["admin"], channel=of_project(demo["admin"], "vision"), link="x")
    with CaptureQueriesContext(connection) as few:
        assert client.get(LIST).status_code == 200
    for n in range(6):
        channel = own(demo["admin"], f"more-{n}")
        services.notification_channel_test(actor=demo["admin"], channel=channel, link="x")
    with CaptureQueriesContext(connection) as many:
        response = client.get(LIST)
    assert len(listed(response)) == 8
    assert len(many.captured_queries) == len(few.captured_queries)


def test_a_bad_webhook_names_every_mistake_at_once_and_saves_nothing(demo, page_client):
    response = page_client("alice").post(NEW, payload(name="", url="ftp://user:pw@example.org/x", secret="short",
                                                      events=[]))
    assert response.status_code == 200
    errors = errors_of(response)
    assert set(errors) == {"name", "url", "secret", "events"}
    assert any("credentials" in message for message in errors["url"])
    assert "Choose at least one event." in errors["events"]
    assert not NotificationChannel.objects.exists()


def test_a_researcher_may_not_pick_a_project_they_do_not_lead(demo, page_client):
    vision = Project.objects.get(slug="vision")
    response = page_client("alice").post(NEW, payload(project=str(vision.pk)))
    assert "project" in errors_of(response) and not NotificationChannel.objects.exists()


def test_a_lead_creates_edits_and_deletes_a_project_channel_with_audit_rows(demo, page_client):
    client, vision = page_client("lead"), Project.objects.get(slug="vision")
    response = client.post(NEW, payload(project=str(vision.pk)))
    channel = NotificationChannel.objects.get()
    assert response.status_code == 302 and response["Location"] == url("", channel)
    assert (channel.project, channel.url_host) == (vision, "http://127.0.0.1:9")
    assert services.channel_hook(channel) == {"url": "http://127.0.0.1:9/hook", "secret": SECRET}

    # Edit: empty URL and secret keep the stored ones; the kind and owner cannot be changed from the form.
    response = client.post(url("_edit", channel), payload(name="renamed", url="", secret="", kind="email",
                                                          project="", version=str(channel.version)))
    assert response.status_code == 302
    channel.refresh_from_db()
    assert (channel.name, channel.kind, channel.project) == ("renamed", "webhook", vision)
    assert services.channel_hook(channel) == {"url": "http://127.0.0.1:9/hook", "secret": SECRET}

    assert client.post(url("_delete", channel)).status_code == 302
    assert not NotificationChannel.objects.exists()
    assert list(AuditEvent.objects.filter(action__startswith="notification_channel.").order_by("pk").values_list(
        "action", "actor__username")) == [("notification_channel.create", "lead"),
                                          ("notification_channel.update", "lead"),
                                          ("notification_channel.delete", "lead")]


def test_a_stale_edit_is_refused_on_the_form(demo, page_client):
    channel = own(demo["alice"])
    response = page_client("alice").post(url("_edit", channel), payload(kind="email", url="", secret="",
                                                                        email="", version=str(channel.version - 1)))
    assert response.status_code == 200 and response.context["form"].non_field_errors()


def test_send_test_reaches_a_local_receiver_and_the_log_shows_it_and_the_last_error(demo, page_client):
    client = page_client("alice")
    with receiver(500) as hook:
        channel = own(demo["alice"], kind="webhook", url=hook.url, secret=SECRET, events=["workload.failed"])
        response = client.post(url("_test", channel), headers={"HX-Request": "true"})
        assert response.status_code == 200 and 'hx-trigger="every 2s"' in response.content.decode()
        delivery = NotificationDelivery.objects.get(channel=channel)
        tasks.notification_deliver(delivery.pk)  # the worker: the receiver answers 500, tried again later
        tasks.notification_deliver(delivery.pk)
    assert len(hook.received) == 2
    delivery.refresh_from_db()
    assert (delivery.status, delivery.status_code, delivery.attempts) == ("delivered", 200, 2)
    page = client.get(url("", channel)).content.decode()
    assert f'data-delivery="{delivery.pk}"' in page and 'data-status="delivered"' in page
    assert "500" in delivery.last_error and delivery.last_error in page
    assert 'hx-trigger="every 2s"' not in page  # nothing pending: the log stops polling
    row = client.get(LIST).content.decode()
    assert 'data-status="delivered"' in row


def test_send_test_without_javascript_comes_back_to_the_channel(demo, page_client):
    channel = own(demo["alice"])
    response = page_client("alice").post(url("_test", channel))
    assert response.status_code == 302 and response["Location"] == url("", channel)
    assert NotificationDelivery.objects.get().event == "test"


def test_the_navigation_links_the_channels_for_everyone_signed_in(page_client):
    for name in ("alice", "viewer", "admin"):
        assert f'href="{LIST}"' in page_client(name).get(reverse("org:overview")).content.decode()


def test_a_silent_receiver_is_named_on_the_channel_page_with_the_end_of_its_pause(demo, page_client):
    from datetime import timedelta

    from django.utils import timezone

    channel = own(demo["alice"], kind="webhook", url="http://127.0.0.1:9/hook", secret=SECRET)
    assert "silent since" not in page_client("alice").get(url("", channel)).content.decode()
    until = timezone.now() + timedelta(minutes=2)
    NotificationChannel.objects.filter(pk=channel.pk).update(unreachable_since=timezone.now(), paused_until=until)
    page = page_client("alice").get(url("", channel)).content.decode()
    assert "silent since" in page and timezone.localtime(until).strftime("%H:%M:%S") in page
