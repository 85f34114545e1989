"""What the budget and policy checks add to a submit (issue 31's target: at most 5 ms): `workload_submit` timed
1,000 times without any policy or budget, and 1,000 times with 50 policies and 200 budgets in the organisation.

Builds its own database next to the configured one (PostgreSQL `bench_<name>` or a SQLite file under .run/),
migrates it, seeds the demo organisation (apps.org.demo) and bulk-creates 10 more departments of 20 projects. "With"
means: the organisation's policy, Research's and Vision's (so a submit to Vision merges three scopes, field by field)
and 47 other projects' (50 in all, every field set), and a budget for each of 200 projects (a cost and a GPU-hour
one for some, each with thresholds). Budgets do not enter the submit path today (a spent budget holds new preemptible
work through Kueue's LocalQueues, not at submit); they are there so a later check against them is measured too.

The rounds alternate without / with (the policies and budgets are created and removed between rounds) so the
machine's load, which others share, weighs on both alike. Each submit is timed alone (the project read afresh, as
each request does, outside the timing); the figures are the median and p95 of each side and the difference of the
medians. Tasks go to a queue of the bench's own, purged at the end (no worker runs them). The database is dropped at
the end unless --keep.

Usage: python -m portal.devservices .venv/bin/python bench/submit_checks.py [--submits 1000] [--policies 50]
       [--budgets 200] [--rounds 4] [--keep]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ["CELERY_QUEUE"] = f"portal-bench-submit-checks-{os.getpid()}"  # never a worker's queue

import django
import report as bench_results  # bench/report.py, beside this script

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402

from apps.org.demo import seed_demo  # noqa: E402
from apps.org.models import Budget, Department, NodePool, Policy, Project  # noqa: E402
from apps.workloads import services  # noqa: E402
from apps.workloads.models import Kind  # noqa: E402
from portal.celery import app as celery_app  # noqa: E402

TARGET_MS = 5.0
SCOPE_POLICIES = 3  # the organisation's, Research's, Vision's


def use_bench_database() -> None:
    """Django's test-database machinery with a bench name: create, migrate, and drop it afterwards."""
    database = connection.settings_dict
    test = database.setdefault("TEST", {})
    if connection.vendor == "postgresql":
        test["NAME"] = f"bench_submit_checks_{database['NAME']}"
    else:
        settings.RUN_DIR.mkdir(parents=True, exist_ok=True)
        test["NAME"] = str(settings.RUN_DIR / "bench-submit-checks.sqlite3")


def build() -> list[Project]:
    """The demo organisation and 200 more projects (bulk-created: no audit rows, no Kueue sync)."""
    seed_demo()
    departments = Department.objects.bulk_create([Department(slug=f"bench-{n}", name=f"Bench {n}")
                                                  for n in range(10)])
    Project.objects.bulk_create([
        Project(slug=f"bench-{n}", name=f"Bench {n}", department=departments[n % 10], namespace=f"proj-bench-{n}")
        for n in range(200)])
    return list(Project.objects.filter(slug__startswith="bench-").order_by("pk"))


def govern(others: list[Project], *, policies: int, budgets: int) -> None:
    """The policies and budgets of the "with" side (bulk-created: their rules are the services', not measured)."""
    vision, research = Project.objects.get(slug="vision"), Department.objects.get(slug="research")
    full = {"max_gpus_per_workload": 8, "max_runtime_seconds": 7 * 86400, "default_runtime_seconds": 86400,
            "allowed_images": ["pytorch/*", "nvcr.io/nvidia/*"], "allowed_priority_classes": ["train", "build"],
            "max_notebook_idle_minutes": 120, "required_labels": ["model", "data_class"]}
    rows = [Policy(**full), Policy(department=research, **full), Policy(project=vision, **full)]
    rows += [Policy(project=project, **full) for project in others[:max(0, policies - SCOPE_POLICIES)]]
    Policy.objects.bulk_create(rows[:policies])
    Budget.objects.bulk_create([
        Budget(project=others[n % len(others)], period=Budget.Period.MONTH if n < len(others) else
               Budget.Period.QUARTER, metric=Budget.Metric.GPU_HOURS if n % 3 else Budget.Metric.COST,
               amount=Decimal(100 + n), thresholds=[50, 80, 100],
               on_exceed=Budget.OnExceed.NOTIFY if n % 4 else Budget.OnExceed.HOLD_PREEMPTIBLE)
        for n in range(budgets)])


def ungovern() -> None:
    Policy.objects.all().delete()
    Budget.objects.all().delete()


def submits(count: int, *, start: int) -> list[float]:
    """`count` submissions to Vision by alice, each timed alone (ms)."""
    alice = get_user_model().objects.get(username="alice")
    pool = NodePool.objects.get(slug="h100")
    timings = []
    for n in range(start, start + count):
        project = Project.objects.get(slug="vision")  # afresh, as each request reads it
        began = time.perf_counter()
        services.workload_submit(actor=alice, project=project, kind=Kind.TRAINING, name=f"bench-{n}",
                                 image="pytorch/pytorch:2.4.0", node_pool=pool, gpus=2, model_label="resnet",
                                 data_class="public")
        timings.append((time.perf_counter() - began) * 1000)
    return timings


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submits", type=int, default=1000, help="submits on each side")
    parser.add_argument("--policies", type=int, default=50)
    parser.add_argument("--budgets", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4, help="alternations of without / with")
    parser.add_argument("--keep", action="store_true", help="keep the bench database afterwards")
    args = parser.parse_args()
    machine = bench_results.Machine()
    use_bench_database()
    creation = connection.creation
    old_name = connection.settings_dict["NAME"]
    print(f"database: {connection.vendor}; {args.submits:,} submits a side in {args.rounds} rounds; "
          f"{args.policies} policies, {args.budgets} budgets", flush=True)
    creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        others = build()
        submits(5, start=-5)  # warm caches and connections once
        per_round = max(1, args.submits // args.rounds)
        without: list[float] = []
        governed: list[float] = []
        done = 0
        for _ in range(args.rounds):
            ungovern()
            without += submits(per_round, start=done)
            done += per_round
            govern(others, policies=args.policies, budgets=args.budgets)
            governed += submits(per_round, start=done)
            done += per_round
        print(f"policies {Policy.objects.count()}, budgets {Budget.objects.count()} on the 'with' side")
    finally:
        with celery_app.connection_for_write() as broker:
            broker.default_channel.queue_purge(os.environ["CELERY_QUEUE"])
        if not args.keep:
            creation.destroy_test_db(old_name, verbosity=0)
    added = statistics.median(governed) - statistics.median(without)
    for name, values in (("without", without), ("with", governed)):
        print(f"submit {name:8} median {statistics.median(values):7.2f} ms   p95 {p95(values):7.2f} ms   "
              f"({len(values)} submits)")
    print(f"added by {args.policies} policies and {args.budgets} budgets: {added:+.2f} ms at the median "
          f"(target <= {TARGET_MS:g} ms); load average {os.getloadavg()}")
    size = (f"{len(governed):,} submits a side, 'with' = {args.policies} policies and {args.budgets} budgets "
            f"({connection.vendor})")
    bench_results.record("submit_checks.py", vars(args), [
        bench_results.Figure(f"submit median without policies or budgets, {size}", "ms",
                             [statistics.median(without)]),
        bench_results.Figure(f"submit median with policies and budgets, {size}", "ms", [statistics.median(governed)]),
        bench_results.Figure(f"added by the checks (difference of medians), {size}", "ms", [added],
                             target=f"<= {TARGET_MS:g}"),
    ], machine)


if __name__ == "__main__":
    main()
