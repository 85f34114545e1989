"""Kueue's AdmissionCheck controller and Admission Fair Sharing integration cases, re-told through the official client
against a served kubesim (manual clock).

Sources: test/integration/singlecluster/controller/core/admissioncheck_controller_test.go (the resource-in-use
finalizer of AdmissionChecks) and test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go ("Using
AdmissionFairSharing at ClusterQueue level"). Upstream waits with Eventually; here each write settles. Upstream's
createWorkload makes a Workload of one pod requesting the given cpu; FinishWorkloads marks them Finished.
"""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from kubesim.kernel.quantity import decimal_value
from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_upstream_controllers import check, cluster_queue, cond, flavor, fq
from tests.kubesim.kueue.test_upstream_queue_metrics import finish_evictions

IN_USE = "kueue.x-k8s.io/resource-in-use"
POOL = "portal.gpu/pool"


def _gone(kc: Cluster, plural: str, name: str) -> bool:
    try:
        kc.get(plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


# -- admissioncheck_controller_test.go ---------------------------------------------------------------------------


def _check_in_use(kc: Cluster) -> None:
    check(kc, "check1", active=True)
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(
        kc,
        "foo",
        [("cpu", [fq("default", "cpu", "5")])],
        admissionChecksStrategy={"admissionChecks": [{"name": "check1"}]},
    )
    kc.settle()
    assert cond(kc.get("clusterqueues", "foo"), "Active")[0] == "True"
    assert IN_USE in kc.get("admissionchecks", "check1")["metadata"]["finalizers"]
    kc.custom.delete_cluster_custom_object(*KUEUE, "admissionchecks", "check1")
    kc.settle()
    assert kc.get("admissionchecks", "check1")["metadata"].get("deletionTimestamp")


def test_the_admission_check_is_deleted_once_its_cluster_queue_no_longer_uses_it(kc: Cluster):
    _check_in_use(kc)
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "foo", {"spec": {"cohortName": "foo-cohort"}})
    kc.settle()
    assert not _gone(kc, "admissionchecks", "check1")  # still used
    strategy = {"admissionChecks": [{"name": "check2"}]}
    kc.custom.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "foo", {"spec": {"admissionChecksStrategy": strategy}}
    )
    kc.settle()
    assert _gone(kc, "admissionchecks", "check1")


def test_the_admission_check_is_deleted_once_its_cluster_queue_is_deleted(kc: Cluster):
    _check_in_use(kc)
    kc.custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", "foo")
    kc.settle()
    assert _gone(kc, "clusterqueues", "foo")
    assert _gone(kc, "admissionchecks", "check1")


def test_an_unused_admission_check_gets_the_finalizer_and_goes_when_deleted(kc: Cluster):
    check(kc, "lonely")
    kc.settle()
    assert IN_USE in kc.get("admissionchecks", "lonely")["metadata"]["finalizers"]
    kc.custom.delete_cluster_custom_object(*KUEUE, "admissionchecks", "lonely")
    kc.settle()
    assert _gone(kc, "admissionchecks", "lonely")


# -- fair_sharing_test.go: Using AdmissionFairSharing at ClusterQueue level ------------------------------------


@pytest.fixture(scope="module")
def cluster_afs():
    from tests.kubesim.kueue.conftest import _cluster

    config = {"admissionFairSharing": {"usageHalfLifeTime": "1s", "usageSamplingInterval": "1s"}}
    yield from _cluster(kueue_config=config)


@pytest.fixture
def kc_afs(cluster_afs: Cluster) -> Cluster:
    cluster_afs.ks.reset()
    return cluster_afs


def _afs_queues(kc: Cluster, **spec: object) -> str:
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(
        kc,
        "cq1",
        [("cpu", [fq("default", "cpu", "8")])],
        admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"},
        **spec,
    )
    ns = kc.namespace()
    for name in ("lq-a", "lq-b", "lq-c"):
        body = {"kind": "LocalQueue", "metadata": {"name": name}, "spec": {"clusterQueue": "cq1"}}
        body["spec"]["fairSharing"] = {"weight": "1"}
        kc.create("localqueues", body, ns)
    kc.settle()
    return ns


_wl_names = iter(range(10**6))


