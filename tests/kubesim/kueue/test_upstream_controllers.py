"""Kueue's core controller integration scenarios against a served kubesim: objects created through the official
client, statuses and conditions read back.

Each test is named after the upstream case (kubernetes-sigs/kueue, test/integration/singlecluster/controller/
core/{clusterqueue,localqueue,resourceflavor,workload}_controller_test.go and controller/jobs/job/
job_controller_test.go); the scenarios are re-told here and nothing is carried over. Upstream runs these
controllers without the scheduler and sets quota reservations by hand (as its util.SetQuotaReservation does);
kubesim always runs its scheduler, so a reservation set by hand is made while the ClusterQueue cannot admit
(missing flavor), and a workload upstream leaves pending asks for more than any flavor holds.

Also here: the Fair Sharing weighted-share status (scheduler/fairsharing), the stop-policy cases of
scheduler/scheduler_test.go, and the WorkloadPriorityClass controller cases. Two tests are kubesim's own checks of
a Kueue behaviour no upstream case isolates (a stopped LocalQueue's pending count; check reset at eviction).

Left out: metrics assertions (kubesim's /metrics is tested in test_metrics.py); MultiKueue, TAS, elastic
workload slices, ProvisioningRequest specifics; the RoleTracker/leader and manager-restart cases,
concurrent-modification logging, custom metric labels; retention/deletion of finished or deactivated workloads
(objectRetentionPolicies, off by default); runtime-class and restart-manager races; the
UnadmittedWorkloadsExplicitStatus cases (off by default in v0.20); manageJobsWithoutQueueName, managed-namespace
selectors, labelKeysToCopy, parent/child jobs and prebuilt workloads (kubesim manages only Jobs labelled with a
queue); pod-level PriorityClass (kubesim ignores pod priorityClassName); the recoveryTimeout and ready-wait metric
cases of waitForPodsReady; Job status states kubesim's own job controller cannot be made to report (pods counted
as terminating, a failed pod before recovery)."""

from __future__ import annotations

import math

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.kueue.conftest import KUEUE, Cluster

GPU = "example.com/gpu"
T0 = "2026-01-01T00:00:00Z"


# -- helpers: upstream's test utilities as HTTP writes -----------------------------------------------------------


def flavor(kc: Cluster, name: str, **labels: str) -> None:
    kc.create("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": labels}})


def fq(name: str, resource: str, nominal: str, borrowing: str | None = None) -> dict:
    res = {"name": resource, "nominalQuota": nominal}
    if borrowing is not None:
        res["borrowingLimit"] = borrowing
    return {"name": name, "resources": [res]}


def cluster_queue(kc: Cluster, name: str, groups: list[tuple[str, list[dict]]], **spec: object) -> dict:
    rgs = [{"coveredResources": [res], "flavors": flavors} for res, flavors in groups]
    body = {"namespaceSelector": {}, "resourceGroups": rgs, **spec}
    return kc.create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": body})


def check(kc: Cluster, name: str, active: bool | None = None) -> None:
    kc.create(
        "admissionchecks",
        {"kind": "AdmissionCheck", "metadata": {"name": name}, "spec": {"controllerName": "ac-controller"}},
    )
    if active is not None:
        set_check_active(kc, name, active)


def set_check_active(kc: Cluster, name: str, active: bool) -> None:
    cond = {
        "type": "Active",
        "status": "True" if active else "False",
        "reason": "ByTest",
        "message": "by test",
        "lastTransitionTime": T0,
    }
    kc.custom.patch_cluster_custom_object_status(*KUEUE, "admissionchecks", name, {"status": {"conditions": [cond]}})


def checks(*names: str) -> dict:
    return {"admissionChecksStrategy": {"admissionChecks": [{"name": n} for n in names]}}


def workload(
    kc: Cluster,
    ns: str,
    name: str,
    queue: str | None,
    requests: dict | None = None,
    podsets: list[tuple[str, int, dict]] | None = None,
) -> dict:
    if podsets is None:
        podsets = [("main", 1, requests or {})]
    spec: dict = {
        "podSets": [
            {
                "name": ps,
                "count": count,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": req}}],
                    }
                },
            }
            for ps, count, req in podsets
        ]
    }
    if queue is not None:
        spec["queueName"] = queue
    return kc.create("workloads", {"kind": "Workload", "metadata": {"name": name}, "spec": spec}, ns)


def reserve(kc: Cluster, ns: str, name: str, cq: str, assignments: list[tuple[str, dict, dict, int]]) -> None:
    """util.SetQuotaReservation: status.admission and QuotaReserved=True written by hand."""
    admission = {
        "clusterQueue": cq,
        "podSetAssignments": [
            {"name": ps, "flavors": flavors, "resourceUsage": usage, "count": count}
            for ps, flavors, usage, count in assignments
        ],
    }
    cond = {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": f"Quota reserved in ClusterQueue {cq}",
        "lastTransitionTime": now(kc),
    }
    wl = kc.get("workloads", name, ns)
    conds = [c for c in wl.get("status", {}).get("conditions", []) if c["type"] != "QuotaReserved"] + [cond]
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", name, {"status": {"admission": admission, "conditions": conds}}
    )
    kc.settle()


def set_check_state(kc: Cluster, ns: str, name: str, check_name: str, state: str) -> None:
    """util.SetWorkloadsAdmissionCheck with expectExisting: the check must already be listed."""
    wl = kc.get("workloads", name, ns)
    states = wl["status"]["admissionChecks"]
    assert any(c["name"] == check_name for c in states), states
    states = [{**c, "state": state} if c["name"] == check_name else c for c in states]
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", name, {"status": {"admissionChecks": states}}
    )
    kc.settle()


def finish(kc: Cluster, ns: str, *names: str) -> None:
    """util.FinishWorkloads: Finished=True, reason ByTest."""
    for name in names:
        wl = kc.get("workloads", name, ns)
        cond = {
            "type": "Finished",
            "status": "True",
            "reason": "ByTest",
            "message": "Finished by test",
            "lastTransitionTime": now(kc),
        }
        conds = [*wl.get("status", {}).get("conditions", []), cond]
        kc.custom.patch_namespaced_custom_object_status(
            *KUEUE, ns, "workloads", name, {"status": {"conditions": conds}}
        )
    kc.settle()


def now(kc: Cluster) -> str:
    return kc.ks.sim.store.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def conds(obj: dict) -> list[tuple[str, str, str, str]]:
    """Conditions without timestamps or observedGeneration (IgnoreConditionTimestampsAndObservedGeneration)."""
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in obj.get("status", {}).get("conditions", [])]


def cond(obj: dict, ctype: str) -> tuple[str, str, str] | None:
    return next(((s, r, m) for t, s, r, m in conds(obj) if t == ctype), None)


def usage(*entries: tuple[str, str, str, str | None]) -> list[dict]:
    """flavorsReservation / flavorsUsage entries (flavor, resource, total[, borrowed]); borrowed None = LQ form."""
    out = []
    for fl, res, total, borrowed in entries:
        r = {"name": res, "total": total}
        if borrowed is not None:
            r["borrowed"] = borrowed
        out.append({"name": fl, "resources": [r]})
    return out


def cq_status(kc: Cluster, name: str) -> dict:
    st = dict(kc.get("clusterqueues", name)["status"])
    st.pop("fairSharing", None)
    st["conditions"] = conds({"status": st})
    return st


def lq_status(kc: Cluster, name: str, ns: str) -> dict:
    st = dict(kc.get("localqueues", name, ns)["status"])
    st["conditions"] = conds({"status": st})
    return st


def gone(kc: Cluster, plural: str, name: str, ns: str | None = None) -> bool:
    try:
        kc.get(plural, name, ns)
    except ApiException as e:
        return e.status == 404
    return False


def delete(kc: Cluster, plural: str, name: str, ns: str | None = None) -> None:
    if ns:
        kc.custom.delete_namespaced_custom_object(*KUEUE, ns, plural, name)
    else:
        kc.custom.delete_cluster_custom_object(*KUEUE, plural, name)
    kc.settle()


# -- ClusterQueue controller ------------------------------------------------------------------------------------

READY = ("Active", "True", "Ready", "Can admit new workloads")
CQ4 = "cluster-queue"


def _cq4(kc: Cluster) -> str:
    """The 'Reconciling clusterQueue usage status' setup: two CPU flavors and two GPU models, cohort, check ac."""
    check(kc, "ac", active=True)
    cluster_queue(
        kc,
        CQ4,
        [
            ("cpu", [fq("on-demand", "cpu", "5", "5"), fq("spot", "cpu", "5", "5")]),
            (GPU, [fq("model-a", GPU, "5", "5"), fq("model-b", GPU, "5", "5")]),
        ],
        cohortName="cohort",
        **checks("ac"),
    )
    ns = kc.namespace()
    kc.local_queue("queue", CQ4, ns)
    return ns


def _flavors4(kc: Cluster) -> None:
    flavor(kc, "on-demand")
    flavor(kc, "spot")
    flavor(kc, "model-a", **{GPU: "model-a"})
    flavor(kc, "model-b", **{GPU: "model-b"})
    kc.settle()


def _empty4(borrowed: bool = True) -> list[dict]:
    b = "0" if borrowed else None
    return usage(
        ("on-demand", "cpu", "0", b), ("spot", "cpu", "0", b), ("model-a", GPU, "0", b), ("model-b", GPU, "0", b)
    )


MISSING4 = (
    "Active",
    "False",
    "FlavorNotFound",
    "Can't admit new workloads: references missing ResourceFlavor(s): on-demand,spot,model-a,model-b.",
)


def test_should_update_status_and_report_metrics_when_workloads_are_assigned_and_finish(kc: Cluster):
    ns = _cq4(kc)
    for name, queue, cpu, gpu in [
        ("one", "queue", "2", "2"),
        ("two", "queue", "3", "3"),
        ("three", "queue", "1", "1"),
        ("four", "queue", "1", "1"),
        ("five", "other", "1", "1"),
        ("six", "queue", "20", "1"),
    ]:  # six fits nowhere: upstream's stays pending
        workload(kc, ns, name, queue, {"cpu": cpu, GPU: gpu})
    kc.settle()
    assert cq_status(kc, CQ4) == {
        "pendingWorkloads": 5,
        "reservingWorkloads": 0,
        "admittedWorkloads": 0,
        "flavorsReservation": _empty4(),
        "flavorsUsage": _empty4(),
        "conditions": [MISSING4],
    }
    # reservations by hand while the queue cannot admit (the scheduler would otherwise pick its own)
    for name, cpu_fl, cpu, gpu_fl, gpu, cq in [
        ("one", "on-demand", "2", "model-a", "2", CQ4),
        ("two", "on-demand", "3", "model-a", "3", CQ4),
        ("three", "on-demand", "1", "model-b", "1", CQ4),
        ("four", "spot", "1", "model-b", "1", CQ4),
        ("five", "spot", "1", "model-b", "1", "other"),
    ]:
        reserve(kc, ns, name, cq, [("main", {"cpu": cpu_fl, GPU: gpu_fl}, {"cpu": cpu, GPU: gpu}, 1)])
    _flavors4(kc)
    total = usage(
        ("on-demand", "cpu", "6", "1"),
        ("spot", "cpu", "1", "0"),
        ("model-a", GPU, "5", "0"),
        ("model-b", GPU, "2", "0"),
    )
    assert cq_status(kc, CQ4) == {
        "pendingWorkloads": 1,
        "reservingWorkloads": 4,
        "admittedWorkloads": 0,
        "flavorsReservation": total,
        "flavorsUsage": _empty4(),
        "conditions": [READY],
    }
    for name in ("one", "two", "three", "four"):
        set_check_state(kc, ns, name, "ac", "Ready")
    assert cq_status(kc, CQ4) == {
        "pendingWorkloads": 1,
        "reservingWorkloads": 4,
        "admittedWorkloads": 4,
        "flavorsReservation": total,
        "flavorsUsage": total,
        "conditions": [READY],
    }
    finish(kc, ns, "one", "two", "three", "four", "five", "six")
    assert cq_status(kc, CQ4) == {
        "pendingWorkloads": 0,
        "reservingWorkloads": 0,
        "admittedWorkloads": 0,
        "flavorsReservation": _empty4(),
        "flavorsUsage": _empty4(),
        "conditions": [READY],
    }


