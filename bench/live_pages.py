"""Live-state pages and the watcher under load.

10,000 workloads across 100 projects: p50/p95 server time and SQL query count of the workload list, the project
queue and the quota dashboard, each beside a bare Django view rendering a template of the same size in the same
run (target: every page within 2x of it); then cluster-change-to-database lag at 50 changes per second through
kubesim (real clock, separate process; `--rate`, `--async-settle` for kubesim's background settling) and the real
watcher (target: p95 under 1 s), and the process's memory (`--heap`: the watcher's Python heap peak too, traced
with tracemalloc, which slows the watcher several times over and so is never on while the lag is what counts).

It uses its own database (`<name>_bench` next to DATABASE_URL's, created if missing; SQLite file otherwise) and
never touches development or test data.

Usage: python -m portal.devservices .venv/bin/python bench/live_pages.py [--workloads 10000] [--projects 100]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
import types
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import report  # noqa: E402 - bench/report.py, beside this script


def _use_bench_database() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        base, name = url.rsplit("/", 1)
        bench_name = f"{name}_bench"
        import psycopg

        with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
            if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [bench_name]).fetchone():
                connection.execute(f'CREATE DATABASE "{bench_name}"')
        os.environ["DATABASE_URL"] = f"{base}/{bench_name}"
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{ROOT / '.run' / 'bench.sqlite3'}"
        # A folder broker of its own (the watcher enqueues as it applies), emptied each run: make run's worker reads
        # .run/broker and must never take the bench's messages, which name the bench database's rows.
        broker = ROOT / ".run" / "bench" / "broker"
        shutil.rmtree(broker, ignore_errors=True)
        (broker / "control").mkdir(parents=True)
        os.environ["PORTAL_RUN_DIR"] = str(broker.parent)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ["ALLOWED_HOSTS"] = "testserver"


def _bare_urlconf() -> str:
    """portal's URLs plus /bench/bare/?bytes=N: a view for the same signed-in user rendering a template of N bytes
    (the baseline)."""
    from django.http import HttpRequest, HttpResponse
    from django.template import engines
    from django.urls import path

    import portal.urls

    template = engines["django"].from_string(
        "<!doctype html><html><body><table>{% for row in rows %}<tr><td>{{ row.0 }}</td><td>{{ row.1 }}</td>"
        "<td>{{ row.2 }}</td></tr>{% endfor %}</table></body></html>")

    def bare(request: HttpRequest) -> HttpResponse:
        # Signed in like the page it is compared with (every portal page is): session and user are loaded.
        assert request.user.is_authenticated
        size = int(request.GET.get("bytes", "10000"))
        rows = [(f"row-{i}", "x" * 40, i) for i in range(max(1, size // 75))]
        return HttpResponse(template.render({"rows": rows}, request))

    module = types.ModuleType("bench_urls")
    module.urlpatterns = [path("bench/bare/", bare), *portal.urls.urlpatterns]  # type: ignore[attr-defined]
    sys.modules["bench_urls"] = module
    return "bench_urls"


def build(workloads: int, projects: int) -> dict:
    """The demo organisation plus a bench department of `projects` projects holding `workloads` rows."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from apps.accounts.models import Role, RoleBinding, Scope
    from apps.cluster.models import ClusterQueueState, CohortState
    from apps.org import services
    from apps.org.demo import seed_demo
    from apps.org.models import PriorityClass
    from apps.workloads.models import Kind, Status, Workload, WorkloadEvent

    if connection.vendor == "sqlite":  # a new file: flush trips over the foreign keys SQLite enforces as it deletes
        database = Path(connection.settings_dict["NAME"])
        connection.close()
        for path in (database, database.with_name(database.name + "-wal"), database.with_name(database.name + "-shm")):
            path.unlink(missing_ok=True)
        call_command("migrate", verbosity=0)
    else:
        call_command("migrate", verbosity=0)
        call_command("flush", interactive=False, verbosity=0)
    seed_demo()
    admin = get_user_model().objects.get(username="admin")
    pool = services.node_pool_create(actor=admin, slug="bench", name="Bench GPU", gpu_resource="nvidia.com/gpu",
                                     capacity=projects * 100, over_subscribable=True,
                                     node_labels={"portal.gpu/pool": "bench"})
    department = services.department_create(actor=admin, slug="bench", name="Bench")
    services.quota_set(actor=admin, node_pool=pool, department=department, deserved=projects * 100, limit=None)
    made = []
    for index in range(projects):
        project = services.project_create(actor=admin, department=department, slug=f"bench-{index:03d}",
                                          name=f"Bench {index:03d}")
        services.quota_set(actor=admin, node_pool=pool, project=project, deserved=100, limit=200)
        made.append(project)
    researcher = get_user_model().objects.create_user("benchuser")
    RoleBinding.objects.create(user=researcher, role=Role.RESEARCHER, scope=Scope.PROJECT, project=made[0])
    lead = get_user_model().objects.create_user("benchlead")
    RoleBinding.objects.create(user=lead, role=Role.TEAM_LEAD, scope=Scope.DEPARTMENT, department=department)
    train = PriorityClass.objects.get(name="train")
    now = timezone.now()
    statuses = [Status.QUEUED] * 3 + [Status.RUNNING] * 2 + [Status.SUCCEEDED] * 5
    rows, positions = [], {}
    for index in range(workloads):
        project = made[index % projects]
        status = statuses[index % len(statuses)]
        owner = researcher if project == made[0] else admin
        position = None
        if status == Status.QUEUED:
            position = positions.get(project.pk, 0)
            positions[project.pk] = position + 1
        rows.append(Workload(
            project=project, owner=owner, kind=Kind.TRAINING, name=f"w{index}", image="pytorch/pytorch:2.4.0",
            node_pool=pool, gpus=random.choice([1, 2, 4]), priority_class=train, preemptible=True, model_label="m",
            data_class="public", status=status, status_reason="Pending" if status == Status.QUEUED else "",
            queue_position_local=position, queue_position_cluster=position, kueue_name=f"job-wl-{index}",
            job_name=f"wl-b{index}", submitted_at=now, admitted_at=None if status == Status.QUEUED else now))
    Workload.objects.bulk_create(rows, batch_size=2000)
    WorkloadEvent.objects.bulk_create([
        WorkloadEvent(workload=row, at=now, from_status="", to_status=Status.SUBMITTING, reason="Submitted")
        for row in Workload.objects.filter(project__department=department).only("pk")], batch_size=5000)
    for project in made:
        for kind in ("guaranteed", "elastic"):
            ClusterQueueState.objects.create(name=f"proj-{project.slug}-bench-{kind}", project=project,
                                             node_pool=pool, guaranteed=kind == "guaranteed", nominal=100,
                                             used=Decimal(60), observed_at=now)
        CohortState.objects.create(name=f"proj-{project.slug}-bench", project=project, node_pool=pool,
                                   department=department, weighted_share=100, observed_at=now)
    from django.db import connection

    from apps.workloads.services import workload_tallies_fold

    workload_tallies_fold()  # as beat does every 10 s: the bulk insert's tally changes folded in
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # statistics and visibility map, as autovacuum would leave them soon
            cursor.execute("VACUUM ANALYZE")
    return _fixture()


