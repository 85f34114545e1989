"""Use over time for a year of ledger and hourly utilisation over 200 projects (target: the dashboard under 500 ms on
PostgreSQL, issue 31).

Builds its own database (PostgreSQL `bench_overtime_<name>` next to the configured one, or a SQLite file under
.run/) with usage_report.py's organisation and ledger (--projects in 10 departments, 3 pools, --intervals spread over
the last year, the within-deserved split computed by the ledger service) and, as utilisation_report.py makes them,
the hourly utilisation rows the worker would have written for every interval of the year (one per workload and clock
hour held). Then times, as the installation admin (the whole organisation) and with PROMETHEUS_URL set (the series
read the hourly rows too; nothing talks to Prometheus), each the median of --runs after one warm-up:

- the selector (apps.usage.reports.use_over_time) for the last 365 days by day, and for the last 92 days by hour
  (the most buckets the form allows);
- the dashboard page for the year by day (view, form, fairness section, template), its CSV and the API.

Usage: python -m portal.devservices .venv/bin/python bench/over_time_report.py [--intervals 100000]
       [--projects 200] [--runs 7] [--keep] [--reuse]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report as bench_results  # bench/report.py, beside this script
import usage_report  # the ledger builder; it runs django.setup()
import utilisation_report  # the hourly utilisation builder
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.utils import timezone

from apps.usage import reports
from apps.usage.models import UsageSlice, UtilisationHour
from apps.usage.services import usage_days_rebuild

TARGET_MS = 500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intervals", type=int, default=100_000)
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the bench database afterwards")
    parser.add_argument("--reuse", action="store_true", help="reuse a kept bench database instead of rebuilding")
    args = parser.parse_args()
    machine = bench_results.Machine()

    database = connection.settings_dict
    test = database.setdefault("TEST", {})
    if connection.vendor == "postgresql":
        test["NAME"] = f"bench_overtime_{database['NAME']}"
    else:
        settings.RUN_DIR.mkdir(parents=True, exist_ok=True)
        test["NAME"] = str(settings.RUN_DIR / "bench-over-time.sqlite3")
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    creation = connection.creation
    old_name = database["NAME"]
    print(f"database: {connection.vendor}, {args.intervals:,} intervals, {args.projects} projects", flush=True)
    creation.create_test_db(verbosity=0, autoclobber=True, keepdb=args.reuse)
    try:
        if not (args.reuse and UtilisationHour.objects.exists()):
            usage_report.build(intervals=args.intervals, projects=args.projects)
            started = time.perf_counter()
            now = timezone.now()
            made = utilisation_report.build_utilisation(reports.Window(now - timedelta(days=366), now))
            print(f"  {made:,} hourly utilisation rows in {time.perf_counter() - started:.1f}s", flush=True)
            started = time.perf_counter()  # bulk-created past the service: the daily rows as 0011 makes them
            rows = usage_days_rebuild()
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("VACUUM ANALYZE usage_usageday")
            print(f"  {rows:,} daily rows (UsageDay) in {time.perf_counter() - started:.1f}s", flush=True)
        run(args, machine)
    finally:
        if not args.keep:
            creation.destroy_test_db(old_name, verbosity=0)


def run(args: argparse.Namespace, machine: bench_results.Machine) -> None:
    admin = get_user_model().objects.get(username="admin")
    browser = Client()
    browser.force_login(admin)
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"  # read by the reports only
    today = timezone.localdate()
    year = f"start={today - timedelta(days=364)}&end={today}&granularity=day"
    quarter = f"start={today - timedelta(days=91)}&end={today}&granularity=hour"

    def window(days: int) -> reports.Window:
        end = timezone.make_aware(timezone.datetime.combine(today + timedelta(days=1), timezone.datetime.min.time()))
        return reports.Window(end - timedelta(days=days), end)

    print(f"{UsageSlice.objects.count():,} slices, {UtilisationHour.objects.count():,} hourly utilisation rows",
          flush=True)
    cases = {
        "selector, 365 days by day": lambda: reports.use_over_time(
            user=admin, window=window(365), granularity=reports.Granularity.DAY),
        "selector, 92 days by hour": lambda: reports.use_over_time(
            user=admin, window=window(92), granularity=reports.Granularity.HOUR),
        "dashboard page, 365 days by day": lambda: _ok(browser.get(f"/usage/over-time/?{year}")),
        "dashboard page, 92 days by hour": lambda: _ok(browser.get(f"/usage/over-time/?{quarter}")),
        "CSV, 365 days by day": lambda: b"".join(_ok(browser.get(f"/usage/over-time.csv?{year}")).streaming_content),
        "API, 365 days by day": lambda: _ok(browser.get(f"/api/v1/usage/over-time/?{year}")),
    }
    print("| case | median ms | min | max |")
    print("|---|---:|---:|---:|")
    figures = []
    for name, action in cases.items():
        action()  # warm up
        median, timings = usage_report.median_ms(args.runs, action)
        print(f"| {name} | {median:.1f} | {min(timings):.1f} | {max(timings):.1f} |", flush=True)
        figures.append(bench_results.Figure(
            f"{name}, {args.intervals:,} intervals / {args.projects} projects ({connection.vendor})", "ms", timings,
            target=f"<= {TARGET_MS}" if name.startswith("dashboard page, 365") else ""))
    result = reports.use_over_time(user=admin, window=window(365), granularity=reports.Granularity.DAY)
    shown = reports.usage_report(user=admin, group=reports.Group.POOL, window=result.window, now=result.now)
    for series in result.pools:
        expected = next(row.gpu_hours for row in shown.rows if row.key == series.pool.pk)
        assert abs(series.card_hours - expected) <= 1e-6 * max(1.0, expected), (series.pool.slug, expected)
    print(f"checked: each pool's daily series adds up to the showback GPU-hours "
          f"({sum(series.card_hours for series in result.pools):,.0f} in all); {machine.uptime()}")
    bench_results.record("over_time_report.py", vars(args), figures, machine)


def _ok(response):  # type: ignore[no-untyped-def]
    assert response.status_code == 200, response.status_code
    return response


if __name__ == "__main__":
    main()