def test_should_update_status_and_report_metrics_when_a_pending_workload_is_deleted(kc: Cluster):
    ns = _cq4(kc)
    workload(kc, ns, "one", "queue", {"cpu": "5"})
    kc.settle()
    expected = {
        "pendingWorkloads": 1,
        "reservingWorkloads": 0,
        "admittedWorkloads": 0,
        "flavorsReservation": _empty4(),
        "flavorsUsage": _empty4(),
        "conditions": [MISSING4],
    }
    assert cq_status(kc, CQ4) == expected
    delete(kc, "workloads", "one", ns)
    assert cq_status(kc, CQ4) == {**expected, "pendingWorkloads": 0}


def test_should_update_status_when_workloads_have_reclaimable_pods(kc: Cluster):
    ns = _cq4(kc)
    workload(kc, ns, "one", "queue", podsets=[("driver", 2, {"cpu": "1"}), ("workers", 5, {GPU: "1"})])
    kc.settle()
    reserve(
        kc,
        ns,
        "one",
        CQ4,
        [("driver", {"cpu": "on-demand"}, {"cpu": "2"}, 2), ("workers", {GPU: "model-a"}, {GPU: "5"}, 5)],
    )
    _flavors4(kc)

    def reservation() -> list[dict]:
        return [
            {"name": f["name"], "resources": [{k: v for k, v in r.items() if k != "borrowed"} for r in f["resources"]]}
            for f in kc.get("clusterqueues", CQ4)["status"]["flavorsReservation"]
        ]

    assert reservation() == usage(
        ("on-demand", "cpu", "2", None),
        ("spot", "cpu", "0", None),
        ("model-a", GPU, "5", None),
        ("model-b", GPU, "0", None),
    )
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", "one", {"status": {"reclaimablePods": [{"name": "workers", "count": 2}]}}
    )
    kc.settle()
    assert reservation() == usage(
        ("on-demand", "cpu", "2", None),
        ("spot", "cpu", "0", None),
        ("model-a", GPU, "3", None),
        ("model-b", GPU, "0", None),
    )
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE,
        ns,
        "workloads",
        "one",
        {"status": {"reclaimablePods": [{"name": "workers", "count": 5}, {"name": "driver", "count": 1}]}},
    )
    kc.settle()
    assert reservation() == usage(
        ("on-demand", "cpu", "1", None),
        ("spot", "cpu", "0", None),
        ("model-a", GPU, "0", None),
        ("model-b", GPU, "0", None),
    )
    finish(kc, ns, "one")


def _arch_cq(kc: Cluster) -> str:
    cluster_queue(
        kc,
        "bar-cq",
        [("cpu", [fq("arch-a", "cpu", "5", "5"), fq("arch-b", "cpu", "5", "5")])],
        cohortName="bar-cohort",
        **checks("check1", "check2"),
    )
    ns = kc.namespace()
    kc.local_queue("bar-lq", "bar-cq", ns)
    workload(kc, ns, "bar-wl", "bar-lq")
    kc.settle()
    return ns


def test_should_update_status_conditions_when_flavors_are_created(kc: Cluster):
    check(kc, "check1", active=True)
    check(kc, "check2", active=True)
    _arch_cq(kc)
    msg = "Can't admit new workloads: references missing ResourceFlavor(s): {}."
    assert conds(kc.get("clusterqueues", "bar-cq")) == [
        ("Active", "False", "FlavorNotFound", msg.format("arch-a,arch-b"))
    ]
    flavor(kc, "arch-a")
    kc.settle()
    assert conds(kc.get("clusterqueues", "bar-cq")) == [("Active", "False", "FlavorNotFound", msg.format("arch-b"))]
    flavor(kc, "arch-b")
    kc.settle()
    assert conds(kc.get("clusterqueues", "bar-cq")) == [READY]


def test_should_update_status_conditions_when_admission_checks_are_created(kc: Cluster):
    flavor(kc, "arch-a")
    flavor(kc, "arch-b")
    _arch_cq(kc)
    assert conds(kc.get("clusterqueues", "bar-cq")) == [
        (
            "Active",
            "False",
            "AdmissionCheckNotFound",
            "Can't admit new workloads: references missing AdmissionCheck(s): check1,check2.",
        )
    ]
    check(kc, "check1", active=True)
    kc.settle()
    assert conds(kc.get("clusterqueues", "bar-cq")) == [
        (
            "Active",
            "False",
            "AdmissionCheckNotFound",
            "Can't admit new workloads: references missing AdmissionCheck(s): check2.",
        )
    ]
    check(kc, "check2")
    kc.settle()
    assert conds(kc.get("clusterqueues", "bar-cq")) == [
        (
            "Active",
            "False",
            "AdmissionCheckInactive",
            "Can't admit new workloads: references inactive AdmissionCheck(s): check2.",
        )
    ]
    set_check_active(kc, "check2", True)
    kc.settle()
    assert conds(kc.get("clusterqueues", "bar-cq")) == [READY]


def test_should_ignore_update_status_when_workloads_have_reclaimable_pods(kc: Cluster):
    """Upstream's CQ lists only model-a; kubesim's setup keeps the four flavors, so only model-a's line is read."""
    ns = _cq4(kc)
    workload(kc, ns, "one", "queue", podsets=[("workers", 5, {GPU: "1"})])
    kc.settle()
    reserve(kc, ns, "one", CQ4, [("workers", {GPU: "model-a"}, {GPU: "5"}, 5)])
    _flavors4(kc)
    model_a = next(f for f in kc.get("clusterqueues", CQ4)["status"]["flavorsReservation"] if f["name"] == "model-a")
    assert model_a["resources"][0]["total"] == "5"


def _deleting(kc: Cluster) -> str:
    """'Deleting clusterQueues' setup: check (inactive until a test activates it), flavor on-demand, foo-cq."""
    check(kc, "check")
    flavor(kc, "on-demand")
    ns = kc.namespace()
    kc.local_queue("queue", "foo-cq", ns)
    cluster_queue(kc, "foo-cq", [(GPU, [fq("on-demand", GPU, "5")])], **checks("check"))
    kc.settle()
    return ns


