"""Kueue's RayCluster integration cases (kubernetes-sigs/kueue v0.20 line: pkg/controller/jobs/raycluster/
{raycluster_controller_test.go,common_test.go,raycluster_webhook_test.go},
test/integration/singlecluster/controller/jobs/raycluster/ and the RayCluster case of
test/e2e/singlecluster/extended/kuberay_test.go), each test named after its upstream case and re-told against a served
kubesim through the official client; nothing is carried over. The RayJob cases are in test_upstream_rayjob.py, which
shares this module's helpers.

How the re-telling differs, and why:
- Upstream's integration suites run Kueue without KubeRay and write RayJob status by hand. kubesim runs KubeRay, so
  where a case needs a status KubeRay would not write (Test_RayJobFinished's combinations) the RayJob names
  `kueue.x-k8s.io/multikueue` in spec.managedBy, which KubeRay leaves alone, and the test writes the status.
- Upstream sets quota reservations by hand; kubesim's scheduler reserves, so the queues are shaped to make it choose
  what upstream chose (the head on one flavor, the workers on another), and preemption comes from priorities.
- Upstream manages jobs without a queue name in some suites; kubesim's Kueue manages only jobs that name a queue
  (manageJobsWithoutQueueName is not emulated), so those steps start from a queue label.
Left out: TopologyAwareScheduling and PodSet grouping (TAS is not emulated), GCS fault tolerance and the autoscaler
sidecar (in-tree autoscaling is only for elastic jobs, which kubesim does not emulate), MultiKueue, waitForPodsReady
tables, pod-level PriorityClass (kubesim ignores pod priorityClassName), the ValidationFailed on-hold path (kubesim's
KubeRay does not run KubeRay's spec validation), and the unit cases about workload slicing.
"""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim import ray as R
from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_upstream_controllers import cluster_queue, cond, flavor, fq

POOL = "portal.gpu/pool"  # upstream's instance label; kubesim's nodes carry pools, so pods can run
MULTIKUEUE = "kueue.x-k8s.io/multikueue"  # a managedBy KubeRay leaves alone: the test plays the status writer


def two_flavor_queue(kc: Cluster, name: str = "cluster-queue", on_demand: str = "1", spot: str = "5", **spec) -> None:
    """on-demand (h100 nodes) holds the 1-CPU head; the workers spill to spot (l40s-shared nodes)."""
    flavor(kc, "on-demand", **{POOL: "h100"})
    flavor(kc, "spot", **{POOL: "l40s-shared"})
    cluster_queue(kc, name, [("cpu", [fq("on-demand", "cpu", on_demand), fq("spot", "cpu", spot)])], **spec)


def default_worker() -> dict:
    """The builders' worker group: one pod of 1 CPU."""
    return R.worker_group("workers-group-0", 1, {"cpu": "1"})


def cluster(kc: Cluster, ns: str, name: str, queue: str | None, *workers: dict, **extra) -> dict:
    labels = R.queued(queue, extra.pop("labels", None))
    body = R.raycluster_body(name, *(workers or (default_worker(),)), labels=labels, **extra)
    return R.create(kc.custom, ns, body)


def rayjob(kc: Cluster, ns: str, name: str, queue: str | None, *workers: dict, **extra) -> dict:
    labels = R.queued(queue, extra.pop("labels", None))
    return R.create(kc.custom, ns, R.rayjob_body(name, *(workers or (default_worker(),)), labels=labels, **extra))


def read(kc: Cluster, ns: str, plural: str, name: str) -> dict:
    return R.read(kc.custom, ns, plural, name)


def workload(kc: Cluster, ns: str, plural: str, name: str) -> dict:
    [wl] = R.workloads(kc.custom, ns, plural, name)
    return wl


def podsets(wl: dict) -> list[tuple[str, int]]:
    return [(p["name"], p["count"]) for p in wl["spec"]["podSets"]]


def selectors(obj: dict) -> list[dict | None]:
    """The node selectors of a RayCluster's (or a RayJob's cluster's) head and worker templates."""
    spec = obj["spec"].get("rayClusterSpec", obj["spec"])
    templates = [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]
    return [t["spec"].get("nodeSelector") for t in templates]


def refusal(exc: pytest.ExceptionInfo[ApiException]) -> tuple[int, str]:
    return exc.value.status, json.loads(exc.value.body)["message"]


def default_flavor_queue(kc: Cluster, cpu: str = "4", memory: str = "8Gi") -> str:
    kc.create("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}, "spec": {}})
    group = {
        "coveredResources": ["cpu", "memory"],
        "flavors": [
            {
                "name": "default-flavor",
                "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}],
            }
        ],
    }
    body = {"namespaceSelector": {}, "resourceGroups": [group]}
    kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "cluster-queue"}, "spec": body})
    ns = kc.namespace()
    kc.local_queue("main", "cluster-queue", ns)
    return ns


