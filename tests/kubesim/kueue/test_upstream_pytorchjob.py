"""Kueue's PyTorchJob integration cases (kubernetes-sigs/kueue v0.20 line: pkg/controller/jobs/kubeflow/jobs/
pytorchjob/pytorchjob_controller_test.go, test/integration/singlecluster/controller/jobs/pytorchjob/
pytorchjob_controller_test.go with its shared helper test/integration/singlecluster/controller/jobs/kubeflow/
kubeflowjob.go, and test/e2e/singlecluster/extended/pytorchjob_test.go), each test named after its upstream case and
re-told against a served kubesim through the official client; nothing is carried over.

How the re-telling differs, and why:
- Upstream's integration suites run Kueue without the training-operator and write PyTorchJob status by hand.
  kubesim runs the operator, so where a case needs a status the operator would not reach on its own (Running while
  the test decides) the PyTorchJob names another controller in spec.runPolicy.managedBy, which the operator leaves
  alone, and the test writes the status as upstream does.
- Upstream sets quota reservations by hand; kubesim's scheduler reserves, so the queues are shaped to make it choose
  what upstream chose, and evictions come from a stopped ClusterQueue.
- kubesim's Kueue manages only jobs that name a queue (manageJobsWithoutQueueName is not emulated), so those steps
  start from a queue label.
Left out: TopologyAwareScheduling (TAS is not emulated; TestValidate is all TAS), TestPriorityClass (the pod-level
PriorityClass: kubesim ignores pod priorityClassName, as for Jobs), TestOrderedReplicaTypes' job without replicas (a
Workload needs a pod set) and TestRestorePodSetsInfo's length mismatches (the replica types and pod sets stay the
same in number).
"""

from __future__ import annotations

import pytest

from tests.kubesim.conftest import pytorch_replica, pytorchjob_body
from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_upstream_controllers import check, checks, cluster_queue, cond, flavor, fq, now
from tests.kubesim.kueue.test_upstream_jobset import hold_and_drain, two_flavor_queue

POOL = "portal.gpu/pool"
MANUAL = "example.com/manual"  # a managedBy the training-operator leaves alone: the test plays it
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def pytorchjob(
    name: str, master_cpu: str | None = "1", worker_cpu: str = "1", workers: int = 1, seconds: int = 600, **run_policy
) -> dict:
    """testingpytorchjob.MakePyTorchJob(...).PyTorchReplicaSpecsDefault(): one Master (unless master_cpu is None)
    and `workers` Workers, each asking for the CPU given."""
    master = None if master_cpu is None else pytorch_replica(1, f"sleep {seconds}", {"cpu": master_cpu})
    worker = pytorch_replica(workers, f"sleep {seconds}", {"cpu": worker_cpu})
    return pytorchjob_body(name, master, worker, **run_policy)


def template(pj: dict, rtype: str) -> dict:
    return pj["spec"]["pytorchReplicaSpecs"][rtype]["template"]


def node_selectors(pj: dict) -> dict:
    return {t: template(pj, t)["spec"].get("nodeSelector") for t in pj["spec"]["pytorchReplicaSpecs"]}


def suspended(kc: Cluster, ns: str, name: str) -> bool:
    return kc.read("PyTorchJob", ns, name)["spec"]["runPolicy"]["suspend"]


# -- pkg/controller/jobs/kubeflow/jobs/pytorchjob/pytorchjob_controller_test.go --------------------------------------


@pytest.mark.parametrize(
    ("case", "master", "want"),
    [("job has all replicas", "1", ["master", "worker"]), ("job only has the worker replica", None, ["worker"])],
)
def test_ordered_replica_types(kc: Cluster, case: str, master: str | None, want: list[str]):
    ns = kc.namespace()
    kc.submit(ns, pytorchjob("job", master_cpu=master), "nowhere")
    kc.settle()
    assert [p["name"] for p in kc.owned_workload("PyTorchJob", ns, "job")["spec"]["podSets"]] == want, case


def test_restore_podsets_info_matching_length_restores_pod_sets(kc: Cluster):
    two_flavor_queue(kc)
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    body = pytorchjob("job")
    template(body, "Worker")["spec"]["nodeSelector"] = {"disk": "ssd"}
    kc.submit(ns, body, "queue")
    kc.settle()
    assert template(kc.read("PyTorchJob", ns, "job"), "Worker")["spec"]["nodeSelector"] == {"disk": "ssd", POOL: "h100"}
    hold_and_drain(kc, "cluster-queue")
    pj = kc.read("PyTorchJob", ns, "job")
    assert node_selectors(pj) == {"Master": None, "Worker": {"disk": "ssd"}}
    assert "metadata" not in template(pj, "Master")