def _fixture() -> dict:
    """The built organisation's users, first project and pool, as `build` left them."""
    from django.contrib.auth import get_user_model

    from apps.org.models import NodePool, Project

    users = get_user_model().objects
    projects = list(Project.objects.filter(department__slug="bench").order_by("slug"))
    return {"admin": users.get(username="admin"), "researcher": users.get(username="benchuser"),
            "lead": users.get(username="benchlead"), "project": projects[0], "projects": projects,
            "pool": NodePool.objects.get(slug="bench")}


def built(workloads: int, projects: int) -> bool:
    """Whether the bench database already holds what `build(workloads, projects)` makes (for --reuse)."""
    from django.core.management import call_command
    from django.db.utils import DatabaseError

    from apps.org.models import Project
    from apps.workloads.models import Workload

    call_command("migrate", verbosity=0)
    try:
        return (Project.objects.filter(department__slug="bench").count() == projects
                and Workload.objects.filter(project__department__slug="bench", name__startswith="w").count()
                == workloads
                and not Workload.objects.filter(project__department__slug="bench", name__startswith="lag").exists())
    except DatabaseError:
        return False


def pages(fixture: dict) -> list[tuple[str, str, str]]:
    """(label, user, path) of every list and dashboard that shows rows derived from the workloads."""
    return [("workload list (admin, everything)", "admin", "/workloads/?scope=all"),
            ("workload list (lead, all)", "lead", "/workloads/?scope=all"),
            ("workload list (researcher)", "researcher", "/workloads/"),
            ("project queue", "admin", f"/workloads/projects/{fixture['project'].slug}/queue/"),
            ("quota dashboard (admin)", "admin", "/usage/quota/"),
            ("quota dashboard (researcher)", "researcher", "/usage/quota/"),
            ("cluster queues (admin)", "admin", "/usage/queues/"),
            ("cohorts (admin)", "admin", "/usage/queues/cohorts/"),
            ("held idle (admin)", "admin", "/workloads/held-idle/")]


