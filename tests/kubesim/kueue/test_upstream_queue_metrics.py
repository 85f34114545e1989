"""Kueue's pending-workload counts against a served kubesim: `kueue_pending_workloads{status}` and
`kueue_local_queue_pending_workloads{status}` on /metrics, and the ClusterQueue / LocalQueue `pendingWorkloads`
status, counted by queue membership as Kueue's queue manager counts them (pkg/cache/queue), plus the clearing of a
deleted ClusterQueue's series (pkg/metrics ClearClusterQueueMetrics, called on the ClusterQueue's delete event).

Each test is named after the upstream case it re-tells (kubernetes-sigs/kueue: test/integration/singlecluster/
scheduler/scheduler_test.go, scheduler/fairsharing/fair_sharing_test.go, controller/core/clusterqueue_controller_test.go
and pkg/cache/queue/manager_test.go's TestStatus), with Workloads created over HTTP as upstream creates them and
upstream's util.ExpectPendingWorkloadsMetric read from /metrics. Nothing is carried over.
"""

from __future__ import annotations

from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_metrics import scrape
from tests.kubesim.kueue.test_upstream_controllers import (
    POOL,
    _job,
    _wl_of,
    cluster_queue,
    cond,
    delete,
    finish,
    flavor,
    fq,
    lq_status,
    now,
)


def pending(kc: Cluster, cq: str) -> tuple[float, float]:
    """util.ExpectPendingWorkloadsMetric's (active, inadmissible), from /metrics."""
    samples = scrape(kc)
    return tuple(  # type: ignore[return-value]
        samples[f'kueue_pending_workloads{{cluster_queue="{cq}",status="{status}",replica_role="standalone"}}']
        for status in ("active", "inadmissible")
    )


def lq_pending(kc: Cluster, ns: str, lq: str) -> tuple[float, float] | None:
    """util.ExpectLQPendingWorkloadsMetric's (active, inadmissible); None when the series is not exported."""
    samples = scrape(kc)
    keys = [
        f'kueue_local_queue_pending_workloads{{name="{lq}",namespace="{ns}",status="{s}",replica_role="standalone"}}'
        for s in ("active", "inadmissible")
    ]
    if not any(k in samples for k in keys):
        return None
    return samples[keys[0]], samples[keys[1]]


def metric(kc: Cluster, name: str) -> float | None:
    return scrape(kc).get(name)


def wl(kc: Cluster, ns: str, name: str, queue: str, cpu: str, priority: int | None = None) -> None:
    spec: dict = {
        "queueName": queue,
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
                    }
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    kc.create("workloads", {"kind": "Workload", "metadata": {"name": name}, "spec": spec}, ns)


def reserved(kc: Cluster, ns: str, name: str) -> bool:
    return (cond(kc.get("workloads", name, ns), "QuotaReserved") or ("",))[0] == "True"


def namespace(kc: Cluster, **labels: str) -> str:
    name = kc.namespace()
    kc.core.patch_namespace(name, {"metadata": {"labels": labels}})
    return name


def finish_evictions(kc: Cluster, cq: str, n: int) -> None:
    """util.FinishEvictionOfWorkloadsInCQ: until n are done, the reservations of cq's evicted Workloads (no Job owns
    them) unset by hand, reason Pending; each finished eviction lets the waiting preemptor in and the next one ask
    for its own victim."""
    done = 0
    while done < n:
        evicted = [
            w
            for w in kc.custom.list_cluster_custom_object(*KUEUE, "workloads")["items"]
            if ((w.get("status") or {}).get("admission") or {}).get("clusterQueue") == cq
            and (cond(w, "Evicted") or ("",))[0] == "True"
            and cond(w, "QuotaReserved")[0] == "True"
        ]
        assert evicted, f"{done} evictions finished in {cq}, want {n}"
        for w in evicted[: n - done]:
            qr = {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": "Eviction finished by test",
                "lastTransitionTime": now(kc),
            }
            conditions = [c for c in w["status"]["conditions"] if c["type"] != "QuotaReserved"] + [qr]
            md = w["metadata"]
            kc.custom.patch_namespaced_custom_object_status(
                *KUEUE,
                md["namespace"],
                "workloads",
                md["name"],
                {"status": {"admission": None, "conditions": conditions}},
            )
            done += 1
        kc.settle(1)


