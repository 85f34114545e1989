"""How good the start forecast is: drive kubesim's Kueue scheduling core with a seeded mix and compare, for every
workload, the forecast made when it was submitted with when it actually started (target: the real start inside the
range for >= 80 % of workloads, median error <= 20 % of the actual wait).

The cluster: kubesim's scheduler (`kubesim.kueue.scheduler`, the same core the emulator runs) on the Kueue objects
the portal's reconcile makes (`worker.kueue_objects.desired_objects`) for one 16-card pool, two departments, four
projects (deserved 4, limit 8), with Fair Sharing and preemption on. It is driven event by event: arrivals (Poisson),
admissions at each arrival or end, preempted work released at once and requeued (it starts over), ends at the
workload's true runtime. The mix: 8 families (project x image), each with its own lognormal runtime (median 8-40
min, sigma 0.35); 70 % non-preemptible, 30 % preemptible of which a fifth at a higher priority (so higher-priority
arrivals preempt); 25 % carry a max runtime (Kueue stops them there; their true runtime is capped by it). History:
12 finished runs per family before the start, then every finished run joins it (as the portal's history does).

The forecast at submission is `worker.forecast.replay`, exactly what the worker task runs, on the cluster's state at
that instant (running work with its elapsed time, the waiting work, the new workload), expected ends from
`expected_runtime` (max runtime, else the family's history conditioned on elapsed time).

The range shown is the replay's widened by the record of earlier estimates against their starts
(`worker.forecast.widening_from` on what `selectors.forecast_record` would hold at that instant), as the worker
does; `--no-widening` shows the replay's own.

Usage: python bench/forecast_accuracy.py [--workloads 400] [--seed 7] [--load 0.85] [--sigma 0.35]
       [--oracle-runtimes] [--ideal-history N] [--no-widening]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django
import report as bench_results  # bench/report.py, beside this script

django.setup()

from apps.workloads.selectors import FORECAST_RECORD_SIZE  # noqa: E402
from kubesim.kueue import constants as kueue  # noqa: E402
from kubesim.kueue.scheduler import Scheduler, Snapshot  # noqa: E402
from worker.forecast import (  # noqa: E402
    RESOLUTION,
    Job,
    Runtime,
    expected_runtime,
    replay,
    widened,
    widenings_by_kind,
)
from worker.kueue_objects import (  # noqa: E402
    DepartmentSpec,
    OrgSnapshot,
    PoolQuota,
    PoolSpec,
    PriorityClassSpec,
    ProjectSpec,
    desired_objects,
)

T0 = datetime(2026, 6, 1, tzinfo=UTC)
GPU = "nvidia.com/gpu"
PROJECTS = ("vision", "nlp", "etl", "serving")
ORACLE = False


def organisation() -> list[dict]:
    def project(slug: str) -> ProjectSpec:
        return ProjectSpec(slug=slug, namespace=f"proj-{slug}", does_not_lend=False,
                           quotas={"h100": PoolQuota(4, 8, Decimal(1))})
    departments = (DepartmentSpec(slug="research", quotas={"h100": PoolQuota(8, 12, Decimal(1))},
                                  projects=(project("vision"), project("nlp"))),
                   DepartmentSpec(slug="production", quotas={"h100": PoolQuota(8, 12, Decimal(1))},
                                  projects=(project("etl"), project("serving"))))
    return desired_objects(OrgSnapshot(pools=(PoolSpec(slug="h100", gpu_resource=GPU, capacity=16),),
                                       departments=departments,
                                       priority_classes=(PriorityClassSpec("train", 50, ""),)))


class Workload:
    def __init__(self, pk: int, project: str, family: str, units: int, guaranteed: bool, priority: int,
                 arrival: datetime, runtime: float, max_runtime: float | None) -> None:
        self.pk, self.project, self.family, self.units = pk, project, family, units
        self.guaranteed, self.priority, self.arrival = guaranteed, priority, arrival
        self.runtime, self.max_runtime = runtime, max_runtime
        self.reserved_at: datetime | None = None
        self.cluster_queue = ""
        self.first_start: datetime | None = None
        self.forecast = None
        self.replayed = None  # the replay's own estimate, before widening (what the worker records)

    @property
    def key(self) -> str:
        return f"proj-{self.project}/forecast-{self.pk}"

    def obj(self) -> dict:
        obj = {"metadata": {"name": f"forecast-{self.pk}", "namespace": f"proj-{self.project}",
                            "uid": f"{self.pk:012d}", "creationTimestamp": self.arrival.isoformat()},
               "spec": {"queueName": f"{'guaranteed' if self.guaranteed else 'elastic'}-h100",
                        "priority": self.priority,
                        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{
                            "name": "main", "resources": {"requests": {GPU: str(self.units)}}}]}}}]}}
        if self.reserved_at is not None:
            obj["status"] = {"conditions": [{"type": kueue.QUOTA_RESERVED, "status": "True",
                                             "lastTransitionTime": self.reserved_at.isoformat()}],
                             "admission": {"clusterQueue": self.cluster_queue, "podSetAssignments": [{
                                 "name": "main", "count": 1, "flavors": {GPU: "h100"},
                                 "resourceUsage": {GPU: str(self.units)}}]}}
        return obj

    def job(self, history: dict[str, list[float]], now: datetime) -> Job:
        elapsed = (now - self.reserved_at).total_seconds() if self.reserved_at else 0.0
        if ORACLE:  # the error left when every runtime is known exactly: what future submissions alone cause
            runtime: Runtime | None = Runtime(self.runtime, self.runtime, self.runtime, "max_runtime")
        else:
            runtime = expected_runtime(max_runtime=self.max_runtime, samples=history[self.family], elapsed=elapsed)
        return Job(id=self.pk, namespace=f"proj-{self.project}",
                   queue=f"{'guaranteed' if self.guaranteed else 'elastic'}-h100", priority=self.priority,
                   created=self.arrival, resource=GPU, units_per_pod=self.units, pods=1, runtime=runtime,
                   cluster_queue=self.cluster_queue if self.reserved_at else "", flavor="h100",
                   reserved_at=self.reserved_at)


def mix(count: int, rng: random.Random, load: float, sigma: float = 0.35,
        ) -> tuple[list[Workload], dict[str, tuple[float, float]]]:
    families = {}
    for i in range(8):
        families[f"{PROJECTS[i % 4]}/image-{i}"] = (rng.uniform(8, 40) * 60, sigma)
    names = list(families)
    mean_units, mean_runtime = 2.5, statistics.mean(m for m, _ in families.values()) * 1.06
    gap = mean_units * mean_runtime / (16 * load)  # arrivals keeping the pool at about `load`
    workloads, t = [], T0
    for pk in range(1, count + 1):
        t += timedelta(seconds=rng.expovariate(1 / gap))
        family = rng.choice(names)
        median, sigma = families[family]
        runtime = rng.lognormvariate(0, sigma) * median
        max_runtime = round(median * 1.3) if rng.random() < 0.25 else None
        if max_runtime is not None:
            runtime = min(runtime, max_runtime)
        guaranteed = rng.random() < 0.7
        priority = 100 if not guaranteed and rng.random() < 0.2 else 50
        workloads.append(Workload(pk, family.split("/")[0], family, rng.choice((1, 2, 2, 4)), guaranteed, priority, t,
                                  runtime, max_runtime))
    return workloads, families


def schedule(scheduler: Scheduler, objects: dict, live: dict[str, Workload], t: datetime) -> int:
    """Admit and preempt until the cluster settles at t (victims released at once); returns preemptions."""
    preempted = 0
    for _ in range(10):
        snapshot = Snapshot.from_objects(resource_flavors=objects["ResourceFlavor"], cohorts=objects["Cohort"],
                                         cluster_queues=objects["ClusterQueue"], local_queues=objects["LocalQueue"],
                                         workloads=[w.obj() for w in live.values()], now=t)
        victims = False
        for result in scheduler.run(snapshot, t):
            for adm in result.admitted:
                w = live[adm.workload.key]
                w.reserved_at, w.cluster_queue = t, adm.cluster_queue
                w.first_start = w.first_start or t
            for pre in result.preempted:
                w = live[pre.victim.key]
                w.reserved_at, w.cluster_queue = None, ""
                preempted += 1
                victims = True
        if not victims:
            break
        scheduler.queues.flush()
    return preempted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--load", type=float, default=0.85)
    parser.add_argument("--oracle-runtimes", action="store_true",
                        help="give the forecast every workload's true runtime (to separate the two sources of error)")
    parser.add_argument("--sigma", type=float, default=0.35, help="the spread of each family's lognormal runtimes")
    parser.add_argument("--no-widening", action="store_true",
                        help="show the replay's own ranges, not widened by the record of earlier estimates")
    parser.add_argument("--ideal-history", type=int, default=0, metavar="N",
                        help="give every family N runs drawn from its true distribution and add no finished runs "
                             "(the floor of the error any estimate from history can reach)")
    args = parser.parse_args()
    machine = bench_results.Machine()
    global ORACLE
    ORACLE = args.oracle_runtimes
    rng = random.Random(args.seed)
    objects: dict[str, list[dict]] = defaultdict(list)
    for obj in organisation():
        objects[obj["kind"]].append(obj)
    workloads, families = mix(args.workloads, rng, args.load, args.sigma)
    history: dict[str, list[float]] = defaultdict(list)
    for family, (median, sigma) in families.items():
        history[family] = [rng.lognormvariate(0, sigma) * median for _ in range(args.ideal_history or 12)]
    scheduler = Scheduler()
    live: dict[str, Workload] = {}
    arrivals = list(workloads)
    preemptions, forecast_seconds = 0, []
    t = T0
    while arrivals or live:
        ends = [w.reserved_at + timedelta(seconds=w.runtime) for w in live.values() if w.reserved_at]
        t = min([*ends, *([arrivals[0].arrival] if arrivals else [])])
        for w in [w for w in live.values() if w.reserved_at and w.reserved_at + timedelta(seconds=w.runtime) <= t]:
            del live[w.key]
            if not args.ideal_history:
                history[w.family].insert(0, w.runtime)
            scheduler.queues.flush()
        while arrivals and arrivals[0].arrival <= t:
            new = arrivals.pop(0)
            holding = [w.job(history, t) for w in live.values() if w.reserved_at]
            waiting = [w.job(history, t) for w in live.values() if not w.reserved_at] + [new.job(history, t)]
            started = time.process_time()
            new.replayed = replay(objects=organisation(), holding=holding, waiting=waiting, now=t)[new.pk]
            forecast_seconds.append(time.process_time() - started)
            new.forecast = new.replayed if args.no_widening else widened(
                new.replayed, widenings_by_kind(record(workloads, t), now=t)[not new.guaranteed], t)
            live[new.key] = new
            scheduler.queues.flush()
        preemptions += schedule(scheduler, objects, live, t)
    report(workloads, preemptions, forecast_seconds, args, machine)


def record(workloads: list[Workload], t: datetime) -> list[tuple]:
    """What `selectors.forecast_record` gives the worker at t: the latest first estimates of each kind of work
    (preemptible or not) that was to wait, with their replayed (unwidened) ranges and their start (None while still
    waiting)."""
    rows = [(w.arrival, w.replayed.earliest, w.replayed.latest,
             w.first_start if w.first_start is not None and w.first_start <= t else None, not w.guaranteed)
            for w in sorted(workloads, key=lambda w: w.arrival, reverse=True)
            if w.replayed is not None and w.arrival < t and w.replayed.likely is not None
            and w.replayed.likely > w.arrival]
    return [row for kind in (False, True) for row in [row for row in rows if row[4] == kind][:FORECAST_RECORD_SIZE]]


def report(workloads: list[Workload], preemptions: int, forecast_seconds: list[float], args,
           machine: bench_results.Machine) -> None:
    tolerance = RESOLUTION.total_seconds()
    estimated = [w for w in workloads if w.forecast.likely is not None]
    waits = [(w.first_start - w.arrival).total_seconds() for w in estimated]
    errors = [abs((w.forecast.likely - w.first_start).total_seconds()) for w in estimated]
    inside = [w.forecast.earliest <= w.first_start <= w.forecast.latest for w in estimated]
    inside_tol = [w.forecast.earliest - timedelta(seconds=tolerance) <= w.first_start
                  <= w.forecast.latest + timedelta(seconds=tolerance) for w in estimated]
    waited = [(e, wait) for e, wait in zip(errors, waits, strict=True) if wait > tolerance]
    relative = [e / wait for e, wait in waited]
    reasons: dict[str, int] = defaultdict(int)
    for w in workloads:
        if w.forecast.likely is None:
            reasons[w.forecast.reason] += 1
    oracle = ", true runtimes" if args.oracle_runtimes else ""
    oracle += ", ranges not widened" if args.no_widening else ""
    oracle += f", ideal history of {args.ideal_history}" if args.ideal_history else ""
    print(f"seed {args.seed}, load {args.load}, sigma {args.sigma}{oracle}, {len(workloads)} workloads, "
          f"{preemptions} preemptions; "
          f"estimated {len(estimated)}, cannot estimate {dict(reasons) or 0}")
    print(f"waited at all (> {tolerance:.0f} s): {len(waited)}; median actual wait of those "
          f"{statistics.median(w for _, w in waited) / 60:.1f} min")
    print(f"real start inside [earliest, latest]: {100 * sum(inside) / len(inside):.1f} % "
          f"(within one {tolerance:.0f} s step of it: {100 * sum(inside_tol) / len(inside_tol):.1f} %)")
    widths = [(w.forecast.latest - w.forecast.earliest) / (w.forecast.likely - w.arrival) for w in estimated
              if w.forecast.likely > w.arrival]
    if widths:
        print(f"range width / forecast wait, over those forecast to wait: median {statistics.median(widths):.2f}")
    print(f"median absolute error of `likely`: {statistics.median(errors) / 60:.2f} min over all estimated; "
          f"{statistics.median(e for e, _ in waited) / 60:.2f} min over those that waited")
    median_wait = statistics.median(w for _, w in waited)
    print(f"median error / actual wait, over those that waited: {100 * statistics.median(relative):.1f} %; "
          f"median error / median wait: {100 * statistics.median(e for e, _ in waited) / median_wait:.1f} %")
    for label, member in (("non-preemptible", lambda w: w.guaranteed), ("preemptible", lambda w: not w.guaranteed)):
        rows = [(w, e, wait) for w, e, wait in zip(estimated, errors, waits, strict=True)
                if member(w) and wait > tolerance]
        if rows:
            early = sum(1 for w, _, _ in rows if w.forecast.likely < w.first_start)
            print(f"  {label}: {len(rows)} waited, median error / actual wait "
                  f"{100 * statistics.median(e / wait for _, e, wait in rows):.1f} %, forecast too early for {early}")
    for low, high in ((60, 600), (600, 1800), (1800, None)):
        rows = [(w, e, wait) for w, e, wait in zip(estimated, errors, waits, strict=True)
                if wait > low and (high is None or wait <= high)]
        if rows:
            within = sum(1 for w, _, _ in rows if w.forecast.earliest <= w.first_start <= w.forecast.latest)
            span = f"{low // 60}-{high // 60} min" if high else f"over {low // 60} min"
            print(f"  waited {span}: {len(rows)}, median error / actual wait "
                  f"{100 * statistics.median(e / wait for _, e, wait in rows):.1f} %, "
                  f"inside the range {100 * within / len(rows):.1f} %")
    print(f"forecast CPU time per submission: median {1000 * statistics.median(forecast_seconds):.1f} ms, "
          f"max {1000 * max(forecast_seconds):.1f} ms; load average {os.getloadavg()}")
    size = f"{len(workloads)} workloads, load {args.load:g}{oracle}"
    bench_results.record("forecast_accuracy.py", vars(args), [
        bench_results.Figure(f"real start inside the range, {size}", "%", [100 * sum(inside) / len(inside)]),
        bench_results.Figure(f"median error / actual wait, {size}", "%", [100 * statistics.median(relative)]),
        bench_results.Figure(f"forecast CPU per submission, {size}", "ms",
                             [1000 * statistics.median(forecast_seconds)]),
    ], machine)


if __name__ == "__main__":
    main()
