"""Kueue's LeaderWorkerSet integration cases (kubernetes-sigs/kueue v0.20 line: test/e2e/singlecluster/extended/
leaderworkerset_test.go, test/integration/singlecluster/webhook/jobs/leaderworkerset_webhook_test.go and
pkg/controller/jobs/leaderworkerset/leaderworkerset_{reconciler,webhook}_test.go), each test named after its upstream
case and re-told against a served kubesim (which runs the LWS operator) through the official client; nothing is
carried over.

Left out: TopologyAwareScheduling and pod-set grouping, MultiKueue, rolling updates with maxSurge (kubesim's LWS
controller keeps one template revision), AdmissionGatedBy, the feature-gate-off variants.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.kueue.conftest import KUEUE, Cluster
from tests.kubesim.kueue.test_upstream_pod import GATE, gates, setup, status, workloads

LWS = ("leaderworkerset.x-k8s.io", "v1")
NAME = "leaderworkerset.sigs.k8s.io/name"


def template(cpu: str = "1") -> dict:
    return {
        "spec": {
            "containers": [
                {"name": "c", "image": "vllm", "command": ["sleep", "3600"], "resources": {"requests": {"cpu": cpu}}}
            ]
        }
    }


def create_lws(
    kc: Cluster,
    ns: str,
    name: str,
    *,
    replicas: int = 1,
    size: int = 1,
    leader: dict | None = None,
    queue: str | None = "lq",
    labels: dict | None = None,
    **spec: object,
) -> dict:
    lwt: dict = {"size": size, "workerTemplate": template()}
    if leader is not None:
        lwt["leaderTemplate"] = leader
    md: dict = {"name": name, "labels": dict(labels or {})}
    if queue:
        md["labels"]["kueue.x-k8s.io/queue-name"] = queue
    body = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": md,
        "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt, **spec},
    }
    out = kc.custom.create_namespaced_custom_object(*LWS, ns, "leaderworkersets", body)
    kc.settle()
    return out


def read_lws(kc: Cluster, ns: str, name: str) -> dict:
    return kc.custom.get_namespaced_custom_object(*LWS, ns, "leaderworkersets", name)


def group_workload(lws: dict, index: int) -> str:
    """GetWorkloadNameForOwnerWithGVK for owner name `<lws>-<index>`."""
    md = lws["metadata"]
    digest = hashlib.sha1(
        f"LeaderWorkerSet\nleaderworkerset.x-k8s.io\n{md['name']}-{index}\n{md['uid']}".encode(),
        usedforsecurity=False,
    ).hexdigest()
    return f"leaderworkerset-{md['name']}-{index}-{digest[:5]}"


def pods_of(kc: Cluster, ns: str, name: str) -> dict[str, object]:
    return {
        p.metadata.name: p
        for p in kc.core.list_namespaced_pod(ns, label_selector=f"{NAME}={name}").items
        if not p.metadata.deletion_timestamp
    }


def test_should_admit_group_with_leader_only(kc: Cluster):
    ns = setup(kc)
    lws = create_lws(kc, ns, "lws")
    wl = kc.get("workloads", group_workload(lws, 0), ns)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 1)]
    annotations = wl["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/is-group-workload"] == "true"
    assert annotations["kueue.x-k8s.io/job-owner-gvk"] == "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"
    assert annotations["kueue.x-k8s.io/job-owner-name"] == "lws"
    assert annotations["kueue.x-k8s.io/component-workload-index"] == "0"
    refs = wl["metadata"]["ownerReferences"]
    assert ("LeaderWorkerSet", "lws", None) in {(r["kind"], r["name"], r.get("controller")) for r in refs}
    assert ("Pod", "lws-0") in {(r["kind"], r["name"]) for r in refs}  # the pod adopted its prebuilt Workload
    assert status(wl, "Admitted")[0] == "True"
    pod = kc.core.read_namespaced_pod("lws-0", ns)
    assert pod.status.phase == "Running" and not pod.spec.scheduling_gates
    assert pod.metadata.labels["kueue.x-k8s.io/managed"] == "true"
    assert pod.metadata.annotations["kueue.x-k8s.io/pod-group-name"] == group_workload(lws, 0)
    assert pod.spec.node_selector == {"portal.gpu/pool": "h100"}
    kc.settle(1)
    assert read_lws(kc, ns, "lws")["status"]["readyReplicas"] == 1


def test_should_admit_group_with_leader_and_workers(kc: Cluster):
    ns = setup(kc)
    lws = create_lws(kc, ns, "lws", size=3, leader=template("500m"))
    wl = kc.get("workloads", group_workload(lws, 0), ns)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("leader", 1), ("worker", 2)]
    pods = pods_of(kc, ns, "lws")
    assert sorted(pods) == ["lws-0", "lws-0-1", "lws-0-2"]
    roles = {n: p.metadata.annotations["kueue.x-k8s.io/role-hash"] for n, p in pods.items()}
    assert roles == {"lws-0": "leader", "lws-0-1": "worker", "lws-0-2": "worker"}
    assert all(not p.spec.scheduling_gates and p.status.phase == "Running" for p in pods.values())
    worker = pods["lws-0-1"].metadata
    assert (
        worker.labels["leaderworkerset.sigs.k8s.io/group-index"],
        worker.labels["leaderworkerset.sigs.k8s.io/worker-index"],
    ) == ("0", "1")
    assert worker.annotations["leaderworkerset.sigs.k8s.io/leader-name"] == "lws-0"


def test_should_admit_group_with_multiple_leaders_and_workers_that_fits(kc: Cluster):
    ns = setup(kc, cpu="6")
    lws = create_lws(kc, ns, "lws", replicas=2, size=3)
    assert set(workloads(kc, ns)) == {group_workload(lws, 0), group_workload(lws, 1)}
    assert all(not p.spec.scheduling_gates for p in pods_of(kc, ns, "lws").values())
    kc.settle(1)
    assert read_lws(kc, ns, "lws")["status"]["readyReplicas"] == 2


def test_should_allow_to_scale_up(kc: Cluster):
    ns = setup(kc, cpu="3")
    lws = create_lws(kc, ns, "lws", replicas=1, size=2)
    kc.custom.patch_namespaced_custom_object_scale(*LWS, ns, "leaderworkersets", "lws", {"spec": {"replicas": 2}})
    kc.settle()
    assert set(workloads(kc, ns)) == {group_workload(lws, 0), group_workload(lws, 1)}
    assert status(kc.get("workloads", group_workload(lws, 1), ns), "QuotaReserved")[0] == "False"  # 4 > 3 CPUs
    assert gates(kc, ns, "lws-1") == [GATE] == gates(kc, ns, "lws-1-1")
    kc.custom.patch_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        "cq",
        {
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
                    }
                ]
            }
        },
    )
    kc.settle()
    assert gates(kc, ns, "lws-1") == [] == gates(kc, ns, "lws-1-1")


def test_should_allow_to_scale_down(kc: Cluster):
    ns = setup(kc, cpu="4")
    lws = create_lws(kc, ns, "lws", replicas=2, size=2)
    kc.custom.patch_namespaced_custom_object(*LWS, ns, "leaderworkersets", "lws", {"spec": {"replicas": 1}})
    kc.settle()
    assert set(workloads(kc, ns)) == {group_workload(lws, 0)}
    assert sorted(pods_of(kc, ns, "lws")) == ["lws-0", "lws-0-1"]
    assert kc.get("clusterqueues", "cq")["status"]["admittedWorkloads"] == 1


def test_should_admit_evict_and_re_activate_the_group_correctly(kc: Cluster):
    ns = setup(kc)
    lws = create_lws(kc, ns, "lws", size=2)
    name = group_workload(lws, 0)
    old_uids = {p.metadata.uid for p in pods_of(kc, ns, "lws").values()}
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", name, {"spec": {"active": False}})
    kc.settle()
    wl = kc.get("workloads", name, ns)
    assert status(wl, "Evicted")[:2] == ("True", "Deactivated")
    assert status(wl, "QuotaReserved")[0] == "False"
    pods = pods_of(kc, ns, "lws")  # LWS recreated the group: gated until it is admitted again
    assert sorted(pods) == ["lws-0", "lws-0-1"] and not old_uids & {p.metadata.uid for p in pods.values()}
    assert all([g.name for g in p.spec.scheduling_gates] == [GATE] for p in pods.values())
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", name, {"spec": {"active": True}})
    kc.settle()
    assert status(kc.get("workloads", name, ns), "Admitted")[0] == "True"
    assert all(not p.spec.scheduling_gates for p in pods_of(kc, ns, "lws").values())


def test_should_allow_to_change_queue_name_if_ready_replicas_0(kc: Cluster):
    ns = setup(kc)
    lws = create_lws(kc, ns, "lws", queue="missing")
    assert kc.get("workloads", group_workload(lws, 0), ns)["spec"]["queueName"] == "missing"
    assert read_lws(kc, ns, "lws")["status"]["readyReplicas"] == 0
    kc.custom.patch_namespaced_custom_object(
        *LWS, ns, "leaderworkersets", "lws", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "lq"}}}
    )
    kc.settle(1)
    assert kc.get("workloads", group_workload(lws, 0), ns)["spec"]["queueName"] == "lq"
    assert read_lws(kc, ns, "lws")["status"]["readyReplicas"] == 1
    with pytest.raises(ApiException) as exc:  # a ready group fixes the queue name
        kc.custom.patch_namespaced_custom_object(
            *LWS, ns, "leaderworkersets", "lws", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "missing"}}}
        )
    assert exc.value.status == 403 and "vleaderworkerset.kb.io" in exc.value.body


def test_should_reject_increasing_the_leader_worker_template_size(kc: Cluster):
    ns = setup(kc)
    create_lws(kc, ns, "lws", size=2)
    with pytest.raises(ApiException) as exc:
        kc.custom.patch_namespaced_custom_object(
            *LWS, ns, "leaderworkersets", "lws", {"spec": {"leaderWorkerTemplate": {"size": 3}}}
        )
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"] == (
        'admission webhook "vleaderworkerset.kb.io" denied the request: spec.leaderWorkerTemplate.size: '
        "Invalid value: 3: field is immutable"
    )


def test_should_allow_increasing_the_leader_worker_template_size_when_not_managed(kc: Cluster):
    ns = setup(kc)
    create_lws(kc, ns, "lws", size=2, queue=None)
    assert gates(kc, ns, "lws-0") == [] and workloads(kc, ns) == {}  # not Kueue's: runs at once
    kc.custom.patch_namespaced_custom_object(
        *LWS, ns, "leaderworkersets", "lws", {"spec": {"leaderWorkerTemplate": {"size": 3}}}
    )
    assert read_lws(kc, ns, "lws")["spec"]["leaderWorkerTemplate"]["size"] == 3


def test_should_allow_changing_replicas(kc: Cluster):
    ns = setup(kc)
    create_lws(kc, ns, "lws", replicas=1)
    kc.custom.patch_namespaced_custom_object(*LWS, ns, "leaderworkersets", "lws", {"spec": {"replicas": 3}})
    assert read_lws(kc, ns, "lws")["spec"]["replicas"] == 3


def test_default_copies_the_queue_to_the_templates_and_marks_them_for_kueue(kc: Cluster):
    """TestDefault: "default lq is created, job doesn't have queue label" and the template annotations."""
    ns = setup(kc)
    kc.local_queue("default", "cq", ns)
    lws = create_lws(kc, ns, "lws", queue=None, leader=template())
    assert lws["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    for key in ("leaderTemplate", "workerTemplate"):
        md = lws["spec"]["leaderWorkerTemplate"][key]["metadata"]
        assert md["labels"]["kueue.x-k8s.io/queue-name"] == "default"
        assert md["annotations"] == {
            "kueue.x-k8s.io/pod-suspending-parent": "leaderworkerset.x-k8s.io/leaderworkerset",
            "kueue.x-k8s.io/pod-group-serving": "true",
        }


def test_replicas_above_maximum(kc: Cluster):
    """Kueue's webhook would refuse it too; the CRD's schema (maximum 1000000) answers first, as kube-apiserver does."""
    ns = setup(kc)
    with pytest.raises(ApiException) as exc:
        create_lws(kc, ns, "lws", replicas=1_000_001)
    assert exc.value.status == 422
    causes = json.loads(exc.value.body)["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.replicas"]
    assert "1000000" in causes[0]["message"]


def test_shouldnt_delete_deactivated_workload(kc: Cluster):
    ns = setup(kc)
    lws = create_lws(kc, ns, "lws")
    name = group_workload(lws, 0)
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", name, {"spec": {"active": False}})
    kc.settle(30)
    assert kc.get("workloads", name, ns)["spec"]["active"] is False


def test_deleting_the_leader_worker_set_removes_its_pods_and_workloads(kc: Cluster):
    ns = setup(kc)
    create_lws(kc, ns, "lws", size=2)
    kc.custom.delete_namespaced_custom_object(*LWS, ns, "leaderworkersets", "lws")
    kc.settle()
    assert pods_of(kc, ns, "lws") == {} and workloads(kc, ns) == {}
    assert kc.get("clusterqueues", "cq")["status"]["admittedWorkloads"] == 0
