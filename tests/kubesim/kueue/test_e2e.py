"""Kueue scenarios end to end: official kubernetes client -> served kubesim (manual clock) -> Kueue half."""

from __future__ import annotations

import hashlib
import json

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.kueue.conftest import GPU, KUEUE, Cluster


def setup_queue(kc: Cluster, nominal: int = 2, **cq) -> str:
    kc.flavor()
    kc.cluster_queue("cq", nominal, **cq)
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    return ns


def test_job_lifecycle(kc: Cluster):
    ns = setup_queue(kc, 8)
    job = kc.job(ns, "train", "lq", 2, seconds=30, parallelism=2)
    assert job.spec.suspend is True  # the Job webhook suspends on create
    kc.settle()
    wl = kc.workload(ns, "train")
    digest = hashlib.sha1(f"Job\nbatch\ntrain\n{job.metadata.uid}".encode(), usedforsecurity=False).hexdigest()
    assert wl["metadata"]["name"] == f"job-train-{digest[:5]}"
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == job.metadata.uid
    assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    ref = wl["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (
        "Job",
        "train",
        job.metadata.uid,
        True,
        True,
    )
    assert wl["spec"]["queueName"] == "lq"
    assert wl["spec"]["podSets"][0]["count"] == 2
    assert wl["status"]["admission"]["podSetAssignments"][0] == {
        "name": "main",
        "flavors": {GPU: "h100"},
        "resourceUsage": {GPU: "4"},
        "count": 2,
    }
    job = kc.batch.read_namespaced_job("train", ns)
    assert job.spec.suspend is False
    assert job.spec.template.spec.node_selector == {"portal.gpu/pool": "h100"}
    kc.settle(1)
    assert kc.batch.read_namespaced_job("train", ns).status.active == 2
    reasons = [r for r, _ in kc.events(ns, wl["metadata"]["name"])]
    assert "QuotaReserved" in reasons and "Admitted" in reasons
    assert ("CreatedWorkload", f"Created Workload: {ns}/{wl['metadata']['name']}") in kc.events(ns, "train")
    cq = kc.get("clusterqueues", "cq")
    assert cq["status"]["admittedWorkloads"] == 1
    assert cq["status"]["flavorsUsage"] == [
        {"name": "h100", "resources": [{"name": GPU, "total": "4", "borrowed": "0"}]}
    ]
    lq = kc.get("localqueues", "lq", ns)
    assert lq["status"]["flavorsUsage"] == [{"name": "h100", "resources": [{"name": GPU, "total": "4"}]}]
    assert lq["status"]["conditions"][0]["reason"] == "Ready"
    kc.settle(40)
    assert kc.condition(ns, "train", "Finished")["reason"] == "Succeeded"
    wl = kc.workload(ns, "train")
    assert "finalizers" not in wl["metadata"] or not wl["metadata"]["finalizers"]
    assert kc.get("clusterqueues", "cq")["status"]["reservingWorkloads"] == 0


def test_fifo_and_visibility_positions(kc: Cluster):
    ns = setup_queue(kc, 2)
    names = [f"j{i}" for i in range(5)]
    for n in names:
        kc.job(ns, n, "lq", 1)
        kc.settle(1)
    assert kc.running(ns, names) == {"j0", "j1"}
    pending = kc.pending_lq(ns, "lq")
    assert [
        (p["metadata"]["ownerReferences"][0]["name"], p["positionInLocalQueue"], p["positionInClusterQueue"])
        for p in pending
    ] == [("j2", 0, 0), ("j3", 1, 1), ("j4", 2, 2)]
    assert [p["metadata"]["ownerReferences"][0]["name"] for p in kc.pending_cq("cq", limit=1, offset=1)] == ["j3"]
    qr = kc.condition(ns, "j2", "QuotaReserved")
    assert (qr["status"], qr["reason"]) == ("False", "WaitingForQuota")
    assert qr["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor h100, 1 more needed"
    )
    assert kc.workload(ns, "j2")["status"]["resourceRequests"] == [
        {"name": "main", "resources": {"cpu": "1", GPU: "1"}}
    ]
    assert kc.get("clusterqueues", "cq")["status"]["pendingWorkloads"] == 3
    kc.batch.delete_namespaced_job("j0", ns, propagation_policy="Background")
    kc.settle()
    assert kc.running(ns, names[1:]) == {"j1", "j2"}


