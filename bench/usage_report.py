"""GPU-hour reports over a year of ledger history: 100 projects, 500,000 usage intervals.

Builds its own database next to the configured one (PostgreSQL `bench_<name>` or a SQLite file under .run/), migrates
it, bulk-creates the organisation and the ledger, then times, as the installation admin (the whole organisation):

- the monthly report (last full calendar month) grouped by project, department, user and pool, and by month over the
  whole year: apps.usage.reports.usage_report, the selector behind the page, the CSV and the API;
- the report page and its CSV export through the Django test client (view, form, template, streaming);
- "who held the cards" CSV for one pool and one month (every interval, streamed, with its within/over split);
- the ledger writer: opening and closing one interval on a busy project timeline (the split's recompute included);

each several times, reporting the median; then prints the query plan of the report's aggregate (EXPLAIN ANALYZE on
PostgreSQL, EXPLAIN QUERY PLAN on SQLite). The database is dropped at the end unless --keep.

Usage: python -m portal.devservices .venv/bin/python bench/usage_report.py [--intervals 500000] [--projects 100]
       [--runs 7] [--keep] [--reuse]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django
import report as bench_results  # bench/report.py, beside this script

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from apps.accounts.models import Role, RoleBinding, Scope  # noqa: E402
from apps.org.models import Department, NodePool, PriorityClass, Project, Quota  # noqa: E402
from apps.usage import reports, services, split  # noqa: E402
from apps.usage.models import DeservedPeriod, UsageInterval, UsageSlice  # noqa: E402
from apps.workloads.models import Workload  # noqa: E402

POOLS = [("h100", 1, 1, 64), ("a100-mig-3g40gb", 3, 7, 112), ("l40s-shared", 1, 8, 256)]
BATCH = 10_000


def use_bench_database() -> None:
    """Django's test-database machinery with a bench name: create, migrate, and drop it afterwards."""
    database = connection.settings_dict
    test = database.setdefault("TEST", {})
    if connection.vendor == "postgresql":
        test["NAME"] = f"bench_{database['NAME']}"
    else:
        settings.RUN_DIR.mkdir(parents=True, exist_ok=True)
        test["NAME"] = str(settings.RUN_DIR / "bench-usage.sqlite3")


def build(*, intervals: int, projects: int, seed: int = 6) -> None:
    """The organisation and a year of ledger, bulk-created (no services: no audit rows, no Kueue sync)."""
    rng = random.Random(seed)
    users = get_user_model().objects
    admin = users.create(username="admin", is_staff=True, is_superuser=True)
    RoleBinding.objects.create(user=admin, role=Role.ADMIN, scope=Scope.EVERYTHING)
    train = PriorityClass.objects.create(name="train", value=50, preemptible=True)
    pools = NodePool.objects.bulk_create([
        NodePool(slug=slug, name=slug, gpu_resource="nvidia.com/gpu", capacity=capacity,
                 card_fraction_numerator=numerator, card_fraction_denominator=denominator,
                 price_per_card_hour=None if slug == "l40s-shared" else 2)
        for slug, numerator, denominator, capacity in POOLS])
    departments = Department.objects.bulk_create([Department(slug=f"dept-{n}", name=f"Department {n}")
                                                  for n in range(10)])
    project_rows = Project.objects.bulk_create([
        Project(slug=f"proj-{n}", name=f"Project {n}", department=departments[n % 10], namespace=f"proj-{n}")
        for n in range(projects)])
    Quota.objects.bulk_create([Quota(node_pool=pool, project=project, deserved=rng.randint(0, 4), limit=None)
                               for project in project_rows for pool in pools])
    people = users.bulk_create([get_user_model()(username=f"user-{n}") for n in range(projects * 3)])
    now = timezone.now().replace(microsecond=0)
    year_ago = now - timedelta(days=365)
    per_workload = 5
    workloads_needed = (intervals + per_workload - 1) // per_workload
    started = time.perf_counter()
    workloads = []
    for n in range(workloads_needed):
        project = project_rows[n % projects]
        workloads.append(Workload(
            project=project, owner=people[(n % projects) * 3 + rng.randint(0, 2)], kind="training", name=f"w{n}",
            image="pytorch/pytorch:2.4.0", node_pool=pools[n % 3], gpus=rng.choice((1, 1, 2, 4, 8)),
            priority_class=train, preemptible=rng.random() < 0.6, model_label=rng.choice(("llama", "resnet", "bert")),
            data_class=rng.choice(("public", "internal", "pii")), status="succeeded"))
    workloads = Workload.objects.bulk_create(workloads, batch_size=BATCH)
    print(f"  {len(workloads):,} workloads in {time.perf_counter() - started:.1f}s", flush=True)
    started = time.perf_counter()
    pool_by_id = {pool.pk: pool for pool in pools}
    department_of = {project.pk: project.department_id for project in project_rows}
    made = 0
    batch: list[UsageInterval] = []
    for work in workloads:
        moment = year_ago + timedelta(seconds=rng.randint(0, 365 * 86400))
        for _ in range(per_workload):
            if made >= intervals:
                break
            length = timedelta(seconds=int(rng.expovariate(1 / (4 * 3600))) + 60)
            end = moment + length
            open_now = end >= now
            pool = pool_by_id[work.node_pool_id]
            batch.append(UsageInterval(
                workload=work, project_id=work.project_id, department_id=department_of[work.project_id],
                user_id=work.owner_id, node_pool_id=work.node_pool_id, units=work.gpus,
                card_fraction_numerator=pool.card_fraction_numerator,
                card_fraction_denominator=pool.card_fraction_denominator,
                queue="elastic" if work.preemptible else "guaranteed", model_label=work.model_label,
                data_class=work.data_class, started_at=min(moment, now - timedelta(seconds=1)),
                ended_at=None if open_now else end, end_reason="" if open_now else "Succeeded"))
            made += 1
            if open_now:
                break
            moment = end + timedelta(seconds=rng.randint(60, 6 * 3600))  # preempted, requeued, admitted again
        if len(batch) >= BATCH:
            UsageInterval.objects.bulk_create(batch)
            batch = []
    UsageInterval.objects.bulk_create(batch)
    print(f"  {made:,} intervals in {time.perf_counter() - started:.1f}s", flush=True)
    started = time.perf_counter()
    backfill_split()
    print(f"  {DeservedPeriod.objects.count():,} deserved periods and {UsageSlice.objects.count():,} slices "
          f"(the within-deserved split) in {time.perf_counter() - started:.1f}s", flush=True)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE usage_usageinterval")
            cursor.execute("VACUUM ANALYZE usage_usageslice")
    else:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def backfill_split() -> None:
    """What migration usage 0006 does for an existing ledger: a deserved period per project quota (quotas were
    bulk-created, so no receiver wrote them), in force all along like the generated ledger's, then every project
    timeline's slices, through the ledger service."""
    from django.db import transaction

    DeservedPeriod.objects.bulk_create([
        DeservedPeriod(project_id=quota.project_id, department_id=quota.project.department_id,
                       node_pool_id=quota.node_pool_id, deserved=quota.deserved, started_at=split.BEGINNING,
                       in_force_from=split.BEGINNING)
        for quota in Quota.objects.filter(project__isnull=False).select_related("project")])
    for project_id, pool_id in UsageInterval.objects.values_list("project_id", "node_pool_id").distinct().order_by():
        with transaction.atomic():
            services.usage_timeline_refresh(project_id=project_id, node_pool_id=pool_id, since=split.BEGINNING)


