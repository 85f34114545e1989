"""`/metrics` with Kueue's metric names (kubesim/apiserver/http/metrics.py) through a served kubesim: queue depth,
reservations, admissions, evictions and preemptions as a within-ClusterQueue preemption by priority produces them."""

from __future__ import annotations

import re
import urllib.request

import pytest

from kubesim.apiserver.http.metrics import eviction_labels
from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_e2e import setup_queue


def scrape(kc: Cluster) -> dict[str, float]:
    with urllib.request.urlopen(f"{kc.ks.url}/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            match = re.fullmatch(r"(\S+) (\S+)", line)
            assert match, line
            samples[match.group(1)] = float(match.group(2))
    return samples


def test_queue_depth_admissions_and_preemptions(kc: Cluster):
    kc.priority_class("low", 10)
    kc.priority_class("high", 100)
    ns = setup_queue(kc, 2, preemption={"withinClusterQueue": "LowerPriority"})
    before = scrape(kc)
    admitted = 'kueue_admitted_workloads_total{cluster_queue="cq",replica_role="standalone"}'
    evicted = ('kueue_evicted_workloads_total{cluster_queue="cq",reason="Preempted",underlying_cause="",'
               'priority_class="low",replica_role="standalone"}')
    preempted = ('kueue_preempted_workloads_total{preempting_cluster_queue="cq",reason="InClusterQueue"'
                 ',replica_role="standalone"}')

    kc.job(ns, "low", "lq", 2, priority_class="low")
    kc.job(ns, "waiting", "lq", 1, priority_class="low")
    kc.settle(1)
    now = scrape(kc)
    assert now[admitted] - before.get(admitted, 0) == 1
    assert now['kueue_pending_workloads{cluster_queue="cq",status="inadmissible",replica_role="standalone"}'] == 1
    assert now['kueue_pending_workloads{cluster_queue="cq",status="active",replica_role="standalone"}'] == 0
    assert now['kueue_unadmitted_workloads{cluster_queue="cq",reason="WaitingForQuota",replica_role="standalone"}'] == 1
    assert now['kueue_admitted_active_workloads{cluster_queue="cq",replica_role="standalone"}'] == 1
    lq_pending = 'kueue_local_queue_pending_workloads{name="lq",namespace="' + ns + ('",status="inadmissible"'
                                                                                     ',replica_role="standalone"}')
    assert now[lq_pending] == 1
    assert now['kueue_cluster_queue_status{cluster_queue="cq",status="active",replica_role="standalone"}'] == 1
    usage = ('kueue_cluster_queue_resource_usage{cohort="",cluster_queue="cq",flavor="h100",resource="nvidia.com/gpu"'
             ',replica_role="standalone"}')
    assert now[usage] == 2
    assert now[usage.replace("resource_usage", "nominal_quota")] == 2

    kc.job(ns, "high", "lq", 2, priority_class="high")
    kc.settle()
    assert kc.admitted(ns, "high") and not kc.admitted(ns, "low")
    after = scrape(kc)
    assert after[admitted] - before.get(admitted, 0) == 2
    assert after[evicted] - before.get(evicted, 0) == 1
    assert after[preempted] - before.get(preempted, 0) == 1
    assert after['kueue_pending_workloads{cluster_queue="cq",status="inadmissible",replica_role="standalone"}'] == 2


def _series_of(kc: Cluster, cq: str) -> list[str]:
    """Every exported series labelled with the ClusterQueue, as the preempting queue too."""
    return [
        name
        for name in scrape(kc)
        if f'cluster_queue="{cq}"' in name  # matches preempting_cluster_queue="cq" as well
    ]


def test_a_deleted_cluster_queue_takes_its_series_with_it(kc: Cluster):
    """Kueue clears a deleted ClusterQueue's series, counters included (ClearClusterQueueMetrics, on the queue's
    delete event), and a deleted LocalQueue's; a queue created again under the same name counts from zero."""
    kc.priority_class("low", 10)
    kc.priority_class("high", 100)
    ns = setup_queue(kc, 2, preemption={"withinClusterQueue": "LowerPriority"})
    kc.job(ns, "low", "lq", 2, priority_class="low")
    kc.settle(1)
    kc.job(ns, "high", "lq", 2, priority_class="high")
    kc.settle(1)
    counters = {
        'kueue_quota_reserved_workloads_total{cluster_queue="cq",replica_role="standalone"}',
        'kueue_admitted_workloads_total{cluster_queue="cq",replica_role="standalone"}',
        ('kueue_evicted_workloads_total{cluster_queue="cq",reason="Preempted",underlying_cause="",priority_class="low"'
         ',replica_role="standalone"}'),
        ('kueue_preempted_workloads_total{preempting_cluster_queue="cq",reason="InClusterQueue"'
         ',replica_role="standalone"}'),
    }
    assert counters <= set(_series_of(kc, "cq"))
    lq_series = f'kueue_local_queue_admitted_active_workloads{{name="lq",namespace="{ns}",replica_role="standalone"}}'
    assert lq_series in scrape(kc)

    for job in ("low", "high"):
        kc.batch.delete_namespaced_job(job, ns, propagation_policy="Background")
    kc.custom.delete_namespaced_custom_object(*KUEUE, ns, "localqueues", "lq")
    kc.settle(1)
    assert not [name for name in scrape(kc) if f'namespace="{ns}"' in name]
    kc.custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", "cq")
    kc.settle(1)
    assert _series_of(kc, "cq") == []

    kc.cluster_queue("cq", 2)
    kc.local_queue("lq", "cq", ns)
    kc.settle()
    assert not counters & set(_series_of(kc, "cq"))
    assert scrape(kc)['kueue_pending_workloads{cluster_queue="cq",status="active",replica_role="standalone"}'] == 0
    kc.job(ns, "again", "lq", 1)
    kc.settle(1)
    assert scrape(kc)['kueue_admitted_workloads_total{cluster_queue="cq",replica_role="standalone"}'] == 1

    kc.ks.reset()  # deletes every queue: nothing of them is exported after it
    assert _series_of(kc, "cq") == []


def test_every_series_carries_the_standalone_replica_role_as_kueue_without_leader_election(kc: Cluster):
    """Kueue labels every metric but build_info with its replica's role (pkg/util/roletracker): `standalone` when
    leader election is off, as for kubesim's single replica; the label comes last, as Kueue declares it."""
    ns = setup_queue(kc, 2)
    kc.job(ns, "one", "lq", 1)
    kc.settle(1)
    series = list(scrape(kc))
    assert len(series) > 10
    assert [s for s in series if not s.endswith(',replica_role="standalone"}')] == []
    assert all(s.count("replica_role=") == 1 for s in series)


@pytest.mark.parametrize(("condition_reason", "labels"), [
    ("Preempted", ("Preempted", "")), ("PodsReadyTimeout", ("PodsReadyTimeout", "")),
    ("DeactivatedDueToAdmissionCheck", ("Deactivated", "AdmissionCheck")),
    ("DeactivatedDueToRequeuingLimitExceeded", ("Deactivated", "RequeuingLimitExceeded")),
    ("InactiveWorkload", ("InactiveWorkload", "")), ("", ("", "")),
])
def test_an_eviction_is_counted_by_reason_and_underlying_cause_as_kueue_does(condition_reason, labels):
    """Kueue writes a deactivation's cause into the Evicted condition's reason (Deactivated + DueTo + cause) and
    counts it as reason Deactivated with the cause as underlying_cause (pkg/workload/evict)."""
    assert eviction_labels(condition_reason) == labels
