"""Admission throughput of kubesim through the whole path: Job create (official client, HTTP) -> Kueue webhook
-> Workload -> scheduler admission -> unsuspended Job -> running pods.

Setup (the defaults): 100 ClusterQueues in 10 cohorts, one LocalQueue per ClusterQueue, quota for
every workload, N pending Jobs of 1 cpu each. Phase 1 creates all Jobs while admission is held (every
ClusterQueue has stopPolicy Hold), so N workloads are pending; phase 2 releases the holds and measures the time
until every workload is admitted (create -> admitted throughput is reported for both phases together too).

With --async the server settles in the background (`--async-settle`, real clock) so bursts of writes share one
controller pass, as in a real cluster; without it every API write returns after the controllers settled.

Kueue's own performance shape is `--cqs 30 --cohorts 5 --workloads 15000` (Kueue's scheduler performance test runs
15,000 workloads in 30 ClusterQueues and takes 42 admissions/s as its bar). The run's figures are recorded in
bench/results/ (bench/report.py).

Pod placement (kube-scheduler's filters and scores, kubesim/apiserver/nodes/scheduler.py) has no switch: its cost is
measured instead as the CPU time of the calling thread spent inside SchedulerCache's methods (schedule, track,
set_nodes, demand), reported as `placement_cpu_seconds` and as a share of the process's CPU time.

Usage: python bench/kubesim_admission.py [--cqs 100] [--cohorts 10] [--workloads 10000] [--async]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report as results

from kubesim.testing import serve

K = ("kueue.x-k8s.io", "v1beta2")


def _admitted(custom: client.CustomObjectsApi) -> int:
    items = custom.list_cluster_custom_object(*K, "workloads")["items"]
    return sum(
        1
        for w in items
        if any(c["type"] == "Admitted" and c["status"] == "True" for c in (w.get("status") or {}).get("conditions", []))
    )


class _PlacementTimer:
    """Thread CPU time spent inside kube-scheduler's placement (SchedulerCache), summed over calls."""

    METHODS = ("schedule", "track", "set_nodes", "demand")

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0

    def install(self) -> None:
        from kubesim.apiserver.nodes.scheduler import SchedulerCache

        for name in self.METHODS:
            setattr(SchedulerCache, name, self._timed(getattr(SchedulerCache, name)))

    def _timed(self, method):
        timer = self

        def timed(*args, **kwargs):
            if timer._depth:
                return method(*args, **kwargs)
            timer._depth += 1
            started = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                timer.seconds += time.thread_time() - started
                timer._depth -= 1

        return timed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cqs", type=int, default=100)
    parser.add_argument("--cohorts", type=int, default=10)
    parser.add_argument("--workloads", type=int, default=10000)
    parser.add_argument("--async", dest="async_settle", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()  # the machine is shared: every result says what else was running
    machine = results.Machine()
    per_cq = -(-args.workloads // args.cqs)
    clock = "real" if args.async_settle else "manual"
    placement = _PlacementTimer()
    placement.install()
    with serve(clock=clock, async_settle=args.async_settle) as ks:
        api = ks.api_client()
        core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
        custom.create_cluster_custom_object(
            *K,
            "resourceflavors",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": "default"},
                "spec": {},
            },
        )
        for i in range(args.cqs):
            custom.create_cluster_custom_object(
                *K,
                "clusterqueues",
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "ClusterQueue",
                    "metadata": {"name": f"cq-{i}"},
                    "spec": {
                        "cohortName": f"cohort-{i % args.cohorts}",
                        "namespaceSelector": {},
                        "stopPolicy": "Hold",
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu"],
                                "flavors": [
                                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": per_cq}]}
                                ],
                            }
                        ],
                    },
                },
            )
            core.create_namespace({"metadata": {"name": f"ns-{i}"}})
            custom.create_namespaced_custom_object(
                *K,
                f"ns-{i}",
                "localqueues",
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "lq"},
                    "spec": {"clusterQueue": f"cq-{i}"},
                },
            )
        started, cpu_started = time.perf_counter(), time.process_time()
        for n in range(args.workloads):
            batch.create_namespaced_job(
                f"ns-{n % args.cqs}",
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": f"job-{n}", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {
                                        "name": "main",
                                        "image": "busybox",
                                        "command": ["sleep", "3600"],
                                        "resources": {"requests": {"cpu": "1"}},
                                    }
                                ],
                            }
                        }
                    },
                },
            )
        ks.sim.settle()  # in this process: no HTTP timeout however long a pass takes on a busy machine
        created, cpu_created = time.perf_counter(), time.process_time()
        pending_stats = ks.sim.stats_report()
        ks.sim.stats.clear()
        release, cpu_release = time.perf_counter(), time.process_time()
        for i in range(args.cqs):
            custom.patch_cluster_custom_object(*K, "clusterqueues", f"cq-{i}", {"spec": {"stopPolicy": "None"}})
        ks.sim.settle()  # in this process: no HTTP timeout however long a pass takes on a busy machine
        done, cpu_done = time.perf_counter(), time.process_time()
        admitted = _admitted(custom)
        stats = ks.sim.stats_report()
        phases = (pending_stats, stats)
        result = {
            "clusterqueues": args.cqs,
            "cohorts": args.cohorts,
            "workloads": args.workloads,
            "async_settle": args.async_settle,
            "admitted": admitted,
            "create_seconds": round(created - started, 2),
            "creates_per_second": round(args.workloads / (created - started), 1),
            "admission_seconds": round(done - release, 2),
            "admissions_per_second": round(admitted / (done - release), 1),
            "end_to_end_per_second": round(admitted / (done - started), 1),
            # CPU seconds of this process (client, server and controllers share it): on a loaded shared machine
            # the per-CPU-second rates move much less than the wall-clock ones.
            "create_cpu_seconds": round(cpu_created - cpu_started, 2),
            "admission_cpu_seconds": round(cpu_done - cpu_release, 2),
            "creates_per_cpu_second": round(args.workloads / (cpu_created - cpu_started), 1),
            "admissions_per_cpu_second": round(admitted / (cpu_done - cpu_release), 1),
            "end_to_end_per_cpu_second": round(admitted / (cpu_done - cpu_started), 1),
            "scheduler": stats.get("kueue-scheduler"),
            "placement_cpu_seconds": round(placement.seconds, 2),
            "placement_share_of_cpu": round(placement.seconds / max(cpu_done - cpu_started, 1e-9), 4),
            "kubelet_seconds": round(sum((phase.get("kubelet") or {}).get("seconds", 0) for phase in phases), 2),
            "controllers_during_creates": pending_stats,
            "controllers_during_admission": stats,
            "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(),
        }
        print(json.dumps(result, indent=2))
        api.close()
    shape = (f"{'async' if args.async_settle else 'synchronous'}, {args.workloads:,} workloads / {args.cqs} CQs / "
             f"{args.cohorts} cohorts")
    results.record("kubesim_admission.py", vars(args), [
        results.Figure(f"admissions/s end to end, {shape}", "1/s", [result["end_to_end_per_second"]],
                       target=">= 42" if args.async_settle else ""),
        results.Figure(f"admissions/s from release, {shape}", "1/s", [result["admissions_per_second"]]),
        results.Figure(f"admissions per CPU-second end to end, {shape}", "1/s",
                       [result["end_to_end_per_cpu_second"]]),
    ], machine)


if __name__ == "__main__":
    main()