def test_priority_and_within_cluster_queue_preemption(kc: Cluster):
    kc.priority_class("low", 10)
    kc.priority_class("high", 100)
    ns = setup_queue(kc, 2, preemption={"withinClusterQueue": "LowerPriority"})
    kc.job(ns, "low", "lq", 2, priority_class="low")
    kc.settle(1)
    assert kc.admitted(ns, "low")
    assert kc.workload(ns, "low")["spec"]["priority"] == 10
    assert kc.workload(ns, "low")["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "low",
    }
    kc.job(ns, "high", "lq", 2, priority_class="high")
    kc.settle()
    assert kc.admitted(ns, "high")
    assert not kc.admitted(ns, "low")
    high = kc.workload(ns, "high")
    pre = kc.condition(ns, "low", "Preempted")
    assert pre["reason"] == "InClusterQueue"
    assert pre["message"] == (
        f"Preempted to accommodate a workload (UID: {high['metadata']['uid']}, JobUID: "
        f"{high['metadata']['labels']['kueue.x-k8s.io/job-uid']}) due to prioritization in the ClusterQueue; "
        "preemptor path: /cq; preemptee path: /cq"
    )
    assert kc.condition(ns, "low", "Evicted")["reason"] == "Preempted"
    assert kc.condition(ns, "low", "Requeued")["status"] == "True"
    assert kc.condition(ns, "low", "QuotaReserved")["status"] == "False"
    low_job = kc.batch.read_namespaced_job("low", ns)
    assert low_job.spec.suspend is True
    assert low_job.spec.template.spec.node_selector is None
    assert any(r == "Preempted" for r, _ in kc.events(ns, kc.workload(ns, "low")["metadata"]["name"]))


def test_borrowing_and_borrowing_limit(kc: Cluster):
    kc.flavor()
    kc.cluster_queue("cq-a", 4, cohortName="co", borrowing=2)
    kc.cluster_queue("cq-b", 4, cohortName="co")
    ns = kc.namespace()
    kc.local_queue("lq-a", "cq-a", ns)
    kc.job(ns, "seven", "lq-a", 7)
    kc.job(ns, "six", "lq-a", 6)
    kc.settle()
    assert kc.running(ns, ["seven", "six"]) == {"six"}
    qr = kc.condition(ns, "seven", "QuotaReserved")
    assert qr["reason"] == "ExceedsMaxQuota"
    assert qr["message"].endswith("> maximum capacity (6)")
    status = kc.get("clusterqueues", "cq-a")["status"]
    assert status["flavorsReservation"][0]["resources"][0] == {"name": GPU, "total": "6", "borrowed": "2"}
    assert status["fairSharing"]["weightedShare"] == 250  # 2 borrowed of the 8 the cohort can lend, per mille


def test_lending_limit_zero(kc: Cluster):
    kc.flavor()
    kc.cluster_queue("cq-a", 4, cohortName="co")
    kc.cluster_queue("cq-b", 4, cohortName="co", lending=0)
    ns = kc.namespace()
    kc.local_queue("lq-a", "cq-a", ns)
    kc.job(ns, "five", "lq-a", 5)
    kc.settle()
    assert kc.condition(ns, "five", "QuotaReserved")["reason"] == "ExceedsMaxQuota"


def test_reclaim_within_cohort(kc: Cluster):
    kc.flavor()
    kc.cluster_queue("cq-a", 4, cohortName="co")
    kc.cluster_queue("cq-b", 4, cohortName="co", preemption={"reclaimWithinCohort": "Any"})
    ns = kc.namespace()
    kc.local_queue("lq-a", "cq-a", ns)
    kc.local_queue("lq-b", "cq-b", ns)
    borrowers = [f"a{i}" for i in range(4)]
    for n in borrowers:
        kc.job(ns, n, "lq-a", 2)
    kc.settle(1)
    assert kc.running(ns, borrowers) == set(borrowers)
    kc.job(ns, "b", "lq-b", 4)
    kc.settle()
    assert kc.admitted(ns, "b")
    victims = set(borrowers) - kc.running(ns, borrowers)
    assert len(victims) == 2
    for v in victims:
        pre = kc.condition(ns, v, "Preempted")
        assert pre["reason"] == "InCohortReclamation"
        assert pre["message"].endswith(
            "due to reclamation within the cohort; preemptor path: /co/cq-b; preemptee path: /co/cq-a"
        )


