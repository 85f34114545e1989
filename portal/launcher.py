"""`make run`: prepare the embedded portal and keep its processes running until Ctrl-C or SIGTERM.

Migrates, collects static files, seeds the demo organisation, then starts every long-running process of
docs/architecture.md, The stack under one supervisor. A process that dies is started again after a back-off that doubles
with each quick death (1 s up to 30 s, back to 1 s once it has stayed up a minute), with a log line each time, so one
crash never takes the portal down. Ctrl-C or SIGTERM at any moment, during migrate and seeding too, stops everything the
launcher started: each child runs in its own process group (gunicorn's and Celery's workers included): the child gets
SIGTERM (and stops its own workers), then after a grace period SIGKILL goes to whatever is left of its group, so nothing
is left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

BASE_DIR = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("PORTAL_RUN_DIR", BASE_DIR / ".run"))
HOST = os.environ.get("PORTAL_HOST", "127.0.0.1")
PORT = os.environ.get("PORTAL_PORT", "8000")
KUBESIM_PORT = os.environ.get("KUBESIM_PORT", "8001")
PROMETHEUS_PORT = os.environ.get("PROMETHEUS_PORT", "8002")

BACKOFF_FIRST = float(os.environ.get("PORTAL_RESTART_BACKOFF", "1"))
BACKOFF_MAX = 30.0
HEALTHY_AFTER = 60.0  # seconds up after which a restart counts as the first again
STOP_GRACE = 10.0


def log(message: str) -> None:
    print(f"launcher: {message}", flush=True)


@dataclass
class Child:
    """One supervised process: its argv, the running Popen, and its restart bookkeeping."""

    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = BACKOFF_FIRST
    restart_at: float | None = None
    ready_line: str | None = None  # a line the process prints once it serves (kubesim)
    stops_last: bool = False  # others talk to it (the embedded cluster): it stops once they have
    extra: dict[str, str] = field(default_factory=dict)


class Supervisor:
    """Starts children in their own process groups, restarts the ones that die, stops them all on a signal."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: list[Child] = []
        self.stopping = False

    # --- signals -------------------------------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if not self.stopping:
            log(f"{signal.Signals(signum).name} received; stopping everything")
        self.stopping = True

    # --- one-shot steps --------------------------------------------------------------------------------------------

    def run_step(self, name: str, argv: list[str]) -> bool:
        """Run a preparation step to completion; False when a signal stopped it (and its group) meanwhile."""
        child = Child(name, argv)
        self._spawn(child)
        assert child.process is not None
        while child.process.poll() is None:
            if self.stopping:
                self._stop_all([child])
                log("stopped")
                return False
            time.sleep(0.1)
        if child.process.returncode != 0:
            raise SystemExit(f"launcher: {name} failed with exit code {child.process.returncode}")
        return True

    # --- supervised children -------------------------------------------------------------------------------------

    def add(self, child: Child) -> Child:
        self.children.append(child)
        self._spawn(child)
        return child

    def _spawn(self, child: Child) -> None:
        child.process = subprocess.Popen(  # noqa: S603 - fixed argv: this interpreter running our own modules
            child.argv, env={**self.env, **child.extra}, cwd=BASE_DIR, start_new_session=True,
            stdout=subprocess.PIPE if child.ready_line else None, text=bool(child.ready_line),
        )
        child.started_at = time.monotonic()
        child.restart_at = None
        log(f"started {child.name} (pid {child.process.pid})")
        if child.ready_line:
            self._await_ready(child)

    def _await_ready(self, child: Child) -> None:
        assert child.process is not None and child.process.stdout is not None
        line = child.process.stdout.readline().strip()
        if child.ready_line not in line:
            log(f"{child.name} did not start ({line or 'no output'})")
        else:
            log(line)
        # Keep draining its output so a full pipe never blocks it.
        threading.Thread(target=_drain, args=(child.process.stdout,), daemon=True).start()

    def poll(self) -> None:
        """One supervision step: notice deaths, schedule and perform restarts."""
        now = time.monotonic()
        for child in self.children:
            process = child.process
            if process is None:
                continue
            if child.restart_at is None and process.poll() is not None:
                if now - child.started_at >= HEALTHY_AFTER:
                    child.backoff = BACKOFF_FIRST
                child.restart_at = now + child.backoff
                _signal_group(child, signal.SIGKILL)  # workers the dead master left behind
                log(f"{child.name} (pid {process.pid}) exited with code {process.returncode}; "
                    f"restarting in {child.backoff:g} s")
                child.backoff = min(BACKOFF_MAX, child.backoff * 2)
            elif child.restart_at is not None and now >= child.restart_at:
                child.restarts += 1
                self._spawn(child)

    def await_port(self, host: str, port: int, timeout: float = 180.0) -> bool:
        """Supervise until something accepts connections on host:port (the URL we print must answer); False when a
        signal or the timeout came first."""
        deadline = time.monotonic() + timeout
        while not self.stopping and time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
                return True
            self.poll()
            time.sleep(0.2)
        return False

    def run_forever(self, interval: float = 0.5) -> None:
        while not self.stopping:
            self.poll()
            time.sleep(interval)

    # --- stopping ------------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the portal's processes together, then what they talk to one by one, the last started first
        (Prometheus before the kubesim it scrapes), so none of them logs a lost peer on its way down."""
        self._stop_all([child for child in self.children if not child.stops_last])
        for child in reversed([child for child in self.children if child.stops_last]):
            self._stop_all([child])
        log("stopped")

    def _stop_all(self, children: list[Child]) -> None:
        """SIGTERM every child, wait up to the grace period, then SIGKILL what is left of its process group. Only the
        child itself is asked to stop: gunicorn's and Celery's masters stop their own workers (a worker signalled
        with its master dies at once, and Celery's master starts a new one in its warm shutdown)."""
        running = [child for child in children if child.process is not None]
        for child in running:
            assert child.process is not None
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for child in running:
            assert child.process is not None
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"{child.name} did not stop in {STOP_GRACE:g} s; killing it")
        for child in running:
            _signal_group(child, signal.SIGKILL)  # the group's stragglers (workers of a stopped master)
            assert child.process is not None
            child.process.wait()
            _wait_group_gone(child.process.pid)