def test_pod_sets_no_annotations(kc: Cluster):
    ns = kc.namespace()
    body = pytorchjob("job", workers=2)
    kc.submit(ns, body, "nowhere")
    kc.settle()
    podsets = kc.owned_workload("PyTorchJob", ns, "job")["spec"]["podSets"]
    assert [(p["name"], p["count"]) for p in podsets] == [("master", 1), ("worker", 2)]
    assert [p["template"] for p in podsets] == [template(body, "Master"), template(body, "Worker")]
    assert [p["topologyRequest"] for p in podsets] == [{"podIndexLabel": "training.kubeflow.org/replica-index"}] * 2


def test_pod_sets_with_required_and_preferred_topology_annotation(kc: Cluster):
    ns = kc.namespace()
    body = pytorchjob("job")
    template(body, "Master")["metadata"] = {"annotations": {REQUIRED: "cloud.com/block"}}
    template(body, "Worker")["metadata"] = {"annotations": {PREFERRED: "cloud.com/rack"}}
    kc.submit(ns, body, "nowhere")
    kc.settle()
    podsets = kc.owned_workload("PyTorchJob", ns, "job")["spec"]["podSets"]
    assert [p["topologyRequest"] for p in podsets] == [
        {"required": "cloud.com/block", "podIndexLabel": "training.kubeflow.org/replica-index"},
        {"preferred": "cloud.com/rack", "podIndexLabel": "training.kubeflow.org/replica-index"},
    ]


# -- test/integration/singlecluster/controller/jobs/pytorchjob/pytorchjob_controller_test.go ------------------------


def test_should_reconcile_pytorchjobs(kc: Cluster):
    """kubeflowjob.ShouldReconcileJob: the master on on-demand, the worker on spot."""
    ns = kc.namespace()
    created = kc.submit(ns, pytorchjob("test-job", "3", "4", seconds=30), "queue")
    assert created["spec"]["runPolicy"]["suspend"] is True
    kc.settle()
    wl = kc.owned_workload("PyTorchJob", ns, "test-job")
    assert wl["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]

    # the Workload follows the queue name while the job is suspended
    kc.patch("PyTorchJob", ns, "test-job", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "test-queue"}}})
    kc.settle()
    assert kc.owned_workload("PyTorchJob", ns, "test-job")["spec"]["queueName"] == "test-queue"

    # a second Workload the job controls that does not match it is deleted
    second = {
        "kind": "Workload",
        "metadata": {"name": "second-workload", "ownerReferences": wl["metadata"]["ownerReferences"]},
        "spec": {**wl["spec"], "podSets": [{**wl["spec"]["podSets"][0], "count": 2}, wl["spec"]["podSets"][1]]},
    }
    kc.create("workloads", second, ns)
    kc.settle()
    names = [w["metadata"]["name"] for w in kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]]
    assert names == [wl["metadata"]["name"]]

    # admitted: on-demand holds the master's 3 CPUs, the worker's 4 go to spot
    two_flavor_queue(kc)
    kc.local_queue("test-queue", "cluster-queue", ns)
    kc.settle()
    pj = kc.read("PyTorchJob", ns, "test-job")
    assert pj["spec"]["runPolicy"]["suspend"] is False
    assert ("Started", "Admitted by clusterQueue cluster-queue") in kc.events(ns, "test-job")
    assert node_selectors(pj) == {"Master": {POOL: "h100"}, "Worker": {POOL: "l40s-shared"}}

    # more workers: the job is stopped, its selectors removed, the Workload replaced with the new count, readmitted
    pj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2
    template(pj, "Worker")["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    kc.custom.replace_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", "test-job", pj)
    kc.settle()
    assert ("DeletedWorkload", f"Deleted not matching Workload: {ns}/{wl['metadata']['name']}") in kc.events(
        ns, "test-job"
    )
    wl = kc.owned_workload("PyTorchJob", ns, "test-job")
    assert [p["count"] for p in wl["spec"]["podSets"]] == [1, 2]
    assert cond(wl, "Admitted")[0] == "True"
    assert suspended(kc, ns, "test-job") is False

    kc.settle(35)
    assert cond(kc.owned_workload("PyTorchJob", ns, "test-job"), "Finished")[:2] == ("True", "Succeeded")


