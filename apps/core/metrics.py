"""The portal's own Prometheus metrics, one definition each, and the metrics port of the worker and the watcher.

Counters and histograms only, so they are safe under prometheus_client's multiprocess mode: with
PROMETHEUS_MULTIPROC_DIR set (gunicorn's and Celery's prefork children), each process writes its own files there and
the exporter adds them up. Gauges read from the database (queues, the watcher's heartbeat) are collected at scrape
time by apps.cluster.metrics instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from wsgiref.simple_server import WSGIServer
from wsgiref.types import StartResponse, WSGIApplication

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, multiprocess, start_http_server

SUBMISSIONS = Counter("portal_submissions_total", "Submit task outcomes (submitted, rejected, submit_failed, retry, "
                      "...)", ["outcome"])
SUBMIT_TO_JOB = Histogram("portal_submit_to_job_seconds", "From the submission saved to its Job created",
                          buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900))
WATCHER_LAG = Histogram("portal_watcher_lag_seconds", "From a cluster event's arrival at the watcher to its row "
                        "written", buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
# The two hops of WATCHER_LAG: waiting for an applier (per key), then the applier's pass (per batch).
WATCHER_QUEUED = Histogram("portal_watcher_queued_seconds", "From a cluster event's arrival at the watcher to an "
                           "applier taking it", ["what"],
                           buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
WATCHER_APPLY = Histogram("portal_watcher_apply_seconds", "One applier pass, from taking its keys to their rows "
                          "committed", ["what"], buckets=(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
WATCHER_RESYNCS = Counter("portal_watcher_resyncs_total", "Full relists of every watched kind")
WATCHER_UNMAPPED = Counter("portal_watcher_unmapped_total", "Cluster objects the watcher could not count as a "
                           "project's work, by reason, each counted once when first seen", ["reason"])
RECONCILE_DURATION = Histogram("portal_reconcile_duration_seconds", "One Kueue reconcile pass, failed ones included",
                               buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
RECONCILE_CHANGES = Counter("portal_reconcile_changes_total", "Objects created, updated or deleted by reconciles")
TASK_FAILURES = Counter("portal_celery_task_failures_total", "Celery tasks that ended in an exception", ["task"])


def registry() -> CollectorRegistry:
    """What this process exports: every process's files in multiprocess mode, else this process's registry."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        combined = CollectorRegistry()
        multiprocess.MultiProcessCollector(combined)
        return combined
    return REGISTRY


def serve_metrics(port: int, probes: Mapping[str, Callable[[], list[str]]] | None = None) -> WSGIServer | None:
    """The worker's or watcher's /metrics on `port` (0: none), on every interface for the cluster's scraper, and the
    process's probes beside it: each path answers 200 `{"status": "ok"}` when its check finds no problem, else 503
    with the problems (the port stays inside the cluster: deploy/base/networkpolicy.yaml). Returns the server."""
    if not port:
        return None
    server, _ = start_http_server(port, registry=registry())
    if probes and (metrics_app := server.get_app()) is not None:
        server.set_app(_with_probes(metrics_app, probes))
    return server


def _with_probes(metrics_app: WSGIApplication, probes: Mapping[str, Callable[[], list[str]]]) -> WSGIApplication:
    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        check = probes.get(environ.get("PATH_INFO", ""))
        if check is None:
            return metrics_app(environ, start_response)
        problems = check()
        body = json.dumps({"status": "fail", "problems": problems} if problems else {"status": "ok"}).encode()
        start_response("503 Service Unavailable" if problems else "200 OK",
                       [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    return app
