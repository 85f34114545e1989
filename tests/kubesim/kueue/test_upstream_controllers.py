"""Kueue's core controller integration scenarios against a served kubesim: objects created through the official
client, statuses and conditions read back.

Each test is named after the upstream case (kubernetes-sigs/kueue, test/integration/singlecluster/controller/
core/{clusterqueue,localqueue,resourceflavor,workload}_controller_test.go and controller/jobs/job/
job_controller_test.go); the scenarios are re-told here and nothing is carried over. Upstream runs these
controllers without the scheduler and sets quota reservations by hand (as its util.SetQuotaReservation does);
kubesim always runs its scheduler, so a reservation set by hand is made while the ClusterQueue cannot admit
(missing flavor), and a workload upstream leaves pending asks for more than any flavor holds.

Left out: metrics assertions (kubesim's /metrics is tested in test_metrics.py), MultiKueue constraints, the
RoleTracker/leader cases, concurrent-modification logging, custom metric labels, retention/deletion of finished
workloads (objectRetentionPolicies, off by default), runtime-class and restart-manager races, and the
UnadmittedWorkloadsExplicitStatus cases (that gate is off by default in v0.20).
"""

from __future__ import annotations

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