def test_should_delete_cluster_queues_successfully_when_no_admitted_workloads_are_running(kc: Cluster):
    _deleting(kc)
    assert kc.get("clusterqueues", "foo-cq")["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    delete(kc, "clusterqueues", "foo-cq")
    assert gone(kc, "clusterqueues", "foo-cq")


def test_should_be_stuck_in_termination_until_admitted_workloads_finished_running(kc: Cluster):
    ns = _deleting(kc)
    set_check_active(kc, "check", True)
    kc.settle()
    workload(kc, ns, "workload", "queue", {GPU: "1"})
    kc.settle()
    assert cond(kc.get("workloads", "workload", ns), "QuotaReserved")[0] == "True"  # kubesim's scheduler reserved it
    set_check_state(kc, ns, "workload", "check", "Ready")
    assert cond(kc.get("workloads", "workload", ns), "Admitted") == ("True", "Admitted", "The workload is admitted")
    delete(kc, "clusterqueues", "foo-cq")
    cq = kc.get("clusterqueues", "foo-cq")
    assert cq["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert cond(cq, "Active") == ("False", "Terminating", "Can't admit new workloads; clusterQueue is terminating")
    finish(kc, ns, "workload")
    assert gone(kc, "clusterqueues", "foo-cq")


def test_should_keep_the_status_counters_and_active_condition_accurate_while_terminating(kc: Cluster):
    ns = _deleting(kc)
    set_check_active(kc, "check", True)
    kc.settle()
    workload(kc, ns, "admitted", "queue", {GPU: "5"})
    kc.settle(1)
    set_check_state(kc, ns, "admitted", "check", "Ready")
    workload(kc, ns, "pending", "queue", {GPU: "5"})
    kc.settle()
    st = kc.get("clusterqueues", "foo-cq")["status"]
    assert (st["admittedWorkloads"], st["reservingWorkloads"], st["pendingWorkloads"]) == (1, 1, 1)
    assert cond({"status": st}, "Active")[:2] == ("True", "Ready")
    delete(kc, "clusterqueues", "foo-cq")
    assert kc.get("clusterqueues", "foo-cq")["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    delete(kc, "workloads", "pending", ns)
    st = kc.get("clusterqueues", "foo-cq")["status"]
    assert cond({"status": st}, "Active")[:2] == ("False", "Terminating")
    assert (st["pendingWorkloads"], st["reservingWorkloads"]) == (0, 1)
    finish(kc, ns, "admitted")
    assert gone(kc, "clusterqueues", "foo-cq")


def test_should_delete_the_cluster_without_waiting_for_reserving_only_workloads_to_finish(kc: Cluster):
    ns = _deleting(kc)
    set_check_active(kc, "check", True)
    kc.settle()
    workload(kc, ns, "workload", "queue", {GPU: "1"})
    kc.settle()
    wl = kc.get("workloads", "workload", ns)
    assert cond(wl, "QuotaReserved")[0] == "True" and cond(wl, "Admitted")[0] == "False"
    delete(kc, "clusterqueues", "foo-cq")
    assert gone(kc, "clusterqueues", "foo-cq")
    wl = kc.get("workloads", "workload", ns)
    assert wl["status"].get("admission") is None
    assert cond(wl, "QuotaReserved") == ("False", "Misconfigured", "ClusterQueue foo-cq doesn't exist")


def test_should_remove_finalizer_promptly_when_workload_finishes(kc: Cluster):
    ns = _deleting(kc)
    set_check_active(kc, "check", True)
    kc.settle()
    workload(kc, ns, "workload", "queue", {GPU: "1"})
    kc.settle()
    set_check_state(kc, ns, "workload", "check", "Ready")
    assert cond(kc.get("workloads", "workload", ns), "Admitted")[0] == "True"
    finish(kc, ns, "workload")
    delete(kc, "clusterqueues", "foo-cq")
    assert gone(kc, "clusterqueues", "foo-cq")


# -- LocalQueue controller --------------------------------------------------------------------------------------

LQ_READY = ("Active", "True", "Ready", "Can submit new workloads to localQueue")
LQ_NO_CQ = ("Active", "False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
LQ_INACTIVE = ("Active", "False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
CQ_LQ = "cluster-queue.queue-controller"


def _lq_setup(kc: Cluster) -> str:
    check(kc, "ac", active=True)
    ns = kc.namespace()
    kc.local_queue("queue", CQ_LQ, ns)
    kc.settle()
    return ns


def _lq_cq(kc: Cluster) -> None:
    cluster_queue(
        kc,
        CQ_LQ,
        [(GPU, [fq("model-d", GPU, "5", "5"), fq("model-c", GPU, "5", "5")])],
        cohortName="cohort",
        **checks("ac"),
    )
    kc.settle()


def _lq_flavors(kc: Cluster) -> None:
    kc.create(
        "resourceflavors",
        {
            "kind": "ResourceFlavor",
            "metadata": {"name": "model-c"},
            "spec": {
                "nodeLabels": {GPU: "model-c"},
                "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}],
            },
        },
    )
    flavor(kc, "model-d", **{GPU: "model-d"})
    kc.settle()


LQ_EMPTY = usage(("model-d", GPU, "0", None), ("model-c", GPU, "0", None))
LQ_FULL = usage(("model-d", GPU, "1", None), ("model-c", GPU, "5", None))


def _counts(pending: int, reserving: int, admitted: int) -> dict:
    return {"pendingWorkloads": pending, "reservingWorkloads": reserving, "admittedWorkloads": admitted}


def test_should_update_conditions_when_cluster_queues_that_its_local_queue_references_are_updated(kc: Cluster):
    ns = _lq_setup(kc)
    assert lq_status(kc, "queue", ns) == {**_counts(0, 0, 0), "conditions": [LQ_NO_CQ]}
    _lq_cq(kc)
    assert lq_status(kc, "queue", ns) == {
        **_counts(0, 0, 0),
        "conditions": [LQ_INACTIVE],
        "flavorsReservation": LQ_EMPTY,
        "flavorsUsage": LQ_EMPTY,
    }
    _lq_flavors(kc)
    assert lq_status(kc, "queue", ns) == {
        **_counts(0, 0, 0),
        "conditions": [LQ_READY],
        "flavorsReservation": LQ_EMPTY,
        "flavorsUsage": LQ_EMPTY,
    }
    delete(kc, "clusterqueues", CQ_LQ)
    assert lq_status(kc, "queue", ns) == {**_counts(0, 0, 0), "conditions": [LQ_NO_CQ]}


def _lq_workloads(kc: Cluster, ns: str) -> None:
    """Three workloads reserved by hand (model-c 2 + 3, model-d 1) while the ClusterQueue lacks its flavors."""
    for name, gpu in (("one", "2"), ("two", "3"), ("three", "1")):
        workload(kc, ns, name, "queue", {GPU: gpu})
    kc.settle()
    assert lq_status(kc, "queue", ns) == {
        **_counts(3, 0, 0),
        "conditions": [LQ_INACTIVE],
        "flavorsReservation": LQ_EMPTY,
        "flavorsUsage": LQ_EMPTY,
    }
    for name, fl, gpu in (("one", "model-c", "2"), ("two", "model-c", "3"), ("three", "model-d", "1")):
        reserve(kc, ns, name, CQ_LQ, [("main", {GPU: fl}, {GPU: gpu}, 1)])
    _lq_flavors(kc)
    assert lq_status(kc, "queue", ns) == {
        **_counts(0, 3, 0),
        "conditions": [LQ_READY],
        "flavorsReservation": LQ_FULL,
        "flavorsUsage": LQ_EMPTY,
    }
    for name in ("one", "two", "three"):
        set_check_state(kc, ns, name, "ac", "Ready")
    assert lq_status(kc, "queue", ns) == {
        **_counts(0, 3, 3),
        "conditions": [LQ_READY],
        "flavorsReservation": LQ_FULL,
        "flavorsUsage": LQ_FULL,
    }


def test_localqueue_should_update_status_when_workloads_are_created(kc: Cluster):
    """Upstream: "Should update status when workloads are created" (LocalQueue controller)."""
    ns = _lq_setup(kc)
    _lq_cq(kc)
    _lq_workloads(kc, ns)
    finish(kc, ns, "one", "two", "three")
    assert lq_status(kc, "queue", ns) == {
        **_counts(0, 0, 0),
        "conditions": [LQ_READY],
        "flavorsReservation": LQ_EMPTY,
        "flavorsUsage": LQ_EMPTY,
    }


def test_should_update_status_when_cluster_queue_are_forcefully_deleted(kc: Cluster):
    ns = _lq_setup(kc)
    _lq_cq(kc)
    _lq_workloads(kc, ns)
    kc.custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", CQ_LQ)
    kc.settle()
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", CQ_LQ, {"metadata": {"finalizers": None}})
    kc.settle()
    assert gone(kc, "clusterqueues", CQ_LQ)
    assert lq_status(kc, "queue", ns) == {**_counts(0, 0, 0), "conditions": [LQ_NO_CQ]}


def test_localqueue_stopped_reports_no_pending_workloads(kc: Cluster):
    """LocalQueue reconciler: a stopped LocalQueue is Active=False Stopped and asks its queue nothing (pending 0)."""
    ns = _lq_setup(kc)
    _lq_cq(kc)
    workload(kc, ns, "one", "queue", {GPU: "2"})
    kc.settle()
    assert lq_status(kc, "queue", ns)["pendingWorkloads"] == 1
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "localqueues", "queue", {"spec": {"stopPolicy": "Hold"}})
    kc.settle()
    st = lq_status(kc, "queue", ns)
    assert st["conditions"] == [("Active", "False", "Stopped", "LocalQueue is stopped")]
    assert st["pendingWorkloads"] == 0


# -- ResourceFlavor controller ----------------------------------------------------------------------------------


def _rf_setup(kc: Cluster) -> None:
    flavor(kc, "flavor")
    cluster_queue(kc, "foo", [("cpu", [fq("flavor", "cpu", "5")])])
    kc.settle()
    assert conds(kc.get("clusterqueues", "foo")) == [READY]


def test_should_delete_the_resource_flavor_when_the_corresponding_cluster_queue_no_longer_uses_the_resource_flavor(
    kc: Cluster,
):
    _rf_setup(kc)
    delete(kc, "resourceflavors", "flavor")
    rf = kc.get("resourceflavors", "flavor")
    assert rf["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert rf["metadata"].get("deletionTimestamp")
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "foo", {"spec": {"cohortName": "foo-cohort"}})
    kc.settle()
    assert not gone(kc, "resourceflavors", "flavor")
    cq = kc.get("clusterqueues", "foo")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "alternate-flavor"
    kc.custom.replace_cluster_custom_object(*KUEUE, "clusterqueues", "foo", cq)
    kc.settle()
    assert gone(kc, "resourceflavors", "flavor")


def test_should_delete_the_resource_flavor_when_the_corresponding_cluster_queue_is_deleted(kc: Cluster):
    _rf_setup(kc)
    delete(kc, "resourceflavors", "flavor")
    assert kc.get("resourceflavors", "flavor")["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    delete(kc, "clusterqueues", "foo")
    assert gone(kc, "resourceflavors", "flavor")


# -- Workload controller ----------------------------------------------------------------------------------------

NO_RESERVATION = ("False", "NoReservation", "The workload has no reservation")


@pytest.mark.parametrize(
    ("queue", "make_lq", "message"),
    [
        (None, False, "LocalQueue  doesn't exist"),  # the queue is not defined in the workload
        ("non-created-queue", False, "LocalQueue non-created-queue doesn't exist"),  # the queue doesn't exist
        ("queue", True, "ClusterQueue fooclusterqueue doesn't exist"),  # the clusterqueue doesn't exist
    ],
)
def test_workload_should_update_status_when_workloads_are_created(kc: Cluster, queue, make_lq, message):
    """Upstream: the three "Should update status when workloads are created" cases of the Workload controller."""
    ns = kc.namespace()
    if make_lq:
        kc.local_queue("queue", "fooclusterqueue", ns)
    workload(kc, ns, "wl", queue, {"cpu": "1"})
    kc.settle()
    wl = kc.get("workloads", "wl", ns)
    assert cond(wl, "QuotaReserved") == ("False", "Misconfigured", message)
    assert cond(wl, "Admitted") == NO_RESERVATION


def test_should_clear_workload_requeue_state_after_deactivation(kc: Cluster):
    flavor(kc, "on-demand")
    cluster_queue(
        kc, "cluster-queue", [("cpu", [fq("on-demand", "cpu", "5", "5")])], cohortName="cohort", stopPolicy="Hold"
    )  # held: upstream runs no scheduler, the workload stays pending
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    workload(kc, ns, "reset-requeue", "queue", {"cpu": "1"})
    kc.settle()
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE,
        ns,
        "workloads",
        "reset-requeue",
        {"status": {"requeueState": {"count": 2, "requeueAt": "2099-01-01T00:00:00Z"}}},
    )
    kc.settle()
    assert kc.get("workloads", "reset-requeue", ns)["status"]["requeueState"]["count"] == 2
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", "reset-requeue", {"spec": {"active": False}})
    kc.settle()
    assert "requeueState" not in kc.get("workloads", "reset-requeue", ns)["status"]


def _checks_queue(kc: Cluster) -> str:
    """'the queue has admission checks': GPU on on-demand, memory on spot; check3 only on spot."""
    flavor(kc, "on-demand")
    flavor(kc, "spot")
    for name in ("check1", "check2", "check3"):
        check(kc, name, active=True)
    cluster_queue(
        kc,
        "cluster-queue",
        [(GPU, [fq("on-demand", GPU, "5", "5")]), ("memory", [fq("spot", "memory", "5", "5")])],
        cohortName="cohort",
        stopPolicy="Hold",  # held: upstream runs no scheduler
        admissionChecksStrategy={
            "admissionChecks": [{"name": "check1"}, {"name": "check2"}, {"name": "check3", "onFlavors": ["spot"]}]
        },
    )
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    workload(kc, ns, "wl", "queue")
    kc.settle()
    return ns


def _check_names(kc: Cluster, ns: str) -> list[str]:
    return [c["name"] for c in kc.get("workloads", "wl", ns)["status"].get("admissionChecks", [])]


def _set_checks(kc: Cluster, ns: str, **states: tuple[str, str]) -> None:
    """workload.SetAdmissionCheckState for each named check: state and message (lastTransitionTime on a change)."""
    wl = kc.get("workloads", "wl", ns)
    out = []
    for c in wl["status"]["admissionChecks"]:
        if c["name"] in states:
            state, message = states[c["name"]]
            c = {**c, "message": message}
            if c["state"] != state:
                c.update(state=state, lastTransitionTime=now(kc))
        out.append(c)
    kc.custom.patch_namespaced_custom_object_status(*KUEUE, ns, "workloads", "wl", {"status": {"admissionChecks": out}})
    kc.settle()


def test_the_workload_should_have_checks_updated_when_changed_on_the_cluster_queue(kc: Cluster):
    ns = _checks_queue(kc)
    assert _check_names(kc, ns) == ["check1", "check2"]
    assert {c["state"] for c in kc.get("workloads", "wl", ns)["status"]["admissionChecks"]} == {"Pending"}
    _set_checks(kc, ns, check1=("Ready", "check successfully passed"), check2=("Retry", "check rejected"))
    old = next(c for c in kc.get("workloads", "wl", ns)["status"]["admissionChecks"] if c["name"] == "check2")
    kc.custom.patch_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        "cluster-queue",
        {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "check2"}, {"name": "check3"}]}}},
    )
    kc.settle()
    assert _check_names(kc, ns) == ["check2", "check3"]
    assert next(c for c in kc.get("workloads", "wl", ns)["status"]["admissionChecks"] if c["name"] == "check2") == old