def _workload(kc: Cluster, ns: str, queue: str, cpu: str) -> str:
    name = f"wl-{next(_wl_names)}"
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    podset = {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
    body = {"kind": "Workload", "metadata": {"name": name}, "spec": {"queueName": queue, "podSets": [podset]}}
    kc.create("workloads", body, ns)
    kc.settle()
    return name


def _admitted(kc: Cluster, ns: str, names: list[str]) -> list[str]:
    return [n for n in names if (cond(kc.get("workloads", n, ns), "Admitted") or ("",))[0] == "True"]


def _finish(kc: Cluster, ns: str, *names: str) -> None:
    for name in names:
        condition = {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "message": "finished",
            "lastTransitionTime": kc.ks.healthz()["time"],
        }
        wl = kc.get("workloads", name, ns)
        wl["status"]["conditions"].append(condition)
        kc.custom.replace_namespaced_custom_object_status(*KUEUE, ns, "workloads", name, wl)
    kc.settle()


def _usage(kc: Cluster, ns: str, lq: str) -> float:
    status = kc.get("localqueues", lq, ns).get("status") or {}
    consumed = ((status.get("fairSharing") or {}).get("admissionFairSharingStatus") or {}).get("consumedResources")
    return float(decimal_value((consumed or {}).get("cpu", "0"))) * 1000


def test_afs_admits_one_workload_from_each_local_queue_when_quota_is_limited(kc_afs: Cluster):
    kc = kc_afs
    ns = _afs_queues(kc, stopPolicy="Hold")
    lq_a = [_workload(kc, ns, "lq-a", "4"), _workload(kc, ns, "lq-a", "4")]
    lq_b = [_workload(kc, ns, "lq-b", "4"), _workload(kc, ns, "lq-b", "4")]
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cq1", {"spec": {"stopPolicy": "None"}})
    kc.settle()
    assert len(_admitted(kc, ns, lq_a)) == 1
    assert len(_admitted(kc, ns, lq_b)) == 1


def test_afs_prioritizes_workloads_from_less_active_local_queues(kc_afs: Cluster):
    kc = kc_afs
    ns = _afs_queues(kc)
    initial = [_workload(kc, ns, "lq-a", "4"), _workload(kc, ns, "lq-a", "4")]
    assert _admitted(kc, ns, initial) == initial
    _workload(kc, ns, "lq-a", "4")
    _workload(kc, ns, "lq-a", "4")
    wl_b = _workload(kc, ns, "lq-b", "4")
    kc.settle(10)  # a few sampling intervals
    assert _usage(kc, ns, "lq-a") > 7500
    assert _usage(kc, ns, "lq-b") == 0
    _finish(kc, ns, *initial)
    assert _admitted(kc, ns, [wl_b]) == [wl_b]


def test_afs_admits_a_workload_from_a_new_local_queue_when_all_others_have_high_usage(kc_afs: Cluster):
    kc = kc_afs
    ns = _afs_queues(kc)
    initial = [_workload(kc, ns, "lq-a", "4"), _workload(kc, ns, "lq-b", "4")]
    assert _admitted(kc, ns, initial) == initial
    for queue in ("lq-a", "lq-a", "lq-b", "lq-b"):
        _workload(kc, ns, queue, "4")
    wl_c = _workload(kc, ns, "lq-c", "4")
    kc.settle(10)
    assert _usage(kc, ns, "lq-a") > 3900 and _usage(kc, ns, "lq-b") > 3900
    assert _usage(kc, ns, "lq-c") == 0
    _finish(kc, ns, *initial)
    assert _admitted(kc, ns, [wl_c]) == [wl_c]


def test_afs_admits_workloads_from_less_active_local_queues_after_quota_is_released(kc_afs: Cluster):
    kc = kc_afs
    ns = _afs_queues(kc)
    wl1, wl2 = _workload(kc, ns, "lq-a", "4"), _workload(kc, ns, "lq-a", "4")
    lq_b = [_workload(kc, ns, "lq-b", "4"), _workload(kc, ns, "lq-b", "4")]
    wl_c = _workload(kc, ns, "lq-c", "4")
    kc.settle(10)
    assert _usage(kc, ns, "lq-a") > 7500
    assert _usage(kc, ns, "lq-b") == 0 and _usage(kc, ns, "lq-c") == 0
    _finish(kc, ns, wl1)
    _finish(kc, ns, wl2)
    assert len(_admitted(kc, ns, lq_b)) == 1
    assert _admitted(kc, ns, [wl_c]) == [wl_c]


def test_afs_updates_consumed_resources_on_admission(kc_afs: Cluster):
    kc = kc_afs
    ns = _afs_queues(kc)
    first = _workload(kc, ns, "lq-a", "4")
    assert _admitted(kc, ns, [first]) == [first]
    kc.settle(10)
    assert _usage(kc, ns, "lq-a") > 0
    second = _workload(kc, ns, "lq-a", "4")
    assert _admitted(kc, ns, [second]) == [second]
    kc.settle(10)
    assert _usage(kc, ns, "lq-a") > 3900


def _ledger(kc: Cluster, ns: str, lq: str) -> dict:
    """The LocalQueue's pending entry penalties by workload (upstream reads its manager's AfsUsageLedger)."""
    return kc.ks.sim.kueue.state.afs_records.get((ns, lq), {})  # type: ignore[union-attr]


def test_afs_admission_settles_the_entry_penalty_into_the_consumed_usage(kc_afs: Cluster):
    """ "should update consumed resources and subtract entry penalties on workload admission"."""
    kc = kc_afs
    ns = _afs_queues(kc)
    first = _workload(kc, ns, "lq-a", "4")
    assert _admitted(kc, ns, [first]) == [first]
    assert _usage(kc, ns, "lq-a") > 0  # at once, not at the next sample
    assert _ledger(kc, ns, "lq-a") == {}
    second = _workload(kc, ns, "lq-a", "4")
    assert _admitted(kc, ns, [second]) == [second]
    kc.settle(10)
    assert _usage(kc, ns, "lq-a") > 3900
    assert _ledger(kc, ns, "lq-a") == {}


def _afs_with_check(kc: Cluster) -> str:
    check(kc, "check1", active=True)
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(
        kc,
        "cq-with-check",
        [("cpu", [fq("default", "cpu", "8")])],
        admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"},
        admissionChecksStrategy={"admissionChecks": [{"name": "check1"}]},
    )
    ns = kc.namespace()
    body = {"kind": "LocalQueue", "metadata": {"name": "lq-a"}, "spec": {"clusterQueue": "cq-with-check"}}
    body["spec"]["fairSharing"] = {"weight": "1"}
    kc.create("localqueues", body, ns)
    kc.settle()
    return ns


def _set_check(kc: Cluster, ns: str, name: str, state: str) -> None:
    wl = kc.get("workloads", name, ns)
    for c in wl["status"]["admissionChecks"]:
        if c["name"] == "check1":
            c.update(state=state, message="", lastTransitionTime=kc.ks.healthz()["time"])
    kc.custom.replace_namespaced_custom_object_status(*KUEUE, ns, "workloads", name, wl)
    kc.settle()


def _reserved(kc: Cluster, ns: str, name: str) -> bool:
    return (cond(kc.get("workloads", name, ns), "QuotaReserved") or ("",))[0] == "True"


def test_afs_the_entry_penalty_settles_when_the_admission_check_admits(kc_afs: Cluster):
    kc = kc_afs
    ns = _afs_with_check(kc)
    wl = _workload(kc, ns, "lq-a", "4")
    assert _reserved(kc, ns, wl) and not _admitted(kc, ns, [wl])
    assert list(_ledger(kc, ns, "lq-a")) == [f"{ns}/{wl}"]
    _set_check(kc, ns, wl, "Ready")
    assert _admitted(kc, ns, [wl]) == [wl]
    assert _ledger(kc, ns, "lq-a") == {}
    assert _usage(kc, ns, "lq-a") > 0


def test_afs_the_entry_penalty_goes_with_a_workload_deleted_before_its_check(kc_afs: Cluster):
    kc = kc_afs
    ns = _afs_with_check(kc)
    wl = _workload(kc, ns, "lq-a", "4")
    assert list(_ledger(kc, ns, "lq-a")) == [f"{ns}/{wl}"]
    kc.custom.delete_namespaced_custom_object(*KUEUE, ns, "workloads", wl)
    kc.settle()
    assert _ledger(kc, ns, "lq-a") == {}


def test_afs_entry_penalties_do_not_stack_when_an_evicted_workload_reserves_again(kc_afs: Cluster):
    kc = kc_afs
    ns = _afs_with_check(kc)
    wl = _workload(kc, ns, "lq-a", "4")
    first = dict(_ledger(kc, ns, "lq-a"))
    assert list(first) == [f"{ns}/{wl}"]
    _set_check(kc, ns, wl, "Retry")
    assert cond(kc.get("workloads", wl, ns), "Evicted")[0] == "True"
    assert _ledger(kc, ns, "lq-a") == first  # evicted, active, on the same LocalQueue: the record stays
    finish_evictions(kc, "cq-with-check", 1)  # no job owns it: its reservation is unset by hand, as upstream's util
    kc.settle(1)
    assert _reserved(kc, ns, wl) and cond(kc.get("workloads", wl, ns), "Evicted")[0] == "False"  # reserved again
    assert _ledger(kc, ns, "lq-a") == first  # replaced, not stacked


# -- fair_sharing_test.go: a preemptor waiting for several evictions, PrioritizePreemptorWorkloads (alpha) -------


def _gated_cluster(gate: bool | None):
    from tests.kubesim.kueue.conftest import _cluster

    config = {} if gate is None else {"featureGates": {"PrioritizePreemptorWorkloads": gate}}
    yield from _cluster(kueue_config=config)


def _thrash_setup(kc: Cluster) -> tuple[str, list[str], str]:
    kc.create("cohorts", {"kind": "Cohort", "metadata": {"name": "thrash-cohort"}, "spec": {}})
    flavor(kc, "default", **{POOL: "h100"})
    any_reclaim = {"preemption": {"reclaimWithinCohort": "Any"}, "cohortName": "thrash-cohort"}
    for name, cpu, memory in (("cq-1", "10", "0"), ("cq-2", "0", "10")):
        resources = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]
        group = {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default", "resources": resources}]}
        spec = {"namespaceSelector": {}, "resourceGroups": [group], **any_reclaim}
        kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    ns = kc.namespace()
    kc.local_queue("cq-1", "cq-1", ns)
    kc.local_queue("cq-2", "cq-2", ns)

    def workload(name: str, queue: str, cpu: str, memory: str, priority: int) -> str:
        container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        podset = {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
        spec = {"queueName": queue, "priority": priority, "podSets": [podset]}
        kc.create("workloads", {"kind": "Workload", "metadata": {"name": name}, "spec": spec}, ns)
        kc.settle()
        return name

    victims = [workload("wl-a", "cq-2", "1", "0", 100), workload("wl-b", "cq-2", "1", "0", 100)]
    assert _admitted(kc, ns, victims) == victims
    preemptor = workload("preemptor", "cq-1", "10", "10", 0)
    for v in victims:
        assert cond(kc.get("workloads", v, ns), "Evicted")[:2] == ("True", "Preempted")
    return ns, victims, preemptor


@pytest.mark.parametrize("gate", [True, None], ids=["PrioritizePreemptorWorkloads", "default"])
def test_a_preemptor_waiting_for_several_evictions_keeps_its_quota(gate: bool | None):
    """ "Should prevent other workloads from stealing quota when preemptor is waiting for multiple evictions", with
    the gate on as upstream runs it; at v0.20's default (off) the first victim to finish its eviction is admitted
    again in the capacity the preemptor waits for."""
    for kc in _gated_cluster(gate):
        ns, (wl_a, _), preemptor = _thrash_setup(kc)
        finish_evictions(kc, "cq-2", 1)  # wl-a's: the first evicted one listed
        kc.settle(1)
        assert cond(kc.get("workloads", preemptor, ns), "QuotaReserved")[:2] == (
            "False",
            "WaitingForPreemptedWorkloads",
        )
        if gate:
            assert not _reserved(kc, ns, wl_a)  # the preemptor's capacity is not stolen
            finish_evictions(kc, "cq-2", 1)
            kc.settle(1)
            assert _admitted(kc, ns, [preemptor]) == [preemptor]
        else:
            # wl-a took the capacity back, and the waiting preemptor has to preempt it again
            wl = kc.get("workloads", wl_a, ns)
            assert cond(wl, "QuotaReserved")[0] == "True" and cond(wl, "Evicted")[:2] == ("True", "Preempted")


def test_feature_gates_are_checked_at_start():
    from kubesim.kueue.config import KueueConfig

    assert KueueConfig.from_dict({"featureGates": {"PrioritizePreemptorWorkloads": True}}).enabled(
        "PrioritizePreemptorWorkloads"
    )
    assert not KueueConfig.default().enabled("PrioritizePreemptorWorkloads")
    assert KueueConfig.default().enabled("FinishOrphanedWorkloads")
    with pytest.raises(ValueError, match="unrecognized feature gate: NoSuchGate"):
        KueueConfig.from_dict({"featureGates": {"NoSuchGate": True}})
    with pytest.raises(ValueError, match="TopologyAwareScheduling=false: kubesim emulates"):
        KueueConfig.from_dict({"featureGates": {"TopologyAwareScheduling": False}})
