"""Log follows against a served portal: N `gpu logs -f`-style follows of a running workload for S seconds while a
signed-in user keeps requesting pages, everything on 127.0.0.1.

It starts, and stops by the pid it recorded, gunicorn as every artefact starts it (only --bind: the rest from
./gunicorn.conf.py; `--gunicorn-args` adds flags, e.g. "--worker-class sync --workers 3 --threads 1", the former
configuration), on its own database (`<name>_bench_follow` next to DATABASE_URL's, flushed and seeded with the demo
organisation) with the embedded broker in a temporary folder: no worker, no cluster. The workload's stored log tail
gains a line every `--line-every` seconds, as the worker's reads would store them.

Measured: page latency (the workload's page, the workload list, `GET /api/v1/workloads/`) first without follows,
then while the follows stream; each follow's duration, lines received and whether it broke; the most database
connections the web held meanwhile. Machine: `uptime` before and after (the machine is shared; say so when writing
results down).

Usage: python -m portal.devservices .venv/bin/python bench/follow_load.py [--followers 50] [--seconds 60]
       [--baseline 15] [--line-every 1] [--pages-every 0.5] [--gunicorn-args "..."]
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import report as bench_results  # noqa: E402 - bench/report.py, beside this script


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def use_bench_database(workdir: Path) -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("Run it through portal.devservices with a PostgreSQL: the served portal shares the database.")
    base, name = url.rsplit("/", 1)
    bench_name = f"{name}_bench_follow"
    import psycopg

    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [bench_name]).fetchone():
            connection.execute(f'CREATE DATABASE "{bench_name}"')
    os.environ.update({"DATABASE_URL": f"{base}/{bench_name}", "REDIS_URL": "", "PORTAL_RUN_DIR": str(workdir),
                       "STATIC_ROOT": str(workdir / "static"), "DJANGO_SETTINGS_MODULE": "portal.settings"})
    (workdir / "broker" / "control").mkdir(parents=True)
    return bench_name


def prepare() -> dict:
    """Flush, migrate, seed the demo organisation; alice's running workload with a log tail, a token, a session."""
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.utils import timezone

    from apps.accounts.services import personal_token_create
    from apps.org.demo import seed_demo
    from apps.org.models import NodePool, Project
    from apps.workloads import services
    from apps.workloads.models import Kind, Status, Workload, WorkloadLogTail

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    seed_demo()
    alice = get_user_model().objects.get(username="alice")
    workload = services.workload_submit(
        actor=alice, project=Project.objects.get(slug="vision"), node_pool=NodePool.objects.get(slug="h100"),
        kind=Kind.TRAINING, name="followed", image="pytorch/pytorch:2.4.0", command=["sleep", "86400"], gpus=1,
        model_label="resnet", data_class="public")
    now = timezone.now()
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING, admitted_at=now - timedelta(minutes=1),
                                                   started_at=now - timedelta(minutes=1), job_name=f"wl-{workload.pk}")
    tail = WorkloadLogTail.objects.create(workload=workload, pod=f"wl-{workload.pk}-bench", text="line 0\n",
                                          fetched_at=now)
    browser = Client()
    browser.force_login(alice)
    return {"workload": workload.pk, "tail": tail.pk, "token": personal_token_create(user=alice, name="bench")[1],
            "session": browser.cookies["sessionid"].value}


