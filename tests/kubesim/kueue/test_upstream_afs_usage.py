"""Kueue's Admission Fair Sharing usage cases: the arithmetic of a LocalQueue's decayed usage and entry penalties, and
the LocalQueue controller's samples, re-told against kubesim (the samples through the official client against a
served kubesim, manual clock).

Sources (Kueue v0.20): pkg/util/admissionfairsharing/admission_fair_sharing_test.go (TestCalculateEntryPenalty*,
TestCalculateDecayedConsumed*, TestCalculateUsage*), the Admission Fair Sharing cases of
pkg/controller/core/localqueue_controller_test.go (TestLocalQueueReconcile), the entry-penalty cases of
pkg/controller/core/workload_controller_test.go (settlement and drops) and pkg/scheduler/scheduler_afs_test.go
(TestShouldApplyEntryPenalty). Upstream seeds its in-memory usage ledger by hand;
kubesim keeps that ledger in the LocalQueue's status (read back at each sample, seeded afresh when a restarted
kubesim first meets the LocalQueue), so the tests write the status and restart kubesim (restore from a snapshot)
where upstream starts with an empty ledger.

Not ported, with why: "clamps a future LastUpdate stamped by a concurrent settlement" and the two "seed merges /
does not re-merge persisted status" cases need Kueue's workload controller to settle a penalty between a restart and
the LocalQueue's first reconcile, a race kubesim's single-threaded passes do not have (its first pass after a restart
samples every LocalQueue before anything settles); "AFS reconcile skips when cache is recent but status lacks
AdmissionFairSharingStatus" needs the ledger and the status to disagree, and kubesim has no ledger apart from the
status (a status another client wipes starts afresh here; Kueue keeps its memory); "skips a second-pass workload that
already holds a quota reservation" needs Kueue's second scheduling pass (TAS), which kubesim does not emulate;
TestScheduleForAFS's "admits workload (even if its localqueue was / when another LQ is) deleted" delete a LocalQueue
behind the queue manager's back (Kueue's LocalQueue controller drops a deleted queue's workloads from its queues);
TestUpdateAfsConsumedUsage's "creates a penalty-only entry on a cache miss" and "clamps a future LastUpdate" are the
same races; "moving to another LocalQueue drops the record" is emulated (StatusController._settle_penalties) but
not re-told here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from decimal import Decimal

import pytest

from kubesim.kernel.quantity import decimal_value
from kubesim.kueue.scheduler import afs
from tests.kubesim.kueue.conftest import KUEUE, Cluster, _cluster
from tests.kubesim.kueue.test_upstream_controllers import check, flavor, now

WEEK, FIVE_MINUTES = 168 * 3600.0, 300.0
GPU = "example.com/gpu"  # upstream names it GPU, not a resource name the API admits in a pod


# -- pkg/util/admissionfairsharing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("half_life", [600.0, WEEK], ids=["ten-minute half-life", "week-long half-life"])
def test_entry_penalty_covers_every_requested_resource_and_is_positive(half_life: float):
    # TestCalculateEntryPenaltyWithDRAResources (a logical DRA resource beside cpu), TestCalculateEntryPenaltyWith
    # LongHalfLife (a penalty below a milli-unit is not cut to zero)
    requests = afs.parse_usage({"cpu": "4", "gpu-logical": "2", "nvidia.com/gpu": "1"})
    penalty = afs.entry_penalty(requests, FIVE_MINUTES, half_life)
    assert set(penalty) == set(requests)
    assert all(v > 0 for v in penalty.values())


def test_decayed_usage_accumulates_contributions_below_a_milli_unit():
    # TestCalculateDecayedConsumedAccumulatesSubMilli: a week-long half-life sampled every five minutes adds less
    # than a milli-unit per sample, and each sample still grows the usage
    usage, consumed = afs.parse_usage({"cpu": "2", "nvidia.com/gpu": "1"}), {}
    previous = dict.fromkeys(usage, Decimal(0))
    for _ in range(3):
        consumed = afs.decayed(consumed, usage, FIVE_MINUTES, WEEK)
        assert all(consumed[r] > previous[r] for r in usage)
        previous = consumed
    assert afs.format_usage(consumed) == {"cpu": "2061871n", "nvidia.com/gpu": "1030933n"}


def test_decayed_usage_converges_to_the_usage_without_passing_it():
    # TestCalculateDecayedConsumedConvergesToUsage: 1 - 0.5^n of the way after n half-lives, within a milli-unit,
    # never above the usage (values are cut toward zero)
    consumed: afs.Usage = {}
    for half_lives, want in ((1, "1"), (2, "1.5"), (3, "1.75")):
        for _ in range(2016):  # a week of five-minute samples
            consumed = afs.decayed(consumed, {"cpu": Decimal(2)}, FIVE_MINUTES, WEEK)
        assert abs(consumed["cpu"] - Decimal(want)) <= Decimal("0.001"), half_lives
        assert consumed["cpu"] <= 2


@pytest.mark.parametrize("size", ["16Gi", "1Ti", "64Ti"])
def test_decayed_usage_keeps_large_quantities_positive(size: str):
    # TestCalculateDecayedConsumedKeepsLargeQuantitiesPositive (no int64 overflow)
    consumed = afs.decayed({}, afs.parse_usage({"memory": size}), FIVE_MINUTES, WEEK)
    assert consumed["memory"] > 0
    assert decimal_value(afs.format_usage(consumed)["memory"]) == consumed["memory"]


@pytest.mark.parametrize(
    ("consumed", "penalty", "lq_weight", "weights", "want"),
    [
        pytest.param({"gpu-logical": "2"}, {}, 1, {}, 2, id="DRA resource with default weight"),
        pytest.param({"gpu-logical": "2"}, {}, 1, {"gpu-logical": 3.0}, 6, id="DRA resource with explicit weight"),
        pytest.param(
            {"cpu": "4", "gpu-logical": "2"},
            {},
            1,
            {"cpu": 1.0, "gpu-logical": 5.0},
            14,
            id="mixed CPU and DRA resources",
        ),
        pytest.param({"gpu-logical": "10"}, {}, 1, {"gpu-logical": 0}, 0, id="DRA resource with weight zero"),
        pytest.param({}, {"gpu-logical": "3"}, 1, {}, 3, id="DRA resource in penalty only"),
        pytest.param({"gpu-logical": "2"}, {"gpu-logical": "1"}, 2, {"gpu-logical": 4.0}, 6, id="DRA resource in both"),
        pytest.param({"cpu": "1500m", "nvidia.com/gpu": "1"}, {}, 1, {}, 2.5, id="a core weighs as much as a GPU"),
    ],
)
def test_weighted_usage(consumed: dict, penalty: dict, lq_weight: float, weights: dict, want: float):
    # TestCalculateUsageWithDRA: weight x (consumed + penalty) summed over resources, over the LocalQueue's weight;
    # quantities count in their own units (a core is 1, not 1000)
    assert afs.weighted_usage(afs.parse_usage(consumed), afs.parse_usage(penalty), lq_weight, weights) == want


@pytest.mark.parametrize(("consumed", "lq_weight"), [({}, 0), ({"cpu": "4"}, 0), ({"cpu": "4"}, -1)])
def test_a_non_positive_local_queue_weight_makes_the_usage_infinite(consumed: dict, lq_weight: float):
    # TestCalculateUsageWithNonPositiveWeight: +Inf (such a queue goes last), never NaN
    got = afs.weighted_usage(afs.parse_usage(consumed), {}, lq_weight, {})
    assert math.isinf(got) and got > 0


# -- localqueue_controller_test.go: TestLocalQueueReconcile --------------------------------------------------------


def _afs_cluster(half_life: str) -> Iterator[Cluster]:
    yield from _cluster(
        kueue_config={"admissionFairSharing": {"usageHalfLifeTime": half_life, "usageSamplingInterval": "5m"}}
    )


@pytest.fixture(scope="module")
def afs_5m() -> Iterator[Cluster]:
    yield from _afs_cluster("5m")


@pytest.fixture(scope="module")
def afs_10m() -> Iterator[Cluster]:
    yield from _afs_cluster("10m")


@pytest.fixture(scope="module")
def afs_24h() -> Iterator[Cluster]:
    yield from _afs_cluster("24h")


@pytest.fixture(scope="module")
def afs_off() -> Iterator[Cluster]:
    yield from _afs_cluster("0s")


def _fresh(kc: Cluster) -> Cluster:
    kc.ks.reset()
    return kc


def _setup(kc: Cluster, flavors: tuple[str, ...] = ("rf",), cpu_each: str = "16") -> str:
    """Upstream's active ClusterQueue `cq` (no admission by usage, so no entry penalties) and LocalQueue `lq`
    (weight 1); one flavor per name, each with cpu and GPU quota."""
    for name in flavors:
        flavor(kc, name)
    spec = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", GPU],
                "flavors": [
                    {
                        "name": f,
                        "resources": [{"name": "cpu", "nominalQuota": cpu_each}, {"name": GPU, "nominalQuota": "16"}],
                    }
                    for f in flavors
                ],
            }
        ],
    }
    kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec})
    ns = kc.namespace()
    lq = {
        "kind": "LocalQueue",
        "metadata": {"name": "lq"},
        "spec": {"clusterQueue": "cq", "fairSharing": {"weight": "1"}},
    }
    kc.create("localqueues", lq, ns)
    kc.settle()
    return ns


def _run(kc: Cluster, ns: str, name: str, requests: dict[str, str]) -> None:
    """A running workload (upstream: SimpleReserveQuota and AdmittedAt): a Workload of one pod, admitted."""
    container = {"name": "c", "image": "busybox", "resources": {"requests": requests}}
    spec = {
        "queueName": "lq",
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
    }
    kc.create("workloads", {"kind": "Workload", "metadata": {"name": name}, "spec": spec}, ns)
    kc.settle()
    conditions = kc.get("workloads", name, ns)["status"]["conditions"]
    assert any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)


def _status(kc: Cluster, ns: str) -> dict:
    return kc.get("localqueues", "lq", ns)["status"]["fairSharing"]


def _persist(kc: Cluster, ns: str, consumed: dict[str, str]) -> str:
    """The LocalQueue's usage as upstream's initial ledger entry has it, at the time of its last sample."""
    last = _status(kc, ns)["admissionFairSharingStatus"]["lastUpdate"]
    sample = {"consumedResources": consumed, "lastUpdate": last}
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "localqueues", "lq", {"status": {"fairSharing": {"admissionFairSharingStatus": sample}}}
    )
    return last


def _consumed(kc: Cluster, ns: str) -> dict:
    return _status(kc, ns)["admissionFairSharingStatus"]["consumedResources"]


def test_usage_decays_when_nothing_runs(afs_5m: Cluster):
    # "local queue decaying usage decays if there is no running workloads": 8 cpu, a half-life later 4
    kc = _fresh(afs_5m)
    ns = _setup(kc)
    _persist(kc, ns, {"cpu": "8"})
    kc.settle(300)
    assert _consumed(kc, ns) == {"cpu": "4"}
    assert _status(kc, ns)["weightedShare"] == 0  # Kueue's LocalQueue controller writes no share of its own


def test_usage_sums_the_previous_state_and_running_workloads(afs_5m: Cluster):
    # "local queue decaying usage sums the previous state and running workloads": 8 x 0.5 + 4 x 0.5
    kc = _fresh(afs_5m)
    ns = _setup(kc)
    _run(kc, ns, "wl", {"cpu": "4"})
    _persist(kc, ns, {"cpu": "8"})
    kc.settle(300)
    assert _consumed(kc, ns) == {"cpu": "6"}


def test_usage_sums_flavors_and_resources(afs_5m: Cluster):
    # "local queue decaying usage sums the usage from different flavors and resources": 2 cpu in each of two
    # flavors and 4 GPU, from 8 cpu and 16 GPU
    kc = _fresh(afs_5m)
    ns = _setup(kc, flavors=("rf-1", "rf-2"), cpu_each="2")
    _run(kc, ns, "wl-1", {"cpu": "2"})
    _run(kc, ns, "wl-2", {"cpu": "2"})
    _run(kc, ns, "wl-3", {GPU: "4"})
    flavors = {
        a["flavors"]["cpu"]
        for name in ("wl-1", "wl-2")
        for a in kc.get("workloads", name, ns)["status"]["admission"]["podSetAssignments"]
    }
    assert flavors == {"rf-1", "rf-2"}
    _persist(kc, ns, {"cpu": "8", GPU: "16"})
    kc.settle(300)
    assert _consumed(kc, ns) == {"cpu": "6", GPU: "10"}


def test_usage_at_nano_precision_with_a_half_life_twice_the_sampling(afs_10m: Cluster):
    # "... sums the previous state and running workloads half time twice larger than sampling", for cpu and for
    # GPU: 8 x 0.5^0.5 + 4 x (1 - 0.5^0.5), kept at nano precision as Kueue keeps it
    kc = _fresh(afs_10m)
    ns = _setup(kc)
    _run(kc, ns, "wl", {"cpu": "4"})
    _run(kc, ns, "wl-gpu", {GPU: "4"})
    _persist(kc, ns, {"cpu": "8", GPU: "8"})
    kc.settle(300)
    assert _consumed(kc, ns) == {"cpu": "6828427124n", GPU: "6828427124n"}


def test_usage_with_a_long_half_life(afs_24h: Cluster):
    # "... sums the previous state and running workloads with long half time": 8 x 0.5^(5m / 24h)
    kc = _fresh(afs_24h)
    ns = _setup(kc)
    _persist(kc, ns, {"cpu": "8"})
    kc.settle(300)
    assert _consumed(kc, ns) == {"cpu": "7980769063n"}


def test_usage_is_empty_with_a_half_life_of_zero(afs_off: Cluster):
    # "local queue decaying usage resets to 0 when half life is 0" (and an admission's entry penalty is zero)
    kc = _fresh(afs_off)
    ns = _setup(kc)
    _run(kc, ns, "wl", {GPU: "4"})
    _persist(kc, ns, {GPU: "8"})
    kc.settle(300)
    assert _consumed(kc, ns) == {}
    penalty = afs.entry_penalty({GPU: Decimal(4)}, FIVE_MINUTES, 0.0)
    assert penalty == {GPU: Decimal(0)}


def test_usage_is_not_sampled_before_the_interval(afs_5m: Cluster):
    # "local queue decaying usage is not reconciled if not enough time has passed": four minutes on, unchanged;
    # at five, sampled
    kc = _fresh(afs_5m)
    ns = _setup(kc)
    last = _persist(kc, ns, {"cpu": "8"})
    kc.settle(240)
    assert _status(kc, ns)["admissionFairSharingStatus"] == {"consumedResources": {"cpu": "8"}, "lastUpdate": last}
    kc.settle(60)
    assert _consumed(kc, ns) == {"cpu": "4"}


def test_a_new_local_queue_starts_with_empty_usage(afs_5m: Cluster):
    # "local queue with uninitialized cache initializes status"
    kc = _fresh(afs_5m)
    ns = _setup(kc)
    status = _status(kc, ns)
    assert status == {
        "weightedShare": 0,
        "admissionFairSharingStatus": {"consumedResources": {}, "lastUpdate": now(kc)},
    }


def test_a_local_queue_met_with_running_workloads_starts_at_zero(afs_5m: Cluster):
    # "local queue with uninitialized cache and no prior status seeds empty usage": the running workload is not
    # counted at full weight (only its resource shows, at zero); a restarted kubesim meets a LocalQueue that has no
    # status yet
    kc = _fresh(afs_5m)
    ns = _setup(kc)
    _run(kc, ns, "wl", {"cpu": "4"})
    snapshot = kc.ks.snapshot()
    for obj in _stored(snapshot, "localqueues"):
        obj.pop("status", None)
    kc.ks.restore(snapshot)
    status = _status(kc, ns)["admissionFairSharingStatus"]
    assert status == {"consumedResources": {"cpu": "0"}, "lastUpdate": now(kc)}


def test_a_restart_seeds_the_usage_from_the_status_without_decaying_the_gap(afs_5m: Cluster):
    # "local queue with uninitialized cache seeds from persisted status usage": after a restart the persisted 8 cpu
    # is taken as it is, as of now (the minutes since its last sample are not decayed), then decays toward the
    # running 4 cpu from there
    kc = _fresh(afs_5m)
    ns = _setup(kc)
    _run(kc, ns, "wl", {"cpu": "4"})
    kc.settle(240)
    _persist(kc, ns, {"cpu": "8"})
    kc.ks.restore(kc.ks.snapshot())
    at = now(kc)
    assert _status(kc, ns)["admissionFairSharingStatus"] == {"consumedResources": {"cpu": "8"}, "lastUpdate": at}
    kc.settle(300)
    assert _consumed(kc, ns) == {"cpu": "6"}


def _stored(snapshot: dict, resource: str) -> list[dict]:
    """The objects of a resource in a Simulator snapshot."""
    return snapshot["objects"][resource]


# -- scheduler_afs_test.go: TestShouldApplyEntryPenalty ------------------------------------------------------------


def _penalties(kc: Cluster, ns: str) -> dict:
    return kc.ks.sim.kueue.state.afs_records.get((ns, "lq"), {})  # type: ignore[union-attr]


def _held(kc: Cluster, usage_based: bool = True) -> str:
    """_setup's queues with an admission check no controller answers, so a reservation waits unsettled; the
    ClusterQueue admits by usage unless told not to. A Workload `wl` of 4 cpu reserves (its penalty: 2 cpu)."""
    ns = _setup(kc)
    check(kc, "held", active=True)
    patch: dict = {"admissionChecksStrategy": {"admissionChecks": [{"name": "held"}]}}
    if usage_based:
        patch["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cq", {"spec": patch})
    kc.settle()
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "4"}}}
    spec = {
        "queueName": "lq",
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
    }
    kc.create("workloads", {"kind": "Workload", "metadata": {"name": "wl"}, "spec": spec}, ns)
    kc.settle()
    assert _condition(kc, ns, "QuotaReserved") == "True"
    return ns


def _condition(kc: Cluster, ns: str, ctype: str) -> str:
    conditions = kc.get("workloads", "wl", ns)["status"].get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == ctype), "")


def _write_conditions(kc: Cluster, ns: str, **statuses: str) -> None:
    """Conditions of `wl` written by hand, as upstream's helpers write them."""
    wl = kc.get("workloads", "wl", ns)
    at = now(kc)
    for ctype, status in statuses.items():
        wl["status"]["conditions"] = [c for c in wl["status"]["conditions"] if c["type"] != ctype]
        wl["status"]["conditions"].append(
            {"type": ctype, "status": status, "reason": "ByTest", "message": "by test", "lastTransitionTime": at}
        )
    kc.custom.replace_namespaced_custom_object_status(*KUEUE, ns, "workloads", "wl", wl)
    kc.settle()