# -- pkg/controller/jobs/raycluster/common_test.go -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "workers", "want"),
    [
        ("basic spec with head and single worker group", [R.worker_group("workers", 2)], [("head", 1), ("workers", 2)]),
        (
            "spec with multiple worker groups",
            [R.worker_group("small", 1), R.worker_group("Large", 3)],
            [("head", 1), ("small", 1), ("large", 3)],
        ),
        ("spec with NumOfHosts > 1", [R.worker_group("tpu", 2, numOfHosts=4)], [("head", 1), ("tpu", 8)]),
    ],
)
def test_build_pod_sets(kc: Cluster, case: str, workers: list, want: list):
    ns = kc.namespace()
    cluster(kc, ns, "raycluster", "nowhere", *workers)
    kc.settle()
    rc, wl = read(kc, ns, "rayclusters", "raycluster"), workload(kc, ns, "rayclusters", "raycluster")
    assert podsets(wl) == want
    assert wl["spec"]["podSets"][0]["template"] == rc["spec"]["headGroupSpec"]["template"]
    assert [p["template"] for p in wl["spec"]["podSets"][1:]] == [g["template"] for g in rc["spec"]["workerGroupSpecs"]]


def test_build_pod_sets_spec_with_worker_group_without_replicas_specified(kc: Cluster):
    """The CRD defaults a missing replicas to 0, so Kueue sees 0 (its own nil-means-1 never applies through the API)."""
    ns = kc.namespace()
    group = R.worker_group("workers")
    del group["replicas"]
    cluster(kc, ns, "raycluster", "nowhere", group)
    kc.settle()
    assert podsets(workload(kc, ns, "rayclusters", "raycluster")) == [("head", 1), ("workers", 0)]


# -- pkg/controller/jobs/raycluster/raycluster_controller_test.go (TestReconciler) ----------------------------------


def test_reconciler_when_workload_is_admitted_cluster_is_unsuspended(kc: Cluster):
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    cluster(kc, ns, "raycluster", "queue")
    kc.settle()
    rc = read(kc, ns, "rayclusters", "raycluster")
    assert rc["spec"]["suspend"] is False
    assert selectors(rc) == [{POOL: "h100"}, {POOL: "l40s-shared"}]


def test_reconciler_when_workload_is_admitted_but_workloads_conditions_is_evicted_suspend_it_and_restore_node_selector(
    kc: Cluster,
):
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    submitted = cluster(kc, ns, "raycluster", "queue")
    kc.settle()
    wl = workload(kc, ns, "rayclusters", "raycluster")
    kc.custom.patch_namespaced_custom_object(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"spec": {"active": False}}
    )
    kc.settle()
    rc = read(kc, ns, "rayclusters", "raycluster")
    assert rc["spec"]["suspend"] is True
    assert selectors(rc) == [None, None]
    assert rc["spec"]["headGroupSpec"]["template"] == submitted["spec"]["headGroupSpec"]["template"]
    assert cond(workload(kc, ns, "rayclusters", "raycluster"), "Evicted")[:2] == ("True", "Deactivated")


def test_reconciler_raycluster_with_num_of_hosts_greater_than_1(kc: Cluster):
    two_flavor_queue(kc, spot="8")
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    cluster(kc, ns, "raycluster", "queue", R.worker_group("workers-group-0", 2, {"cpu": "1"}, numOfHosts=2))
    kc.settle()
    wl = workload(kc, ns, "rayclusters", "raycluster")
    assert podsets(wl) == [("head", 1), ("workers-group-0", 4)]
    assert [p["count"] for p in wl["status"]["admission"]["podSetAssignments"]] == [1, 4]
    assert len(R.cluster_pods(kc.core, ns, "raycluster")) == 5


# -- pkg/controller/jobs/raycluster/raycluster_webhook_test.go ---------------------------------------------------


