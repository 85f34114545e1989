"""LEADER_ELECTION and its timings as portal/settings.py reads them, each in a fresh interpreter: off unless asked
for (one watcher and one beat, as `make run` and docker compose start them), client-go's default timings, and
refused when it could not work: no namespace for the Leases, or timings that would let two leaders act at once."""

from __future__ import annotations

import json

from tests.portal.test_production_settings import run

PROBE = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({name: getattr(settings, name) for name in (
    "LEADER_ELECTION", "PORTAL_NAMESPACE", "LEADER_ELECTION_LEASE_SECONDS", "LEADER_ELECTION_RENEW_DEADLINE_SECONDS",
    "LEADER_ELECTION_RETRY_SECONDS")}))
"""
CLEAN = {"LEADER_ELECTION": "", "POD_NAMESPACE": "", "LEADER_ELECTION_LEASE_SECONDS": "",
         "LEADER_ELECTION_RENEW_DEADLINE_SECONDS": "", "LEADER_ELECTION_RETRY_SECONDS": ""}


def settings_with(**env: str):
    result = run(["-c", PROBE], {**CLEAN, **env})
    if result.returncode:
        return result.stderr.strip().splitlines()[-1]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_off_by_default_with_client_gos_timings():
    assert settings_with() == {"LEADER_ELECTION": False, "PORTAL_NAMESPACE": "", "LEADER_ELECTION_LEASE_SECONDS": 15,
                               "LEADER_ELECTION_RENEW_DEADLINE_SECONDS": 10, "LEADER_ELECTION_RETRY_SECONDS": 2}


def test_on_in_the_pods_namespace():
    values = settings_with(LEADER_ELECTION="true", POD_NAMESPACE="gpu-portal")
    assert values["LEADER_ELECTION"] is True and values["PORTAL_NAMESPACE"] == "gpu-portal"


def test_refused_without_a_namespace_for_the_leases():
    assert settings_with(LEADER_ELECTION="true") == (
        "django.core.exceptions.ImproperlyConfigured: LEADER_ELECTION needs the namespace that holds the Leases: "
        "set PORTAL_NAMESPACE (or POD_NAMESPACE)")


def test_refused_with_timings_that_would_let_two_leaders_act_at_once():
    for lease, renew, retry in (("10", "10", "2"), ("15", "10", "9")):
        assert settings_with(LEADER_ELECTION_LEASE_SECONDS=lease, LEADER_ELECTION_RENEW_DEADLINE_SECONDS=renew,
                             LEADER_ELECTION_RETRY_SECONDS=retry) == (
            "django.core.exceptions.ImproperlyConfigured: leader election needs LEADER_ELECTION_LEASE_SECONDS > "
            "LEADER_ELECTION_RENEW_DEADLINE_SECONDS > 1.2 x LEADER_ELECTION_RETRY_SECONDS")
