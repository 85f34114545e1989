"""`kubectl port-forward` to a pod's emulated Jupyter server, end to end against a served kubesim.

kubectl 1.32 first asks for a WebSocket tunnel, kubesim refuses it, and kubectl falls back to SPDY/3.1 over the
upgraded connection (kubesim.apiserver.http.spdy); each local connection then opens an error and a data stream that
kubesim bridges to the emulated server. Each test starts kubectl itself, records its pid and terminates it.
Skipped, saying why, where kubectl 1.28+ is absent.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from kubesim.testing import InProcessKubesim

KUBECTL = shutil.which("kubectl")
MIN_MINOR = 28


def _kubectl_minor() -> int:
    if KUBECTL is None:
        return 0
    done = subprocess.run([KUBECTL, "version", "--client", "-o", "json"], capture_output=True, text=True, check=False)
    try:
        return int(json.loads(done.stdout)["clientVersion"]["minor"].rstrip("+"))
    except (ValueError, KeyError):
        return 0


pytestmark = pytest.mark.skipif(
    _kubectl_minor() < MIN_MINOR,
    reason=f"kubectl 1.{MIN_MINOR} or newer is not on PATH (found: {KUBECTL or 'none'}) - kubectl tests skipped",
)

NOTEBOOK = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "nb", "labels": {"app": "nb"}},
    "spec": {
        "containers": [
            {
                "name": "notebook",
                "image": "quay.io/jupyter/base-notebook",
                "env": [{"name": "JUPYTER_TOKEN", "value": "t0ken"}],
                "ports": [{"containerPort": 8888}],
            }
        ]
    },
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "lab"},
    "spec": {"selector": {"app": "nb"}, "ports": [{"port": 80, "targetPort": 8888}]},
}


@pytest.fixture(scope="module")
def notebook(ks: InProcessKubesim, api: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A Running notebook pod in namespace `pf` behind Service `lab` (port 80 -> 8888), and kubectl's environment."""
    api.core.create_namespace({"metadata": {"name": "pf"}})
    api.core.create_namespaced_pod("pf", NOTEBOOK)
    api.core.create_namespaced_service("pf", SERVICE)
    ks.settle()
    assert api.core.read_namespaced_pod("nb", "pf").status.phase == "Running"
    home = tmp_path_factory.mktemp("kubectl-home")
    env = {**os.environ, "KUBECONFIG": ks.kubeconfig_path, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}
    return SimpleNamespace(env=env)


class Forward:
    """A running `kubectl port-forward` (its pid recorded; stopped by this test only)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.port = 0
        self.stdout: list[str] = []
        self.stderr = ""
        self.done = False

    def wait_ready(self, timeout: float = 30.0) -> int:
        """The local port kubectl listens on, from its `Forwarding from 127.0.0.1:PORT -> ...` line."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    break
                self.stdout.append(line)
                if match := re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> \d+", line):
                    self.port = int(match.group(1))
                    return self.port
            elif self.proc.poll() is not None:
                break
        raise AssertionError(f"kubectl port-forward never got ready: {self.finish()}")

    def finish(self, timeout: float = 10.0) -> tuple[int | None, str]:
        """Stop kubectl (if still running) and return its exit status and stderr."""
        if self.done:
            return self.proc.returncode, self.stderr
        self.done = True
        if self.proc.poll() is None:
            os.kill(self.pid, 15)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, 9)
            out, err = self.proc.communicate()
        self.stdout.append(out or "")
        self.stderr += err or ""
        return self.proc.returncode, self.stderr


@contextmanager
def port_forward(env: dict[str, str], *args: str) -> Iterator[Forward]:
    assert KUBECTL is not None
    proc = subprocess.Popen(
        [KUBECTL, "port-forward", "-n", "pf", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    forward = Forward(proc)
    try:
        yield forward
    finally:
        forward.finish()


def _get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def test_port_forward_to_a_pod_reaches_its_notebook_server(notebook: SimpleNamespace):
    with port_forward(notebook.env, "pod/nb", ":8888") as forward:
        port = forward.wait_ready()
        code, ctype, body = _get(port, "/lab?token=t0ken")
        assert (code, ctype) == (200, "text/html"), body
        assert "Jupyter server in pod nb (pf), serving /lab." in body
        # a second local connection over the same upgraded connection: the token is still required
        code, _, body = _get(port, "/lab")
        assert code == 403 and "this server needs its token" in body
        code, ctype, body = _get(port, "/api")
        assert (code, ctype, json.loads(body)) == (200, "application/json", {"version": "2.14.2"})
        assert forward.proc.poll() is None, forward.finish()
        returncode, err = forward.finish()
    assert "Handling connection for" in "".join(forward.stdout)
    assert "error" not in err.lower(), err
    assert returncode in (0, -15), err


def test_port_forward_to_a_service_reaches_the_pod_behind_it(notebook: SimpleNamespace):
    """kubectl resolves the Service to a pod and its port 80 to the targetPort 8888 itself."""
    with port_forward(notebook.env, "svc/lab", ":80") as forward:
        port = forward.wait_ready()
        code, _, body = _get(port, "/tree?token=t0ken")
        assert code == 200 and "Jupyter server in pod nb (pf), serving /tree." in body
        assert forward.proc.poll() is None


def test_port_forward_to_a_port_the_pod_does_not_serve_prints_why(notebook: SimpleNamespace):
    with port_forward(notebook.env, "pod/nb", ":9999") as forward:
        port = forward.wait_ready()
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError, urllib.error.URLError)):
            _get(port, "/")
        deadline = time.monotonic() + 20
        while forward.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        returncode, err = forward.finish()
    assert returncode == 1, err
    assert re.search(
        r"an error occurred forwarding \d+ -> 9999: error forwarding port 9999 to pod pf/nb, uid [0-9a-f-]+: "
        r"failed to connect to localhost:9999 inside the pod: connection refused",
        err,
    ), err
    assert "error: lost connection to pod" in err, err