def strict_fifo_queue(kc: Cluster) -> str:
    """The "Queueing with StrictFIFO" setup: 5 cpu, no borrowing, only namespaces labelled dep=eng."""
    flavor(kc, "on-demand")
    selector = {"matchExpressions": [{"key": "dep", "operator": "In", "values": ["eng"]}]}
    cluster_queue(
        kc,
        "strict-fifo-cq",
        [("cpu", [fq("on-demand", "cpu", "5", "0")])],
        queueingStrategy="StrictFIFO",
        namespaceSelector=selector,
        cohortName="cohort",
    )
    return namespace(kc, dep="eng")


# -- scheduler_test.go ------------------------------------------------------------------------------------------


def test_strict_fifo_should_schedule_workloads_by_their_priority_strictly(kc: Cluster):
    """The head that does not fit stays at the head of a StrictFIFO queue and blocks the one behind it: both are
    in the heap, so both count as active."""
    ns = strict_fifo_queue(kc)
    wl(kc, ns, "wl1", "strict-fifo-q", "2", priority=100)
    wl(kc, ns, "wl2", "strict-fifo-q", "5", priority=10)
    wl(kc, ns, "wl3", "strict-fifo-q", "1", priority=1)  # fits, but may not pass wl2
    kc.local_queue("strict-fifo-q", "strict-fifo-cq", ns)
    kc.settle(1)
    assert reserved(kc, ns, "wl1") and not reserved(kc, ns, "wl2") and not reserved(kc, ns, "wl3")
    assert cond(kc.get("workloads", "wl2", ns), "QuotaReserved")[:2] == ("False", "WaitingForQuota")
    assert pending(kc, "strict-fifo-cq") == (2, 0)
    assert metric(kc, 'kueue_reserving_active_workloads{cluster_queue="strict-fifo-cq",replica_role="standalone"}') == 1
    assert metric(kc, 'kueue_admitted_workloads_total{cluster_queue="strict-fifo-cq",replica_role="standalone"}') == 1
    assert lq_pending(kc, ns, "strict-fifo-q") == (2, 0)
    assert kc.get("clusterqueues", "strict-fifo-cq")["status"]["pendingWorkloads"] == 2


def test_strict_fifo_workloads_not_matching_namespace_selector_should_not_block_others(kc: Cluster):
    ns = strict_fifo_queue(kc)
    other = kc.namespace()
    kc.local_queue("not-matching-queue", "strict-fifo-cq", other)
    kc.local_queue("matching-queue", "strict-fifo-cq", ns)
    wl(kc, ns, "wl1", "matching-queue", "2", priority=100)
    wl(kc, other, "wl2", "not-matching-queue", "5", priority=10)
    wl(kc, ns, "wl3", "matching-queue", "1", priority=1)
    kc.settle(1)
    assert reserved(kc, ns, "wl1") and reserved(kc, ns, "wl3") and not reserved(kc, other, "wl2")
    assert pending(kc, "strict-fifo-cq") == (0, 1)


def _prod_queue(kc: Cluster, **spec: object) -> str:
    """The prod ClusterQueue of "Scheduling workloads on clusterQueues": a tainted spot flavor no workload here
    tolerates and 5 cpu on demand, in a cohort of its own."""
    kc.create(
        "resourceflavors",
        {
            "kind": "ResourceFlavor",
            "metadata": {"name": "spot-tainted"},
            "spec": {
                "nodeLabels": {"instance-type": "spot"},
                "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}],
            },
        },
    )
    flavor(kc, "on-demand", **{"instance-type": "on-demand"})
    cluster_queue(
        kc,
        "prod-cq",
        [("cpu", [fq("spot-tainted", "cpu", "5", "5"), fq("on-demand", "cpu", "5")])],
        cohortName="prod-cohort",
        **spec,
    )
    return kc.namespace()


