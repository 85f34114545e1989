"""Control endpoints: healthz, clock, reset, config, stats; the CLI's one-line start and kubeconfig."""

from __future__ import annotations

import gc
import json
import threading
import time
import urllib.error
import urllib.request
import weakref

from kubernetes import client, config

from kubesim.sim import GC_THAW_SECONDS, freeze_heap
from kubesim.testing import KubesimProcess, serve
from tests.kubesim.conftest import job_body, pod_body


def test_reset_returns_to_the_initial_cluster():
    with serve(kueue=None) as ks:
        api = ks.api_client()
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "scratch"}})
        core.create_namespaced_pod("scratch", pod_body("p"))
        core.delete_node("h100-node-0")
        before = int(core.list_namespace().metadata.resource_version)
        ks.reset()
        assert sorted(n.metadata.name for n in core.list_namespace().items) == [
            "default",
            "jobset-system",  # the workload operators are installed with or without Kueue
            "kube-node-lease",
            "kube-public",
            "kube-system",
            "kubeflow",  # training-operator v1 (PyTorchJob)
            "kubeflow-system",  # Trainer v2 (TrainJob)
            "lws-system",  # so is the LeaderWorkerSet operator
        ]
        assert len(core.list_node().items) == 16
        assert core.list_pod_for_all_namespaces().items == []
        assert int(core.list_namespace().metadata.resource_version) > before  # never goes backwards
        api.close()


def test_healthz_clock_and_stats():
    with serve(kueue=None) as ks:
        health = ks.healthz()
        assert health["ok"] is True and health["clock"] == "manual" and health["kueue"] is False
        assert ks.advance(90).startswith("2026-01-01T00:01:30")
        batch = client.BatchV1Api(ks.api_client())
        batch.create_namespaced_job("default", job_body("s"))
        stats = ks.stats()
        assert stats["controllers"]["job-controller"]["writes"] >= 1
        assert stats["objects"]["jobs"] == 1 and stats["objects"]["nodes"] == 16