@pytest.mark.parametrize(
    ("case", "default_lq", "queue", "want_queue", "suspended"),
    [
        ("unmanaged", False, None, None, False),
        ("managed - by queue", False, "queue", "queue", True),
        ("default lq is created, job doesn't have queue label", True, None, "default", True),
        ("default lq is created, job has queue label", True, "queue", "queue", True),
        ("default lq isn't created, job doesn't have queue label", False, None, None, False),
    ],
)
def test_validate_default(kc: Cluster, case: str, default_lq: bool, queue, want_queue, suspended: bool):
    ns = kc.namespace()
    if default_lq:
        kc.local_queue("default", "cluster-queue", ns)
    created = cluster(kc, ns, "raycluster", queue, suspend=False)
    assert (created["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name") == want_queue
    assert created["spec"]["suspend"] is suspended


@pytest.mark.parametrize(
    ("case", "extra", "workers", "want"),
    [
        (
            "invalid managed - has auto scaler",
            {"enableInTreeAutoscaling": True},
            [R.worker_group("workers-group-0")],
            "spec.enableInTreeAutoscaling: Invalid value: true: a kueue-managed RayCluster can use autoscaling only as "
            "an elastic job: kueue.x-k8s.io/elastic-job=true",
        ),
        (
            "invalid managed - too many worker groups",
            {},
            [R.worker_group(f"group-{i}") for i in range(18)],
            "spec.workerGroupSpecs: Too many: 18: must have at most 17 items",
        ),
        (
            "worker group uses head name",
            {},
            [R.worker_group("head")],
            'spec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head group',
        ),
    ],
)
def test_validate_create(kc: Cluster, case: str, extra: dict, workers: list, want: str):
    ns = kc.namespace()
    with pytest.raises(ApiException) as exc:
        cluster(kc, ns, "raycluster", "queue", *workers, **extra)
    status, message = refusal(exc)
    assert status == 403
    assert message.startswith('admission webhook "vraycluster.kb.io" denied the request: ')
    assert want in message


def test_validate_create_invalid_unmanaged(kc: Cluster):
    """An unmanaged RayCluster may autoscale and have a group named head: Kueue does not judge it."""
    ns = kc.namespace()
    created = cluster(kc, ns, "raycluster", None, R.worker_group("head"), enableInTreeAutoscaling=True)
    assert created["spec"]["enableInTreeAutoscaling"] is True


def test_validate_update_invalid_managed_queue_name_should_not_change_while_unsuspended(kc: Cluster):
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    cluster(kc, ns, "raycluster", "queue")
    kc.settle()
    with pytest.raises(ApiException) as exc:
        R.patch(
            kc.custom, ns, "rayclusters", "raycluster", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q2"}}}
        )
    status, message = refusal(exc)
    assert (
        status == 403
        and 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "q2": field is immutable' in message
    )


def test_validate_update_managed_queue_name_can_change_while_suspended(kc: Cluster):
    ns = kc.namespace()
    cluster(kc, ns, "raycluster", "queue")
    kc.settle()
    R.patch(kc.custom, ns, "rayclusters", "raycluster", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q2"}}})
    kc.settle()
    assert workload(kc, ns, "rayclusters", "raycluster")["spec"]["queueName"] == "q2"


# -- test/integration/singlecluster/controller/jobs/raycluster/raycluster_controller_test.go -----------------------


def test_should_reconcile_rayclusters(kc: Cluster):
    ns = kc.namespace()
    created = cluster(kc, ns, "test-job", "queue", suspend=False)
    assert created["spec"]["suspend"] is True
    kc.settle()
    wl = workload(kc, ns, "rayclusters", "test-job")
    ref = wl["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("RayCluster", created["metadata"]["uid"], True)
    assert wl["metadata"]["name"].startswith("raycluster-test-job-")

    R.patch(
        kc.custom, ns, "rayclusters", "test-job", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "test-queue"}}}
    )
    kc.settle()
    assert workload(kc, ns, "rayclusters", "test-job")["spec"]["queueName"] == "test-queue"

    second = {
        "kind": "Workload",
        "metadata": {"name": "second-workload", "ownerReferences": wl["metadata"]["ownerReferences"]},
        "spec": {**wl["spec"], "podSets": [{**wl["spec"]["podSets"][0], "count": 2}, wl["spec"]["podSets"][1]]},
    }
    kc.create("workloads", second, ns)
    kc.settle()
    names = [w["metadata"]["name"] for w in kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]]
    assert names == [wl["metadata"]["name"]]

    two_flavor_queue(kc)
    kc.local_queue("test-queue", "cluster-queue", ns)
    kc.settle()
    rc = read(kc, ns, "rayclusters", "test-job")
    assert rc["spec"]["suspend"] is False
    assert ("Started", "Admitted by clusterQueue cluster-queue") in kc.events(ns, "test-job")
    assert selectors(rc) == [{POOL: "h100"}, {POOL: "l40s-shared"}]

    # more workers: suspended, the admission's selectors gone, the Workload made again for the new count
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    kc.custom.replace_namespaced_custom_object(*R.RAY, ns, "rayclusters", "test-job", rc)
    kc.settle()
    events = kc.events(ns, "test-job")
    assert ("DeletedWorkload", f"Deleted not matching Workload: {ns}/{wl['metadata']['name']}") in events
    wl = workload(kc, ns, "rayclusters", "test-job")
    assert podsets(wl) == [("head", 1), ("workers-group-0", 2)]
    rc = read(kc, ns, "rayclusters", "test-job")
    assert rc["spec"]["suspend"] is False  # admitted again at once: the queue has room
    assert selectors(rc) == [{POOL: "h100"}, {POOL: "l40s-shared"}]
    assert cond(wl, "QuotaReserved")[0] == "True"


