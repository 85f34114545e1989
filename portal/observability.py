"""Probes, metrics and request ids for the web process (README "Health, metrics and logs").

`/healthz` (the process answers), `/readyz` (database, broker, and the cluster as the watcher last reached it) and
`/metrics` are answered by ProbeMiddleware ahead of every other middleware: kubelets and Prometheus call the pod's
address over plain HTTP with whatever Host header they send, so these three paths skip ALLOWED_HOSTS, the SSL
redirect, sessions, CSRF and sign-in. `/readyz` shows each check's detail to an installation admin's browser
session only (read, never written); anyone else reads the overall status. `/metrics` answers only callers in
METRICS_ALLOWED_NETWORKS or with `Authorization: Bearer <METRICS_TOKEN>`.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from importlib import import_module

import redis
from django.conf import settings
from django.contrib import auth
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from apps.accounts import access
from apps.accounts.access import Action
from apps.cluster import selectors as mirror
from apps.cluster.metrics import MirrorCollector
from apps.core import metrics, request_ids

logger = logging.getLogger("portal.request")
HEALTHZ, READYZ, METRICS = "/healthz", "/readyz", "/metrics"

_MIRROR_REGISTRY = CollectorRegistry()
_MIRROR_REGISTRY.register(MirrorCollector())


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str = ""


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any driver error: the database is not usable from here
        return Check(False, f"database unavailable: {exc}")
    return Check(True)


def check_broker() -> Check:
    if not settings.REDIS_URL:
        return Check(settings.BROKER_DIR.is_dir(), f"embedded broker at {settings.BROKER_DIR}")
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2).ping()
    except redis.RedisError as exc:
        return Check(False, f"broker unavailable: {exc}")
    return Check(True)


def check_cluster() -> Check:
    """From the watcher's heartbeat: the web never calls the cluster itself (docs/architecture.md, The stack: pages
    never ask the cluster)."""
    try:
        heartbeat = mirror.watcher_heartbeat()
    except Exception as exc:  # no database: the database check says so
        return Check(False, f"unknown without the database: {exc}")
    if heartbeat is None:
        return Check(False, "the watcher has not reported yet")
    max_age = timedelta(seconds=settings.READYZ_CLUSTER_MAX_AGE)
    if heartbeat.cluster_seen_at is None or timezone.now() - heartbeat.cluster_seen_at > max_age:
        seen = f"{heartbeat.cluster_seen_at:%Y-%m-%d %H:%M:%S}" if heartbeat.cluster_seen_at else "never"
        return Check(False, f"{heartbeat.error or 'no answer recently'} (last reached: {seen})")
    return Check(True)


CHECKS: dict[str, Callable[[], Check]] = {"database": check_database, "broker": check_broker,
                                          "cluster": check_cluster}


def _is_admin(request: HttpRequest) -> bool:
    """An installation admin's browser session, read without touching it (no session middleware ran)."""
    key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if not key:
        return False
    try:
        request.session = import_module(settings.SESSION_ENGINE).SessionStore(key)
        return access.sees_everything(auth.get_user(request), Action.MANAGE)
    except Exception:  # no database, a broken session: no detail, the checks say why
        return False


def readyz(request: HttpRequest) -> JsonResponse:
    results = {name: check() for name, check in CHECKS.items()}
    ready = all(result.ok for result in results.values())
    body: dict[str, object] = {"status": "ok" if ready else "fail"}
    if _is_admin(request):
        body["checks"] = {name: {"ok": result.ok, "detail": result.detail} for name, result in results.items()}
    return JsonResponse(body, status=200 if ready else 503)


def _metrics_allowed(request: HttpRequest) -> bool:
    header = request.headers.get("Authorization", "")
    if settings.METRICS_TOKEN and header.startswith("Bearer ") and hmac.compare_digest(
            header.removeprefix("Bearer ").encode(), settings.METRICS_TOKEN.encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(network, strict=False) for network in settings.METRICS_ALLOWED_NETWORKS)


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _metrics_allowed(request):
        return HttpResponse("Forbidden\n", status=403, content_type="text/plain")
    page = generate_latest(metrics.registry()) + generate_latest(_MIRROR_REGISTRY)
    return HttpResponse(page, content_type=CONTENT_TYPE_LATEST)


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


PROBES: dict[str, Callable[[HttpRequest], HttpResponse]] = {HEALTHZ: healthz, READYZ: readyz, METRICS: metrics_view}


class ProbeMiddleware:
    """First in MIDDLEWARE: answers the probe and metrics paths before host checks, redirects and sessions."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method in ("GET", "HEAD") and (probe := PROBES.get(request.path)):
            response = probe(request)
            # SecurityMiddleware, which sets this on every other answer, comes after this one.
            response["X-Content-Type-Options"] = "nosniff"
            return response
        return self.get_response(request)


class RequestIdMiddleware:
    """Binds the request id (the caller's X-Request-ID when it is a plain token, else a new one) for the log lines,
    the tasks enqueued and the Jobs they create; answers it in X-Request-ID; logs one line per request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = request_ids.bind(request_ids.accepted(request.headers.get(request_ids.HEADER)))
        started = time.monotonic()
        try:
            response = self.get_response(request)
            response[request_ids.HEADER] = request_ids.current()
            logger.info("%s %s %s %.0fms", request.method, request.path, response.status_code,
                        (time.monotonic() - started) * 1000)
            return response
        finally:
            request_ids.unbind(token)