def test_hierarchical_cohort_quota(kc: Cluster):
    kc.flavor()
    kc.cohort("org", nominal=4)
    kc.cohort("team", parent="org")
    kc.cluster_queue("cq-a", 2, cohortName="team")
    ns = kc.namespace()
    kc.local_queue("lq", "cq-a", ns)
    kc.job(ns, "six", "lq", 6)
    kc.job(ns, "seven", "lq", 7)
    kc.settle()
    assert kc.running(ns, ["six", "seven"]) == {"six"}
    # 4 borrowed of the 6 the tree holds, per mille, rounded up
    assert kc.get("cohorts", "team")["status"]["fairSharing"]["weightedShare"] == 667


def test_fair_sharing_two_to_one(kc: Cluster):
    kc.flavor()
    kc.cohort("root", nominal=12)
    for name, weight in (("cq-a", "2"), ("cq-b", "1")):
        kc.cluster_queue(
            name,
            0,
            cohortName="root",
            fairSharing={"weight": weight},
            preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        )
    ns = kc.namespace()
    kc.local_queue("lq-a", "cq-a", ns)
    kc.local_queue("lq-b", "cq-b", ns)
    b_jobs = [f"b{i}" for i in range(12)]
    for n in b_jobs:
        kc.job(ns, n, "lq-b", 1)
    kc.settle(1)
    assert len(kc.running(ns, b_jobs)) == 12
    a_jobs = [f"a{i}" for i in range(12)]
    for n in a_jobs:
        kc.job(ns, n, "lq-a", 1)
    kc.settle()
    assert (len(kc.running(ns, a_jobs)), len(kc.running(ns, b_jobs))) == (8, 4)
    reasons = {kc.condition(ns, n, "Preempted")["reason"] for n in b_jobs if kc.condition(ns, n, "Preempted")}
    assert reasons == {"InCohortFairSharing"}


@pytest.mark.parametrize(("strategy", "expected"), [("StrictFIFO", set()), ("BestEffortFIFO", {"small"})])
def test_strict_vs_best_effort_fifo(kc: Cluster, strategy: str, expected: set):
    ns = setup_queue(kc, 4, queueingStrategy=strategy)
    kc.job(ns, "running", "lq", 2)
    kc.settle(1)
    kc.job(ns, "big", "lq", 4)
    kc.settle(1)
    kc.job(ns, "small", "lq", 1)
    kc.settle()
    assert kc.running(ns, ["big", "small"]) == expected


def test_inadmissible_reasons(kc: Cluster):
    ns = setup_queue(kc, 4)
    kc.job(ns, "nolq", "missing", 1)
    kc.cluster_queue("broken", 4, flavor="ghost")
    kc.local_queue("lq-broken", "broken", ns)
    kc.job(ns, "inactive", "lq-broken", 1)
    kc.job(ns, "wrongpool", "lq", 1, node_selector={"portal.gpu/pool": "l40s-shared"})
    kc.settle()
    qr = kc.condition(ns, "nolq", "QuotaReserved")
    assert (qr["reason"], qr["message"]) == ("Misconfigured", "LocalQueue missing doesn't exist")
    qr = kc.condition(ns, "inactive", "QuotaReserved")
    assert (qr["reason"], qr["message"]) == ("Suspended", "ClusterQueue broken is inactive")
    active = kc.get("clusterqueues", "broken")["status"]["conditions"][0]
    assert (active["status"], active["reason"], active["message"]) == (
        "False",
        "FlavorNotFound",
        "Can't admit new workloads: references missing ResourceFlavor(s): ghost.",
    )
    assert kc.get("localqueues", "lq-broken", ns)["status"]["conditions"][0]["reason"] == "ClusterQueueIsInactive"
    qr = kc.condition(ns, "wrongpool", "QuotaReserved")
    assert (qr["reason"], qr["message"]) == (
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set main: flavor h100 doesn't match node affinity",
    )
    kc.flavor("ghost", "h100")
    kc.settle()
    assert kc.admitted(ns, "inactive")