def profile_pages(fixture: dict, only: str, top: int) -> None:
    """cProfile of each page's request (after a warm-up), sorted by cumulative then own time, and its queries."""
    import cProfile
    import pstats

    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    for label, who, url in pages(fixture):
        if only not in label:
            continue
        client = Client()
        client.force_login(fixture[who])
        client.get(url)
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        print(f"== {label}: {url}")
        for query in queries.captured_queries:
            print(f"  {float(query['time']) * 1000:7.1f} ms  {query['sql'][:200]}")
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(5):
            client.get(url)
        profiler.disable()
        stats = pstats.Stats(profiler).strip_dirs()
        stats.sort_stats("cumulative").print_stats(top)
        stats.sort_stats("tottime").print_stats(top)


def measure_pages(fixture: dict, requests: int, only: str = "") -> list[dict]:
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    results = []
    for label, who, url in pages(fixture):
        if only not in label:
            continue
        client = Client()
        client.force_login(fixture[who])
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        size = len(response.content)
        reset_queries()  # the log is a bounded deque: counting needs room in it
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        query_count = len(queries.captured_queries)  # now: the log moves on with every later request
        page_times, bare_times = [], []
        for _ in range(requests):
            started = time.perf_counter()
            client.get(url)
            page_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            client.get(f"/bench/bare/?bytes={size}")
            bare_times.append(time.perf_counter() - started)
        p50, p95 = statistics.median(page_times), statistics.quantiles(page_times, n=20)[18]
        bare50 = statistics.median(bare_times)
        results.append({"page": label, "bytes": size, "queries": query_count, "p50_ms": p50 * 1000,
                        "p95_ms": p95 * 1000, "bare_p50_ms": bare50 * 1000, "ratio_p50": p50 / bare50})
    return results


