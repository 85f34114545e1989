"""/healthz, /readyz and /metrics for probes and Prometheus; request ids and JSON log lines."""

import json
import logging
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from pythonjsonlogger.json import JsonFormatter

from apps.cluster.models import ClusterQueueState
from apps.cluster.services import watcher_heartbeat
from apps.core import metrics

PROBE_HOST = "10.244.1.17:8000"  # what a kubelet sends: the pod's address, on no ALLOWED_HOSTS list


@pytest.fixture
def production_like(settings):
    settings.ALLOWED_HOSTS = ["portal.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    return settings


def test_healthz_answers_plain_http_from_any_host_without_a_session(client, production_like):
    # No database fixture: a query would fail the test.
    response = client.get("/healthz", headers={"Host": PROBE_HOST})
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert "Set-Cookie" not in response.headers and not response.cookies
    # The same host on any other page is refused, and plain HTTP is redirected: the probe paths are the exception.
    assert client.get("/", headers={"Host": PROBE_HOST}).status_code == 400
    assert client.get("/", headers={"Host": "portal.example.com"}).status_code == 301


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_probe_answers_forbid_content_sniffing(client, db, production_like, path):
    """Answered before SecurityMiddleware, so they set its header themselves."""
    response = client.get(path, headers={"Host": PROBE_HOST})
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_readyz_fails_until_the_watcher_has_reached_the_cluster(client, db, production_like):
    response = client.get("/readyz", headers={"Host": PROBE_HOST})
    assert response.status_code == 503 and response.json() == {"status": "fail"}
    watcher_heartbeat(at=timezone.now())
    assert client.get("/readyz", headers={"Host": PROBE_HOST}).json() == {"status": "ok"}


def test_readyz_detail_is_for_admins_only(client_for, db, settings):
    watcher_heartbeat(at=timezone.now() - timedelta(seconds=settings.READYZ_CLUSTER_MAX_AGE + 5))
    watcher_heartbeat(at=timezone.now(), error="cannot reach the cluster at https://10.0.0.1:6443: refused")
    admin = client_for("admin").get("/readyz")
    assert admin.status_code == 503
    checks = admin.json()["checks"]
    assert checks["database"]["ok"] and checks["broker"]["ok"] and not checks["cluster"]["ok"]
    assert checks["cluster"]["detail"].startswith("cannot reach the cluster at https://10.0.0.1:6443")
    assert "checks" not in client_for("alice").get("/readyz").json()


def test_metrics_need_an_allowed_network_or_the_token(client, db, settings):
    ClusterQueueState.objects.create(name="proj-vision-h100-elastic", pending_workloads=3, observed_at=timezone.now())
    metrics.SUBMISSIONS.labels("submitted").inc()
    page = client.get("/metrics", headers={"Host": PROBE_HOST})
    assert page.status_code == 200
    text = page.content.decode()
    assert 'portal_clusterqueue_pending_workloads{cluster_queue="proj-vision-h100-elastic"} 3.0' in text
    assert 'portal_submissions_total{outcome="submitted"}' in text
    assert "django_http_requests_before_middlewares_total" in text  # django-prometheus' own

    outsider = {"REMOTE_ADDR": "203.0.113.9"}
    assert client.get("/metrics", **outsider).status_code == 403
    settings.METRICS_TOKEN = "scrape-token-123"
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}, **outsider).status_code == 403
    assert client.get("/metrics", headers={"Authorization": "Bearer scrape-token-123"}, **outsider).status_code == 200


def test_a_request_id_is_taken_when_plain_and_made_otherwise(client_for, caplog):
    caplog.set_level(logging.INFO, logger="portal.request")
    alice = client_for("alice")
    response = alice.get("/", headers={"X-Request-ID": "abc-123"})
    assert response["X-Request-ID"] == "abc-123"
    assert [record.request_id for record in caplog.records if record.name == "portal.request"] == ["abc-123"]
    forged = alice.get("/", headers={"X-Request-ID": "x\nfake log line"})["X-Request-ID"]
    assert forged != "x\nfake log line" and len(forged) == 32


def test_json_log_lines_carry_the_request_id():
    spec = {key: value for key, value in django_settings.LOGGING["formatters"]["json"].items() if key != "()"}
    record = logging.LogRecord("worker.tasks", logging.WARNING, __file__, 1, "submit of %s failed", (7,), None)
    record.request_id = "abc-123"
    line = json.loads(JsonFormatter(**spec).format(record))
    assert line["level"] == "WARNING" and line["logger"] == "worker.tasks"
    assert line["message"] == "submit of 7 failed" and line["request_id"] == "abc-123" and "time" in line