def _by_priority(kc: Cluster, ns: str) -> None:
    for name, prio in (
        ("wl-low-priority", 0),
        ("wl-mid-priority-1", 10),
        ("wl-mid-priority-2", 10),
        ("wl-high-priority-1", 100),
        ("wl-high-priority-2", 100),
    ):
        wl(kc, ns, name, "prod-queue", "2", priority=prio)
    kc.settle(1)


def _then_by_priority(kc: Cluster, ns: str) -> None:
    kc.settle(1)
    assert reserved(kc, ns, "wl-high-priority-1") and reserved(kc, ns, "wl-high-priority-2")
    assert pending(kc, "prod-cq") == (0, 3)
    assert metric(kc, 'kueue_reserving_active_workloads{cluster_queue="prod-cq",replica_role="standalone"}') == 2
    assert metric(kc, 'kueue_quota_reserved_workloads_total{cluster_queue="prod-cq",replica_role="standalone"}') == 2
    assert metric(kc, 'kueue_admitted_workloads_total{cluster_queue="prod-cq",replica_role="standalone"}') == 2
    finish(kc, ns, "wl-high-priority-1", "wl-high-priority-2")
    assert reserved(kc, ns, "wl-mid-priority-1") and reserved(kc, ns, "wl-mid-priority-2")
    assert pending(kc, "prod-cq") == (0, 1)
    assert metric(kc, 'kueue_reserving_active_workloads{cluster_queue="prod-cq",replica_role="standalone"}') == 2
    assert metric(kc, 'kueue_quota_reserved_workloads_total{cluster_queue="prod-cq",replica_role="standalone"}') == 4
    assert metric(kc, 'kueue_admitted_workloads_total{cluster_queue="prod-cq",replica_role="standalone"}') == 4


def test_hold_local_queue_at_startup_should_admit_workloads_according_to_their_priorities(kc: Cluster):
    """A stopped LocalQueue is out of Kueue's queue manager: its workloads are in no ClusterQueue's queue."""
    ns = _prod_queue(kc)
    kc.create(
        "localqueues",
        {
            "kind": "LocalQueue",
            "metadata": {"name": "prod-queue"},
            "spec": {"clusterQueue": "prod-cq", "stopPolicy": "Hold"},
        },
        ns,
    )
    _by_priority(kc, ns)
    assert pending(kc, "prod-cq") == (0, 0)
    assert metric(kc, 'kueue_admitted_workloads_total{cluster_queue="prod-cq",replica_role="standalone"}') is None
    assert lq_pending(kc, ns, "prod-queue") is None  # Kueue clears a stopped LocalQueue's pending series
    assert lq_status(kc, "prod-queue", ns)["pendingWorkloads"] == 0
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "localqueues", "prod-queue", {"spec": {"stopPolicy": "None"}})
    _then_by_priority(kc, ns)


def test_hold_cluster_queue_at_startup_should_admit_workloads_according_to_their_priorities(kc: Cluster):
    """A stopped ClusterQueue is inactive: its whole queue counts as inadmissible."""
    ns = _prod_queue(kc, stopPolicy="Hold")
    kc.local_queue("prod-queue", "prod-cq", ns)
    _by_priority(kc, ns)
    assert pending(kc, "prod-cq") == (0, 5)
    assert lq_pending(kc, ns, "prod-queue") == (0, 5)
    assert kc.get("clusterqueues", "prod-cq")["status"]["pendingWorkloads"] == 5
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "prod-cq", {"spec": {"stopPolicy": "None"}})
    _then_by_priority(kc, ns)


