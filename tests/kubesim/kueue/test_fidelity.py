"""Kueue behaviours kubesim emulates, end to end: official kubernetes client -> served kubesim
(manual clock) -> Kueue half. Each test names the upstream Kueue test whose scenario and expectations it follows
(kubernetes-sigs/kueue; the scenarios are re-told here, nothing is carried over)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubesim.apiserver.nodes.cluster import node_object
from kubesim.kernel.quantity import decimal_value
from tests.kubesim.kueue.conftest import GPU, POOL_LABEL, Cluster, _cluster


@pytest.fixture(scope="module")
def kc_block() -> Iterator[Cluster]:
    """waitForPodsReady with blockAdmission (timeout 5m)."""
    yield from _cluster(kueue_config={"waitForPodsReady": {"enable": True, "timeout": "5m", "blockAdmission": True}})


def _reason(kc: Cluster, ns: str, job: str, ctype: str = "QuotaReserved") -> tuple[str, str, str] | None:
    cond = kc.condition(ns, job, ctype)
    return None if cond is None else (cond["status"], cond["reason"], cond["message"])


def add_node(kc: Cluster, name: str, pool: str, **labels: str) -> None:
    """A node of the pool appears (as a cluster autoscaler would bring one up): pending pods bind to it."""
    spec = {"name": name, "labels": {POOL_LABEL: pool, **labels}, "allocatable": {GPU: 8, "cpu": 64, "pods": 110}}
    node = node_object(spec)
    kc.core.create_node({"metadata": node["metadata"], "spec": node["spec"]})
    kc.core.patch_node_status(name, {"status": node["status"]})


def test_running_workload_follows_lowered_priority_class(kc: Cluster):
    """Follows Kueue's job integration test "should allow to change the priority class of a running workload"
    (test/integration/singlecluster/controller/jobs/job/job_controller_test.go, WorkloadPriorityClass context)
    and the e2e preemption after a lowered priority: the Job's kueue.x-k8s.io/priority-class label is re-applied
    to its admitted Workload, so pending work of a priority now higher preempts it."""
    kc.priority_class("low", 10)
    kc.priority_class("mid", 50)
    kc.priority_class("high", 100)
    kc.flavor()
    kc.cluster_queue("cq", 2, preemption={"withinClusterQueue": "LowerPriority"})
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    kc.job(ns, "runner", "lq", 2, priority_class="high")
    kc.settle(1)
    kc.job(ns, "waiter", "lq", 2, priority_class="mid")
    kc.settle(1)
    assert kc.admitted(ns, "runner") and not kc.admitted(ns, "waiter")
    kc.batch.patch_namespaced_job("runner", ns, {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "low"}}})
    kc.settle()
    runner = kc.workload(ns, "runner")
    assert runner["spec"]["priority"] == 10
    assert runner["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "low",
    }
    name = runner["metadata"]["name"]
    assert ("UpdatedWorkload", f"Updated workload priority class: {ns}/{name}") in kc.events(ns, "runner")
    assert kc.condition(ns, "runner", "Preempted")["reason"] == "InClusterQueue"
    assert kc.admitted(ns, "waiter")
    assert not kc.admitted(ns, "runner")


def test_priority_class_value_change_reaches_existing_workloads(kc: Cluster):
    """Follows Kueue's WorkloadPriorityClass controller (pkg/controller/core, since v0.19) and the job integration
    test "Patch a WorkloadPriorityClass": a class's new value is carried to every Workload that references it."""
    kc.priority_class("team", 10)
    kc.flavor()
    kc.cluster_queue("cq", 2)
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    kc.job(ns, "j", "lq", 1, priority_class="team")
    kc.settle(1)
    kc.custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "team", {"value": 99})
    kc.settle(1)
    assert kc.workload(ns, "j")["spec"]["priority"] == 99


def test_block_admission_gates_every_admission(kc_block: Cluster):
    """Follows Kueue's "SchedulerWithWaitForPodsReady" integration tests with blockAdmission
    (test/integration/singlecluster/scheduler/podsready/scheduler_test.go: the second workload waits until the
    first is PodsReady, then the third until the second is): one admission at a time, the next fitting head is
    marked QuotaReserved=False with reason WaitingForPodsReady until the admitted workload's pods are ready."""
    kc = kc_block
    kc.ks.reset()
    kc.flavor("spot", "spot")  # no node of this pool yet: pods wait for one
    kc.cluster_queue("cq", 4, flavor="spot")
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    for name in ("a", "b", "c"):  # b's pod also needs a node in zone b (a label its flavor does not set)
        kc.job(ns, name, "lq", 1, node_selector={"zone": "b"} if name == "b" else None)
        kc.settle(1)  # FIFO needs distinct creation seconds (ties go by UID, as in Kueue)
    assert kc.running(ns, ["a", "b", "c"]) == {"a"}
    waiting = ("False", "WaitingForPodsReady", "waiting for all admitted workloads to be in PodsReady condition")
    assert _reason(kc, ns, "b") == waiting
    assert _reason(kc, ns, "c") is None  # Kueue's scheduler waits on b: c is not looked at yet
    add_node(kc, "spot-1", "spot")
    kc.settle(1)  # a's pod is ready on the new node: b is admitted (its pod finds no node), c now waits for b
    assert _reason(kc, ns, "a", "PodsReady")[:2] == ("True", "Started")
    assert kc.running(ns, ["a", "b", "c"]) == {"a", "b"}
    assert _reason(kc, ns, "c") == waiting
    add_node(kc, "spot-2", "spot", zone="b")
    kc.settle(1)
    assert kc.running(ns, ["a", "b", "c"]) == {"a", "b", "c"}