def test_should_not_manage_a_job_without_a_queue_name_submitted_to_an_unmanaged_namespace(kc: Cluster):
    kc.submit("kube-system", pytorchjob("test-job"))
    kc.settle()
    assert kc.read("PyTorchJob", "kube-system", "test-job")["spec"].get("runPolicy") is None
    assert kc.owned_workloads("PyTorchJob", "kube-system", "test-job") == []


def test_should_reconcile_jobs_only_when_queue_is_set(kc: Cluster):
    """A PyTorchJob that runs may not gain a queue name (Kueue's webhook), so this one waits suspended by its user."""
    ns = kc.namespace()
    kc.submit(ns, pytorchjob("test-job", suspend=True))
    kc.settle()
    assert kc.owned_workloads("PyTorchJob", ns, "test-job") == []
    kc.patch("PyTorchJob", ns, "test-job", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "test-queue"}}})
    kc.settle()
    assert kc.owned_workload("PyTorchJob", ns, "test-job")["spec"]["queueName"] == "test-queue"


def test_labels_and_annotations_should_be_propagated_from_admission_check_to_job(kc: Cluster):
    check(kc, "check", active=True)
    flavor(kc, "test-flavor", **{POOL: "h100"})
    cluster_queue(kc, "prod-cq-with-checks", [("cpu", [fq("test-flavor", "cpu", "5")])], **checks("check"))
    ns = kc.namespace()
    kc.local_queue("queue", "prod-cq-with-checks", ns)
    body = pytorchjob("test-job")
    template(body, "Worker")["metadata"] = {
        "annotations": {"old-ann-key": "old-ann-value"},
        "labels": {"old-label-key": "old-label-value"},
    }
    kc.submit(ns, body, "queue")
    kc.settle()
    assert suspended(kc, ns, "test-job") is True
    wl = kc.owned_workload("PyTorchJob", ns, "test-job")
    toleration = {"key": "selector1", "value": "selector-value1", "operator": "Equal", "effect": "NoSchedule"}
    updates = [
        {"name": "master"},
        {
            "name": "worker",
            "annotations": {"ann1": "ann-value1"},
            "labels": {"label1": "label-value1"},
            "nodeSelector": {"selector1": "selector-value1"},
            "tolerations": [toleration],
        },
    ]
    state = {"name": "check", "state": "Ready", "message": "", "lastTransitionTime": now(kc), "podSetUpdates": updates}
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"status": {"admissionChecks": [state]}}
    )
    kc.settle()
    pj = kc.read("PyTorchJob", ns, "test-job")
    assert pj["spec"]["runPolicy"]["suspend"] is False
    worker = template(pj, "Worker")
    annotations, labels = worker["metadata"]["annotations"], worker["metadata"]["labels"]
    assert {"ann1": "ann-value1", "old-ann-key": "old-ann-value"}.items() <= annotations.items()
    assert {"label1": "label-value1", "old-label-key": "old-label-value"}.items() <= labels.items()
    assert worker["spec"]["nodeSelector"] == {POOL: "h100", "selector1": "selector-value1"}
    assert worker["spec"]["tolerations"] == [toleration]

    kc.custom.delete_namespaced_custom_object(*KUEUE, ns, "localqueues", "queue")
    hold_and_drain(kc, "prod-cq-with-checks")
    pj = kc.read("PyTorchJob", ns, "test-job")
    assert pj["spec"]["runPolicy"]["suspend"] is True
    worker = template(pj, "Worker")
    assert worker["metadata"] == {
        "annotations": {"old-ann-key": "old-ann-value"},
        "labels": {"old-label-key": "old-label-value"},
    }
    assert "nodeSelector" not in worker["spec"]


WAIT = ("False", "WaitForStart", "Not all pods are ready or succeeded")
STARTED = ("True", "Started", "All pods reached readiness and the workload is running")
RUNNING = [{"type": "Running", "status": "True", "reason": "Running", "message": ""}]


@pytest.mark.parametrize(
    ("entry", "before_status", "before", "status", "suspend", "want"),
    [
        ("No progress", None, None, [], False, WAIT),
        ("Running PyTorchJob", None, None, RUNNING, False, STARTED),
        ("Running PyTorchJob; PodsReady=False before", None, WAIT, RUNNING, False, STARTED),
        ("Job suspended; PodsReady=True before", RUNNING, STARTED, RUNNING, True, WAIT),
    ],
)
def test_single_job_at_different_stages_of_progress_towards_completion(
    kc_ready: Cluster, entry: str, before_status: list | None, before: tuple | None, status: list, suspend: bool,
    want: tuple,
):
    kc = kc_ready
    kc.ks.reset()
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(kc, "cq", [("cpu", [fq("default", "cpu", "10")])])
    ns = kc.namespace()
    kc.local_queue("test-queue", "cq", ns)
    kc.submit(ns, pytorchjob("test-job", managedBy=MANUAL), "test-queue")
    kc.settle()
    assert suspended(kc, ns, "test-job") is False
    if before_status is not None:
        kc.patch_status("PyTorchJob", ns, "test-job", {"conditions": before_status})
    if before is not None:
        assert cond(kc.owned_workload("PyTorchJob", ns, "test-job"), "PodsReady") == before
    kc.patch_status("PyTorchJob", ns, "test-job", {"conditions": status})
    if suspend:
        hold_and_drain(kc, "cq")
    assert cond(kc.owned_workload("PyTorchJob", ns, "test-job"), "PodsReady") == want, entry


