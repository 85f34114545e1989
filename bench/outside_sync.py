"""Work submitted outside the portal at scale: the watcher's first sync of 10,000 Kueue Workloads across 100
namespaces, then the lag from a new outside Job to its row at 50 Jobs per second, and the watcher's memory.

kubesim runs in its own process (real clock); 10,000 batch/v1 Jobs with the queue label are created in it first,
as kubectl would (1 GPU each, all within the projects' deserved quotas: a backlog of thousands that can never be
admitted makes kubesim's own scheduler the slow part), and Kueue makes and admits their Workloads. Then a
fresh watcher starts against that cluster: the first sync is timed until every Workload has its row with the status
Kueue gives it. Then Jobs are created at `--rate` per second and each one's lag is timed until its row exists.
Targets (docs/architecture.md, Work submitted outside the portal): first sync under 60 s, p95 lag under 1 s,
memory under 500 MiB.

It uses the bench database of bench/live_pages.py (`<name>_bench`), never development or test data.

Usage: python -m portal.devservices .venv/bin/python bench/outside_sync.py [--workloads 10000] [--projects 100]
"""

from __future__ import annotations

import argparse
import importlib
import resource
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
live_pages = importlib.import_module("bench.live_pages")


def job(name: str, namespace: str, seconds: int = 3600) -> dict:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "elastic-bench"}},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "busybox", "command": ["sleep", str(seconds)],
            "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}},
    }


def workload_count(gw) -> int:
    page = gw.raw_get("/apis/kueue.x-k8s.io/v1beta2/workloads", query=[("limit", 1)])
    return len(page.get("items", [])) + int((page.get("metadata") or {}).get("remainingItemCount") or 0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--changes", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0)
    args = parser.parse_args()
    live_pages._use_bench_database()
    import django

    django.setup()
    from apps.workloads.models import Origin, Workload
    from kubesim.testing import KubesimProcess
    from worker.gateway import Gateway, reset_gateway
    from worker.kueue_sync import desired_from_database, reconcile
    from worker.watcher import Watcher

    fixture = live_pages.build(0, args.projects)
    namespaces = [project.namespace for project in fixture["projects"]]
    cluster = KubesimProcess(tempfile.mkdtemp(prefix="bench-kubesim-"), clock="real").start()
    try:
        gw = Gateway(cluster.api_client())
        reset_gateway(gw)
        reconcile(gw, desired_from_database())
        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: gw.create(job(f"outside-{i}", namespaces[i % len(namespaces)])),
                          range(args.workloads)))
        while workload_count(gw) < args.workloads:
            time.sleep(2)
        print(f"cluster: {args.workloads} Jobs and their Workloads in {len(namespaces)} namespaces in "
              f"{time.perf_counter() - started:.1f}s")

        tracemalloc.start()
        watcher = Watcher(gw, resync_seconds=3600, positions_seconds=5.0)
        started = time.perf_counter()
        threading.Thread(target=watcher.start, daemon=True).start()
        outside = Workload.objects.filter(origin=Origin.OUTSIDE)
        while outside.count() < args.workloads or outside.filter(admitted_at__isnull=False).count() == 0:
            time.sleep(0.5)
        while len(watcher.work) or watcher.work.processing:
            time.sleep(0.2)
        sync = time.perf_counter() - started
        admitted = outside.filter(admitted_at__isnull=False).count()
        print(f"first sync: {outside.count()} rows ({admitted} admitted) in {sync:.1f}s")

        # When each change's Workload reached the watcher: splits the lag into the cluster's part (kubesim's Kueue
        # making the Workload) and the watcher's (reading it into its row).
        arrived: dict[str, float] = {}
        handle = watcher.handle

        def timed_handle(kind: str, event_type: str, obj: dict) -> None:
            owner = ((obj.get("metadata") or {}).get("ownerReferences") or [{}])[0].get("name", "")
            if kind == "Workload" and owner.startswith("change-"):
                arrived.setdefault(owner, time.perf_counter())
            handle(kind, event_type, obj)

        watcher.handle = timed_handle  # type: ignore[method-assign]
        created: dict[str, float] = {}
        seen: dict[str, float] = {}
        done = threading.Event()

        def poll() -> None:
            """Look for the new rows every 20 ms while the changes come, as a page would (its own connection)."""
            from django.db import connection

            while not done.is_set():
                now = time.perf_counter()
                for name in outside.filter(object_name__startswith="change-").exclude(
                        object_name__in=list(seen)).values_list("object_name", flat=True):
                    seen[name] = now
                time.sleep(0.02)
            connection.close()

        def change(index: int) -> None:
            name = f"change-{index}"
            gw.create(job(name, namespaces[index % len(namespaces)]))
            created[name] = time.perf_counter()  # the Job exists in the cluster from here on

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        interval = 1.0 / args.rate
        begin = time.perf_counter()
        # Creates go out on schedule from a pool, so a slow create does not lower the rate of the others.
        with ThreadPoolExecutor(16) as creators:
            for index in range(args.changes):
                time.sleep(max(0.0, begin + index * interval - time.perf_counter()))
                creators.submit(change, index)
        achieved = args.changes / (time.perf_counter() - begin)
        deadline = time.perf_counter() + 60
        while len(seen) < len(created) and time.perf_counter() < deadline:
            time.sleep(0.05)
        done.set()
        poller.join()
        print(f"changes: {args.changes} Jobs created at {achieved:.1f}/s (asked {args.rate:g}/s)")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        lags = sorted(seen[name] - created[name] for name in seen)
        cluster_part = sorted(arrived[name] - created[name] for name in seen if name in arrived)
        watcher_part = sorted(seen[name] - arrived[name] for name in seen if name in arrived)
        for label, values in (("Job created -> row", lags), ("Job created -> Workload at the watcher", cluster_part),
                              ("Workload at the watcher -> row", watcher_part)):
            print(f"changes at {args.rate:g}/s, {label}: {len(values)} of {len(created)}; p50 "
                  f"{statistics.median(values) * 1000:.0f} ms, p95 "
                  f"{statistics.quantiles(values, n=20)[18] * 1000:.0f} ms (polled every 20 ms)")
        print(f"memory: python heap peak {peak / 2**20:.0f} MiB, process max RSS "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
        watcher.stop()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
