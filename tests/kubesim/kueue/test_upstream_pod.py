"""Kueue's Pod integration cases (kubernetes-sigs/kueue v0.20 line: test/integration/singlecluster/controller/jobs/
pod/pod_controller_test.go, test/e2e/singlecluster/baseline/pod_test.go and pkg/controller/jobs/pod/
pod_webhook_test.go), each test named after its upstream case and re-told against a served kubesim through the
official client, as a user with kubectl would act; nothing is carried over.

How the re-telling differs, and why:
- Upstream writes quota reservations and pod phases by hand; kubesim's scheduler admits and its kubelet runs the
  pods (`sleep N` runs N seconds, `exit N` fails), so the tests shape queues and commands instead.
- Evictions come from what evicts in a cluster: a higher-priority workload preempting (reason Preempted) or a
  ClusterQueue stopped with HoldAndDrain.
Left out: TopologyAwareScheduling, MultiKueue, waitForPodsReady, CustomMetricLabels, and the feature-gate-off
variants (v0.20's defaults are emulated); manageJobsWithoutQueueName (not emulated).
"""

from __future__ import annotations

import hashlib
import json

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.kueue.conftest import KUEUE, Cluster

POOL = "portal.gpu/pool"
MANAGED = "kueue.x-k8s.io/managed"
GATE = "kueue.x-k8s.io/admission"
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"


def setup(kc: Cluster, cpu: str = "4", **cq_spec: object) -> str:
    """A flavor on the h100 pool, a ClusterQueue of `cpu` CPUs and LocalQueue `lq` in a new namespace."""
    kc.create(
        "resourceflavors",
        {"kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {"nodeLabels": {POOL: "h100"}}},
    )
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
        }
    ]
    kc.create(
        "clusterqueues",
        {
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": groups, **cq_spec},
        },
    )
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    return ns


def pod(
    name: str,
    *,
    queue: str | None = "lq",
    cpu: str = "1",
    command: str = "sleep 600",
    labels: dict | None = None,
    annotations: dict | None = None,
    group: tuple[str, int] | None = None,
    **spec: object,
) -> dict:
    """testingpod.MakePod: a pod with one container requesting cpu, in queue lq unless told otherwise."""
    md: dict = {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})}
    if queue:
        md["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if group:
        md["labels"][GROUP] = group[0]
        md["annotations"][TOTAL] = str(group[1])
    container = {
        "name": "c",
        "image": "busybox",
        "command": ["sh", "-c", command],
        "resources": {"requests": {"cpu": cpu}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": {"restartPolicy": "Never", "containers": [container], **spec},
    }


def workload_name_for_pod(name: str, uid: str) -> str:
    """GetWorkloadNameForPod: `pod-<name>-` and 5 hex digits of SHA-1 over kind, group (empty), name and uid."""
    digest = hashlib.sha1(f"Pod\n\n{name}\n{uid}".encode(), usedforsecurity=False).hexdigest()
    return f"pod-{name}-{digest[:5]}"


def workloads(kc: Cluster, ns: str) -> dict[str, dict]:
    return {w["metadata"]["name"]: w for w in kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]}


def status(wl: dict, ctype: str) -> tuple[str, str, str] | None:
    c = next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == ctype), None)
    return None if c is None else (c["status"], c["reason"], c["message"])


def gates(kc: Cluster, ns: str, name: str) -> list[str]:
    return [g.name for g in kc.core.read_namespaced_pod(name, ns).spec.scheduling_gates or []]


def gone(kc: Cluster, ns: str, name: str) -> bool:
    try:
        kc.core.read_namespaced_pod(name, ns)
    except ApiException as exc:
        return exc.status == 404
    return False


def priority_setup(kc: Cluster) -> str:
    """One CPU, preemption of lower priorities, WorkloadPriorityClasses low (1) and high (100)."""
    ns = setup(kc, cpu="1", preemption={"withinClusterQueue": "LowerPriority"})
    kc.priority_class("low", 1)
    kc.priority_class("high", 100)
    return ns


# -- single pods ---------------------------------------------------------------------------------------------


