"""Leader election on a Lease (worker/leader.py) against kubesim through the official client, with real threads
and short timings (lease 3 s, renew deadline 2 s, retry 0.5 s): one candidate of two leads and the other stands
by; a stopped leader hands over at once; a leader cut off from the API server steps down before the standby takes
over, within the lease duration and two retries of its last renewal; of candidates racing for a free Lease only
one wins."""

import re
import socket
import threading
import time

import pytest
from kubernetes import client

from kubesim.testing import serve
from tests.worker.conftest import wait_for
from worker.gateway import Gateway
from worker.leader import JITTER, LeaderElector, Timing

NAMESPACE = "gpu-portal"
TIMING = Timing(lease_seconds=3, renew_deadline_seconds=2, retry_seconds=0.5)


@pytest.fixture(scope="module")
def kubesim():
    with serve(clock="manual") as served:
        served.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        yield served


class Candidate:
    """One process campaigning in a thread; records when its work started and stopped (monotonic clock)."""

    def __init__(self, kubesim, identity, lease):
        self.api_client = kubesim.api_client()
        self.elector = LeaderElector(self.api_client, namespace=NAMESPACE, name=lease, identity=identity,
                                     timing=TIMING)
        self.started_at = None
        self.stopped_at = None
        self.lost = None
        self.thread = threading.Thread(target=self._run, name=f"candidate-{identity}", daemon=True)
        self.thread.start()

    def _run(self):
        self.lost = self.elector.run(on_started_leading=self._start, on_stopped_leading=self._stop)

    def _start(self):
        self.started_at = time.monotonic()

    def _stop(self, lost):
        assert not self.elector.is_leader()  # no longer acting by the time its work is stopped
        self.stopped_at = time.monotonic()

    def cut_off(self):
        """A network partition between this candidate and the API server: its calls are refused from now on."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        configuration = self.api_client.configuration
        configuration.refresh_api_key_hook = None  # the kubeconfig loader's hook would write the old address back
        configuration.host = f"http://127.0.0.1:{port}"

    def stop(self):
        self.elector.stop()
        self.thread.join(10)


@pytest.fixture
def lease(request):
    return f"test-{request.node.name.replace('_', '-')[:40]}"


@pytest.fixture
def candidates(kubesim, lease):
    started = []

    def start(identity):
        started.append(Candidate(kubesim, identity, lease))
        return started[-1]

    yield start
    for candidate in started:
        candidate.stop()


def read(kubesim, lease):
    return client.CoordinationV1Api(kubesim.api_client()).read_namespaced_lease(lease, NAMESPACE).spec


def test_one_of_two_candidates_leads_and_a_stopped_leader_hands_over_at_once(kubesim, lease, candidates):
    first = candidates("first")
    wait_for(first.elector.is_leader, timeout=5)
    second = candidates("second")
    spec = read(kubesim, lease)
    assert (spec.holder_identity, spec.lease_duration_seconds, spec.lease_transitions) == ("first", 3, 0)
    acquired = spec.acquire_time
    raw = Gateway(kubesim.api_client()).get("Lease", lease, namespace=NAMESPACE)["spec"]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", raw[field])  # MicroTime, as kube reads it
               for field in ("acquireTime", "renewTime"))
    time.sleep(TIMING.lease_seconds + 2 * TIMING.retry_seconds)  # longer than a lease: the renewals keep it
    assert first.elector.is_leader() and not second.elector.is_leader() and second.started_at is None
    spec = read(kubesim, lease)
    assert spec.holder_identity == "first" and spec.acquire_time == acquired and spec.renew_time > acquired

    stopped = time.monotonic()
    first.stop()
    assert first.lost is False and first.stopped_at is not None
    # Its work starts just after it becomes leader, in its own thread: wait for the work, not only the lease.
    wait_for(lambda: second.started_at is not None, timeout=5)
    assert second.elector.is_leader()
    # Released (no holder, 1 s), so the standby took it at its next try instead of waiting out the lease.
    assert second.started_at - stopped < TIMING.retry_seconds * JITTER + 1
    spec = read(kubesim, lease)
    assert (spec.holder_identity, spec.lease_transitions, spec.lease_duration_seconds) == ("second", 1, 3)
    assert spec.acquire_time > acquired


def test_a_leader_cut_off_from_the_api_server_steps_down_before_the_standby_takes_over(kubesim, lease, candidates):
    old = candidates("old")
    wait_for(old.elector.is_leader, timeout=5)
    standby = candidates("standby")
    time.sleep(2 * TIMING.retry_seconds)
    last_renewal = read(kubesim, lease).renew_time
    old.cut_off()
    cut = time.monotonic()

    wait_for(lambda: standby.started_at is not None, timeout=10)
    assert old.lost is True and old.stopped_at is not None
    assert old.stopped_at < standby.started_at  # the old leader stopped acting before the standby began
    assert old.stopped_at - cut <= TIMING.renew_deadline_seconds + 0.5  # its last renewal began before the cut
    # The lease duration from when the standby saw the last renewal (a retry at most after it), and a retry.
    assert standby.started_at - cut <= TIMING.lease_seconds + 2 * TIMING.retry_seconds * JITTER + 0.5
    spec = read(kubesim, lease)
    assert (spec.holder_identity, spec.lease_transitions) == ("standby", 1)
    assert spec.renew_time > last_renewal
    assert not old.elector.is_leader() and not old.thread.is_alive()  # run() returned: the caller exits


def test_of_candidates_racing_for_a_free_lease_exactly_one_wins(kubesim, lease, candidates):
    """Each write carries the resourceVersion it read: the others get 409 Conflict (or AlreadyExists) and wait."""
    racers = [candidates(f"racer-{n}") for n in range(4)]
    wait_for(lambda: any(racer.elector.is_leader() for racer in racers), timeout=5)
    time.sleep(TIMING.lease_seconds)
    leaders = [racer for racer in racers if racer.started_at is not None]
    assert len(leaders) == 1 and leaders[0].elector.is_leader()
    assert read(kubesim, lease).holder_identity == leaders[0].elector.identity


def test_a_lease_left_by_a_crashed_holder_is_taken_once_its_duration_passed(kubesim, lease, candidates):
    """A holder gone without releasing (its pod's node lost): counted on the candidate's own clock from when it
    first saw the record, never from the record's renewTime."""
    crashed = LeaderElector(kubesim.api_client(), namespace=NAMESPACE, name=lease, identity="crashed",
                            timing=TIMING)
    assert crashed._try_acquire_or_renew(timeout=5)  # took it, and will never renew
    seen = time.monotonic()
    successor = candidates("successor")
    wait_for(lambda: successor.started_at is not None, timeout=10)
    waited = successor.started_at - seen
    assert TIMING.lease_seconds <= waited <= TIMING.lease_seconds + TIMING.retry_seconds * JITTER + 0.5
    assert read(kubesim, lease).lease_transitions == 1


def test_timings_that_would_let_two_leaders_act_at_once_are_refused():
    for lease_seconds, renew, retry in ((10, 10, 2), (15, 10, 9), (15, 20, 2), (15, 10, 0)):
        with pytest.raises(ValueError, match=r"lease > renew deadline > 1\.2 x retry period"):
            Timing(lease_seconds, renew, retry)