def test_deleting_cluster_queues_should_not_admit_new_created_workloads(kc: Cluster):
    """A terminating ClusterQueue is not active: a workload created then waits in its queue as inadmissible."""
    flavor(kc, "on-demand")
    cluster_queue(kc, "cluster-queue", [("cpu", [fq("on-demand", "cpu", "5")])])
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    wl(kc, ns, "workload1", "queue", "1")
    kc.settle(1)
    assert reserved(kc, ns, "workload1")
    kc.custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", "cluster-queue")
    kc.settle(1)
    assert kc.get("clusterqueues", "cluster-queue")["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    wl(kc, ns, "workload2", "queue", "1")
    kc.settle(1)
    assert not reserved(kc, ns, "workload2")
    assert metric(kc, 'kueue_reserving_active_workloads{cluster_queue="cluster-queue",replica_role="standalone"}') == 1
    assert metric(kc, 'kueue_admitted_workloads_total{cluster_queue="cluster-queue",replica_role="standalone"}') == 1
    assert pending(kc, "cluster-queue") == (0, 1)
    assert metric(kc, ('kueue_cluster_queue_status{cluster_queue="cluster-queue",status="terminating"'
                       ',replica_role="standalone"}')) == 1


def test_should_re_enqueue_by_the_delete_event_of_workload_belonging_to_the_same_cohort(kc: Cluster):
    """The set-aside workload goes back to the heap when a reservation in its cohort tree goes away."""
    kc.create(
        "resourceflavors",
        {
            "kind": "ResourceFlavor",
            "metadata": {"name": "spot-tainted"},
            "spec": {"nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]},
        },
    )
    flavor(kc, "on-demand")
    cluster_queue(
        kc,
        "cluster-queue",
        [("cpu", [fq("spot-tainted", "cpu", "5", "5"), fq("on-demand", "cpu", "5")])],
        cohortName="prod",
    )
    cluster_queue(kc, "foo-clusterqueue", [("cpu", [fq("on-demand", "cpu", "5")])], cohortName="prod")
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    kc.local_queue("foo-queue", "foo-clusterqueue", ns)
    wl(kc, ns, "on-demand-wl1", "foo-queue", "8")
    kc.settle(1)
    assert reserved(kc, ns, "on-demand-wl1") and pending(kc, "foo-clusterqueue") == (0, 0)
    wl(kc, ns, "on-demand-wl2", "queue", "8")
    kc.settle(1)
    assert not reserved(kc, ns, "on-demand-wl2") and pending(kc, "cluster-queue") == (0, 1)
    wl(kc, ns, "on-demand-wl3", "foo-queue", "2")
    kc.settle(1)
    assert reserved(kc, ns, "on-demand-wl3") and pending(kc, "foo-clusterqueue") == (0, 0)
    kc.custom.delete_namespaced_custom_object(*KUEUE, ns, "workloads", "on-demand-wl1", propagation_policy="Background")
    kc.settle(1)
    assert reserved(kc, ns, "on-demand-wl2")
    assert pending(kc, "cluster-queue") == (0, 0)
    assert metric(kc, 'kueue_admitted_workloads_total{cluster_queue="cluster-queue",replica_role="standalone"}') == 1


def test_should_re_enqueue_by_the_update_event_of_cluster_queue(kc: Cluster):
    flavor(kc, "on-demand")
    cluster_queue(kc, "cluster-queue", [("cpu", [fq("on-demand", "cpu", "5")])])
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    wl(kc, ns, "on-demand-wl", "queue", "6")
    kc.settle(1)
    assert pending(kc, "cluster-queue") == (0, 1)
    assert metric(kc, ('kueue_quota_reserved_workloads_total{cluster_queue="cluster-queue"'
                       ',replica_role="standalone"}')) is None
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [
                {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": "6", "borrowingLimit": "0"}]}
            ],
        }
    ]
    kc.custom.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "cluster-queue", {"spec": {"cohortName": "cohort", "resourceGroups": groups}}
    )
    kc.settle(1)
    assert reserved(kc, ns, "on-demand-wl")
    assert pending(kc, "cluster-queue") == (0, 0)
    assert metric(kc, 'kueue_admitted_workloads_total{cluster_queue="cluster-queue",replica_role="standalone"}') == 1