def _rejected(kc: Cluster, ns: str) -> None:
    wl = kc.get("workloads", "wl", ns)
    assert wl["spec"]["active"] is False
    assert cond(wl, "Evicted") == (
        "True",
        "DeactivatedDueToAdmissionCheck",
        'The workload is deactivated due to AdmissionCheck in Rejected state: "check1" (check rejected)',
    )
    assert (
        "AdmissionCheckRejected",
        'Deactivated due to AdmissionCheck in Rejected state: "check1" (check rejected)',
    ) in kc.events(ns, "wl")


def test_should_finish_an_unadmitted_workload_with_failure_when_a_check_is_rejected(kc: Cluster):
    ns = _checks_queue(kc)
    assert _check_names(kc, ns) == ["check1", "check2"]
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cluster-queue", {"spec": {"stopPolicy": "None"}})
    kc.settle()  # kubesim's scheduler reserves quota (upstream sets it by hand)
    assert cond(kc.get("workloads", "wl", ns), "QuotaReserved")[0] == "True"
    _set_checks(kc, ns, check1=("Rejected", "check rejected"))
    _rejected(kc, ns)


def test_should_evict_then_finish_with_failure_an_admitted_workload_when_a_check_is_rejected(kc: Cluster):
    ns = _checks_queue(kc)
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cluster-queue", {"spec": {"stopPolicy": "None"}})
    kc.settle()
    _set_checks(kc, ns, check1=("Ready", "check ready"), check2=("Ready", "check ready"))
    assert cond(kc.get("workloads", "wl", ns), "Admitted") == ("True", "Admitted", "The workload is admitted")
    _set_checks(kc, ns, check1=("Rejected", "check rejected"))
    _rejected(kc, ns)


def test_should_deactivate_the_workload_when_the_time_expires(kc: Cluster):
    ns = kc.namespace()
    kc.create(
        "workloads",
        {
            "kind": "Workload",
            "metadata": {"name": "wl"},
            "spec": {
                "queueName": "lq",
                "maximumExecutionTimeSeconds": 2,
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                        },
                    }
                ],
            },
        },
        ns,
    )
    kc.settle()
    reserve(
        kc, ns, "wl", "cq", [("main", {}, {}, 1)]
    )  # an empty admission in a ClusterQueue that does not exist, as upstream
    wl = kc.get("workloads", "wl", ns)
    assert cond(wl, "Admitted") == ("True", "Admitted", "The workload is admitted")
    assert wl["spec"].get("active", True) is True
    kc.settle(2)
    wl = kc.get("workloads", "wl", ns)
    assert wl["spec"]["active"] is False
    assert cond(wl, "Evicted") == (
        "True",
        "DeactivatedDueToMaximumExecutionTimeExceeded",
        "The workload is deactivated due to exceeding the maximum execution time",
    )


def _granular(kc: Cluster) -> str:
    """'with UnadmittedWorkloadsObservability feature gate enabled' (on by default since v0.19)."""
    flavor(kc, "on-demand")
    cluster_queue(kc, "cq", [("cpu", [fq("on-demand", "cpu", "1")])])
    ns = kc.namespace()
    kc.local_queue("q", "cq", ns)
    kc.settle()
    return ns


def _granular_conds(kc: Cluster, ns: str, name: str) -> set[tuple[str, str, str, str]]:
    return set(conds(kc.get("workloads", name, ns)))


ADMITTED_NO = ("Admitted", "False", "NoReservation", "The workload has no reservation")


def test_should_write_granular_conditions_and_reasons_when_queue_is_missing(kc: Cluster):
    ns = _granular(kc)
    workload(kc, ns, "wl-missing-queue", "non-existent-queue")
    kc.settle()
    assert _granular_conds(kc, ns, "wl-missing-queue") == {
        ("QuotaReserved", "False", "Misconfigured", "LocalQueue non-existent-queue doesn't exist"),
        ADMITTED_NO,
    }


def test_should_write_granular_conditions_and_reasons_when_cluster_queue_is_missing(kc: Cluster):
    ns = _granular(kc)
    kc.local_queue("missing-cq-q", "non-existent-cq", ns)
    kc.settle()
    workload(kc, ns, "wl-missing-cq", "missing-cq-q")
    kc.settle()
    assert _granular_conds(kc, ns, "wl-missing-cq") == {
        ("QuotaReserved", "False", "Misconfigured", "ClusterQueue non-existent-cq doesn't exist"),
        ADMITTED_NO,
    }


def test_should_write_granular_conditions_and_reasons_when_local_queue_is_inactive(kc: Cluster):
    ns = _granular(kc)
    kc.create(
        "localqueues",
        {
            "kind": "LocalQueue",
            "metadata": {"name": "inactive-q"},
            "spec": {"clusterQueue": "cq", "stopPolicy": "Hold"},
        },
        ns,
    )
    kc.settle()
    workload(kc, ns, "wl-inactive-q", "inactive-q")
    kc.settle()
    assert _granular_conds(kc, ns, "wl-inactive-q") == {
        ("QuotaReserved", "False", "Suspended", "LocalQueue inactive-q is inactive"),
        ADMITTED_NO,
    }


def test_should_write_granular_conditions_and_reasons_when_cluster_queue_is_inactive(kc: Cluster):
    ns = _granular(kc)
    cluster_queue(kc, "inactive-cq", [("cpu", [fq("on-demand", "cpu", "1")])], stopPolicy="Hold")
    kc.local_queue("inactive-cq-q", "inactive-cq", ns)
    kc.settle()
    workload(kc, ns, "wl-inactive-cq", "inactive-cq-q")
    kc.settle()
    assert _granular_conds(kc, ns, "wl-inactive-cq") == {
        ("QuotaReserved", "False", "Suspended", "ClusterQueue inactive-cq is inactive"),
        ADMITTED_NO,
    }


def test_should_write_granular_conditions_and_reasons_when_workload_is_deactivated(kc: Cluster):
    ns = _granular(kc)
    kc.create(
        "workloads",
        {
            "kind": "Workload",
            "metadata": {"name": "wl-deactivated"},
            "spec": {
                "queueName": "q",
                "active": False,
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                        },
                    }
                ],
            },
        },
        ns,
    )
    kc.settle()
    assert _granular_conds(kc, ns, "wl-deactivated") == {
        ("QuotaReserved", "False", "Deactivated", "The workload is deactivated"),
        ("Evicted", "True", "Deactivated", "The workload is deactivated"),
        ADMITTED_NO,
    }


# -- Workload controller interaction with scheduler -------------------------------------------------------------


def _quota_taken(kc: Cluster) -> str:
    ns = _granular(kc)
    workload(kc, ns, "wl-consuming-quota", "q", {"cpu": "1"})
    kc.settle(1)
    assert cond(kc.get("workloads", "wl-consuming-quota", ns), "Admitted")[0] == "True"
    return ns


WAITING = (
    "QuotaReserved",
    "False",
    "WaitingForQuota",
    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed",
)


def test_should_write_granular_reasons_when_waiting_for_quota(kc: Cluster):
    ns = _quota_taken(kc)
    workload(kc, ns, "wl-waiting-for-quota", "q", {"cpu": "1"})
    kc.settle()
    assert _granular_conds(kc, ns, "wl-waiting-for-quota") == {WAITING, ADMITTED_NO}


def test_should_dynamically_transition_between_reasons_based_on_precedence(kc: Cluster):
    ns = _quota_taken(kc)
    workload(kc, ns, "wl-transitioning", "q", {"cpu": "1"})
    kc.settle()
    assert cond(kc.get("workloads", "wl-transitioning", ns), "QuotaReserved")[:2] == ("False", "WaitingForQuota")
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "localqueues", "q", {"spec": {"stopPolicy": "Hold"}})
    kc.settle()
    assert cond(kc.get("workloads", "wl-transitioning", ns), "QuotaReserved") == (
        "False",
        "Suspended",
        "LocalQueue q is inactive",
    )
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", "wl-transitioning", {"spec": {"active": False}})
    kc.settle()
    assert cond(kc.get("workloads", "wl-transitioning", ns), "QuotaReserved") == (
        "False",
        "Deactivated",
        "The workload is deactivated",
    )
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "localqueues", "q", {"spec": {"stopPolicy": "None"}})
    kc.settle()
    assert cond(kc.get("localqueues", "q", ns), "Active")[:2] == ("True", "Ready")
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", "wl-transitioning", {"spec": {"active": True}})
    kc.settle()
    assert cond(kc.get("workloads", "wl-transitioning", ns), "QuotaReserved")[:2] == ("False", "WaitingForQuota")


def test_should_transition_status_from_misconfigured_to_exceeds_max_quota_when_the_queue_is_created(kc: Cluster):
    flavor(kc, "default-flavor")
    cluster_queue(kc, "cluster-queue", [("cpu", [fq("default-flavor", "cpu", "0")])])
    ns = kc.namespace()
    workload(kc, ns, "transition-test", "delayed-queue", {"cpu": "1"})
    kc.settle()
    assert _granular_conds(kc, ns, "transition-test") == {
        ("QuotaReserved", "False", "Misconfigured", "LocalQueue delayed-queue doesn't exist"),
        ADMITTED_NO,
    }
    kc.local_queue("delayed-queue", "cluster-queue", ns)
    kc.settle()
    wl = kc.get("workloads", "transition-test", ns)
    assert cond(wl, "QuotaReserved")[:2] == ("False", "ExceedsMaxQuota")
    assert cond(wl, "Admitted") == ADMITTED_NO[1:]


