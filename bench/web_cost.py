"""The web's CPU per request, in-process: what the requests of the submit load cost the web process itself, which
sets how long the others queue for a thread on a shared machine (docs/architecture.md, Serving the portal).

On live_pages.py's database (`<name>_bench` next to DATABASE_URL's, built as live_pages builds it unless it holds
that size already), through Django's test client: the API's submit (`POST /api/v1/workloads/`, token-authenticated,
into the last bench project), the workload list's htmx poll and the project queue's htmx poll, each answered in full
(200) and unchanged (304 to its own ETag, taken just before). Figures: the median of `time.process_time()` over
--requests requests of each (CPU, far less sensitive to the machine's load than wall clock), and each one's query
count. The submissions it makes are deleted at the end.

Usage: python -m portal.devservices .venv/bin/python bench/web_cost.py [--workloads 10000] [--projects 100]
       [--requests 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import live_pages  # noqa: E402 - bench/live_pages.py, beside this script: its database
import report  # noqa: E402 - bench/report.py, beside this script


def measure(fixture: dict, requests: int) -> list[dict]:
    from django.contrib.auth import get_user_model
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from apps.accounts import services as accounts
    from apps.accounts.models import Role, RoleBinding, Scope
    from apps.workloads.models import Workload

    project, other = fixture["projects"][0], fixture["projects"][-1]
    submitter, made = get_user_model().objects.get_or_create(username="benchsubmitter")
    if made:
        RoleBinding.objects.create(user=submitter, role=Role.RESEARCHER, scope=Scope.PROJECT, project=other)
    token = accounts.personal_token_create(user=submitter, name=f"web-cost-{os.getpid()}")[1]
    body = json.dumps({"project": other.slug, "kind": "training", "name": "cost", "image": "pytorch/pytorch:2.4.0",
                       "command": ["sleep", "3600"], "node_pool": fixture["pool"].slug, "gpus": 1, "cpu": "1",
                       "memory": "4Gi", "labels": {"model": "resnet50", "data_class": "public"}})
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    pages = Client()
    pages.force_login(fixture["researcher"])
    queue = f"/workloads/projects/{project.slug}/queue/"

    def submit() -> int:
        return api.post("/api/v1/workloads/", data=body, content_type="application/json").status_code

    def poll(url: str, unchanged: bool) -> Callable[[], int]:
        tag = pages.get(url, HTTP_HX_REQUEST="true")["ETag"] if unchanged else None  # the list's moves with the clock
        headers = {"HTTP_IF_NONE_MATCH": tag} if tag else {}
        return lambda: pages.get(url, HTTP_HX_REQUEST="true", **headers).status_code

    cases: list[tuple[str, Callable[[], Callable[[], int]], int]] = [
        ("POST /api/v1/workloads/", lambda: submit, 201),
        ("workload list htmx poll", lambda: poll("/workloads/", False), 200),
        ("workload list htmx poll unchanged", lambda: poll("/workloads/", True), 304),
        ("project queue htmx poll", lambda: poll(queue, False), 200),
        ("project queue htmx poll unchanged", lambda: poll(queue, True), 304)]
    results = []
    try:
        for label, make, expected in cases:
            request = make()
            request()  # warm
            reset_queries()  # the log is a bounded deque: counting needs room in it
            with CaptureQueriesContext(connection) as queries:
                request()
            count = len(queries.captured_queries)
            cpu, answered = [], []
            for _ in range(requests):
                started = time.process_time()
                answered.append(request())
                cpu.append(time.process_time() - started)
            share = answered.count(expected) / len(answered)
            results.append({"request": label, "cpu_ms": statistics.median(cpu) * 1000, "queries": count,
                            "expected_share": share})
    finally:
        Workload.objects.filter(owner=submitter).delete()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    machine = report.Machine()
    live_pages._use_bench_database()
    os.environ["CELERY_QUEUE"] = f"portal-bench-web-cost-{os.getpid()}"  # never a worker's queue
    import django

    django.setup()
    from django.core.management import call_command
    from django.core.signals import request_started
    from django.db import reset_queries

    request_started.disconnect(reset_queries)  # keep the query log across requests so it can be counted
    call_command("collectstatic", "--noinput", verbosity=0)  # the pages name hashed static files, as deployed
    if live_pages.built(args.workloads, args.projects):
        fixture = live_pages._fixture()
    else:
        fixture = live_pages.build(args.workloads, args.projects)
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    print(f"{'request':36} {'CPU ms':>7} {'queries':>7} {'as expected':>11}")
    figures = []
    for row in measure(fixture, args.requests):
        print(f"{row['request']:36} {row['cpu_ms']:>7.1f} {row['queries']:>7} {row['expected_share']:>11.0%}")
        figures.append(report.Figure(f"{row['request']} CPU median, {args.workloads:,} workloads", "ms",
                                     [row["cpu_ms"]]))
    report.record("web_cost.py", vars(args), figures, machine)
    print(machine.uptime())


if __name__ == "__main__":
    main()