def median_ms(runs: int, action) -> tuple[float, list[float]]:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings), timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intervals", type=int, default=500_000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the bench database afterwards")
    parser.add_argument("--reuse", action="store_true", help="reuse a kept bench database instead of rebuilding")
    args = parser.parse_args()
    machine = bench_results.Machine()

    use_bench_database()
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    # Pages render without a collectstatic manifest, as in the tests.
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    creation = connection.creation
    old_name = connection.settings_dict["NAME"]
    print(f"database: {connection.vendor}, {args.intervals:,} intervals, {args.projects} projects", flush=True)
    creation.create_test_db(verbosity=0, autoclobber=True, keepdb=args.reuse)
    try:
        if not (args.reuse and UsageInterval.objects.exists()):
            build(intervals=args.intervals, projects=args.projects)
        run(args, machine)
    finally:
        if not args.keep:
            creation.destroy_test_db(old_name, verbosity=0)


def run(args: argparse.Namespace, machine: bench_results.Machine) -> None:
    admin = get_user_model().objects.get(username="admin")
    today = timezone.localdate()

    def months_back(count: int) -> reports.Window:
        index = today.year * 12 + today.month - 1 - count
        return reports.month_window(index // 12, index % 12 + 1)

    last_month, older = months_back(1), months_back(8)
    year = reports.Window(timezone.now() - timedelta(days=365), timezone.now())
    counted = UsageInterval.objects.filter(reports.overlapping(last_month, timezone.now())).count()
    print(f"ledger rows: {UsageInterval.objects.count():,}; in {last_month.start:%Y-%m}: {counted:,}")
    month = last_month.start.strftime("%Y-%m")
    client = Client()
    client.force_login(admin)
    h100 = NodePool.objects.get(slug="h100")

    def report(group: reports.Group, window: reports.Window):
        return lambda: reports.usage_report(user=admin, group=group, window=window)

    def page(url: str):
        def fetch() -> None:
            response = client.get(url)
            assert response.status_code == 200, response.status_code
            b"".join(response.streaming_content) if response.streaming else response.content
        return fetch

    cases = [
        (f"report {month} by project (selector)", report(reports.Group.PROJECT, last_month)),
        (f"report {month} by department", report(reports.Group.DEPARTMENT, last_month)),
        (f"report {month} by user", report(reports.Group.USER, last_month)),
        (f"report {month} by pool", report(reports.Group.POOL, last_month)),
        (f"report {older.start:%Y-%m} by project (8 months back)", report(reports.Group.PROJECT, older)),
        ("report last 365 days by month", report(reports.Group.MONTH, year)),
        (f"page /usage/reports/?month={month}", page(f"/usage/reports/?month={month}&group=project")),
        (f"CSV /usage/reports.csv?month={month} (project)", page(f"/usage/reports.csv?month={month}&group=project")),
        (f"CSV /usage/reports.csv?month={month} (user)", page(f"/usage/reports.csv?month={month}&group=user")),
        (f"API /api/v1/usage/ {month} by project", page(
            f"/api/v1/usage/?group_by=project&start={last_month.start:%Y-%m-%d}&end={last_month.end:%Y-%m-%d}")),
        (f"holders CSV h100 {month} (every interval)", page(
            f"/usage/holders.csv?node_pool=h100&start={last_month.start:%Y-%m-%dT%H:%M}"
            f"&end={last_month.end:%Y-%m-%dT%H:%M}")),
    ]
    # The ledger writer on the busiest H100 timeline: open an interval an hour ago, close it now (each run its own
    # workload), with the split recomputed from the change on, as the watcher's transitions do.
    busy = (UsageInterval.objects.filter(node_pool=h100).values("project_id").annotate(n=Count("pk"))
            .order_by("-n").values_list("project_id", flat=True).first())
    template = Workload.objects.filter(project_id=busy, node_pool=h100).select_related("project", "node_pool").first()
    spare = iter(Workload.objects.bulk_create([
        Workload(project_id=busy, owner_id=template.owner_id, kind="training", name=f"bench-{n}",
                 image=template.image, node_pool=h100, gpus=4, priority_class_id=template.priority_class_id,
                 preemptible=True, model_label="bench", data_class="public", status="running")
        for n in range(args.runs + 1)]))

    def ledger_write() -> None:
        work = Workload.objects.select_related("project", "node_pool").get(pk=next(spare).pk)
        moment = timezone.now()
        services.usage_interval_open(workload=work, at=moment - timedelta(hours=1))
        services.usage_interval_close(workload_id=work.pk, at=moment, reason="Succeeded")

    cases.append(("ledger write: open + close one interval (split included)", ledger_write))
    print(f"\n{'case':58} {'median ms':>10}   runs (ms)")
    figures = []
    for name, action in cases:
        action()  # warm caches once
        median, timings = median_ms(args.runs, action)
        print(f"{name:58} {median:10.1f}   {' '.join(f'{t:.0f}' for t in timings)}", flush=True)
        figures.append(bench_results.Figure(f"{name}, {args.intervals:,} intervals ({connection.vendor})", "ms",
                                            list(timings)))
    bench_results.record("usage_report.py", vars(args), figures, machine)
    rows = len(reports.usage_report(user=admin, group=reports.Group.USER, window=last_month).rows)
    held = UsageInterval.objects.filter(reports.overlapping(last_month, timezone.now()), node_pool=h100).count()
    print(f"\nrows: {rows} users in the month's report; {held:,} h100 intervals in the holders CSV")

    query, _ = reports.grouped_ledger(user=admin, group=reports.Group.PROJECT, window=last_month,
                                      filters=reports.Filters(), now=timezone.now())
    print("\nquery plan of the monthly report's aggregate (whole organisation):")
    if connection.vendor == "postgresql":
        print(query.explain(analyze=True, buffers=True))
    else:
        print(query.explain())
    deptadmin, _ = get_user_model().objects.get_or_create(username="bench-deptadmin")
    RoleBinding.objects.get_or_create(user=deptadmin, role=Role.DEPARTMENT_ADMIN, scope=Scope.DEPARTMENT,
                                      department=Department.objects.get(slug="dept-3"))
    query, _ = reports.grouped_ledger(user=deptadmin, group=reports.Group.PROJECT, window=last_month,
                                      filters=reports.Filters(), now=timezone.now())
    median, _ = median_ms(args.runs, lambda: reports.usage_report(user=deptadmin, group=reports.Group.PROJECT,
                                                                  window=last_month))
    print(f"\nthe same report for a department admin (one department of ten): median {median:.1f} ms; plan:")
    print(query.explain(analyze=True) if connection.vendor == "postgresql" else query.explain())
    query, _ = reports.grouped_ledger(user=admin, group=reports.Group.PROJECT, window=older,
                                      filters=reports.Filters(), now=timezone.now())
    print(f"\nthe whole organisation's report for {older.start:%Y-%m} (most of the ledger ended after that month "
          "began, so PostgreSQL reads the table in parallel rather than through the ended_at index):")
    print(query.explain(analyze=True) if connection.vendor == "postgresql" else query.explain())


if __name__ == "__main__":
    main()