def test_should_set_misconfigured_on_namespace_mismatch_and_clear_it_when_mismatch_resolved(kc: Cluster):
    """Upstream's last step reads PendingEvaluation (no scheduler runs there); kubesim's scheduler then admits."""
    flavor(kc, "on-demand")
    cluster_queue(
        kc,
        "cq-ns-selector",
        [("cpu", [fq("on-demand", "cpu", "1")])],
        namespaceSelector={"matchLabels": {"foo": "bar"}},
    )
    ns = kc.namespace()
    kc.local_queue("q-ns-selector", "cq-ns-selector", ns)
    workload(kc, ns, "wl-ns-mismatch", "q-ns-selector", {"cpu": "1"})
    kc.settle()
    assert cond(kc.get("workloads", "wl-ns-mismatch", ns), "QuotaReserved") == (
        "False",
        "Misconfigured",
        "workload namespace doesn't match ClusterQueue selector",
    )
    kc.core.patch_namespace(ns, {"metadata": {"labels": {"foo": "bar"}}})
    kc.custom.patch_namespaced_custom_object(
        *KUEUE, ns, "workloads", "wl-ns-mismatch", {"metadata": {"annotations": {"trigger-reconcile": "true"}}}
    )
    kc.settle()
    assert cond(kc.get("workloads", "wl-ns-mismatch", ns), "QuotaReserved") == (
        "True",
        "QuotaReserved",
        "Quota reserved in ClusterQueue cq-ns-selector",
    )


# -- batch/v1 Job integration (controller/jobs/job/job_controller_test.go) --------------------------------------

POOL = "portal.gpu/pool"  # upstream's instance label; kubesim's nodes carry pools, so pods can run


def _job(
    kc: Cluster,
    ns: str,
    name: str,
    queue: str,
    cpu: str = "1",
    parallelism: int = 1,
    seconds: int = 60,
    annotations: dict | None = None,
    suspend: bool | None = None,
):
    spec: dict = {
        "parallelism": parallelism,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "command": ["sleep", str(seconds)],
                        "resources": {"requests": {"cpu": cpu}},
                    }
                ],
            }
        },
    }
    if suspend is not None:
        spec["suspend"] = suspend
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}, "annotations": annotations or {}},
        "spec": spec,
    }
    return kc.batch.create_namespaced_job(ns, body)


def _job_queue(kc: Cluster, on_demand: str = "5") -> None:
    flavor(kc, "on-demand", **{POOL: "h100"})
    flavor(kc, "spot", **{POOL: "l40s-shared"})
    cluster_queue(kc, "cluster-queue", [("cpu", [fq("on-demand", "cpu", on_demand), fq("spot", "cpu", "5")])])


def _wl_of(kc: Cluster, ns: str, job: str) -> dict:
    return kc.workload(ns, job)


def test_should_reconcile_workload_and_job_for_all_jobs(kc: Cluster):
    """Upstream manages jobs without a queue name and sets reservations by hand; here the Job names a queue that
    does not exist yet and kubesim's scheduler reserves (on-demand holds 4 CPUs, so 5 pods go to spot)."""
    from kubesim.kueue.integrations.podsets import workload_name

    ns = kc.namespace()
    job = _job(
        kc,
        ns,
        "test-job",
        "old-queue",
        annotations={"provreq.kueue.x-k8s.io/ValidUntilSeconds": "0", "invalid-provreq-prefix/Foo": "Bar"},
        suspend=False,
    )
    kc.settle()
    assert kc.batch.read_namespaced_job("test-job", ns).spec.suspend is True
    wl = kc.get("workloads", workload_name("test-job", job.metadata.uid, "Job", "batch"), ns)
    [owner] = wl["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Job",
        "test-job",
        job.metadata.uid,
        True,
    )
    assert wl["metadata"]["annotations"] == {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "0"}
    assert wl["spec"]["queueName"] == "old-queue"
    created = wl["metadata"]["creationTimestamp"]
    kc.batch.patch_namespaced_job("test-job", ns, {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "test-queue"}}})
    kc.settle()
    wl = _wl_of(kc, ns, "test-job")
    assert wl["spec"]["queueName"] == "test-queue"
    assert wl["metadata"]["creationTimestamp"] == created

    _job_queue(kc, on_demand="4")
    kc.local_queue("test-queue", "cluster-queue", ns)
    kc.settle()
    job = kc.batch.read_namespaced_job("test-job", ns)
    assert job.spec.suspend is False
    assert job.spec.template.spec.node_selector == {POOL: "h100"}
    assert ("Started", "Admitted by clusterQueue cluster-queue") in kc.events(ns, "test-job")
    wl = _wl_of(kc, ns, "test-job")
    assert [c["type"] for c in wl["status"]["conditions"]] == ["QuotaReserved", "Admitted"]

    kc.batch.patch_namespaced_job("test-job", ns, {"spec": {"parallelism": 5}})
    kc.settle()
    events = kc.events(ns, "test-job")
    assert ("DeletedWorkload", f"Deleted not matching Workload: {ns}/{wl['metadata']['name']}") in events
    assert ("Stopped", "No matching Workload; restoring pod templates according to existent Workload") in events
    new = _wl_of(kc, ns, "test-job")
    assert new["metadata"]["name"] == wl["metadata"]["name"] and new["metadata"]["uid"] != wl["metadata"]["uid"]
    assert new["spec"]["podSets"][0]["count"] == 5
    job = kc.batch.read_namespaced_job("test-job", ns)  # readmitted at once, on spot this time
    assert job.spec.suspend is False
    assert job.spec.template.spec.node_selector == {POOL: "l40s-shared"}
    assert new["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "spot"}
    assert [c["type"] for c in new["status"]["conditions"]] == ["QuotaReserved", "Admitted"]

    kc.settle(70)  # the pods run their 60 s
    assert cond(_wl_of(kc, ns, "test-job"), "Finished")[0] == "True"


def test_should_unsuspend_job_iff_local_queue_is_in_the_same_namespace(kc: Cluster):
    _job_queue(kc)
    ns, ns2 = kc.namespace(), kc.namespace()
    kc.local_queue("local-queue", "cluster-queue", ns2)
    _job(kc, ns, "prod-job", "local-queue", cpu="2")
    kc.settle()
    assert kc.batch.read_namespaced_job("prod-job", ns).spec.suspend is True
    kc.local_queue("local-queue", "cluster-queue", ns)
    kc.settle()
    job = kc.batch.read_namespaced_job("prod-job", ns)
    assert job.spec.suspend is False
    assert job.spec.template.spec.node_selector == {POOL: "h100"}


def _admitted_job(kc: Cluster) -> tuple[str, dict]:
    _job_queue(kc)
    ns = kc.namespace()
    _job(kc, ns, "test-job", "local-queue", cpu="2", suspend=False)
    kc.settle()
    assert kc.batch.read_namespaced_job("test-job", ns).spec.suspend is True
    original = kc.batch.read_namespaced_job("test-job", ns).spec.template.spec.node_selector
    kc.local_queue("local-queue", "cluster-queue", ns)
    kc.settle()
    job = kc.batch.read_namespaced_job("test-job", ns)
    assert job.spec.suspend is False
    assert job.spec.template.spec.node_selector != original
    delete(kc, "localqueues", "local-queue", ns)  # prevents readmission
    return ns, original


def test_the_workloads_admission_is_removed_should_restore_the_original_node_selectors(kc: Cluster):
    ns, original = _admitted_job(kc)
    wl = _wl_of(kc, ns, "test-job")
    reason = ("QuotaReserved", "False", "EvictedByTest", "Evicted By Test")
    conds_ = [c for c in wl["status"]["conditions"] if c["type"] not in ("QuotaReserved", "Admitted")]
    conds_.append(
        dict(zip(("type", "status", "reason", "message"), reason, strict=True)) | {"lastTransitionTime": now(kc)}
    )
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"status": {"admission": None, "conditions": conds_}}
    )
    kc.settle()
    job = kc.batch.read_namespaced_job("test-job", ns)
    assert job.spec.suspend is True
    assert job.spec.template.spec.node_selector == original


def test_the_workload_is_deleted_while_admitted_should_restore_the_original_node_selectors(kc: Cluster):
    ns, original = _admitted_job(kc)
    delete(kc, "workloads", _wl_of(kc, ns, "test-job")["metadata"]["name"], ns)
    job = kc.batch.read_namespaced_job("test-job", ns)
    assert job.spec.suspend is True
    assert job.spec.template.spec.node_selector == original


def test_the_job_is_deleted_while_admitted_its_workload_finalizer_should_be_removed(kc: Cluster):
    _job_queue(kc)
    ns = kc.namespace()
    _job(kc, ns, "test-job", "local-queue", cpu="2", suspend=False)
    kc.local_queue("local-queue", "cluster-queue", ns)
    kc.settle()
    wl = _wl_of(kc, ns, "test-job")
    assert "kueue.x-k8s.io/resource-in-use" in wl["metadata"]["finalizers"]
    kc.batch.delete_namespaced_job("test-job", ns)  # batch/v1's legacy default: the Workload is orphaned
    kc.settle()
    wl = kc.get("workloads", wl["metadata"]["name"], ns)
    assert "kueue.x-k8s.io/resource-in-use" not in (wl["metadata"].get("finalizers") or [])


def test_should_not_readmit_a_job_to_the_queue_after_active_is_changed_to_false(kc: Cluster):
    flavor(kc, "on-demand", **{POOL: "h100"})
    cluster_queue(kc, "prod-cq", [("cpu", [fq("on-demand", "cpu", "5")])], cohortName="prod")
    ns = kc.namespace()
    kc.local_queue("prod-queue", "prod-cq", ns)
    _job(kc, ns, "job1", "prod-queue", cpu="2", seconds=3600)
    kc.settle(1)
    assert kc.batch.read_namespaced_job("job1", ns).spec.suspend is False
    name = _wl_of(kc, ns, "job1")["metadata"]["name"]
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", name, {"spec": {"active": False}})
    kc.settle()
    deactivated = {
        ("QuotaReserved", "False", "Deactivated", "The workload is deactivated"),
        ("Admitted", "False", "NoReservation", "The workload has no reservation"),
        ("Evicted", "True", "Deactivated", "The workload is deactivated"),
        ("Requeued", "False", "Deactivated", "The workload is deactivated"),
    }
    assert deactivated <= set(conds(kc.get("workloads", name, ns)))
    _job(kc, ns, "job2", "prod-queue", cpu="2", seconds=3600)
    kc.settle(1)
    assert kc.batch.read_namespaced_job("job2", ns).spec.suspend is False
    assert cond(_wl_of(kc, ns, "job2"), "Admitted")[0] == "True"
    kc.settle(5)
    assert kc.batch.read_namespaced_job("job1", ns).spec.suspend is True
    assert deactivated <= set(conds(kc.get("workloads", name, ns)))
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "workloads", name, {"spec": {"active": True}})
    kc.settle()
    assert {
        ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue prod-cq"),
        ("Admitted", "True", "Admitted", "The workload is admitted"),
        ("Evicted", "False", "QuotaReserved", "Previously: The workload is deactivated"),
        ("Requeued", "True", "Reactivated", "The workload was reactivated"),
    } <= set(conds(kc.get("workloads", name, ns)))
    assert kc.batch.read_namespaced_job("job1", ns).spec.suspend is False


