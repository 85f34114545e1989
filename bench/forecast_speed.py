"""How long one forecast refresh's replay takes: 1,000 pending workloads over 100 ClusterQueues (target: <= 1 s
on one core).

The organisation: 2 pools (H100 x 250, L40S x 150), 10 departments of 5 projects, each project with a deserved quota on
both pools (5 and 3 cards, limit twice that), so 50 projects x 2 queues (guaranteed, elastic) = 100 ClusterQueues per
pool; pending work goes to the 100 queues of the H100 pool (10 each, a quarter at a higher priority) and both pools
start full with running non-preemptible work inside every project's deserved quota. Runtimes come from "history"
(seeded lognormal samples, 20 per family) or a max runtime, half each. Times `worker.forecast.replay` only (the pure
part the worker task runs after its fixed number of queries).

Usage: python bench/forecast_speed.py [--pending 1000] [--runs 5] [--seed 12]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django
import report as bench_results  # bench/report.py, beside this script

django.setup()

from worker.forecast import Job, expected_runtime, replay  # noqa: E402
from worker.kueue_objects import (  # noqa: E402
    DepartmentSpec,
    OrgSnapshot,
    PoolQuota,
    PoolSpec,
    PriorityClassSpec,
    ProjectSpec,
    desired_objects,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)
POOLS = (("h100", "nvidia.com/gpu", 250), ("l40s", "nvidia.com/l40s", 150))


def organisation() -> tuple[list[dict], list[tuple[str, str]]]:
    departments, projects = [], []
    for d in range(10):
        members = []
        for p in range(5):
            slug = f"p{d}-{p}"
            quotas = {pool: PoolQuota(capacity // 50, capacity // 25, Decimal(1)) for pool, _, capacity in POOLS}
            members.append(ProjectSpec(slug=slug, namespace=f"proj-{slug}", does_not_lend=False, quotas=quotas))
            projects.append((slug, f"proj-{slug}"))
        departments.append(DepartmentSpec(slug=f"d{d}", projects=tuple(members), quotas={
            pool: PoolQuota(capacity // 10, None, Decimal(1)) for pool, _, capacity in POOLS}))
    org = OrgSnapshot(pools=tuple(PoolSpec(slug=s, gpu_resource=r, capacity=c) for s, r, c in POOLS),
                      departments=tuple(departments),
                      priority_classes=(PriorityClassSpec("train", 50, ""), PriorityClassSpec("build", 100, "")))
    return desired_objects(org), projects


def workloads(pending: int, rng: random.Random, projects: list[tuple[str, str]]) -> tuple[list[Job], list[Job]]:
    families = {slug: [rng.lognormvariate(7.5, 0.6) for _ in range(20)] for slug, _ in projects}
    holding: list[Job] = []
    pk = 0
    for pool, resource, capacity in POOLS:
        for slug, namespace in projects:
            # Each project fills its deserved quota with two non-preemptible workloads: the pool is full and nothing
            # borrows, a state Kueue would leave as it is (no pending head can preempt).
            for half in (capacity // 50 // 2, capacity // 50 - capacity // 50 // 2):
                units, guaranteed = half, True
                pk += 1
                runtime = expected_runtime(max_runtime=None if pk % 2 else 3600.0, samples=families[slug],
                                           elapsed=rng.uniform(0, 1800))
                kind = "guaranteed" if guaranteed else "elastic"
                holding.append(Job(id=pk, namespace=namespace, queue=f"{kind}-{pool}", priority=50,
                                   created=NOW - timedelta(hours=2), resource=resource, units_per_pod=units, pods=1,
                                   runtime=runtime, cluster_queue=f"proj-{slug}-{pool}-{kind}", flavor=pool,
                                   reserved_at=NOW - timedelta(seconds=rng.uniform(0, 1800))))
    waiting = []
    for i in range(pending):
        slug, namespace = projects[i % len(projects)]
        kind = "guaranteed" if (i // len(projects)) % 2 == 0 else "elastic"
        pk += 1
        waiting.append(Job(id=pk, namespace=namespace, queue=f"{kind}-h100", priority=rng.choice((50, 50, 50, 100)),
                           created=NOW - timedelta(seconds=pending - i), resource="nvidia.com/gpu",
                           units_per_pod=rng.choice((1, 1, 2, 4)), pods=1,
                           runtime=expected_runtime(max_runtime=None if pk % 2 else 3600.0, samples=families[slug])))
    return holding, waiting


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    machine = bench_results.Machine()
    objects, projects = organisation()
    holding, waiting = workloads(args.pending, random.Random(args.seed), projects)
    queues = {job.queue + job.namespace for job in waiting}
    times, estimated = [], 0
    for _ in range(args.runs):
        started = time.process_time()
        estimates = replay(objects=objects, holding=holding, waiting=waiting, now=NOW)
        times.append(time.process_time() - started)
        estimated = sum(1 for e in estimates.values() if e.likely is not None)
    print(f"pending {len(waiting)} over {len(queues)} ClusterQueues, {len(holding)} running; "
          f"estimated {estimated}, cannot estimate {len(waiting) - estimated}")
    print(f"replay CPU seconds: median {statistics.median(times):.3f}, runs {', '.join(f'{t:.3f}' for t in times)}")
    print(f"load average {os.getloadavg()}")
    bench_results.record("forecast_speed.py", vars(args), [bench_results.Figure(
        f"replay of {len(waiting):,} pending over {len(queues)} ClusterQueues, CPU", "s", times)], machine)


if __name__ == "__main__":
    main()
