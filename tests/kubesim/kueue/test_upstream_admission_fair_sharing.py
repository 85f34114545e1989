"""Kueue's Admission Fair Sharing integration cases of the "Scheduler" suites (usage half-life 2s, sampling every
1s), re-told through the official client against a served kubesim (manual clock): at Cohort level, across a restart
of Kueue, CPU usage that must not be truncated by frequent reconciles, and no fair-sharing status without
admissionFairSharing.

Source: test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go ("Scheduler": "Using
AdmissionFairSharing at Cohort level", "Restarting the manager", "Self-triggered reconciles do not truncate CPU";
"Scheduler with AdmissionFairSharing = nil"). Upstream's createWorkload makes a Workload of one pod requesting the
given cpu (generated name, priority as given); FinishWorkloads marks them Finished; Eventually polls become settles
over a few emulated seconds. The ClusterQueue-level cases are in test_upstream_admission_checks.py.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest

from kubesim.kernel.quantity import decimal_value
from kubesim.testing import KubesimProcess
from tests.kubesim.kueue.conftest import KUEUE, Cluster, _cluster
from tests.kubesim.kueue.test_upstream_controllers import cond, flavor

AFS = {"admissionFairSharing": {"usageHalfLifeTime": "2s", "usageSamplingInterval": "1s"}}
_names = itertools.count()


@pytest.fixture(scope="module")
def cluster_afs() -> Iterator[Cluster]:
    yield from _cluster(kueue_config=AFS)


@pytest.fixture
def kc_afs(cluster_afs: Cluster) -> Cluster:
    cluster_afs.ks.reset()
    return cluster_afs


def _cq(kc: Cluster, name: str, cpu: str, cohort: str = "all", **spec: object) -> None:
    quota = [{"name": "cpu", "nominalQuota": cpu}]
    group = {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": quota}]}
    body = {"namespaceSelector": {}, "cohortName": cohort, "resourceGroups": [group], **spec}
    kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": body})


def _lq(kc: Cluster, ns: str, name: str, cq: str, weight: str | None = "1") -> None:
    spec: dict = {"clusterQueue": cq}
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    kc.create("localqueues", {"kind": "LocalQueue", "metadata": {"name": name}, "spec": spec}, ns)


def _workload(kc: Cluster, ns: str, queue: str, cpu: str, priority: int = 0) -> str:
    name = f"workload-{next(_names)}"
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    podset = {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
    spec = {"queueName": queue, "priority": priority, "podSets": [podset]}
    kc.create("workloads", {"kind": "Workload", "metadata": {"name": name}, "spec": spec}, ns)
    kc.settle()
    return name


def _is(kc: Cluster, ns: str, name: str, ctype: str) -> bool:
    return (cond(kc.get("workloads", name, ns), ctype) or ("",))[0] == "True"


def _finish(kc: Cluster, ns: str, *names: str) -> None:
    """util.FinishWorkloads."""
    for name in names:
        wl = kc.get("workloads", name, ns)
        finished = {
            "type": "Finished",
            "status": "True",
            "reason": "ByTest",
            "message": "Finished by test",
            "lastTransitionTime": kc.ks.healthz()["time"],
        }
        wl["status"]["conditions"].append(finished)
        kc.custom.replace_namespaced_custom_object_status(*KUEUE, ns, "workloads", name, wl)
    kc.settle()


def _afs_status(kc: Cluster, ns: str, lq: str) -> dict | None:
    status = kc.get("localqueues", lq, ns).get("status") or {}
    return (status.get("fairSharing") or {}).get("admissionFairSharingStatus")


def _millicpu(kc: Cluster, ns: str, lq: str) -> float:
    cpu = ((_afs_status(kc, ns, lq) or {}).get("consumedResources") or {}).get("cpu", "0")
    return float(decimal_value(cpu)) * 1000


def _cohort_setup(kc: Cluster) -> str:
    """ "Using AdmissionFairSharing at Cohort level": cq1 (16 cpu, StrictFIFO, no preemption within, admission by
    usage) and cq2 (16 cpu, reclaims from the cohort, preempts lower priority within) in cohort `all`; lq-a and lq-b
    (weight 1) in cq1, lq-c in cq2."""
    flavor(kc, "default")
    _cq(
        kc,
        "cq1",
        "16",
        preemption={"withinClusterQueue": "Never"},
        queueingStrategy="StrictFIFO",
        admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"},
    )
    _cq(kc, "cq2", "16", preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"})
    ns = kc.namespace()
    for name, cq in (("lq-a", "cq1"), ("lq-b", "cq1"), ("lq-c", "cq2")):
        _lq(kc, ns, name, cq)
    kc.settle()
    return ns


def test_cohort_level_promotes_a_workload_from_the_local_queue_with_lower_recent_usage(kc_afs: Cluster):
    # "should promote a workload from LQ with lower recent usage"
    kc = kc_afs
    ns = _cohort_setup(kc)
    wl = _workload(kc, ns, "lq-a", "32")  # borrows cq2's 16
    assert _is(kc, ns, wl, "Admitted")
    kc.settle(2)
    assert _millicpu(kc, ns, "lq-a") > 0
    wl_a = _workload(kc, ns, "lq-a", "32")
    wl_b = _workload(kc, ns, "lq-b", "32")
    _finish(kc, ns, wl)
    assert _is(kc, ns, wl_b, "Admitted")
    assert not _is(kc, ns, wl_a, "QuotaReserved")


def test_cohort_level_preempts_a_workload_from_the_local_queue_with_higher_recent_usage(kc_afs: Cluster):
    # "should preempt a workload from LQ with higher recent usage": lq-a's higher sampled usage makes its
    # higher-priority workload the one cq2 reclaims from
    kc = kc_afs
    ns = _cohort_setup(kc)
    high_a = _workload(kc, ns, "lq-a", "20", priority=10)
    low_b = _workload(kc, ns, "lq-b", "12", priority=1)
    assert _is(kc, ns, high_a, "Admitted") and _is(kc, ns, low_b, "Admitted")
    kc.settle(3)
    assert _millicpu(kc, ns, "lq-a") > _millicpu(kc, ns, "lq-b") > 0
    _workload(kc, ns, "lq-c", "10")
    assert _is(kc, ns, high_a, "Preempted")
    assert not _is(kc, ns, low_b, "Evicted")


def test_cohort_level_admits_from_the_local_queue_whose_weight_is_raised(kc_afs: Cluster):
    # "admits from the LocalQueue whose weight is raised through the API"
    kc = kc_afs
    ns = _cohort_setup(kc)
    usage_b = _workload(kc, ns, "lq-b", "32")
    assert _is(kc, ns, usage_b, "Admitted")
    kc.settle(2)
    assert _millicpu(kc, ns, "lq-b") > 0
    _finish(kc, ns, usage_b)
    blocker = _workload(kc, ns, "lq-a", "32")
    assert _is(kc, ns, blocker, "Admitted")
    wl_a = _workload(kc, ns, "lq-a", "32")
    wl_b = _workload(kc, ns, "lq-b", "32")
    assert not _is(kc, ns, wl_a, "QuotaReserved") and not _is(kc, ns, wl_b, "QuotaReserved")
    kc.custom.patch_namespaced_custom_object(
        *KUEUE, ns, "localqueues", "lq-a", {"spec": {"fairSharing": {"weight": "1000000"}}}
    )
    kc.settle()
    _finish(kc, ns, blocker)
    assert _is(kc, ns, wl_a, "Admitted")
    assert not _is(kc, ns, wl_b, "QuotaReserved")


def test_cpu_usage_is_not_truncated_across_sampling_intervals(kc_afs: Cluster):
    # "Self-triggered reconciles do not truncate CPU": a ClusterQueue without admission by usage, a LocalQueue
    # without a weight; its 500m of CPU shows in the sampled usage and stays above zero sample after sample
    kc = kc_afs
    flavor(kc, "default")
    _cq(kc, "cq-afs-cpu", "4", cohort="cohort")
    ns = kc.namespace()
    _lq(kc, ns, "lq-afs-cpu", "cq-afs-cpu", weight=None)
    kc.settle()
    wl = _workload(kc, ns, "lq-afs-cpu", "500m")
    assert _is(kc, ns, wl, "Admitted")
    kc.settle(1)
    assert "cpu" in _afs_status(kc, ns, "lq-afs-cpu")["consumedResources"]  # type: ignore[index]
    assert _millicpu(kc, ns, "lq-afs-cpu") > 0
    for _ in range(6):
        kc.settle(0.5)
        assert _millicpu(kc, ns, "lq-afs-cpu") > 0


def test_no_fair_sharing_status_without_admission_fair_sharing(kc: Cluster):
    # "Scheduler with AdmissionFairSharing = nil": "should ignore FairSharing"
    flavor(kc, "default")
    _cq(
        kc,
        "cq1",
        "32",
        preemption={"withinClusterQueue": "Never"},
        queueingStrategy="StrictFIFO",
        admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"},
    )
    ns = kc.namespace()
    _lq(kc, ns, "lq-a", "cq1")
    kc.settle()
    wl = _workload(kc, ns, "lq-a", "32")
    assert _is(kc, ns, wl, "Admitted")
    kc.settle(3)
    assert "fairSharing" not in (kc.get("localqueues", "lq-a", ns).get("status") or {})


def test_local_queue_usage_is_kept_across_a_restart(tmp_path):
    # "Restarting the manager": "should retain the LocalQueue's historical usage across a restart". kubesim is
    # restarted from its --state file (Kueue restarts with the cluster's objects), the second time with a one-hour
    # half-life, so a status written after the restart stays near the persisted usage only if it was kept.
    state = str(tmp_path / "state.json")
    short, long = tmp_path / "short.json", tmp_path / "long.json"
    short.write_text(json.dumps(AFS))
    long.write_text(json.dumps({"admissionFairSharing": {"usageHalfLifeTime": "1h", "usageSamplingInterval": "1s"}}))
    with KubesimProcess(str(tmp_path), "--state", state, "--config", str(short)) as first:
        api = first.api_client()
        kc = Cluster(first, api)  # type: ignore[arg-type]
        flavor(kc, "default")
        _cq(kc, "cq-restart", "16", admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"})
        ns = kc.namespace()
        _lq(kc, ns, "lq-restart", "cq-restart")
        kc.settle()
        wl1 = _workload(kc, ns, "lq-restart", "8")
        assert _is(kc, ns, wl1, "Admitted")
        kc.settle(10)
        assert _millicpu(kc, ns, "lq-restart") > 7000
        _finish(kc, ns, wl1)
        frozen = _millicpu(kc, ns, "lq-restart")
        assert frozen > 2000
        restart_time = first.healthz()["time"]
        api.close()
    with KubesimProcess(str(tmp_path), "--state", state, "--config", str(long)) as second:
        api = second.api_client()
        kc = Cluster(second, api)  # type: ignore[arg-type]
        kc.settle(1)
        wl2 = _workload(kc, ns, "lq-restart", "1")
        assert _is(kc, ns, wl2, "Admitted")
        for _ in range(5):
            kc.settle(1)
            status = _afs_status(kc, ns, "lq-restart")
            assert status is not None and status["lastUpdate"] > restart_time
            assert _millicpu(kc, ns, "lq-restart") > frozen * 7 / 10
        api.close()