def serve(workdir: Path, gunicorn_args: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "LOG_LEVEL": "WARNING"}
    for name in ("GUNICORN_CMD_ARGS", "WEB_CONCURRENCY", "WEB_THREADS"):
        env.pop(name, None)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"], env=env, cwd=ROOT,
                   check=True)
    port = free_port()
    log = (workdir / "web.log").open("wb")
    web = subprocess.Popen([sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind",
                            f"127.0.0.1:{port}", *gunicorn_args], env=env, cwd=ROOT, stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return web, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"gunicorn did not start; see {workdir / 'web.log'}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def run(base: str, fixture: dict, *, followers: int, seconds: float, baseline: float, line_every: float,
        pages_every: float) -> dict:
    import requests
    from django.db import connection
    from django.utils import timezone

    from apps.workloads.models import WorkloadLogTail

    pages = [f"/workloads/{fixture['workload']}/", "/workloads/", "/api/v1/workloads/"]
    times: dict[str, list[float]] = {"without follows": [], "with follows": []}
    errors: list[str] = []
    phase = {"name": "warm-up"}
    stop = threading.Event()

    def reader() -> None:
        session = requests.Session()
        session.cookies.set("sessionid", fixture["session"])
        while not stop.is_set():
            for path in pages:
                started = time.perf_counter()
                response = session.get(base + path, timeout=120)
                elapsed = time.perf_counter() - started
                if response.status_code != 200:
                    errors.append(f"{path}: {response.status_code}")
                if phase["name"] in times:
                    times[phase["name"]].append(elapsed)
            stop.wait(pages_every)

    follows: list[dict] = []

    def follower() -> None:
        record: dict = {"lines": 0, "broken": "", "began": time.monotonic(), "ended": None}
        follows.append(record)
        url = f"{base}/api/v1/workloads/{fixture['workload']}/logs/?follow=true&timeout={int(seconds)}"
        try:
            with requests.get(url, stream=True, timeout=(30, None),
                              headers={"Authorization": f"Token {fixture['token']}"}) as response:
                response.raise_for_status()
                for _line in response.iter_lines():
                    record["lines"] += 1
        except requests.RequestException as error:
            record["broken"] = error.__class__.__name__
        record["ended"] = time.monotonic()

    warm = requests.Session()  # every worker has rendered each page once before anything is timed
    warm.cookies.set("sessionid", fixture["session"])
    for _ in range(6):
        for path in pages:
            warm.get(base + path, timeout=120)
    reading = threading.Thread(target=reader)
    reading.start()
    phase["name"] = "without follows"
    time.sleep(baseline)
    phase["name"] = "warm-up"
    threads = [threading.Thread(target=follower) for _ in range(followers)]
    for thread in threads:
        thread.start()
    began = time.monotonic()
    while sum(1 for record in follows if record["lines"]) < followers and time.monotonic() - began < 60:
        time.sleep(0.1)
    phase["name"] = "with follows"
    connections, number, next_line = 0, 0, time.monotonic() + line_every
    while any(thread.is_alive() for thread in threads):
        time.sleep(0.2)
        if time.monotonic() >= next_line:
            number += 1
            next_line += line_every
            text = "".join(f"line {n}\n" for n in range(max(0, number - 99), number + 1))
            WorkloadLogTail.objects.filter(pk=fixture["tail"]).update(text=text, fetched_at=timezone.now())
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                               "AND pid <> pg_backend_pid()")
                connections = max(connections, cursor.fetchone()[0])
    stop.set()
    reading.join()
    return {"times": times, "errors": errors, "follows": follows, "connections": connections, "lines": number + 1}


def report(result: dict, args: argparse.Namespace, machine: bench_results.Machine) -> None:
    print(f"\n{args.followers} follows of {args.seconds:g} s, a line every {args.line_every:g} s, pages every "
          f"{args.pages_every:g} s; gunicorn.conf.py {args.gunicorn_args or '(as shipped)'}, {os.cpu_count()} cores\n")
    print("| pages (detail, list, API list) | count | median ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for label, values in result["times"].items():
        if values:
            print(f"| {label} | {len(values)} | {statistics.median(values) * 1000:.0f} | "
                  f"{percentile(values, 0.95) * 1000:.0f} | {max(values) * 1000:.0f} |")
    follows = result["follows"]
    lasted = [(record["ended"] or time.monotonic()) - record["began"] for record in follows]
    broken = [record["broken"] for record in follows if record["broken"]]
    print(f"\nfollows: {len(follows)}, {len(broken)} broken ({', '.join(sorted(set(broken))) or '-'}); lasted min "
          f"{min(lasted):.1f} s / median {statistics.median(lasted):.1f} s / max {max(lasted):.1f} s; lines received "
          f"min {min(record['lines'] for record in follows)} of {result['lines']} written")
    print(f"page errors: {len(result['errors'])} {result['errors'][:3]}; most database connections of the web "
          f"meanwhile: {result['connections']}")
    figures = [bench_results.Figure(f"{label} p95, {args.followers} follows", "ms",
                                    [percentile(values, 0.95) * 1000]) for label, values in result["times"].items()
               if values]
    figures.append(bench_results.Figure(f"follows broken of {args.followers}", "follows", [len(broken)], "0"))
    figures.append(bench_results.Figure("page errors", "requests", [len(result["errors"])], "0"))
    bench_results.record("follow_load.py", vars(args), figures, machine)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--followers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60, help="how long each follow lasts (its timeout)")
    parser.add_argument("--baseline", type=float, default=15, help="seconds of pages without follows first")
    parser.add_argument("--line-every", type=float, default=1.0)
    parser.add_argument("--pages-every", type=float, default=0.5, help="seconds between two rounds of pages")
    parser.add_argument("--gunicorn-args", default="", help='flags after --bind, e.g. "--worker-class sync '
                                                            '--workers 3 --threads 1" (the former configuration)')
    args = parser.parse_args()
    machine = bench_results.Machine()
    workdir = Path(tempfile.mkdtemp(prefix="bench-follow-"))
    use_bench_database(workdir)
    import django

    django.setup()
    fixture = prepare()
    print("before:", subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
    web, base = serve(workdir, shlex.split(args.gunicorn_args))
    try:
        result = run(base, fixture, followers=args.followers, seconds=args.seconds, baseline=args.baseline,
                     line_every=args.line_every, pages_every=args.pages_every)
        report(result, args, machine)
    finally:
        os.killpg(web.pid, signal.SIGTERM)  # the group this process leads (its session, started here)
        try:
            web.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(web.pid, signal.SIGKILL)
        print("after:", subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
        print(f"logs: {workdir}")


if __name__ == "__main__":
    main()
