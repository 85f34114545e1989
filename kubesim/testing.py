"""Helpers for tests: an in-process server (thread) and a subprocess launcher (for restarts with --state)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubesim.apiserver.auth.kubeconfig import TOKEN, write_kubeconfig
from kubesim.apiserver.http.server import KubeHTTPServer, serve_in_thread
from kubesim.apiserver.registry.resources import RESOURCES
from kubesim.sim import Simulator


class RequestError(Exception):
    """The API answered an error: `status` is its Status object."""

    def __init__(self, status: dict) -> None:
        super().__init__(f"{status.get('code')} {status.get('reason')}: {status.get('message')}")
        self.status = status


def _request(
    url: str, method: str, path: str, body: dict | None = None, timeout: float = 60.0, token: str | None = None
) -> Any:
    """A Kubernetes API request as `token` (JSON in; JSON out, or text such as a log); RequestError on an error."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    req = urllib.request.Request(f"{url}{path}", data=data, method=method, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http URL of our own server
            data = resp.read()
            return json.loads(data) if "json" in resp.headers.get("Content-Type", "") else data.decode()
    except urllib.error.HTTPError as exc:
        raise RequestError(json.loads(exc.read() or b"{}")) from exc


def _control(url: str, method: str, path: str, body: dict | None = None, timeout: float = 60.0) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(  # noqa: S310 - http URL of our own server
        f"{url}/kubesim/v1/{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http URL of our own server
        return json.loads(resp.read())


RESOURCES_BY_KIND = {r.kind: r.plural for r in RESOURCES.values()}


class _ClientMixin:
    url: str
    kubeconfig_path: str

    def api_client(self) -> Any:
        """An official kubernetes.client.ApiClient configured from the written kubeconfig."""
        # kubernetes is only needed by callers that want a client (tests), and slow to import: import it here.
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=self.kubeconfig_path, client_configuration=cfg)
        return client.ApiClient(configuration=cfg)

    def advance(self, seconds: float) -> str:
        """Move the manual clock (0 only settles); returns the new emulated time (ISO 8601)."""
        return _control(self.url, "POST", "clock/advance", {"seconds": seconds})["time"]

    def faults(self, **config: Any) -> dict:
        """POST /kubesim/v1/faults (error_rate, latency_ms, verbs, resources, drop_watches, seed)."""
        return _control(self.url, "POST", "faults", config)

    def clear_faults(self) -> dict:
        return _control(self.url, "DELETE", "faults")

    def settle(self) -> dict:
        """POST /kubesim/v1/settle: run the controllers to a fixpoint now (any clock)."""
        return _control(self.url, "POST", "settle", {})

    def reset(self) -> dict:
        return _control(self.url, "POST", "reset", {})

    def configure(self, **settings: Any) -> dict:
        """POST /kubesim/v1/config: watch_history (events kept), bookmark_interval (seconds)."""
        return _control(self.url, "POST", "config", settings)

    def stats(self) -> dict:
        """GET /kubesim/v1/stats: per-controller reconcile timing and object counts."""
        return _control(self.url, "GET", "stats")

    def report_activity(self, namespace: str, pod: str, seconds_ago: float = 0) -> dict:
        """POST /kubesim/v1/servers/{ns}/{pod}/activity: someone used this server (kubesim.apiserver.nodes.servers)."""
        return _control(self.url, "POST", f"servers/{namespace}/{pod}/activity", {"seconds_ago": seconds_ago})

    def healthz(self) -> dict:
        return _control(self.url, "GET", "healthz")

    def apply(self, obj: dict) -> dict:
        """Create obj through the API as the admin, with strict field validation (RequestError when refused)."""
        group, _, version = obj["apiVersion"].rpartition("/")
        plural = RESOURCES_BY_KIND[obj["kind"]]
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        namespace = obj["metadata"].get("namespace")
        if namespace:
            base += f"/namespaces/{namespace}"
        return _request(self.url, "POST", f"{base}/{plural}?fieldValidation=Strict", obj, token=TOKEN)

    def service_account_token(self, namespace: str, name: str) -> str:
        """A bearer token for ServiceAccount namespace/name, from a TokenRequest made as the admin."""
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        answer = _request(self.url, "POST", path, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                                   "spec": {}}, token=TOKEN)
        return answer["status"]["token"]

    def write_kubeconfig(self, path: str, token: str) -> str:
        """A kubeconfig for this server authenticating with `token`; returns path."""
        write_kubeconfig(path, self.url, token=token)
        return path

    def rbac(self) -> dict:
        """GET /kubesim/v1/rbac: enabled, denials (messages) and grants (role, rule, verb, group, resource used)."""
        return _control(self.url, "GET", "rbac")

    def clear_rbac_records(self) -> dict:
        return _control(self.url, "DELETE", "rbac")


class InProcessKubesim(_ClientMixin):
    """A kubesim served from a thread of this process; `.sim` gives direct access for white-box checks."""

    def __init__(self, sim: Simulator, server: KubeHTTPServer, kubeconfig_path: str) -> None:
        self.sim = sim
        self.server = server
        self.url = server.url
        self.kubeconfig_path = kubeconfig_path
        write_kubeconfig(kubeconfig_path, self.url)

    def snapshot(self) -> dict:
        """The cluster as it is now (Simulator.snapshot): build a cluster once, restore() it before each test."""
        return self.sim.snapshot()

    def restore(self, snapshot: dict) -> None:
        """Back to a snapshot() of this kubesim (Simulator.restore): its objects exactly, the clock going on."""
        self.sim.restore(snapshot)

    def end_watches(self) -> None:
        """Close every open watch stream now (Simulator.end_watches)."""
        self.sim.end_watches()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.sim.stop()


@contextlib.contextmanager
def serve(
    clock: str = "manual", *, kubeconfig_path: str | None = None, **sim_kwargs: Any
) -> Iterator[InProcessKubesim]:
    """Run kubesim in a thread on a free port; keyword arguments go to kubesim.sim.Simulator."""
    sim = Simulator(clock=clock, **sim_kwargs)
    sim.start()
    server, _ = serve_in_thread(sim)
    with tempfile.TemporaryDirectory(prefix="kubesim-") as tmp:
        ks = InProcessKubesim(sim, server, kubeconfig_path or os.path.join(tmp, "kubeconfig"))
        try:
            yield ks
        finally:
            ks.stop()


class KubesimProcess(_ClientMixin):
    """`python -m kubesim serve` in a subprocess; start() waits for the URL line."""

    def __init__(self, workdir: str, *extra_args: str, clock: str = "manual") -> None:
        self.workdir = Path(workdir)
        self.kubeconfig_path = str(self.workdir / "kubeconfig")
        self.args = ["--clock", clock, *extra_args]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> KubesimProcess:
        cmd = [
            sys.executable,
            "-m",
            "kubesim",
            "serve",
            "--port",
            "0",
            "--kubeconfig",
            self.kubeconfig_path,
            *self.args,
        ]
        self.proc = subprocess.Popen(  # noqa: S603 - fixed argv: this interpreter running kubesim
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening on " not in line or time.monotonic() > deadline:
            self.stop()
            raise RuntimeError(f"kubesim did not start: {line!r}")
        self.url = line.strip().rsplit(" ", 1)[-1]
        return self

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (state is saved on shutdown) and wait."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None
        return code

    def __enter__(self) -> KubesimProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