TWO_CPU = {"cpu": Decimal(2)}  # 4 cpu x alpha(5m) with a half-life of 5m


@pytest.mark.parametrize("usage_based", [True, False], ids=["usage-based ClusterQueue", "other ClusterQueue"])
def test_an_entry_penalty_is_pushed_only_in_a_usage_based_cluster_queue(afs_5m: Cluster, usage_based: bool):
    # "pushes for a first-pass workload on a usage-based ClusterQueue", "skips for a ClusterQueue without
    # usage-based admission mode"
    kc = _fresh(afs_5m)
    ns = _held(kc, usage_based)
    assert _penalties(kc, ns) == ({f"{ns}/wl": TWO_CPU} if usage_based else {})


# -- workload_controller_test.go: the entry penalty's settlement and drops ---------------------------------------


def test_admission_folds_the_penalty_into_the_usage_once(afs_5m: Cluster):
    # TestUpdateAfsConsumedUsage "folds into an existing entry", TestUpdateSettlesAfsEntryPenalty "QuotaReserved to
    # Admitted settles the entry penalty", TestRepeatedAfsSettlementFoldsPenaltyOnce: the LocalQueue's 8 cpu,
    # sampled this instant, plus the 2 cpu penalty; later reconciles fold nothing more
    kc = _fresh(afs_5m)
    ns = _held(kc)
    _persist(kc, ns, {"cpu": "8"})
    assert _penalties(kc, ns) == {f"{ns}/wl": TWO_CPU}
    wl = kc.get("workloads", "wl", ns)
    for state in wl["status"]["admissionChecks"]:
        state.update(state="Ready", lastTransitionTime=now(kc))
    kc.custom.replace_namespaced_custom_object_status(*KUEUE, ns, "workloads", "wl", wl)
    kc.settle()
    assert _condition(kc, ns, "Admitted") == "True"
    assert _consumed(kc, ns) == {"cpu": "10"}
    assert _penalties(kc, ns) == {}
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", "wl", {"metadata": {"labels": {"again": "1"}}})
    kc.settle()
    assert _consumed(kc, ns) == {"cpu": "10"}