def test_should_evict_workload_due_wait_for_pods_ready_timeout(kc_ready: Cluster):
    """waitForPodsReady (kc_ready: timeout 60 s, backoff base 10 s): the flavor's pool has no node, so the pods
    never become ready."""
    kc = kc_ready
    kc.ks.reset()
    flavor(kc, "fl", **{POOL: "no-such-pool"})
    cluster_queue(kc, "cq", [("cpu", [fq("fl", "cpu", "10")])])
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    _job(kc, ns, "job", "lq", cpu="2")
    kc.settle(1)
    wl = _wl_of(kc, ns, "job")
    key = f"{ns}/{wl['metadata']['name']}"
    assert cond(wl, "PodsReady") == ("False", "WaitForStart", "Not all pods are ready or succeeded")
    kc.settle(60)
    wl = _wl_of(kc, ns, "job")
    timeout = f"Exceeded the PodsReady timeout {key}"
    assert {
        ("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded"),
        ("QuotaReserved", "False", "PendingEvaluation", timeout),
        ("Evicted", "True", "PodsReadyTimeout", timeout),
        ("Admitted", "False", "NoReservation", "The workload has no reservation"),
        ("Requeued", "False", "PodsReadyTimeout", timeout),
    } <= set(conds(wl))
    assert wl["status"]["requeueState"]["count"] == 1
    assert kc.batch.read_namespaced_job("job", ns).spec.suspend is True


# -- Fair Sharing status (scheduler/fairsharing/fair_sharing_test.go, "Preemption is disabled") ----------------


def test_admits_workloads_respecting_fair_share_weighted_share_status(kc: Cluster):
    """The weighted shares the upstream case reads from metrics and ClusterQueue status, read from status."""
    flavor(kc, "default")
    ns = kc.namespace()
    for name, quota in (("a", "3"), ("b", "1"), ("shared", "4")):
        cluster_queue(kc, name, [("cpu", [fq("default", "cpu", quota)])], cohortName="all")
        kc.local_queue(name, name, ns)
    kc.settle()

    def share(cq: str) -> int:
        return kc.get("clusterqueues", cq)["status"]["fairSharing"]["weightedShare"]

    def running(queue: str) -> list[str]:
        return sorted(
            w["metadata"]["name"]
            for w in kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
            if w["spec"]["queueName"] == queue
            and cond(w, "Admitted") == ("True", "Admitted", "The workload is admitted")
            and cond(w, "Finished") is None
        )

    for i in range(10):
        workload(kc, ns, f"a{i}", "a", {"cpu": "1"})
    kc.settle(1)
    assert len(running("a")) == 8 and kc.get("clusterqueues", "a")["status"]["pendingWorkloads"] == 2
    assert (share("a"), share("b"), share("shared")) == (625, 0, 0)
    for i in range(5):
        workload(kc, ns, f"b{i}", "b", {"cpu": "1"})
    kc.settle(1)
    assert kc.get("clusterqueues", "b")["status"]["pendingWorkloads"] == 5
    for expect_b, expect_a in ((1, 7), (2, 6), (3, 5), (3, 5)):
        finish(kc, ns, running("a")[0])
        assert (len(running("b")), len(running("a"))) == (expect_b, expect_a)
    assert (share("a"), share("b"), share("shared")) == (250, 250, 0)
    finish(kc, ns, *running("a")[:2])
    assert (len(running("a")), len(running("b"))) == (4, 4)
    assert kc.get("clusterqueues", "a")["status"]["pendingWorkloads"] == 0
    assert kc.get("clusterqueues", "b")["status"]["pendingWorkloads"] == 1
    assert (share("a"), share("b"), share("shared")) == (125, 375, 0)
    assert kc.get("clusterqueues", "a")["status"]["fairSharing"] == {"weightedShare": 125}


STARTED = ("True", "Started", "All pods reached readiness and the workload is running")
WAIT_START = ("False", "WaitForStart", "Not all pods are ready or succeeded")


def test_single_job_at_different_stages_of_progress_towards_completion(kc_ready: Cluster):
    """The table's entries reachable with kubesim's own job controller and kubelet (they write the Job's status):
    no progress (no node for the flavor), all pods ready, then the reservation unset with all pods ready."""
    kc = kc_ready
    kc.ks.reset()
    flavor(kc, "nowhere", **{POOL: "no-such-pool"})
    flavor(kc, "default", **{POOL: "h100"})
    cluster_queue(kc, "stuck", [("cpu", [fq("nowhere", "cpu", "10")])])
    cluster_queue(kc, "foo", [("cpu", [fq("default", "cpu", "10")])])
    ns = kc.namespace()
    kc.local_queue("stuck-queue", "stuck", ns)
    kc.local_queue("test-queue", "foo", ns)
    _job(kc, ns, "no-progress", "stuck-queue", cpu="1", parallelism=2, seconds=600)
    _job(kc, ns, "test-job", "test-queue", cpu="1", parallelism=2, seconds=600)
    kc.settle(1)
    assert cond(_wl_of(kc, ns, "no-progress"), "PodsReady") == WAIT_START
    kc.settle(1)
    assert kc.batch.read_namespaced_job("test-job", ns).status.ready == 2
    wl = _wl_of(kc, ns, "test-job")
    assert cond(wl, "PodsReady") == STARTED
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "foo", {"spec": {"stopPolicy": "Hold"}})
    kc.settle()  # held: no readmission (upstream runs no scheduler)
    reason = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "EvictedByTest",
        "message": "Evicted By Test",
        "lastTransitionTime": now(kc),
    }
    conds_ = [c for c in wl["status"]["conditions"] if c["type"] != "QuotaReserved"] + [reason]
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"status": {"admission": None, "conditions": conds_}}
    )
    kc.settle()
    wl = _wl_of(kc, ns, "test-job")
    assert cond(wl, "Admitted") == ("False", "NoReservation", "The workload has no reservation")
    assert cond(wl, "PodsReady") == WAIT_START


def test_should_finish_the_preemption_when_the_job_becomes_inactive(kc: Cluster):
    """kubesim deletes a suspended Job's pods at once, so the Job turns inactive in the same settle."""
    _job_queue(kc)
    ns = kc.namespace()
    kc.local_queue("q", "cluster-queue", ns)
    _job(kc, ns, "test-job", "q", seconds=600)
    kc.settle(1)
    assert kc.batch.read_namespaced_job("test-job", ns).status.active == 1
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cluster-queue", {"spec": {"stopPolicy": "Hold"}})
    wl = _wl_of(kc, ns, "test-job")
    evicted = {
        "type": "Evicted",
        "status": "True",
        "reason": "Preempted",
        "message": "By test",
        "lastTransitionTime": now(kc),
    }
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE,
        ns,
        "workloads",
        wl["metadata"]["name"],
        {"status": {"conditions": [*wl["status"]["conditions"], evicted]}},
    )
    kc.settle()
    assert kc.batch.read_namespaced_job("test-job", ns).spec.suspend is True
    wl = _wl_of(kc, ns, "test-job")
    # released with PendingEvaluation "By test", then the workload controller names the held queue
    assert cond(wl, "QuotaReserved") == ("False", "Suspended", "ClusterQueue cluster-queue is inactive")
    assert cond(wl, "Requeued") == ("True", "Preempted", "By test")
    assert cond(wl, "Admitted") == ("False", "NoReservation", "The workload has no reservation")
    assert wl["status"].get("admission") is None


def _prod_dev(kc: Cluster) -> str:
    """'Interacting with scheduler' setup: prod-cq (spot-tainted 5 lending nothing, on-demand 5) and dev-clusterqueue
    (spot-untainted 5, on-demand 5; MayStopSearch / TryNextFlavor; LowerPriority within the queue)."""
    flavor(kc, "on-demand", **{POOL: "h100"})
    kc.create(
        "resourceflavors",
        {
            "kind": "ResourceFlavor",
            "metadata": {"name": "spot-tainted"},
            "spec": {
                "nodeLabels": {POOL: "a100-mig-3g40gb"},
                "nodeTaints": [{"key": POOL, "value": "spot-tainted", "effect": "NoSchedule"}],
            },
        },
    )
    flavor(kc, "spot-untainted", **{POOL: "l40s-shared"})
    cluster_queue(
        kc, "prod-cq", [("cpu", [fq("spot-tainted", "cpu", "5", "0"), fq("on-demand", "cpu", "5")])], cohortName="prod"
    )
    cluster_queue(
        kc,
        "dev-clusterqueue",
        [("cpu", [fq("spot-untainted", "cpu", "5"), fq("on-demand", "cpu", "5")])],
        flavorFungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        preemption={"withinClusterQueue": "LowerPriority"},
    )
    ns = kc.namespace()
    kc.local_queue("prod-queue", "prod-cq", ns)
    kc.local_queue("dev-queue", "dev-clusterqueue", ns)
    kc.settle()
    return ns


def test_should_schedule_jobs_with_partial_admission(kc: Cluster):
    ns = _prod_dev(kc)
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job1", "labels": {"kueue.x-k8s.io/queue-name": "prod-queue"}},
        "spec": {
            "parallelism": 5,
            "completions": 6,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "command": ["sleep", "600"],
                            "resources": {"requests": {"cpu": "2"}},
                        }
                    ],
                }
            },
        },
    }
    kc.batch.create_namespaced_job(ns, body)
    kc.settle(1)
    assert kc.batch.read_namespaced_job("job1", ns).spec.suspend is True
    kc.batch.patch_namespaced_job(
        "job1", ns, {"metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "1"}}}
    )
    kc.settle(1)
    job = kc.batch.read_namespaced_job("job1", ns)
    assert job.spec.suspend is False and job.spec.parallelism == 2
    wl = _wl_of(kc, ns, "job1")
    assert wl["spec"]["podSets"][0]["minCount"] == 1
    usage_ = kc.get("clusterqueues", "prod-cq")["status"]["flavorsUsage"]
    assert {"name": "on-demand", "resources": [{"name": "cpu", "total": "4", "borrowed": "0"}]} in usage_
    delete(kc, "localqueues", "prod-queue", ns)
    reason = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "EvictedByTest",
        "message": "Evicted By Test",
        "lastTransitionTime": now(kc),
    }
    conds_ = [c for c in wl["status"]["conditions"] if c["type"] != "QuotaReserved"] + [reason]
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"status": {"admission": None, "conditions": conds_}}
    )
    kc.settle()
    job = kc.batch.read_namespaced_job("job1", ns)
    assert job.spec.suspend is True and job.spec.parallelism == 5


