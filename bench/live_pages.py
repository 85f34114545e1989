"""Live-state pages and the watcher under load.

10,000 workloads across 100 projects: p50/p95 server time and SQL query count of the workload list, the project
queue and the quota dashboard, each beside a bare Django view rendering a template of the same size in the same
run (target: every page within 2x of it); then cluster-change-to-database lag at 50 changes per second through
kubesim (real clock, separate process; `--rate`, `--async-settle` for kubesim's background settling) and the real
watcher as deployed, a process of its own (`manage.py watch_cluster`; target: p95 under 1 s), split at the moment
Kueue's Workload for the Job exists, with the watcher's hops from its /metrics and its memory (`--heap` runs the
watcher in this process instead, to trace its Python heap peak with tracemalloc, which slows it several times over
and so is never on while the lag is what counts).

It uses its own database (`<name>_bench` next to DATABASE_URL's, created if missing; SQLite file otherwise) and
never touches development or test data.

Usage: python -m portal.devservices .venv/bin/python bench/live_pages.py [--workloads 10000] [--projects 100]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import types
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(pid: int) -> tuple[float, float]:
    """The process's resident memory now and its peak (VmRSS, VmHWM), in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def scrape(port: int) -> dict[tuple[str, str], float]:
    """The watcher's histogram buckets on /metrics: {(metric and labels, le): cumulative count}."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith("portal_watcher_") and "_bucket{" in line:
            head, value = line.rsplit(" ", 1)
            labels = head[head.index("{") + 1:-1].split(",")
            le = next(label for label in labels if label.startswith("le="))
            rest = ",".join(label for label in labels if not label.startswith("le="))
            found[(head[:head.index("{")] + "{" + rest + "}", le[4:-1])] = float(value)
    return found


def hop_summary(before: dict, after: dict) -> list[str]:
    """Per watcher histogram, the share of this phase's observations within 0.25 s, 0.5 s and 1 s."""
    lines = []
    for series in sorted({series for series, _ in after}):
        total = after.get((series, "+Inf"), 0) - before.get((series, "+Inf"), 0)
        if total <= 0:
            continue
        shares = []
        for le in ("0.25", "0.5", "1.0"):
            within = after.get((series, le), 0) - before.get((series, le), 0)
            shares.append(f"<= {float(le):g} s {within / total:.0%}")
        lines.append(f"  {series}: {total:.0f} observations; " + ", ".join(shares))
    return lines


def watch_arrivals(api_client: Any, gw: Any, key_of: Callable[[str], Any], arrived: dict[Any, float],
                   done: threading.Event) -> None:
    """Start a watch of the bench's own on Kueue Workloads from now on, in a thread: `arrived[key]` is when the first
    Workload whose owner's name gives a key (`key_of`, None for others) showed in it, until `done`."""
    from kubernetes import client, watch
    from urllib3.exceptions import ProtocolError

    listed = gw.raw_get("/apis/kueue.x-k8s.io/v1beta2/workloads", query=[("limit", 1)])["metadata"]["resourceVersion"]

    def run() -> None:
        stream = watch.Watch()
        try:
            for event in stream.stream(client.CustomObjectsApi(api_client).list_cluster_custom_object,
                                       "kueue.x-k8s.io", "v1beta2", "workloads", resource_version=listed,
                                       timeout_seconds=600):
                owners = event["object"].get("metadata", {}).get("ownerReferences") or [{}]
                if (key := key_of(owners[0].get("name", ""))) is not None:
                    arrived.setdefault(key, time.perf_counter())
                if done.is_set():
                    stream.stop()
        except ProtocolError:
            if not done.is_set():
                raise  # the cluster ended the stream while the changes still came: the split would be wrong

    threading.Thread(target=run, daemon=True).start()


