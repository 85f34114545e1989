"""Memory of the embedded stack (`make run`), per process: idle, under a burst of submissions, and the watcher over a
soak.

It starts `python -m portal.launcher` as bench/submit_load.py's `--embedded` mode does (a fresh run folder, SQLite,
the file-system broker, the launcher's kubesim, free ports), waits until the demo organisation is synced into Kueue
and `--settle` seconds more, then samples every process the launcher started (its children and theirs: gunicorn's
and Celery's workers) from /proc every second:

1. idle, for `--idle-seconds`;
2. under load: `--submissions` API submissions from `--clients` clients (submit_load.py's load, `--pollers` polling
   users), until none is left "submitting";
3. with `--soak-minutes`: `--soak-jobs` Jobs created straight in the cluster (work submitted outside the portal,
   which the watcher mirrors), then the watcher sampled while they run, finish and `--soak-churn` more per minute
   come, to see whether its memory stays flat.

RSS counts every page a process maps, the pages forked processes share counted in each; PSS divides shared pages
among their sharers, so the PSS total is what the stack takes from the machine. "portal" is the launcher and the
processes of the portal; kubesim (the emulated cluster) and Prometheus (when installed) are listed apart: a real
installation runs neither beside the portal.

Usage: .venv/bin/python bench/memory.py [--settle 30] [--idle-seconds 30] [--submissions 100] [--clients 20]
       [--pollers 0] [--soak-minutes 0] [--soak-jobs 10000] [--soak-churn 60]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import report as results  # noqa: E402 - bench/report.py, beside this script
import submit_load  # noqa: E402

CLUSTER = ("kubesim", "prometheus")
MIB = 1024 * 1024
TICKS = os.sysconf("SC_CLK_TCK")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def descendants(root: int) -> dict[int, int]:
    """pid -> parent pid of root and every process under it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _read(entry / "stat")):
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[-1].split()[1])
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    tree, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in parents:
            tree[pid] = parents[pid]
            todo.extend(children[pid])
    return tree


def label(pid: int, parent: int, labels: dict[int, str]) -> str:
    argv = _read(Path(f"/proc/{pid}/cmdline")).split("\0")
    line = " ".join(argv)
    if "portal.launcher" in line:
        return "launcher"
    if "gunicorn" in line:
        return "web worker" if labels.get(parent, "").startswith("web") else "web (gunicorn master)"
    if "celery" in line:
        role = "beat" if " beat" in line else "notifier" if "notifier@" in line else "worker"
        return f"{role} child" if labels.get(parent, "").startswith(role) else role
    if "watch_cluster" in line:
        return "watcher"
    if "kubesim" in line and "prometheus" not in line:
        return "kubesim"
    if "prometheus" in line:
        return "prometheus"
    return Path(argv[0]).name if argv and argv[0] else "?"


def sample(root: int) -> dict[int, dict]:
    """pid -> {label, rss, pss} (bytes) of the launcher's tree, parents labelled before their children."""
    tree = descendants(root)
    labels: dict[int, str] = {}
    out: dict[int, dict] = {}
    for pid in sorted(tree, key=lambda p: (p != root, p)):
        labels[pid] = label(pid, tree[pid], labels)
    for pid, name in labels.items():
        rss = pss = 0
        for line in _read(Path(f"/proc/{pid}/smaps_rollup")).splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
        stat = _read(Path(f"/proc/{pid}/stat")).rsplit(")", 1)[-1].split()
        cpu = (int(stat[11]) + int(stat[12])) / TICKS if len(stat) > 12 else 0.0  # utime + stime
        if rss:
            out[pid] = {"label": name, "rss": rss, "pss": pss, "cpu": cpu}
    return out