def test_should_admit_workloads_from_the_selected_namespaces(kc: Cluster):
    flavor(kc, "on-demand")
    selector = {"matchExpressions": [{"key": "dep", "operator": "In", "values": ["eng"]}]}
    cluster_queue(
        kc, "cluster-queue-with-selector", [("cpu", [fq("on-demand", "cpu", "5")])], namespaceSelector=selector
    )
    ns, foo = kc.namespace(), kc.namespace()
    kc.local_queue("queue", "cluster-queue-with-selector", ns)
    kc.local_queue("foo", "cluster-queue-with-selector", foo)
    wl(kc, ns, "wl1", "queue", "1")
    wl(kc, foo, "wl2", "foo", "1")
    kc.settle(1)
    assert pending(kc, "cluster-queue-with-selector") == (0, 2)
    kc.core.patch_namespace(ns, {"metadata": {"labels": {"dep": "eng"}}})
    kc.settle(1)
    assert reserved(kc, ns, "wl1")
    assert pending(kc, "cluster-queue-with-selector") == (0, 1)


def test_should_be_inactive_until_the_flavor_is_created(kc: Cluster):
    cluster_queue(kc, "foo-cq", [("cpu", [fq("foo-flavor", "cpu", "15")])])
    ns = kc.namespace()
    kc.local_queue("foo-queue", "foo-cq", ns)
    kc.settle()
    assert metric(kc, ('kueue_cluster_queue_status{cluster_queue="foo-cq",status="pending"'
                       ',replica_role="standalone"}')) == 1
    wl(kc, ns, "workload", "foo-queue", "1")
    kc.settle(1)
    assert pending(kc, "foo-cq") == (0, 1)
    flavor(kc, "foo-flavor")
    kc.settle(1)
    assert metric(kc, ('kueue_cluster_queue_status{cluster_queue="foo-cq",status="active"'
                       ',replica_role="standalone"}')) == 1
    assert reserved(kc, ns, "workload") and pending(kc, "foo-cq") == (0, 0)


def test_should_admit_overflow_workload_after_reparenting_child_cohort_to_a_larger_root(kc: Cluster):
    """A change of the cohort tree sends the tree's set-aside workloads back to the heap."""
    flavor(kc, "on-demand")
    for name, cpu in (("root-a", "1"), ("root-b", "2")):
        kc.create(
            "cohorts",
            {
                "kind": "Cohort",
                "metadata": {"name": name},
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                        }
                    ]
                },
            },
        )
    kc.create("cohorts", {"kind": "Cohort", "metadata": {"name": "child"}, "spec": {"parentName": "root-a"}})
    cluster_queue(kc, "cq", [("cpu", [fq("on-demand", "cpu", "0")])], cohortName="child")
    ns = kc.namespace()
    kc.local_queue("queue", "cq", ns)
    wl(kc, ns, "wl-1", "queue", "500m")
    wl(kc, ns, "wl-2", "queue", "500m")
    kc.settle(1)
    assert reserved(kc, ns, "wl-1") and reserved(kc, ns, "wl-2")
    wl(kc, ns, "wl-overflow", "queue", "500m")
    kc.settle(1)
    assert not reserved(kc, ns, "wl-overflow") and pending(kc, "cq") == (0, 1)
    kc.custom.patch_cluster_custom_object(*KUEUE, "cohorts", "child", {"spec": {"parentName": "root-b"}})
    kc.settle(1)
    assert reserved(kc, ns, "wl-overflow")
    assert pending(kc, "cq") == (0, 0)
    assert metric(kc, 'kueue_admitted_workloads_total{cluster_queue="cq",replica_role="standalone"}') == 3


# -- fair_sharing_test.go, "Preemption is enabled" --------------------------------------------------------------