@contextlib.contextmanager
def watcher_process(kubeconfig: str, *, positions_seconds: float) -> Iterator[tuple[subprocess.Popen, int]]:
    """The watcher as it runs in production: `manage.py watch_cluster`, a process of its own against the cluster's
    kubeconfig and the bench database, so the bench's own threads (creating Jobs, polling rows) do not share its
    interpreter. Yields the process and its metrics port once its first sync is done."""
    metrics_port = free_port()
    environment = {**os.environ, "KUBECONFIG": kubeconfig, "WATCHER_METRICS_PORT": str(metrics_port),
                   "LEADER_ELECTION": "false"}
    watcher = subprocess.Popen(
        [sys.executable, "manage.py", "watch_cluster", "--resync-seconds", "3600", "--positions-seconds",
         str(positions_seconds)], cwd=ROOT, env=environment, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:  # synced: its readiness probe answers 200
            if watcher.poll() is not None:
                raise SystemExit(f"the watcher exited with {watcher.returncode}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the watcher did not finish its first sync within 120 s") from None
                time.sleep(0.1)
        yield watcher, metrics_port
    finally:
        watcher.terminate()
        watcher.wait(timeout=30)


def measure_lag(fixture: dict, changes: int, rate: float, *, async_settle: bool = False, heap: bool = False) -> dict:
    """Create Jobs at `rate` per second through kubesim; time until the watcher has moved each row off submitting.

    The watcher runs as deployed, a process of its own (`watcher_process`); its hops come from its /metrics.
    `heap` instead runs it in this process and traces the Python heap's peak with tracemalloc, which slows every
    allocation several times over: the watcher then falls behind at 50 changes/s, so the lag is measured without it
    unless asked."""
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
                     model_label="m", data_class="public", status=Status.SUBMITTING, command=["sleep", "3600"],
                     job_name=f"lag-{i}")
            for i in range(changes)])
        manifests = {row.pk: job_manifest(row) for row in Workload.objects.select_related(
            "project__department", "node_pool", "priority_class", "owner").filter(pk__in=[row.pk for row in rows])}
        with contextlib.ExitStack() as stack:
            if heap:
                tracemalloc.start()
                watcher = Watcher(gw, resync_seconds=3600, positions_seconds=1.0)
                watcher.start()
                stack.callback(watcher.stop)
                process, metrics_port = None, 0
            else:
                process, metrics_port = stack.enter_context(
                    watcher_process(cluster.kubeconfig_path, positions_seconds=1.0))
            lags, split, hops = _lag_run(gw, cluster.api_client(), manifests, rate, metrics_port)
            _, peak = tracemalloc.get_traced_memory() if heap else (0, 0)
            tracemalloc.stop()
            watcher_rss = rss_mib(process.pid)[1] if process is not None else 0.0
        return {"changes": changes, "rate_per_s": rate, "observed": len(lags),
                "lag_p50_ms": statistics.median(lags) * 1000,
                "lag_p95_ms": statistics.quantiles(lags, n=20)[18] * 1000,
                **{f"{part}_p95_ms": statistics.quantiles(values, n=20)[18] * 1000
                   for part, values in split.items() if len(values) > 1}, "hops": hops,
                **({"watcher_python_heap_peak_mib": peak / 2**20} if heap else {"watcher_rss_peak_mib": watcher_rss})}
    finally:
        cluster.stop()


def _lag_run(gw: Any, api_client: Any, manifests: dict[int, dict], rate: float,
             metrics_port: int) -> tuple[list[float], dict[str, list[float]], list[str]]:
    """Create the Jobs on schedule from a pool (a slow create does not lower the rate of the others) while a poller
    looks for their rows every 10 ms on its own connection, as a page would; returns each row's lag in seconds, the
    lag split at the moment a watch of the bench's own sees the Job's Kueue Workload (the cluster's part, kubesim's
    Kueue making it; the watcher's part, reading it into the row: the row moves off submitting once Kueue has the
    Job's Workload) and, with a watcher process, its hops during the run."""
    from django.db import connection

    from apps.workloads.models import Status, Workload

    created: dict[int, float] = {}
    seen: dict[int, float] = {}
    arrived: dict[int, float] = {}
    by_name = {manifest["metadata"]["name"]: pk for pk, manifest in manifests.items()}
    stop = threading.Event()
    def poll() -> None:
        while not stop.is_set():
            pending = [pk for pk in list(created) if pk not in seen]  # a copy: the creators add to it
            if pending:
                now = time.perf_counter()
                for pk in Workload.objects.filter(pk__in=pending).exclude(status=Status.SUBMITTING).values_list(
                        "pk", flat=True):
                    seen[pk] = now
            time.sleep(0.01)
        connection.close()

    def create(pk: int) -> None:
        gw.create(manifests[pk])
        created[pk] = time.perf_counter()  # the Job exists in the cluster from here on

    before = scrape(metrics_port) if metrics_port else {}
    watch_arrivals(api_client, gw, by_name.get, arrived, stop)
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    interval = 1.0 / rate
    start = time.perf_counter()
    with ThreadPoolExecutor(8) as creators:
        for index, pk in enumerate(manifests):
            time.sleep(max(0.0, start + index * interval - time.perf_counter()))
            creators.submit(create, pk)
    deadline = time.perf_counter() + 30
    while len(seen) < len(created) and time.perf_counter() < deadline:
        time.sleep(0.05)
    stop.set()
    poller.join()
    hops = hop_summary(before, scrape(metrics_port)) if metrics_port else []
    split = {"cluster_part": sorted(arrived[pk] - created[pk] for pk in seen if pk in arrived and pk in created),
             "watcher_part": sorted(seen[pk] - arrived[pk] for pk in seen if pk in arrived)}
    return sorted(seen[pk] - created[pk] for pk in seen), split, hops


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
        hops = lag.pop("hops")
        print("lag:", ", ".join(f"{key}={value:.1f}" if isinstance(value, float) else f"{key}={value}"
                                for key, value in lag.items()))
        if hops:
            print("the watcher's hops during the changes (its /metrics):", *hops, sep="\n")
        mode = "kubesim settling after the write" if args.async_settle else "kubesim settling before it answers"
        if connection.vendor == "sqlite":
            mode += ", SQLite (as make run)"
        figures.append(report.Figure(f"portal Job created -> row p95, {args.rate:g} changes/s, {args.workloads:,} "
                                     f"workloads, {mode}", "ms", [lag["lag_p95_ms"]], "< 1,000"))
    if figures:
        report.record("live_pages.py", vars(args), figures, machine)


if __name__ == "__main__":
    main()