def test_deactivation_with_spec_active_false(kc: Cluster):
    ns = setup_queue(kc, 2)
    kc.job(ns, "j", "lq", 2)
    kc.settle(1)
    wl = kc.workload(ns, "j")
    kc.custom.patch_namespaced_custom_object(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"spec": {"active": False}}
    )
    kc.settle(1)
    ev = kc.condition(ns, "j", "Evicted")
    assert (ev["status"], ev["reason"], ev["message"]) == ("True", "Deactivated", "The workload is deactivated")
    assert kc.condition(ns, "j", "Requeued")["status"] == "False"
    assert kc.condition(ns, "j", "QuotaReserved")["status"] == "False"
    assert kc.batch.read_namespaced_job("j", ns).spec.suspend is True
    kc.settle(60)
    assert not kc.admitted(ns, "j")  # not requeued
    assert kc.pending_lq(ns, "lq") == []
    kc.custom.patch_namespaced_custom_object(
        *KUEUE, ns, "workloads", wl["metadata"]["name"], {"spec": {"active": True}}
    )
    kc.settle()
    assert kc.admitted(ns, "j")


def test_maximum_execution_time(kc: Cluster):
    ns = setup_queue(kc, 2)
    kc.job(ns, "slow", "lq", 1, labels={"kueue.x-k8s.io/max-exec-time-seconds": "20"})
    kc.settle(1)
    assert kc.workload(ns, "slow")["spec"]["maximumExecutionTimeSeconds"] == 20
    kc.settle(25)
    ev = kc.condition(ns, "slow", "Evicted")
    assert ev["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert ev["message"] == "The workload is deactivated due to exceeding the maximum execution time"
    assert kc.workload(ns, "slow")["spec"]["active"] is False


def design_tree(kc: Cluster, capacity: int, projects: dict[str, tuple[int, str]]) -> None:
    """The portal's cohort tree (docs/architecture.md) for pool h100 and one department d: projects {name: (deserved,
    over-quota weight)}."""
    kc.flavor()
    deserved_total = sum(d for d, _ in projects.values())
    kc.cohort("portal-h100", nominal=max(0, capacity - deserved_total))
    kc.cohort("dept-d-h100", parent="portal-h100", nominal=0)
    for proj, (deserved, weight) in projects.items():
        kc.cohort(f"proj-{proj}-h100", parent="dept-d-h100", weight=weight)
        ns = f"proj-{proj}"
        kc.core.create_namespace({"metadata": {"name": ns}})
        selector = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
        kc.cluster_queue(
            f"proj-{proj}-h100-guaranteed",
            deserved,
            cohortName=f"proj-{proj}-h100",
            borrowing=0,
            namespaceSelector=selector,
            preemption={"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"},
        )
        kc.cluster_queue(
            f"proj-{proj}-h100-elastic",
            0,
            cohortName=f"proj-{proj}-h100",
            namespaceSelector=selector,
            preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        )
        kc.local_queue("guaranteed-h100", f"proj-{proj}-h100-guaranteed", ns)
        kc.local_queue("elastic-h100", f"proj-{proj}-h100-elastic", ns)
    kc.priority_class("train", 50)
    kc.priority_class("inference", 125)


def test_design_tree_guaranteed_reclaims_lent_quota(kc: Cluster):
    design_tree(kc, 8, {"p": (4, "1"), "q": (4, "1")})
    elastic = [f"e{i}" for i in range(8)]
    for n in elastic:
        kc.job("proj-q", n, "elastic-h100", 1, priority_class="train")
    kc.settle(1)
    assert kc.running("proj-q", elastic) == set(elastic)
    kc.job("proj-p", "serve", "guaranteed-h100", 4, priority_class="inference")
    kc.settle()
    assert kc.admitted("proj-p", "serve")
    victims = set(elastic) - kc.running("proj-q", elastic)
    assert len(victims) == 4
    serve = kc.workload("proj-p", "serve")
    for v in victims:
        pre = kc.condition("proj-q", v, "Preempted")
        assert pre["reason"] == "InCohortReclamation"
        assert f"(UID: {serve['metadata']['uid']}," in pre["message"]
        assert "preemptor path: /portal-h100/dept-d-h100/proj-p-h100/proj-p-h100-guaranteed" in pre["message"]
    # a job in the wrong namespace for a queue is refused by the namespaceSelector
    kc.local_queue("sneaky", "proj-p-h100-guaranteed", "proj-q")
    kc.job("proj-q", "sneak", "sneaky", 1)
    kc.settle()
    qr = kc.condition("proj-q", "sneak", "QuotaReserved")
    assert (qr["reason"], qr["message"]) == ("Misconfigured", "workload namespace doesn't match ClusterQueue selector")


def test_design_tree_non_preemptible_never_preempted(kc: Cluster):
    design_tree(kc, 8, {"p": (4, "1"), "q": (4, "1")})
    kc.job("proj-p", "serve", "guaranteed-h100", 4, priority_class="inference")
    kc.settle(1)
    floods = {proj: [f"{proj}-e{i}" for i in range(8)] for proj in ("p", "q")}
    for proj, names in floods.items():
        for n in names:
            kc.job(f"proj-{proj}", n, "elastic-h100", 1, priority_class="train")
    kc.settle(5)
    assert kc.admitted("proj-p", "serve")
    assert kc.condition("proj-p", "serve", "Evicted") is None
    assert kc.running("proj-p", floods["p"]) == set()  # P's own elastic work cannot take P's guaranteed share
    assert len(kc.running("proj-q", floods["q"])) == 4


def test_design_tree_over_quota_splits_by_weight(kc: Cluster):
    design_tree(kc, 12, {"p": (0, "2"), "q": (0, "1")})
    names = {proj: [f"{proj}-e{i}" for i in range(12)] for proj in ("p", "q")}
    for i in range(12):
        for proj in ("p", "q"):
            kc.job(f"proj-{proj}", names[proj][i], "elastic-h100", 1, priority_class="train")
    kc.settle(1)
    assert (len(kc.running("proj-p", names["p"])), len(kc.running("proj-q", names["q"]))) == (8, 4)
    assert kc.get("cohorts", "proj-p-h100")["status"]["fairSharing"]["weightedShare"] == 334
    assert kc.get("cohorts", "proj-q-h100")["status"]["fairSharing"]["weightedShare"] == 334


def _status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def _denial(err: ApiException, webhook: str) -> str:
    """A validating webhook's refusal as a real API server relays Kueue's: 403 Forbidden, no causes, the webhook's
    field.ErrorList aggregate in the message; returns that aggregate."""
    status = _status_of(err)
    assert (err.status, status["reason"]) == (403, "Forbidden"), status
    assert "details" not in status, status
    prefix = f'admission webhook "{webhook}" denied the request: '
    assert status["message"].startswith(prefix), status["message"]
    return status["message"][len(prefix) :]


def test_webhook_refusals(kc: Cluster):
    kc.flavor()
    with pytest.raises(ApiException) as err:
        kc.cluster_queue("bad-lend", 2, cohortName="co", lending=3)
    errors = _denial(err.value, "vclusterqueue.kb.io")
    assert errors.startswith("spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: ")
    assert "must be less than or equal to the nominalQuota" in errors
    with pytest.raises(ApiException) as err:
        kc.cohort("neg", nominal=-1)
    assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in _denial(err.value, "vcohort.kb.io")
    with pytest.raises(ApiException) as err:
        kc.cohort("rootlimit", nominal=1, borrowing=1)
    assert "must be nil when parent is empty" in _denial(err.value, "vcohort.kb.io")
    kc.cluster_queue("cq", 2)
    kc.cluster_queue("cq2", 2)
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    with pytest.raises(ApiException) as err:  # the CRD's own rule (LocalQueue has no validating webhook): 422
        kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "localqueues", "lq", {"spec": {"clusterQueue": "cq2"}})
    assert err.value.status == 422
    assert _status_of(err.value)["details"]["causes"][0]["field"] == "spec.clusterQueue"