def _drain(stream: IO[str]) -> None:
    for line in stream:
        sys.stdout.write(line)


def _signal_group(child: Child, signum: int) -> None:
    assert child.process is not None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.process.pid, signum)  # its own session: the group id is its pid


def _wait_group_gone(group: int, timeout: float = 5.0) -> None:
    """Wait until no live process is left in the group we started (a SIGKILL is delivered asynchronously; on a busy
    machine a grandchild can outlive our return by a moment). Zombies count as gone: their parent reaps them."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_live_member(entry, group) for entry in proc.iterdir() if entry.name.isdigit()):
            return
        time.sleep(0.05)
    log(f"processes of group {group} still running after SIGKILL")


def _live_member(entry: Path, group: int) -> bool:
    try:
        state, _parent, process_group = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[:3]
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return False
    return int(process_group) == group and state != "Z"


def _manage(*args: str) -> list[str]:
    return [sys.executable, str(BASE_DIR / "manage.py"), *args]


PREPARE_STEPS = [
    ("migrate", _manage("migrate", "--noinput")),
    ("collectstatic", _manage("collectstatic", "--noinput", "--verbosity", "0")),
    ("seed_demo", _manage("seed_demo")),
]


# One machine, few processes (each Python process of the portal holds 100 MiB or more): the worker runs its tasks in
# threads (they wait on the cluster and the database, not on the CPU; a prefork worker is a process per task slot)
# with beat in a thread beside them, and the web serves from one process of threads. Deployments scale these out
# instead (docs/architecture.md, The stack). Celery's time limits are not enforced in the thread pool.
WORKER_THREADS = os.environ.get("PORTAL_WORKER_THREADS", "4")
# Notification deliveries and e-mails wait on receivers outside the cluster (each at most its deadline), so they have a
# queue and a worker of their own: a slow receiver fills that worker's threads, never the ones that submit and stop.
# The cost is one more Python process (about 125 MiB RSS idle, bench/memory.py: the total stays just under its
# 600 MiB target); consuming both queues in the one worker would save it but let a slow receiver delay submits.
NOTIFIER_THREADS = os.environ.get("PORTAL_NOTIFIER_THREADS", "2")
# The queue names of portal/settings.py (this process does not load Django).
QUEUE = os.environ.get("CELERY_QUEUE", "portal")
NOTIFICATIONS_QUEUE = os.environ.get("CELERY_NOTIFICATIONS_QUEUE", "notifications")
EMBEDDED_WEB_CONCURRENCY = "1"


def services() -> list[Child]:
    celery = [sys.executable, "-m", "celery", "-A", "portal.celery"]
    return [
        Child("worker", [*celery, "worker", "--loglevel", "INFO", "--pool", "threads", "--concurrency", WORKER_THREADS,
                         "--queues", QUEUE, "--beat-thread", "--without-gossip", "--without-mingle"]),
        Child("notifier", [*celery, "worker", "--loglevel", "INFO", "--pool", "threads", "--concurrency",
                           NOTIFIER_THREADS, "--queues", NOTIFICATIONS_QUEUE, "--hostname", "notifier@%h",
                           "--without-gossip", "--without-mingle"],
              extra={"WORKER_METRICS_PORT": "0"}),
        Child("watcher", _manage("watch_cluster")),
        # Everything but the address comes from ./gunicorn.conf.py, as in the image, compose and the manifests.
        Child("web", [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind", f"{HOST}:{PORT}"],
              extra={"WEB_CONCURRENCY": os.environ.get("WEB_CONCURRENCY", EMBEDDED_WEB_CONCURRENCY)}),
    ]


def kubesim_child(kubeconfig: Path) -> Child:
    """The embedded cluster, kept across restarts in .run/kubesim-state.json. Its controllers settle in the background
    as a real cluster's do (`--async-settle`): a write answers at once, so the worker's creates of a burst of
    submissions do not each wait for Kueue's pass over everything pending."""
    return Child(
        "kubesim",
        [sys.executable, "-m", "kubesim", "serve", "--host", "127.0.0.1", "--port", KUBESIM_PORT,
         "--kubeconfig", str(kubeconfig), "--state", str(RUN_DIR / "kubesim-state.json"), "--clock", "real",
         "--async-settle", "--with-kai-pool"],  # the demo's KAI pool (seed_demo adds it to the organisation)
        ready_line="listening on", stops_last=True,
    )


