"""FinishOrphanedWorkloads (beta, on in Kueue v0.20), through the official client against a served kubesim.

A job deleted with propagationPolicy Orphan leaves its Workload without owner references while the Workload keeps
the job-uid label; Kueue's Workload controller (isOrphanedWorkload, FinalizeOrphanedWorkload) finishes it with
reason OwnerNotFound and message "The workload's owner no longer exists", which releases its quota, and removes
its resource-in-use finalizer. Batch Jobs and JobSets are covered in test_jobset.py; here every other job kind,
and the cases of upstream's workload controller unit test (pkg/controller/core/workload_controller_test.go):
an ownerless Workload with the job-uid label is finished, one without it is left alone, and a deleted ownerless
Workload loses its finalizer.
"""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim import ray as R
from tests.kubesim.conftest import KUBEFLOW, TRAINER, pytorch_replica, pytorchjob_body, trainjob_body
from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_upstream_controllers import cluster_queue, cond, flavor, fq

POOL = "portal.gpu/pool"
IN_USE = "kueue.x-k8s.io/resource-in-use"
OWNER_NOT_FOUND = ("True", "OwnerNotFound", "The workload's owner no longer exists")


def _queue(kc: Cluster) -> str:
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(kc, "cq", [("cpu", [fq("default", "cpu", "8")])])
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    return ns


def _reserved_cpu(kc: Cluster) -> str | None:
    usage = kc.get("clusterqueues", "cq")["status"].get("flavorsReservation") or []
    return next((r["total"] for f in usage for r in f["resources"] if r["name"] == "cpu"), None)


def _queued(body: dict) -> dict:
    body["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "lq"
    return body


CPU = {"cpu": "1"}
KINDS = {
    "trainjob": (
        TRAINER,
        "trainjobs",
        lambda: _queued(
            trainjob_body("owner", numNodes=2, command=["sleep", "600"], resourcesPerNode={"requests": CPU})
        ),
    ),
    "pytorchjob": (
        KUBEFLOW,
        "pytorchjobs",
        lambda: _queued(
            pytorchjob_body("owner", pytorch_replica(1, "sleep 600", CPU), pytorch_replica(1, "sleep 600", CPU))
        ),
    ),
    "rayjob": (R.RAY, "rayjobs", lambda: R.rayjob_body("owner", R.worker_group("w", 1, CPU), labels=R.queued("lq"))),
    "raycluster": (
        R.RAY,
        "rayclusters",
        lambda: R.raycluster_body("owner", R.worker_group("w", 1, CPU), labels=R.queued("lq")),
    ),
}


def _owned(kc: Cluster, ns: str, uid: str) -> dict:
    [wl] = kc.custom.list_namespaced_custom_object(
        *KUEUE, ns, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={uid}"
    )["items"]
    return wl


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_job_deleted_with_orphan_propagation_has_its_workload_finished(kc: Cluster, kind: str):
    ns = _queue(kc)
    group_version, plural, body = KINDS[kind]
    made = kc.custom.create_namespaced_custom_object(*group_version, ns, plural, body())
    kc.settle()
    wl = _owned(kc, ns, made["metadata"]["uid"])
    assert cond(wl, "Admitted")[0] == "True"
    assert _reserved_cpu(kc) not in (None, "0")
    kc.custom.delete_namespaced_custom_object(*group_version, ns, plural, "owner", propagation_policy="Orphan")
    kc.settle()
    wl = kc.get("workloads", wl["metadata"]["name"], ns)
    assert "ownerReferences" not in wl["metadata"]
    assert cond(wl, "Finished") == OWNER_NOT_FOUND
    assert IN_USE not in (wl["metadata"].get("finalizers") or [])
    left = [w for w in kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"] if w != wl]
    if kind == "rayjob":
        # KubeRay gives the RayJob's RayCluster the RayJob's labels; orphaned, it is a queued RayCluster of its own,
        # which Kueue's RayCluster integration now manages: its own Workload holds the quota the RayJob's gave back.
        [cluster_wl] = [w for w in left if w["metadata"]["name"] != wl["metadata"]["name"]]
        assert [r["kind"] for r in cluster_wl["metadata"]["ownerReferences"]] == ["RayCluster"]
        assert cond(cluster_wl, "Admitted")[0] == "True"
        assert _reserved_cpu(kc) == "2"
    else:
        assert _reserved_cpu(kc) == "0"


def _workload(name: str, labels: dict | None = None) -> dict:
    """A Workload made by hand, with the finalizer the jobframework gives the Workloads it makes (as upstream's
    unit cases build theirs)."""
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    return {
        "kind": "Workload",
        "metadata": {"name": name, "labels": labels or {}, "finalizers": [IN_USE]},
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


def test_an_ownerless_workload_with_the_job_uid_label_is_finished(kc: Cluster):
    """ "should handle finished workload logic for orphaned workloads when FinishOrphanedWorkloads enabled"."""
    ns = _queue(kc)
    kc.create("workloads", _workload("wl", {"kueue.x-k8s.io/job-uid": "job_uid"}), ns)
    kc.settle()
    wl = kc.get("workloads", "wl", ns)
    assert cond(wl, "Finished") == OWNER_NOT_FOUND
    assert IN_USE not in (wl["metadata"].get("finalizers") or [])
    assert _reserved_cpu(kc) in (None, "0")


def test_an_ownerless_workload_without_the_label_is_not_orphaned(kc: Cluster):
    """isOrphanedWorkload: no owner references alone (a Workload made by hand) is not an orphan."""
    ns = _queue(kc)
    kc.create("workloads", _workload("wl"), ns)
    kc.settle()
    wl = kc.get("workloads", "wl", ns)
    assert cond(wl, "Admitted")[0] == "True" and cond(wl, "Finished") is None
    assert IN_USE in wl["metadata"]["finalizers"]
    assert _reserved_cpu(kc) == "1"


def test_a_deleted_ownerless_workload_loses_its_finalizer(kc: Cluster):
    """ "remove finalizer for deleted orphaned workload": a Workload being deleted without owners is orphaned."""
    ns = _queue(kc)
    kc.create("workloads", _workload("wl"), ns)
    kc.settle()
    assert IN_USE in kc.get("workloads", "wl", ns)["metadata"]["finalizers"]
    kc.custom.delete_namespaced_custom_object(*KUEUE, ns, "workloads", "wl")
    kc.settle()
    with pytest.raises(ApiException) as err:
        kc.get("workloads", "wl", ns)
    assert err.value.status == 404
    assert _reserved_cpu(kc) == "0"