class Sampler:
    """Samples the tree every `every` seconds in a thread while a phase runs."""

    def __init__(self, root: int, every: float = 1.0) -> None:
        self.root, self.every = root, every
        self.samples: list[tuple[float, dict[int, dict]]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append((time.monotonic(), sample(self.root)))
            if self.stop.wait(self.every):
                return

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()


def totals(snapshot: dict[int, dict], key: str) -> tuple[int, int]:
    portal = sum(p[key] for p in snapshot.values() if p["label"] not in CLUSTER)
    cluster = sum(p[key] for p in snapshot.values() if p["label"] in CLUSTER)
    return portal, cluster


def describe(phase: str, samples: list[tuple[float, dict[int, dict]]]) -> dict:
    """Per process its peak RSS and PSS over the phase; the peak of the totals (over samples, not the sum of peaks)."""
    peaks: dict[int, dict] = {}
    for _, snapshot in samples:
        for pid, proc in snapshot.items():
            peak = peaks.setdefault(pid, {"label": proc["label"], "rss": 0, "pss": 0})
            peak["rss"], peak["pss"] = max(peak["rss"], proc["rss"]), max(peak["pss"], proc["pss"])
    portal_rss = max(totals(s, "rss")[0] for _, s in samples)
    portal_pss = max(totals(s, "pss")[0] for _, s in samples)
    cluster_rss = max(totals(s, "rss")[1] for _, s in samples)
    first, last = samples[0][1], samples[-1][1]
    seconds = samples[-1][0] - samples[0][0]
    print(f"\n{phase}: {len(samples)} samples over {seconds:.0f} s; peak per process (MiB), CPU seconds used\n")
    print("| process | pid | RSS | PSS | CPU s |")
    print("|---|---:|---:|---:|---:|")
    for pid, peak in sorted(peaks.items(), key=lambda item: (item[1]["label"] in CLUSTER, item[1]["label"], item[0])):
        cpu = last.get(pid, {}).get("cpu", 0.0) - first.get(pid, {}).get("cpu", 0.0)
        print(f"| {peak['label']} | {pid} | {peak['rss'] / MIB:.0f} | {peak['pss'] / MIB:.0f} | {cpu:.1f} |")
    print(f"\nportal total: RSS {portal_rss / MIB:.0f} MiB, PSS {portal_pss / MIB:.0f} MiB (peak of the sums); "
          f"processes {len([p for p in peaks.values() if p['label'] not in CLUSTER])}; "
          f"kubesim and Prometheus apart: RSS {cluster_rss / MIB:.0f} MiB")
    return {"portal_rss_mib": round(portal_rss / MIB, 1), "portal_pss_mib": round(portal_pss / MIB, 1),
            "cluster_rss_mib": round(cluster_rss / MIB, 1),
            "processes": {f"{p['label']} {pid}": round(p["rss"] / MIB, 1) for pid, p in peaks.items()}}


def soak(stack: submit_load.EmbeddedStack, gateway, *, minutes: float, jobs: int, churn: int) -> dict:
    """Jobs created straight in the cluster (outside the portal) in the Vision and NLP namespaces, then more each
    minute; the watcher's RSS sampled throughout."""
    assert stack.proc is not None
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"labels": {
        "kueue.x-k8s.io/queue-name": "elastic-l40s-shared"}},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "busybox", "command": ["sleep", "120"],
            "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}}}
    created = 0

    def create(count: int) -> None:
        nonlocal created
        for _ in range(count):
            namespace = ("proj-vision", "proj-nlp")[created % 2]
            job = {**body, "metadata": {**body["metadata"], "name": f"soak-{created}", "namespace": namespace}}
            gateway.create(job)
            created += 1

    with Sampler(stack.proc.pid, every=5.0) as sampler:
        began = time.monotonic()
        create(jobs)
        print(f"soak: {jobs} Jobs created in {time.monotonic() - began:.0f} s")
        end = began + minutes * 60
        while time.monotonic() < end:
            minute = time.monotonic()
            create(churn)
            time.sleep(max(0.0, min(60 - (time.monotonic() - minute), end - time.monotonic())))
    watcher = [(at - began, next((p["rss"] for p in snap.values() if p["label"] == "watcher"), 0))
               for at, snap in sampler.samples]
    watcher = [(at, rss) for at, rss in watcher if rss]
    third = max(1, len(watcher) // 3)
    early = statistics.median(rss for _, rss in watcher[third:2 * third] or watcher)
    late = statistics.median(rss for _, rss in watcher[-third:])
    print(f"\nsoak: {created} Jobs over {minutes:g} min; watcher RSS (MiB) at 0 / 1/3 / 2/3 / end: "
          + " / ".join(f"{watcher[min(len(watcher) - 1, i * len(watcher) // 3)][1] / MIB:.0f}" for i in range(3))
          + f" / {watcher[-1][1] / MIB:.0f}; median of the middle third {early / MIB:.0f}, of the last third "
            f"{late / MIB:.0f} ({(late - early) / max(1, early) * 100:+.1f} %)")
    return {"jobs": created, "minutes": minutes, "watcher_middle_mib": round(early / MIB, 1),
            "watcher_last_mib": round(late / MIB, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settle", type=float, default=30.0, help="seconds after the first sync before sampling")
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--submissions", type=int, default=100)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--pollers", type=int, default=0)
    parser.add_argument("--soak-minutes", type=float, default=0.0)
    parser.add_argument("--soak-jobs", type=int, default=10000)
    parser.add_argument("--soak-churn", type=int, default=60, help="Jobs created per minute of the soak")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    environment = submit_load.EmbeddedStack.bench_environment(workdir)
    os.environ.clear()
    os.environ.update(environment)
    os.environ["KUBECONFIG"] = str(workdir / "kubeconfig")
    import django

    django.setup()
    from worker.gateway import Gateway, api_client_from_settings

    stack = submit_load.EmbeddedStack(workdir)
    machine = results.Machine()
    print("before:", machine.uptime())
    try:
        stack.start()
        assert stack.proc is not None
        gateway = Gateway(api_client_from_settings())
        submit_load.await_kueue_synced(gateway)
        time.sleep(args.settle)
        with Sampler(stack.proc.pid) as idle:
            time.sleep(args.idle_seconds)
        idle_result = describe(f"idle ({args.idle_seconds:g} s, {args.settle:g} s after the first sync)",
                               idle.samples)
        people = submit_load.add_people(max(args.clients, args.pollers, 1))["people"]
        with Sampler(stack.proc.pid) as loaded:
            submit_load.run_load(stack.url, people, submissions=args.submissions, clients=args.clients,
                                 pollers=args.pollers, followers=0, think=0.0, queue_every=3)
        load_result = describe(f"under load ({args.submissions} submissions from {args.clients} clients, "
                               f"{args.pollers} pollers)", loaded.samples)
        figures = [results.Figure("embedded stack idle, portal processes' RSS", "MiB",
                                  [idle_result["portal_rss_mib"]], target="<= 600"),
                   results.Figure("embedded stack under submit load, portal processes' RSS (peak)", "MiB",
                                  [load_result["portal_rss_mib"]], target="<= 900")]
        if args.soak_minutes:
            soaked = soak(stack, gateway, minutes=args.soak_minutes, jobs=args.soak_jobs, churn=args.soak_churn)
            figures.append(results.Figure(
                f"watcher RSS growth over a {args.soak_minutes:g} min soak ({soaked['jobs']} Jobs)", "%",
                [round((soaked["watcher_last_mib"] - soaked["watcher_middle_mib"]) / soaked["watcher_middle_mib"]
                       * 100, 1)], target="flat"))
        print("after:", machine.uptime())
        results.record("memory.py", vars(args), figures, machine)
    finally:
        stack.stop()
        print(f"logs: {workdir}")


if __name__ == "__main__":
    main()