def test_should_readmit_preempted_job_with_workload_priority_class_in_alternative_flavor(kc: Cluster):
    """Upstream's PriorityClass twin needs pod priority classes, which kubesim ignores; this is the
    WorkloadPriorityClass case."""
    ns = _prod_dev(kc)
    kc.priority_class("high-workload", 100)
    _job(kc, ns, "low", "dev-queue", parallelism=5, seconds=3600)
    kc.settle(1)
    low = kc.batch.read_namespaced_job("low", ns)
    assert low.spec.suspend is False and low.spec.template.spec.node_selector == {POOL: "l40s-shared"}
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "high",
            "labels": {"kueue.x-k8s.io/queue-name": "dev-queue", "kueue.x-k8s.io/priority-class": "high-workload"},
        },
        "spec": {
            "parallelism": 5,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {POOL: "l40s-shared"},
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "command": ["sleep", "3600"],
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                }
            },
        },
    }
    kc.batch.create_namespaced_job(ns, body)
    kc.settle(1)
    high = kc.batch.read_namespaced_job("high", ns)
    assert high.spec.suspend is False and high.spec.template.spec.node_selector == {POOL: "l40s-shared"}
    low = kc.batch.read_namespaced_job("low", ns)
    assert low.spec.suspend is False and low.spec.template.spec.node_selector == {POOL: "h100"}
    wl = _wl_of(kc, ns, "low")
    assert cond(wl, "Preempted")[:2] == ("False", "QuotaReserved")
    assert cond(wl, "Requeued")[:2] == ("True", "Preempted")


# -- stop policies (scheduler/scheduler_test.go) ----------------------------------------------------------------


def _finish_eviction(kc: Cluster, ns: str, name: str) -> None:
    """util.FinishEvictionForWorkloads: the reservation of an evicted Workload (no Job owns it) unset by hand."""
    wl = kc.get("workloads", name, ns)
    assert cond(wl, "Evicted")[0] == "True"
    qr = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "PendingEvaluation",
        "message": "By test",
        "lastTransitionTime": now(kc),
    }
    conds_ = [c for c in wl["status"]["conditions"] if c["type"] != "QuotaReserved"] + [qr]
    kc.custom.patch_namespaced_custom_object_status(
        *KUEUE, ns, "workloads", name, {"status": {"admission": None, "conditions": conds_}}
    )
    kc.settle(1)


def _stop_setup(kc: Cluster) -> str:
    flavor(kc, "on-demand")
    cluster_queue(kc, "cluster-queue", [("cpu", [fq("on-demand", "cpu", "5", "5")])], cohortName="cohort")
    ns = kc.namespace()
    kc.local_queue("queue", "cluster-queue", ns)
    kc.settle()
    return ns


def _admitted(kc: Cluster, ns: str, name: str) -> bool:
    return cond(kc.get("workloads", name, ns), "Admitted") == ("True", "Admitted", "The workload is admitted")


def test_using_cluster_queue_stop_policy_should_evict_workloads_when_stop_policy_is_drain(kc: Cluster):
    ns = _stop_setup(kc)
    workload(kc, ns, "one", "queue")
    kc.settle(1)
    assert _admitted(kc, ns, "one")
    kc.custom.patch_cluster_custom_object(
        *KUEUE, "clusterqueues", "cluster-queue", {"spec": {"stopPolicy": "HoldAndDrain"}}
    )
    kc.settle()
    assert cond(kc.get("workloads", "one", ns), "Evicted") == (
        "True",
        "ClusterQueueStopped",
        "The ClusterQueue is stopped",
    )
    assert cond(kc.get("clusterqueues", "cluster-queue"), "Active") == (
        "False",
        "Stopped",
        "Can't admit new workloads: is stopped.",
    )
    _finish_eviction(kc, ns, "one")
    workload(kc, ns, "two", "queue")
    kc.settle(1)
    assert not _admitted(kc, ns, "one") and not _admitted(kc, ns, "two")
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cluster-queue", {"spec": {"stopPolicy": None}})
    kc.settle(1)
    assert _admitted(kc, ns, "one") and _admitted(kc, ns, "two")


def test_using_local_queue_stop_policy_should_evict_workloads_when_stop_policy_is_drain(kc: Cluster):
    ns = _stop_setup(kc)
    workload(kc, ns, "wl1", "queue")
    kc.settle(1)
    assert _admitted(kc, ns, "wl1")
    st = lq_status(kc, "queue", ns)
    assert (st["pendingWorkloads"], st["reservingWorkloads"], st["admittedWorkloads"]) == (0, 1, 1)
    assert st["conditions"] == [LQ_READY]
    kc.custom.patch_namespaced_custom_object(
        *KUEUE, ns, "localqueues", "queue", {"spec": {"stopPolicy": "HoldAndDrain"}}
    )
    kc.settle()
    assert cond(kc.get("workloads", "wl1", ns), "Evicted") == ("True", "LocalQueueStopped", "The LocalQueue is stopped")
    st = lq_status(kc, "queue", ns)
    assert (st["pendingWorkloads"], st["reservingWorkloads"], st["admittedWorkloads"]) == (0, 1, 1)
    assert st["conditions"] == [("Active", "False", "Stopped", "LocalQueue is stopped")]
    _finish_eviction(kc, ns, "wl1")
    workload(kc, ns, "wl2", "queue")
    kc.settle(1)
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "localqueues", "queue", {"spec": {"stopPolicy": None}})
    kc.settle(1)
    st = lq_status(kc, "queue", ns)
    assert (st["pendingWorkloads"], st["reservingWorkloads"], st["admittedWorkloads"]) == (0, 2, 2)
    assert st["conditions"] == [LQ_READY]
    assert _admitted(kc, ns, "wl1") and _admitted(kc, ns, "wl2")


def test_retry_check_evicts_and_resets_the_checks_at_eviction(kc: Cluster):
    """Workload reconciler's check-based eviction (reconcileCheckBasedEviction + prepareForEviction): a Retry
    check on an admitted Workload evicts it with the checks named, and the checks go back to Pending right then
    (a Workload no Job owns keeps its reservation until something finishes the eviction)."""
    ns = _checks_queue(kc)
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cluster-queue", {"spec": {"stopPolicy": "None"}})
    kc.settle()
    _set_checks(kc, ns, check1=("Ready", "check ready"), check2=("Ready", "check ready"))
    assert cond(kc.get("workloads", "wl", ns), "Admitted")[0] == "True"
    _set_checks(kc, ns, check2=("Retry", "try later"))
    wl = kc.get("workloads", "wl", ns)
    assert cond(wl, "Evicted") == (
        "True",
        "AdmissionCheck",
        'Evicted due to AdmissionCheck in Retry state: "check2" (try later)',
    )
    assert cond(wl, "QuotaReserved")[0] == "True"
    assert [(c["name"], c["state"], c["message"], c.get("retryCount")) for c in wl["status"]["admissionChecks"]] == [
        ("check1", "Pending", "Reset to Pending after eviction. Previously: Ready", None),
        ("check2", "Pending", "Reset to Pending after eviction. Previously: Retry", 1),
    ]


# -- WorkloadPriorityClass changes (job_controller_test.go "Patch / Re-create a WorkloadPriorityClass") -----------


def _priority_jobs(kc: Cluster, second: str) -> str:
    ns = _prod_dev(kc)
    for name, value in (("mid", 100), ("high", 1000), ("dynamic", 1000)):
        kc.priority_class(name, value)
    for i, pc in ((1, "high"), (2, second), (3, "mid")):
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"test-job{i}",
                "labels": {"kueue.x-k8s.io/queue-name": "dev-queue", "kueue.x-k8s.io/priority-class": pc},
            },
            "spec": {
                "parallelism": 1,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "c",
                                "image": "busybox",
                                "command": ["sleep", "3600"],
                                "resources": {"requests": {"cpu": "5"}},
                            }
                        ],
                    }
                },
            },
        }
        kc.batch.create_namespaced_job(ns, body)
        kc.settle(1)
    assert [_wl_of(kc, ns, f"test-job{i}")["spec"]["priority"] for i in (1, 2, 3)] == [1000, 1000, 100]
    assert cond(_wl_of(kc, ns, "test-job1"), "Admitted")[0] == "True"
    assert cond(_wl_of(kc, ns, "test-job2"), "Admitted")[0] == "True"
    assert cond(_wl_of(kc, ns, "test-job3"), "QuotaReserved")[:2] == ("False", "WaitingForQuota")
    return ns


def _preempted_second(kc: Cluster, ns: str) -> None:
    assert _wl_of(kc, ns, "test-job2")["spec"]["priority"] == 10
    assert cond(_wl_of(kc, ns, "test-job3"), "Admitted")[0] == "True"
    wl2 = _wl_of(kc, ns, "test-job2")
    assert cond(wl2, "Evicted")[:2] == ("True", "Preempted")
    assert cond(wl2, "Preempted")[:2] == ("True", "InClusterQueue")


def test_patch_a_workload_priority_class_running_workload_priority_is_decreased_causing_preemption(kc: Cluster):
    """Upstream: "running workload priority is decreased causing a pending workload to be scheduled and preempt
    the running one" (Patch a WorkloadPriorityClass)."""
    ns = _priority_jobs(kc, "dynamic")
    kc.custom.patch_cluster_custom_object(*KUEUE, "workloadpriorityclasses", "dynamic", {"value": 10})
    kc.settle(1)
    _preempted_second(kc, ns)


def test_patch_a_workload_priority_class_running_workload_priority_is_decreased_but_still_above(kc: Cluster):
    """Upstream: "running workload priority is decreased, but still above the pending workload, and so the
    workload continues running undisturbed"."""
    ns = _priority_jobs(kc, "dynamic")
    kc.custom.patch_cluster_custom_object(*KUEUE, "workloadpriorityclasses", "dynamic", {"value": 500})
    kc.settle(1)
    assert _wl_of(kc, ns, "test-job2")["spec"]["priority"] == 500
    assert cond(_wl_of(kc, ns, "test-job2"), "Admitted")[0] == "True"
    assert cond(_wl_of(kc, ns, "test-job3"), "QuotaReserved")[:2] == ("False", "WaitingForQuota")


def test_workload_priority_class_re_created_with_decreased_priority_causing_preemption(kc: Cluster):
    ns = _priority_jobs(kc, "dynamic")
    kc.custom.delete_cluster_custom_object(*KUEUE, "workloadpriorityclasses", "dynamic")
    kc.settle()
    assert _wl_of(kc, ns, "test-job2")["spec"]["priority"] == 1000
    kc.priority_class("dynamic", 10)
    kc.settle(1)
    _preempted_second(kc, ns)


def test_workload_controller_case_of_workload_priority_class(kc: Cluster):
    """workload_controller_test.go "changing the priority value of PriorityClass changes the priority of the
    workload": a Workload created with priorityClassRef (its queue does not exist)."""
    kc.priority_class("workload-priority-class", 200)
    ns = kc.namespace()
    kc.create(
        "workloads",
        {
            "kind": "Workload",
            "metadata": {"name": "wl"},
            "spec": {
                "queueName": "lq",
                "priority": 200,
                "priorityClassRef": {
                    "group": "kueue.x-k8s.io",
                    "kind": "WorkloadPriorityClass",
                    "name": "workload-priority-class",
                },
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                                ],
                            }
                        },
                    }
                ],
            },
        },
        ns,
    )
    kc.settle()
    assert kc.get("workloads", "wl", ns)["status"]["conditions"]
    kc.custom.patch_cluster_custom_object(*KUEUE, "workloadpriorityclasses", "workload-priority-class", {"value": 150})
    kc.settle()
    assert kc.get("workloads", "wl", ns)["spec"]["priority"] == 150


