"""One scheduling cycle of kubesim's Kueue scheduler over a full cohort with Fair Sharing on, where every head must
preempt: the cost of the fair-sharing preemption search as the number of admitted workloads grows.

Setup (the defaults): 100 ClusterQueues in one cohort, each with a nominal quota of 100 GPUs (10,000 in all) and
unlimited borrowing; 10,000 admitted 1-GPU workloads, 150 in each even queue (borrowing 50) and 50 in each odd one
(50 unused), priorities 0-2; one pending 1-GPU workload of priority 1 per queue. The cohort is full, so every head
nominates with preemption (its own queue's lower priorities, or reclaiming from the borrowers) and the cycle runs
the search for each of them, on the snapshot kubesim's scheduler controller would build, without HTTP or a store.
Prints the cycle's wall-clock seconds and a digest of the victims chosen (equal digests: the same victims).

Usage: python bench/kubesim_preemption.py [--cqs 100] [--admitted 10000] [--cycles 1]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

if not os.environ.get("PYTHONPATH"):  # a tree to compare on PYTHONPATH comes first
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report as results  # bench/report.py, beside this script

from kubesim.kueue import workload_status as ws
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler import Scheduler, Snapshot

GPU = "nvidia.com/gpu"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def workload(name: str, queue: str, priority: int, at: datetime) -> dict:
    return {
        "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}", "creationTimestamp": ws.ts(at)},
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}]}},
                }
            ],
        },
        "status": {},
    }


def snapshot(cqs: int, admitted: int) -> Snapshot:
    nominal = admitted // cqs
    cluster_queues, local_queues, workloads = [], [], []
    for i in range(cqs):
        cluster_queues.append(
            {
                "metadata": {"name": f"cq-{i}"},
                "spec": {
                    "cohortName": "bench",
                    "namespaceSelector": {},
                    "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU],
                            "flavors": [
                                {"name": "default", "resources": [{"name": GPU, "nominalQuota": str(nominal)}]}
                            ],
                        }
                    ],
                },
            }
        )
        local_queues.append(
            {"metadata": {"name": f"lq-{i}", "namespace": "bench"}, "spec": {"clusterQueue": f"cq-{i}"}}
        )
    count = 0
    for i in range(cqs):
        for j in range(nominal * 3 // 2 if i % 2 == 0 else nominal // 2):
            at = T0 + timedelta(seconds=count)
            wl = workload(f"admitted-{count}", f"lq-{i}", j % 3, at)
            psa = [{"name": "main", "flavors": {GPU: "default"}, "resourceUsage": {GPU: "1"}, "count": 1}]
            ws.set_quota_reservation(wl, f"cq-{i}", psa, at)
            workloads.append(wl)
            count += 1
    for i in range(cqs):
        workloads.append(workload(f"pending-{i}", f"lq-{i}", 1, T0 + timedelta(seconds=count + i)))
    return Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": "default"}, "spec": {}}],
        cohorts=[],
        cluster_queues=cluster_queues,
        local_queues=local_queues,
        workloads=workloads,
        config=KueueConfig(fair_sharing=True),
        now=T0,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cqs", type=int, default=100)
    parser.add_argument("--admitted", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=1)
    args = parser.parse_args()
    machine = results.Machine()
    print(f"load before: {machine.load_before:.2f}", flush=True)
    seconds_per_cycle = []
    for run in range(args.cycles):
        snap = snapshot(args.cqs, args.admitted)
        started = time.perf_counter()
        result = Scheduler().cycle(snap, T0)
        seconds = time.perf_counter() - started
        seconds_per_cycle.append(seconds)
        victims = sorted((p.victim.name, p.reason, p.preemptor.name) for p in result.preempted)
        digest = hashlib.sha256(repr(victims).encode()).hexdigest()[:12]
        print(f"cycle {run + 1}: {seconds:.2f}s, {len(victims)} victims (digest {digest})", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}", flush=True)
    shape = f"{args.admitted:,} admitted / {args.cqs} CQs, Fair Sharing, every head preempting"
    results.record(
        "kubesim_preemption.py",
        vars(args),
        [results.Figure(f"scheduling cycle, {shape}", "s", seconds_per_cycle)],
        machine,
    )


if __name__ == "__main__":
    main()