def test_blocked_admission_still_gives_heads_their_verdict(kc_block: Cluster):
    """Follows Kueue's podsready scheduler test of a workload that does not fit while admission is blocked
    (test/integration/singlecluster/scheduler/podsready/scheduler_test.go): while an admitted workload's pods are
    not ready, a head that cannot fit still gets its QuotaReserved=False verdict (WaitingForQuota and the
    flavor assigner's message), it is only admission that waits."""
    kc = kc_block
    kc.ks.reset()
    kc.flavor("nowhere", "no-such-pool")  # pods of this flavor never become ready: admission stays blocked
    kc.cluster_queue("cq", 2, flavor="nowhere")
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    kc.job(ns, "stuck", "lq", 1)
    kc.settle(1)
    kc.job(ns, "huge", "lq", 2)
    kc.settle(1)
    kc.job(ns, "small", "lq", 1)
    kc.settle(1)
    assert kc.running(ns, ["stuck", "huge", "small"]) == {"stuck"}
    status, reason, message = _reason(kc, ns, "huge")
    assert (status, reason) == ("False", "WaitingForQuota")
    assert message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor nowhere, "
        "1 more needed"
    )
    assert _reason(kc, ns, "small")[1] == "WaitingForPodsReady"


@pytest.fixture(scope="module")
def kc_checks() -> Iterator[Cluster]:
    """ProvisioningRequest checks that kubesim marks Ready 60 s after they start waiting."""
    yield from _cluster(kueue_config={"kubesim": {"provisioningRequestDelay": "60s"}})


def admission_check(kc: Cluster, name: str, controller: str) -> dict:
    return kc.create(
        "admissionchecks",
        {"kind": "AdmissionCheck", "metadata": {"name": name}, "spec": {"controllerName": controller}},
    )


def checked_queue(kc: Cluster, check: str, **strategy: object) -> str:
    kc.flavor()
    kc.cluster_queue("cq", 4, admissionChecksStrategy={"admissionChecks": [{"name": check, **strategy}]})
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    return ns


def set_check(kc: Cluster, ns: str, job: str, name: str, state: str, **extra: object) -> None:
    """What an admission check's own controller does: write the check's state on the Workload."""
    wl = kc.workload(ns, job)
    now = kc.ks.advance(0)  # the emulated time: the state changes now
    change = {"state": state, "message": f"set to {state} by the test", "lastTransitionTime": now, **extra}
    checks = [{**c, **change} if c["name"] == name else c for c in wl["status"]["admissionChecks"]]
    kc.custom.patch_namespaced_custom_object_status(
        "kueue.x-k8s.io", "v1beta2", ns, "workloads", wl["metadata"]["name"], {"status": {"admissionChecks": checks}}
    )


