"""The image's entrypoint and health check (portal/container.py), run as the container runs them."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def container(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "portal.container", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False, env={**os.environ, **(env or {})})


def test_run_empties_the_multiprocess_folder_and_becomes_the_command(tmp_path):
    multiproc = tmp_path / "prometheus"
    multiproc.mkdir()
    (multiproc / "counter_123.db").write_text("stale")
    result = container("run", "ls", "-A", str(multiproc), env={"PROMETHEUS_MULTIPROC_DIR": str(multiproc),
                                                                "PORTAL_RUN_DIR": str(tmp_path / "run")})
    assert result.returncode == 0 and result.stdout == ""
    assert (tmp_path / "run").is_dir()


def test_check_a_url_and_a_fresh_file(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert container("check", f"http://127.0.0.1:{closed}/healthz").returncode == 1
    schedule = tmp_path / "celerybeat-schedule"
    assert container("check", "--file", str(schedule), "--max-age", "60").returncode == 1
    schedule.with_suffix(".db").write_text("")  # dbm may add a suffix
    assert container("check", "--file", str(schedule), "--max-age", "60").returncode == 0
    old = time.time() - 3600
    os.utime(schedule.with_suffix(".db"), (old, old))
    assert container("check", "--file", str(schedule), "--max-age", "60").returncode == 1
