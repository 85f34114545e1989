"""/api/v1/notification-channels/: who sees and changes which channels, bad URLs a 400 naming the field, the URL
and secret never returned, the test action and the delivery log."""

from __future__ import annotations

import pytest

from apps.org.models import NotificationChannel, NotificationDelivery
from tests.api_support import call, demo_ids

SECRET = "a-secret-of-enough-length"
HOOK = "http://127.0.0.1:9/hook"


@pytest.fixture
def ids(demo) -> dict[str, int]:
    return demo_ids()


def create(client, **body):
    return call(client, "POST", "notification-channels/", {
        "name": "mine", "kind": "webhook", "url": HOOK, "secret": SECRET, "events": ["workload.failed"], **body})


def test_a_personal_webhook_never_shows_its_url_or_secret(client_for):
    response = create(client_for("alice"), url=HOOK + "?key=k123")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["owner"] == "alice" and body["project"] is None and body["url_host"] == "http://127.0.0.1:9"
    for shown in (response, call(client_for("alice"), "GET", f"notification-channels/{body['id']}/"),
                  call(client_for("alice"), "GET", "notification-channels/")):
        assert SECRET not in shown.content.decode() and "k123" not in shown.content.decode()
        assert b'"url"' not in shown.content and b'"secret"' not in shown.content


def test_bad_input_is_a_400_naming_every_field(client_for, settings):
    response = create(client_for("alice"), url="ftp://user:pw@example.com/x", secret="short",
                      events=["workload.nope"])
    assert response.status_code == 400
    assert set(response.json()) == {"url", "secret", "events"}
    settings.NOTIFICATIONS_ALLOW_PRIVATE = False
    response = create(client_for("alice"), url="http://169.254.169.254/latest/meta-data/")
    assert response.status_code == 400 and "link-local" in response.json()["url"][0]
    assert not NotificationChannel.objects.exists()


def test_access_matrix_for_project_channels(client_for, ids):
    assert create(client_for("alice"), project=ids["vision"]).status_code == 403  # a member, not a lead
    response = create(client_for("lead"), project=ids["vision"], name="team")
    assert response.status_code == 201, response.content
    channel_id = response.json()["id"]
    mine = create(client_for("alice")).json()["id"]
    listed = {name: {c["id"] for c in call(client_for(name), "GET", "notification-channels/").json()["results"]}
              for name in ("alice", "lead", "admin", "viewer")}
    assert listed["alice"] == {mine}  # her own; not the project's (she does not manage it)
    assert channel_id in listed["lead"] and mine not in listed["lead"]
    assert channel_id in listed["admin"] and mine not in listed["admin"]  # personal channels stay personal
    assert listed["viewer"] == set()
    assert call(client_for("alice"), "PATCH", f"notification-channels/{channel_id}/", {"name": "x"}
                ).status_code == 404
    assert call(client_for("admin"), "PATCH", f"notification-channels/{mine}/", {"name": "x"}).status_code == 404
    assert call(client_for("admin"), "PATCH", f"notification-channels/{channel_id}/", {"name": "ops"}
                ).json()["name"] == "ops"
    assert call(client_for("lead"), "DELETE", f"notification-channels/{channel_id}/").status_code == 204


def test_patch_replaces_the_url_only_when_given_and_checks_it(client_for):
    client = client_for("alice")
    channel_id = create(client).json()["id"]
    response = call(client, "PATCH", f"notification-channels/{channel_id}/", {"url": "gopher://x/"})
    assert response.status_code == 400 and list(response.json()) == ["url"]
    response = call(client, "PATCH", f"notification-channels/{channel_id}/", {"events": ["workload.admitted"]})
    assert response.status_code == 200 and response.json()["url_host"] == "http://127.0.0.1:9"
    response = call(client, "PATCH", f"notification-channels/{channel_id}/", {"kind": "slack"})
    assert response.status_code == 400


def test_send_test_records_a_delivery_and_the_log_shows_it(client_for):
    client = client_for("alice")
    channel_id = create(client).json()["id"]
    response = call(client, "POST", f"notification-channels/{channel_id}/test/")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    assert NotificationDelivery.objects.get(channel_id=channel_id).event == "test"
    log = call(client, "GET", f"notification-channels/{channel_id}/deliveries/").json()
    assert [entry["event"] for entry in log] == ["test"]
    assert call(client_for("bob"), "POST", f"notification-channels/{channel_id}/test/").status_code == 404