def test_provisioning_check_admits_once_capacity_is_up(kc_checks: Cluster):
    """Follows Kueue's provisioning admission check integration test "Should set the check Ready and admit the
    workload when the ProvisioningRequest is provisioned" (test/integration/singlecluster/controller/
    admissionchecks/provisioning/provisioning_test.go): quota is reserved first, the workload is Admitted only once
    its check is Ready, and the Job starts with the pod set updates that consume the ProvisioningRequest."""
    kc = kc_checks
    kc.ks.reset()
    config = {"provisioningClassName": "queued-provisioning.gke.io"}
    kc.create(
        "provisioningrequestconfigs",
        {"kind": "ProvisioningRequestConfig", "metadata": {"name": "capacity"}, "spec": config},
    )
    ref = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "capacity"}
    kc.create(
        "admissionchecks",
        {
            "kind": "AdmissionCheck",
            "metadata": {"name": "capacity"},
            "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request", "parameters": ref},
        },
    )
    ns = checked_queue(kc, "capacity")
    kc.settle()
    active = next(c for c in kc.get("admissionchecks", "capacity")["status"]["conditions"] if c["type"] == "Active")
    assert (active["status"], active["reason"]) == ("True", "Active")
    assert kc.get("clusterqueues", "cq")["status"]["conditions"][0]["reason"] == "Ready"
    kc.job(ns, "train", "lq", 2)
    kc.settle(1)
    wl = kc.workload(ns, "train")
    assert _reason(kc, ns, "train")[:2] == ("True", "QuotaReserved")
    assert _reason(kc, ns, "train", "Admitted") == (
        "False",
        "UnsatisfiedAdmissionChecks",
        "The workload has not all checks ready",
    )
    request = f"{wl['metadata']['name']}-capacity-1"
    [check] = wl["status"]["admissionChecks"]
    assert (check["name"], check["state"]) == ("capacity", "Pending")
    assert check["message"] == f"Waiting for ProvisioningRequest {request} to be provisioned"
    assert kc.batch.read_namespaced_job("train", ns).spec.suspend is True
    cq = kc.get("clusterqueues", "cq")["status"]
    assert (cq["reservingWorkloads"], cq["admittedWorkloads"]) == (1, 0)
    assert cq["flavorsReservation"][0]["resources"][0]["total"] == "2"
    assert cq["flavorsUsage"][0]["resources"][0]["total"] == "0"
    kc.settle(58)  # reserved when the Job was created: 59 s ago
    assert not kc.admitted(ns, "train")
    kc.settle(1)
    [check] = kc.workload(ns, "train")["status"]["admissionChecks"]
    assert check["state"] == "Ready"
    assert check["podSetUpdates"] == [
        {
            "name": "main",
            "annotations": {
                "autoscaling.x-k8s.io/consume-provisioning-request": request,
                "autoscaling.x-k8s.io/provisioning-class-name": "queued-provisioning.gke.io",
            },
        }
    ]
    assert kc.admitted(ns, "train")
    job = kc.batch.read_namespaced_job("train", ns)
    assert job.spec.suspend is False
    assert job.spec.template.metadata.annotations["autoscaling.x-k8s.io/consume-provisioning-request"] == request
    assert ("Admitted", "Admitted by ClusterQueue cq, wait time since reservation was 60s") in kc.events(
        ns, wl["metadata"]["name"]
    )


