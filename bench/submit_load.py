"""Submissions under load against a served portal: 1,000 API submissions from 20 concurrent clients while
50 signed-in users poll their pages, everything on 127.0.0.1.

It starts, and stops by the pids it recorded, the whole stack as `make run` does: gunicorn as every artefact starts
it (only --bind: the rest from ./gunicorn.conf.py; `--gunicorn-args` adds flags, e.g. the former configuration
"--worker-class sync --workers 3 --threads 1" for a before/after comparison), the Celery worker (prefork, concurrency
2), Celery beat (the outbox sweep), the watcher, its own redis-server on a free port and kubesim (real clock,
--async-settle, as a real cluster settles), on its own database (`<name>_bench_load` next to DATABASE_URL's; it is
flushed and seeded with the demo organisation plus 50 researchers with personal API tokens).

Load:
- 20 API clients (token auth), each submitting 50 one-GPU training jobs to the L40S pool
  (`POST /api/v1/workloads/`), back to back (closed loop) or `--think` seconds apart on average (a person or a
  script between two submissions: each client starts at a random moment within the first pause and pauses for an
  exponentially distributed time, so twenty independent clients never submit in step); half in Vision, half in
  NLP, so most wait in Kueue's queues.
- 50 page users (session cookies), each opening its two pages at a moment of its own within the first 5 s (until
  2026-12-07 evening all fifty at once, a burst of a hundred full pages in the first second), then polling every
  5 s as the pages' htmx does: their workload list, and every third poll (`--queue-every`; 0: never) their
  project's queue, with If-None-Match (the browser cache's revalidation; 304 when unchanged). They poll until every
  submission has left `submitting`.
- `--followers N` log follows (`GET .../logs/?follow=true`, as `gpu logs -f`) of the first submitted workload, open
  for the whole run.

Measured: submit latency (median, p95, max) and throughput, poll latency per page, how the follows fared (broken
streams, how long they lasted), submit-to-Job lag (the row's `Created` event minus its creation), and afterwards
exactly-once: one Job per workload in kubesim, nothing left submitting, every intent done. Machine: `uptime` before
and after, load average samples and CPU busy share over the run (the machine is shared; say so when writing results
down).

With `--embedded` it measures `make run` itself instead: `python -m portal.launcher` in a fresh run folder (SQLite,
the file-system broker, the launcher's own kubesim, every process as the launcher starts it, on free ports), with the
researchers added to its SQLite database once the demo organisation is seeded and synced into Kueue; no
portal.devservices needed. The headline there is how long a submission stays "submitting" (its POST to the row's
`Created` event, written when its Job exists).

Usage: python -m portal.devservices .venv/bin/python bench/submit_load.py [--submissions 1000] [--clients 20]
       [--pollers 50] [--followers 0] [--think 0] [--queue-every 3] [--gunicorn-args "..."]
       .venv/bin/python bench/submit_load.py --embedded --submissions 100 --clients 20 --pollers 0
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import report as results  # noqa: E402 - bench/report.py, beside this script

POLL_SECONDS = 5.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def use_bench_database() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("Run it through portal.devservices with a PostgreSQL: the served stack shares the database.")
    base, name = url.rsplit("/", 1)
    bench_name = f"{name}_bench_load"
    import psycopg

    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [bench_name]).fetchone():
            connection.execute(f'CREATE DATABASE "{bench_name}"')
    os.environ["DATABASE_URL"] = f"{base}/{bench_name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")


def postmaster_pid() -> int:
    """The PostgreSQL server's main process (the parent of this connection's backend), to read its CPU: it is local
    here, and its backends are its children. Other clients of the same server count too: say so when quoting it."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    return int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])


