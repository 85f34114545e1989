"""Showback with GPU utilisation for 100 projects over a month, against showback without it (target: <= 2x).

Builds its own database (PostgreSQL `bench_util_<name>` next to the configured one, or a SQLite file under .run/),
with usage_report.py's organisation and ledger (100 projects, 10 departments, 3 pools; --intervals spread over a
year), then the hourly utilisation rows the worker would have written for every interval that held cards in the last
full calendar month (one row per workload and clock hour it held, as apps.usage.services.utilisation_hours_add
makes them). Times, as the installation admin, each case with PROMETHEUS_URL empty (no utilisation: the report
never reads the hourly rows) and set (one more aggregate query over them): the report selector by project, the
showback page, its CSV and GET /api/v1/usage/; prints medians and the ratio.

Usage: python -m portal.devservices .venv/bin/python bench/utilisation_report.py [--intervals 100000] [--runs 7]
       [--keep] [--reuse]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import UTC, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report as bench_results  # bench/report.py, beside this script
import usage_report  # the ledger builder; it runs django.setup()
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.utils import timezone

from apps.usage import reports
from apps.usage.models import UsageInterval, UtilisationHour

BATCH = 10_000


def last_month() -> reports.Window:
    today = timezone.localdate()
    index = today.year * 12 + today.month - 2
    return reports.month_window(index // 12, index % 12 + 1)


def build_utilisation(window: reports.Window, seed: int = 16) -> int:
    """Hourly rows for every interval holding cards in the window: utilisation drawn per workload (some idle)."""
    rng = random.Random(seed)
    batch: list[UtilisationHour] = []
    made = 0
    seen: set[tuple[int, object]] = set()
    intervals = UsageInterval.objects.filter(reports.overlapping(window, timezone.now())).order_by("pk")
    for row in intervals.iterator(chunk_size=5000):
        busy = rng.choice((0.0, 0.02, 0.4, 0.8, 0.95))
        card = row.units * row.card_fraction_numerator / row.card_fraction_denominator
        hour = max(row.started_at, window.start).astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        end = min(row.ended_at or window.end, window.end)
        while hour < end:
            if (row.workload_id, hour) not in seen:
                seen.add((row.workload_id, hour))
                util = min(1.0, max(0.0, rng.gauss(busy, 0.05)))
                batch.append(UtilisationHour(
                    workload_id=row.workload_id, project_id=row.project_id, department_id=row.department_id,
                    user_id=row.user_id, node_pool_id=row.node_pool_id, hour=hour, observed_card_hours=card,
                    used_card_hours=card * util, idle_card_hours=card if util < 0.05 else 0.0))
                made += 1
            hour += timedelta(hours=1)
            if len(batch) >= BATCH:
                UtilisationHour.objects.bulk_create(batch)
                batch = []
    UtilisationHour.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE usage_utilisationhour" if connection.vendor == "postgresql" else "ANALYZE")
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intervals", type=int, default=100_000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    machine = bench_results.Machine()

    database = connection.settings_dict
    test = database.setdefault("TEST", {})
    if connection.vendor == "postgresql":
        test["NAME"] = f"bench_util_{database['NAME']}"
    else:
        settings.RUN_DIR.mkdir(parents=True, exist_ok=True)
        test["NAME"] = str(settings.RUN_DIR / "bench-utilisation.sqlite3")
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    creation = connection.creation
    old_name = database["NAME"]
    print(f"database: {connection.vendor}, {args.intervals:,} intervals, {args.projects} projects", flush=True)
    creation.create_test_db(verbosity=0, autoclobber=True, keepdb=args.reuse)
    try:
        window = last_month()
        if not (args.reuse and UtilisationHour.objects.exists()):
            usage_report.build(intervals=args.intervals, projects=args.projects)
            started = time.perf_counter()
            made = build_utilisation(window)
            print(f"  {made:,} hourly utilisation rows for {window.start:%Y-%m} in "
                  f"{time.perf_counter() - started:.1f}s", flush=True)
        run(args, window, machine)
    finally:
        if not args.keep:
            creation.destroy_test_db(old_name, verbosity=0)


def run(args: argparse.Namespace, window: reports.Window, machine: bench_results.Machine) -> None:
    admin = get_user_model().objects.get(username="admin")
    browser = Client()
    browser.force_login(admin)
    month = f"{timezone.localtime(window.start):%Y-%m}"
    overlapping = UsageInterval.objects.filter(reports.overlapping(window, timezone.now())).count()
    rows = UtilisationHour.objects.filter(hour__gte=window.start, hour__lt=window.end).count()
    print(f"{month}: {overlapping:,} intervals overlap it, {rows:,} hourly utilisation rows", flush=True)
    cases = {
        "report by project (selector)": lambda: reports.usage_report(user=admin, group=reports.Group.PROJECT,
                                                                     window=window),
        "showback page by project": lambda: browser.get(f"/usage/reports/?month={month}&group=project"),
        "CSV by project": lambda: b"".join(browser.get(
            f"/usage/reports.csv?month={month}&group=project").streaming_content),
        "API group_by=project": lambda: browser.get(
            f"/api/v1/usage/?group_by=project&start={window.start.date()}&end={window.end.date()}"),
    }
    print("| case | without utilisation (ms) | with utilisation (ms) | ratio |")
    print("|---|---:|---:|---:|")
    figures = []
    for name, action in cases.items():
        medians = []
        for url in ("", "http://127.0.0.1:9"):
            settings.PROMETHEUS_URL = url  # read by the report only: nothing here talks to Prometheus
            action()  # warm up
            medians.append(usage_report.median_ms(args.runs, action)[0])
        print(f"| {name} | {medians[0]:.1f} | {medians[1]:.1f} | {medians[1] / medians[0]:.2f}x |", flush=True)
        figures.append(bench_results.Figure(f"{name} with utilisation / without, {args.intervals:,} intervals",
                                            "x", [medians[1] / medians[0]]))
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    report = reports.usage_report(user=admin, group=reports.Group.PROJECT, window=window)
    assert len(report.rows) == args.projects and report.total.measured_hours > 0
    print(f"checked: {len(report.rows)} project rows, mean utilisation {report.total.utilisation:.1%}, "
          f"{report.total.idle_hours:,.0f} allocated-but-idle GPU-hours")
    bench_results.record("utilisation_report.py", vars(args), figures, machine)


if __name__ == "__main__":
    main()