def test_should_reconcile_the_single_pod_with_the_queue_name(kc: Cluster):
    ns = setup(kc)
    created = kc.core.create_namespaced_pod(
        ns, pod("test-pod", command="sleep 30", annotations={"provreq.kueue.x-k8s.io/ValidUntilSeconds": "0"})
    )
    assert [g.name for g in created.spec.scheduling_gates] == [GATE]
    assert created.metadata.labels[MANAGED] == "true"
    assert created.metadata.finalizers == [MANAGED]
    name = workload_name_for_pod("test-pod", created.metadata.uid)
    wl = kc.get("workloads", name, ns)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 1)]
    assert wl["spec"]["queueName"] == "lq"
    assert wl["metadata"]["annotations"] == {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "0"}
    owner = wl["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"], o["controller"]) for o in owner] == [
        ("Pod", "test-pod", created.metadata.uid, True)
    ]
    assert status(wl, "QuotaReserved")[0] == "True" and status(wl, "Admitted")[0] == "True"
    started = kc.core.read_namespaced_pod("test-pod", ns)
    assert started.spec.scheduling_gates is None
    assert started.spec.node_selector == {POOL: "h100"}
    assert ("Started", "Admitted by clusterQueue cq") in kc.events(ns, "test-pod")
    kc.settle(31)
    assert status(kc.get("workloads", name, ns), "Finished")[:2] == ("True", "Succeeded")
    done = kc.core.read_namespaced_pod("test-pod", ns)
    assert done.status.phase == "Succeeded" and not done.metadata.finalizers


def test_should_remove_finalizers_from_pods_that_are_actively_deleted_after_being_admitted(kc: Cluster):
    ns = setup(kc)
    kc.core.create_namespaced_pod(ns, pod("test-pod"))
    assert gates(kc, ns, "test-pod") == []
    kc.core.delete_namespaced_pod("test-pod", ns)
    kc.settle()
    assert gone(kc, ns, "test-pod")
    assert workloads(kc, ns) == {}  # its Workload went with it (garbage collection)
    assert kc.get("clusterqueues", "cq")["status"]["admittedWorkloads"] == 0


def test_should_preserve_custom_finalizers_when_workload_terminates(kc: Cluster):
    ns = setup(kc)
    body = pod("test-pod", command="sleep 10")
    body["metadata"]["finalizers"] = ["my.custom/finalizer"]
    kc.core.create_namespaced_pod(ns, body)
    kc.settle(11)
    (wl,) = workloads(kc, ns).values()
    assert status(wl, "Finished")[0] == "True"
    assert kc.core.read_namespaced_pod("test-pod", ns).metadata.finalizers == ["my.custom/finalizer"]


def test_should_stop_the_single_pod_with_the_queue_name(kc: Cluster):
    ns = priority_setup(kc)
    body = pod("test-pod", labels={"kueue.x-k8s.io/priority-class": "low"})
    body["metadata"]["finalizers"] = ["kueue.x-k8s.io/integration-test"]  # keeps the stopped pod readable
    kc.core.create_namespaced_pod(ns, body)
    assert kc.core.read_namespaced_pod("test-pod", ns).status.phase == "Running"
    kc.core.create_namespaced_pod(ns, pod("preemptor", labels={"kueue.x-k8s.io/priority-class": "high"}))
    stopped = kc.core.read_namespaced_pod("test-pod", ns)
    assert stopped.metadata.deletion_timestamp is not None
    target = next(c for c in stopped.status.conditions if c.type == "TerminationTarget")
    assert (target.status, target.reason) == ("True", "WorkloadEvictedDueToPreempted")
    assert MANAGED not in (stopped.metadata.finalizers or [])
    assert gates(kc, ns, "preemptor") == []


def test_should_not_requeue_the_pod_owned_workload_evicted_by_preemption(kc: Cluster):
    ns = priority_setup(kc)
    body = pod("test-pod", labels={"kueue.x-k8s.io/priority-class": "low"})
    body["metadata"]["finalizers"] = ["kueue.x-k8s.io/integration-test"]
    created = kc.core.create_namespaced_pod(ns, body)
    kc.core.create_namespaced_pod(ns, pod("preemptor", labels={"kueue.x-k8s.io/priority-class": "high"}))
    wl = kc.get("workloads", workload_name_for_pod("test-pod", created.metadata.uid), ns)
    assert status(wl, "Requeued")[:2] == ("False", "Preempted")
    assert status(wl, "QuotaReserved")[0] == "False"
    kc.settle(60)
    wl = kc.get("workloads", workload_name_for_pod("test-pod", created.metadata.uid), ns)
    assert status(wl, "Requeued")[:2] == ("False", "Preempted")