def test_should_reconcile_jobs_only_when_queue_is_set(kc: Cluster):
    """Upstream's builder makes the cluster suspended; a running one could not take a queue name."""
    ns = kc.namespace()
    cluster(kc, ns, "test-job", None, suspend=True)
    kc.settle()
    assert R.workloads(kc.custom, ns, "rayclusters", "test-job") == []
    R.patch(
        kc.custom, ns, "rayclusters", "test-job", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "test-queue"}}}
    )
    kc.settle()
    assert len(R.workloads(kc.custom, ns, "rayclusters", "test-job")) == 1


def test_should_suspend_a_cluster_if_the_parents_workload_does_not_exist_or_is_not_admitted(kc: Cluster):
    ns = kc.namespace()
    parent = rayjob(kc, ns, "parent-job", "test", suspend=False)
    child = R.raycluster_body("test-job", R.worker_group("workers-group-0"))
    md = parent["metadata"]
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": md["name"], "uid": md["uid"], "controller": True}
    ]
    created = R.create(kc.custom, ns, child)
    assert created["spec"].get("suspend") in (None, False)  # its owner is Kueue's business: the webhook leaves it
    kc.settle()
    assert read(kc, ns, "rayclusters", "test-job")["spec"]["suspend"] is True
    assert ("Suspended", "Kueue managed child job suspended") in kc.events(ns, "test-job")
    assert R.workloads(kc.custom, ns, "rayclusters", "test-job") == []


def test_should_schedule_rayclusters_as_they_fit_in_their_cluster_queue(kc: Cluster):
    """Upstream: "Should schedule jobs as they fit in their ClusterQueue" (RayCluster suite)."""
    flavor(kc, "on-demand", **{POOL: "h100"})
    flavor(kc, "spot-untainted", **{POOL: "l40s-shared"})
    cluster_queue(kc, "dev-clusterqueue", [("cpu", [fq("spot-untainted", "cpu", "1"), fq("on-demand", "cpu", "5")])])
    ns = kc.namespace()
    kc.local_queue("local-queue", "dev-clusterqueue", ns)
    cluster(kc, ns, "dev-job", "local-queue", R.worker_group("workers-group-0", 1, {"cpu": "1"}))
    kc.settle()
    rc = read(kc, ns, "rayclusters", "dev-job")
    assert rc["spec"]["suspend"] is False
    assert selectors(rc) == [{POOL: "l40s-shared"}, {POOL: "h100"}]
    assert read(kc, ns, "rayclusters", "dev-job")["status"]["state"] == "ready"


def test_should_preempt_lower_priority_rayclusters_when_resource_insufficient(kc: Cluster):
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(
        kc, "cluster-queue", [("cpu", [fq("default", "cpu", "4")])], preemption={"withinClusterQueue": "LowerPriority"}
    )
    kc.priority_class("low", 100)
    kc.priority_class("high", 1000)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    low_labels = {"kueue.x-k8s.io/priority-class": "low"}
    cluster(kc, ns, "raycluster-with-low-priority", "queue", R.worker_group("w", 2, {"cpu": "1"}), labels=low_labels)
    kc.settle()
    assert read(kc, ns, "rayclusters", "raycluster-with-low-priority")["spec"]["suspend"] is False
    high_labels = {"kueue.x-k8s.io/priority-class": "high"}
    cluster(kc, ns, "raycluster-with-high-priority", "queue", R.worker_group("w", 2, {"cpu": "1"}), labels=high_labels)
    kc.settle()
    low = read(kc, ns, "rayclusters", "raycluster-with-low-priority")
    assert low["spec"]["suspend"] is True
    assert cond(workload(kc, ns, "rayclusters", "raycluster-with-low-priority"), "Evicted")[:2] == ("True", "Preempted")
    assert R.cluster_pods(kc.core, ns, "raycluster-with-low-priority") == []
    assert read(kc, ns, "rayclusters", "raycluster-with-high-priority")["spec"]["suspend"] is False


# -- test/e2e/singlecluster/extended/kuberay_test.go -------------------------------------------------------------


def test_should_run_a_raycluster_on_worker_if_admitted(kc: Cluster):
    ns = default_flavor_queue(kc)
    cluster(kc, ns, "raycluster", "main", R.worker_group("workers-group-0", 1, {"cpu": "300m", "memory": "300Mi"}))
    kc.settle()
    rc = read(kc, ns, "rayclusters", "raycluster")
    assert rc["status"]["state"] == "ready"
    assert rc["status"]["availableWorkerReplicas"] == 1
    assert cond(workload(kc, ns, "rayclusters", "raycluster"), "Admitted")[0] == "True"
