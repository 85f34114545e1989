"""Pods of Kueue-admitted workloads placed by kube-scheduler's rules (kubesim/apiserver/nodes/scheduler.py): the node
labels Kueue injects from the admitting ResourceFlavor land them on that flavor's nodes, and quota that outgrows the
nodes leaves the extra pod Pending (Unschedulable), admitted but not running, as on a real cluster."""

from __future__ import annotations

from tests.kubesim.kueue.conftest import GPU, POOL_LABEL, Cluster


def flavors_queue(kc: Cluster, ns: str, h100_quota: int) -> None:
    kc.flavor("h100", "h100")
    kc.flavor("l40s", "l40s-shared")
    def quota(gpus: int) -> list[dict]:
        return [{"name": GPU, "nominalQuota": str(gpus)}, {"name": "cpu", "nominalQuota": "1000"}]

    flavors = [{"name": "h100", "resources": quota(h100_quota)}, {"name": "l40s", "resources": quota(48)}]
    kc.cluster_queue("gpus", groups=[{"coveredResources": [GPU, "cpu"], "flavors": flavors}])
    kc.local_queue("team", "gpus", ns)


def pods_of(kc: Cluster, ns: str, job: str) -> list:
    return kc.core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items


def test_pods_land_on_the_nodes_of_the_flavor_that_admitted_them(kc: Cluster):
    ns = kc.namespace()
    flavors_queue(kc, ns, h100_quota=16)
    kc.job(ns, "first", "team", gpu=8, parallelism=2)
    kc.job(ns, "second", "team", gpu=8, parallelism=2)  # h100's quota is used up: admitted on l40s
    kc.settle()
    pools = {}
    for job in ("first", "second"):
        flavor = kc.workload(ns, job)["status"]["admission"]["podSetAssignments"][0]["flavors"][GPU]
        pods = pods_of(kc, ns, job)
        assert [p.status.phase for p in pods] == ["Running", "Running"]
        nodes = {p.spec.node_name for p in pods}
        pools[job] = flavor, {kc.core.read_node(n).metadata.labels[POOL_LABEL] for n in nodes}, len(nodes)
    assert pools == {"first": ("h100", {"h100"}, 2), "second": ("l40s", {"l40s-shared"}, 2)}


def test_quota_beyond_the_flavors_nodes_leaves_the_pod_unschedulable(kc: Cluster):
    ns = kc.namespace()
    flavors_queue(kc, ns, h100_quota=24)  # 24 GPUs of quota on 2 nodes of 8
    kc.job(ns, "fits", "team", gpu=8, parallelism=2)
    kc.job(ns, "over", "team", gpu=8)
    kc.settle()
    assert kc.admitted(ns, "over")
    [pod] = pods_of(kc, ns, "over")
    assert pod.status.phase == "Pending" and pod.spec.node_selector == {POOL_LABEL: "h100"}
    [cond] = [c for c in pod.status.conditions if c.type == "PodScheduled"]
    assert (cond.status, cond.reason, cond.message) == (
        "False",
        "Unschedulable",
        "0/16 nodes are available: 14 node(s) didn't match Pod's node affinity/selector, 2 Insufficient "
        "nvidia.com/gpu. preemption: 0/16 nodes are available: 14 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod.",
    )
    # The first Job's pods finish: the waiting pod takes a freed node.
    kc.settle(601)
    [pod] = pods_of(kc, ns, "over")
    assert pod.status.phase == "Running" and pod.spec.node_name.startswith("h100-node-")
