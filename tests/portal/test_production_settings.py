"""Production mode's sign-in defaults and `manage.py check --deploy` (as `make check-deploy` runs it), each in a
fresh interpreter so the settings module really reads the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {"PORTAL_MODE": "production", "SECRET_KEY": "check-deploy-only-for-this-test-abcdefghijklmnopqrstuvwxyz",
              "ALLOWED_HOSTS": "portal.example.com"}
PROBE = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({name: getattr(settings, name) for name in (
    "LOCAL_LOGIN", "DEMO_MODE", "OIDC_ENABLED", "SESSION_IDLE_TIMEOUT", "SESSION_MAX_AGE", "SESSION_COOKIE_AGE",
    "AXES_FAILURE_LIMIT", "API_TOKEN_DEFAULT_DAYS", "API_TOKEN_MAX_DAYS", "OIDC_RP_CLIENT_SECRET",
    "OIDC_OP_ISSUER", "OIDC_GROUPS_CLAIM", "OIDC_USERNAME_CLAIM", "OIDC_RP_SCOPES", "OIDC_CLOCK_LEEWAY")} | {
    "lockout_minutes": settings.AXES_COOLOFF_TIME.total_seconds() / 60,
    "form_action": settings.CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"]}))
"""


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items()
             if not key.startswith(("OIDC_", "PORTAL_", "SESSION_", "API_TOKEN_", "LOGIN_"))}
    clean.pop("DJANGO_SETTINGS_MODULE", None)
    clean.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the browser tests' setting, never a deployment's
    return subprocess.run([sys.executable, *args], cwd=ROOT, env={**clean, "DJANGO_SETTINGS_MODULE": "portal.settings",
                                                                   **env},
                          capture_output=True, text=True, timeout=120, check=False)


def probe(env: dict[str, str]) -> dict:
    result = run(["-c", PROBE], env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_production_defaults():
    values = probe(PRODUCTION)
    assert values["LOCAL_LOGIN"] is False and values["DEMO_MODE"] is False and values["OIDC_ENABLED"] is False
    assert values["SESSION_IDLE_TIMEOUT"] == 1800 and values["SESSION_MAX_AGE"] == values["SESSION_COOKIE_AGE"]
    assert values["AXES_FAILURE_LIMIT"] == 5 and values["lockout_minutes"] == 15
    assert (values["API_TOKEN_DEFAULT_DAYS"], values["API_TOKEN_MAX_DAYS"]) == (30, 365)


def test_embedded_mode_keeps_local_passwords_for_the_demo():
    values = probe({})
    assert values["LOCAL_LOGIN"] is True and values["DEMO_MODE"] is True


def test_oidc_from_the_environment_with_the_secret_from_a_file(tmp_path):
    secret = tmp_path / "client-secret"
    secret.write_text("s3cret-from-a-mounted-file\n")
    values = probe({**PRODUCTION, "OIDC_CLIENT_ID": "portal", "OIDC_CLIENT_SECRET_FILE": str(secret),
                    "OIDC_ISSUER": "https://idp.example.org/realms/acme",
                    "OIDC_AUTHORIZATION_ENDPOINT": "https://idp.example.org/realms/acme/protocol/openid-connect/auth",
                    "OIDC_TOKEN_ENDPOINT": "https://idp.example.org/realms/acme/protocol/openid-connect/token",
                    "OIDC_JWKS_ENDPOINT": "https://idp.example.org/realms/acme/protocol/openid-connect/certs",
                    "OIDC_GROUPS_CLAIM": "roles", "OIDC_USERNAME_CLAIM": "email", "OIDC_SCOPES": "openid email"})
    assert values["OIDC_ENABLED"] is True and values["OIDC_RP_CLIENT_SECRET"] == "s3cret-from-a-mounted-file"
    assert (values["OIDC_GROUPS_CLAIM"], values["OIDC_USERNAME_CLAIM"]) == ("roles", "email")
    assert values["form_action"] == ["'self'", "https://idp.example.org"]
    assert values["OIDC_CLOCK_LEEWAY"] == 60  # the default


def test_oidc_clock_leeway_from_the_environment_within_its_bounds():
    assert probe({"OIDC_CLOCK_LEEWAY": "5"})["OIDC_CLOCK_LEEWAY"] == 5
    assert probe({"OIDC_CLOCK_LEEWAY": "0"})["OIDC_CLOCK_LEEWAY"] == 0
    for value, message in (("301", "at most 300"), ("-1", "at least 0"), ("a minute", "a whole number")):
        result = run(["-c", PROBE], {"OIDC_CLOCK_LEEWAY": value})
        assert result.returncode != 0 and f"OIDC_CLOCK_LEEWAY must be {message}" in result.stderr, value


def test_incomplete_oidc_configuration_is_refused():
    result = run(["-c", PROBE], {**PRODUCTION, "OIDC_CLIENT_ID": "portal"})
    assert result.returncode != 0
    assert "OIDC_CLIENT_ID is set, so these must be too: OIDC_ISSUER" in result.stderr


def test_bad_numbers_are_refused():
    result = run(["-c", PROBE], {"SESSION_IDLE_TIMEOUT": "half an hour"})
    assert result.returncode != 0 and "SESSION_IDLE_TIMEOUT must be a whole number" in result.stderr


def test_check_deploy_is_clean_in_production_mode():
    result = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


OPERATIONS_PROBE = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({name: getattr(settings, name) for name in (
    "LOG_FORMAT", "SECURE_REDIRECT_EXEMPT", "WORKER_METRICS_PORT", "WATCHER_METRICS_PORT", "PORTAL_ADMIN_USERNAME",
    "PORTAL_ADMIN_PASSWORD")}))