def test_should_skip_the_pod_when_owner_is_managed_by_kueue(kc: Cluster):
    ns = setup(kc)
    job = kc.batch.create_namespaced_job(
        ns,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "parent-job", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                    }
                }
            },
        },
    )
    body = pod("test-pod")
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "parent-job", "uid": job.metadata.uid, "controller": True}
    ]
    created = kc.core.create_namespaced_pod(ns, body)
    assert not created.spec.scheduling_gates
    assert MANAGED not in created.metadata.labels and not created.metadata.finalizers
    assert workload_name_for_pod("test-pod", created.metadata.uid) not in workloads(kc, ns)


def test_should_ungate_pod_with_prebuilt_workload(kc: Cluster):
    ns = setup(kc)
    body = pod("test-pod", command="sleep 20", labels={"kueue.x-k8s.io/prebuilt-workload-name": "test-workload"})
    kc.core.create_namespaced_pod(ns, body)
    assert gates(kc, ns, "test-pod") == [GATE]
    assert workloads(kc, ns) == {}  # Kueue waits for the prebuilt Workload
    template = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        }
    }
    kc.create(
        "workloads",
        {
            "kind": "Workload",
            "metadata": {"name": "test-workload"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": template}]},
        },
        ns,
    )
    kc.settle()
    assert gates(kc, ns, "test-pod") == []
    assert status(kc.get("workloads", "test-workload", ns), "Finished") is None
    kc.settle(21)
    assert status(kc.get("workloads", "test-workload", ns), "Finished")[0] == "True"
    assert not kc.core.read_namespaced_pod("test-pod", ns).metadata.finalizers


def test_should_schedule_pods_as_they_fit_in_their_cluster_queue(kc: Cluster):
    ns = setup(kc, cpu="2")
    for name in ("a", "b", "c"):
        kc.core.create_namespaced_pod(ns, pod(name, command="sleep 30"))
    assert [gates(kc, ns, n) for n in ("a", "b", "c")] == [[], [], [GATE]]
    assert kc.core.read_namespaced_pod("c", ns).status.conditions[0].reason == "SchedulingGated"
    kc.settle(31)
    assert gates(kc, ns, "c") == []
    assert kc.core.read_namespaced_pod("c", ns).status.phase == "Running"


# -- pod groups -------------------------------------------------------------------------------------------------


def test_should_ungate_pods_when_admitted_and_finalize_pods_when_succeeded(kc: Cluster):
    ns = setup(kc)
    kc.core.create_namespaced_pod(ns, pod("test-pod1", cpu="500m", command="sleep 20", group=("test-group", 2)))
    assert workloads(kc, ns) == {}  # not before the group is complete
    assert ("ErrWorkloadCompose", "'test-group' group has fewer runnable pods than expected") in kc.events(
        ns, "test-pod1"
    )
    kc.core.create_namespaced_pod(ns, pod("test-pod2", cpu="1", command="sleep 20", group=("test-group", 2)))
    wl = kc.get("workloads", "test-group", ns)
    assert wl["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
    owners = {(o["name"], o.get("controller", False)) for o in wl["metadata"]["ownerReferences"]}
    assert owners == {("test-pod1", False), ("test-pod2", False)}
    assert sorted(ps["count"] for ps in wl["spec"]["podSets"]) == [1, 1]  # two roles: different requests
    hashes = {
        kc.core.read_namespaced_pod(n, ns).metadata.annotations["kueue.x-k8s.io/role-hash"]
        for n in ("test-pod1", "test-pod2")
    }
    assert hashes == {ps["name"] for ps in wl["spec"]["podSets"]}
    assert gates(kc, ns, "test-pod1") == [] == gates(kc, ns, "test-pod2")
    kc.settle(21)
    wl = kc.get("workloads", "test-group", ns)
    assert status(wl, "Finished") == ("True", "Succeeded", "Pods succeeded: 2/2.")
    assert all(not kc.core.read_namespaced_pod(n, ns).metadata.finalizers for n in ("test-pod1", "test-pod2"))


def test_should_ungate_pods_when_admitted_with_fast_admission(kc: Cluster):
    ns = setup(kc)
    fast = {"kueue.x-k8s.io/pod-group-fast-admission": "true"}
    kc.core.create_namespaced_pod(ns, pod("test-pod1", group=("test-group", 2), annotations=fast))
    wl = kc.get("workloads", "test-group", ns)
    assert [ps["count"] for ps in wl["spec"]["podSets"]] == [2]
    assert gates(kc, ns, "test-pod1") == []
    kc.core.create_namespaced_pod(ns, pod("test-pod2", group=("test-group", 2), annotations=fast))
    assert gates(kc, ns, "test-pod2") == []


def test_should_keep_the_running_pod_group_with_the_queue_name_if_workload_is_evicted(kc: Cluster):
    ns = setup(kc)
    for i in (1, 2):
        kc.core.create_namespaced_pod(ns, pod(f"test-pod{i}", group=("test-group", 2)))
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cq", {"spec": {"stopPolicy": "HoldAndDrain"}})
    kc.settle()
    for i in (1, 2):  # Kueue deletes them (and never recreates pods); its finalizer holds them until replaced
        stopped = kc.core.read_namespaced_pod(f"test-pod{i}", ns)
        assert stopped.metadata.deletion_timestamp is not None and stopped.metadata.finalizers == [MANAGED]
    wl = kc.get("workloads", "test-group", ns)
    assert status(wl, "Evicted")[:2] == ("True", "ClusterQueueStopped")
    assert status(wl, "QuotaReserved")[0] == "False"
    assert status(wl, "WaitingForReplacementPods")[:2] == ("True", "ClusterQueueStopped")


def test_should_keep_the_existing_workload_for_pod_replacement(kc: Cluster):
    ns = setup(kc)
    kc.core.create_namespaced_pod(ns, pod("test-pod1", group=("test-group", 2)))
    kc.core.create_namespaced_pod(ns, pod("test-pod2", command="sleep 5; exit 1", group=("test-group", 2)))
    kc.settle(6)
    assert kc.core.read_namespaced_pod("test-pod2", ns).status.phase == "Failed"
    wl = kc.get("workloads", "test-group", ns)
    assert status(wl, "WaitingForReplacementPods") == ("True", "PodsFailed", "Some Failed pods need replacement")
    assert status(wl, "Admitted")[0] == "True"
    kc.core.create_namespaced_pod(ns, pod("replacement", group=("test-group", 2)))
    assert gates(kc, ns, "replacement") == []  # the admitted Workload takes it in
    wl = kc.get("workloads", "test-group", ns)
    assert "replacement" in {o["name"] for o in wl["metadata"]["ownerReferences"]}
    assert status(wl, "WaitingForReplacementPods") == ("False", "PodsReady", "No pods need replacement")


def test_should_finish_the_group_if_one_pod_has_the_retriable_in_group_false_annotation(kc: Cluster):
    ns = setup(kc)
    kc.core.create_namespaced_pod(ns, pod("test-pod1", command="sleep 10", group=("test-group", 2)))
    kc.core.create_namespaced_pod(
        ns,
        pod(
            "test-pod2",
            command="sleep 5; exit 1",
            group=("test-group", 2),
            annotations={"kueue.x-k8s.io/retriable-in-group": "false"},
        ),
    )
    kc.settle(11)
    wl = kc.get("workloads", "test-group", ns)
    assert status(wl, "Finished")[:2] == ("True", "Failed")


def test_should_finalize_and_delete_excess_pods(kc: Cluster):
    ns = setup(kc)
    for i in (1, 2, 3):
        kc.core.create_namespaced_pod(ns, pod(f"test-pod{i}", group=("test-group", 2)))
    assert gone(kc, ns, "test-pod3")
    wl = kc.get("workloads", "test-group", ns)
    assert sum(ps["count"] for ps in wl["spec"]["podSets"]) == 2


def test_should_not_adopt_or_delete_a_foreign_non_pod_group_workload_sharing_the_group_name(kc: Cluster):
    ns = setup(kc)
    template = {"spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "9"}}}]}}
    kc.create(
        "workloads",
        {
            "kind": "Workload",
            "metadata": {"name": "test-group"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": template}]},
        },
        ns,
    )
    kc.core.create_namespaced_pod(ns, pod("test-pod1", group=("test-group", 1)))
    wl = kc.get("workloads", "test-group", ns)
    assert "ownerReferences" not in wl["metadata"]
    assert gates(kc, ns, "test-pod1") == [GATE]
    assert any(reason == "WorkloadNameConflict" for reason, _ in kc.events(ns, "test-pod1"))


def test_should_schedule_pod_groups_as_they_fit_in_their_cluster_queue(kc: Cluster):
    ns = setup(kc, cpu="3")
    for g in ("first", "second"):
        for i in (1, 2):
            kc.core.create_namespaced_pod(ns, pod(f"{g}-{i}", command="sleep 30", group=(g, 2)))
    assert gates(kc, ns, "first-1") == [] and gates(kc, ns, "second-1") == [GATE] == gates(kc, ns, "second-2")
    kc.settle(31)
    assert gates(kc, ns, "second-1") == [] == gates(kc, ns, "second-2")


# -- e2e: test/e2e/singlecluster/baseline/pod_test.go ----------------------------------------------------------


def test_should_only_admit_a_complete_group(kc: Cluster):
    ns = setup(kc)
    kc.core.create_namespaced_pod(ns, pod("group-1", group=("group", 3)))
    kc.core.create_namespaced_pod(ns, pod("group-2", group=("group", 3)))
    kc.settle(30)
    assert gates(kc, ns, "group-1") == [GATE]
    kc.core.create_namespaced_pod(ns, pod("group-3", group=("group", 3)))
    assert [gates(kc, ns, f"group-{i}") for i in (1, 2, 3)] == [[], [], []]


def test_should_allow_to_preempt_the_lower_priority_group(kc: Cluster):
    ns = setup(kc, cpu="2", preemption={"withinClusterQueue": "LowerPriority"})
    kc.priority_class("low", 1)
    kc.priority_class("high", 100)
    for i in (1, 2):
        kc.core.create_namespaced_pod(
            ns, pod(f"low-{i}", group=("low", 2), labels={"kueue.x-k8s.io/priority-class": "low"})
        )
    for i in (1, 2):
        kc.core.create_namespaced_pod(
            ns, pod(f"high-{i}", group=("high", 2), labels={"kueue.x-k8s.io/priority-class": "high"})
        )
    assert all(kc.core.read_namespaced_pod(f"low-{i}", ns).metadata.deletion_timestamp for i in (1, 2))
    assert gates(kc, ns, "high-1") == [] == gates(kc, ns, "high-2")
    assert status(kc.get("workloads", "low", ns), "Requeued")[:2] == ("True", "Preempted")


# -- webhook: pkg/controller/jobs/pod/pod_webhook_test.go, the WorkloadIdentifierAnnotations cases -------------


def test_should_reject_pod_with_group_name_annotation_but_missing_group_total_count_annotation(kc: Cluster):
    ns = setup(kc)
    body = pod("test-pod", annotations={GROUP: "test-group"})
    with pytest.raises(ApiException) as exc:
        kc.core.create_namespaced_pod(ns, body)
    assert exc.value.status == 403
    message = json.loads(exc.value.body)["message"]
    assert message == (
        'admission webhook "vpod.kb.io" denied the request: metadata.annotations[kueue.x-k8s.io/pod-group-total-count]'
        ": Required value: both the 'kueue.x-k8s.io/pod-group-total-count' annotation and the "
        "'kueue.x-k8s.io/pod-group-name' label should be set"
    )


def test_should_create_workload_and_ungate_pod_group_using_group_name_annotation(kc: Cluster):
    ns = setup(kc)
    for i in (1, 2):
        kc.core.create_namespaced_pod(ns, pod(f"p{i}", annotations={GROUP: "annotated", TOTAL: "2"}))
    assert "annotated" in workloads(kc, ns)
    assert gates(kc, ns, "p1") == [] == gates(kc, ns, "p2")


def test_managed_label_value_can_only_be_true(kc: Cluster):
    ns = setup(kc)
    with pytest.raises(ApiException) as exc:
        kc.core.create_namespaced_pod(ns, pod("test-pod", queue=None, labels={MANAGED: "false"}))
    assert exc.value.status == 403
    assert "managed label value can only be 'true'" in exc.value.body


def test_group_name_is_immutable(kc: Cluster):
    ns = setup(kc)
    kc.core.create_namespaced_pod(ns, pod("p", group=("g", 2)))
    with pytest.raises(ApiException) as exc:
        kc.core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {GROUP: "other"}}})
    assert exc.value.status == 403
    assert "field is immutable" in exc.value.body


def test_pods_outside_kueue_managed_namespaces_and_without_a_queue_are_left_alone(kc: Cluster):
    ns = setup(kc)
    assert not kc.core.create_namespaced_pod(ns, pod("plain", queue=None)).spec.scheduling_gates
    assert not kc.core.create_namespaced_pod("kube-system", pod("system")).spec.scheduling_gates
    kc.local_queue("default", "cq", ns)  # a `default` LocalQueue takes in pods without a queue name
    defaulted = kc.core.create_namespaced_pod(ns, pod("defaulted", queue=None))
    assert defaulted.metadata.labels["kueue.x-k8s.io/queue-name"] == "default"
    assert [g.name for g in defaulted.spec.scheduling_gates] == [GATE]
