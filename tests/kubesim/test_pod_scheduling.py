"""Pod placement as kube-scheduler does it (kubesim/apiserver/nodes/scheduler.py), through the official client against
a served kubesim without Kueue: capacity of every resource, node selection, taints, cordons, the Unschedulable
condition and FailedScheduling event with kube-scheduler's message, retries when capacity frees, and preemption."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes import client

from kubesim.testing import InProcessKubesim, serve
from tests.kubesim.test_kubectl import KUBECTL, MIN_MINOR, Kubectl, _kubectl_minor

GPU = "nvidia.com/gpu"
NS = "sched"


def node(name: str, gpus: int = 8, cpu: str = "32", memory: str = "256Gi", pods: int = 110, **extra: object) -> dict:
    return {
        "name": name,
        "labels": {"pool": "h100", **extra.pop("labels", {})},  # type: ignore[dict-item]
        "allocatable": {GPU: gpus, "cpu": cpu, "memory": memory, "pods": pods},
        **extra,
    }


@pytest.fixture(scope="module")
def ks() -> Iterator[InProcessKubesim]:
    with serve(clock="manual", kueue=None, nodes=[node("gpu-a"), node("gpu-b")]) as server:
        yield server


@pytest.fixture
def api(ks: InProcessKubesim) -> Iterator[SimpleNamespace]:
    ks.reset()
    api_client = ks.api_client()
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": NS}})
    yield SimpleNamespace(core=core)
    api_client.close()


def pod(name: str, command: str = "sleep 3600", **spec: object) -> dict:
    requests = spec.pop("requests", None)
    container: dict = {"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", command]}
    if requests is not None:
        container["resources"] = {"requests": requests, "limits": requests}
    return {"metadata": {"name": name}, "spec": {"restartPolicy": "Never", "containers": [container], **spec}}


def gpu_pod(name: str, gpus: int, command: str = "sleep 3600", **spec: object) -> dict:
    return pod(name, command, requests={GPU: str(gpus)}, **spec)


def create(api: SimpleNamespace, *bodies: dict) -> None:
    for body in bodies:
        api.core.create_namespaced_pod(NS, body)


def read(api: SimpleNamespace, name: str) -> client.V1Pod:
    return api.core.read_namespaced_pod(name, NS)


def scheduled_condition(api: SimpleNamespace, name: str) -> client.V1PodCondition:
    return next(c for c in read(api, name).status.conditions if c.type == "PodScheduled")


def failed_scheduling(api: SimpleNamespace, name: str) -> list[client.CoreV1Event]:
    events = api.core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}").items
    return [e for e in events if e.reason == "FailedScheduling"]


def gpus_by_node(api: SimpleNamespace) -> dict[str, int]:
    used: dict[str, int] = {}
    for p in api.core.list_namespaced_pod(NS).items:
        if p.spec.node_name and p.status.phase in ("Pending", "Running"):
            gpus = sum(int((c.resources.requests or {}).get(GPU, 0)) for c in p.spec.containers)
            used[p.spec.node_name] = used.get(p.spec.node_name, 0) + gpus
    return used


def test_pods_never_exceed_a_nodes_gpus_and_the_one_that_fits_nowhere_waits(api, ks):
    create(api, *(gpu_pod(f"p{i}", 3) for i in range(5)))
    assert gpus_by_node(api) == {"gpu-a": 6, "gpu-b": 6}
    waiting = [p.metadata.name for p in api.core.list_namespaced_pod(NS).items if p.status.phase == "Pending"]
    assert len(waiting) == 1
    pending = read(api, waiting[0])
    assert pending.spec.node_name is None
    cond = scheduled_condition(api, waiting[0])
    message = (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: "
        "2 No preemption victims found for incoming pod."
    )
    assert (cond.status, cond.reason, cond.message) == ("False", "Unschedulable", message)
    [event] = failed_scheduling(api, waiting[0])
    assert (event.type, event.message, event.involved_object.kind, event.involved_object.uid) == (
        "Warning",
        message,
        "Pod",
        pending.metadata.uid,
    )
    assert event.source.component == "default-scheduler"

    # Two GPUs free on each node: a 2-GPU pod still fits beside them.
    create(api, gpu_pod("small", 2))
    assert read(api, "small").status.phase == "Running"

    # A bound pod deleted frees its node: the waiting pod is tried again and bound there.
    small_node = read(api, "small").spec.node_name
    pods = api.core.list_namespaced_pod(NS).items
    freed = next(p for p in pods if p.spec.node_name == small_node and p.metadata.name != "small")
    api.core.delete_namespaced_pod(freed.metadata.name, NS)
    assert read(api, waiting[0]).status.phase == "Running"
    assert read(api, waiting[0]).spec.node_name == freed.spec.node_name
    assert all(used <= 8 for used in gpus_by_node(api).values())


def test_a_finished_pod_frees_its_share(api, ks):
    create(api, gpu_pod("short", 8, "sleep 30", nodeSelector={"kubernetes.io/hostname": "gpu-a"}))
    create(api, gpu_pod("next", 8, nodeSelector={"kubernetes.io/hostname": "gpu-a"}))
    assert read(api, "next").status.phase == "Pending"
    assert scheduled_condition(api, "next").message.startswith(
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node affinity/selector."
    )
    ks.advance(31)
    assert read(api, "short").status.phase == "Succeeded"
    assert read(api, "next").status.phase == "Running" and read(api, "next").spec.node_name == "gpu-a"


def test_a_pod_past_its_active_deadline_is_killed_and_fails(api, ks):
    create(api, gpu_pod("bounded", 8, "sleep 3600", activeDeadlineSeconds=60), gpu_pod("short", 8, "sleep 30",
                                                                                      activeDeadlineSeconds=60))
    ks.advance(31)
    assert read(api, "short").status.phase == "Succeeded"  # done within its deadline
    ks.advance(30)
    bounded = read(api, "bounded").status
    assert (bounded.phase, bounded.reason, bounded.message) == (
        "Failed", "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
    assert bounded.container_statuses[0].state.terminated.exit_code == 137


def test_the_message_counts_every_nodes_reason_as_kube_scheduler_words_it(ks):
    nodes = [
        node("full", gpus=2),
        node("tainted", taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]),
        node("other-pool", labels={"pool": "l40s"}),
        node("soft", gpus=2, taints=[{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]),
    ]
    with serve(clock="manual", kueue=None, nodes=nodes) as server:
        api_client = server.api_client()
        core = client.CoreV1Api(api_client)
        api = SimpleNamespace(core=core)
        core.create_namespace({"metadata": {"name": NS}})
        core.patch_node("full", {"spec": {"unschedulable": True}})
        create(api, gpu_pod("big", 4, nodeSelector={"pool": "h100"}))
        message = (
            "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node "
            "affinity/selector, 1 node(s) had untolerated taint {dedicated: infer}, 1 node(s) were unschedulable. "
            "preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, "
            "3 Preemption is not helpful for scheduling."
        )
        assert scheduled_condition(api, "big").message == message
        assert [e.message for e in failed_scheduling(api, "big")] == [message]

        # A PreferNoSchedule taint does not block: a 2-GPU pod lands on the soft node (the only one with room).
        create(api, gpu_pod("fits", 2, nodeSelector={"pool": "h100"}))
        assert read(api, "fits").spec.node_name == "soft"
        # A toleration opens the tainted node; an uncordoned node takes what fits.
        tolerant = gpu_pod("tolerant", 4, nodeSelector={"pool": "h100"},
                           tolerations=[{"key": "dedicated", "operator": "Exists"}])
        create(api, tolerant)
        assert read(api, "tolerant").spec.node_name == "tainted"
        create(api, gpu_pod("waits", 2, nodeSelector={"kubernetes.io/hostname": "full"}))
        assert read(api, "waits").status.phase == "Pending"
        # The first failing filter names each node: the cordon before the taint before the selector.
        assert scheduled_condition(api, "waits").message.startswith(
            "0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: infer}, 1 node(s) were "
            "unschedulable, 2 node(s) didn't match Pod's node affinity/selector. preemption: "
        )
        core.patch_node("full", {"spec": {"unschedulable": False}})
        assert read(api, "waits").spec.node_name == "full"
        # A node added later takes the pod that fitted nowhere.
        core.create_node({"metadata": {"name": "new", "labels": {"pool": "h100"}},
                          "status": {"allocatable": {GPU: "8", "cpu": "32", "memory": "64Gi", "pods": "110"}}})
        assert read(api, "big").spec.node_name == "new"
        api_client.close()


def test_required_node_affinity_operators_and_fields(ks, api):
    core = api.core
    core.patch_node("gpu-a", {"metadata": {"labels": {"gen": "3", "zone": "a"}}})
    core.patch_node("gpu-b", {"metadata": {"labels": {"gen": "5"}}})

    def placed(name: str, *terms: dict) -> str | None:
        required = {"nodeSelectorTerms": list(terms)}
        create(api, pod(name, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}))
        return read(api, name).spec.node_name

    def expr(key: str, operator: str, *values: str) -> dict:
        return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}

    assert placed("in", {"matchExpressions": [expr("zone", "In", "a", "x")]}) == "gpu-a"
    assert placed("notin", {"matchExpressions": [expr("zone", "NotIn", "a")]}) == "gpu-b"
    assert placed("exists", {"matchExpressions": [expr("zone", "Exists")]}) == "gpu-a"
    assert placed("absent", {"matchExpressions": [expr("zone", "DoesNotExist")]}) == "gpu-b"
    assert placed("gt", {"matchExpressions": [expr("gen", "Gt", "4")]}) == "gpu-b"
    assert placed("lt", {"matchExpressions": [expr("gen", "Lt", "4")]}) == "gpu-a"
    assert placed("field", {"matchFields": [expr("metadata.name", "In", "gpu-b")]}) == "gpu-b"
    # Terms are ORed, a term's requirements ANDed.
    assert placed("or", {"matchExpressions": [expr("zone", "In", "a"), expr("gen", "Gt", "4")]},
                  {"matchFields": [expr("metadata.name", "NotIn", "gpu-a")]}) == "gpu-b"
    assert placed("none", {"matchExpressions": [expr("zone", "In", "b")]}) is None
    assert scheduled_condition(api, "none").message == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling."
    )


def test_cpu_memory_pod_count_init_containers_and_overhead(ks):
    with serve(clock="manual", kueue=None, nodes=[node("small", gpus=0, cpu="4", memory="8Gi", pods=3)]) as server:
        api_client = server.api_client()
        api = SimpleNamespace(core=client.CoreV1Api(api_client))
        api.core.create_namespace({"metadata": {"name": NS}})
        # Init containers run before the app containers: the pod needs max(3, 1 + 1) = 3 cpu, plus 500m overhead.
        init = pod("init", requests={"cpu": "1"}, overhead={"cpu": "500m"})
        init["spec"]["containers"].append({**init["spec"]["containers"][0], "name": "second"})
        init["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36", "command": ["true"],
                                           "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "3"}}}]
        create(api, init)
        assert read(api, "init").status.phase == "Running"
        create(api, pod("too-much", requests={"cpu": "1", "memory": "9Gi"}))
        assert scheduled_condition(api, "too-much").message == (
            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. preemption: 0/1 nodes are "
            "available: 1 No preemption victims found for incoming pod."
        )
        # A sidecar (an init container that keeps running) adds to the app containers: 300m + 300m > 500m free.
        sidecar = pod("sidecar", requests={"cpu": "300m"})
        sidecar["spec"]["initContainers"] = [{"name": "proxy", "image": "busybox:1.36", "restartPolicy": "Always",
                                              "resources": {"requests": {"cpu": "300m"}}}]
        create(api, sidecar)
        assert scheduled_condition(api, "sidecar").message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
        # Three pods at most: pods asking for nothing still count.
        create(api, pod("second"), pod("third"), pod("fourth", requests={"cpu": "100m"}))
        assert [read(api, name).status.phase for name in ("second", "third")] == ["Running", "Running"]
        assert scheduled_condition(api, "fourth").message.startswith("0/1 nodes are available: 1 Too many pods.")
        api_client.close()


def test_a_higher_priority_pod_preempts_and_never_preempting_pods_say_so(api, ks):
    for name in ("low-a", "low-b"):
        create(api, gpu_pod(name, 8, priority=10))
    create(api, gpu_pod("polite", 4, priority=100, preemptionPolicy="Never"))
    assert scheduled_condition(api, "polite").message == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: not eligible due to "
        "preemptionPolicy=Never."
    )
    create(api, gpu_pod("equal", 4, priority=10))
    assert scheduled_condition(api, "equal").message.endswith(
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    create(api, gpu_pod("urgent", 8, priority=1000))
    remaining = {p.metadata.name for p in api.core.list_namespaced_pod(NS).items}
    assert len(remaining & {"low-a", "low-b"}) == 1
    victim = ({"low-a", "low-b"} - remaining).pop()
    events = api.core.list_namespaced_event(NS, field_selector=f"involvedObject.name={victim}").items
    urgent = read(api, "urgent")
    assert any(e.reason == "Preempted" and e.message.startswith(f"Preempted by pod {urgent.metadata.uid} on node ")
               for e in events)
    assert urgent.status.phase == "Running" and urgent.status.nominated_node_name == urgent.spec.node_name
    # The freed node went to the preemptor, not to the lower-priority pods waiting before it.
    assert read(api, "polite").status.phase == "Pending"


@pytest.mark.skipif(_kubectl_minor() < MIN_MINOR, reason=f"kubectl 1.{MIN_MINOR}+ not on PATH ({KUBECTL or 'none'})")
def test_kubectl_cordon_describe_and_uncordon(api, ks, tmp_path: Path):
    kubectl = Kubectl(ks.kubeconfig_path, tmp_path)
    for name in ("gpu-a", "gpu-b"):
        assert kubectl("cordon", name).stdout.strip() == f"node/{name} cordoned"
    nodes = kubectl("get", "nodes").stdout.splitlines()
    assert [line.split()[1] for line in nodes[1:]] == ["Ready,SchedulingDisabled"] * 2
    overrides = {"spec": {"containers": [{"name": "p", "image": "busybox", "resources": {"limits": {GPU: "2"}}}]}}
    kubectl("run", "p", "-n", NS, "--image=busybox", "--restart=Never", f"--overrides={json.dumps(overrides)}")
    described = kubectl("describe", "pod", "p", "-n", NS).stdout
    assert "Warning  FailedScheduling" in described
    assert (
        "default-scheduler  0/2 nodes are available: 2 node(s) were unschedulable. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling." in described
    )
    # Each node's kubelet holds its Lease in kube-node-lease, which describe node reads.
    node = kubectl("describe", "node", "gpu-a").stdout
    assert "Failed to get lease" not in node
    assert "HolderIdentity:  gpu-a" in node
    kubectl("uncordon", "gpu-b")
    assert read(api, "p").spec.node_name == "gpu-b" and read(api, "p").status.phase == "Running"
    leases = kubectl("get", "leases", "-n", "kube-node-lease", "-o", "name").stdout.split()
    assert leases == ["lease.coordination.k8s.io/gpu-a", "lease.coordination.k8s.io/gpu-b"]


def test_a_node_lease_comes_and_goes_with_its_node(api, ks):
    coordination = client.CoordinationV1Api(api.core.api_client)
    created = api.core.create_node({"metadata": {"name": "late"}, "status": {"allocatable": {"cpu": "4", "pods": "8"}}})
    lease = coordination.read_namespaced_lease("late", "kube-node-lease")
    assert (lease.spec.holder_identity, lease.spec.lease_duration_seconds) == ("late", 40)
    owners = [(o.kind, o.name, o.uid) for o in lease.metadata.owner_references]
    assert owners == [("Node", "late", created.metadata.uid)]
    api.core.delete_node("late")
    assert [item.metadata.name for item in coordination.list_namespaced_lease("kube-node-lease").items] == [
        "gpu-a",
        "gpu-b",
    ]
