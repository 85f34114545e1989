"""Work submitted outside the portal at scale: the watcher's first sync of 10,000 Kueue Workloads across 100
namespaces, then the lag from a new outside Job to its row at 50 Jobs per second, and the watcher's memory.

kubesim runs in its own process (real clock); 10,000 batch/v1 Jobs with the queue label are created in it first,
as kubectl would (1 GPU each, all within the projects' deserved quotas: a backlog of thousands that can never be
admitted makes kubesim's own scheduler the slow part), and Kueue makes and admits their Workloads. Then a
fresh watcher starts against that cluster as in production (`manage.py watch_cluster`, a process of its own): the
first sync is timed until every Workload has its row, admitted as Kueue says. Then Jobs are created at `--rate` per
second and each one's lag is timed until its row exists, split at the moment the bench's own watch sees the Workload;
the watcher's hops come from its /metrics. Targets (docs/architecture.md, Work submitted outside the portal): first
sync under 60 s, p95 lag under 1 s, the watcher's memory (its resident set) under 500 MiB.

It uses the bench database of bench/live_pages.py (`<name>_bench`), never development or test data.

Usage: python -m portal.devservices .venv/bin/python bench/outside_sync.py [--workloads 10000] [--projects 100]
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
live_pages = importlib.import_module("bench.live_pages")
results = importlib.import_module("report")  # bench/report.py, beside this script


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


def make_room(projects: list, jobs: int) -> None:
    """Every Job of the run within its project's deserved quota: a cluster full to the last GPU leaves the changes
    pending, and kubesim's scheduler, not the watcher, becomes what the bench measures."""
    from django.contrib.auth import get_user_model

    from apps.org import services
    from apps.org.models import NodePool

    admin = get_user_model().objects.get(username="admin")
    each = -(-jobs // len(projects)) + 10
    pool = NodePool.objects.get(slug="bench")
    total = each * len(projects)
    pool = services.node_pool_update(actor=admin, node_pool=pool, capacity=max(total, pool.capacity))
    department = projects[0].department
    # The department holds its projects' sum: raised before them, lowered after them.
    services.quota_set(actor=admin, node_pool=pool, department=department, deserved=max(total, pool.capacity),
                       limit=None)
    for project in projects:
        services.quota_set(actor=admin, node_pool=pool, project=project, deserved=each, limit=each * 2)
    services.quota_set(actor=admin, node_pool=pool, department=department, deserved=total, limit=None)
    services.node_pool_update(actor=admin, node_pool=pool, capacity=total)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--changes", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--sync-cluster", action="store_true",
                        help="kubesim settles inside each write (by default in the background, as a real cluster's "
                             "controllers run after the write returns)")
    args = parser.parse_args()
    machine = results.Machine()
    live_pages._use_bench_database()
    import django

    django.setup()
    from apps.workloads.models import Origin, Workload
    from kubesim.testing import KubesimProcess
    from worker.gateway import Gateway, reset_gateway
    from worker.kueue_sync import desired_from_database, reconcile

    fixture = live_pages.build(0, args.projects)
    namespaces = [project.namespace for project in fixture["projects"]]
    make_room(fixture["projects"], args.workloads + args.changes)
    settle = [] if args.sync_cluster else ["--async-settle"]
    cluster = KubesimProcess(tempfile.mkdtemp(prefix="bench-kubesim-"), *settle, clock="real").start()
    watcher = None
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

        # The watcher as it runs in production: `manage.py watch_cluster`, a process of its own against the cluster's
        # kubeconfig, so its memory is its own and the bench's threads do not share its interpreter.
        metrics_port = live_pages.free_port()
        environment = {**os.environ, "KUBECONFIG": cluster.kubeconfig_path,
                       "WATCHER_METRICS_PORT": str(metrics_port), "LEADER_ELECTION": "false"}
        started = time.perf_counter()
        watcher = subprocess.Popen(
            [sys.executable, "manage.py", "watch_cluster", "--resync-seconds", "3600", "--positions-seconds", "5"],
            cwd=ROOT, env=environment, stdout=subprocess.DEVNULL)
        outside = Workload.objects.filter(origin=Origin.OUTSIDE)
        while outside.filter(admitted_at__isnull=False).count() < args.workloads:
            if watcher.poll() is not None:
                raise SystemExit(f"the watcher exited with {watcher.returncode}")
            time.sleep(0.25)
        sync = time.perf_counter() - started
        print(f"first sync: {outside.count()} rows, all admitted, in {sync:.1f}s; watcher RSS now / peak "
              "{:.0f} / {:.0f} MiB".format(*live_pages.rss_mib(watcher.pid)))

        # When each change's Workload appeared in the cluster, seen by a watch of the bench's own: splits the lag
        # into the cluster's part (kubesim's Kueue making the Workload) and the watcher's (reading it into its row).
        arrived: dict[str, float] = {}
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

        live_pages.watch_arrivals(cluster.api_client(), gw,
                                  lambda name: name if name.startswith("change-") else None, arrived, done)
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        before = live_pages.scrape(metrics_port)
        controllers_before = cluster.stats()["controllers"]
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
        lags = sorted(seen[name] - created[name] for name in seen)
        cluster_part = sorted(arrived[name] - created[name] for name in seen if name in arrived)
        watcher_part = sorted(seen[name] - arrived[name] for name in seen if name in arrived)
        size = f"{args.workloads:,} outside Workloads, {args.rate:g} changes/s"
        figures = [results.Figure(f"first sync, {args.workloads:,} Workloads in {args.projects} namespaces", "s",
                                  [sync], "< 60")]
        for label, values, target in (("Job created -> row", lags, "< 1,000"),
                                      ("Job created -> Workload in the cluster", cluster_part, ""),
                                      ("Workload in the cluster -> row", watcher_part, "")):
            if len(values) < 2:
                print(f"changes at {args.rate:g}/s, {label}: {len(values)} of {len(created)}")
                continue
            p50, p95 = statistics.median(values), statistics.quantiles(values, n=20)[18]
            print(f"changes at {args.rate:g}/s, {label}: {len(values)} of {len(created)}; p50 "
                  f"{p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms (polled every 20 ms)")
            figures.append(results.Figure(f"{label} p95, {size}", "ms", [p95 * 1000], target))
        print("kubesim's controllers during the changes (seconds reconciling, longest single reconcile):")
        for name, entry in sorted(cluster.stats()["controllers"].items(), key=lambda item: -item[1]["seconds"])[:6]:
            spent = entry["seconds"] - controllers_before.get(name, {}).get("seconds", 0.0)
            print(f"  {name}: {spent:.1f} s, longest {entry['max_seconds'] * 1000:.0f} ms")
        print("the watcher's hops during the changes (its /metrics):")
        print("\n".join(live_pages.hop_summary(before, live_pages.scrape(metrics_port))))
        now, peak = live_pages.rss_mib(watcher.pid)
        print(f"memory: watcher RSS now / peak {now:.0f} / {peak:.0f} MiB")
        figures.append(results.Figure(f"watcher RSS peak, {args.workloads:,} outside Workloads", "MiB", [peak],
                                      "< 500"))
        figures.append(results.Figure(f"changes created per second (asked {args.rate:g})", "1/s", [achieved]))
        results.record("outside_sync.py", vars(args), figures, machine)
    finally:
        if watcher is not None:
            watcher.terminate()
            watcher.wait(timeout=30)
        cluster.stop()


if __name__ == "__main__":
    main()
