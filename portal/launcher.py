"""`make run`: prepare the embedded portal and run its processes until Ctrl-C.

Migrates, collects static files, seeds the demo organisation, then starts every long-running process of
DESIGN section 2 under one supervisor; if one dies, the others are stopped so nothing runs half-alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("PORTAL_RUN_DIR", BASE_DIR / ".run"))
HOST = os.environ.get("PORTAL_HOST", "127.0.0.1")
PORT = os.environ.get("PORTAL_PORT", "8000")
KUBESIM_PORT = os.environ.get("KUBESIM_PORT", "8001")


@dataclass
class Service:
    name: str
    argv: list[str]


def _manage(*args: str) -> list[str]:
    return [sys.executable, str(BASE_DIR / "manage.py"), *args]


def prepare(env: dict[str, str]) -> None:
    for step in (["migrate", "--noinput"], ["collectstatic", "--noinput", "--verbosity", "0"], ["seed_demo"]):
        subprocess.run(_manage(*step), check=True, env=env, cwd=BASE_DIR)  # noqa: S603 - our own manage.py


def services() -> list[Service]:
    celery = [sys.executable, "-m", "celery", "-A", "portal.celery"]
    return [
        Service("worker", [*celery, "worker", "--loglevel", "INFO", "--concurrency", "2", "--without-gossip",
                           "--without-mingle"]),
        Service("beat", [*celery, "beat", "--loglevel", "INFO"]),
        Service("watcher", _manage("watch_cluster")),
        Service("web", [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind", f"{HOST}:{PORT}",
                        "--workers", os.environ.get("WEB_CONCURRENCY", "3"), "--access-logfile", "-"]),
    ]


def start_kubesim(env: dict[str, str]) -> subprocess.Popen:
    """The embedded cluster, kept across restarts in .run/kubesim-state.json; returns once it serves."""
    kubeconfig = RUN_DIR / "kubeconfig"
    process = subprocess.Popen(  # noqa: S603 - fixed argv: this interpreter running kubesim
        [sys.executable, "-m", "kubesim", "serve", "--host", "127.0.0.1", "--port", KUBESIM_PORT,
         "--kubeconfig", str(kubeconfig), "--state", str(RUN_DIR / "kubesim-state.json"), "--clock", "real"],
        env=env, cwd=BASE_DIR, stdout=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if "listening on" not in line:
        process.kill()
        raise SystemExit(f"launcher: kubesim did not start ({line or 'no output'})")
    print(f"launcher: {line}; kubeconfig written to {kubeconfig}", flush=True)
    print(f"launcher: try  kubectl --kubeconfig {kubeconfig} get workloads -A", flush=True)
    env["KUBECONFIG"] = str(kubeconfig)
    return process


def supervise(processes: dict[str, subprocess.Popen]) -> int:
    """Wait until Ctrl-C or until any process exits; then stop the rest."""
    stopping = False

    def _stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    code = 0
    while not stopping:
        for name, process in processes.items():
            if process.poll() is not None:
                print(f"launcher: {name} exited with code {process.returncode}; stopping the portal", flush=True)
                code = process.returncode or 1
                stopping = True
                break
        time.sleep(0.5)
    for process in processes.values():
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + 10
    for process in processes.values():
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
    return code


def main() -> int:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    env.setdefault("PORTAL_RUN_DIR", str(RUN_DIR))
    if not env.get("REDIS_URL"):
        (RUN_DIR / "broker" / "control").mkdir(parents=True, exist_ok=True)
        print("launcher: REDIS_URL not set; using the embedded file-system broker in .run/broker", flush=True)
    prepare(env)
    processes: dict[str, subprocess.Popen] = {}
    if not env.get("KUBECONFIG"):
        processes["kubesim"] = start_kubesim(env)
    else:
        print(f"launcher: using the cluster of {env['KUBECONFIG']}", flush=True)
    for service in services():
        processes[service.name] = subprocess.Popen(service.argv, env=env, cwd=BASE_DIR)  # noqa: S603 - fixed argv
    print(f"\nGPU Portal is running on http://{HOST}:{PORT}/  (Ctrl-C stops everything)", flush=True)
    print("Sign in as admin, deptadmin, lead, alice, bob, carol or viewer with the password 'demo'.\n", flush=True)
    return supervise(processes)


if __name__ == "__main__":
    raise SystemExit(main())