def _dev_queue(kc: Cluster) -> str:
    flavor(kc, "on-demand", **{POOL: "h100"})
    flavor(kc, "spot-untainted", **{POOL: "l40s-shared"})
    cluster_queue(kc, "dev-clusterqueue", [("cpu", [fq("spot-untainted", "cpu", "5"), fq("on-demand", "cpu", "5")])])
    return kc.namespace()


def test_should_schedule_jobs_as_they_fit_in_their_cluster_queue(kc: Cluster):
    ns = _dev_queue(kc)
    kc.local_queue("local-queue", "dev-clusterqueue", ns)
    kc.submit(ns, pytorchjob("test-job", "3", "4"), "local-queue")
    kc.settle()
    pj = kc.read("PyTorchJob", ns, "test-job")
    assert pj["spec"]["runPolicy"]["suspend"] is False
    assert node_selectors(pj) == {"Master": {POOL: "l40s-shared"}, "Worker": {POOL: "h100"}}
    cq = kc.get("clusterqueues", "dev-clusterqueue")
    assert (cq["status"]["pendingWorkloads"], cq["status"]["admittedWorkloads"]) == (0, 1)


def test_the_workloads_admission_is_removed_should_restore_the_original_node_selectors(kc: Cluster):
    ns = _dev_queue(kc)
    kc.submit(ns, pytorchjob("test-job", "3", "4"), "local-queue")
    kc.settle()
    pj = kc.read("PyTorchJob", ns, "test-job")
    assert pj["spec"]["runPolicy"]["suspend"] is True
    original = node_selectors(pj)
    kc.local_queue("local-queue", "dev-clusterqueue", ns)
    kc.settle()
    pj = kc.read("PyTorchJob", ns, "test-job")
    assert pj["spec"]["runPolicy"]["suspend"] is False and node_selectors(pj) != original
    kc.custom.delete_namespaced_custom_object(*KUEUE, ns, "localqueues", "local-queue")
    hold_and_drain(kc, "dev-clusterqueue")
    assert node_selectors(kc.read("PyTorchJob", ns, "test-job")) == original


# -- test/e2e/singlecluster/extended/pytorchjob_test.go --------------------------------------------------------------


def test_should_admit_group_with_leader_only(kc: Cluster):
    kc.create("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": "pytorch-rf"}, "spec": {}})
    group = {
        "coveredResources": ["cpu", "memory"],
        "flavors": [
            {"name": "pytorch-rf", "resources": [{"name": "cpu", "nominalQuota": "5"},
                                                 {"name": "memory", "nominalQuota": "10Gi"}]}
        ],
    }
    spec = {"namespaceSelector": {}, "resourceGroups": [group], "preemption": {"withinClusterQueue": "LowerPriority"}}
    kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "pytorch-cq"}, "spec": spec})
    ns = kc.namespace()
    kc.local_queue("pytorch-lq", "pytorch-cq", ns)
    # upstream's agnhost waits until the test terminates it (exit 0); here the command ends after five seconds
    master = pytorch_replica(1, "sleep 5", {"cpu": "1", "memory": "200Mi"}, terminationGracePeriodSeconds=1)
    kc.submit(ns, pytorchjob_body("pytorch-simple", master), "pytorch-lq")
    kc.settle()
    pj = kc.read("PyTorchJob", ns, "pytorch-simple")
    assert pj["status"]["replicaStatuses"]["Master"]["active"] == 1
    assert cond(pj, "Running")[0] == "True"
    wl = kc.owned_workload("PyTorchJob", ns, "pytorch-simple")
    assert cond(wl, "Admitted")[0] == "True"
    kc.settle(6)
    assert cond(kc.owned_workload("PyTorchJob", ns, "pytorch-simple"), "Finished")[0] == "True"
    kc.custom.delete_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", "pytorch-simple")
    kc.settle()
    assert kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"] == []
