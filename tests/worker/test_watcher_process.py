"""The watcher's process (worker/watcher_process.py) with real threads against kubesim: of two replicas only the
leader mirrors; cut off from the API server it steps down and the standby takes over and mirrors; a stalled watcher
turns its probes and the web's /readyz red, and green again once it moves."""

import json
import socket
import threading
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.cluster import selectors
from apps.core.metrics import serve_metrics
from apps.workloads.models import Status
from tests.worker.conftest import stop_watcher, wait_for
from tests.worker.test_leader import NAMESPACE, TIMING
from tests.worker.test_watcher import status_of, submit
from worker.gateway import Gateway
from worker.leader import LeaderElector
from worker.watcher import Watcher
from worker.watcher_process import WatcherProcess

pytestmark = pytest.mark.slow


class Replica:
    """One `watch_cluster` process: its own connections to the API server, run() in a thread."""

    def __init__(self, kubesim, identity):
        self.election_client = kubesim.api_client()
        elector = LeaderElector(self.election_client, namespace=NAMESPACE, name="gpu-portal-watcher",
                                identity=identity, timing=TIMING)
        watcher = Watcher(Gateway(kubesim.api_client()), resync_seconds=3600, positions_seconds=0.2,
                          watch_timeout_seconds=2)
        self.process = WatcherProcess(watcher, elector)
        self.lost = None
        self.thread = threading.Thread(target=self._run, name=f"replica-{identity}", daemon=True)
        self.thread.start()

    def _run(self):
        self.lost = self.process.run()

    @property
    def watcher(self):
        return self.process.watcher

    def cut_off(self):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.election_client.configuration.refresh_api_key_hook = None
        self.election_client.configuration.host = f"http://127.0.0.1:{port}"


@pytest.fixture
def replicas(kubesim, cluster):
    kubesim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    started = []

    def start(identity):
        started.append(Replica(kubesim, identity))
        return started[-1]

    yield start
    for replica in started:
        replica.process.stop()
        kubesim.end_watches()
        replica.thread.join(15)


def test_only_the_leader_mirrors_and_a_cut_off_leader_hands_over_to_the_standby(kubesim, org, replicas):
    first = replicas("first")
    wait_for(lambda: first.process.leading() and first.watcher.synced.is_set(), timeout=20)
    second = replicas("second")
    wait_for(lambda: second.process.elector.observed is not None, timeout=20)  # it has seen the Lease: standing by
    assert not second.process.leading() and not hasattr(second.watcher, "threads")  # mirrors nothing
    assert second.process.not_ready() == [] and first.process.not_ready() == []  # both ready: one leads, one waits

    run = submit(kubesim, org["alice"], seconds=30)
    wait_for(lambda: status_of(run) == Status.RUNNING)

    first.cut_off()
    wait_for(second.process.leading, timeout=TIMING.lease_seconds + 20)
    assert first.watcher.stopping.is_set()  # the old leader had stopped mirroring before the standby began
    wait_for(lambda: first.lost is True, timeout=20)  # watch_cluster exits now: nothing of it may write again
    assert not any(thread.is_alive() for thread in first.watcher.threads if not thread.name.startswith("watch-"))
    kubesim.end_watches()  # the old watcher's open watch streams notice their stop at once
    wait_for(lambda: not any(thread.is_alive() for thread in first.watcher.threads), timeout=20)

    wait_for(second.watcher.synced.is_set, timeout=20)
    kubesim.advance(60)  # the run finishes: only the new leader can have mirrored that
    wait_for(lambda: status_of(run) == Status.SUCCEEDED)
    assert second.process.not_ready() == []


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=15) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def probed(kubesim, cluster, transactional_db, settings):
    """One watcher process without leader election (as `make run` starts it), its probes served on a free port,
    and tight limits: a loop is stalled after its period plus a second; /readyz wants a heartbeat under 3 s old."""
    settings.WATCHER_STALL_SECONDS = 1
    settings.WATCHER_HEARTBEAT_SECONDS = 1
    settings.READYZ_CLUSTER_MAX_AGE = 3
    process = WatcherProcess(Watcher(cluster, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2),
                             None)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    server = serve_metrics(port, probes=process.probes())
    thread = threading.Thread(target=process.run, daemon=True)
    thread.start()
    wait_for(process.watcher.synced.is_set)
    yield process, f"http://127.0.0.1:{port}"
    server.shutdown()
    server.server_close()
    stop_watcher(process.watcher, kubesim)
    thread.join(10)


def test_a_watcher_whose_appliers_hang_turns_its_probes_and_readyz_red(probed, client):
    process, url = probed
    assert get(f"{url}/healthz") == (200, {"status": "ok"}) and get(f"{url}/readyz") == (200, {"status": "ok"})
    with urllib.request.urlopen(f"{url}/metrics", timeout=15) as page:  # the metrics, beside the probes
        assert b"portal_watcher_resyncs_total" in page.read()
    wait_for(lambda: client.get("/readyz").status_code == 200)

    with process.watcher.work.condition:  # every applier blocks on the work queue: they stop turning
        wait_for(lambda: get(f"{url}/healthz")[0] == 503, timeout=30)
        body = get(f"{url}/healthz")[1]
        assert body["status"] == "fail" and any(p.startswith("apply-0 made no progress for") for p in body["problems"])
        assert get(f"{url}/readyz")[0] == 503
        wait_for(lambda: selectors.watcher_heartbeat().error.startswith("the watcher is stalled: apply-0"))
        stalled_since = selectors.watcher_heartbeat().cluster_seen_at
        wait_for(lambda: client.get("/readyz").status_code == 503, timeout=30)
        assert selectors.watcher_heartbeat().cluster_seen_at == stalled_since  # "seen" no longer moves

    wait_for(lambda: get(f"{url}/healthz")[0] == 200, timeout=30)
    wait_for(lambda: client.get("/readyz").status_code == 200, timeout=30)
    assert selectors.watcher_heartbeat().error == ""
    assert selectors.watcher_heartbeat().cluster_seen_at > stalled_since


def test_a_watcher_whose_loops_stopped_turns_its_probes_and_readyz_red(probed, client):
    process, url = probed
    wait_for(lambda: client.get("/readyz").status_code == 200)
    process.watcher.stopping.set()  # every loop ends, the heartbeat's too, while the process lives on
    loops = {"heartbeat", "ledger", "positions", "owners", "apply-0", "apply-3"}
    wait_for(lambda: {problem.split()[0] for problem in get(f"{url}/healthz")[1].get("problems", [])} >= loops,
             timeout=60, describe=lambda: get(f"{url}/healthz")[1])
    assert get(f"{url}/readyz")[0] == 503
    wait_for(lambda: client.get("/readyz").status_code == 503, timeout=30)
    assert timezone.now() - selectors.watcher_heartbeat().beat_at > timedelta(seconds=3)
