"""My settings: each user opts in to workload e-mail for themselves."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.accounts.models import NotificationPreference

pytestmark = pytest.mark.django_db
SETTINGS = reverse("accounts:settings")


@pytest.mark.parametrize("username", ["admin", "deptadmin", "lead", "alice", "bob", "carol", "viewer"])
def test_everyone_signed_in_has_their_own_settings(client_for, username):
    response = client_for(username).get(SETTINGS)
    assert response.status_code == 200 and "E-mail about my workloads" in response.content.decode()


def test_opting_in_and_out(client_for, demo):
    client = client_for("alice")
    response = client.post(SETTINGS, {"on_admitted": "on", "on_failed": "on", "on_idle": "on"})
    assert response.status_code == 302
    preference = NotificationPreference.objects.get(user=demo["alice"])
    assert (preference.on_admitted, preference.on_preempted, preference.on_finished, preference.on_failed) == (
        True, False, False, True) and preference.on_idle
    page = client.get(SETTINGS).content.decode()
    assert 'name="on_admitted" id="id_on_admitted" checked' in page and "holds GPUs it does not use" in page
    client.post(SETTINGS, {})
    preference.refresh_from_db()
    assert not any((preference.on_admitted, preference.on_preempted, preference.on_finished, preference.on_failed,
                    preference.on_idle))
    assert not NotificationPreference.objects.filter(user=demo["bob"]).exists()  # only her own row


def test_anonymous_users_sign_in_first(client):
    assert client.get(SETTINGS).status_code == 302
    assert client.post(SETTINGS, {"on_admitted": "on"}).status_code == 302
    assert not NotificationPreference.objects.exists()
