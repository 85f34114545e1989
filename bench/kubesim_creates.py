"""kubesim alone under bench/outside_sync.py's load, without the portal: background settle (`--async-settle`, real
clock), 100 namespaces each with a LocalQueue `elastic-bench` on a ClusterQueue of its own (1 GPU flavor, quota for
every Job), N 1-GPU Jobs created from 8 threads through the official client ("cluster built": until every Workload
exists), then `--changes` more at `--rate` per second from 16 threads, each timed from its create's return to its
Workload's first event on a watch.

kubesim runs as `python -m kubesim serve` in a process of its own (as the outside bench runs it), or with --profile
in this process under yappi (wall clock, all threads; yappi is a profiling tool only, not a dependency) and the
profile's top functions are printed.

Usage: python bench/kubesim_creates.py [--workloads 10000] [--projects 100] [--changes 500] [--rate 50] [--profile]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if not os.environ.get("PYTHONPATH"):  # a tree to compare on PYTHONPATH comes first
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client, watch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report as results  # bench/report.py, beside this script

K = ("kueue.x-k8s.io", "v1beta2")


def job(name: str, namespace: str) -> dict:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "elastic-bench"}},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "busybox", "command": ["sleep", "3600"],
            "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}},
    }


def setup(api: client.ApiClient, projects: int, per_project: int) -> list[str]:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_cluster_custom_object(*K, "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "bench"}, "spec": {}})
    namespaces = []
    for i in range(projects):
        ns = f"project-{i}"
        core.create_namespace({"metadata": {"name": ns}})
        custom.create_cluster_custom_object(*K, "clusterqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": ns},
            "spec": {"cohortName": "bench", "namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "bench", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": per_project}]}],
            }]}})
        custom.create_namespaced_custom_object(*K, ns, "localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "elastic-bench"},
            "spec": {"clusterQueue": ns}})
        namespaces.append(ns)
    return namespaces


def workload_count(custom: client.CustomObjectsApi) -> int:
    page = custom.list_cluster_custom_object(*K, "workloads", limit=1)
    return len(page.get("items", [])) + int((page.get("metadata") or {}).get("remainingItemCount") or 0)


def controller_time(ks) -> str:
    """kubesim's controller time so far (its /kubesim/v1/stats): total reconcile seconds and calls, and the top 4."""
    stats = ks.stats()
    stats = stats.get("controllers", stats)
    rows = sorted(stats.items(), key=lambda item: -item[1]["seconds"])
    total = sum(row["seconds"] for _, row in rows)
    calls = max((row["calls"] for _, row in rows), default=0)
    top = ", ".join(f"{name} {row['seconds']:.1f}s" for name, row in rows[:4])
    return f"controllers {total:.1f}s in {calls} rounds ({top})"


def run(ks, args: argparse.Namespace) -> list[results.Figure]:
    """The run; its headline figures for bench/report.py."""
    api = ks.api_client()
    batch, custom = client.BatchV1Api(api), client.CustomObjectsApi(api)
    namespaces = setup(api, args.projects, -(-(args.workloads + args.changes) // args.projects) + 10)
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: batch.create_namespaced_job(namespaces[i % len(namespaces)],
                                                            job(f"outside-{i}", namespaces[i % len(namespaces)])),
                      range(args.workloads)))
    posted = time.perf_counter() - started
    while workload_count(custom) < args.workloads:
        time.sleep(0.5)
    built = time.perf_counter() - started
    print(f"cluster built: {args.workloads} Jobs posted in {posted:.1f}s, all Workloads in "
          f"{built:.1f}s; {controller_time(ks)}", flush=True)

    created: dict[str, float] = {}
    arrived: dict[str, float] = {}
    durations: list[float] = []
    listed = custom.list_cluster_custom_object(*K, "workloads", limit=1)["metadata"]["resourceVersion"]

    def watch_workloads() -> None:
        stream = watch.Watch()
        for event in stream.stream(custom.list_cluster_custom_object, *K, "workloads", resource_version=listed,
                                   timeout_seconds=600):
            owners = event["object"].get("metadata", {}).get("ownerReferences") or [{}]
            name = owners[0].get("name", "")
            if name.startswith("change-"):
                arrived.setdefault(name, time.perf_counter())
                if len(arrived) >= args.changes:
                    stream.stop()

    watcher = threading.Thread(target=watch_workloads, daemon=True)
    watcher.start()

    def change(index: int) -> None:
        name = f"change-{index}"
        begin = time.perf_counter()
        batch.create_namespaced_job(namespaces[index % len(namespaces)], job(name, namespaces[index % len(namespaces)]))
        created[name] = time.perf_counter()
        durations.append(created[name] - begin)

    interval = 1.0 / args.rate
    begin = time.perf_counter()
    with ThreadPoolExecutor(16) as creators:
        for index in range(args.changes):
            time.sleep(max(0.0, begin + index * interval - time.perf_counter()))
            creators.submit(change, index)
    achieved = args.changes / (time.perf_counter() - begin)
    watcher.join(timeout=60)
    lags = sorted(arrived[n] - created[n] for n in created if n in arrived)
    print(f"changes: {args.changes} Jobs created at {achieved:.1f}/s (asked {args.rate:g}/s); create call p50 "
          f"{statistics.median(durations) * 1000:.0f} ms p95 {statistics.quantiles(durations, n=20)[18] * 1000:.0f} ms",
          flush=True)
    if len(lags) >= 2:
        print(f"Job created -> Workload seen by a watch: {len(lags)} of {len(created)}; p50 "
              f"{statistics.median(lags) * 1000:.0f} ms, p95 {statistics.quantiles(lags, n=20)[18] * 1000:.0f} ms",
              flush=True)
    print(f"after the changes: {controller_time(ks)}", flush=True)
    shape = f"{args.changes} creates at {args.rate:g}/s into {args.workloads:,} Jobs / {args.projects} namespaces"
    figures = [results.Figure(f"create call p95, {shape}", "ms", [statistics.quantiles(durations, n=20)[18] * 1000]),
               results.Figure(f"creates/s achieved, {shape}", "1/s", [achieved], target=f">= {args.rate:g}"),
               results.Figure(f"cluster built, {args.workloads:,} Jobs", "s", [built])]
    if len(lags) >= 2:
        figures.insert(0, results.Figure(f"Job -> Workload on a watch p95, {shape}", "ms",
                                         [statistics.quantiles(lags, n=20)[18] * 1000]))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--changes", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    machine = results.Machine()
    print(f"load before: {machine.load_before:.2f}", flush=True)
    if args.profile:  # a profiled run's figures are not the bench's: not recorded
        import yappi

        from kubesim.testing import serve

        with serve(clock="real", async_settle=True) as ks:
            yappi.set_clock_type("wall")
            yappi.start()
            try:
                run(ks, args)
            finally:
                yappi.stop()
                stats = yappi.get_func_stats()
                stats.save(os.path.join(tempfile.gettempdir(), "kubesim_creates.pstat"), type="pstat")
                for label, key in (("total", "ttot"), ("own", "tsub")):
                    print(f"--- top by {label} time")
                    stats.sort(key, "desc")
                    for entry in list(stats)[:40]:
                        print(f"{entry.ttot:9.2f} {entry.tsub:9.2f} {entry.ncall:9d}  {entry.full_name[-110:]}")
    else:
        from kubesim.testing import KubesimProcess

        with KubesimProcess(tempfile.mkdtemp(prefix="bench-kubesim-"), "--async-settle", clock="real") as ks:
            figures = run(ks, args)
        results.record("kubesim_creates.py", vars(args), figures, machine)
    print(f"load after: {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
