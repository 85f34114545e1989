"""A real Prometheus (Debian's `prometheus` package) scraping kubesim's emulated DCGM exporters.

kubesim answers Prometheus' HTTP service discovery at `/kubesim/v1/dcgm/targets` with one target per node (its
exporter path in `__metrics_path__`), so the scrape configuration is the same whatever nodes the cluster has and a
node added later is scraped on the next refresh. Used by the tests that need a Prometheus and by `make run` when a
`prometheus` binary is on the PATH (`python -m kubesim prometheus ...` writes the configuration and execs it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import yaml

JOB_NAME = "dcgm-exporter"


def scrape_config(kubesim_url: str, interval_seconds: float = 15.0) -> dict:
    """The prometheus.yml that scrapes every node's exporter of the kubesim at `kubesim_url`."""
    interval = f"{interval_seconds:g}s"
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {
                "job_name": JOB_NAME,
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "honor_labels": True,  # the exporter's namespace/pod/container labels are the pod's, keep them
                "http_sd_configs": [
                    {"url": f"{kubesim_url.rstrip('/')}/kubesim/v1/dcgm/targets", "refresh_interval": interval}
                ],
            }
        ],
    }


def command(binary: str, config_file: Path, data_dir: Path, listen: str, retention: str = "35d") -> list[str]:
    return [
        binary,
        f"--config.file={config_file}",
        f"--storage.tsdb.path={data_dir}",
        f"--storage.tsdb.retention.time={retention}",
        f"--web.listen-address={listen}",
        "--log.level=warn",
    ]


def write_config(kubesim_url: str, data_dir: Path, interval_seconds: float) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    config_file = data_dir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(scrape_config(kubesim_url, interval_seconds), sort_keys=False))
    return config_file


def exec_prometheus(kubesim_url: str, data_dir: Path, listen: str, interval_seconds: float) -> None:
    """Replace this process by Prometheus (its supervisor then signals Prometheus itself)."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("no `prometheus` binary on the PATH (apt-get install prometheus)")
    argv = command(binary, write_config(kubesim_url, data_dir, interval_seconds), data_dir / "data", listen)
    os.execv(binary, argv)  # noqa: S606 - the Prometheus binary found on the PATH


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrometheusProcess:
    """Prometheus in a subprocess on a loopback port, scraping one kubesim; data in `workdir` (a temporary dir)."""

    def __init__(self, kubesim_url: str, workdir: str, interval_seconds: float = 1.0) -> None:
        self.kubesim_url = kubesim_url
        self.workdir = Path(workdir)
        self.interval_seconds = interval_seconds
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, timeout: float = 60.0) -> PrometheusProcess:
        binary = shutil.which("prometheus")
        if binary is None:
            raise FileNotFoundError("prometheus")
        config_file = write_config(self.kubesim_url, self.workdir, self.interval_seconds)
        argv = command(binary, config_file, self.workdir / "data", f"127.0.0.1:{self.port}")
        self.proc = subprocess.Popen(  # noqa: S603 - the Prometheus binary found on the PATH
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with code {self.proc.returncode}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:  # noqa: S310
                if response.status == 200:
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"prometheus not ready on {self.url} within {timeout:g} s")

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (Prometheus shuts down cleanly), SIGKILL after the timeout."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> PrometheusProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