def _wpc_job(kc: Cluster, ns: str, pc: str) -> None:
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "test-job",
            "labels": {"kueue.x-k8s.io/queue-name": "main", "kueue.x-k8s.io/priority-class": pc},
        },
        "spec": {
            "parallelism": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "60"]}],
                }
            },
        },
    }
    kc.batch.create_namespaced_job(ns, body)
    kc.settle()


def _warnings(kc: Cluster, ns: str) -> list[tuple[str, str, str]]:
    return [
        (e.type, e.reason, e.message)
        for e in kc.core.list_namespaced_event(ns).items
        if e.involved_object.name == "test-job" and e.involved_object.kind == "Job" and e.type == "Warning"
    ]


MISSING_WPC = ("Warning", "WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "missing-wpc" not found')


def test_should_report_a_warning_and_create_no_workload_when_the_label_names_a_class_that_does_not_exist(
    kc: Cluster,
):
    ns = kc.namespace()
    _wpc_job(kc, ns, "missing-wpc")
    assert _warnings(kc, ns) == [MISSING_WPC]
    assert kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"] == []
    kc.priority_class("missing-wpc", 1000)
    kc.settle()
    wl = _wl_of(kc, ns, "test-job")
    assert (wl["spec"]["priorityClassRef"]["name"], wl["spec"]["priority"]) == ("missing-wpc", 1000)


def test_should_report_a_warning_when_the_label_is_changed_to_a_class_that_does_not_exist(kc: Cluster):
    kc.priority_class("present-wpc", 1000)
    ns = kc.namespace()
    _wpc_job(kc, ns, "present-wpc")
    wl = _wl_of(kc, ns, "test-job")
    assert (wl["spec"]["priorityClassRef"]["name"], wl["spec"]["priority"]) == ("present-wpc", 1000)
    assert _warnings(kc, ns) == []
    kc.batch.patch_namespaced_job(
        "test-job", ns, {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "missing-wpc"}}}
    )
    kc.settle()
    assert _warnings(kc, ns) == [MISSING_WPC]
    wl = _wl_of(kc, ns, "test-job")
    assert (wl["spec"]["priorityClassRef"]["name"], wl["spec"]["priority"]) == ("present-wpc", 1000)


def test_should_set_the_flavors_node_selectors_if_the_job_is_admitted_by_pods_count_only(kc: Cluster):
    flavor(kc, "on-demand", **{POOL: "h100"})
    cluster_queue(kc, "pods-clusterqueue", [("pods", [fq("on-demand", "pods", "5")])])
    ns = kc.namespace()
    kc.local_queue("pods-queue", "pods-clusterqueue", ns)
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job", "labels": {"kueue.x-k8s.io/queue-name": "pods-queue"}},
        "spec": {
            "parallelism": 2,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "60"]}],
                }
            },
        },
    }
    kc.batch.create_namespaced_job(ns, body)
    kc.settle(1)
    job = kc.batch.read_namespaced_job("job", ns)
    assert job.spec.suspend is False and job.spec.template.spec.node_selector == {POOL: "h100"}
    psa = _wl_of(kc, ns, "job")["status"]["admission"]["podSetAssignments"][0]
    assert (psa["flavors"], psa["resourceUsage"], psa["count"]) == ({"pods": "on-demand"}, {"pods": "2"}, 2)


def test_should_allow_reclaim_of_resources_that_are_no_longer_needed(kc: Cluster):
    """Upstream writes succeeded=4 into the Job's status; here the pods really finish: job1's pods take 30 s, so
    after four completions one pod is left to run and one slot of parallelism 2 is reclaimable."""
    ns = _prod_dev(kc)
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job1", "labels": {"kueue.x-k8s.io/queue-name": "prod-queue"}},
        "spec": {
            "parallelism": 2,
            "completions": 5,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "command": ["sleep", "30"],
                            "resources": {"requests": {"cpu": "2"}},
                        }
                    ],
                }
            },
        },
    }
    kc.batch.create_namespaced_job(ns, body)
    kc.settle(1)
    job1 = kc.batch.read_namespaced_job("job1", ns)
    assert job1.spec.suspend is False and job1.spec.template.spec.node_selector == {POOL: "h100"}
    _job(kc, ns, "job2", "prod-queue", cpu="3", seconds=600)
    kc.settle(1)
    assert kc.batch.read_namespaced_job("job2", ns).spec.suspend is True
    assert "reclaimablePods" not in _wl_of(kc, ns, "job1")["status"]
    kc.settle(62)  # two rounds of two pods: succeeded 4, one completion to go
    assert kc.batch.read_namespaced_job("job1", ns).status.succeeded == 4
    assert _wl_of(kc, ns, "job1")["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]
    job2 = kc.batch.read_namespaced_job("job2", ns)
    assert job2.spec.suspend is False and job2.spec.template.spec.node_selector == {POOL: "h100"}


def test_should_schedule_updated_job_and_update_the_workload(kc: Cluster):
    ns = _prod_dev(kc)
    _job(kc, ns, "test-job", "prod-queue", cpu="3", parallelism=2, suspend=False)
    kc.settle(1)
    assert kc.batch.read_namespaced_job("test-job", ns).spec.suspend is True
    wl = _wl_of(kc, ns, "test-job")
    kc.batch.patch_namespaced_job("test-job", ns, {"spec": {"parallelism": 1}})
    kc.settle(1)
    assert kc.batch.read_namespaced_job("test-job", ns).spec.suspend is False
    updated = _wl_of(kc, ns, "test-job")
    assert updated["metadata"]["uid"] == wl["metadata"]["uid"]
    assert updated["metadata"]["creationTimestamp"] == wl["metadata"]["creationTimestamp"]
    assert updated["spec"]["podSets"][0]["count"] == 1
    name = wl["metadata"]["name"]
    assert ("UpdatedWorkload", f"Updated not matching Workload for suspended job: {ns}/{name}") in kc.events(
        ns, "test-job"
    )


def test_should_re_queue_a_workload_evicted_due_to_pods_ready_timeout_after_the_backoff_elapses(kc_ready: Cluster):
    """kc_ready: timeout 60 s, backoff base 10 s, backoffLimitCount 1. kubesim's scheduler readmits the workload
    once its backoff is over (upstream does it by hand); the second timeout exceeds the limit."""
    kc = kc_ready
    kc.ks.reset()
    flavor(kc, "on-demand", **{POOL: "no-such-pool"})
    cluster_queue(kc, "cq", [("cpu", [fq("on-demand", "cpu", "10")])])
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    _job(kc, ns, "job", "lq", cpu="2")
    kc.settle(1)
    key = f"{ns}/{_wl_of(kc, ns, 'job')['metadata']['name']}"
    kc.settle(60)
    wl = _wl_of(kc, ns, "job")
    assert wl["status"]["requeueState"]["count"] == 1 and wl["status"]["requeueState"]["requeueAt"]
    kc.settle(10)  # the backoff elapses: requeued and admitted again
    wl = _wl_of(kc, ns, "job")
    assert wl["status"]["requeueState"] == {"count": 1}
    assert cond(wl, "Requeued") == ("True", "BackoffFinished", "The workload backoff was finished")
    assert cond(wl, "Evicted") == ("False", "QuotaReserved", f"Previously: Exceeded the PodsReady timeout {key}")
    assert cond(wl, "Admitted")[0] == "True"
    kc.settle(60)
    wl = _wl_of(kc, ns, "job")
    assert wl["spec"]["active"] is False
    assert "requeueState" not in wl["status"]
    limit = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    assert {
        ("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded"),
        ("QuotaReserved", "False", "Deactivated", "The workload is deactivated"),
        ("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded", limit),
        ("Admitted", "False", "NoReservation", "The workload has no reservation"),
        ("Requeued", "False", "DeactivatedDueToRequeuingLimitExceeded", limit),
    } <= set(conds(wl))
    assert cond(wl, "DeactivationTarget") is None


def test_using_hierarchical_cohorts_admits_workloads_respecting_fair_share_cohort_status(kc: Cluster):
    """fair_sharing_test.go "using hierarchical cohorts": the Cohorts' status.fairSharing.weightedShare (the
    upstream value x 1000 / lendable, rounded up to an integer as Kueue's WeightedShare is)."""
    flavor(kc, "default")
    for name, parent in (
        ("first-left", "root"),
        ("first-right", "root"),
        ("second-left", "first-left"),
        ("second-right", "first-left"),
    ):
        kc.create("cohorts", {"kind": "Cohort", "metadata": {"name": name}, "spec": {"parentName": parent}})
    kc.create(
        "cohorts",
        {
            "kind": "Cohort",
            "metadata": {"name": "bank"},
            "spec": {
                "parentName": "first-right",
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [fq("default", "cpu", "10")]}],
            },
        },
    )
    ns = kc.namespace()
    for name in ("second-left", "second-right"):
        cluster_queue(kc, name, [("cpu", [fq("default", "cpu", "2")])], cohortName=name)
        kc.local_queue(name, name, ns)
    kc.settle()

    def share(cohort: str) -> int:
        return kc.get("cohorts", cohort)["status"]["fairSharing"]["weightedShare"]

    assert (share("first-left"), share("first-right"), share("bank")) == (0, 0, 0)
    for i in range(5):
        workload(kc, ns, f"l{i}", "second-left", {"cpu": "1"})
        workload(kc, ns, f"r{i}", "second-right", {"cpu": "1"})
    kc.settle(1)
    for cq in ("second-left", "second-right"):
        st = kc.get("clusterqueues", cq)["status"]
        assert (st["reservingWorkloads"], st["admittedWorkloads"]) == (5, 5)
    assert [share(c) for c in ("first-left", "first-right", "second-left", "second-right", "bank")] == [
        math.ceil(6000 / 14),
        0,
        math.ceil(3000 / 14),
        math.ceil(3000 / 14),
        0,
    ]


def test_shouldnt_reserve_quota_because_not_enough_resources(kc: Cluster):
    """fair_sharing_test.go "Preemption is disabled": a request over the whole cohort's capacity."""
    flavor(kc, "default")
    ns = kc.namespace()
    for name, quota in (("a", "3"), ("b", "1"), ("shared", "4")):
        cluster_queue(kc, name, [("cpu", [fq("default", "cpu", quota)])], cohortName="all")
        kc.local_queue(name, name, ns)
    workload(kc, ns, "wl", "a", {"cpu": "10"})
    kc.settle()
    assert cond(kc.get("workloads", "wl", ns), "QuotaReserved") == (
        "False",
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, previously considered "
        "podsets requests (0) + current podset request (10) > maximum capacity (8)",
    )