def test_queue_name_immutable_while_running(kc: Cluster):
    ns = setup_queue(kc, 2)
    kc.local_queue("other", "cq", ns)
    kc.job(ns, "j", "lq", 1)
    kc.settle()
    with pytest.raises(ApiException) as err:
        kc.batch.patch_namespaced_job("j", ns, {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "other"}}})
    assert _denial(err.value, "vjob.kb.io").startswith("metadata.labels[kueue.x-k8s.io/queue-name]: ")


def test_wait_for_pods_ready_timeout_backoff_and_deactivation(kc_ready: Cluster):
    kc = kc_ready
    kc.ks.reset()
    kc.flavor("nowhere", "no-such-pool")  # pods of this flavor never find a node, so never become ready
    kc.cluster_queue("cq", 2, flavor="nowhere")
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    kc.job(ns, "stuck", "lq", 1)
    kc.settle(1)
    assert kc.admitted(ns, "stuck")
    pr = kc.condition(ns, "stuck", "PodsReady")
    assert (pr["status"], pr["reason"]) == ("False", "WaitForStart")
    kc.settle(60)
    ev = kc.condition(ns, "stuck", "Evicted")
    wl = kc.workload(ns, "stuck")
    assert (ev["reason"], ev["message"]) == (
        "PodsReadyTimeout",
        f"Exceeded the PodsReady timeout {ns}/{wl['metadata']['name']}",
    )
    assert wl["status"]["requeueState"]["count"] == 1
    assert kc.condition(ns, "stuck", "Requeued")["status"] == "False"
    assert not kc.admitted(ns, "stuck")
    kc.settle(11)  # backoff of 10s then requeued and admitted again
    assert kc.condition(ns, "stuck", "Requeued")["reason"] == "BackoffFinished"
    assert kc.admitted(ns, "stuck")
    kc.settle(61)  # second timeout exceeds backoffLimitCount 1: deactivated
    ev = kc.condition(ns, "stuck", "Evicted")
    assert ev["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
    assert ev["message"] == "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    assert kc.workload(ns, "stuck")["spec"]["active"] is False


def test_wait_for_pods_ready_started(kc_ready: Cluster):
    kc = kc_ready
    kc.ks.reset()
    kc.flavor()
    kc.cluster_queue("cq", 2)
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    kc.job(ns, "ok", "lq", 1)
    kc.settle(2)
    pr = kc.condition(ns, "ok", "PodsReady")
    assert (pr["status"], pr["reason"], pr["message"]) == (
        "True",
        "Started",
        "All pods reached readiness and the workload is running",
    )
    kc.settle(120)
    assert kc.condition(ns, "ok", "Evicted") is None


def test_cluster_queue_deletion_waits_for_reserving_workloads(kc: Cluster):
    ns = setup_queue(kc, 2)
    kc.job(ns, "j", "lq", 1, seconds=30)
    kc.settle(1)
    assert kc.get("clusterqueues", "cq")["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    kc.custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", "cq")
    kc.settle()
    cq = kc.get("clusterqueues", "cq")
    assert cq["metadata"]["deletionTimestamp"]
    assert cq["status"]["conditions"][0]["reason"] == "Terminating"
    kc.custom.delete_cluster_custom_object(*KUEUE, "resourceflavors", "h100")
    kc.settle(40)  # the job finishes, its workload stops reserving quota, the ClusterQueue goes, then the flavor
    for plural, name in (("clusterqueues", "cq"), ("resourceflavors", "h100")):
        with pytest.raises(ApiException) as err:
            kc.get(plural, name)
        assert err.value.status == 404


def test_hold_and_drain_then_restart(kc: Cluster):
    ns = setup_queue(kc, 2)
    kc.job(ns, "j", "lq", 1)
    kc.settle(1)
    assert kc.admitted(ns, "j")
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cq", {"spec": {"stopPolicy": "HoldAndDrain"}})
    kc.settle(1)
    ev = kc.condition(ns, "j", "Evicted")
    assert (ev["reason"], ev["message"]) == ("ClusterQueueStopped", "The ClusterQueue is stopped")
    qr = kc.condition(ns, "j", "QuotaReserved")
    assert (qr["reason"], qr["message"]) == ("Suspended", "ClusterQueue cq is inactive")
    assert kc.get("clusterqueues", "cq")["status"]["conditions"][0]["reason"] == "Stopped"
    kc.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", "cq", {"spec": {"stopPolicy": "None"}})
    kc.settle(1)
    assert kc.condition(ns, "j", "Requeued")["reason"] == "ClusterQueueRestarted"
    assert kc.admitted(ns, "j")


def test_partial_admission(kc: Cluster):
    ns = setup_queue(kc, 4)
    kc.job(ns, "gang", "lq", 1, parallelism=6, annotations={"kueue.x-k8s.io/job-min-parallelism": "2"})
    kc.settle(1)
    wl = kc.workload(ns, "gang")
    assert wl["spec"]["podSets"][0]["minCount"] == 2
    assert wl["status"]["admission"]["podSetAssignments"][0]["count"] == 4
    job = kc.batch.read_namespaced_job("gang", ns)
    assert (job.spec.parallelism, job.spec.suspend) == (4, False)
    assert job.status.active == 4


def test_queue_name_change_while_suspended(kc: Cluster):
    ns = setup_queue(kc, 1)
    kc.cluster_queue("cq2", 1, flavor="h100")
    kc.local_queue("lq2", "cq2", ns)
    kc.job(ns, "first", "lq", 1)
    kc.settle(1)
    kc.job(ns, "moved", "lq", 1)
    kc.settle(1)
    assert not kc.admitted(ns, "moved")
    kc.batch.patch_namespaced_job("moved", ns, {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "lq2"}}})
    kc.settle()
    assert kc.workload(ns, "moved")["spec"]["queueName"] == "lq2"
    assert kc.workload(ns, "moved")["status"]["admission"]["clusterQueue"] == "cq2"