def test_deactivation_keeps_the_penalty_while_the_reservation_stays(afs_5m: Cluster):
    # TestUpdateDropsUnsettleableAfsEntryPenalty "deactivation that keeps the reservation keeps the record", then
    # "deactivation with the reservation gone drops the record"
    kc = _fresh(afs_5m)
    ns = _held(kc)
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", "wl", {"spec": {"active": False}})
    kc.settle()
    assert _condition(kc, ns, "QuotaReserved") == "True"  # no Job owns it: nothing releases the reservation
    assert _penalties(kc, ns) == {f"{ns}/wl": TWO_CPU}
    _write_conditions(kc, ns, QuotaReserved="False")
    assert _penalties(kc, ns) == {}


def test_finishing_without_admission_drops_the_penalty(afs_5m: Cluster):
    # TestUpdateDropsUnsettleableAfsEntryPenalty "finishing without admission drops the record": nothing reaches
    # the LocalQueue's usage
    kc = _fresh(afs_5m)
    ns = _held(kc)
    _write_conditions(kc, ns, Finished="True")
    assert _penalties(kc, ns) == {}
    assert _consumed(kc, ns) == {}


def test_no_entry_penalty_without_admission_fair_sharing(kc: Cluster):
    # "skips when no AdmissionFairSharing config is set"
    kc.ks.reset()
    flavor(kc, "rf")
    quotas = [{"name": "cpu", "nominalQuota": "8"}]
    spec = {
        "namespaceSelector": {},
        "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "rf", "resources": quotas}]}],
    }
    kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec})
    ns = kc.namespace()
    kc.create("localqueues", {"kind": "LocalQueue", "metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}, ns)
    kc.settle()
    _run(kc, ns, "wl", {"cpu": "4"})
    assert _penalties(kc, ns) == {}
    assert "fairSharing" not in (kc.get("localqueues", "lq", ns).get("status") or {})