"""


def test_production_logs_json_exempts_the_probes_and_reads_the_admin_password_file(tmp_path):
    secret = tmp_path / "admin-password"
    secret.write_text("from-a-mounted-secret\n")
    result = run(["-c", OPERATIONS_PROBE], {**PRODUCTION, "PORTAL_ADMIN_USERNAME": "ops",
                                            "PORTAL_ADMIN_PASSWORD_FILE": str(secret)})
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert values["LOG_FORMAT"] == "json"
    assert values["SECURE_REDIRECT_EXEMPT"] == ["^healthz$", "^readyz$", "^metrics$"]
    assert (values["WORKER_METRICS_PORT"], values["WATCHER_METRICS_PORT"]) == (9101, 9102)
    assert (values["PORTAL_ADMIN_USERNAME"], values["PORTAL_ADMIN_PASSWORD"]) == ("ops", "from-a-mounted-secret")


def test_links_in_e_mails_use_the_port_the_portal_serves():
    """Without PORTAL_BASE_URL the links in e-mails point at the embedded portal where `make run` serves it
    (PORTAL_PORT, on PORTAL_HOST, loopback for a wildcard); a set PORTAL_BASE_URL wins."""
    read = """
import django
django.setup()
from django.conf import settings
print(settings.PORTAL_BASE_URL)
"""

    def base_url(env: dict[str, str]) -> str:
        result = run(["-c", read], env)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip().splitlines()[-1]

    assert base_url({}) == "http://127.0.0.1:8000"
    assert base_url({"PORTAL_PORT": "8123"}) == "http://127.0.0.1:8123"
    assert base_url({"PORTAL_PORT": "8123", "PORTAL_HOST": "0.0.0.0"}) == "http://127.0.0.1:8123"  # noqa: S104
    assert base_url({"PORTAL_PORT": "8123", "PORTAL_HOST": "portal.lan"}) == "http://portal.lan:8123"
    assert base_url({"PORTAL_PORT": "8123", "PORTAL_BASE_URL": "https://gpu.example.org"}) == \
        "https://gpu.example.org"
