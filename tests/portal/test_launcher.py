"""The `make run` supervisor: real child processes, killed by the pids it reports, restarted; nothing left behind.

The first tests drive `Supervisor` with small Python children; the last runs `python -m portal.launcher` itself
on a private SQLite file, embedded broker and kubesim, kills its Celery worker and stops it with SIGTERM.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from portal import launcher

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
# A child that starts a grandchild in its own (inherited) process group and reports its pid.
PARENT_OF_SLEEPER = [sys.executable, "-c", (
    "import subprocess, sys, time; "
    f"p = subprocess.Popen({SLEEPER!r}); print(p.pid, flush=True); time.sleep(600)")]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def supervisor():
    sup = launcher.Supervisor(dict(os.environ))
    yield sup
    sup.stop()


def test_a_child_that_dies_is_restarted_with_a_log_line(supervisor, capsys):
    child = supervisor.add(launcher.Child("sleeper", SLEEPER, backoff=0.05))
    first = child.process.pid
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: (supervisor.poll() or True) and child.process.pid != first)
    assert child.restarts == 1 and alive(child.process.pid)
    out = capsys.readouterr().out
    assert f"sleeper (pid {first}) exited with code -9; restarting in 0.05 s" in out
    assert f"started sleeper (pid {child.process.pid})" in out


def test_quick_deaths_back_off_and_a_healthy_run_resets_it(supervisor, monkeypatch):
    child = supervisor.add(launcher.Child("quitter", [sys.executable, "-c", "pass"], backoff=0.05))
    delays = []
    for _ in range(3):
        pid = child.process.pid
        child.process.wait()
        supervisor.poll()
        delays.append(child.restart_at - time.monotonic())
        wait_until(lambda pid=pid: (supervisor.poll() or True) and child.process.pid != pid)
    assert delays[0] < delays[1] < delays[2]  # 0.05, 0.1, 0.2
    monkeypatch.setattr(launcher, "HEALTHY_AFTER", 0.0)
    child.process.wait()
    supervisor.poll()
    assert child.restart_at - time.monotonic() <= launcher.BACKOFF_FIRST


def test_stop_ends_the_whole_process_group(supervisor):
    child = supervisor.add(launcher.Child("parent", PARENT_OF_SLEEPER))
    child.process.stdout = None
    grandchild = None
    # The child's stdout is ours: read the grandchild's pid from /proc instead.
    wait_until(lambda: bool(_children_of(child.process.pid)))
    grandchild = _children_of(child.process.pid)[0]
    supervisor.stop()
    assert not alive(child.process.pid)
    assert not alive(grandchild)


def test_stop_asks_the_child_and_leaves_its_workers_to_it(supervisor, tmp_path):
    """A master that stops its own worker a second after its SIGTERM (as gunicorn and Celery do): the worker hears
    from the master, not from the supervisor at the same instant; both are gone afterwards."""
    log = tmp_path / "signals"
    ready = tmp_path / "ready"
    worker = ("import signal, sys, time; "
              f"signal.signal(signal.SIGTERM, lambda *_: (open({str(log)!r}, 'a').write(f'worker {{time.time()}}\\n'),"
              f" sys.exit(0))); open({str(ready)!r}, 'w').close(); time.sleep(600)")
    master = launcher.Child("master", [sys.executable, "-c", (
        "import signal, subprocess, sys, time; "
        f"signal.signal(signal.SIGTERM, lambda *_: (open({str(log)!r}, 'a').write(f'master {{time.time()}}\\n'), "
        "time.sleep(1), w.terminate(), w.wait(), sys.exit(0))); "
        f"w = subprocess.Popen([sys.executable, '-c', {worker!r}]); time.sleep(600)")])
    supervisor.add(master)
    wait_until(ready.exists)  # the worker's handler is installed (the master's before it started the worker)
    worker_pid = _children_of(master.process.pid)[0]
    supervisor.stop()
    heard = dict(line.split() for line in log.read_text().splitlines())
    assert set(heard) == {"master", "worker"}
    assert float(heard["worker"]) - float(heard["master"]) >= 0.9
    assert master.process.returncode == 0 and not alive(worker_pid)


def test_what_others_talk_to_stops_after_them(supervisor, tmp_path):
    log = tmp_path / "signals"

    def child(name: str, **kwargs) -> launcher.Child:
        return launcher.Child(name, [sys.executable, "-c", (
            "import signal, sys, time; "
            f"signal.signal(signal.SIGTERM, lambda *_: (open({str(log)!r}, 'a').write('{name}\\n'), time.sleep(0.5), "
            "sys.exit(0))); print('ready', flush=True); time.sleep(600)")], ready_line="ready", **kwargs)

    supervisor.add(child("cluster", stops_last=True))
    supervisor.add(child("scraper", stops_last=True))
    supervisor.add(child("portal"))
    supervisor.stop()
    assert log.read_text().split() == ["portal", "scraper", "cluster"]


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().split(")")[-1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def test_a_signal_during_a_preparation_step_stops_it(supervisor):
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("ok", supervisor.run_step("slow", SLEEPER)))
    thread.start()
    time.sleep(0.5)
    supervisor._on_signal(signal.SIGTERM, None)
    thread.join(timeout=15)
    assert result == {"ok": False}


# --- the real launcher ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Launched:
    """`python -m portal.launcher` in its own session, its output collected line by line."""

    def __init__(self, run_dir: Path) -> None:
        self.port = _free_port()
        env = {key: value for key, value in os.environ.items()
               if key not in {"REDIS_URL", "KUBECONFIG", "CELERY_QUEUE", "DATABASE_URL"}}
        env.update(PORTAL_RUN_DIR=str(run_dir), DATABASE_URL=f"sqlite:///{run_dir / 'portal.sqlite3'}",
                   PORTAL_PORT=str(self.port), KUBESIM_PORT=str(_free_port()), WEB_CONCURRENCY="1",
                   PROMETHEUS_PORT=str(_free_port()),
                   PORTAL_RESTART_BACKOFF="0.5", PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "portal.launcher"], env=env, cwd=launcher.BASE_DIR, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout: float = 120.0, after: int = 0) -> re.Match:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines[after:]:
                if match := regex.search(line):
                    return match
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no line matching {pattern!r}; output:\n{''.join(self.lines[-60:])}")

    def started_pids(self) -> list[int]:
        return [int(m.group(1)) for line in self.lines if (m := re.search(r"started \S+ \(pid (\d+)\)", line))]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)


@pytest.mark.slow
def test_make_run_survives_a_killed_worker_and_sigterm_leaves_nothing_running(tmp_path):
    portal = Launched(tmp_path)
    try:
        portal.wait_for(r"GPU Portal is running", timeout=240)
        assert "started beat" not in "".join(portal.lines)  # beat runs in a thread of the worker
        wait_until((tmp_path / "beat-heartbeat").exists, timeout=120)  # touched at each of its ticks
        worker = int(portal.wait_for(r"started worker \(pid (\d+)\)").group(1))
        mark = len(portal.lines)
        os.kill(worker, signal.SIGKILL)
        portal.wait_for(rf"worker \(pid {worker}\) exited with code -9; restarting", after=mark)
        restarted = int(portal.wait_for(r"started worker \(pid (\d+)\)", after=mark).group(1))
        assert restarted != worker and alive(restarted)
        with urllib.request.urlopen(f"http://127.0.0.1:{portal.port}/accounts/login/", timeout=60) as response:
            assert response.status == 200
        if shutil.which("prometheus"):  # make run adds a Prometheus scraping kubesim's DCGM exporters
            portal.wait_for(r"started prometheus \(pid \d+\)")
        pids = portal.started_pids()
        descendants = [pid for parent in pids for pid in _children_of(parent)]
    finally:
        portal.stop()
    assert portal.process.returncode == 0
    wait_until(lambda: not any(alive(pid) for pid in [*pids, *descendants]), timeout=30)


@pytest.mark.slow
def test_sigterm_during_migrate_stops_the_step_and_the_launcher(tmp_path):
    portal = Launched(tmp_path)
    try:
        migrate = int(portal.wait_for(r"started migrate \(pid (\d+)\)").group(1))
        os.kill(portal.process.pid, signal.SIGTERM)
        portal.process.wait(timeout=30)
    finally:
        portal.stop()
    assert portal.process.returncode == 0
    wait_until(lambda: not alive(migrate))
    assert "started kubesim" not in "".join(portal.lines)