def test_cluster_queue_inactive_while_its_check_is_missing_or_inactive(kc: Cluster):
    """Follows Kueue's ClusterQueue controller integration test "Should update status when admission checks are
    missing or inactive" (test/integration/singlecluster/controller/core/clusterqueue_controller_test.go)."""
    ns = checked_queue(kc, "later")
    kc.job(ns, "j", "lq", 1)
    kc.settle()
    cond = kc.get("clusterqueues", "cq")["status"]["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "AdmissionCheckNotFound")
    assert cond["message"] == "Can't admit new workloads: references missing AdmissionCheck(s): later."
    assert _reason(kc, ns, "j") == ("False", "Suspended", "ClusterQueue cq is inactive")
    admission_check(kc, "later", "example.com/manual")  # no controller has marked it Active yet
    kc.settle()
    cond = kc.get("clusterqueues", "cq")["status"]["conditions"][0]
    assert (cond["reason"], cond["message"]) == (
        "AdmissionCheckInactive",
        "Can't admit new workloads: references inactive AdmissionCheck(s): later.",
    )
    active = {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "message": "ok",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    kc.custom.patch_cluster_custom_object_status(
        "kueue.x-k8s.io", "v1beta2", "admissionchecks", "later", {"status": {"conditions": [active]}}
    )
    kc.settle()
    assert kc.get("clusterqueues", "cq")["status"]["conditions"][0]["reason"] == "Ready"
    assert kc.workload(ns, "j")["status"]["admissionChecks"][0]["state"] == "Pending"


def test_check_retry_requeues_and_rejected_deactivates(kc: Cluster):
    """Follows Kueue's workload controller integration tests for admission checks "Should evict and requeue the
    workload when a check is Retry" and "Should deactivate the workload when a check is Rejected"
    (test/integration/singlecluster/controller/core/workload_controller_test.go, admission checks context)."""
    admission_check(kc, "manual", "example.com/manual")
    active = {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "message": "ok",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    kc.custom.patch_cluster_custom_object_status(
        "kueue.x-k8s.io", "v1beta2", "admissionchecks", "manual", {"status": {"conditions": [active]}}
    )
    ns = checked_queue(kc, "manual")
    kc.job(ns, "j", "lq", 1)
    kc.settle(1)
    set_check(kc, ns, "j", "manual", "Retry", requeueAfterSeconds=30)
    kc.settle()
    ev = kc.condition(ns, "j", "Evicted")
    message = 'Evicted due to AdmissionCheck in Retry state: "manual" (set to Retry by the test)'
    assert (ev["reason"], ev["message"]) == ("AdmissionCheck", message)
    wl = kc.workload(ns, "j")
    assert _reason(kc, ns, "j")[0] == "False"
    [check] = wl["status"]["admissionChecks"]
    assert (check["state"], check["retryCount"], check["message"]) == (
        "Pending",
        1,
        "Reset to Pending after eviction. Previously: Retry",
    )
    assert kc.condition(ns, "j", "Requeued")["status"] == "False"
    kc.settle(29)
    assert _reason(kc, ns, "j")[0] == "False"  # requeueAfterSeconds holds it back
    kc.settle(2)
    assert _reason(kc, ns, "j")[:2] == ("True", "QuotaReserved")
    set_check(kc, ns, "j", "manual", "Rejected")
    kc.settle()
    wl = kc.workload(ns, "j")
    assert wl["spec"]["active"] is False
    ev = kc.condition(ns, "j", "Evicted")
    assert (ev["reason"], ev["message"]) == (
        "DeactivatedDueToAdmissionCheck",
        'The workload is deactivated due to AdmissionCheck in Rejected state: "manual" (set to Rejected by the test)',
    )


@pytest.fixture(scope="module")
def kc_afs() -> Iterator[Cluster]:
    """Admission Fair Sharing: half-life 10 min, a usage sample every minute."""
    config = {"admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}}
    yield from _cluster(kueue_config=config)


def test_admission_fair_sharing_admits_the_less_used_local_queue_first(kc_afs: Cluster):
    """Follows Kueue's Admission Fair Sharing integration test "should admit workloads from the LocalQueue with
    the lower usage first" (test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go, the
    AdmissionFairSharing context): in a ClusterQueue with admissionScope UsageBasedAdmissionFairSharing, the
    LocalQueue whose decayed usage is lower goes first, before FIFO."""
    kc = kc_afs
    kc.ks.reset()
    kc.flavor()
    kc.cluster_queue("cq", 4, admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"})
    heavy, light = kc.namespace(), kc.namespace()
    kc.local_queue("lq", "cq", heavy)
    kc.local_queue("lq", "cq", light)
    kc.job(heavy, "long", "lq", 4, seconds=600)
    kc.settle(900)  # it ran 10 minutes, then its usage decays for 5
    afs = kc.get("localqueues", "lq", heavy)["status"]["fairSharing"]["admissionFairSharingStatus"]
    consumed = float(decimal_value(afs["consumedResources"]["nvidia.com/gpu"]))
    assert 0.5 < consumed < 2  # about 4 x (1 - 0.5) after 10 min, halved again within 5 min
    kc.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq", {"spec": {"stopPolicy": "Hold"}}
    )
    kc.settle()
    kc.job(heavy, "first", "lq", 4)
    kc.settle(1)
    kc.job(light, "second", "lq", 4)
    kc.settle(1)
    positions = [(p["metadata"]["namespace"], p["positionInClusterQueue"]) for p in kc.pending_cq("cq")]
    assert positions == [(light, 0), (heavy, 1)]
    kc.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq", {"spec": {"stopPolicy": "None"}}
    )
    kc.settle()
    assert kc.admitted(light, "second")
    assert not kc.admitted(heavy, "first")


def test_without_admission_scope_the_queue_stays_fifo(kc_afs: Cluster):
    """Follows the same upstream context's control case: Admission Fair Sharing orders only ClusterQueues whose
    admissionScope asks for it; elsewhere the earlier workload goes first whatever its LocalQueue used. The usage
    is sampled all the same (Kueue's LocalQueue controller samples every LocalQueue while admissionFairSharing is
    configured; upstream's "Self-triggered reconciles do not truncate CPU" case reads it on such a queue)."""
    kc = kc_afs
    kc.ks.reset()
    kc.flavor()
    kc.cluster_queue("cq", 4)
    heavy, light = kc.namespace(), kc.namespace()
    kc.local_queue("lq", "cq", heavy)
    kc.local_queue("lq", "cq", light)
    kc.job(heavy, "long", "lq", 4, seconds=600)
    kc.settle(900)
    afs = kc.get("localqueues", "lq", heavy)["status"]["fairSharing"]["admissionFairSharingStatus"]
    assert decimal_value(afs["consumedResources"]["nvidia.com/gpu"]) > 0
    kc.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq", {"spec": {"stopPolicy": "Hold"}}
    )
    kc.settle()
    kc.job(heavy, "first", "lq", 4)
    kc.settle(1)
    kc.job(light, "second", "lq", 4)
    kc.settle(1)
    kc.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq", {"spec": {"stopPolicy": "None"}}
    )
    kc.settle()
    assert kc.admitted(heavy, "first")
    assert not kc.admitted(light, "second")