def prometheus_child() -> Child:
    """A Prometheus scraping kubesim's emulated DCGM exporters every 15 s, data in .run/prometheus (exec'd by kubesim's
    CLI, so its pid is Prometheus' own)."""
    return Child(
        "prometheus",
        [sys.executable, "-m", "kubesim", "prometheus", "--kubesim-url", f"http://127.0.0.1:{KUBESIM_PORT}",
         "--listen", f"127.0.0.1:{PROMETHEUS_PORT}", "--data-dir", str(RUN_DIR / "prometheus"),
         "--scrape-interval", "15"],
        stops_last=True,
    )


def main() -> int:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    env.setdefault("PORTAL_RUN_DIR", str(RUN_DIR))
    supervisor = Supervisor(env)
    supervisor.install_signal_handlers()
    if not env.get("REDIS_URL"):
        (RUN_DIR / "broker" / "control").mkdir(parents=True, exist_ok=True)
        log("REDIS_URL not set; using the embedded file-system broker in .run/broker")
    for name, argv in PREPARE_STEPS:
        if not supervisor.run_step(name, argv):
            return 0
    start_order: list[Child] = []
    if not env.get("KUBECONFIG"):
        kubeconfig = RUN_DIR / "kubeconfig"
        start_order.append(kubesim_child(kubeconfig))
        env["KUBECONFIG"] = str(kubeconfig)
        if not env.get("PROMETHEUS_URL") and shutil.which("prometheus"):
            start_order.append(prometheus_child())
            env["PROMETHEUS_URL"] = f"http://127.0.0.1:{PROMETHEUS_PORT}"
            log(f"GPU utilisation: Prometheus on {env['PROMETHEUS_URL']} scrapes kubesim's DCGM exporters")
        elif not env.get("PROMETHEUS_URL"):
            log("no `prometheus` on the PATH: GPU utilisation not available (apt-get install prometheus)")
    else:
        log(f"using the cluster of {env['KUBECONFIG']}")
    start_order += services()
    for child in start_order:
        if supervisor.stopping:
            break
        supervisor.add(child)
        if child.name == "kubesim":
            log(f"kubeconfig written to {env['KUBECONFIG']}; try  kubectl --kubeconfig {env['KUBECONFIG']} "
                "get workloads -A")
    if not supervisor.stopping and not supervisor.await_port(HOST, int(PORT)):
        log(f"the web server is not answering on {HOST}:{PORT} yet; see its output above")
    if not supervisor.stopping:
        print(f"\nGPU Portal is running on http://{HOST}:{PORT}/  (Ctrl-C stops everything)", flush=True)
        if env.get("PORTAL_MODE", "embedded") == "embedded":
            print("Sign in as admin, deptadmin, lead, alice, bob, carol or viewer with the password 'demo'.\n",
                  flush=True)
        supervisor.run_forever()
    supervisor.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