def test_visibility_positions_across_local_queues_and_priority(kc: Cluster):
    kc.priority_class("urgent", 100)
    ns = setup_queue(kc, 1)
    kc.local_queue("lq2", "cq", ns)
    kc.job(ns, "running", "lq", 1)
    kc.settle(1)
    for name, queue, pc in (("a", "lq", None), ("b", "lq2", None), ("c", "lq", "urgent"), ("d", "lq2", None)):
        kc.job(ns, name, queue, 1, priority_class=pc)
        kc.settle(1)

    def rows(items: list[dict]) -> list[tuple]:
        return [
            (
                i["metadata"]["ownerReferences"][0]["name"],
                i["localQueueName"],
                i["priority"],
                i["positionInClusterQueue"],
                i["positionInLocalQueue"],
            )
            for i in items
        ]

    assert rows(kc.pending_cq("cq")) == [
        ("c", "lq", 100, 0, 0),
        ("a", "lq", 0, 1, 1),
        ("b", "lq2", 0, 2, 0),
        ("d", "lq2", 0, 3, 1),
    ]
    assert rows(kc.pending_lq(ns, "lq2")) == [("b", "lq2", 0, 2, 0), ("d", "lq2", 0, 3, 1)]
    assert rows(kc.pending_lq(ns, "lq2", offset=1, limit=5)) == [("d", "lq2", 0, 3, 1)]
    lq2 = kc.get("localqueues", "lq2", ns)["status"]
    assert (lq2["pendingWorkloads"], lq2["admittedWorkloads"]) == (2, 0)