class Stack:
    """The processes of a served portal; each in its own session, stopped by the pid recorded at start."""

    def __init__(self, workdir: Path, gunicorn_args: list[str]) -> None:
        self.workdir = workdir
        self.gunicorn_args = gunicorn_args
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.redis_port, self.web_port = free_port(), free_port()
        self.env: dict[str, str] = {}

    def start(self, kubeconfig: str) -> None:
        self.env = {**os.environ, "REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0", "KUBECONFIG": kubeconfig,
                    "PORTAL_RUN_DIR": str(self.workdir), "STATIC_ROOT": str(self.workdir / "static"),
                    "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "WARNING", "DJANGO_SETTINGS_MODULE": "portal.settings"}
        self._spawn("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"])
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
                       env=self.env, cwd=ROOT, check=True)
        celery = [sys.executable, "-m", "celery", "-A", "portal.celery"]
        self._spawn("worker", [*celery, "worker", "--loglevel", "WARNING", "--concurrency", "2",
                               "--without-gossip", "--without-mingle"])
        self._spawn("beat", [*celery, "beat", "--loglevel", "WARNING", "--schedule",
                             str(self.workdir / "celerybeat-schedule")])
        self._spawn("watcher", [sys.executable, "manage.py", "watch_cluster"])
        self._spawn("web", [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind",
                            f"127.0.0.1:{self.web_port}", *self.gunicorn_args])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.web_port), timeout=1):
                return
            time.sleep(0.5)
        raise RuntimeError("gunicorn did not start; see " + str(self.workdir / "web.log"))

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(argv, env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # the group this process leads (its session, started here)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"


class EmbeddedStack:
    """`make run` as a newcomer starts it: portal.launcher in its own session with a fresh run folder (SQLite, the
    file-system broker, its own kubesim and, when installed, Prometheus), on free ports; stopped by SIGTERM to the
    launcher, which stops its children (then SIGKILL to its group if it did not)."""

    def __init__(self, workdir: Path, extra_env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.web_port, self.kubesim_port, self.prometheus_port = free_port(), free_port(), free_port()
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def bench_environment(workdir: Path) -> dict[str, str]:
        """The environment of the embedded mode: nothing that points elsewhere (a PostgreSQL, a Redis, a cluster)."""
        env = {key: value for key, value in os.environ.items()
               if key not in {"DATABASE_URL", "REDIS_URL", "KUBECONFIG", "PROMETHEUS_URL", "PORTAL_MODE"}}
        env.update({"PORTAL_RUN_DIR": str(workdir), "DJANGO_SETTINGS_MODULE": "portal.settings"})
        return env

    def start(self, timeout: float = 600.0) -> None:
        env = {**self.bench_environment(self.workdir), "PORTAL_PORT": str(self.web_port),
               "KUBESIM_PORT": str(self.kubesim_port), "PROMETHEUS_PORT": str(self.prometheus_port),
               "STATIC_ROOT": str(self.workdir / "static"), **self.extra_env}
        log = (self.workdir / "launcher.log").open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "portal.launcher"], env=env, cwd=ROOT, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the launcher exited; see {self.workdir / 'launcher.log'}")
            if b"GPU Portal is running" in (self.workdir / "launcher.log").read_bytes():
                return
            time.sleep(0.5)
        raise RuntimeError(f"the launcher did not serve in {timeout:g} s; see {self.workdir / 'launcher.log'}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)  # the launcher's own group: it stops its children's groups
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def kubeconfig(self) -> str:
        return str(self.workdir / "kubeconfig")

    def parts(self) -> dict[str, int]:
        """The launcher's children by what they run (the launcher itself: its supervision only)."""
        assert self.proc is not None
        found = {"launcher": self.proc.pid}
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if entry.name.isdigit() and int(fields[1]) == self.proc.pid:
                    argv = (entry / "cmdline").read_bytes().split(b"\0")
                    found[self.part_name([arg.decode() for arg in argv])] = int(entry.name)
        return found

    @staticmethod
    def part_name(argv: list[str]) -> str:
        if "gunicorn" in argv:
            return "web"
        if "watch_cluster" in argv:
            return "watcher"
        if "prometheus" in argv or Path(argv[0]).name == "prometheus":  # kubesim's CLI execs Prometheus itself
            return "prometheus"
        if "kubesim" in argv:
            return "kubesim"
        if "worker" in argv:
            return "notifier" if any(arg.startswith("notifier@") for arg in argv) else "worker"
        return " ".join(Path(arg).name for arg in argv[:4])


def await_kueue_synced(gateway, timeout: float = 300.0) -> None:
    """The worker's first reconcile after seeding has made the projects' namespaces and queues (a submission before
    that waits for a retry): wait for it as a newcomer would wait for the page to load."""
    from apps.core.models import Intent
    from worker.gateway import ClusterError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Intent.objects.filter(kind="kueue.sync", done_at__isnull=True).exists():
            with contextlib.suppress(ClusterError):
                gateway.get("Namespace", "proj-nlp")
                return
        time.sleep(1)
    raise RuntimeError("Kueue was not synced in time")


def prepare(users: int, gateway) -> dict:
    """Flush, migrate, seed the demo organisation, reconcile Kueue, then add_people()."""
    from django.core.management import call_command

    from apps.core.models import Intent
    from apps.org.demo import seed_demo
    from worker.kueue_sync import desired_from_database, reconcile

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    seed_demo()
    reconcile(gateway, desired_from_database())
    Intent.objects.filter(kind="kueue.sync").delete()  # done just now; the worker need not repeat it
    return add_people(users)


def add_people(users: int) -> dict:
    """`users` researchers (half Vision, half NLP) with API tokens and signed-in sessions."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from apps.accounts import services as accounts
    from apps.org.models import Project

    admin = get_user_model().objects.get(username="admin")
    projects = [Project.objects.get(slug="vision"), Project.objects.get(slug="nlp")]
    people = []
    for index in range(users):
        project = projects[index % 2]
        user = get_user_model().objects.create_user(f"bench{index:02d}", email=f"bench{index:02d}@example.org")
        accounts.role_binding_create(actor=admin, role="researcher", user=user, project=project)
        client = Client()
        client.force_login(user)
        people.append({"user": user.username, "project": project.slug,
                       "token": accounts.personal_token_create(user=user, name="bench")[1],
                       "session": client.cookies["sessionid"].value})
    return {"people": people}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def cpu_seconds(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user and system) each named process has used with its descendants, those still running and those
    it has reaped, from /proc: where the machine's time went, by part of the stack."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended while we looked
            continue
        parent[int(entry.name)] = int(fields[1])
        used[int(entry.name)] = sum(int(value) for value in fields[11:15]) / tick  # utime, stime, cutime, cstime
    children: dict[int, list[int]] = defaultdict(list)
    for pid, ppid in parent.items():
        children[ppid].append(pid)

    named = set(roots.values())

    def tree(pid: int) -> float:  # a descendant named itself is counted under its own name only
        return used.get(pid, 0.0) + sum(tree(child) for child in children.get(pid, []) if child not in named)

    return {name: tree(pid) for name, pid in roots.items()}


class Machine:
    """Load average and CPU busy share, sampled while the load runs; with `parts` (name -> pid of a process this
    bench started), the CPU each part used over the run."""

    def __init__(self, parts: Callable[[], dict[str, int]] | None = None) -> None:
        self.loads: list[float] = []
        self.stop = threading.Event()
        self.parts = parts or dict
        self.start_cpu = self._cpu()
        self.start_parts = cpu_seconds(self.parts())
        self.start_own = self._own()
        self.part_seconds: dict[str, float] = {}

    @staticmethod
    def _cpu() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields), idle

    @staticmethod
    def _own() -> float:
        """This process's own CPU, its children (kubesim in the served mode) not included: the bench's clients."""
        times = os.times()
        return times.user + times.system

    def run(self) -> None:
        """A sample at once and every 2 s, so a run shorter than a sampling period still says its load."""
        self.loads.append(os.getloadavg()[0])
        while not self.stop.wait(2.0):
            self.loads.append(os.getloadavg()[0])
        ended = cpu_seconds(self.parts())
        self.part_seconds = {name: ended[name] - self.start_parts[name] for name in ended if name in self.start_parts}
        self.part_seconds["the bench's clients"] = self._own() - self.start_own
        self.end_cpu = self._cpu()

    def busy(self) -> float:
        total, idle = getattr(self, "end_cpu", None) or self._cpu()
        return 1 - (idle - self.start_cpu[1]) / max(1, total - self.start_cpu[0])

    def cpu_total(self) -> float:
        """CPU seconds the whole machine spent busy over the run (all cores)."""
        total, idle = getattr(self, "end_cpu", None) or self._cpu()
        busy_ticks = (total - self.start_cpu[0]) - (idle - self.start_cpu[1])
        return busy_ticks / os.sysconf("SC_CLK_TCK")


def run_load(base: str, people: list[dict], *, submissions: int, clients: int, pollers: int, followers: int,
             think: float, queue_every: int, parts: Callable[[], dict[str, int]] | None = None) -> dict:
    import requests

    from apps.workloads.models import Status, Workload

    submit_times: list[float] = []
    submit_errors: list[str] = []
    polls: dict[str, list[float]] = defaultdict(list)
    sizes: dict[str, list[int]] = defaultdict(list)
    poll_status: dict[str, dict[int | str, int]] = defaultdict(lambda: defaultdict(int))
    lock = threading.Lock()
    submitting_done = threading.Event()
    drained = threading.Event()
    follows: list[dict] = []

    def submitter(person: dict, count: int, pace: random.Random) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Token {person['token']}"
        if think:  # clients that pause are independent: each begins at its own moment, not all twenty at once
            time.sleep(pace.uniform(0, think))
        for index in range(count):
            body = {"project": person["project"], "kind": "training", "name": f"load-{index}",
                    "image": "pytorch/pytorch:2.4.0", "command": ["sleep", "3600"], "node_pool": "l40s-shared",
                    "gpus": 1, "cpu": "1", "memory": "4Gi", "labels": {"model": "resnet50", "data_class": "public"}}
            started = time.perf_counter()
            try:
                response = session.post(f"{base}/api/v1/workloads/", json=body, timeout=60)
            except requests.RequestException as error:
                with lock:
                    submit_errors.append(error.__class__.__name__)
                continue
            elapsed = time.perf_counter() - started
            with lock:
                submit_times.append(elapsed)
                if response.status_code != 201:
                    submit_errors.append(f"{response.status_code} {response.text[:200]}")
            if think:  # a person's or a script's pause: exponential, so the clients never fall into step
                time.sleep(pace.expovariate(1 / think))

    def poller(person: dict) -> None:
        session = requests.Session()
        session.cookies.set("sessionid", person["session"])
        pages = {"workload list": "/workloads/", "project queue": f"/workloads/projects/{person['project']}/queue/"}
        etags: dict[str, str] = {}
        # Each user opens the pages at a moment of their own within the first poll period, not all fifty at once.
        if drained.wait(random.uniform(0, POLL_SECONDS)):
            return
        for label, path in pages.items():  # the first, full page load
            response = session.get(base + path, timeout=60)
            etags[label] = response.headers.get("ETag", "")
        drained.wait(POLL_SECONDS)
        count = 0
        while not drained.is_set():
            label = "project queue" if queue_every and count % queue_every == queue_every - 1 else "workload list"
            headers = {"HX-Request": "true"}
            if etags.get(label):
                headers["If-None-Match"] = etags[label]
            started = time.perf_counter()
            try:
                response = session.get(base + pages[label], headers=headers, timeout=60)
            except requests.RequestException as error:
                with lock:
                    poll_status[label][error.__class__.__name__] += 1
                continue
            elapsed = time.perf_counter() - started
            if response.status_code == 200:
                etags[label] = response.headers.get("ETag", "")
            with lock:
                polls[label].append(elapsed)
                sizes[label].append(len(response.content))
                poll_status[label][response.status_code] += 1
            count += 1
            drained.wait(max(0.0, POLL_SECONDS - elapsed))

    def follower(person: dict, workload_id: int) -> None:
        """`gpu logs -f` of a workload for the rest of the run (daemon: the stream ends with the served portal). It
        touches no database: a thread of this process would hold a connection of its own."""
        record = {"lines": 0, "broken": "", "began": time.monotonic(), "ended": None}
        with lock:
            follows.append(record)
        try:
            with requests.get(f"{base}/api/v1/workloads/{workload_id}/logs/?follow=true", stream=True,
                              timeout=(30, None), headers={"Authorization": f"Token {person['token']}"}) as response:
                response.raise_for_status()
                for _line in response.iter_lines():
                    record["lines"] += 1
        except requests.RequestException as error:
            record["broken"] = error.__class__.__name__
        record["ended"] = time.monotonic()

    # Warm up: every gunicorn worker has served the API and the pages once (templates compiled, URLs resolved).
    warm = requests.Session()
    warm.cookies.set("sessionid", people[0]["session"])
    for _ in range(6):
        warm.get(f"{base}/api/v1/workloads/", headers={"Authorization": f"Token {people[0]['token']}"}, timeout=60)
        warm.get(f"{base}/workloads/", timeout=60)
        warm.get(f"{base}/workloads/projects/{people[0]['project']}/queue/", timeout=60)
    per_client = [submissions // clients + (1 if i < submissions % clients else 0) for i in range(clients)]
    machine = Machine(parts)
    threads = [threading.Thread(target=machine.run, daemon=True)]
    threads += [threading.Thread(target=poller, args=(people[i % len(people)],), daemon=True) for i in range(pollers)]
    for thread in threads:
        thread.start()
    began = time.monotonic()
    submitters = [threading.Thread(target=submitter, args=(people[i % len(people)], per_client[i], random.Random(i)))
                  for i in range(clients)]
    for thread in submitters:
        thread.start()
    if followers:  # the first workload of the first client, followed as soon as it exists
        followed = None
        while followed is None and any(thread.is_alive() for thread in submitters):
            followed = Workload.objects.filter(owner__username=people[0]["user"]).order_by("pk").values_list(
                "pk", flat=True).first()
            time.sleep(0.2)
        for _ in range(followers if followed else 0):
            threading.Thread(target=follower, args=(people[0], followed), daemon=True).start()
    for thread in submitters:
        thread.join()
    submit_seconds = time.monotonic() - began
    submitting_done.set()
    while Workload.objects.filter(status=Status.SUBMITTING).exists() and time.monotonic() - began < 600:
        time.sleep(0.5)
    drain_seconds = time.monotonic() - began
    drained.set()
    machine.stop.set()
    ended = time.monotonic()
    for record in follows:  # as they stood when the run ended; the streams end with the served portal
        record["ended"] = record["ended"] or ended
    for thread in threads:
        thread.join(timeout=POLL_SECONDS + 65)
    return {"submit_times": submit_times, "submit_errors": submit_errors, "submit_seconds": submit_seconds,
            "drain_seconds": drain_seconds, "polls": polls, "sizes": sizes, "poll_status": poll_status,
            "follows": follows, "loads": machine.loads, "busy": machine.busy(), "cpu_total": machine.cpu_total(),
            "part_seconds": machine.part_seconds}


def check(gateway) -> dict:
    """Exactly once: one Job per workload (by its label), nothing submitting, every intent done; the lag."""
    from apps.core.kueue_names import WORKLOAD_ID_LABEL
    from apps.core.models import Intent
    from apps.workloads.models import Status, Workload, WorkloadEvent

    jobs: dict[str, int] = defaultdict(int)
    for namespace in ("proj-vision", "proj-nlp"):
        for job in gateway.list("Job", namespace=namespace):
            jobs[job["metadata"]["labels"][WORKLOAD_ID_LABEL]] += 1
    rows = dict(Workload.objects.values_list("pk", "created_at"))
    created = dict(WorkloadEvent.objects.filter(to_status=Status.QUEUED, reason="Created").values_list(
        "workload_id", "at"))
    lags = [(created[pk] - at).total_seconds() for pk, at in rows.items() if pk in created]
    return {"workloads": len(rows), "with_one_job": sum(1 for pk in rows if jobs.get(str(pk)) == 1),
            "duplicated": sum(1 for count in jobs.values() if count > 1),
            "submitting": Workload.objects.filter(status=Status.SUBMITTING).count(),
            "open_intents": Intent.objects.filter(done_at__isnull=True, kind__startswith="workload.").count(),
            "lags": lags}


def report(load: dict, result: dict, args: argparse.Namespace) -> list[results.Figure]:
    def line(label: str, values: list[float], extra: str = "") -> None:
        print(f"| {label} | {len(values)} | {statistics.median(values) * 1000:.0f} | "
              f"{percentile(values, 0.95) * 1000:.0f} | {max(values) * 1000:.0f} |{extra}")

    print(f"\n{args.submissions} submissions, {args.clients} API clients "
          f"({f'{args.think:g} s apart on average' if args.think else 'back to back'}), {args.pollers} polling users, "
          f"{args.followers} log follows, gunicorn.conf.py {args.gunicorn_args or '(as shipped)'}, queue page every "
          f"{args.queue_every or 'no'} polls, {os.cpu_count()} cores\n")
    print("| request | count | median ms | p95 ms | max ms | |")
    print("|---|---:|---:|---:|---:|---|")
    line("`POST /api/v1/workloads/`", load["submit_times"],
         f" {args.submissions / load['submit_seconds']:.1f} submissions/s, {len(load['submit_errors'])} errors |")
    for label, values in load["polls"].items():
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(load["poll_status"][label].items(), key=str))
        size = statistics.median(load["sizes"][label])
        line(f"poll: {label}", values, f" {codes}; median {size:,.0f} bytes |")
    follows = load["follows"]
    if follows:
        lasted = [(record["ended"] or record["began"]) - record["began"] for record in follows]
        broken = [record["broken"] for record in follows if record["broken"]]
        print(f"\nlog follows: {len(follows)}, {len(broken)} broken during the run "
              f"({', '.join(sorted(set(broken))) or '-'}); lasted min {min(lasted):.0f} s / median "
              f"{statistics.median(lasted):.0f} s (the rest of the run); lines received median "
              f"{statistics.median(record['lines'] for record in follows):.0f}")
    lags = result["lags"]
    print(f"\nsubmit -> Job created: median {statistics.median(lags):.2f} s, p95 {percentile(lags, 0.95):.2f} s, "
          f"max {max(lags):.2f} s")
    print(f"all submitted in {load['submit_seconds']:.1f} s; all Jobs created after {load['drain_seconds']:.1f} s")
    loads = load["loads"]
    print(f"machine: load average (1 min) min {min(loads):.1f} / median {statistics.median(loads):.1f} / "
          f"max {max(loads):.1f} on {os.cpu_count()} cores; CPU busy {load['busy'] * 100:.0f}% over the run")
    parts = load["part_seconds"]
    rest = load["cpu_total"] - sum(parts.values())
    print(f"CPU seconds over the run ({load['cpu_total']:.0f} in all; per submission in brackets): " + ", ".join(
        f"{name} {seconds:.1f} ({seconds / args.submissions * 1000:.0f} ms)"
        for name, seconds in sorted(parts.items(), key=lambda item: -item[1]))
        + f", the rest (other work on the machine) {rest:.1f} ({rest / args.submissions * 1000:.0f} ms)")
    print(f"exactly once: {result['workloads']} workloads, {result['with_one_job']} with exactly one Job, "
          f"{result['duplicated']} duplicated, {result['submitting']} still submitting, "
          f"{result['open_intents']} open intents")
    if load["submit_errors"]:
        print("first errors:", load["submit_errors"][:3])
    # Left "submitting" (its Job created) after its POST; one never done counts as the whole run.
    waits = lags + [load["drain_seconds"]] * result["submitting"]
    mode = "make run" if args.embedded else "PostgreSQL + Redis"
    size = f"{args.submissions} submissions, {args.clients} clients, {args.pollers} pollers"
    if args.think:
        size += f", {args.think:g} s think (exponential)"
    if args.pollers:  # from 2026-12-07 evening; the runs before opened every page user's pages in the same second
        size += f", pages opened over {POLL_SECONDS:g} s"
    print(f"left submitting: p95 {percentile(waits, 0.95):.2f} s after the POST ({len(lags)} of {result['workloads']}"
          f" done)")
    return [results.Figure(f"{mode}: POST p95, {size}", "ms", [percentile(load["submit_times"], 0.95) * 1000],
                           target="<= 300" if not args.embedded else ""),
            results.Figure(f"{mode}: past submitting p95 after the POST, {size}", "s", [percentile(waits, 0.95)],
                           target="<= 2" if args.embedded else ""),
            *[results.Figure(f"{mode}: poll p95, {label}, {size}", "ms", [percentile(values, 0.95) * 1000],
                             target="<= 200") for label, values in load["polls"].items() if values]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--pollers", type=int, default=50)
    parser.add_argument("--followers", type=int, default=0, help="log follows open for the whole run")
    parser.add_argument("--think", type=float, default=0.0, help="seconds between two submissions of a client")
    parser.add_argument("--gunicorn-args", default="", help='flags after --bind, e.g. "--worker-class sync '
                                                            '--workers 3 --threads 1" (the former configuration)')
    parser.add_argument("--queue-every", type=int, default=3, help="every Nth poll is the project queue; 0: never")
    parser.add_argument("--embedded", action="store_true", help="measure make run (portal.launcher) instead")
    args = parser.parse_args()
    if args.embedded:
        main_embedded(args)
        return
    use_bench_database()
    import django

    django.setup()
    from kubesim.testing import KubesimProcess
    from worker.gateway import Gateway

    workdir = Path(tempfile.mkdtemp(prefix="bench-load-"))
    kubesim = KubesimProcess(str(workdir), "--async-settle", clock="real").start()
    stack = Stack(workdir, shlex.split(args.gunicorn_args))
    machine = results.Machine()
    print("before:", subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
    try:
        gateway = Gateway(kubesim.api_client())
        fixture = prepare(max(args.clients, args.pollers), gateway)
        stack.start(kubesim.kubeconfig_path)
        postmaster = postmaster_pid()
        load = run_load(stack.url, fixture["people"], submissions=args.submissions, clients=args.clients,
                        pollers=args.pollers, followers=args.followers, think=args.think,
                        queue_every=args.queue_every,
                        parts=lambda: {**{name: proc.pid for name, proc in stack.procs.items()},
                                       "kubesim": kubesim.proc.pid, "PostgreSQL (the whole server)": postmaster})
        figures = report(load, check(gateway), args)
        print("after:", subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
        results.record("submit_load.py", vars(args), figures, machine)
    finally:
        stack.stop()
        kubesim.stop()
        print(f"logs: {workdir}")


def main_embedded(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-embedded-"))
    environment = EmbeddedStack.bench_environment(workdir)
    os.environ.clear()
    os.environ.update(environment)
    os.environ["KUBECONFIG"] = str(workdir / "kubeconfig")
    import django

    django.setup()
    from worker.gateway import Gateway, api_client_from_settings

    stack = EmbeddedStack(workdir)
    machine = results.Machine()
    print("before:", subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
    try:
        started = time.monotonic()
        stack.start()
        gateway = Gateway(api_client_from_settings())
        await_kueue_synced(gateway)
        print(f"make run served and synced in {time.monotonic() - started:.0f} s")
        fixture = add_people(max(args.clients, args.pollers, 1))
        load = run_load(stack.url, fixture["people"], submissions=args.submissions, clients=args.clients,
                        pollers=args.pollers, followers=args.followers, think=args.think,
                        queue_every=args.queue_every, parts=stack.parts)
        figures = report(load, check(gateway), args)
        print("after:", subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
        results.record("submit_load.py", vars(args), figures, machine)
    finally:
        stack.stop()
        print(f"logs: {workdir}")


if __name__ == "__main__":
    main()