def test_cli_writes_a_kubeconfig_the_client_loads(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("nodes:\n- {name: tiny, labels: {portal.gpu/pool: t}, allocatable: {nvidia.com/gpu: 1}}\n")
    with KubesimProcess(str(tmp_path), "--cluster", str(cluster), clock="real") as proc:
        assert proc.url.startswith("http://127.0.0.1:")
        cfg = client.Configuration()
        config.load_kube_config(config_file=proc.kubeconfig_path, client_configuration=cfg)
        with client.ApiClient(cfg) as api:
            nodes = client.CoreV1Api(api).list_node().items
            assert [n.metadata.name for n in nodes] == ["tiny"]
            assert nodes[0].status.allocatable["nvidia.com/gpu"] == "1"
            assert nodes[0].status.allocatable["pods"] == "110"  # the kubelet's maxPods when the file names none


def test_async_settle_runs_controllers_in_the_background():
    with serve(clock="real", kueue=None, async_settle=True) as ks:
        core, batch = client.CoreV1Api(ks.api_client()), client.BatchV1Api(ks.api_client())
        batch.create_namespaced_job("default", job_body("bg", "sleep 600"))
        deadline = time.monotonic() + 5
        while not core.list_namespaced_pod("default").items and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(core.list_namespaced_pod("default").items) == 1
        batch.patch_namespaced_job("bg", "default", {"spec": {"suspend": True}})
        ks.settle()  # returns once settled: the pod is gone now, whatever the settler thread did
        assert core.list_namespaced_pod("default").items == []


def test_the_background_settle_freezes_the_heap_after_a_pass():
    gc.unfreeze()
    try:
        with serve(clock="real", kueue=None, async_settle=True) as ks:
            core, batch = client.CoreV1Api(ks.api_client()), client.BatchV1Api(ks.api_client())
            batch.create_namespaced_job("default", job_body("frozen", "sleep 600"))
            deadline = time.monotonic() + 5
            while gc.get_freeze_count() == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(core.list_namespaced_pod("default").items) == 1
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_frozen_cycle_is_collected_once_the_heap_is_thawed():
    """Full collections skip the frozen heap (the point), so a cycle dropped after a freeze waits for the thaw."""
    gc.unfreeze()
    try:
        cycle = _Cycle()
        ref = weakref.ref(cycle)
        thawed = freeze_heap(time.monotonic())
        del cycle
        gc.collect()
        assert ref() is not None
        assert freeze_heap(thawed) == thawed  # within the interval: frozen again, not thawed
        gc.collect()
        assert ref() is not None
        assert freeze_heap(thawed - GC_THAW_SECONDS) > thawed
        assert ref() is None
    finally:
        gc.unfreeze()


def test_bad_numbers_in_a_watch_or_the_control_config_answer_a_400_status():
    def status_of(method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(ks.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    with serve(kueue=None) as ks:
        for bad in ("abc", "nan", "inf", "-5", "1e400"):
            code, status = status_of("GET", f"/api/v1/namespaces/default/pods?watch=1&timeoutSeconds={bad}")
            assert (code, status["kind"], status["reason"]) == (400, "Status", "BadRequest"), bad
            assert "timeoutSeconds" in status["message"]
        before = ks.configure()
        for body in ({"watch_history": "many"}, {"watch_history": 0}, {"watch_history": 2.5},
                     {"watch_history": 10**30}, {"bookmark_interval": "soon"}, {"bookmark_interval": -1},
                     {"watch_history": 10, "bookmark_interval": "nan"}):
            code, status = status_of("POST", "/kubesim/v1/config", body)
            assert (code, status["kind"], status["code"]) == (400, "Status", 400), body
        assert ks.configure() == before  # nothing applied, not even the good half
        code, _ = status_of("POST", "/kubesim/v1/clock/advance", {"seconds": "nan"})
        assert code == 400


def test_the_background_settle_waits_as_long_as_its_last_pass_took():
    from kubesim.sim import ASYNC_SETTLE_MAX, ASYNC_SETTLE_MIN, settle_window

    assert settle_window(0.0) == ASYNC_SETTLE_MIN  # a small cluster: almost at once
    assert abs(settle_window(0.07) - 0.07) < 1e-9  # a pass of 70 ms: writes gather for as long
    assert settle_window(12.0) == ASYNC_SETTLE_MAX  # still at least twice a second


class _BusyController:
    """Once the ConfigMap `busy` exists, keeps the background pass going round after round (each reconcile holds the
    store lock 10 ms and asks for another round) until `answered` is set or `limit` seconds have passed: a stand-in
    for a pass that is long because the cluster is large. Records whether the pass saw `answered` before it ended,
    and each reconcile after that (`later`: the settle thread goes on serving)."""

    name = "busy"

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.answered = threading.Event()
        self.started = threading.Event()
        self.ended = threading.Event()
        self.answered_in_pass: bool | None = None
        self.later: list[str] = []
        self._until = 0.0

    def reconcile(self, store) -> bool:
        if self.ended.is_set():
            self.later.extend(o["metadata"]["name"] for o in store.list("configmaps", "default", copy=False))
            return False
        if not self.started.is_set():
            if store.get("configmaps", "default", "busy", copy=False) is None:
                return False
            self._until = time.monotonic() + self.limit
            self.started.set()
        if not self.answered.is_set() and time.monotonic() < self._until:
            time.sleep(0.01)
            return True  # not a write: another round of the same pass
        self.answered_in_pass = self.answered.is_set()
        self.ended.set()
        return False

    def next_deadline(self, store):
        return None


def test_a_create_is_answered_while_a_long_background_settle_pass_runs():
    """The background settle lets the requests waiting for the store lock in between controllers (their turn comes
    before the pass goes on, however loaded the machine): a create sent during a long pass is answered while the pass
    still runs, and the pass then ends and the settle thread goes on. Held for its whole pass, the lock would answer
    the create only after the pass gave up waiting for it (`answered_in_pass` False)."""
    with serve(clock="real", kueue=None, async_settle=True) as ks:
        busy = _BusyController(limit=60)
        with ks.sim.store.lock:
            ks.sim.controllers = [busy, *ks.sim.controllers]
        core = client.CoreV1Api(ks.api_client())
        core.create_namespaced_config_map("default", {"metadata": {"name": "busy"}})
        assert busy.started.wait(30), "the background settle never ran the busy controller"

        def create() -> None:
            client.CoreV1Api(ks.api_client()).create_namespaced_config_map("default", {"metadata": {"name": "other"}})
            busy.answered.set()

        creator = threading.Thread(target=create, daemon=True)
        creator.start()
        assert busy.ended.wait(90), "the busy pass never ended"
        creator.join(30)
        assert busy.answered_in_pass is True

        core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
        deadline = time.monotonic() + 30
        while "after" not in busy.later and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "after" in busy.later, "the settle thread stopped after the long pass"