def measure_lag(fixture: dict, changes: int, rate: float, *, async_settle: bool = False, heap: bool = False) -> dict:
    """Create Jobs at `rate` per second through kubesim; time until the watcher has moved each row off submitting.
    `heap` traces the Python heap's peak with tracemalloc, which slows every allocation several times over: the
    watcher (in this process) then falls behind at 50 changes/s, so the lag is measured without it unless asked."""
    from apps.org.models import PriorityClass
    from apps.workloads.models import Kind, Status, Workload
    from kubesim.testing import KubesimProcess
    from worker.gateway import Gateway, reset_gateway
    from worker.kueue_sync import desired_from_database, reconcile
    from worker.manifests import job_manifest
    from worker.watcher import Watcher

    workdir = tempfile.mkdtemp(prefix="bench-kubesim-")
    cluster = KubesimProcess(workdir, *(["--async-settle"] if async_settle else []), clock="real").start()
    try:
        gw = Gateway(cluster.api_client())
        reset_gateway(gw)
        reconcile(gw, desired_from_database())
        project, pool = fixture["project"], fixture["pool"]
        train = PriorityClass.objects.get(name="train")
        rows = Workload.objects.bulk_create([
            Workload(project=project, owner=fixture["researcher"], kind=Kind.TRAINING, name=f"lag{i}",
                     image="pytorch/pytorch:2.4.0", node_pool=pool, gpus=1, priority_class=train, preemptible=True,
                     model_label="m", data_class="public", status=Status.SUBMITTING, command=["sleep", "3600"])
            for i in range(changes)])
        if heap:
            tracemalloc.start()
        watcher = Watcher(gw, resync_seconds=3600, positions_seconds=1.0)
        watcher.start()
        created: dict[int, float] = {}
        seen: dict[int, float] = {}
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                pending = [pk for pk in list(created) if pk not in seen]  # a copy: the main thread adds to it
                if pending:
                    now = time.perf_counter()
                    for pk in Workload.objects.filter(pk__in=pending).exclude(status=Status.SUBMITTING).values_list(
                            "pk", flat=True):
                        seen[pk] = now
                time.sleep(0.01)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        interval = 1.0 / rate
        start = time.perf_counter()
        for index, row in enumerate(rows):
            row = Workload.objects.select_related("project__department", "node_pool", "priority_class",
                                                  "owner").get(pk=row.pk)
            row.job_name = f"wl-{row.pk}"
            gw.create(job_manifest(row))
            created[row.pk] = time.perf_counter()
            time.sleep(max(0.0, start + (index + 1) * interval - time.perf_counter()))
        deadline = time.perf_counter() + 30
        while len(seen) < len(created) and time.perf_counter() < deadline:
            time.sleep(0.05)
        stop.set()
        _, peak = tracemalloc.get_traced_memory() if heap else (0, 0)
        tracemalloc.stop()
        watcher.stop()
        lags = sorted(seen[pk] - created[pk] for pk in seen)
        return {"changes": changes, "rate_per_s": rate, "observed": len(lags),
                "lag_p50_ms": statistics.median(lags) * 1000,
                "lag_p95_ms": statistics.quantiles(lags, n=20)[18] * 1000,
                **({"watcher_python_heap_peak_mib": peak / 2**20} if heap else {}),
                "process_max_rss_mib": __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_maxrss
                / 1024}
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--changes", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--async-settle", action="store_true",
                        help="kubesim's controllers settle after a write returns, as a real cluster's do")
    parser.add_argument("--heap", action="store_true",
                        help="trace the watcher's Python heap peak (tracemalloc: slows it several times over)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the bench database when it already holds this many workloads and projects")
    parser.add_argument("--only", default="", help="only the pages whose label contains this")
    parser.add_argument("--profile", type=int, default=0, metavar="TOP",
                        help="print each page's queries and the TOP functions of a cProfile instead of timing")
    args = parser.parse_args()
    machine = report.Machine()
    _use_bench_database()
    import django

    django.setup()
    from django.conf import settings

    settings.ROOT_URLCONF = _bare_urlconf()
    from django.core.signals import request_started
    from django.db import reset_queries

    request_started.disconnect(reset_queries)  # keep the query log across requests so it can be counted
    from django.core.management import call_command
    from django.db import connection

    call_command("collectstatic", "--noinput", verbosity=0)  # the pages name hashed static files, as deployed
    random.seed(7)
    started = time.perf_counter()
    if args.reuse and built(args.workloads, args.projects):
        fixture = _fixture()
        print(f"reused {args.workloads} workloads in {args.projects} projects")
    else:
        fixture = build(args.workloads, args.projects)
        print(f"built {args.workloads} workloads in {args.projects} projects in {time.perf_counter() - started:.1f}s")
    if args.profile:
        profile_pages(fixture, args.only, args.profile)
        return
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    print(f"{'page':38} {'bytes':>8} {'queries':>7} {'p50 ms':>8} {'p95 ms':>8} {'bare p50':>9} {'ratio':>6}")
    figures = []
    for row in measure_pages(fixture, args.requests, args.only):
        print(f"{row['page']:38} {row['bytes']:>8} {row['queries']:>7} {row['p50_ms']:>8.1f} {row['p95_ms']:>8.1f} "
              f"{row['bare_p50_ms']:>9.1f} {row['ratio_p50']:>6.2f}")
        figures.append(report.Figure(f"{row['page']} p50 / bare p50, {args.workloads:,} workloads", "x",
                                     [row["ratio_p50"]], "<= 2"))
    if args.changes > 0:
        lag = measure_lag(fixture, args.changes, args.rate, async_settle=args.async_settle, heap=args.heap)
        print("lag:", ", ".join(f"{key}={value:.1f}" if isinstance(value, float) else f"{key}={value}"
                                for key, value in lag.items()))
        mode = "kubesim settling after the write" if args.async_settle else "kubesim settling before it answers"
        if connection.vendor == "sqlite":
            mode += ", SQLite (as make run)"
        figures.append(report.Figure(f"portal Job created -> row p95, {args.rate:g} changes/s, {args.workloads:,} "
                                     f"workloads, {mode}", "ms", [lag["lag_p95_ms"]], "< 1,000"))
    if figures:
        report.record("live_pages.py", vars(args), figures, machine)


if __name__ == "__main__":
    main()