def test_local_queue_stop_policy(kc: Cluster):
    ns = setup_queue(kc, 2)
    kc.job(ns, "running", "lq", 1)
    kc.settle(1)
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "localqueues", "lq", {"spec": {"stopPolicy": "Hold"}})
    kc.job(ns, "held", "lq", 1)
    kc.settle(1)
    assert kc.admitted(ns, "running")
    qr = kc.condition(ns, "held", "QuotaReserved")
    assert (qr["reason"], qr["message"]) == ("Suspended", "LocalQueue lq is inactive")
    active = kc.get("localqueues", "lq", ns)["status"]["conditions"][0]
    assert (active["status"], active["reason"], active["message"]) == ("False", "Stopped", "LocalQueue is stopped")
    kc.custom.patch_namespaced_custom_object(*KUEUE, ns, "localqueues", "lq", {"spec": {"stopPolicy": "None"}})
    kc.settle()
    assert kc.admitted(ns, "held")


def test_suspended_job_edit_updates_workload_and_requeue_is_clean(kc: Cluster):
    kc.priority_class("low", 1)
    kc.priority_class("high", 10)
    ns = setup_queue(kc, 2, preemption={"withinClusterQueue": "LowerPriority"})
    kc.job(ns, "low", "lq", 2, priority_class="low")
    kc.settle(1)
    kc.job(ns, "high", "lq", 2, priority_class="high")
    kc.settle(1)
    assert not kc.admitted(ns, "low")
    kc.batch.delete_namespaced_job("high", ns, propagation_policy="Background")
    kc.settle(1)
    assert kc.admitted(ns, "low")  # re-admitted after the preemption, with the same Workload
    assert "UpdatedWorkload" not in [r for r, _ in kc.events(ns, "low")]
    kc.job(ns, "edit", "lq", 1)
    kc.settle(1)
    assert not kc.admitted(ns, "edit")  # the queue is full: the Job stays suspended
    selector = {"portal.gpu/pool": "h100", "team": "a"}
    kc.batch.patch_namespaced_job("edit", ns, {"spec": {"template": {"spec": {"nodeSelector": selector}}}})
    kc.settle()
    assert kc.workload(ns, "edit")["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] == selector
    wl_name = kc.workload(ns, "edit")["metadata"]["name"]
    assert ("UpdatedWorkload", f"Updated not matching Workload for suspended job: {ns}/{wl_name}") in kc.events(
        ns, "edit"
    )


def test_missing_workload_priority_class(kc: Cluster):
    ns = setup_queue(kc, 2)
    kc.job(ns, "j", "lq", 1, priority_class="ghost")
    kc.settle()
    assert ("WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "ghost" not found') in kc.events(ns, "j")
    assert kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"] == []
    kc.priority_class("ghost", 5)
    kc.batch.patch_namespaced_job("j", ns, {"metadata": {"annotations": {"touch": "1"}}})
    kc.settle()
    assert kc.workload(ns, "j")["spec"]["priority"] == 5
    assert kc.admitted(ns, "j")


def test_forecast_from_objects_read_through_the_client(kc: Cluster):
    from datetime import timedelta

    from kubesim.kueue.scheduler import Snapshot, forecast
    from kubesim.kueue.scheduler.model import parse_time

    ns = setup_queue(kc, 1)
    for i in range(3):
        kc.job(ns, f"j{i}", "lq", 1, seconds=60)
        kc.settle(1)
    now = parse_time(kc.ks.advance(0).replace("+00:00", "Z"))

    def items(plural: str) -> list[dict]:
        return kc.custom.list_cluster_custom_object(*KUEUE, plural)["items"]

    snap = Snapshot.from_objects(
        resource_flavors=items("resourceflavors"),
        cohorts=items("cohorts"),
        cluster_queues=items("clusterqueues"),
        local_queues=kc.custom.list_namespaced_custom_object(*KUEUE, ns, "localqueues")["items"],
        workloads=kc.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"],
        now=now,
    )
    starts = forecast(snap, lambda wl: 60, now)
    by_job = {kc.workload(ns, f"j{i}")["metadata"]["name"]: f"j{i}" for i in range(3)}
    got = {by_job[key.split("/")[1]]: (at - now) for key, at in starts.items()}
    # j0 started 3 s ago and runs 60 s; j1 and j2 follow one after the other
    assert got == {"j1": timedelta(seconds=57), "j2": timedelta(seconds=117)}