def test_fair_sharing_admits_workloads_respecting_fair_share_with_preemption(kc: Cluster):
    """A preemptor waiting for its victims stays at the head of its queue (sticky) and in the heap: it and the
    workloads behind it count as active while the evictions it asked for are pending."""
    flavor(kc, "default")
    ns = kc.namespace()
    preemption = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    for name in ("a", "b", "c"):
        cluster_queue(kc, name, [("cpu", [fq("default", "cpu", "3")])], cohortName="all", preemption=preemption)
        kc.local_queue(name, name, ns)
    kc.settle()
    for i in range(10):
        wl(kc, ns, f"a{i}", "a", "1")
    kc.settle(1)
    assert metric(kc, 'kueue_reserving_active_workloads{cluster_queue="a",replica_role="standalone"}') == 9
    assert pending(kc, "a") == (0, 1)

    for i in range(5):
        wl(kc, ns, f"b{i}", "b", "1")
    kc.settle(1)
    assert pending(kc, "b") == (5, 0)
    assert lq_pending(kc, ns, "b") == (5, 0)

    finish_evictions(kc, "a", 4)
    assert metric(kc, 'kueue_reserving_active_workloads{cluster_queue="b",replica_role="standalone"}') == 4

    wl(kc, ns, "c0", "c", "1")
    kc.settle(1)
    assert pending(kc, "c") == (1, 0)
    finish_evictions(kc, "a", 1)
    assert metric(kc, 'kueue_reserving_active_workloads{cluster_queue="c",replica_role="standalone"}') == 1


# -- clusterqueue_controller_test.go ----------------------------------------------------------------------------


def test_should_update_status_and_report_metrics_when_a_pending_workload_is_deleted(kc: Cluster):
    """The ClusterQueue lacks its flavors, so it is inactive and its pending workload inadmissible."""
    cluster_queue(kc, "cluster-queue", [("cpu", [fq("on-demand", "cpu", "5", "5")])], cohortName="cohort")
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    wl(kc, ns, "one", "queue", "5")
    kc.settle(1)
    assert kc.get("clusterqueues", "cluster-queue")["status"]["pendingWorkloads"] == 1
    assert pending(kc, "cluster-queue") == (0, 1)
    assert lq_pending(kc, ns, "queue") == (0, 1)
    delete(kc, "workloads", "one", ns)
    assert kc.get("clusterqueues", "cluster-queue")["status"]["pendingWorkloads"] == 0
    assert pending(kc, "cluster-queue") == (0, 0)
    assert lq_pending(kc, ns, "queue") == (0, 0)


# -- manager_test.go TestStatus: a LocalQueue's pending count ---------------------------------------------------


def test_status_local_queue_pending_workloads_without_its_cluster_queue(kc: Cluster):
    """Kueue's manager holds a LocalQueue's workloads while its ClusterQueue does not exist, and its status counts
    them (the metric has no ClusterQueue to ask, so it reports none)."""
    ns = kc.namespace()
    kc.local_queue("foo", "foo-cq", ns)
    kc.local_queue("bar", "bar-cq", ns)
    for name, queue in (("a", "foo"), ("b", "bar"), ("c", "foo"), ("d", "foo")):
        wl(kc, ns, name, queue, "1")
    kc.settle(1)
    assert lq_status(kc, "foo", ns)["pendingWorkloads"] == 3
    assert lq_status(kc, "bar", ns)["pendingWorkloads"] == 1
    assert lq_pending(kc, ns, "foo") == (0, 0)


# -- backoff: a workload whose requeueAt is ahead waits in the inadmissible set ----------------------------------


def test_a_workload_in_backoff_counts_as_inadmissible(kc_ready: Cluster):
    """waitForPodsReady (kc_ready: timeout 60 s, backoff base 10 s): evicted for the timeout, the workload waits out
    its backoff in the inadmissible set (Kueue's backoffWaitingTimeExpired), then is admitted again."""
    kc = kc_ready
    kc.ks.reset()
    flavor(kc, "fl", **{POOL: "no-such-pool"})
    cluster_queue(kc, "cq", [("cpu", [fq("fl", "cpu", "10")])])
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    _job(kc, ns, "job", "lq", cpu="2")
    kc.settle(60)
    w = _wl_of(kc, ns, "job")
    assert w["status"]["requeueState"]["requeueAt"] and cond(w, "QuotaReserved")[:2] == ("False", "PendingEvaluation")
    assert pending(kc, "cq") == (0, 1)
    assert lq_pending(kc, ns, "lq") == (0, 1)
    assert kc.get("clusterqueues", "cq")["status"]["pendingWorkloads"] == 1
    kc.settle(10)
    assert cond(_wl_of(kc, ns, "job"), "Admitted")[0] == "True"
    assert pending(kc, "cq") == (0, 0)
