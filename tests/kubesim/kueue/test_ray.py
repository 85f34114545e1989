"""Kueue managing KubeRay's kinds in kubesim (kubesim.kueue.integrations.raycluster, rayjob) beyond the upstream
cases: eviction and requeue with the pods torn down and brought back, a failed RayJob's Workload, and the quota of a
RayJob held until its cluster is gone."""

from __future__ import annotations

from tests.kubesim import ray as R
from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_upstream_controllers import cluster_queue, cond, flavor, fq

POOL = "portal.gpu/pool"


def _queue(kc: Cluster, cpu: str = "4") -> str:
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(kc, "cq", [("cpu", [fq("default", "cpu", cpu)])])
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    return ns


def _workload(kc: Cluster, ns: str, plural: str, name: str) -> dict:
    [wl] = R.workloads(kc.custom, ns, plural, name)
    return wl


def _set_active(kc: Cluster, ns: str, wl: dict, active: bool) -> None:
    kc.custom.patch_namespaced_custom_object(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"spec": {"active": active}}
    )
    kc.settle()


def _reserved_cpu(kc: Cluster) -> str | None:
    usage = kc.get("clusterqueues", "cq")["status"].get("flavorsReservation") or []
    return next((r["total"] for f in usage for r in f["resources"] if r["name"] == "cpu"), None)


def test_raycluster_waits_suspended_until_admitted(kc: Cluster):
    ns = _queue(kc, cpu="2")
    R.create(kc.custom, ns, R.raycluster_body("rc", R.worker_group("w", 2, {"cpu": "1"}), labels=R.queued("lq")))
    kc.settle()
    rc = R.read(kc.custom, ns, "rayclusters", "rc")
    assert rc["spec"]["suspend"] is True
    assert R.cluster_pods(kc.core, ns, "rc") == []
    assert cond(_workload(kc, ns, "rayclusters", "rc"), "QuotaReserved")[0] == "False"


def test_raycluster_eviction_deletes_its_pods_and_requeues(kc: Cluster):
    ns = _queue(kc)
    R.create(kc.custom, ns, R.raycluster_body("rc", R.worker_group("w", 2, {"cpu": "1"}), labels=R.queued("lq")))
    kc.settle()
    assert len(R.cluster_pods(kc.core, ns, "rc")) == 3
    assert _reserved_cpu(kc) == "3"
    wl = _workload(kc, ns, "rayclusters", "rc")
    _set_active(kc, ns, wl, False)
    rc = R.read(kc.custom, ns, "rayclusters", "rc")
    assert (rc["spec"]["suspend"], rc["status"]["state"]) == (True, "suspended")
    assert R.cluster_pods(kc.core, ns, "rc") == []
    assert _reserved_cpu(kc) == "0"
    assert ("Stopped", "The workload is deactivated") in kc.events(ns, "rc")
    _set_active(kc, ns, wl, True)
    rc = R.read(kc.custom, ns, "rayclusters", "rc")
    assert (rc["spec"]["suspend"], rc["status"]["state"]) == (False, "ready")
    assert len(R.cluster_pods(kc.core, ns, "rc")) == 3


def test_raycluster_holds_its_quota_until_deleted(kc: Cluster):
    ns = _queue(kc)
    R.create(kc.custom, ns, R.raycluster_body("rc", R.worker_group("w", 1, {"cpu": "1"}), labels=R.queued("lq")))
    kc.settle(3600)
    assert _reserved_cpu(kc) == "2"
    assert cond(_workload(kc, ns, "rayclusters", "rc"), "Finished") is None
    kc.custom.delete_namespaced_custom_object(*R.RAY, ns, "rayclusters", "rc")
    kc.settle()
    assert _reserved_cpu(kc) == "0"


def test_rayjob_eviction_tears_down_its_cluster_and_requeues(kc: Cluster):
    ns = _queue(kc)
    body = R.rayjob_body("rj", R.worker_group("w", 1, {"cpu": "1"}), entrypoint="sleep 600", labels=R.queued("lq"))
    R.create(kc.custom, ns, body)
    kc.settle()
    first = R.read(kc.custom, ns, "rayjobs", "rj")["status"]["rayClusterName"]
    assert _reserved_cpu(kc) == "2500m"  # head 1, worker 1, submitter 500m
    wl = _workload(kc, ns, "rayjobs", "rj")
    _set_active(kc, ns, wl, False)
    job = R.read(kc.custom, ns, "rayjobs", "rj")
    assert (job["spec"]["suspend"], job["status"]["jobDeploymentStatus"]) == (True, "Suspended")
    assert R.cluster_pods(kc.core, ns, first) == []
    assert kc.batch.list_namespaced_job(ns).items == []
    assert _reserved_cpu(kc) == "0"
    _set_active(kc, ns, wl, True)
    job = R.read(kc.custom, ns, "rayjobs", "rj")
    assert job["status"]["jobDeploymentStatus"] == "Running"
    assert len(R.cluster_pods(kc.core, ns, job["status"]["rayClusterName"])) == 2


def test_failed_rayjob_finishes_its_workload_as_failed(kc: Cluster):
    ns = _queue(kc)
    body = R.rayjob_body("rj", entrypoint="python train.py; exit 1", labels=R.queued("lq"))
    R.create(kc.custom, ns, body)
    kc.settle()
    kc.settle(120)
    finished = cond(_workload(kc, ns, "rayjobs", "rj"), "Finished")
    assert finished == ("True", "Failed", "Job entrypoint command failed with exit code 1")
    assert _reserved_cpu(kc) == "0"


def test_rayjob_cluster_and_submitter_get_no_workload_of_their_own(kc: Cluster):
    ns = _queue(kc)
    R.create(kc.custom, ns, R.rayjob_body("rj", entrypoint="sleep 600", labels=R.queued("lq")))
    kc.settle()
    items = kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
    assert [
        (w["metadata"]["ownerReferences"][0]["kind"], w["metadata"]["ownerReferences"][0]["name"]) for w in items
    ] == [("RayJob", "rj")]
    cluster = R.read(kc.custom, ns, "rayclusters", R.read(kc.custom, ns, "rayjobs", "rj")["status"]["rayClusterName"])
    assert cluster["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"  # copied by KubeRay, yet not queued
    assert cluster["spec"].get("suspend") is not True


def test_finished_rayjob_keeps_its_cluster_for_the_time_to_live(kc: Cluster):
    """The RayJob's Workload finished while admitted: Kueue leaves its cluster to KubeRay (no child suspension), which
    keeps it, replacing a lost pod, until ttlSecondsAfterFinished has passed."""
    ns = _queue(kc)
    body = R.rayjob_body("rj", entrypoint="sleep 5", ttlSecondsAfterFinished=60, labels=R.queued("lq"))
    R.create(kc.custom, ns, body)
    kc.settle()
    kc.settle(5)
    name = R.read(kc.custom, ns, "rayjobs", "rj")["status"]["rayClusterName"]
    assert cond(_workload(kc, ns, "rayjobs", "rj"), "Finished")[:2] == ("True", "Succeeded")
    [head] = R.cluster_pods(kc.core, ns, name)
    kc.core.delete_namespaced_pod(head.metadata.name, ns)
    kc.settle()
    assert R.read(kc.custom, ns, "rayclusters", name)["spec"].get("suspend") is not True
    assert len(R.cluster_pods(kc.core, ns, name)) == 1
    kc.settle(60)
    assert R.cluster_pods(kc.core, ns, name) == []
