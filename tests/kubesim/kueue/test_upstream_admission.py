"""Admission, flavor assignment and borrowing cases ported from Kueue's own tests (v0.19.2), run on kubesim's core
on plain data: same objects, same admitted workloads with the same flavors (and counts), same workloads left in the
queues or set aside as inadmissible, same victims where a case preempts.

Sources: pkg/scheduler/scheduler_test.go (TestSchedule, TestEntryOrdering, TestLastSchedulingContext,
TestLastAssignmentOutdated, TestRequeueAndUpdate, TestEntryComparerLess, TestResourcesToReserve,
TestFitsDedupsOverlappingVictims), scheduler_fs_test.go (TestScheduleForFairSharing), scheduler_afs_test.go
(TestScheduleForAFS), flavorassigner/flavorassigner_test.go (TestAssignFlavors, TestReclaimBeforePriorityPreemption,
TestDeletedFlavors, TestHierarchical, TestIsPreferred, TestIsNoFitDueToCapacityAndLimits) and scenarios of
test/integration/singlecluster/scheduler replayed through sim.py. Each test id (or test name) is the upstream case
name. Cases that need what kubesim does not model (TAS and pod set groups, MultiKueue and preemption gates, workload
slices, LimitRanges, API errors, feature gates switched from their defaults) are not ported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from kubesim.kueue import workload_status as ws
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler import Scheduler, Snapshot
from tests.kubesim.kueue.sim import T0

CPU = "cpu"
GPU = "example.com/gpu"
MAIN = "main"

# -- plain-data builders, shaped like Kueue's test wrappers ----------------------------------------------------------


def res(name: str, nominal: str, borrowing: str = "", lending: str = "") -> dict:
    """FlavorQuotas.Resource(name, nominal, borrowingLimit, lendingLimit): '' leaves a limit unset."""
    r = {"name": name, "nominalQuota": nominal}
    if borrowing:
        r["borrowingLimit"] = borrowing
    if lending:
        r["lendingLimit"] = lending
    return r


def fq(flavor: str, *resources: dict) -> dict:
    return {"name": flavor, "resources": list(resources)}


def rg(*flavors: dict) -> dict:
    covered: list[str] = []
    for f in flavors:
        for r in f["resources"]:
            if r["name"] not in covered:
                covered.append(r["name"])
    return {"coveredResources": covered, "flavors": list(flavors)}


def cq(
    name: str,
    *groups: dict,
    cohort: str = "",
    selector: dict | None = None,
    strict: bool = False,
    preemption: dict | None = None,
    fungibility: dict | None = None,
    weight: str | None = None,
) -> dict:
    """MakeClusterQueue: selects every namespace, BestEffortFIFO, flavorFungibility whenCanBorrow MayStopSearch and
    whenCanPreempt TryNextFlavor unless given (a given one replaces it whole, as FlavorFungibility() does; fields left
    out of it, or out of a given preemption, stay unset as in Kueue's Go structs)."""
    spec: dict = {
        "namespaceSelector": {} if selector is None else selector,
        "queueingStrategy": "StrictFIFO" if strict else "BestEffortFIFO",
        "flavorFungibility": fungibility or {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "resourceGroups": list(groups),
    }
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = preemption
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"metadata": {"name": name}, "spec": spec}


def cohort(name: str, *groups: dict, parent: str = "", weight: str | None = None) -> dict:
    spec: dict = {"resourceGroups": list(groups)}
    if parent:
        spec["parentName"] = parent
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"metadata": {"name": name}, "spec": spec}


def dep(value: str) -> dict:
    return {"matchExpressions": [{"key": "dep", "operator": "In", "values": [value]}]}


def lq(name: str, namespace: str, cluster_queue: str) -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue}}


def pod_set(
    name: str,
    count: int,
    requests: dict[str, str],
    min_count: int | None = None,
    tolerations: list | None = None,
    selector: dict | None = None,
    affinity: list[list[dict]] | None = None,
) -> dict:
    """A PodSet of count pods with one container; affinity: required node affinity terms (ORed) of expressions."""
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": dict(requests)}}]}
    if affinity is not None:
        terms = [{"matchExpressions": exprs} for exprs in affinity]
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    if tolerations:
        spec["tolerations"] = tolerations
    if selector:
        spec["nodeSelector"] = selector
    out = {"name": name, "count": count, "template": {"spec": spec}}
    if min_count is not None:
        out["minCount"] = min_count
    return out


def wl(
    name: str,
    namespace: str,
    queue: str = "",
    requests: dict[str, str] | None = None,
    podsets: list[dict] | None = None,
    priority: int = 0,
    created: float = 0.0,
    admitted: tuple[str, dict[str, dict[str, str]]] | None = None,
    uid: str = "",
    reserved: float = 0.0,
) -> dict:
    """MakeWorkload: one 'main' PodSet of one pod unless podsets are given; requests go to that PodSet.
    admitted=(cluster queue, {pod set: {resource: flavor}}) reserves quota (usage = requests x count)."""
    if podsets is None:
        podsets = [pod_set(MAIN, 1, requests or {})]
    obj: dict = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"{namespace}/{name}",
            "creationTimestamp": ws.ts(T0 + timedelta(seconds=created)),
        },
        "spec": {"queueName": queue, "priority": priority, "podSets": podsets},
        "status": {},
    }
    if admitted is not None:
        cq_name, flavors = admitted
        psas = []
        for p in podsets:
            if p["name"] not in flavors:
                continue
            reqs = p["template"]["spec"]["containers"][0]["resources"]["requests"]
            from kubesim.kernel.quantity import format_amount, to_amount

            usage = {
                r: format_amount(r, to_amount(r, v) * p["count"]) for r, v in reqs.items() if r in flavors[p["name"]]
            }
            psas.append({"name": p["name"], "flavors": flavors[p["name"]], "resourceUsage": usage, "count": p["count"]})
        ws.set_quota_reservation(obj, cq_name, psas, T0 + timedelta(seconds=reserved))
    return obj


def flavor(name: str, taints: list[dict] | None = None, labels: dict | None = None) -> dict:
    return {"metadata": {"name": name}, "spec": {"nodeTaints": taints or [], "nodeLabels": labels or {}}}


def taint(key: str, value: str, effect: str = "NoSchedule") -> dict:
    return {"key": key, "value": value, "effect": effect}


# -- TestSchedule's fixture -----------------------------------------------------------------------------------------

SCHEDULE_FLAVORS = [
    flavor("default"),
    flavor("on-demand"),
    flavor("spot"),
    flavor("model-a"),
    flavor("spot-tainted", [taint("key", "val")]),
    flavor("spot-tainted-2", [taint("key", "val2")]),
]

NAMESPACES = [
    {"metadata": {"name": "default"}},
    *({"metadata": {"name": n, "labels": {"dep": "eng"}}} for n in ("eng-alpha", "eng-beta", "eng-gamma")),
    {"metadata": {"name": "sales", "labels": {"dep": "sales"}}},
    {"metadata": {"name": "lend", "labels": {"dep": "lend"}}},
]

RECLAIM_ANY = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}

SCHEDULE_CQS = [
    cq("sales", rg(fq("default", res(CPU, "50", "0"))), selector=dep("sales"), strict=True),
    cq(
        "eng-alpha",
        rg(fq("on-demand", res(CPU, "50", "50")), fq("spot", res(CPU, "100", "0"))),
        cohort="eng",
        selector=dep("eng"),
        strict=True,
    ),
    cq(
        "eng-beta",
        rg(fq("on-demand", res(CPU, "50", "10")), fq("spot", res(CPU, "0", "100"))),
        rg(fq("model-a", res(GPU, "20", "0"))),
        cohort="eng",
        selector=dep("eng"),
        strict=True,
        preemption=RECLAIM_ANY,
    ),
    cq("flavor-nonexistent-cq", rg(fq("nonexistent-flavor", res(CPU, "50"))), strict=True),
    cq("lend-a", rg(fq("default", res(CPU, "3", "", "2"))), cohort="lend", selector=dep("lend")),
    cq("lend-b", rg(fq("default", res(CPU, "2", "", "2"))), cohort="lend", selector=dep("lend")),
]

SCHEDULE_LQS = [
    lq("main", "sales", "sales"),
    lq("blocked", "sales", "eng-alpha"),
    lq("main", "eng-alpha", "eng-alpha"),
    lq("main", "eng-beta", "eng-beta"),
    lq("flavor-nonexistent-queue", "sales", "flavor-nonexistent-cq"),
    lq("cq-nonexistent-queue", "sales", "nonexistent-cq"),
    lq("lend-a-queue", "lend", "lend-a"),
    lq("lend-b-queue", "lend", "lend-b"),
]


@dataclass
class Case:
    """One upstream case: inputs and the outcome of one cycle.

    admitted: workloads admitted in this cycle -> (cluster queue, {pod set: {resource: flavor}}), or with counts
    (cluster queue, {pod set: ({resource: flavor}, count)}); left / inadmissible: pending workloads per cluster
    queue after the cycle (in the heap / set aside); preempted: victims; messages: QuotaReserved=False messages.
    """

    workloads: list[dict]
    admitted: dict = field(default_factory=dict)
    left: dict[str, list[str]] = field(default_factory=dict)
    inadmissible: dict[str, list[str]] = field(default_factory=dict)
    preempted: set[str] = field(default_factory=set)
    messages: dict[str, str] = field(default_factory=dict)
    cluster_queues: list[dict] = field(default_factory=list)
    local_queues: list[dict] = field(default_factory=list)
    cohorts: list[dict] = field(default_factory=list)
    fair_sharing: bool = False
    base: bool = True  # TestSchedule's fixture queues (False: only the case's own)
    flavors: list[dict] | None = None


def run_case(case: Case) -> None:
    snap = Snapshot.from_objects(
        resource_flavors=case.flavors if case.flavors is not None else SCHEDULE_FLAVORS,
        cohorts=case.cohorts,
        cluster_queues=(SCHEDULE_CQS if case.base else []) + case.cluster_queues,
        local_queues=(SCHEDULE_LQS if case.base else []) + case.local_queues,
        workloads=case.workloads,
        namespaces=NAMESPACES,
        config=KueueConfig(fair_sharing=case.fair_sharing, quota_check_strategy="BlockUndeclared"),
        now=T0,
    )
    scheduler = Scheduler()
    result = scheduler.cycle(snap, T0)

    got_admitted = {}
    for a in result.admitted:
        want = case.admitted.get(a.workload.key)
        with_counts = want is not None and any(isinstance(v, tuple) for v in want[1].values())
        got_admitted[a.workload.key] = (
            a.cluster_queue,
            {p["name"]: (p["flavors"], p["count"]) if with_counts else p["flavors"] for p in a.podset_assignments},
        )
    assert got_admitted == case.admitted

    admitted_keys = {a.workload.key for a in result.admitted}
    left: dict[str, list[str]] = {}
    aside: dict[str, list[str]] = {}
    for name, pending in snap.pending.items():
        for w in pending:
            if w.key in admitted_keys:
                continue
            target = aside if w.key in scheduler.queues.inadmissible.get(name, set()) else left
            target.setdefault(name, []).append(w.key)
    assert {k: sorted(v) for k, v in left.items()} == {k: sorted(v) for k, v in case.left.items()}
    assert {k: sorted(v) for k, v in aside.items()} == {k: sorted(v) for k, v in case.inadmissible.items()}
    assert {p.victim.key for p in result.preempted} == case.preempted
    got_messages = {p.workload.key: p.message for p in result.pending}
    for key, message in case.messages.items():
        assert got_messages.get(key) == message, key


def on(cq_name: str, **podsets: dict[str, str]) -> tuple[str, dict[str, dict[str, str]]]:
    return cq_name, podsets


def at(cq_name: str, flavor_name: str, podset: str = MAIN, resource: str = CPU) -> tuple[str, dict]:
    """An admission of one pod set with one resource in one flavor."""
    return cq_name, {podset: {resource: flavor_name}}


# -- pkg/scheduler/scheduler_test.go: TestSchedule -------------------------------------------------------------------

OTHER_ALPHA_MAY_STOP = cq(
    "other-alpha",
    rg(fq("on-demand", res(CPU, "50", "50")), fq("spot", res(CPU, "100", "0"))),
    preemption={"withinClusterQueue": "LowerPriority"},
    fungibility={"whenCanPreempt": "MayStopSearch"},
)

SCHEDULE_CASES: dict[str, Case] = {
    "use second flavor when the first has no preemption candidates; WhenCanPreempt: MayStopSearch": Case(
        cluster_queues=[OTHER_ALPHA_MAY_STOP],
        local_queues=[lq("other", "eng-alpha", "other-alpha")],
        workloads=[
            wl("admitted", "eng-alpha", "other", {CPU: "50"}, admitted=at("other-alpha", "on-demand")),
            wl("new", "eng-alpha", "other", {CPU: "20"}),
        ],
        admitted={"eng-alpha/new": at("other-alpha", "spot")},
    ),
    "workload fits in single clusterQueue, with check state ready": Case(
        workloads=[wl("foo", "sales", "main", podsets=[pod_set("one", 10, {CPU: "1"})])],
        admitted={"sales/foo": ("sales", {"one": ({CPU: "default"}, 10)})},
    ),
    "skip workload with missing or deleted ClusterQueue (NoFit)": Case(
        workloads=[wl("missing-cq-workload", "sales", "non-existent-queue", podsets=[pod_set("set", 1, {CPU: "1"})])],
    ),
    "flavors with mixed misconfiguration and insufficient quota": Case(
        cluster_queues=[
            cq(
                "custom-cq",
                rg(fq("spot-tainted", res(CPU, "20", "20")), fq("on-demand", res(CPU, "15", "15"))),
                strict=True,
            )
        ],
        local_queues=[lq("custom-q", "sales", "custom-cq")],
        workloads=[
            wl("existing-on-demand-job", "sales", "custom-q", {CPU: "10"}, admitted=at("custom-cq", "on-demand")),
            wl("new-job", "sales", "custom-q", {CPU: "10"}),
        ],
        left={"custom-cq": ["sales/new-job"]},
        messages={
            "sales/new-job": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
            "on-demand, 5 more needed, untolerated taint {key val NoSchedule <nil>} in flavor spot-tainted",
        },
    ),
    "flavors with mixed taint mismatch and exceeding limits": Case(
        cluster_queues=[
            cq(
                "custom-cq2",
                rg(fq("spot-tainted", res(CPU, "20", "20")), fq("on-demand", res(CPU, "5", "5"))),
                strict=True,
            )
        ],
        local_queues=[lq("custom-q2", "sales", "custom-cq2")],
        workloads=[wl("new-job2", "sales", "custom-q2", {CPU: "10"})],
        left={"custom-cq2": ["sales/new-job2"]},
    ),
    "flavors are structurally incompatible": Case(
        cluster_queues=[
            cq(
                "custom-cq3",
                rg(fq("spot-tainted", res(CPU, "20", "20")), fq("spot-tainted-2", res(CPU, "5", "5"))),
                strict=True,
            )
        ],
        local_queues=[lq("custom-q3", "sales", "custom-cq3")],
        workloads=[wl("new-job3", "sales", "custom-q3", {CPU: "1"})],
        left={"custom-cq3": ["sales/new-job3"]},
    ),
    "workload fits in single clusterQueue, with check state pending": Case(
        workloads=[wl("foo", "sales", "main", podsets=[pod_set("one", 10, {CPU: "1"})])],
        admitted={"sales/foo": ("sales", {"one": ({CPU: "default"}, 10)})},
    ),
    "single clusterQueue full": Case(
        workloads=[
            wl("new", "sales", "main", podsets=[pod_set("one", 11, {CPU: "1"})]),
            wl(
                "assigned",
                "sales",
                podsets=[pod_set("one", 40, {CPU: "1"})],
                admitted=on("sales", one={CPU: "default"}),
            ),
        ],
        left={"sales": ["sales/new"]},
        messages={
            "sales/new": "couldn't assign flavors to pod set one: insufficient unused quota for cpu in flavor default, "
            "1 more needed"
        },
    ),
    "failed to match clusterQueue selector": Case(
        workloads=[wl("new", "sales", "blocked", podsets=[pod_set("one", 1, {CPU: "1"})])],
        inadmissible={"eng-alpha": ["sales/new"]},
        messages={"sales/new": "workload namespace doesn't match ClusterQueue selector"},
    ),
    "admit in different cohorts": Case(
        workloads=[
            wl("new", "sales", "main", podsets=[pod_set("one", 1, {CPU: "1"})]),
            wl("new", "eng-alpha", "main", podsets=[pod_set("one", 51, {CPU: "1"})]),
        ],
        admitted={
            "sales/new": ("sales", {"one": ({CPU: "default"}, 1)}),
            "eng-alpha/new": ("eng-alpha", {"one": ({CPU: "on-demand"}, 51)}),
        },
    ),
    "admit in same cohort with no borrowing": Case(
        workloads=[
            wl("new", "eng-alpha", "main", podsets=[pod_set("one", 40, {CPU: "1"})]),
            wl("new", "eng-beta", "main", podsets=[pod_set("one", 40, {CPU: "1"})]),
        ],
        admitted={
            "eng-alpha/new": ("eng-alpha", {"one": ({CPU: "on-demand"}, 40)}),
            "eng-beta/new": ("eng-beta", {"one": ({CPU: "on-demand"}, 40)}),
        },
    ),
    "assign multiple resources and flavors": Case(
        workloads=[
            wl(
                "new",
                "eng-beta",
                "main",
                podsets=[pod_set("one", 10, {CPU: "6", GPU: "1"}), pod_set("two", 40, {CPU: "1"})],
            )
        ],
        admitted={
            "eng-beta/new": (
                "eng-beta",
                {"one": ({CPU: "on-demand", GPU: "model-a"}, 10), "two": ({CPU: "spot"}, 40)},
            )
        },
    ),
    "cannot borrow if cohort was assigned and would result in overadmission": Case(
        workloads=[
            wl("new", "eng-alpha", "main", podsets=[pod_set("one", 45, {CPU: "1"})]),
            wl("new", "eng-beta", "main", podsets=[pod_set("one", 56, {CPU: "1"})]),
        ],
        admitted={"eng-alpha/new": ("eng-alpha", {"one": ({CPU: "on-demand"}, 45)})},
        left={"eng-beta": ["eng-beta/new"]},
        messages={"eng-beta/new": "Workload no longer fits after processing another workload"},
    ),
    "can borrow if cohort was assigned and will not result in overadmission": Case(
        workloads=[
            wl("new", "eng-alpha", "main", podsets=[pod_set("one", 45, {CPU: "1"})]),
            wl("new", "eng-beta", "main", podsets=[pod_set("one", 55, {CPU: "1"})]),
        ],
        admitted={
            "eng-alpha/new": ("eng-alpha", {"one": ({CPU: "on-demand"}, 45)}),
            "eng-beta/new": ("eng-beta", {"one": ({CPU: "on-demand"}, 55)}),
        },
    ),
    "can borrow if needs reclaim from cohort in different flavor": Case(
        workloads=[
            wl("can-reclaim", "eng-alpha", "main", {CPU: "100"}),
            wl("needs-to-borrow", "eng-beta", "main", {CPU: "1"}),
            wl("user-on-demand", "eng-beta", requests={CPU: "50"}, admitted=at("eng-beta", "on-demand")),
            wl("user-spot", "eng-beta", requests={CPU: "1"}, admitted=at("eng-beta", "spot")),
        ],
        admitted={"eng-beta/needs-to-borrow": at("eng-beta", "on-demand")},
        left={"eng-alpha": ["eng-alpha/can-reclaim"]},
        messages={
            "eng-alpha/can-reclaim": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
            "flavor on-demand, 50 more needed, insufficient unused quota for cpu in flavor spot, 1 more needed"
        },
    ),
    "workload exceeds lending limit when borrow in cohort": Case(
        workloads=[
            wl("a", "lend", requests={CPU: "2"}, admitted=at("lend-b", "default")),
            wl("b", "lend", "lend-b-queue", {CPU: "3"}),
        ],
        inadmissible={"lend-b": ["lend/b"]},
        messages={
            "lend/b": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
            "1 more needed"
        },
    ),
}

LENDER_BORROWER = [cohort("root"), cohort("child", parent="root")]


def lender_borrower_queues(lending: str) -> list[dict]:
    lender = {"name": CPU, "nominalQuota": "10", "lendingLimit": lending}
    borrower = {"name": CPU, "nominalQuota": "5", "borrowingLimit": "10"}
    return [
        cq("cq-lender", rg(fq("on-demand", lender)), cohort="child", selector=dep("eng")),
        cq("cq-borrower", rg(fq("on-demand", borrower)), cohort="child", selector=dep("eng")),
    ]


LENDER_BORROWER_LQS = [lq("lq-lender", "eng-alpha", "cq-lender"), lq("lq-borrower", "eng-alpha", "cq-borrower")]

SCHEDULE_CASES.update(
    {
        "hierarchical cohort respects lending limit when borrowing": Case(
            cohorts=LENDER_BORROWER,
            cluster_queues=lender_borrower_queues("3"),
            local_queues=LENDER_BORROWER_LQS,
            workloads=[
                wl("wl-existing", "eng-alpha", requests={CPU: "5"}, admitted=at("cq-borrower", "on-demand")),
                wl("wl-pending", "eng-alpha", "lq-borrower", {CPU: "4"}),
            ],
            inadmissible={"cq-borrower": ["eng-alpha/wl-pending"]},
        ),
        "hierarchical cohort allows borrowing up to lending limit": Case(
            cohorts=LENDER_BORROWER,
            cluster_queues=lender_borrower_queues("5"),
            local_queues=LENDER_BORROWER_LQS,
            workloads=[
                wl("wl-existing", "eng-alpha", requests={CPU: "5"}, admitted=at("cq-borrower", "on-demand")),
                wl("wl-borrowing", "eng-alpha", "lq-borrower", {CPU: "5"}),
            ],
            admitted={"eng-alpha/wl-borrowing": at("cq-borrower", "on-demand")},
        ),
        "preempt workloads in ClusterQueue and cohort": Case(
            workloads=[
                wl("preemptor", "eng-beta", "main", {CPU: "20"}),
                wl("use-all-spot", "eng-alpha", requests={CPU: "100"}, admitted=at("eng-alpha", "spot")),
                wl("low-1", "eng-beta", requests={CPU: "30"}, priority=-1, admitted=at("eng-beta", "on-demand")),
                wl("low-2", "eng-beta", requests={CPU: "10"}, priority=-2, admitted=at("eng-beta", "on-demand")),
                wl("borrower", "eng-alpha", requests={CPU: "60"}, admitted=at("eng-alpha", "on-demand")),
            ],
            left={"eng-beta": ["eng-beta/preemptor"]},
            preempted={"eng-alpha/borrower", "eng-beta/low-2"},
        ),
        "multiple CQs need preemption": Case(
            cluster_queues=[
                cq("other-alpha", rg(fq("on-demand", res(CPU, "50", "50"))), cohort="other"),
                cq("other-beta", rg(fq("on-demand", res(CPU, "50", "10"))), cohort="other", preemption=RECLAIM_ANY),
            ],
            local_queues=[lq("other", "eng-alpha", "other-alpha"), lq("other", "eng-beta", "other-beta")],
            workloads=[
                wl("preemptor", "eng-beta", "other", {CPU: "1"}, priority=-1),
                wl("pending", "eng-alpha", "other", {CPU: "1"}, priority=1),
                wl("use-all", "eng-alpha", requests={CPU: "100"}, admitted=at("other-alpha", "on-demand")),
            ],
            left={"other-beta": ["eng-beta/preemptor"]},
            inadmissible={"other-alpha": ["eng-alpha/pending"]},
            preempted={"eng-alpha/use-all"},
        ),
        "cannot borrow resource not listed in clusterQueue": Case(
            workloads=[wl("new", "eng-alpha", "main", {GPU: "1"})],
            left={"eng-alpha": ["eng-alpha/new"]},
            messages={
                "eng-alpha/new": "couldn't assign flavors to pod set main: resource example.com/gpu unavailable in "
                "ClusterQueue"
            },
        ),
        "not enough resources to borrow, fallback to next flavor; WhenCanPreempt: TryNextFlavor": Case(
            workloads=[
                wl("new", "eng-alpha", "main", podsets=[pod_set("one", 60, {CPU: "1"})]),
                wl(
                    "existing",
                    "eng-beta",
                    podsets=[pod_set("one", 45, {CPU: "1"})],
                    admitted=on("eng-beta", one={CPU: "on-demand"}),
                ),
            ],
            admitted={"eng-alpha/new": ("eng-alpha", {"one": ({CPU: "spot"}, 60)})},
        ),
        "workload should not fit in nonexistent clusterQueue": Case(
            workloads=[wl("foo", "sales", "cq-nonexistent-queue", {CPU: "1"})],
        ),
        "workload should not fit in clusterQueue with nonexistent flavor": Case(
            workloads=[wl("foo", "sales", "flavor-nonexistent-queue", {CPU: "1"})],
            left={"flavor-nonexistent-cq": ["sales/foo"]},
        ),
        "no overadmission while borrowing": Case(
            cluster_queues=[
                cq(
                    "eng-gamma",
                    rg(fq("on-demand", res(CPU, "50", "10")), fq("spot", res(CPU, "0", "100"))),
                    cohort="eng",
                    preemption=RECLAIM_ANY,
                )
            ],
            local_queues=[lq("main", "eng-gamma", "eng-gamma")],
            workloads=[
                wl("new", "eng-beta", "main", podsets=[pod_set("one", 50, {CPU: "1"})], created=-2),
                wl("new-alpha", "eng-alpha", "main", podsets=[pod_set("one", 1, {CPU: "1"})], created=-1),
                wl("new-gamma", "eng-gamma", "main", podsets=[pod_set("one", 50, {CPU: "1"})]),
                wl(
                    "existing",
                    "eng-gamma",
                    podsets=[pod_set("borrow-on-demand", 51, {CPU: "1"}), pod_set("use-all-spot", 100, {CPU: "1"})],
                    admitted=on("eng-gamma", **{"borrow-on-demand": {CPU: "on-demand"}, "use-all-spot": {CPU: "spot"}}),
                ),
            ],
            admitted={
                "eng-beta/new": ("eng-beta", {"one": ({CPU: "on-demand"}, 50)}),
                "eng-alpha/new-alpha": ("eng-alpha", {"one": ({CPU: "on-demand"}, 1)}),
            },
            inadmissible={"eng-gamma": ["eng-gamma/new-gamma"]},
            messages={
                "eng-gamma/new-gamma": "couldn't assign flavors to pod set one: insufficient unused quota for cpu in "
                "flavor on-demand, 41 more needed, insufficient unused quota for cpu in flavor spot, 50 more needed"
            },
        ),
        "partial admission single variable pod set": Case(
            workloads=[wl("new", "sales", "main", podsets=[pod_set("one", 50, {CPU: "2"}, min_count=20)])],
            admitted={"sales/new": ("sales", {"one": ({CPU: "default"}, 25)})},
        ),
        "partial admission single variable pod set, preempt first": Case(
            workloads=[
                wl("new", "eng-beta", "main", podsets=[pod_set("one", 20, {GPU: "1"}, min_count=10)], priority=4),
                wl(
                    "old",
                    "eng-beta",
                    podsets=[pod_set("one", 10, {GPU: "1"})],
                    priority=-4,
                    admitted=on("eng-beta", one={GPU: "model-a"}),
                ),
            ],
            left={"eng-beta": ["eng-beta/new"]},
            preempted={"eng-beta/old"},
            messages={
                "eng-beta/new": "couldn't assign flavors to pod set one: insufficient unused quota for "
                "example.com/gpu in flavor model-a, 10 more needed. Pending the preemption of 1 workload(s)"
            },
        ),
        "partial admission single variable pod set, preempt with partial admission": Case(
            workloads=[
                wl("new", "eng-beta", "main", podsets=[pod_set("one", 30, {GPU: "1"}, min_count=10)], priority=4),
                wl(
                    "old",
                    "eng-beta",
                    podsets=[pod_set("one", 10, {GPU: "1"})],
                    priority=-4,
                    admitted=on("eng-beta", one={GPU: "model-a"}),
                ),
            ],
            left={"eng-beta": ["eng-beta/new"]},
            preempted={"eng-beta/old"},
            messages={
                "eng-beta/new": "couldn't assign flavors to pod set one: insufficient unused quota for "
                "example.com/gpu in flavor model-a, 10 more needed. Pending the preemption of 1 workload(s)"
            },
        ),
        "partial admission multiple variable pod sets": Case(
            workloads=[
                wl(
                    "new",
                    "sales",
                    "main",
                    podsets=[
                        pod_set("one", 20, {CPU: "1"}),
                        pod_set("two", 30, {CPU: "1"}, min_count=10),
                        pod_set("three", 15, {CPU: "1"}, min_count=5),
                    ],
                )
            ],
            admitted={
                "sales/new": (
                    "sales",
                    {"one": ({CPU: "default"}, 20), "two": ({CPU: "default"}, 20), "three": ({CPU: "default"}, 10)},
                )
            },
        ),
    }
)

R1R2 = rg(fq("default", res("r1", "10", "10"), res("r2", "10", "10")))
CO_QUEUES = [cq(n, R1R2, cohort="co", preemption=RECLAIM_ANY) for n in ("cq1", "cq2", "cq3")]
CO_LQS = [lq(f"lq{i}", "sales", f"cq{i}") for i in (1, 2, 3)]


def co_case(r2: str, amount2: str, admitted2: bool) -> Case:
    w1 = wl("wl1", "sales", "lq1", {"r1": "16"}, priority=-1)
    w2 = wl("wl2", "sales", "lq2", {r2: amount2}, priority=-2)
    admitted = {"sales/wl1": at("cq1", "default", resource="r1")}
    if admitted2:
        admitted["sales/wl2"] = at("cq2", "default", resource=r2)
    return Case(
        cluster_queues=CO_QUEUES,
        local_queues=CO_LQS,
        workloads=[w1, w2],
        admitted=admitted,
        left={} if admitted2 else {"cq2": ["sales/wl2"]},
        messages={} if admitted2 else {"sales/wl2": "Workload no longer fits after processing another workload"},
    )


SCHEDULE_CASES.update(
    {
        "two workloads can borrow different resources from the same flavor in the same cycle": co_case(
            "r2", "16", True
        ),
        "two workloads can borrow the same resources from the same flavor in the same cycle if fits in the cohort "
        "quota": co_case("r1", "14", True),
        "only one workload can borrow one resources from the same flavor in the same cycle if cohort quota cannot "
        "fit": co_case("r1", "16", False),
    }
)


def other_queues(*specs: tuple[str, dict, dict | None], cohort_name: str = "other") -> list[dict]:
    """ClusterQueues of the cohort 'other' as several TestSchedule cases build them: (name, group, preemption)."""
    return [cq(name, group, cohort=cohort_name, preemption=pre) for name, group, pre in specs]


OTHER_LQS = [lq("other", "eng-alpha", "other-alpha"), lq("other", "eng-beta", "other-beta")]
WITHIN_LOWER = {"withinClusterQueue": "LowerPriority"}
BORROW_LOWER = {"withinClusterQueue": "LowerPriority", "borrowWithinCohort": {"policy": "LowerPriority"}}
BOTH_LOWER = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
ON_DEMAND_2 = rg(fq("on-demand", res(CPU, "2")))
DEFAULT_2 = rg(fq("default", res(CPU, "2")))
GPU_OD_SPOT_10 = rg(fq("on-demand", res("gpu", "10")), fq("spot", res("gpu", "10")))
GPU_OD_SPOT_0 = rg(fq("on-demand", res("gpu", "0")), fq("spot", res("gpu", "0")))

SCHEDULE_CASES.update(
    {
        "minimal preemptions when target queue is exhausted": Case(
            cluster_queues=other_queues(
                ("other-alpha", ON_DEMAND_2, RECLAIM_ANY),
                ("other-beta", ON_DEMAND_2, None),
                ("other-gamma", ON_DEMAND_2, None),
            ),
            local_queues=[*OTHER_LQS, lq("other", "eng-gamma", "other-gamma")],
            workloads=[
                wl("a1", "eng-alpha", "other", {CPU: "1"}, priority=-2, admitted=at("other-alpha", "on-demand")),
                wl("a2", "eng-alpha", "other", {CPU: "1"}, priority=-2, admitted=at("other-alpha", "on-demand")),
                wl("a3", "eng-alpha", "other", {CPU: "1"}, priority=-1, admitted=at("other-alpha", "on-demand")),
                *(
                    wl(f"b{i}", "eng-beta", "other", {CPU: "1"}, admitted=at("other-beta", "on-demand"))
                    for i in (1, 2, 3)
                ),
                wl("incoming", "eng-alpha", "other", {CPU: "2"}),
            ],
            left={"other-alpha": ["eng-alpha/incoming"]},
            preempted={"eng-alpha/a1", "eng-alpha/a2"},
        ),
        "A workload is only eligible to do preemptions if it fits fully within nominal quota": Case(
            cluster_queues=other_queues(("other-alpha", ON_DEMAND_2, RECLAIM_ANY), ("other-beta", ON_DEMAND_2, None)),
            local_queues=OTHER_LQS,
            workloads=[
                wl("a1", "eng-alpha", "other", {CPU: "1"}, priority=-1, admitted=at("other-alpha", "on-demand")),
                wl("b1", "eng-beta", "other", {CPU: "1"}, priority=-1, admitted=at("other-beta", "on-demand")),
                wl("incoming", "eng-alpha", "other", {CPU: "3"}, priority=1),
            ],
            inadmissible={"other-alpha": ["eng-alpha/incoming"]},
            messages={
                "eng-alpha/incoming": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
                "flavor on-demand, 1 more needed"
            },
        ),
        "multiple preemptions without borrowing": Case(
            cluster_queues=other_queues(
                ("other-alpha", DEFAULT_2, WITHIN_LOWER), ("other-beta", DEFAULT_2, WITHIN_LOWER)
            ),
            local_queues=OTHER_LQS,
            workloads=[
                wl("a1", "eng-alpha", "other", {CPU: "2"}, admitted=at("other-alpha", "default")),
                wl("b1", "eng-beta", "other", {CPU: "2"}, admitted=at("other-beta", "default")),
                wl("preemptor", "eng-alpha", "other", {CPU: "2"}, priority=100),
                wl("preemptor", "eng-beta", "other", {CPU: "2"}, priority=100),
            ],
            left={"other-alpha": ["eng-alpha/preemptor"], "other-beta": ["eng-beta/preemptor"]},
            preempted={"eng-alpha/a1", "eng-beta/b1"},
        ),
        "multiple preemptions preemption possible after earlier workload fits": Case(
            cluster_queues=other_queues(
                ("other-alpha", rg(fq("default", res(CPU, "1"))), WITHIN_LOWER),
                ("other-beta", DEFAULT_2, WITHIN_LOWER),
            ),
            local_queues=OTHER_LQS,
            workloads=[
                wl("b1", "eng-beta", "other", {CPU: "2"}, admitted=at("other-beta", "default")),
                wl("fit", "eng-alpha", "other", {CPU: "1"}, priority=100),
                wl("preemptor", "eng-beta", "other", {CPU: "2"}, priority=99),
            ],
            admitted={"eng-alpha/fit": at("other-alpha", "default")},
            left={"other-beta": ["eng-beta/preemptor"]},
            preempted={"eng-beta/b1"},
        ),
        "multiple preemptions skip preemption when shared limited resource": Case(
            cluster_queues=other_queues(
                ("other-alpha", DEFAULT_2, BORROW_LOWER),
                ("other-beta", DEFAULT_2, BORROW_LOWER),
                ("resource-bank", rg(fq("default", res(CPU, "1"))), None),
            ),
            local_queues=OTHER_LQS,
            workloads=[
                wl("a1", "eng-alpha", "other", {CPU: "2"}, admitted=at("other-alpha", "default")),
                wl("b1", "eng-beta", "other", {CPU: "2"}, admitted=at("other-beta", "default")),
                wl("preemptor", "eng-alpha", "other", {CPU: "3"}, priority=100),
                wl("pretending-preemptor", "eng-beta", "other", {CPU: "3"}, priority=99),
            ],
            left={"other-alpha": ["eng-alpha/preemptor"], "other-beta": ["eng-beta/pretending-preemptor"]},
            preempted={"eng-alpha/a1"},
            messages={"eng-beta/pretending-preemptor": "Workload no longer fits after processing another workload"},
        ),
        "not enough resources": Case(
            workloads=[wl("new", "sales", "main", podsets=[pod_set("one", 1, {CPU: "100"})])],
            left={"sales": ["sales/new"]},
            messages={
                "sales/new": "couldn't assign flavors to pod set one: insufficient quota for cpu in flavor default, "
                "previously considered podsets requests (0) + current podset request (100) > maximum capacity (50)"
            },
        ),
        "prefer reclamation over cq priority based preemption": Case(
            cluster_queues=other_queues(
                ("other-alpha", GPU_OD_SPOT_10, BOTH_LOWER), ("other-beta", GPU_OD_SPOT_0, BOTH_LOWER)
            ),
            local_queues=OTHER_LQS,
            workloads=[
                wl(
                    "a1",
                    "eng-alpha",
                    "other",
                    {"gpu": "5"},
                    priority=50,
                    admitted=at("other-alpha", "on-demand", resource="gpu"),
                ),
                wl(
                    "b1",
                    "eng-beta",
                    "other",
                    {"gpu": "5"},
                    priority=50,
                    admitted=at("other-beta", "spot", resource="gpu"),
                ),
                wl("preemptor", "eng-alpha", "other", {"gpu": "6"}, priority=100),
            ],
            left={"other-alpha": ["eng-alpha/preemptor"]},
            preempted={"eng-beta/b1"},
            messages={
                "eng-alpha/preemptor": "couldn't assign flavors to pod set main: insufficient unused quota for gpu in "
                "flavor on-demand, 1 more needed, insufficient unused quota for gpu in flavor spot, 1 more needed. "
                "Pending the preemption of 1 workload(s)"
            },
        ),
    }
)


def gpu_at(cq_name: str, flavor_name: str) -> tuple[str, dict]:
    return at(cq_name, flavor_name, resource="gpu")


def reclaim_policy_case(policy: str) -> Case:
    """ClusterQueueA (2 gpu, 1 used, a 2-gpu workload pending) lends to ClusterQueueB (0 gpu, a 1-gpu workload
    pending): only with reclaimWithinCohort Any does it let B borrow what it will want back."""
    lends = policy == "Any"
    return Case(
        cluster_queues=[
            cq(
                "ClusterQueueA",
                rg(fq("on-demand", res("gpu", "2"))),
                cohort="root",
                preemption={"reclaimWithinCohort": policy},
            ),
            cq("ClusterQueueB", rg(fq("on-demand", res("gpu", "0"))), cohort="root"),
        ],
        local_queues=[lq("lq", "eng-alpha", "ClusterQueueA"), lq("lq", "eng-beta", "ClusterQueueB")],
        workloads=[
            wl("a1-admitted", "eng-alpha", "lq", {"gpu": "1"}, admitted=gpu_at("ClusterQueueA", "on-demand")),
            wl("a2-pending", "eng-alpha", "lq", {"gpu": "2"}),
            wl("b1-pending", "eng-beta", "lq", {"gpu": "1"}),
        ],
        admitted={"eng-beta/b1-pending": gpu_at("ClusterQueueB", "on-demand")} if lends else {},
        left={} if lends else {"ClusterQueueB": ["eng-beta/b1-pending"]},
        inadmissible={"ClusterQueueA": ["eng-alpha/a2-pending"]},
        messages={
            "eng-alpha/a2-pending": "couldn't assign flavors to pod set main: insufficient unused quota for gpu in "
            "flavor on-demand, 1 more needed",
            **({} if lends else {"eng-beta/b1-pending": "Workload no longer fits after processing another workload"}),
        },
    )


SCHEDULE_CASES.update(
    {
        "prefer first preemption flavor when second flavor requires both reclaim and cq priority preemption": Case(
            cluster_queues=other_queues(
                ("other-alpha", GPU_OD_SPOT_10, BOTH_LOWER), ("other-beta", GPU_OD_SPOT_0, None)
            ),
            local_queues=OTHER_LQS,
            workloads=[
                wl("a1", "eng-alpha", "other", {"gpu": "5"}, priority=50, admitted=gpu_at("other-alpha", "on-demand")),
                wl("a2", "eng-alpha", "other", {"gpu": "5"}, priority=50, admitted=gpu_at("other-alpha", "spot")),
                wl("b1", "eng-beta", "other", {"gpu": "5"}, priority=50, admitted=gpu_at("other-beta", "spot")),
                wl("preemptor", "eng-alpha", "other", {"gpu": "6"}, priority=100),
            ],
            left={"other-alpha": ["eng-alpha/preemptor"]},
            preempted={"eng-alpha/a1"},
            messages={
                "eng-alpha/preemptor": "couldn't assign flavors to pod set main: insufficient unused quota for gpu in "
                "flavor on-demand, 1 more needed, insufficient unused quota for gpu in flavor spot, 6 more needed. "
                "Pending the preemption of 1 workload(s)"
            },
        ),
        "prefer first preemption flavor when second flavor also requires cq preemption": Case(
            cluster_queues=other_queues(
                ("other-alpha", GPU_OD_SPOT_10, BOTH_LOWER), ("other-beta", GPU_OD_SPOT_0, None)
            ),
            local_queues=OTHER_LQS,
            workloads=[
                wl("a1", "eng-alpha", "other", {"gpu": "6"}, priority=50, admitted=gpu_at("other-alpha", "on-demand")),
                wl("a2", "eng-alpha", "other", {"gpu": "5"}, priority=50, admitted=gpu_at("other-alpha", "spot")),
                wl("b1", "eng-beta", "other", {"gpu": "5"}, priority=9001, admitted=gpu_at("other-beta", "spot")),
                wl("preemptor", "eng-alpha", "other", {"gpu": "5"}, priority=100),
            ],
            left={"other-alpha": ["eng-alpha/preemptor"]},
            preempted={"eng-alpha/a1"},
            messages={
                "eng-alpha/preemptor": "couldn't assign flavors to pod set main: insufficient unused quota for gpu in "
                "flavor on-demand, 1 more needed, insufficient unused quota for gpu in flavor spot, 5 more needed. "
                "Pending the preemption of 1 workload(s)"
            },
        ),
        "workload requiring reclaimation prioritized over wl in another full cq": Case(
            cluster_queues=[
                cq("CQ1", rg(fq("on-demand", res("gpu", "10"))), cohort="other"),
                cq(
                    "CQ2",
                    rg(fq("on-demand", res("gpu", "10"))),
                    cohort="other",
                    preemption={"reclaimWithinCohort": "Any"},
                ),
                cq("CQ3", rg(fq("on-demand", res("gpu", "0"))), cohort="other"),
            ],
            local_queues=[lq("lq", "eng-alpha", "CQ1"), lq("lq", "eng-beta", "CQ2"), lq("lq", "eng-gamma", "CQ3")],
            workloads=[
                wl("Admitted-Workload-1", "eng-alpha", "lq", {"gpu": "5"}, admitted=gpu_at("CQ1", "on-demand")),
                wl("WL1", "eng-alpha", "lq", {"gpu": "10"}),
                wl("WL2", "eng-beta", "lq", {"gpu": "10"}, created=1),
                wl("Admitted-Workload-2", "eng-gamma", "lq", {"gpu": "5"}, admitted=gpu_at("CQ3", "on-demand")),
                wl(
                    "Admitted-Workload-3",
                    "eng-gamma",
                    "lq",
                    {"gpu": "5"},
                    priority=1,
                    admitted=gpu_at("CQ3", "on-demand"),
                ),
            ],
            left={"CQ2": ["eng-beta/WL2"]},
            inadmissible={"CQ1": ["eng-alpha/WL1"]},
            preempted={"eng-gamma/Admitted-Workload-2"},
            messages={
                "eng-alpha/WL1": "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor "
                "on-demand, 5 more needed",
                "eng-beta/WL2": "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor "
                "on-demand, 5 more needed. Pending the preemption of 1 workload(s)",
            },
        ),
        "capacity not blocked when lending clusterqueue can reclaim (ReclaimWithinCohort=Any)": reclaim_policy_case(
            "Any"
        ),
        "capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=LowerPriority)": (
            reclaim_policy_case("LowerPriority")
        ),
        "capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=Never)": (
            reclaim_policy_case("Never")
        ),
        "in a hierarchical cohort, workload borrowing less is scheduled first": Case(
            cohorts=[cohort("root"), cohort("guaranteed", rg(fq("default", res(CPU, "4"))), parent="root")],
            cluster_queues=[
                cq("guaranteed", rg(fq("default", res(CPU, "0"))), cohort="guaranteed"),
                cq("best-effort", rg(fq("default", res(CPU, "0"))), cohort="root"),
            ],
            local_queues=[
                lq("lq-guaranteed", "eng-alpha", "guaranteed"),
                lq("lq-best-effort", "eng-alpha", "best-effort"),
            ],
            workloads=[
                wl("guaranteed", "eng-alpha", "lq-guaranteed", podsets=[pod_set("one", 1, {CPU: "4"})]),
                wl("best-effort", "eng-alpha", "lq-best-effort", podsets=[pod_set("one", 1, {CPU: "4"})], priority=3),
            ],
            admitted={"eng-alpha/guaranteed": ("guaranteed", {"one": {CPU: "default"}})},
            left={"best-effort": ["eng-alpha/best-effort"]},
            messages={"eng-alpha/best-effort": "Workload no longer fits after processing another workload"},
        ),
        "don't assign flavor if there are no candidates for preemption": Case(
            cluster_queues=[
                cq(
                    "cq1",
                    rg(fq("on-demand", res(CPU, "0", "1")), fq("spot", res(CPU, "0", "1"))),
                    cohort="cohort",
                    preemption={**RECLAIM_ANY, "borrowWithinCohort": {"policy": "LowerPriority"}},
                    fungibility={"whenCanPreempt": "MayStopSearch", "whenCanBorrow": "MayStopSearch"},
                ),
                cq("cq2", rg(fq("on-demand", res(CPU, "1")), fq("spot", res(CPU, "1"))), cohort="cohort"),
            ],
            local_queues=[lq("lq1", "eng-alpha", "cq1"), lq("lq2", "eng-alpha", "cq2")],
            workloads=[
                wl("admitted", "eng-alpha", "lq2", {CPU: "1"}, admitted=at("cq2", "on-demand")),
                wl("new", "eng-alpha", "lq1", {CPU: "1"}, priority=100),
            ],
            admitted={"eng-alpha/new": at("cq1", "spot")},
        ),
    }
)


def _over_limits() -> Case:
    obj = wl("new", "sales", "main", podsets=[pod_set("one", 1, {CPU: "200m"})])
    obj["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["limits"] = {CPU: "100m"}
    return Case(
        workloads=[obj],
        left={"sales": ["sales/new"]},
        messages={
            "sales/new": "resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid value: "
            '["cpu"]: requests must not exceed its limits'
        },
    )


SCHEDULE_CASES["container resource requests exceed limits"] = _over_limits()


def gated(obj: dict) -> dict:
    """A workload with a preemption gate (Kueue acts on it only with the alpha MultiKueueOrchestratedPreemption, which
    kubesim does not model: the cases below come out the same either way)."""
    obj["spec"]["preemptionGates"] = [{"name": "gate"}]
    return obj


SCHEDULE_CASES.update(
    {
        "do not signal `BlockedOnPreemptionGates` when a preemption gate is present, but the workload fits without "
        "preemption": Case(
            workloads=[gated(wl("preemptor", "eng-beta", "main", {GPU: "20"}))],
            admitted={"eng-beta/preemptor": at("eng-beta", "model-a", resource=GPU)},
        ),
        "do not signal `BlockedOnPreemptionGates` when a preemption gate is present, but the workload had nothing to "
        "preempt": Case(
            workloads=[
                gated(wl("preemptor", "eng-beta", "main", {GPU: "20"})),
                wl(
                    "high-priority",
                    "eng-beta",
                    requests={GPU: "20"},
                    priority=1,
                    admitted=at("eng-beta", "model-a", resource=GPU),
                ),
            ],
            left={"eng-beta": ["eng-beta/preemptor"]},
            messages={
                "eng-beta/preemptor": "couldn't assign flavors to pod set main: insufficient unused quota for "
                "example.com/gpu in flavor model-a, 20 more needed"
            },
        ),
    }
)

POB = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "PreemptionOverBorrowing"}
BOP = {**POB, "preference": "BorrowingOverPreemption"}


def preference_case(prefix: str, fungibility: dict, low: str = "", high: str = "") -> Case:
    """A ClusterQueue whose first flavor needs a preemption and whose second needs borrowing from a lender."""
    return Case(
        cluster_queues=[
            cq(
                f"{prefix}-cq",
                rg(fq("on-demand", res(CPU, "5", "0")), fq("spot", res(CPU, "0", "5"))),
                cohort=f"{prefix}-cohort",
                preemption=WITHIN_LOWER,
                fungibility=fungibility,
            ),
            cq(
                f"{prefix}-lender",
                rg(fq("on-demand", res(CPU, "0")), fq("spot", res(CPU, "5"))),
                cohort=f"{prefix}-cohort",
            ),
        ],
        local_queues=[lq(f"{prefix}-queue", "default", f"{prefix}-cq")],
        workloads=[
            wl(
                low or f"low-{prefix}",
                "default",
                f"{prefix}-queue",
                {CPU: "5"},
                priority=-1,
                admitted=at(f"{prefix}-cq", "on-demand"),
            ),
            wl(high or f"high-{prefix}", "default", f"{prefix}-queue", {CPU: "5"}),
        ],
    )


def _pob() -> Case:
    case = preference_case("pob", POB)
    case.left = {"pob-cq": ["default/high-pob"]}
    case.preempted = {"default/low-pob"}
    case.messages = {
        "default/high-pob": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
        "on-demand, 5 more needed. Pending the preemption of 1 workload(s)"
    }
    return case


def _bop() -> Case:
    case = preference_case("bop", BOP)
    case.admitted = {"default/high-bop": at("bop-cq", "spot")}
    return case


SCHEDULE_CASES.update(
    {
        "pending admission check with nofit and fit flavors": Case(
            workloads=[wl("pending-check", "eng-beta", "main", {CPU: "80"})],
            admitted={"eng-beta/pending-check": at("eng-beta", "spot")},
        ),
        "admit to second flavor when first needs preemption; WhenCanPreempt: TryNextFlavor": Case(
            cluster_queues=[
                cq(
                    "preempt-attempts-cq",
                    rg(fq("on-demand", res(CPU, "1")), fq("spot", res(CPU, "1"))),
                    preemption=WITHIN_LOWER,
                    fungibility={"whenCanPreempt": "TryNextFlavor"},
                )
            ],
            local_queues=[lq("preempt-attempts-lq", "eng-alpha", "preempt-attempts-cq")],
            workloads=[
                wl(
                    "blocker",
                    "eng-alpha",
                    "preempt-attempts-lq",
                    {CPU: "1"},
                    priority=50,
                    admitted=at("preempt-attempts-cq", "on-demand"),
                ),
                wl("test-wl", "eng-alpha", "preempt-attempts-lq", {CPU: "1"}, priority=100),
            ],
            admitted={"eng-alpha/test-wl": at("preempt-attempts-cq", "spot")},
        ),
        "admit workload with zero-quantity request for resource not in ClusterQueue": Case(
            workloads=[wl("zero-resource-wl", "sales", "main", {CPU: "1", GPU: "0"})],
            admitted={"sales/zero-resource-wl": at("sales", "default")},
        ),
        "preempt when workload requests zero of a resource not defined in ClusterQueue": Case(
            cluster_queues=[cq("preempt-zero-gpu-cq", rg(fq("default", res(CPU, "4"))), preemption=WITHIN_LOWER)],
            local_queues=[lq("preempt-zero-gpu-lq", "sales", "preempt-zero-gpu-cq")],
            workloads=[
                wl("preemptor", "sales", "preempt-zero-gpu-lq", {CPU: "2", GPU: "0"}),
                wl(
                    "low-priority",
                    "sales",
                    "preempt-zero-gpu-lq",
                    {CPU: "4"},
                    priority=-1,
                    admitted=at("preempt-zero-gpu-cq", "default"),
                ),
            ],
            left={"preempt-zero-gpu-cq": ["sales/preemptor"]},
            preempted={"sales/low-priority"},
            messages={
                "sales/preemptor": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
                "flavor default, 2 more needed. Pending the preemption of 1 workload(s)"
            },
        ),
        "PreemptionOverBorrowing preference: preempt in first flavor instead of borrowing in second": _pob(),
        "PreemptionOverBorrowing preference: select fitting second flavor over first flavor with no preemption "
        "candidates": Case(
            cohorts=[
                cohort("nopc-root", rg(fq("on-demand", res(CPU, "0")), fq("spot", res(CPU, "5")))),
                cohort("nopc-mid", parent="nopc-root"),
            ],
            cluster_queues=[
                cq(
                    "nopc-cq",
                    rg(fq("on-demand", res(CPU, "5", "0")), fq("spot", res(CPU, "0"))),
                    cohort="nopc-mid",
                    preemption=WITHIN_LOWER,
                    fungibility=POB,
                ),
                cq("nopc-sibling", rg(fq("on-demand", res(CPU, "5")), fq("spot", res(CPU, "0"))), cohort="nopc-mid"),
            ],
            local_queues=[lq("nopc-queue", "default", "nopc-cq")],
            workloads=[
                wl("admitted-nopc", "default", "nopc-queue", {CPU: "5"}, admitted=at("nopc-cq", "on-demand")),
                wl("pending-nopc", "default", "nopc-queue", {CPU: "5"}),
            ],
            admitted={"default/pending-nopc": at("nopc-cq", "spot")},
        ),
        "BorrowingOverPreemption preference: borrow in second flavor instead of preempting in first": _bop(),
        "prevent integer overflow when sum of requests over podsets exceeds MaxInt64": Case(
            cluster_queues=[cq("overflow-cq", rg(fq("default", res(CPU, "10000"))))],
            local_queues=[lq("overflow-queue", "default", "overflow-cq")],
            workloads=[
                wl(
                    "vuln-wl",
                    "default",
                    "overflow-queue",
                    podsets=[pod_set("ps1", 1, {CPU: "1000000m"}), pod_set("ps2", 1, {CPU: "9223372036854775000m"})],
                )
            ],
            inadmissible={"overflow-cq": ["default/vuln-wl"]},
            messages={
                "default/vuln-wl": "couldn't assign flavors to pod set ps2: insufficient quota for cpu in flavor "
                "default, previously considered podsets requests (1k) + current podset request (9223372036854775) > "
                "maximum capacity (10k)"
            },
        ),
        "prevent integer overflow in ResourceValue conversion to MilliValue": Case(
            cluster_queues=[cq("overflow-cq", rg(fq("default", res(CPU, "10"))))],
            local_queues=[lq("overflow-queue", "default", "overflow-cq")],
            workloads=[
                wl("vuln-wl", "default", "overflow-queue", podsets=[pod_set("ps1", 1, {CPU: "9223372036854776"})])
            ],
            inadmissible={"overflow-cq": ["default/vuln-wl"]},
            messages={
                "default/vuln-wl": "couldn't assign flavors to pod set ps1: insufficient quota for cpu in flavor "
                "default, previously considered podsets requests (0) + current podset request (9223372036854775807m) "
                "> maximum capacity (10)"
            },
        ),
    }
)


# -- pkg/scheduler/scheduler_fs_test.go: TestScheduleForFairSharing (TestSchedule's fixture, Fair Sharing on) -------

NO_LONGER_FITS = "Workload no longer fits after processing another workload"


def one(name: str, queue: str, cpu: str, admitted_in: str = "", flavor_name: str = "on-demand", **kw) -> dict:
    """A workload in eng-alpha with one pod set 'one' of one pod."""
    admitted = (admitted_in, {"one": {CPU: flavor_name}}) if admitted_in else None
    return wl(name, "eng-alpha", queue, podsets=[pod_set("one", 1, {CPU: cpu})], admitted=admitted, **kw)


def od(nominal: str) -> dict:
    return rg(fq("on-demand", res(CPU, nominal)))


FS_CASES: dict[str, Case] = {
    "with fair sharing: schedule workload with lowest share first": Case(
        cluster_queues=[cq("eng-shared", rg(fq("on-demand", res(CPU, "10", "0"))), cohort="eng")],
        workloads=[
            wl(
                "all_nominal",
                "eng-alpha",
                "main",
                podsets=[pod_set("one", 50, {CPU: "1"})],
                admitted=on("eng-alpha", one={CPU: "on-demand"}),
            ),
            wl(
                "borrowing",
                "eng-beta",
                "main",
                podsets=[pod_set("one", 55, {CPU: "1"})],
                admitted=on("eng-beta", one={CPU: "on-demand"}),
            ),
            wl("older_new", "eng-beta", "main", podsets=[pod_set("one", 1, {CPU: "1"})], created=-60),
            wl("new", "eng-alpha", "main", podsets=[pod_set("one", 5, {CPU: "1"})]),
        ],
        admitted={"eng-alpha/new": ("eng-alpha", {"one": ({CPU: "on-demand"}, 5)})},
        left={"eng-beta": ["eng-beta/older_new"]},
        messages={"eng-beta/older_new": NO_LONGER_FITS},
    ),
    "with fair sharing: nominal-first ordering admits workload fitting within nominal despite higher CQ DRS": Case(
        cluster_queues=[
            cq(
                "fs-nom-a",
                rg(fq("on-demand", res(CPU, "50", "0"))),
                rg(fq("spot", res(CPU, "50", "50"))),
                cohort="fs-nom",
            ),
            cq(
                "fs-nom-b",
                rg(fq("on-demand", res(CPU, "10", "50"))),
                rg(fq("spot", res(CPU, "50", "0"))),
                cohort="fs-nom",
            ),
        ],
        local_queues=[lq("fs-nom", "eng-alpha", "fs-nom-a"), lq("fs-nom", "eng-beta", "fs-nom-b")],
        workloads=[
            wl(
                "spot-heavy",
                "eng-alpha",
                "fs-nom",
                podsets=[pod_set("one", 80, {CPU: "1"})],
                admitted=on("fs-nom-a", one={CPU: "spot"}),
            ),
            wl(
                "light-usage",
                "eng-beta",
                "fs-nom",
                podsets=[pod_set("one", 5, {CPU: "1"})],
                admitted=on("fs-nom-b", one={CPU: "on-demand"}),
            ),
            wl("borrow-wl", "eng-beta", "fs-nom", podsets=[pod_set("one", 15, {CPU: "1"})], created=-60),
            wl("nom-wl", "eng-alpha", "fs-nom", podsets=[pod_set("one", 45, {CPU: "1"})]),
        ],
        admitted={"eng-alpha/nom-wl": ("fs-nom-a", {"one": ({CPU: "on-demand"}, 45)})},
        left={"fs-nom-b": ["eng-beta/borrow-wl"]},
        messages={"eng-beta/borrow-wl": NO_LONGER_FITS},
    ),
    "with fair sharing: hierarchical nominal-first prefers non-borrowing subtree": Case(
        cohorts=[cohort("root"), cohort("Cohort-A", od("10"), parent="root"), cohort("Cohort-B", parent="root")],
        cluster_queues=[
            cq("cq-a", od("0"), cohort="Cohort-A"),
            cq("cq-b", od("5"), cohort="Cohort-B"),
            cq("cq-c", od("0"), cohort="Cohort-B"),
        ],
        local_queues=[lq(f"lq-{x}", "eng-alpha", f"cq-{x}") for x in "abc"],
        workloads=[one("c0", "lq-c", "10", "cq-c"), one("wl-a", "lq-a", "5"), one("wl-b", "lq-b", "5")],
        admitted={"eng-alpha/wl-a": ("cq-a", {"one": {CPU: "on-demand"}})},
        left={"cq-b": ["eng-alpha/wl-b"]},
        messages={"eng-alpha/wl-b": NO_LONGER_FITS},
    ),
    "with fair sharing: hierarchical nominal-first with deeper nesting": Case(
        cohorts=[
            cohort("root"),
            cohort("Cohort-A", parent="root"),
            cohort("SUB-A", od("10"), parent="Cohort-A"),
            cohort("Cohort-B", parent="root"),
        ],
        cluster_queues=[
            cq("cq-a", od("0"), cohort="SUB-A"),
            cq("cq-b", od("5"), cohort="Cohort-B"),
            cq("cq-c", od("0"), cohort="Cohort-B"),
        ],
        local_queues=[lq(f"lq-{x}", "eng-alpha", f"cq-{x}") for x in "abc"],
        workloads=[one("c0", "lq-c", "10", "cq-c"), one("wl-a", "lq-a", "5"), one("wl-b", "lq-b", "5")],
        admitted={"eng-alpha/wl-a": ("cq-a", {"one": {CPU: "on-demand"}})},
        left={"cq-b": ["eng-alpha/wl-b"]},
        messages={"eng-alpha/wl-b": NO_LONGER_FITS},
    ),
    "with fair sharing: hierarchical nominal-first with mixed CQ and cohort quotas": Case(
        cohorts=[
            cohort("root"),
            cohort("Cohort-A", od("10"), parent="root"),
            cohort("Cohort-B", od("10"), parent="root"),
        ],
        cluster_queues=[
            cq("cq-a1", od("5"), cohort="Cohort-A"),
            cq("cq-a2", od("3"), cohort="Cohort-A"),
            cq("cq-b", od("5"), cohort="Cohort-B"),
            cq("cq-c", od("3"), cohort="Cohort-B"),
        ],
        local_queues=[lq(f"lq-{x}", "eng-alpha", f"cq-{x}") for x in ("a1", "a2", "b", "c")],
        workloads=[
            one("a2-admitted", "lq-a2", "6", "cq-a2"),
            one("c-admitted", "lq-c", "20", "cq-c"),
            one("wl-a1", "lq-a1", "7"),
            one("wl-b", "lq-b", "4"),
        ],
        admitted={"eng-alpha/wl-a1": ("cq-a1", {"one": {CPU: "on-demand"}})},
        left={"cq-b": ["eng-alpha/wl-b"]},
        messages={"eng-alpha/wl-b": NO_LONGER_FITS},
    ),
    "with fair sharing: hierarchical nominal-first per-flavor ignores cross-flavor borrowing": Case(
        cohorts=[
            cohort("root"),
            cohort("Cohort-A", od("10"), parent="root"),
            cohort("Cohort-B", rg(fq("spot", res(CPU, "10"))), parent="root"),
        ],
        cluster_queues=[
            cq("cq-a", rg(fq("on-demand", res(CPU, "0")), fq("spot", res(CPU, "0"))), cohort="Cohort-A"),
            cq("cq-b", rg(fq("on-demand", res(CPU, "5")), fq("spot", res(CPU, "0"))), cohort="Cohort-B"),
        ],
        local_queues=[lq(f"lq-{x}", "eng-alpha", f"cq-{x}") for x in "ab"],
        workloads=[
            one("spot-admitted", "lq-a", "5", "cq-a", "spot"),
            one("od-admitted", "lq-b", "8", "cq-b"),
            one("wl-a", "lq-a", "4"),
            one("wl-b", "lq-b", "4"),
        ],
        admitted={"eng-alpha/wl-a": ("cq-a", {"one": {CPU: "on-demand"}})},
        left={"cq-b": ["eng-alpha/wl-b"]},
        messages={"eng-alpha/wl-b": NO_LONGER_FITS},
    ),
    "hierarchical fair sharing schedule workload which wins tournament": Case(
        cohorts=[cohort("A", od("200")), cohort("B", parent="A"), cohort("C", parent="A")],
        cluster_queues=[cq(x, od("0"), cohort="B" if x in "de" else "C") for x in "defg"],
        local_queues=[lq(f"lq-{x}", "eng-alpha", x) for x in "defg"],
        workloads=[
            one("d0", "lq-d", "10", "d"),
            one("e0", "lq-e", "20", "e"),
            one("g0", "lq-g", "100", "g"),
            one("d1", "lq-d", "70"),
            one("e1", "lq-e", "61"),
            one("f1", "lq-f", "1"),
            one("g1", "lq-g", "1"),
        ],
        admitted={"eng-alpha/d1": ("d", {"one": {CPU: "on-demand"}})},
        left={"e": ["eng-alpha/e1"], "f": ["eng-alpha/f1"], "g": ["eng-alpha/g1"]},
        messages=dict.fromkeys(("eng-alpha/e1", "eng-alpha/f1", "eng-alpha/g1"), NO_LONGER_FITS),
    ),
}


def two_borrowers(weight: str) -> Case:
    """Queues b and c with no quota borrow from cohort A (8 cpu); b already borrows 4."""
    pre = {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}
    return Case(
        cohorts=[cohort("A", od("8"))],
        cluster_queues=[cq(x, od("0"), cohort="A", preemption=pre, weight=weight) for x in "bc"],
        local_queues=[lq(f"lq-{x}", "eng-alpha", x) for x in "bc"],
        workloads=[
            one("b0", "lq-b", "4", "b"),
            one("b1", "lq-b", "4", priority=9001),
            one("c1", "lq-c", "4"),
        ],
        admitted={"eng-alpha/c1": ("c", {"one": {CPU: "on-demand"}})},
        left={"b": ["eng-alpha/b1"]},
        messages={"eng-alpha/b1": NO_LONGER_FITS},
    )


def two_in_cohort_a(b1: dict, c1: dict) -> Case:
    return Case(
        cohorts=[cohort("A", od("10")), cohort("B")],
        cluster_queues=[cq(x, od("0"), cohort="A") for x in "bc"],
        local_queues=[lq(f"lq-{x}", "eng-alpha", x) for x in "bc"],
        workloads=[b1, c1],
        admitted={"eng-alpha/c1": ("c", {"one": {CPU: "on-demand"}})},
        left={"b": ["eng-alpha/b1"]},
        messages={"eng-alpha/b1": NO_LONGER_FITS},
    )


FS_CASES.update(
    {
        "fair sharing schedule workload with lowest drf after admission": Case(
            cohorts=[cohort("A", od("100"))],
            cluster_queues=[cq(x, od("0"), cohort="A") for x in "bc"],
            local_queues=[lq(f"lq-{x}", "eng-alpha", x) for x in "bc"],
            workloads=[one("b0", "lq-b", "10", "b"), one("b1", "lq-b", "50"), one("c1", "lq-c", "75")],
            admitted={"eng-alpha/b1": ("b", {"one": {CPU: "on-demand"}})},
            left={"c": ["eng-alpha/c1"]},
            messages={"eng-alpha/c1": NO_LONGER_FITS},
        ),
        "fair sharing two queues with weight 0 schedules workload which borrows less": two_borrowers("0"),
        "fair sharing two queues with high weight schedules workload which borrows less": two_borrowers("123456789"),
        "fair sharing schedule singleton cqs and cq without cohort": Case(
            cohorts=[cohort("A", od("10")), cohort("B")],
            cluster_queues=[cq("a", od("0"), cohort="A"), cq("b", od("10"), cohort="B"), cq("c", od("10"))],
            local_queues=[lq(f"lq-{x}", "eng-alpha", x) for x in "abc"],
            workloads=[one("a1", "lq-a", "10"), one("b1", "lq-b", "10"), one("c1", "lq-c", "10")],
            admitted={f"eng-alpha/{x}1": (x, {"one": {CPU: "on-demand"}}) for x in "abc"},
        ),
        "fair sharing schedule highest priority first": two_in_cohort_a(
            one("b1", "lq-b", "10", priority=99), one("c1", "lq-c", "10", priority=101)
        ),
        "fair sharing schedule earliest timestamp first": two_in_cohort_a(
            one("b1", "lq-b", "10", priority=101, created=1), one("c1", "lq-c", "10", priority=101)
        ),
        "with fair sharing: preempt workload from CQ with the highest share": Case(
            cluster_queues=[cq("eng-gamma", rg(fq("on-demand", res(CPU, "50", "0"))), cohort="eng")],
            workloads=[
                wl("all_spot", "eng-alpha", requests={CPU: "100"}, admitted=at("eng-alpha", "spot")),
                *(
                    wl(
                        f"alpha{i}",
                        "eng-alpha",
                        requests={CPU: "20"},
                        uid=f"alpha{i}",
                        admitted=at("eng-alpha", "on-demand"),
                    )
                    for i in (1, 2, 3, 4)
                ),
                *(
                    wl(
                        f"gamma{i}",
                        "eng-gamma",
                        requests={CPU: cpu},
                        uid=f"gamma{i}",
                        admitted=at("eng-gamma", "on-demand"),
                    )
                    for i, cpu in ((1, "10"), (2, "20"), (3, "20"), (4, "20"))
                ),
                wl("preemptor", "eng-beta", "main", {CPU: "30"}, uid="wl-preemptor"),
            ],
            left={"eng-beta": ["eng-beta/preemptor"]},
            preempted={"eng-alpha/alpha1", "eng-gamma/gamma1"},
            messages={
                "eng-beta/preemptor": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
                "flavor on-demand, 30 more needed, insufficient unused quota for cpu in flavor spot, 30 more needed. "
                "Pending the preemption of 2 workload(s)"
            },
        ),
    }
)


BOTH_ANY = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


def local_capacity_case() -> Case:
    return Case(
        cohorts=[
            cohort("root-cohort", rg(fq("on-demand", res("gpu", "2")), fq("spot", res("gpu", "0")))),
            cohort(
                "child-cohort", rg(fq("on-demand", res("gpu", "5")), fq("spot", res("gpu", "7"))), parent="root-cohort"
            ),
        ],
        cluster_queues=[
            cq(
                "queue1",
                rg(fq("on-demand", res("gpu", "3")), fq("spot", res("gpu", "3"))),
                cohort="child-cohort",
                preemption=BOTH_ANY,
                fungibility={"whenCanPreempt": "TryNextFlavor", "whenCanBorrow": "TryNextFlavor"},
            )
        ],
        local_queues=[lq("queue1", "default", "queue1")],
        workloads=[
            wl("a1", "default", "queue1", {"gpu": "8"}, admitted=gpu_at("queue1", "on-demand")),
            wl("a2", "default", "queue1", {"gpu": "3"}, admitted=gpu_at("queue1", "spot")),
            wl("a3", "default", "queue1", {"gpu": "1"}),
        ],
        admitted={"default/a3": gpu_at("queue1", "spot")},
    )


def _fs_pob() -> Case:
    case = preference_case("fs-pob", POB, "fs-low-pob", "fs-high-pob")
    for q in case.cluster_queues:
        q["spec"]["fairSharing"] = {"weight": "1"}
    case.left = {"fs-pob-cq": ["default/fs-high-pob"]}
    case.preempted = {"default/fs-low-pob"}
    return case


FS_CASES.update(
    {
        "multiple preemptions within cq when fair sharing": Case(
            cluster_queues=other_queues(
                ("other-alpha", DEFAULT_2, WITHIN_LOWER),
                ("other-beta", DEFAULT_2, WITHIN_LOWER),
                ("other-gamma", DEFAULT_2, WITHIN_LOWER),
                ("resource-bank", rg(fq("default", res(CPU, "3"))), None),
            ),
            local_queues=[*OTHER_LQS, lq("other", "eng-gamma", "other-gamma")],
            workloads=[
                wl("a1", "eng-alpha", "other", {CPU: "3"}, admitted=at("other-alpha", "default")),
                wl("b1", "eng-beta", "other", {CPU: "3"}, admitted=at("other-beta", "default")),
                wl("c1", "eng-gamma", "other", {CPU: "3"}, admitted=at("other-gamma", "default")),
                *(
                    wl("preemptor", ns, "other", {CPU: "3"}, priority=100)
                    for ns in ("eng-alpha", "eng-beta", "eng-gamma")
                ),
            ],
            left={
                "other-alpha": ["eng-alpha/preemptor"],
                "other-beta": ["eng-beta/preemptor"],
                "other-gamma": ["eng-gamma/preemptor"],
            },
            preempted={"eng-alpha/a1", "eng-beta/b1", "eng-gamma/c1"},
        ),
        "not enough resources with fair sharing enabled": Case(
            workloads=[wl("new", "sales", "main", podsets=[pod_set("one", 1, {CPU: "100"})])],
            left={"sales": ["sales/new"]},
            messages={
                "sales/new": "couldn't assign flavors to pod set one: insufficient quota for cpu in flavor default, "
                "previously considered podsets requests (0) + current podset request (100) > maximum capacity (50)"
            },
        ),
        "with fair sharing: prefer reclamation over cq priority based preemption; with preemption while "
        "borrowing": Case(
            cluster_queues=other_queues(
                ("other-alpha", rg(fq("on-demand", res("gpu", "7")), fq("spot", res("gpu", "7"))), BOTH_LOWER),
                ("other-beta", rg(fq("on-demand", res("gpu", "3")), fq("spot", res("gpu", "3"))), None),
            ),
            local_queues=OTHER_LQS,
            workloads=[
                wl("a1", "eng-alpha", "other", {"gpu": "5"}, priority=50, admitted=gpu_at("other-alpha", "on-demand")),
                wl("b1", "eng-beta", "other", {"gpu": "5"}, priority=50, admitted=gpu_at("other-beta", "spot")),
                wl("preemptor", "eng-alpha", "other", {"gpu": "8"}, priority=100),
            ],
            left={"other-alpha": ["eng-alpha/preemptor"]},
            preempted={"eng-beta/b1"},
            messages={
                "eng-alpha/preemptor": "couldn't assign flavors to pod set main: insufficient unused quota for gpu in "
                "flavor on-demand, 3 more needed, insufficient unused quota for gpu in flavor spot, 3 more needed. "
                "Pending the preemption of 1 workload(s)"
            },
        ),
        "prefer flavor with most local capacity": local_capacity_case(),
        "fair sharing: in-CQ preemption for CQ without cohort; repro for nil pointer panic": Case(
            cluster_queues=[cq("no-cohort-cq", rg(fq("default", res(CPU, "4"))), preemption=WITHIN_LOWER)],
            local_queues=[lq("no-cohort-queue", "default", "no-cohort-cq")],
            workloads=[
                wl(
                    "nc-low",
                    "default",
                    "no-cohort-queue",
                    {CPU: "4"},
                    priority=-1,
                    admitted=at("no-cohort-cq", "default"),
                ),
                wl("nc-high", "default", "no-cohort-queue", {CPU: "4"}, priority=100),
            ],
            left={"no-cohort-cq": ["default/nc-high"]},
            preempted={"default/nc-low"},
            messages={
                "default/nc-high": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
                "flavor default, 4 more needed. Pending the preemption of 1 workload(s)"
            },
        ),
        "PreemptionOverBorrowing with fair sharing: preempt in first flavor instead of borrowing in second": _fs_pob(),
    }
)

SCHEDULE_CASES["prefer flavor with most local capacity (FS=false) [scheduler_fs_test.go]"] = local_capacity_case()


# -- pkg/scheduler/flavorassigner/flavorassigner_test.go: TestAssignFlavors --------------------------------------------
#
# Kueue's test runs its flavor assigner on one ClusterQueue (and an optional second one in the same cohort) whose usage
# it sets directly, with a stand-in for the preemption simulation that answers "preemption possible" unless told
# otherwise. Here the usage is held by admitted workloads and the answer comes from kubesim's own preemption
# simulation: where a case relies on that default answer, the usage is made preemptible (priority -1 against the
# incoming 0, and withinClusterQueue LowerPriority on a ClusterQueue that sets no preemption), so the real simulation
# answers the same. Borrowing levels the stand-in made up are not compared.

FA_FLAVORS = [
    flavor("default"),
    flavor("one", labels={"type": "one"}),
    flavor("two", labels={"type": "two"}),
    flavor("b_one", labels={"b_type": "one"}),
    flavor("b_two", labels={"b_type": "two"}),
    flavor("tainted", [taint("instance", "spot")]),
    {
        "metadata": {"name": "taint_and_toleration"},
        "spec": {
            "nodeTaints": [taint("instance", "spot")],
            "tolerations": [{"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}],
        },
    },
    flavor("label-x-a", labels={"x": "a"}),
    flavor("label-xy-b", labels={"x": "b", "y": "k"}),
    flavor("uno"),
    flavor("due"),
    flavor("tre"),
    flavor("flavor"),
    flavor("three"),
]
SPOT_TOLERATION = [{"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}]
FIT, PREEMPT_MODE, NO_FIT_MODE = "Fit", "Preempt", "NoFit"


@dataclass
class FA:
    """One TestAssignFlavors case: the incoming pod sets, the ClusterQueue (and a second one in its cohort) with their
    usage {(flavor, resource): amount}, and the expected mode, flavors {pod set: {resource: (flavor, mode)}},
    reasons {pod set: [...]} and borrowing (None: not compared)."""

    podsets: list[dict]
    cluster_queue: dict
    mode: str
    flavors: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    reasons: dict[str, list[str]] | None = field(default_factory=dict)  # None: not compared
    usage: dict[tuple[str, str], str] = field(default_factory=dict)
    secondary: dict | None = None
    secondary_usage: dict[tuple[str, str], str] = field(default_factory=dict)
    borrowing: int | None = 0
    fair_sharing: bool = False
    preemptible: bool = False
    cohorts: list[dict] = field(default_factory=list)
    reclaimable: list[dict] = field(default_factory=list)  # the incoming workload's status.reclaimablePods


def usage_workload(name: str, cluster_queue: str, usage: dict[tuple[str, str], str], priority: int) -> dict:
    """An admitted workload holding the given usage: one pod set per (flavor, resource)."""
    podsets = [pod_set(f"u{i}", 1, {r: amount}) for i, ((_, r), amount) in enumerate(usage.items())]
    flavors = {f"u{i}": {r: f} for i, (f, r) in enumerate(usage)}
    return wl(name, "default", podsets=podsets, priority=priority, admitted=(cluster_queue, flavors))


def run_fa(case: FA) -> None:
    from kubesim.kueue.scheduler.flavors import FIT as K_FIT
    from kubesim.kueue.scheduler.flavors import NO_FIT as K_NO_FIT
    from kubesim.kueue.scheduler.flavors import FlavorAssigner
    from kubesim.kueue.scheduler.preemption import Preemptor

    queue = case.cluster_queue
    if case.preemptible and "preemption" not in queue["spec"]:
        queue = {**queue, "spec": {**queue["spec"], "preemption": {"withinClusterQueue": "LowerPriority"}}}
    name = queue["metadata"]["name"]
    queues = [queue] + ([case.secondary] if case.secondary else [])
    priority = -1 if case.preemptible else 0
    workloads = [wl("incoming", "default", "lq", podsets=case.podsets)]
    if case.reclaimable:
        workloads[0]["status"]["reclaimablePods"] = case.reclaimable
    if case.usage:
        workloads.append(usage_workload("usage", name, case.usage, priority))
    if case.secondary and case.secondary_usage:
        secondary = case.secondary["metadata"]["name"]
        workloads.append(usage_workload("secondary-usage", secondary, case.secondary_usage, priority))
    snap = Snapshot.from_objects(
        resource_flavors=FA_FLAVORS,
        cohorts=case.cohorts,
        cluster_queues=queues,
        local_queues=[lq("lq", "default", name)],
        workloads=workloads,
        config=KueueConfig(fair_sharing=case.fair_sharing, quota_check_strategy="BlockUndeclared"),
        now=T0,
    )
    incoming = snap.workloads["default/incoming"]
    assignment = FlavorAssigner(incoming, snap.cluster_queues[name], snap, Preemptor(snap, T0).simulate).assign()
    modes = {K_FIT: FIT, K_NO_FIT: NO_FIT_MODE}
    assert modes.get(assignment.mode(), PREEMPT_MODE) == case.mode
    got_flavors = {
        ps.name: {r: (fa.name, modes.get(fa.mode, PREEMPT_MODE)) for r, fa in ps.flavors.items()}
        for ps in assignment.podsets
        if ps.flavors
    }
    for podset, wanted in case.flavors.items():  # a mode of "" compares the flavor only
        for r, (_, mode) in wanted.items():
            if not mode and r in got_flavors.get(podset, {}):
                got_flavors[podset][r] = (got_flavors[podset][r][0], "")
    assert got_flavors == case.flavors
    if case.reasons is not None:
        got_reasons = {ps.name: sorted(ps.reasons) for ps in assignment.podsets if ps.reasons}
        assert got_reasons == {k: sorted(v) for k, v in case.reasons.items()}
    if case.borrowing is not None:
        assert assignment.borrowing == case.borrowing


def fa_cq(*groups: dict, cohort_name: str = "", **kw) -> dict:
    return cq("test-clusterqueue", *groups, cohort=cohort_name, **kw)


def fa_secondary(*groups: dict) -> dict:
    return cq("test-secondary-clusterqueue", *groups, cohort="test-cohort")


def main(
    count: int = 1,
    tolerations: list | None = None,
    selector: dict | None = None,
    affinity: list[list[dict]] | None = None,
    **requests: str,
) -> dict:
    return pod_set(MAIN, count, requests, tolerations=tolerations, selector=selector, affinity=affinity)


def node_in(key: str, *values: str) -> dict:
    return {"key": key, "operator": "In", "values": list(values)}


MEM = "memory"
PODS = "pods"
MAY_STOP_BOTH = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
TRY_NEXT_BOTH = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
EXCEEDS = (
    "insufficient quota for {r} in flavor {f}, previously considered podsets requests ({a}) + current podset request "
    "({q}) > maximum capacity ({m})"
)
UNUSED = "insufficient unused quota for {r} in flavor {f}, {n} more needed"


def exceeds(r: str, f: str, a: str, q: str, m: str) -> str:
    return EXCEEDS.format(r=r, f=f, a=a, q=q, m=m)


def unused(r: str, f: str, n: str) -> str:
    return UNUSED.format(r=r, f=f, n=n)


def pods_cpu(flavor_name: str, cpu: dict | str) -> dict:
    cpu_res = res(CPU, cpu) if isinstance(cpu, str) else cpu
    return fq(flavor_name, res(PODS, "10"), cpu_res)


FA_CASES: dict[str, FA] = {
    "single flavor, fits": FA(
        [main(cpu="1", memory="1Mi")],
        fa_cq(rg(fq("default", res(CPU, "1"), res(MEM, "2Mi")))),
        FIT,
        {MAIN: {CPU: ("default", FIT), MEM: ("default", FIT)}},
    ),
    "single flavor, fits tainted flavor": FA(
        [main(cpu="1", tolerations=SPOT_TOLERATION)],
        fa_cq(rg(fq("tainted", res(CPU, "4")))),
        FIT,
        {MAIN: {CPU: ("tainted", FIT)}},
    ),
    "single flavor, fits tainted flavor with toleration": FA(
        [main(cpu="1")],
        fa_cq(rg(fq("taint_and_toleration", res(CPU, "4")))),
        FIT,
        {MAIN: {CPU: ("taint_and_toleration", FIT)}},
    ),
    "single flavor, used resources, doesn't fit": FA(
        [main(cpu="2")],
        fa_cq(rg(fq("default", res(CPU, "4")))),
        PREEMPT_MODE,
        {MAIN: {CPU: ("default", PREEMPT_MODE)}},
        {MAIN: [unused(CPU, "default", "1")]},
        usage={("default", CPU): "3"},
    ),
    "multiple resource groups, fits": FA(
        [main(cpu="3", memory="10Mi")],
        fa_cq(
            rg(fq("one", res(CPU, "2")), fq("two", res(CPU, "4"))),
            rg(fq("b_one", res(MEM, "1Gi")), fq("b_two", res(MEM, "5Gi"))),
        ),
        FIT,
        {MAIN: {CPU: ("two", FIT), MEM: ("b_one", FIT)}},
    ),
    "multiple resource groups, one could fit with preemption, other doesn't fit": FA(
        [main(cpu="3", memory="10Mi")],
        fa_cq(rg(fq("one", res(CPU, "3"))), rg(fq("b_one", res(MEM, "1Mi")))),
        NO_FIT_MODE,
        {},
        {MAIN: [exceeds(MEM, "b_one", "0", "10Mi", "1Mi")]},
        usage={("one", CPU): "1"},
    ),
    "multiple resource groups with multiple resources, fits": FA(
        [main(cpu="3", memory="10Mi", **{GPU: "3"})],
        fa_cq(
            rg(fq("one", res(CPU, "2"), res(MEM, "1Gi")), fq("two", res(CPU, "4"), res(MEM, "15Mi"))),
            rg(fq("b_one", res(GPU, "4")), fq("b_two", res(GPU, "2"))),
        ),
        FIT,
        {MAIN: {CPU: ("two", FIT), MEM: ("two", FIT), GPU: ("b_one", FIT)}},
    ),
    "multiple resources in a group, doesn't fit": FA(
        [main(cpu="3", memory="10Mi")],
        fa_cq(rg(fq("one", res(CPU, "2"), res(MEM, "1Gi")), fq("two", res(CPU, "4"), res(MEM, "5Mi")))),
        NO_FIT_MODE,
        {},
        {MAIN: [exceeds(CPU, "one", "0", "3", "2"), exceeds(MEM, "two", "0", "10Mi", "5Mi")]},
    ),
    "multiple flavors, fits while skipping tainted flavor": FA(
        [main(cpu="3")],
        fa_cq(rg(fq("tainted", res(CPU, "4")), fq("two", res(CPU, "4")))),
        FIT,
        {MAIN: {CPU: ("two", FIT)}},
    ),
    "multiple flavors with different label keys, selector only uses flavor's own keys": FA(
        [main(cpu="1", selector={"x": "a", "y": "g"})],
        fa_cq(rg(fq("label-x-a", res(CPU, "4")), fq("label-xy-b", res(CPU, "4")))),
        FIT,
        {MAIN: {CPU: ("label-x-a", FIT)}},
    ),
    "labelless flavor in group with labeled flavor, workload uses labeled selector": FA(
        [main(cpu="1", selector={"type": "two"})],
        fa_cq(rg(fq("default", res(CPU, "4")), fq("two", res(CPU, "4")))),
        FIT,
        {MAIN: {CPU: ("default", FIT)}},
    ),
    "multiple specs, fit different flavors": FA(
        [pod_set("driver", 1, {CPU: "5"}), pod_set("worker", 1, {CPU: "3"})],
        fa_cq(rg(fq("one", res(CPU, "4")), fq("two", res(CPU, "10")))),
        FIT,
        {"driver": {CPU: ("two", FIT)}, "worker": {CPU: ("one", FIT)}},
    ),
    "multiple specs, fits borrowing": FA(
        [pod_set("driver", 1, {CPU: "4", MEM: "1Gi"}), pod_set("worker", 1, {CPU: "6", MEM: "4Gi"})],
        fa_cq(rg(fq("default", res(CPU, "2", "98"), res(MEM, "2Gi"))), cohort_name="test-cohort"),
        FIT,
        {
            "driver": {CPU: ("default", FIT), MEM: ("default", FIT)},
            "worker": {CPU: ("default", FIT), MEM: ("default", FIT)},
        },
        secondary=fa_secondary(rg(fq("default", res(CPU, "198"), res(MEM, "198Gi")))),
        borrowing=1,
    ),
    "not enough space to borrow": FA(
        [main(cpu="2")],
        fa_cq(rg(fq("one", res(CPU, "1"))), cohort_name="test-cohort"),
        NO_FIT_MODE,
        {},
        {MAIN: [exceeds(CPU, "one", "0", "2", "1")]},
        secondary=fa_secondary(rg(fq("one", res(CPU, "10", "", "0")))),
        secondary_usage={("one", CPU): "9"},
    ),
    "past min, but can preempt in ClusterQueue": FA(
        [main(cpu="2")],
        fa_cq(rg(fq("one", res(CPU, "2")))),
        PREEMPT_MODE,
        {MAIN: {CPU: ("one", PREEMPT_MODE)}},
        {MAIN: [unused(CPU, "one", "1")]},
        usage={("one", CPU): "1"},
    ),
    "can only preempt flavors that match affinity": FA(
        [main(cpu="2", selector={"type": "two"})],
        fa_cq(rg(fq("one", res(CPU, "4")), fq("two", res(CPU, "4")))),
        PREEMPT_MODE,
        {MAIN: {CPU: ("two", PREEMPT_MODE)}},
        {MAIN: ["flavor one doesn't match node affinity", unused(CPU, "two", "1")]},
        usage={("one", CPU): "3", ("two", CPU): "3"},
        preemptible=True,
    ),
    "each podset requires preemption on a different flavor": FA(
        [pod_set("launcher", 1, {CPU: "2"}), pod_set("workers", 10, {CPU: "1"}, tolerations=SPOT_TOLERATION)],
        fa_cq(rg(fq("one", res(CPU, "4")), fq("tainted", res(CPU, "10")))),
        PREEMPT_MODE,
        {"launcher": {CPU: ("one", PREEMPT_MODE)}, "workers": {CPU: ("tainted", PREEMPT_MODE)}},
        {
            "launcher": [
                unused(CPU, "one", "1"),
                "untolerated taint {instance spot NoSchedule <nil>} in flavor tainted",
            ],
            "workers": [exceeds(CPU, "one", "2", "10", "4"), unused(CPU, "tainted", "3")],
        },
        usage={("one", CPU): "3", ("tainted", CPU): "3"},
        preemptible=True,
    ),
    "resource not listed in clusterQueue": FA(
        [main(**{GPU: "2"})],
        fa_cq(rg(fq("one", res(CPU, "4")))),
        NO_FIT_MODE,
        {},
        {MAIN: ["resource example.com/gpu unavailable in ClusterQueue"]},
    ),
    "zero resource request not in clusterQueue should succeed": FA(
        [main(cpu="1", **{GPU: "0"})], fa_cq(rg(fq("default", res(CPU, "4")))), FIT, {MAIN: {CPU: ("default", FIT)}}
    ),
    "zero resource request defined in clusterQueue should get flavor assigned": FA(
        [main(cpu="1", **{GPU: "0"})],
        fa_cq(rg(fq("default", res(CPU, "4"), res(GPU, "4")))),
        FIT,
        {MAIN: {CPU: ("default", FIT), GPU: ("default", FIT)}},
    ),
    "num pods fit": FA(
        [main(3, cpu="1")],
        fa_cq(rg(fq("default", res(PODS, "3"), res(CPU, "10")))),
        FIT,
        {MAIN: {CPU: ("default", FIT), PODS: ("default", FIT)}},
    ),
    "num pods don't fit": FA(
        [main(3, cpu="1")],
        fa_cq(rg(fq("default", res(PODS, "2"), res(CPU, "10")))),
        NO_FIT_MODE,
        {},
        {MAIN: [exceeds(PODS, "default", "0", "3", "2")]},
    ),
    "preempt before try next flavor": FA(
        [main(cpu="9")],
        fa_cq(rg(pods_cpu("one", "10"), pods_cpu("two", "10")), fungibility=MAY_STOP_BOTH),
        PREEMPT_MODE,
        {MAIN: {CPU: ("one", PREEMPT_MODE), PODS: ("one", FIT)}},
        {MAIN: [unused(CPU, "one", "1")]},
        usage={("one", CPU): "2"},
        preemptible=True,
    ),
    "preempt try next flavor": FA(
        [main(cpu="9")],
        fa_cq(rg(pods_cpu("one", "10"), pods_cpu("two", "10"))),
        FIT,
        {MAIN: {CPU: ("two", FIT), PODS: ("two", FIT)}},
        usage={("one", CPU): "2"},
        preemptible=True,
    ),
    "borrow try next flavor, found the first flavor": FA(
        [main(cpu="9")],
        fa_cq(
            rg(pods_cpu("one", res(CPU, "10", "1")), pods_cpu("two", "1")),
            cohort_name="test-cohort",
            fungibility=TRY_NEXT_BOTH,
        ),
        FIT,
        {MAIN: {CPU: ("one", FIT), PODS: ("one", FIT)}},
        usage={("one", CPU): "2"},
        secondary=fa_secondary(rg(fq("one", res(CPU, "1")))),
        borrowing=1,
    ),
    "borrow try next flavor, found the second flavor": FA(
        [main(cpu="9")],
        fa_cq(
            rg(pods_cpu("one", res(CPU, "10", "1")), pods_cpu("two", "10")),
            cohort_name="test-cohort",
            fungibility=TRY_NEXT_BOTH,
        ),
        FIT,
        {MAIN: {CPU: ("two", FIT), PODS: ("two", FIT)}},
        usage={("one", CPU): "2"},
        secondary=fa_secondary(rg(fq("one", res(CPU, "1")))),
    ),
    "borrow before try next flavor": FA(
        [main(cpu="9")],
        fa_cq(rg(pods_cpu("one", res(CPU, "10", "1")), pods_cpu("two", "10")), cohort_name="test-cohort"),
        FIT,
        {MAIN: {CPU: ("one", FIT), PODS: ("one", FIT)}},
        usage={("one", CPU): "2"},
        secondary=fa_secondary(rg(fq("one", res(CPU, "1")))),
        borrowing=1,
    ),
}


BORROW_LOWER_RECLAIM = {"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {"policy": "LowerPriority"}}


def borrow_try_next(preempt: str) -> FA:
    return FA(
        [main(cpu="12")],
        fa_cq(
            rg(fq("one", res(CPU, "0", "12")), fq("two", res(CPU, "12"))),
            cohort_name="test-cohort",
            preemption=BORROW_LOWER_RECLAIM,
            fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": preempt},
        ),
        FIT,
        {MAIN: {CPU: ("two", FIT)}},
        secondary=fa_secondary(rg(fq("one", res(CPU, "12")))),
    )


def oracle_none_case() -> FA:
    return FA(
        [main(cpu="2")],
        fa_cq(
            rg(fq("one", res(CPU, "0", "2")), fq("two", res(CPU, "0", "2"))),
            cohort_name="test-cohort",
            preemption=BORROW_LOWER_RECLAIM,
            fungibility=MAY_STOP_BOTH,
        ),
        FIT,
        {MAIN: {CPU: ("two", FIT)}},
        secondary=fa_secondary(rg(fq("one", res(CPU, "2")), fq("two", res(CPU, "2")))),
        secondary_usage={("one", CPU): "2"},
        borrowing=1,
    )


def fs_reclaim_never_case() -> FA:
    return FA(
        [main(cpu="12")],
        fa_cq(
            rg(fq("one", res(CPU, "0")), fq("two", res(CPU, "12"))),
            cohort_name="test-cohort",
            preemption={"reclaimWithinCohort": "Never"},
            fungibility=MAY_STOP_BOTH,
        ),
        FIT,
        {MAIN: {CPU: ("two", FIT)}},
        secondary=fa_secondary(rg(fq("one", res(CPU, "12")))),
        secondary_usage={("one", CPU): "10"},
        fair_sharing=True,
    )


FA_CASES.update(
    {
        "when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor": borrow_try_next(
            "MayStopSearch"
        ),
        "when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor,"
        "WhenCanPreempt=MayStopSearch": borrow_try_next("MayStopSearch"),
        "when borrowing while preemption is needed, but borrowingLimit exceeds the quota available in the cohort": FA(
            [main(cpu="12")],
            fa_cq(rg(fq("one", res(CPU, "0", "12"))), cohort_name="test-cohort", preemption=BORROW_LOWER_RECLAIM),
            NO_FIT_MODE,
            {},
            {MAIN: [exceeds(CPU, "one", "0", "12", "11")]},
            secondary=fa_secondary(rg(fq("one", res(CPU, "11")))),
            secondary_usage={("one", CPU): "10"},
        ),
        "lend try next flavor, found the second flavor": FA(
            [main(cpu="9")],
            fa_cq(
                rg(pods_cpu("one", res(CPU, "10", "", "1")), pods_cpu("two", res(CPU, "10", "", "0"))),
                cohort_name="test-cohort",
                fungibility=TRY_NEXT_BOTH,
            ),
            FIT,
            {MAIN: {CPU: ("two", FIT), PODS: ("two", FIT)}},
            usage={("one", CPU): "2"},
            secondary=fa_secondary(rg(fq("one", res(CPU, "1")))),
        ),
        "lend try next flavor, found the first flavor": FA(
            [main(cpu="9")],
            fa_cq(
                rg(pods_cpu("one", res(CPU, "10", "", "1")), pods_cpu("two", res(CPU, "1", "", "0"))),
                cohort_name="test-cohort",
                fungibility=TRY_NEXT_BOTH,
            ),
            FIT,
            {MAIN: {CPU: ("one", FIT), PODS: ("one", FIT)}},
            usage={("one", CPU): "2"},
            secondary=fa_secondary(rg(fq("one", res(CPU, "1")))),
            borrowing=1,
        ),
        "cannot preempt in cohort (oracle returns None) for the first flavor, tries the second flavor (which "
        "fits)": oracle_none_case(),
        "cannot preempt in cohort (oracle returns None) for the first flavor, tries the second flavor (which fits); "
        "using deprecated WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch": oracle_none_case(),
        "quota exhausted, but can preempt in cohort and ClusterQueue": FA(
            [main(cpu="9")],
            fa_cq(rg(pods_cpu("one", res(CPU, "10", "", "0"))), cohort_name="test-cohort"),
            PREEMPT_MODE,
            {MAIN: {CPU: ("one", PREEMPT_MODE), PODS: ("one", FIT)}},
            {MAIN: [unused(CPU, "one", "1")]},
            usage={("one", CPU): "2"},
            secondary=fa_secondary(rg(fq("one", res(PODS, "0"), res(CPU, "0")))),
            borrowing=None,
            preemptible=True,
        ),
        "when borrowing while preemption is needed for flavor one, fair sharing enabled, reclaimWithinCohort=Never": (
            fs_reclaim_never_case()
        ),
        "when borrowing while preemption is needed for flavor one, fair sharing enabled, reclaimWithinCohort=Never; "
        "using deprecated WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch": fs_reclaim_never_case(),
    }
)


ONE_TWO_CPU4 = rg(fq("one", res(CPU, "4")), fq("two", res(CPU, "4")))

FA_CASES.update(
    {
        "multiple resource groups with multiple resources, fits with different modes": FA(
            [main(cpu="3", memory="10Mi", **{GPU: "3"})],
            fa_cq(
                rg(fq("one", res(CPU, "2"), res(MEM, "1Gi")), fq("two", res(CPU, "4"), res(MEM, "15Mi"))),
                rg(fq("b_one", res(GPU, "4"))),
                cohort_name="test-cohort",
            ),
            PREEMPT_MODE,
            {MAIN: {CPU: ("two", FIT), MEM: ("two", PREEMPT_MODE), GPU: ("b_one", PREEMPT_MODE)}},
            {
                MAIN: [
                    exceeds(CPU, "one", "0", "3", "2"),
                    unused(MEM, "two", "5Mi"),
                    unused(GPU, "b_one", "1"),
                ]
            },
            usage={("two", MEM): "10Mi"},
            secondary=cq("test-secondary-clusterqueue", rg(fq("b_one", res(GPU, "0"))), cohort="test-cohort"),
            secondary_usage={("b_one", GPU): "2"},
            borrowing=None,
            preemptible=True,
        ),
        "multiple flavors, fits a node selector": FA(
            [main(cpu="1", selector={"type": "two", "ignored1": "foo"}, affinity=[[node_in("ignored2", "bar")]])],
            fa_cq(ONE_TWO_CPU4),
            FIT,
            {MAIN: {CPU: ("two", FIT)}},
        ),
        "multiple flavors, fits with node affinity": FA(
            [main(cpu="1", memory="1Mi", selector={"ignored1": "foo"}, affinity=[[node_in("type", "two")]])],
            fa_cq(rg(fq("one", res(CPU, "4"), res(MEM, "1Gi")), fq("two", res(CPU, "4"), res(MEM, "1Gi")))),
            FIT,
            {MAIN: {CPU: ("two", FIT), MEM: ("two", FIT)}},
        ),
        "multiple flavors, node affinity fits any flavor": FA(
            [main(cpu="1", affinity=[[node_in("ignored2", "bar")], [node_in("cpuType", "two")]])],
            fa_cq(ONE_TWO_CPU4),
            FIT,
            {MAIN: {CPU: ("one", FIT)}},
        ),
        "multiple flavors, doesn't fit node affinity": FA(
            [main(cpu="1", affinity=[[node_in("type", "three")]])],
            fa_cq(ONE_TWO_CPU4),
            NO_FIT_MODE,
            {},
            {MAIN: ["flavor one doesn't match node affinity", "flavor two doesn't match node affinity"]},
        ),
        "past max, but can preempt in ClusterQueue": FA(
            [main(cpu="2")],
            fa_cq(rg(fq("one", res(CPU, "2", "8"))), cohort_name="test-cohort"),
            PREEMPT_MODE,
            {MAIN: {CPU: ("one", PREEMPT_MODE)}},
            {MAIN: [unused(CPU, "one", "1")]},
            usage={("one", CPU): "9"},
            secondary=fa_secondary(rg(fq("one", res(CPU, "98")))),
            secondary_usage={("one", CPU): "9"},
            borrowing=None,
            preemptible=True,
        ),
        "past min, but can preempt in cohort and ClusterQueue": FA(
            [main(cpu="2")],
            fa_cq(rg(fq("one", res(CPU, "3"))), cohort_name="test-cohort"),
            PREEMPT_MODE,
            {MAIN: {CPU: ("one", PREEMPT_MODE)}},
            {MAIN: [unused(CPU, "one", "2")]},
            usage={("one", CPU): "2"},
            secondary=fa_secondary(rg(fq("one", res(CPU, "7")))),
            secondary_usage={("one", CPU): "8"},
            borrowing=None,
            preemptible=True,
        ),
    }
)


# TestReclaimBeforePriorityPreemption: three flavors of 10 compute and 10 gpu each, lent to a cohort where another
# ClusterQueue has none; usage in the other ClusterQueue can be reclaimed, usage in this one preempted by priority.

UNO_DUE_TRE = rg(*(fq(f, res("compute", "10"), res("gpu", "10")) for f in ("uno", "due", "tre")))
UNO_DUE_TRE_0 = rg(*(fq(f, res("compute", "0"), res("gpu", "0")) for f in ("uno", "due", "tre")))


def reclaim_first(
    requests: dict[str, str],
    usage: dict[tuple[str, str], str],
    other_usage: dict[tuple[str, str], str],
    mode: str,
    flavors: dict[str, str],
    fungibility: dict | None = None,
) -> FA:
    case = FA(
        [main(**requests)],
        cq(
            "test-clusterqueue",
            UNO_DUE_TRE,
            cohort="cohort",
            preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"},
            fungibility=fungibility or {"whenCanPreempt": "TryNextFlavor"},
        ),
        mode,
        {MAIN: {r: (f, mode if mode == FIT else "") for r, f in flavors.items()}},
        usage=usage,
        secondary=cq("other-clusterqueue", UNO_DUE_TRE_0, cohort="cohort"),
        secondary_usage=other_usage,
        borrowing=None,
        preemptible=True,
    )
    case.reasons = None
    return case


RECLAIM_CASES: dict[str, FA] = {
    "Select first flavor which fits": reclaim_first(
        {"gpu": "10"}, {("uno", "gpu"): "1"}, {("due", "gpu"): "1"}, FIT, {"gpu": "tre"}
    ),
    "Select first flavor where gpu reclamation is possible": reclaim_first(
        {"gpu": "10"}, {("uno", "gpu"): "1"}, {("due", "gpu"): "1", ("tre", "gpu"): "1"}, PREEMPT_MODE, {"gpu": "due"}
    ),
    "Select first flavor when flavor fungibility is disabled": reclaim_first(
        {"gpu": "10"},
        {("uno", "gpu"): "1"},
        {("due", "gpu"): "1", ("tre", "gpu"): "1"},
        PREEMPT_MODE,
        {"gpu": "uno"},
        {"whenCanPreempt": "MayStopSearch"},
    ),
    "Select first flavor where priority based preemption is possible": reclaim_first(
        {"gpu": "10"}, {(f, "gpu"): "1" for f in ("uno", "due", "tre")}, {}, PREEMPT_MODE, {"gpu": "uno"}
    ),
    "Select second flavor where gpu reclamation is possible, as compute Fits": reclaim_first(
        {"gpu": "10", "compute": "10"},
        {("uno", "gpu"): "1", ("uno", "compute"): "1", ("due", "compute"): "1"},
        {("due", "gpu"): "1", ("tre", "gpu"): "1"},
        PREEMPT_MODE,
        {"gpu": "tre", "compute": "tre"},
    ),
}


# TestDeletedFlavors: the ClusterQueue names a ResourceFlavor that no longer exists (kubesim's snapshot then marks the
# ClusterQueue inactive, so only the assigner itself sees this).

FA_CASES.update(
    {
        "multiple flavors, skip missing ResourceFlavor [TestDeletedFlavors]": FA(
            [main(cpu="3")],
            fa_cq(rg(fq("deleted-flavor", res(CPU, "4")), fq("flavor", res(CPU, "4")))),
            FIT,
            {MAIN: {CPU: ("flavor", FIT)}},
        ),
        "flavor not found [TestDeletedFlavors]": FA(
            [main(cpu="1")],
            fa_cq(rg(fq("deleted-flavor", res(CPU, "4")))),
            NO_FIT_MODE,
            {},
            {MAIN: ["flavor deleted-flavor not found"]},
        ),
    }
)

# TestHierarchical: cohorts three > two > one, each with 4 cpu of its own flavor; the ClusterQueue sits in one, another
# in two.

HIERARCHY = [
    cohort("three", rg(fq("three", res(CPU, "4")))),
    cohort("two", rg(fq("two", res(CPU, "4"))), parent="three"),
    cohort("one", rg(fq("one", res(CPU, "4"))), parent="two"),
]
ONE_TWO_THREE_0 = rg(*(fq(f, res(CPU, "0")) for f in ("one", "two", "three")))


def hierarchical(
    usage: dict, other_usage: dict, flavor_name: str, group: dict = ONE_TWO_THREE_0, fungibility: dict | None = None
) -> FA:
    return FA(
        [main(cpu="4")],
        cq(
            "test-clusterqueue",
            group,
            cohort="one",
            preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"},
            fungibility=fungibility or {"whenCanPreempt": "TryNextFlavor"},
        ),
        FIT,
        {MAIN: {CPU: (flavor_name, FIT)}},
        None,
        usage=usage,
        secondary=cq("other-clusterqueue", ONE_TWO_THREE_0, cohort="two"),
        secondary_usage=other_usage,
        borrowing=None,
        cohorts=HIERARCHY,
    )


HIERARCHICAL_CASES: dict[str, FA] = {
    "Select the top flavor": hierarchical({("one", CPU): "4"}, {("two", CPU): "4"}, "three"),
    "Select the first flavor which fits": hierarchical({("one", CPU): "4"}, {}, "two"),
    "Select deeper-borrowing flavor that fits when shallower-borrowing flavor has no preemption candidates": (
        hierarchical(
            {("one", CPU): "4"},
            {},
            "two",
            rg(fq("one", res(CPU, "4", "0")), fq("two", res(CPU, "0")), fq("three", res(CPU, "0"))),
            POB,
        )
    ),
}


# -- pkg/scheduler/scheduler_test.go: TestEntryOrdering (classic order of a cycle's entries) ---------------------------
#
# Non-borrowing entries first (then by borrowing level), higher priority first, then FIFO on the queue-order timestamp
# (the PodsReady-timeout eviction time with requeuingStrategy.timestamp Eviction). Kueue's PrioritySortingWithinCohort
# gate is on by default and kubesim has no switch for it, nor for the alpha PrioritizePreemptorWorkloads: the cases
# with either changed from its default are not ported.


def entry(name: str, created: int, priority: int = 0, borrowing: int = 0, conditions: list[dict] | None = None):
    return name, created, priority, borrowing, conditions or []


def evicted_by_timeout(at: int) -> dict:
    return {
        "type": "Evicted",
        "status": "True",
        "reason": "PodsReadyTimeout",
        "lastTransitionTime": ws.ts(T0 + timedelta(seconds=at)),
    }


def preempted(reason: str, at: int) -> dict:
    return {
        "type": "Preempted",
        "status": "True",
        "reason": reason,
        "lastTransitionTime": ws.ts(T0 + timedelta(seconds=at)),
    }


ORDERING_INPUT = [
    entry("old_borrowing", 0, borrowing=1),
    entry("old", 1),
    entry("new", 3),
    entry("high_pri_borrowing", 3, 1, borrowing=1),
    entry("new_high_pri", 4, 1),
    entry("new_borrowing", 3, borrowing=1),
    entry("evicted_borrowing", 1, borrowing=1, conditions=[evicted_by_timeout(2)]),
    entry("recently_evicted", 0, conditions=[evicted_by_timeout(2)]),
    entry("high_pri_borrowing_more", 3, 1, borrowing=2),
]
PREEMPTED_INPUT = [
    entry("old-mid-recently-preempted-in-queue", 0, 1, conditions=[preempted("InClusterQueue", 5)]),
    entry(
        "old-mid-recently-reclaimed-while-borrowing", 0, 1, conditions=[preempted("InCohortReclaimWhileBorrowing", 6)]
    ),
    entry(
        "old-mid-more-recently-reclaimed-while-borrowing",
        0,
        1,
        conditions=[preempted("InCohortReclaimWhileBorrowing", 7)],
    ),
    entry("old-mid-not-preempted-yet", 1, 1),
    entry("preemptor", 7, 2),
]
PREEMPTOR_INPUT = [
    entry("preemptor-borrowing", 1, 1, borrowing=1),
    entry("preemptor-not-borrowing", 2, 1),
    entry("not-preemptor-not-borrowing", 0, 2),
]

ORDERING_CASES = {
    "Priority sorting is enabled (default) using pods-ready Eviction timestamp (default)": (
        ORDERING_INPUT,
        "Eviction",
        [
            "new_high_pri",
            "old",
            "recently_evicted",
            "new",
            "high_pri_borrowing",
            "old_borrowing",
            "evicted_borrowing",
            "new_borrowing",
            "high_pri_borrowing_more",
        ],
    ),
    "Priority sorting is enabled (default) using pods-ready Creation timestamp": (
        ORDERING_INPUT,
        "Creation",
        [
            "new_high_pri",
            "recently_evicted",
            "old",
            "new",
            "high_pri_borrowing",
            "old_borrowing",
            "evicted_borrowing",
            "new_borrowing",
            "high_pri_borrowing_more",
        ],
    ),
    "Some workloads are preempted; Priority sorting is enabled": (
        PREEMPTED_INPUT,
        "Eviction",
        [
            "preemptor",
            "old-mid-recently-preempted-in-queue",
            "old-mid-recently-reclaimed-while-borrowing",
            "old-mid-more-recently-reclaimed-while-borrowing",
            "old-mid-not-preempted-yet",
        ],
    ),
    "Some workloads are preemptors; PrioritizePreemptorWorkloads is disabled": (
        PREEMPTOR_INPUT,
        "Eviction",
        ["not-preemptor-not-borrowing", "preemptor-not-borrowing", "preemptor-borrowing"],
    ),
}


# -- pkg/scheduler/scheduler_test.go: TestLastSchedulingContext (two cycles, some workloads deleted in between) -----


@dataclass
class TwoCycles:
    """One cycle, then the listed workloads are deleted (their cohort's set-aside workloads requeued) and another
    cycle runs: first = admissions of the first cycle, final = every reservation {key: (cluster queue, cpu flavor)}
    after the second."""

    cluster_queues: list[dict]
    workloads: list[dict]
    first: dict
    final: dict[str, tuple[str, str]]
    delete: list[str] = field(default_factory=list)
    first_preempted: set[str] = field(default_factory=set)
    first_messages: dict[str, str] = field(default_factory=dict)


LAST_CONTEXT_LQS = [
    lq("main", "default", "eng-alpha"),
    lq("main-alpha", "default", "eng-cohort-alpha"),
    lq("main-beta", "default", "eng-cohort-beta"),
    lq("main-theta", "default", "eng-cohort-theta"),
]
NEVER_WITHIN_LOWER_RECLAIM = {"withinClusterQueue": "Never", "reclaimWithinCohort": "LowerPriority"}
OD_50_50_SPOT_100 = rg(fq("on-demand", res(CPU, "50", "50")), fq("spot", res(CPU, "100", "0")))
CONTEXT_COHORT = [
    cq(
        f"eng-cohort-{n}",
        OD_50_50_SPOT_100,
        cohort="cohort",
        strict=True,
        preemption=NEVER_WITHIN_LOWER_RECLAIM,
        fungibility=f,
    )
    for n, f in (("alpha", MAY_STOP_BOTH), ("beta", MAY_STOP_BOTH), ("theta", TRY_NEXT_BOTH))
]


def run_two_cycles(case: TwoCycles) -> None:
    import copy

    objects = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": copy.deepcopy(o) for o in case.workloads}

    def snapshot() -> Snapshot:
        return Snapshot.from_objects(
            resource_flavors=[flavor("on-demand"), flavor("spot")],
            cluster_queues=case.cluster_queues,
            local_queues=LAST_CONTEXT_LQS,
            workloads=list(objects.values()),
            config=KueueConfig(fair_sharing=False, quota_check_strategy="BlockUndeclared"),
            now=T0,
        )

    scheduler = Scheduler()
    first = scheduler.cycle(snapshot(), T0)
    assert {
        a.workload.key: (a.cluster_queue, {p["name"]: p["flavors"] for p in a.podset_assignments})
        for a in first.admitted
    } == case.first
    assert {p.victim.key for p in first.preempted} == case.first_preempted
    messages = {p.workload.key: p.message for p in first.pending}
    for key, message in case.first_messages.items():
        assert messages.get(key) == message, key
    for a in first.admitted:
        ws.set_quota_reservation(objects[a.workload.key], a.cluster_queue, a.podset_assignments, T0)
    for p in first.preempted:
        ws.preempt(objects[p.victim.key], p.reason, p.message, T0)
    for key in case.delete:
        del objects[key]
    scheduler.queues.flush()  # a deletion requeues the set-aside workloads of the cohort
    snap = snapshot()
    scheduler.cycle(snap, T0 + timedelta(seconds=1))
    final = {
        key: (name, next(iter(w.usage))[0])
        for name, node in snap.cluster_queues.items()
        for key, w in node.workloads.items()
    }
    assert final == case.final


def od_at(cq_name: str) -> tuple[str, dict]:
    return at(cq_name, "on-demand")


LAST_CONTEXT_CASES: dict[str, TwoCycles] = {
    "scheduling on the first flavor is unblocked after some workloads were deleted": TwoCycles(
        [
            cq(
                "eng-alpha",
                rg(fq("on-demand", res(CPU, "50", "50")), fq("spot", res(CPU, "10", "0"))),
                preemption=WITHIN_LOWER,
                fungibility={"whenCanPreempt": "MayStopSearch"},
            )
        ],
        [
            wl("low-1", "default", "main", {CPU: "50"}, admitted=od_at("eng-alpha")),
            wl("preemptor", "default", "main", {CPU: "20"}),
        ],
        {},
        {"default/preemptor": ("eng-alpha", "on-demand")},
        delete=["default/low-1"],
        first_messages={
            "default/preemptor": "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor spot, "
            "previously considered podsets requests (0) + current podset request (20) > maximum capacity (10), "
            "insufficient unused quota for cpu in flavor on-demand, 20 more needed"
        },
    ),
    "borrow before next flavor": TwoCycles(
        CONTEXT_COHORT,
        [
            wl("placeholder", "default", requests={CPU: "50"}, admitted=od_at("eng-cohort-alpha")),
            wl("borrower", "default", "main-alpha", {CPU: "20"}),
            wl("workload1", "default", "main-beta", {CPU: "20"}),
        ],
        {"default/borrower": od_at("eng-cohort-alpha"), "default/workload1": od_at("eng-cohort-beta")},
        {
            "default/placeholder": ("eng-cohort-alpha", "on-demand"),
            "default/workload1": ("eng-cohort-beta", "on-demand"),
            "default/borrower": ("eng-cohort-alpha", "on-demand"),
        },
    ),
    "borrow after all flavors": TwoCycles(
        CONTEXT_COHORT,
        [
            wl("placeholder", "default", requests={CPU: "50"}, admitted=od_at("eng-cohort-alpha")),
            wl("placeholder1", "default", requests={CPU: "50"}, admitted=od_at("eng-cohort-theta")),
            wl("workload", "default", "main-theta", {CPU: "20"}),
        ],
        {"default/workload": at("eng-cohort-theta", "spot")},
        {
            "default/placeholder": ("eng-cohort-alpha", "on-demand"),
            "default/placeholder1": ("eng-cohort-theta", "on-demand"),
            "default/workload": ("eng-cohort-theta", "spot"),
        },
    ),
    "when the next flavor is full, but can borrow on first": TwoCycles(
        CONTEXT_COHORT,
        [
            wl("placeholder", "default", requests={CPU: "40"}, admitted=od_at("eng-cohort-alpha")),
            wl("placeholder1", "default", requests={CPU: "40"}, admitted=od_at("eng-cohort-theta")),
            wl("placeholder2", "default", requests={CPU: "100"}, admitted=at("eng-cohort-theta", "spot")),
            wl("workload", "default", "main-theta", {CPU: "20"}),
        ],
        {"default/workload": od_at("eng-cohort-theta")},
        {
            "default/placeholder": ("eng-cohort-alpha", "on-demand"),
            "default/placeholder1": ("eng-cohort-theta", "on-demand"),
            "default/placeholder2": ("eng-cohort-theta", "spot"),
            "default/workload": ("eng-cohort-theta", "on-demand"),
        },
    ),
    "when the next flavor is full, but can preempt on first": TwoCycles(
        CONTEXT_COHORT,
        [
            wl("placeholder-alpha", "default", requests={CPU: "150"}, priority=-1, admitted=od_at("eng-cohort-alpha")),
            wl("placeholder-theta-spot", "default", requests={CPU: "100"}, admitted=at("eng-cohort-theta", "spot")),
            wl("new", "default", "main-theta", {CPU: "20"}),
        ],
        {},
        {
            "default/placeholder-theta-spot": ("eng-cohort-theta", "spot"),
            "default/new": ("eng-cohort-theta", "on-demand"),
        },
        delete=["default/placeholder-alpha"],
        first_preempted={"default/placeholder-alpha"},
        first_messages={
            "default/new": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
            "on-demand, 20 more needed, insufficient unused quota for cpu in flavor spot, 20 more needed. Pending the "
            "preemption of 1 workload(s)"
        },
    ),
    "TryNextFlavor, but second flavor is full and can preempt on first": TwoCycles(
        [
            cq(
                "eng-cohort-alpha",
                rg(fq("on-demand", res(CPU, "0", "60")), fq("spot", res(CPU, "30", "30"))),
                cohort="cohort",
                preemption=RECLAIM_ANY,
                fungibility=TRY_NEXT_BOTH,
            ),
            cq(
                "eng-cohort-beta",
                rg(fq("on-demand", res(CPU, "30", "30")), fq("spot", res(CPU, "30", "30"))),
                cohort="cohort",
                preemption=RECLAIM_ANY,
                fungibility=TRY_NEXT_BOTH,
            ),
            cq("eng-cohort-shared", rg(fq("on-demand", res(CPU, "30"))), cohort="cohort"),
        ],
        [
            wl("alpha1", "default", requests={CPU: "22"}, admitted=od_at("eng-cohort-alpha"), reserved=-1),
            wl("alpha2", "default", requests={CPU: "22"}, admitted=od_at("eng-cohort-alpha")),
            wl("alpha3", "default", requests={CPU: "22"}, admitted=at("eng-cohort-alpha", "spot")),
            wl("beta1", "default", requests={CPU: "22"}, admitted=at("eng-cohort-beta", "spot")),
            wl("new", "default", "main-beta", {CPU: "22"}, uid="wl-new"),
        ],
        {},
        {
            "default/alpha1": ("eng-cohort-alpha", "on-demand"),
            "default/alpha3": ("eng-cohort-alpha", "spot"),
            "default/beta1": ("eng-cohort-beta", "spot"),
            "default/new": ("eng-cohort-beta", "on-demand"),
        },
        delete=["default/alpha2"],
        first_preempted={"default/alpha2"},
        first_messages={
            "default/new": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
            "on-demand, 6 more needed, insufficient unused quota for cpu in flavor spot, 6 more needed. Pending the "
            "preemption of 1 workload(s)"
        },
    ),
}


FA_CASES["with reclaimable pods; reclaimablePods on"] = FA(
    [main(5, cpu="1")],
    fa_cq(rg(fq("default", res(PODS, "3"), res(CPU, "10")))),
    FIT,
    {MAIN: {CPU: ("default", FIT), PODS: ("default", FIT)}},
    reclaimable=[{"name": MAIN, "count": 2}],
)


def test_reclaimable_pods_release_their_share_of_admitted_usage():
    """Kueue's ReclaimablePods for a workload holding quota: the admitted usage scales down to the pods still needed
    (10 cpu for 5 pods, 2 of them reclaimable: 6 cpu), so a second workload fits beside it."""
    admitted = wl("running", "default", "lq", podsets=[pod_set(MAIN, 5, {CPU: "2"})], admitted=at("cq", "default"))
    admitted["status"]["reclaimablePods"] = [{"name": MAIN, "count": 2}]
    snap = Snapshot.from_objects(
        resource_flavors=[flavor("default")],
        cluster_queues=[cq("cq", rg(fq("default", res(CPU, "10"))))],
        local_queues=[lq("lq", "default", "cq")],
        workloads=[admitted, wl("next", "default", "lq", {CPU: "4"})],
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    assert snap.cluster_queues["cq"].usage == {("default", CPU): 6000}
    assert [a.workload.name for a in Scheduler().cycle(snap, T0).admitted] == ["next"]


def _multi_podset_case() -> FA:
    case = FA(
        [pod_set("fitting-podset", 1, {CPU: "1"}, selector={"type": "one"}), pod_set("blocking-podset", 1, {CPU: "5"})],
        fa_cq(rg(fq("one", res(CPU, "2")), fq("two", res(CPU, "2")))),
        NO_FIT_MODE,
        {"fitting-podset": {CPU: ("one", FIT)}},
        {"blocking-podset": [exceeds(CPU, "one", "1", "5", "2"), exceeds(CPU, "two", "0", "5", "2")]},
    )
    return case


FA_CASES["multi-podset, one fits and another fails, fitting podset attempts skipped in resolveNoFitReason"] = (
    _multi_podset_case()
)

# -- the tests (keep last: each table above is complete here) ---------------------------------------------------------


@pytest.mark.parametrize("name", list(SCHEDULE_CASES))
def test_schedule(name: str) -> None:
    run_case(SCHEDULE_CASES[name])


@pytest.mark.parametrize("name", list(FS_CASES))
def test_schedule_fair_sharing(name: str) -> None:
    case = FS_CASES[name]
    case.fair_sharing = True
    run_case(case)


@pytest.mark.parametrize("name", list(FA_CASES))
def test_assign_flavors(name: str) -> None:
    run_fa(FA_CASES[name])


@pytest.mark.parametrize("name", list(RECLAIM_CASES))
def test_reclaim_before_priority_preemption(name: str) -> None:
    run_fa(RECLAIM_CASES[name])


@pytest.mark.parametrize("name", list(HIERARCHICAL_CASES))
def test_hierarchical_flavors(name: str) -> None:
    run_fa(HIERARCHICAL_CASES[name])


@pytest.mark.parametrize("name", list(ORDERING_CASES))
def test_entry_ordering(name: str) -> None:
    from kubesim.kueue.config import WaitForPodsReady
    from kubesim.kueue.scheduler.flavors import Assignment
    from kubesim.kueue.scheduler.model import workload_info
    from kubesim.kueue.scheduler.scheduler import _Entry

    inputs, timestamp, want = ORDERING_CASES[name]
    config = KueueConfig(fair_sharing=False, wait_for_pods_ready=WaitForPodsReady(requeuing_timestamp=timestamp))
    entries = []
    for i, (wl_name, created, priority, borrowing, conditions) in enumerate(inputs):
        obj = wl(wl_name, "default", "lq", {CPU: "1"}, priority=priority, created=created, uid=f"{i:02d}")
        obj["status"]["conditions"] = conditions
        entries.append(_Entry(workload_info(obj, config), None, Assignment(borrowing=borrowing)))
    snap = Snapshot.from_objects(config=config, now=T0)
    order, _ = Scheduler()._order(snap, entries, gated=False)
    assert [e.wl.name for e in order] == want


@pytest.mark.parametrize("name", list(LAST_CONTEXT_CASES))
def test_last_scheduling_context(name: str) -> None:
    run_two_cycles(LAST_CONTEXT_CASES[name])


def test_flavor_search_resumes_after_the_flavor_it_stopped_at():
    """FlavorFungibilityPreserveScanProgress (Kueue 0.19, beta, on): a workload whose search stopped at a flavor it
    could borrow in (whenCanBorrow MayStopSearch) but that another entry filled in the same cycle starts the next
    cycle's search after that flavor, even if the first flavor has room again by then (the progress of the previous
    cycle is never outdated)."""
    queues = [
        cq("lender", rg(fq("on-demand", res(CPU, "5")), fq("spot", res(CPU, "0"))), cohort="co"),
        cq("cq-a", rg(fq("on-demand", res(CPU, "0")), fq("spot", res(CPU, "5"))), cohort="co"),
        cq("cq-b", rg(fq("on-demand", res(CPU, "0")), fq("spot", res(CPU, "0"))), cohort="co"),
    ]
    lqs = [lq("a", "default", "cq-a"), lq("b", "default", "cq-b")]
    objects = [wl("w", "default", "a", {CPU: "4"}), wl("b", "default", "b", {CPU: "5"}, priority=10)]

    def snapshot(workloads: list[dict]) -> Snapshot:
        return Snapshot.from_objects(
            resource_flavors=[flavor("on-demand"), flavor("spot")],
            cluster_queues=queues,
            local_queues=lqs,
            workloads=workloads,
            config=KueueConfig(fair_sharing=False),
            now=T0,
        )

    scheduler = Scheduler()
    first = scheduler.cycle(snapshot(objects), T0)
    assert [a.workload.name for a in first.admitted] == ["b"]
    assert [(p.workload.name, p.message) for p in first.pending] == [
        ("w", "Workload no longer fits after processing another workload")
    ]
    # b finished: on-demand has room again, but w's search goes on from spot
    second = scheduler.cycle(snapshot([objects[0]]), T0 + timedelta(seconds=1))
    assert [(a.workload.name, a.podset_assignments[0]["flavors"]) for a in second.admitted] == [("w", {CPU: "spot"})]
    # from scratch (a new queue state) it would have stopped at on-demand again
    fresh = Scheduler().cycle(snapshot([objects[0]]), T0 + timedelta(seconds=1))
    assert [(a.workload.name, a.podset_assignments[0]["flavors"]) for a in fresh.admitted] == [
        ("w", {CPU: "on-demand"})
    ]


# TestLastAssignmentOutdated (FlavorFungibilityPreserveScanProgress on): the generation bump is a workload leaving the
# ClusterQueue (kubesim reads the generation from the quotas and the reserving workloads).
OUTDATED_CASES = {
    "Cluster queue allocatableResourceIncreasedGen increased": (1, True, "shape-a", True),
    "AllocatableResourceGeneration not increased": (1, False, "shape-a", False),
    "assignment from the immediately preceding cycle survives a generation bump": (4, True, "shape-a", False),
    "assignment from the current cycle survives a generation bump": (5, True, "shape-a", False),
    "assignment older than one cycle falls back to the generation check": (3, True, "shape-a", True),
    "a changed scheduling shape starts the scan over even in the preceding cycle": (4, False, "shape-b", True),
    "an unchanged scheduling shape keeps the preceding cycle's assignment": (4, True, "shape-a", False),
}


@pytest.mark.parametrize("name", list(OUTDATED_CASES))
def test_last_assignment_outdated(name: str) -> None:
    from dataclasses import replace

    from kubesim.kueue.scheduler.scheduler import _ScanProgress

    recorded_cycle, workload_left, shape, want = OUTDATED_CASES[name]
    snap = Snapshot.from_objects(
        resource_flavors=[flavor("default")],
        cluster_queues=[cq("cq", rg(fq("default", res(CPU, "10"))))],
        local_queues=[lq("lq", "default", "cq")],
        workloads=[
            wl("pending", "default", "lq", {CPU: "1"}),
            wl("running", "default", "lq", {CPU: "1"}, admitted=at("cq", "default")),
        ],
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    node, pending = snap.cluster_queues["cq"], snap.workloads["default/pending"]
    progress = _ScanProgress.record(pending, node, [{CPU: 0}], recorded_cycle)
    if shape != "shape-a":
        progress = replace(progress, shape="another shape")
    if workload_left:
        snap.remove_workload(snap.workloads["default/running"])
    assert progress.outdated(pending, node, 5) is want


# The cohort tree's part of the generation (cache.updateCohortTreeResources): Kueue advances the generation of every
# ClusterQueue of a tree whenever the tree is updated - a Cohort created, changed or deleted, a parent changed, a
# ClusterQueue joining, leaving or changing, or a ClusterQueue's update event (its status after an admission or
# eviction in the tree; FlavorFungibilityPreserveScanProgress's own description) - so a flavor search older than one
# cycle starts over. A ClusterQueue outside any cohort only sees its own quotas and departures.
TREE_BEFORE = (
    [cohort("root", rg(fq("default", res(CPU, "4")))), cohort("co", parent="root")],
    [
        cq("cq", rg(fq("default", res(CPU, "10"))), cohort="co"),
        cq("sibling", rg(fq("default", res(CPU, "10"))), cohort="co"),
        cq("elsewhere", rg(fq("default", res(CPU, "10"))), cohort="other"),
    ],
    [wl("running", "default", "sib", {CPU: "1"}, admitted=at("sibling", "default"))],
)


def _tree_change(change: str) -> tuple[list, list, list]:
    cohorts, queues, workloads = (list(x) for x in TREE_BEFORE)
    if change == "a Cohort of the tree is created":
        cohorts.append(cohort("new", parent="co"))
    elif change == "a Cohort of the tree changes its quota":
        cohorts[0] = cohort("root", rg(fq("default", res(CPU, "6"))))
    elif change == "a Cohort of the tree changes its fair-sharing weight":
        cohorts[1] = cohort("co", parent="root", weight="2")
    elif change == "a Cohort of the tree is deleted":
        cohorts = cohorts[1:]
    elif change == "a Cohort's parent changes":
        cohorts[1] = cohort("co", parent="other")
    elif change == "a ClusterQueue joins the tree":
        queues.append(cq("joining", rg(fq("default", res(CPU, "1"))), cohort="root"))
    elif change == "a ClusterQueue leaves the tree":
        queues[1] = cq("sibling", rg(fq("default", res(CPU, "10"))), cohort="other")
    elif change == "the ClusterQueue itself moves to another cohort":
        queues[0] = cq("cq", rg(fq("default", res(CPU, "10"))), cohort="other")
    elif change == "a sibling ClusterQueue changes its quota":
        queues[1] = cq("sibling", rg(fq("default", res(CPU, "9"))), cohort="co")
    elif change == "a sibling ClusterQueue changes its queueing strategy":
        queues[1] = cq("sibling", rg(fq("default", res(CPU, "10"))), cohort="co", strict=True)
    elif change == "a workload is admitted in a sibling":
        workloads.append(wl("more", "default", "sib", {CPU: "1"}, admitted=at("sibling", "default")))
    elif change == "a workload leaves a sibling":
        workloads = []
    elif change == "another tree changes":
        queues[2] = cq("elsewhere", rg(fq("default", res(CPU, "3"))), cohort="other")
        cohorts.append(cohort("other", rg(fq("default", res(CPU, "1")))))
        workloads.append(wl("far", "default", "far", {CPU: "1"}, admitted=at("elsewhere", "default")))
    elif change != "nothing changes":
        raise AssertionError(change)
    return cohorts, queues, workloads


TREE_CASES = {
    "nothing changes": False,
    "a Cohort of the tree is created": True,
    "a Cohort of the tree changes its quota": True,
    "a Cohort of the tree changes its fair-sharing weight": True,
    "a Cohort of the tree is deleted": True,
    "a Cohort's parent changes": True,
    "a ClusterQueue joins the tree": True,
    "a ClusterQueue leaves the tree": True,
    "the ClusterQueue itself moves to another cohort": True,
    "a sibling ClusterQueue changes its quota": True,
    "a sibling ClusterQueue changes its queueing strategy": True,
    "a workload is admitted in a sibling": True,
    "a workload leaves a sibling": True,
    "another tree changes": False,
}


@pytest.mark.parametrize("recorded_cycle", [3, 4])
@pytest.mark.parametrize("change", list(TREE_CASES))
def test_last_assignment_outdated_by_a_cohort_tree_change(change: str, recorded_cycle: int) -> None:
    """Recorded at cycle 3 (two cycles before the check at 5) the progress goes with any change of its tree; recorded
    in the preceding cycle (4) it survives every one of them."""
    from kubesim.kueue.scheduler.scheduler import _ScanProgress

    def snapshot(cohorts: list, queues: list, workloads: list) -> Snapshot:
        return Snapshot.from_objects(
            resource_flavors=[flavor("default")],
            cohorts=cohorts,
            cluster_queues=queues,
            local_queues=[
                lq("lq", "default", "cq"),
                lq("sib", "default", "sibling"),
                lq("far", "default", "elsewhere"),
            ],
            workloads=[wl("pending", "default", "lq", {CPU: "1"}), *workloads],
            config=KueueConfig(fair_sharing=False),
            now=T0,
        )

    before = snapshot(*TREE_BEFORE)
    progress = _ScanProgress.record(
        before.workloads["default/pending"], before.cluster_queues["cq"], [{CPU: 0}], recorded_cycle
    )
    after = snapshot(*_tree_change(change))
    outdated = progress.outdated(after.workloads["default/pending"], after.cluster_queues["cq"], 5)
    assert outdated is (TREE_CASES[change] and recorded_cycle == 3)


# TestResourcesToReserve: the capacity an entry that needs preemption but found no targets holds for the rest of the
# cycle (reclaimWithinCohort other than Any), per (flavor, resource), given the ClusterQueue's usage.
RESERVE_CQ = cq(
    "cq",
    rg(fq("on-demand", res(MEM, "100")), fq("spot", res(MEM, "0", "100"))),
    rg(fq("model-a", res("gpu", "10", "0")), fq("model-b", res("gpu", "10", "5"))),
    cohort="eng",
    strict=True,
)
CQ_USAGE = {("on-demand", MEM): 60, ("spot", MEM): 50, ("model-a", "gpu"): 6, ("model-b", "gpu"): 2}
RESERVE_CASES = {
    "Reserved memory and gpu less than assignment usage, assignment preempts": (
        PREEMPT_MODE,
        0,
        {("on-demand", MEM): 50, ("model-a", "gpu"): 6},
        CQ_USAGE,
        {("on-demand", MEM): 40, ("model-a", "gpu"): 4},
    ),
    "Reserved memory equal assignment usage, assignment preempts": (
        PREEMPT_MODE,
        0,
        {("on-demand", MEM): 30, ("model-a", "gpu"): 2},
        {**CQ_USAGE, ("model-a", "gpu"): 2},
        {("on-demand", MEM): 30, ("model-a", "gpu"): 2},
    ),
    "Reserved memory equal assignment usage, assignment fits": (
        FIT,
        0,
        {("on-demand", MEM): 50, ("model-a", "gpu"): 2},
        {**CQ_USAGE, ("model-a", "gpu"): 2},
        {("on-demand", MEM): 50, ("model-a", "gpu"): 2},
    ),
    "Reserved memory is 0, CQ is borrowing, assignment preempts without borrowing": (
        PREEMPT_MODE,
        0,
        {("spot", MEM): 50, ("model-b", "gpu"): 2},
        {("on-demand", MEM): 60, ("spot", MEM): 60, ("model-a", "gpu"): 2, ("model-b", "gpu"): 10},
        {("spot", MEM): 0, ("model-b", "gpu"): 0},
    ),
    "Reserved memory cut by nominal+borrowing quota, assignment preempts and borrows": (
        PREEMPT_MODE,
        1,
        {("spot", MEM): 50, ("model-b", "gpu"): 2},
        {("on-demand", MEM): 60, ("spot", MEM): 60, ("model-a", "gpu"): 2, ("model-b", "gpu"): 10},
        {("spot", MEM): 40, ("model-b", "gpu"): 2},
    ),
    "Reserved memory equal assignment usage, CQ borrowing limit is nil": (
        PREEMPT_MODE,
        1,
        {("on-demand", MEM): 50, ("model-b", "gpu"): 2},
        {("on-demand", MEM): 60, ("spot", MEM): 60, ("model-a", "gpu"): 2, ("model-b", "gpu"): 10},
        {("on-demand", MEM): 50, ("model-b", "gpu"): 2},
    ),
}


@pytest.mark.parametrize("name", list(RESERVE_CASES))
def test_resources_to_reserve(name: str) -> None:
    from kubesim.kueue.scheduler.flavors import FIT as K_FIT
    from kubesim.kueue.scheduler.flavors import PREEMPT as K_PREEMPT
    from kubesim.kueue.scheduler.flavors import Assignment, FlavorAssignment, PodSetAssignment
    from kubesim.kueue.scheduler.scheduler import _Entry

    mode, borrowing, usage, cq_usage, want = RESERVE_CASES[name]
    holders = [
        wl(f"workload-{i}", "default-namespace", requests={r: str(v)}, admitted=at("cq", f, resource=r))
        for i, ((f, r), v) in enumerate(cq_usage.items())
    ]
    snap = Snapshot.from_objects(
        resource_flavors=[flavor(f) for f in ("on-demand", "spot", "model-a", "model-b")],
        cluster_queues=[RESERVE_CQ],
        workloads=holders,
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    k_mode = K_FIT if mode == FIT else K_PREEMPT
    podsets = [
        PodSetAssignment(r, 1, {}, {r: FlavorAssignment(f, k_mode, 0)}, ["needs to preempt"]) for (f, r) in usage
    ]
    entry = _Entry(snap.workloads["default-namespace/workload-0"], None, Assignment(podsets, borrowing, dict(usage)))
    assert Scheduler._to_reserve(entry, snap.cluster_queues["cq"]) == want


# TestEntryComparerLess (Fair Sharing tournament order between two entries at one cohort), with Kueue's default gates
# (PrioritizePreemptorWorkloads, alpha and off, has no switch in kubesim): each side is (name, created, DRS of its
# subtree at the cohort: None for none, "borrowing" for a subtree borrowing on default/cpu, "negative" for
# NegativeDRS), every entry requesting default/cpu.
COMPARER_CASES = {
    "non-borrowing subtree preferred over borrowing subtree": (
        ("nominal", 1, None),
        ("borrowing", 0, "borrowing"),
        True,
    ),
    "both borrowing on requested flavors falls through to FIFO": (
        ("borrow-a", 1, "borrowing"),
        ("borrow-b", 0, "borrowing"),
        False,
    ),
    "lower DRS preferred over higher DRS": (("lower-drs", 1, "negative"), ("higher-drs", 0, None), True),
    "both non-borrowing falls through to FIFO": (("older", 0, None), ("newer", 1, None), True),
    "a is preemptor, b not, feature disabled": (
        ("preemptor-borrowing", 0, "borrowing"),
        ("not-preemptor-nominal", 0, None),
        False,
    ),
}


@pytest.mark.parametrize("name", list(COMPARER_CASES))
def test_entry_comparer_less(name: str) -> None:
    from kubesim.kueue.scheduler.model import workload_info
    from kubesim.kueue.scheduler.quota import DRS
    from kubesim.kueue.scheduler.scheduler import _Entry

    a, b, want = COMPARER_CASES[name]
    config = KueueConfig()
    cohort_id, drs = 1, {}
    entries = []
    for wl_name, created, kind in (a, b):
        info = workload_info(wl(wl_name, "default", "lq", {CPU: "1"}, created=created), config)
        entries.append(_Entry(info, None))
        value = {
            None: DRS(weight=0.0),
            "borrowing": DRS(borrowing=True, borrowed=frozenset({("default", CPU)})),
            "negative": DRS(ratio=-1.0),
        }[kind]
        drs[(cohort_id, info.key)] = (value, {("default", CPU): 1000})
    assert Scheduler._less(entries[0], entries[1], cohort_id, drs) is want


def test_fits_dedups_overlapping_victims():
    """TestFitsDedupsOverlappingVictims: a victim both preempted earlier in the cycle and among the entry's own
    targets frees its quota once (10 cpu, victim 6 + other 2 in use: 9 more does not fit)."""
    from kubesim.kueue.scheduler.preemption import Target

    snap = Snapshot.from_objects(
        resource_flavors=[flavor("default")],
        cluster_queues=[cq("cq", rg(fq("default", res(CPU, "10"))))],
        workloads=[
            wl("victim", "ns", requests={CPU: "6"}, admitted=at("cq", "default")),
            wl("other", "ns", requests={CPU: "2"}, admitted=at("cq", "default")),
        ],
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    victim = snap.workloads["ns/victim"]
    node = snap.cluster_queues["cq"]
    usage = {("default", CPU): 9000}
    assert not Scheduler._fits_after(snap, node, usage, {victim.key}, [Target(victim, "InClusterQueue")])
    assert Scheduler._fits_after(snap, node, {("default", CPU): 8000}, {victim.key}, [Target(victim, "InClusterQueue")])
    assert node.usage == {("default", CPU): 8000}  # the what-if leaves the snapshot as it was


# -- test/integration/singlecluster/scheduler/scheduler_test.go (quota accounting of a pod's requests) ----------------


def test_pod_level_requests_are_counted_against_quota():
    """'Should block a second workload when pod-level requests exhaust quota': container requests of 500m but
    pod-level requests of 2 cpu; 3 cpu of quota take one such workload only."""

    def pod_level(name: str, created: int) -> dict:
        obj = wl(name, "ns", "queue", {CPU: "500m"}, created=created)
        spec = obj["spec"]["podSets"][0]["template"]["spec"]
        spec["containers"][0]["resources"]["limits"] = {CPU: "500m"}
        spec["resources"] = {"requests": {CPU: "2"}, "limits": {CPU: "2"}}
        return obj

    snap = Snapshot.from_objects(
        resource_flavors=[flavor("on-demand")],
        cluster_queues=[cq("cluster-queue", rg(fq("on-demand", res(CPU, "3"))))],
        local_queues=[lq("queue", "ns", "cluster-queue")],
        workloads=[pod_level("wl1", 0), pod_level("wl2", 1)],
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    results = Scheduler().run(snap, T0)
    assert [a.workload.name for r in results for a in r.admitted] == ["wl1"]
    assert [a.usage for r in results for a in r.admitted] == [{("on-demand", CPU): 2000}]
    assert {p.workload.name: p.message for r in results for p in r.pending} == {
        "wl2": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
        "1 more needed"
    }


def test_sidecar_init_containers_add_to_the_pod_requests():
    """Kubernetes' PodRequests, which Kueue counts quota with: a sidecar (init container with restartPolicy Always)
    runs beside the containers, so its requests add up; a plain init container runs alone (beside the sidecars
    started before it)."""
    from kubesim.kueue.scheduler.model import workload_info

    obj = wl("w", "ns", "q", {CPU: "1"})
    obj["spec"]["podSets"][0]["template"]["spec"]["initContainers"] = [
        {"name": "setup", "resources": {"requests": {CPU: "3"}}},
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {CPU: "500m"}}},
        {"name": "late-setup", "resources": {"requests": {CPU: "2"}}},
    ]
    assert workload_info(obj, KueueConfig()).podsets[0].requests == {CPU: 3000}  # max(1 + 0.5, 3, 0.5 + 2)
    obj["spec"]["podSets"][0]["template"]["spec"]["initContainers"][0]["resources"]["requests"][CPU] = "1"
    assert workload_info(obj, KueueConfig()).podsets[0].requests == {CPU: 2500}  # late-setup beside the proxy


# Scenarios of the integration suite's "Using cohorts for sharing unused resources", replayed through sim.py (the
# scheduler run until nothing changes, decisions applied as Kueue's controllers apply them).

SPOT_TAINTED = {
    "metadata": {"name": "spot-tainted"},
    "spec": {"nodeLabels": {"instance": "spot"}, "nodeTaints": [taint("instance", "spot")]},
}
SPOT_UNTAINTED = flavor("spot-untainted", labels={"instance": "spot"})
INSTANCE_TOLERATION = [{"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}]


class Cluster:
    """sim.Sim with Kueue's integration objects (cpu workloads, Fair Sharing off as the scheduler suite runs)."""

    def __init__(self, *queues: dict, fair_sharing: bool = False) -> None:
        from tests.kubesim.kueue.sim import Sim

        self.sim = Sim(KueueConfig(fair_sharing=fair_sharing))
        self.sim.flavors = [flavor("on-demand"), SPOT_TAINTED, SPOT_UNTAINTED]
        self.sim.cqs = list(queues)
        self.created = 0

    def queue(self, name: str, cluster_queue: str) -> None:
        self.sim.lqs.append(lq(name, "ns", cluster_queue))

    def add(self, name: str, queue: str, cpu: str, priority: int = 0, tolerations: list | None = None) -> None:
        self.created += 1
        self.sim.workloads[name] = wl(
            name,
            "ns",
            queue,
            podsets=[pod_set(MAIN, 1, {CPU: cpu}, tolerations=tolerations)],
            priority=priority,
            created=self.created,
        )

    def flavor_of(self, name: str) -> str | None:
        if not self.sim.admitted(name):
            return None
        return self.sim.workloads[name]["status"]["admission"]["podSetAssignments"][0]["flavors"][CPU]


def test_should_admit_workloads_using_borrowed_cluster_queue():
    c = Cluster(cq("prod-cq", rg(fq("spot-tainted", res(CPU, "5", "0")), fq("on-demand", res(CPU, "5"))), cohort="all"))
    c.queue("queue", "prod-cq")
    c.add("wl", "queue", "10", tolerations=INSTANCE_TOLERATION)
    c.sim.settle()
    assert c.flavor_of("wl") is None
    c.sim.cqs.append(
        cq("fallback-cq", rg(fq("spot-tainted", res(CPU, "5")), fq("on-demand", res(CPU, "5"))), cohort="all")
    )
    c.sim.queues.flush()
    c.sim.settle()
    assert (c.sim.cq_of("wl"), c.flavor_of("wl")) == ("prod-cq", "on-demand")


def test_should_schedule_workloads_borrowing_quota_from_cluster_queues_in_the_same_cohort():
    c = Cluster(*(cq(n, rg(fq("on-demand", res(CPU, "5", "10"))), cohort="all") for n in ("prod-cq", "dev-cq")))
    c.queue("prod-queue", "prod-cq")
    c.queue("dev-queue", "dev-cq")
    c.add("wl-1", "prod-queue", "11")
    c.add("wl-2", "dev-queue", "11")
    c.sim.settle()
    assert c.sim.running() == set()
    c.sim.cqs.append(cq("test-cq", rg(fq("on-demand", res(CPU, "15", "0"))), cohort="all"))
    c.sim.queues.flush()
    c.sim.settle()
    assert (c.sim.cq_of("wl-1"), c.sim.cq_of("wl-2")) == ("prod-cq", "dev-cq")


def test_should_start_workloads_that_are_under_min_quota_before_borrowing():
    c = Cluster(
        cq("prod-cq", rg(fq("on-demand", res(CPU, "2"))), cohort="all", strict=True),
        cq("dev-cq", rg(fq("on-demand", res(CPU, "0"))), cohort="all", strict=True),
    )
    c.queue("prod-queue", "prod-cq")
    c.queue("dev-queue", "dev-cq")
    c.add("p-wl-1", "prod-queue", "2")
    c.sim.settle()
    assert c.sim.running() == {"p-wl-1"}
    c.add("d-wl-1", "dev-queue", "1")
    c.add("p-wl-2", "prod-queue", "2")
    c.sim.settle()
    assert c.sim.running() == {"p-wl-1"}
    c.sim.finish("p-wl-1")
    c.sim.settle()
    assert c.sim.running() == {"p-wl-2"}  # though created after d-wl-1
    c.sim.finish("p-wl-2")
    c.sim.settle()
    assert c.sim.running() == {"d-wl-1"}


def test_should_try_next_flavor_if_cant_preempt_on_first():
    c = Cluster(
        cq(
            "prod-cq",
            rg(fq("on-demand", res(CPU, "2")), fq("spot-untainted", res(CPU, "2"))),
            cohort="all",
            strict=True,
            preemption=WITHIN_LOWER,
            fungibility={"whenCanPreempt": "MayStopSearch"},
        )
    )
    c.queue("prod-queue", "prod-cq")
    c.add("wl-1", "prod-queue", "1")
    c.add("wl-2", "prod-queue", "1")
    c.sim.settle()
    assert (c.flavor_of("wl-1"), c.flavor_of("wl-2")) == ("on-demand", "on-demand")
    c.add("wl-3", "prod-queue", "1")
    c.sim.settle()
    assert c.flavor_of("wl-3") == "spot-untainted"


def test_should_try_next_flavor_instead_of_borrowing():
    c = Cluster(
        cq("prod-cq", rg(fq("on-demand", res(CPU, "10", "10"))), cohort="all"),
        cq(
            "dev-cq",
            rg(fq("on-demand", res(CPU, "10", "10")), fq("spot-tainted", res(CPU, "11"))),
            cohort="all",
            fungibility={"whenCanBorrow": "TryNextFlavor"},
        ),
    )
    c.queue("prod-queue", "prod-cq")
    c.queue("dev-queue", "dev-cq")
    c.add("wl-1", "prod-queue", "9")
    c.sim.settle()
    assert c.flavor_of("wl-1") == "on-demand"
    c.add("wl-2", "dev-queue", "11", tolerations=INSTANCE_TOLERATION)
    c.sim.settle()
    assert (c.sim.cq_of("wl-2"), c.flavor_of("wl-2")) == ("dev-cq", "spot-tainted")


def test_should_preempt_before_try_next_flavor():
    c = Cluster(
        cq(
            "prod-cq",
            rg(fq("on-demand", res(CPU, "10", "10")), fq("spot-untainted", res(CPU, "11"))),
            cohort="all",
            preemption={"reclaimWithinCohort": "Any"},
            fungibility={"whenCanPreempt": "MayStopSearch"},
        ),
        cq(
            "dev-cq",
            rg(fq("on-demand", res(CPU, "10", "10"))),
            cohort="all",
            fungibility={"whenCanBorrow": "TryNextFlavor"},
        ),
    )
    c.queue("prod-queue", "prod-cq")
    c.queue("dev-queue", "dev-cq")
    c.add("wl-1", "dev-queue", "9", priority=0)
    c.add("wl-2", "dev-queue", "9", priority=1)
    c.sim.settle()
    assert c.sim.running() == {"wl-1", "wl-2"}
    c.add("wl-3", "prod-queue", "5")
    c.sim.settle()
    assert [p.victim.name for p in c.sim.preemptions] == ["wl-1"]
    assert (c.sim.cq_of("wl-3"), c.flavor_of("wl-3")) == ("prod-cq", "on-demand")


def od_cpu(nominal: str, borrowing: str = "", lending: str = "") -> dict:
    return rg(fq("on-demand", res(CPU, nominal, borrowing, lending)))


def settle_after_change(c: Cluster) -> None:
    c.sim.queues.flush()  # a queue or cohort change requeues the set-aside workloads
    c.sim.settle()


def test_should_admit_workload_using_resources_borrowed_from_cohort():
    c = Cluster(cq("clusterqueue", od_cpu("0"), cohort="cohort"))
    c.queue("queue", "clusterqueue")
    c.add("wl", "queue", "10")
    c.sim.settle()
    c.sim.cohorts = [cohort("cohort", od_cpu("5"))]
    settle_after_change(c)
    assert c.sim.running() == set()
    c.sim.cohorts = [cohort("cohort", od_cpu("10"))]
    settle_after_change(c)
    assert (c.sim.cq_of("wl"), c.flavor_of("wl")) == ("clusterqueue", "on-demand")


def test_should_admit_workload_when_cq_switches_into_cohort_with_capacity():
    c = Cluster(cq("clusterqueue", od_cpu("0"), cohort="impecunious-cohort"))
    c.queue("queue", "clusterqueue")
    c.add("wl", "queue", "10")
    c.sim.cohorts = [cohort("cohort", od_cpu("10"))]
    c.sim.settle()
    assert c.sim.running() == set()
    c.sim.cqs = [cq("clusterqueue", od_cpu("0"), cohort="cohort")]
    settle_after_change(c)
    assert c.flavor_of("wl") == "on-demand"


def test_long_distance_resource_allows_workload_to_be_scheduled():
    c = Cluster(cq("cq", od_cpu("0"), cohort="left"))
    c.queue("queue", "cq")
    c.sim.cohorts = [cohort("left", parent="root"), cohort("right", parent="root")]
    c.add("wl", "queue", "10")
    c.sim.settle()
    assert c.sim.running() == set()
    c.sim.cohorts.append(cohort("bank", od_cpu("10"), parent="right"))
    settle_after_change(c)
    assert c.flavor_of("wl") == "on-demand"


def test_should_admit_overflow_workload_after_reparenting_child_cohort_to_a_larger_root():
    c = Cluster(cq("cq", od_cpu("0"), cohort="child"))
    c.queue("queue", "cq")
    c.sim.cohorts = [cohort("root-a", od_cpu("1")), cohort("root-b", od_cpu("2")), cohort("child", parent="root-a")]
    c.add("wl-1", "queue", "500m")
    c.add("wl-2", "queue", "500m")
    c.sim.settle()
    assert c.sim.running() == {"wl-1", "wl-2"}
    c.add("wl-overflow", "queue", "500m")
    c.sim.settle()
    assert c.sim.running() == {"wl-1", "wl-2"}
    c.sim.cohorts[2] = cohort("child", parent="root-b")
    settle_after_change(c)
    assert c.sim.running() == {"wl-1", "wl-2", "wl-overflow"}


def test_lending_limit_should_admit_workloads_using_borrowed_cluster_queue():
    c = Cluster(cq("prod-cq", od_cpu("5", "", "1"), cohort="all"))
    c.queue("queue", "prod-cq")
    c.add("wl", "queue", "9")
    c.sim.settle()
    assert c.sim.running() == set()
    c.sim.cqs.append(cq("dev-cq", od_cpu("5", "", "4"), cohort="all"))
    settle_after_change(c)
    assert (c.sim.cq_of("wl"), c.flavor_of("wl")) == ("prod-cq", "on-demand")


def test_lending_limit_should_admit_workloads_after_updating_lending_limit():
    c = Cluster(
        cq("prod-cq", od_cpu("5", "", "0"), cohort="all"),
        cq("dev-cq", od_cpu("5", "", "0"), cohort="all"),
    )
    c.queue("prod-queue", "prod-cq")
    c.queue("dev-queue", "dev-cq")
    c.add("wl-1", "prod-queue", "5")
    c.add("wl-2", "prod-queue", "5")
    c.sim.settle()
    assert c.sim.running() == {"wl-1"}
    c.sim.cqs[1] = cq("dev-cq", od_cpu("5", "", "5"), cohort="all")
    settle_after_change(c)
    assert c.sim.running() == {"wl-1", "wl-2"}


STRICT_FIFO_CQ = cq("strict-fifo-cq", od_cpu("5", "0"), cohort="cohort", selector=dep("eng"), strict=True)
STRICT_NAMESPACES = [{"metadata": {"name": "matching", "labels": {"dep": "eng"}}}, {"metadata": {"name": "ns"}}]


def strict_cluster(*queues: dict) -> Cluster:
    c = Cluster(STRICT_FIFO_CQ, *queues)
    c.sim.namespaces = STRICT_NAMESPACES
    return c


def add_in(c: Cluster, name: str, namespace: str, queue: str, cpu: str, priority: int) -> None:
    c.add(name, queue, cpu, priority=priority)
    c.sim.workloads[name]["metadata"]["namespace"] = namespace


def test_strict_fifo_should_schedule_workloads_by_their_priority_strictly():
    c = strict_cluster()
    c.sim.lqs.append(lq("strict-fifo-q", "matching", "strict-fifo-cq"))
    add_in(c, "wl1", "matching", "strict-fifo-q", "2", 100)
    add_in(c, "wl2", "matching", "strict-fifo-q", "5", 10)
    add_in(c, "wl3", "matching", "strict-fifo-q", "1", 1)  # fits, but not before wl2
    c.sim.settle()
    assert c.sim.running() == {"wl1"}


def test_strict_fifo_workloads_not_matching_namespace_selector_should_not_block_others():
    c = strict_cluster()
    c.sim.lqs += [lq("not-matching-queue", "ns", "strict-fifo-cq"), lq("matching-queue", "matching", "strict-fifo-cq")]
    add_in(c, "wl1", "matching", "matching-queue", "2", 100)
    add_in(c, "wl2", "ns", "not-matching-queue", "5", 10)
    add_in(c, "wl3", "matching", "matching-queue", "1", 1)
    c.sim.settle()
    assert c.sim.running() == {"wl1", "wl3"}


def test_pending_workload_with_strict_fifo_does_not_block_other_cq_from_borrowing_from_a_third_cq():
    team_a = cq("team-a", od_cpu("5"), cohort="cohort")
    c = strict_cluster(team_a, cq("shared-resources", od_cpu("5"), cohort="cohort"))
    c.sim.lqs += [lq("strict-fifo-q", "matching", "strict-fifo-cq"), lq("team-a-lq", "matching", "team-a")]
    add_in(c, "wl", "matching", "strict-fifo-q", "3", 10)
    add_in(c, "player1-a", "matching", "team-a-lq", "5", 1)
    c.sim.settle()
    assert c.sim.running() == {"wl", "player1-a"}
    c.sim.cqs[1] = {**team_a, "spec": {**team_a["spec"], "stopPolicy": "Hold"}}
    add_in(c, "pending-wl", "matching", "strict-fifo-q", "3", 99)  # over nominal + borrowing, may not preempt
    add_in(c, "player2-a", "matching", "team-a-lq", "5", 11)  # may borrow the shared resources
    add_in(c, "player3-a", "matching", "team-a-lq", "1", 10)  # would borrow what strict-fifo-cq waits for
    c.sim.settle()
    c.sim.cqs[1] = team_a
    settle_after_change(c)
    assert c.sim.running() == {"wl", "player1-a", "player2-a"}


def test_shouldnt_admit_second_workload_on_over_admission():
    """'Deleting resources from borrowing clusterQueue': a workload borrowed memory from cq2; once cq1 no longer
    declares memory at all, the cohort is over its memory quota and cq2's workload still may not have cq2's own."""
    cq1 = cq("cq1", rg(fq("on-demand", res(CPU, "1"), res(MEM, "1Gi"))), cohort="cohort")
    c = Cluster(cq1, cq("cq2", rg(fq("on-demand", res(CPU, "2"), res(MEM, "1Gi"))), cohort="cohort"))
    c.queue("lq1", "cq1")
    c.queue("lq2", "cq2")
    c.sim.workloads["wl1"] = wl("wl1", "ns", "lq1", {CPU: "2", MEM: "2Gi"}, created=1)
    c.sim.settle()  # created one after the other: wl1 is admitted before wl2 exists
    c.sim.workloads["wl2"] = wl("wl2", "ns", "lq2", {CPU: "1", MEM: "1Gi"}, created=2)
    message = (
        "couldn't assign flavors to pod set main: insufficient unused quota for memory in flavor on-demand, 1Gi more "
        "needed"
    )
    c.sim.settle()
    assert c.sim.running() == {"wl1"}
    assert c.sim.condition("wl2", "QuotaReserved")["message"] == message
    c.sim.cqs[0] = cq("cq1", rg(fq("on-demand", res(CPU, "1"))), cohort="cohort")
    settle_after_change(c)
    assert c.sim.running() == {"wl1"}
    assert c.sim.condition("wl2", "QuotaReserved")["message"] == message


def foundation_cluster(reclaim: str) -> Cluster:
    c = Cluster(
        cq("foundation-queue", od_cpu("2"), cohort="cohort", strict=True, preemption={"reclaimWithinCohort": reclaim}),
        cq("best-effort-queue", od_cpu("0"), cohort="cohort"),
    )
    c.queue("foundation-queue", "foundation-queue")
    c.queue("best-effort-queue", "best-effort-queue")
    return c


def test_foundation_queue_allows_best_effort_queue_to_use_capacity_until_it_is_ready_to_admit_next_workload():
    c = foundation_cluster("Any")
    c.add("f1", "foundation-queue", "1", priority=1000)
    c.sim.settle()
    c.add("f2", "foundation-queue", "2", priority=1000)
    c.sim.settle()
    assert c.sim.running() == {"f1"}
    c.add("be1", "best-effort-queue", "1")
    c.add("be2", "best-effort-queue", "1")
    c.sim.settle()
    assert c.sim.running() == {"f1", "be1"}  # foundation-queue can always reclaim what it lends
    c.sim.finish("f1")
    c.sim.settle()  # f2 reclaims from be1 (the sim finishes the eviction at once); be2 does not get in meanwhile
    assert [p.victim.name for p in c.sim.preemptions] == ["be1"]
    assert c.sim.running() == {"f2"}


def test_foundation_queue_blocks_capacity_when_it_is_not_sure_that_it_can_reclaim():
    c = foundation_cluster("LowerPriority")
    c.add("f1", "foundation-queue", "1", priority=1000)
    c.sim.settle()
    c.add("f2", "foundation-queue", "2", priority=1000)
    c.add("be1", "best-effort-queue", "1")
    c.add("be2", "best-effort-queue", "1")
    c.sim.settle()
    assert c.sim.running() == {"f1"}  # f2 holds what foundation-queue could lend
    c.sim.finish("f1")
    c.sim.settle()
    assert c.sim.running() == {"f2"}


def test_finds_correct_flavor_by_discarding_the_first_one_in_which_preemption_is_not_possible():
    """'Using multiple flavours': after cq2 reclaims f1 from cq1's high-priority workload, that workload finds no
    victim in f1 and takes f2 from its own lower-priority workload instead."""
    fungibility = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    preemption = {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority"},
    }
    c = Cluster(
        cq(
            "cq1",
            rg(fq("f1", res(CPU, "0")), fq("f2", res(CPU, "1"))),
            cohort="cohort",
            preemption=preemption,
            fungibility=fungibility,
        ),
        cq(
            "cq2",
            rg(fq("f1", res(CPU, "1")), fq("f2", res(CPU, "0"))),
            cohort="cohort",
            preemption=preemption,
            fungibility=fungibility,
        ),
    )
    c.sim.flavors = [flavor("f1"), flavor("f2")]
    c.queue("cq1", "cq1")
    c.queue("cq2", "cq2")
    c.add("cq1-low", "cq1", "1", priority=0)
    c.sim.settle()
    assert c.flavor_of("cq1-low") == "f2"
    c.add("cq1-high", "cq1", "1", priority=9999)
    c.sim.settle()
    assert c.flavor_of("cq1-high") == "f1"
    c.add("cq2-middle", "cq2", "1", priority=105)
    c.sim.settle()
    assert [p.victim.name for p in c.sim.preemptions] == ["cq1-high", "cq1-low"]
    assert (c.flavor_of("cq2-middle"), c.flavor_of("cq1-high"), c.flavor_of("cq1-low")) == ("f1", "f2", None)


def test_should_not_admit_from_stale_subtree_quota_after_deleting_sibling_cohort():
    c = Cluster(cq("cq-a", od_cpu("10"), cohort="left"), cq("cq-b", od_cpu("7"), cohort="right"))
    c.sim.cohorts = [
        cohort("root"),
        cohort("left", od_cpu("0"), parent="root"),
        cohort("right", od_cpu("5"), parent="root"),
    ]
    c.queue("cq-a", "cq-a")
    c.add("wl-base", "cq-a", "10")
    c.sim.settle()
    assert c.flavor_of("wl-base") == "on-demand"
    del c.sim.cohorts[2]  # cq-b still names 'right', now an implicit cohort of its own
    c.add("wl-after-delete", "cq-a", "8")
    settle_after_change(c)
    assert c.sim.running() == {"wl-base"}


def test_should_not_allow_borrowing_through_deleted_mid_tree_cohort():
    c = Cluster(cq("cq-mid", od_cpu("1"), cohort="mid"))
    c.sim.cohorts = [cohort("root", od_cpu("2")), cohort("mid", od_cpu("2"), parent="root")]
    c.queue("cq-mid", "cq-mid")
    c.add("wl-base", "cq-mid", "1")
    c.sim.settle()
    assert c.sim.running() == {"wl-base"}
    del c.sim.cohorts[1]
    settle_after_change(c)
    assert c.sim.running() == {"wl-base"}  # within its own quota: not evicted
    c.add("wl-after-delete", "cq-mid", "2")
    settle_after_change(c)
    assert c.sim.running() == {"wl-base"}


def test_should_admit_only_up_to_the_lending_limit_of_sibling_cohort():
    c = Cluster(cq("lender-cq", od_cpu("1"), cohort="lender"), cq("borrower-cq", od_cpu("0"), cohort="borrower"))
    c.sim.cohorts = [
        cohort("root", od_cpu("0")),
        cohort("lender", od_cpu("1", "", "500m"), parent="root"),
        cohort("borrower", parent="root"),
    ]
    c.queue("borrower-cq", "borrower-cq")
    c.add("wl-1", "borrower-cq", "500m")
    c.add("wl-2", "borrower-cq", "500m")
    c.sim.settle()
    assert c.sim.running() == {"wl-1"}


def test_should_allow_production_to_borrow_but_block_research_from_borrowing():
    c = Cluster(
        cq("research-cq", od_cpu("1"), cohort="research"), cq("production-cq", od_cpu("1"), cohort="production")
    )
    c.sim.cohorts = [
        cohort("root", od_cpu("0")),
        cohort("research", od_cpu("0", "0"), parent="root"),
        cohort("production", od_cpu("0"), parent="root"),
    ]
    c.queue("research-cq", "research-cq")
    c.queue("production-cq", "production-cq")
    for i in (1, 2, 3):
        c.add(f"prod-{i}", "production-cq", "500m")
    c.sim.settle()
    assert c.sim.running() == {"prod-1", "prod-2", "prod-3"}
    for i in (1, 2, 3):
        c.sim.finish(f"prod-{i}")
    for i in (1, 2, 3):
        c.add(f"research-{i}", "research-cq", "500m")
    c.sim.settle()
    assert c.sim.running() == {"research-1", "research-2"}


def test_should_allow_burst_queue_to_borrow_idle_capacity_while_orgs_stay_isolated():
    c = Cluster(
        cq("org-a-cq", od_cpu("1"), cohort="org-a"),
        cq("org-b-cq", od_cpu("1"), cohort="org-b"),
        cq("burst-cq", od_cpu("0"), cohort="root"),
    )
    c.sim.cohorts = [
        cohort("root", od_cpu("0")),
        cohort("org-a", od_cpu("0", "0"), parent="root"),
        cohort("org-b", od_cpu("0", "0"), parent="root"),
    ]
    c.queue("org-a-cq", "org-a-cq")
    c.queue("burst-cq", "burst-cq")
    for name in ("org-a-1", "org-a-2", "org-a-overflow"):
        c.add(name, "org-a-cq", "500m")
    c.sim.settle()
    assert c.sim.running() == {"org-a-1", "org-a-2"}
    c.add("burst-1", "burst-cq", "500m")
    c.add("burst-2", "burst-cq", "500m")
    c.sim.settle()
    assert c.sim.running() == {"org-a-1", "org-a-2", "burst-1", "burst-2"}


def scheduling_cluster() -> Cluster:
    """The queues of the integration suite's "Scheduling workloads on clusterQueues"."""
    c = Cluster(
        cq(
            "prod-cq",
            rg(fq("spot-tainted", res(CPU, "5", "5")), fq("on-demand", res(CPU, "5"))),
            cohort="prod-cohort",
        ),
        cq("dev-clusterqueue", rg(fq("spot-untainted", res(CPU, "5")), fq("on-demand", res(CPU, "5")))),
        cq("pods-count-cq", rg(fq("on-demand", res(CPU, "100"), res(PODS, "5")))),
        cq("pods-count-only-cq", rg(fq("on-demand", res(PODS, "5")))),
        cq("preemption-cq", od_cpu("3"), preemption=WITHIN_LOWER),
    )
    for name, target in (
        ("prod-queue", "prod-cq"),
        ("dev-queue", "dev-clusterqueue"),
        ("pods-count-queue", "pods-count-cq"),
        ("pods-count-only-queue", "pods-count-only-cq"),
        ("preemption-queue", "preemption-cq"),
    ):
        c.queue(name, target)
    return c


def add_podsets(c: Cluster, name: str, queue: str, podsets: list[dict], priority: int = 0) -> None:
    c.created += 1
    c.sim.workloads[name] = wl(name, "ns", queue, podsets=podsets, priority=priority, created=c.created)


def reclaim(c: Cluster, name: str, **counts: int) -> None:
    c.sim.workloads[name]["status"]["reclaimablePods"] = [{"name": n, "count": v} for n, v in counts.items()]
    c.sim.queues.flush()
    c.sim.settle()


def test_should_admit_workloads_as_they_fit_in_their_cluster_queue():
    c = scheduling_cluster()
    c.add("prod-wl1", "prod-queue", "2")
    c.sim.settle()
    assert c.flavor_of("prod-wl1") == "on-demand"
    c.add("prod-wl2", "prod-queue", "5")
    c.sim.settle()
    assert not c.sim.admitted("prod-wl2")
    add_podsets(c, "empty-wl", "prod-queue", [pod_set(MAIN, 0, {CPU: "1"})])
    c.sim.settle()
    assert c.sim.workloads["empty-wl"]["status"]["admission"]["podSetAssignments"] == [
        {"name": MAIN, "flavors": {CPU: "on-demand"}, "resourceUsage": {CPU: "0"}, "count": 0}
    ]
    c.sim.finish("empty-wl")
    c.add("dev-wl", "dev-queue", "5")
    c.sim.settle()
    assert c.flavor_of("dev-wl") == "spot-untainted"
    c.sim.finish("prod-wl1")
    c.sim.settle()
    assert c.flavor_of("prod-wl2") == "on-demand"


def test_should_admit_workloads_as_number_of_pods_allows_it():
    for queue, requests in (("pods-count-queue", {CPU: "2"}), ("pods-count-only-queue", {})):
        c = scheduling_cluster()
        add_podsets(c, "wl1", queue, [pod_set(MAIN, 3, requests)])
        c.sim.settle()
        assert c.sim.running() == {"wl1"}
        add_podsets(c, "wl2", queue, [pod_set(MAIN, 3, requests)])
        add_podsets(c, "wl3", queue, [pod_set(MAIN, 2, requests)])
        c.sim.settle()
        assert c.sim.running() == {"wl1", "wl3"}
        c.sim.finish("wl1")
        c.sim.settle()
        assert c.sim.running() == {"wl2", "wl3"}


def three_podsets() -> list[dict]:
    return [pod_set(n, 1, {CPU: "1"}) for n in ("first", "second", "third")]


def test_should_admit_workloads_when_resources_are_dynamically_reclaimed():
    c = scheduling_cluster()
    add_podsets(c, "first-wl", "preemption-queue", three_podsets())
    c.sim.settle()
    assert c.sim.running() == {"first-wl"}
    reclaim(c, "first-wl", third=1)
    add_podsets(c, "second-wl", "preemption-queue", three_podsets(), priority=100)
    c.sim.settle()  # second-wl preempts first-wl (its eviction finishes at once) and is admitted
    assert c.sim.running() == {"second-wl"}
    reclaim(c, "second-wl", first=1, second=1)
    assert c.sim.running() == {"first-wl", "second-wl"}


def test_should_admit_workloads_when_resources_are_gradually_released():
    c = scheduling_cluster()
    add_podsets(c, "first-wl", "preemption-queue", three_podsets())
    c.sim.settle()
    add_podsets(c, "second-wl", "preemption-queue", [pod_set("first", 1, {CPU: "1"})])
    c.sim.settle()
    assert c.sim.running() == {"first-wl"}
    reclaim(c, "first-wl", third=1)
    assert c.sim.running() == {"first-wl", "second-wl"}


def test_should_admit_two_small_workloads_after_a_big_one_finishes():
    c = scheduling_cluster()
    c.add("big-wl", "prod-queue", "5")
    c.sim.settle()
    c.add("small-wl-1", "prod-queue", "2.5")
    c.add("small-wl-2", "prod-queue", "2.5")
    c.sim.settle()
    c.sim.finish("big-wl")
    c.sim.settle()
    assert c.sim.running() == {"small-wl-1", "small-wl-2"}


def test_reclaimed_resources_are_not_accounted_during_admission():
    c = scheduling_cluster()
    add_podsets(c, "first-wl", "prod-queue", [pod_set(MAIN, 2, {CPU: "3"})])
    c.sim.settle()
    assert c.sim.running() == set()
    reclaim(c, "first-wl", main=1)
    assert c.sim.running() == {"first-wl"}
    assert c.sim.workloads["first-wl"]["status"]["admission"]["podSetAssignments"][0]["count"] == 1


# Fair Sharing admission order (test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go; its
# preemption scenarios are in test_upstream_preemption.py).


def running_in(c: Cluster, cluster_queue: str) -> list[str]:
    return sorted(n for n in c.sim.running() if c.sim.cq_of(n) == cluster_queue)


def share(c: Cluster, name: str) -> float:
    from kubesim.kueue.scheduler.quota import dominant_resource_share

    snap = c.sim.snapshot()
    node = snap.cluster_queues.get(name) or snap.cohorts[name]
    return dominant_resource_share(node).precise()


def test_fair_sharing_without_preemption_admits_workloads_respecting_fair_share():
    c = Cluster(
        cq("a", rg(fq("default", res(CPU, "3"))), cohort="all"),
        cq("b", rg(fq("default", res(CPU, "1"))), cohort="all"),
        cq("shared", rg(fq("default", res(CPU, "4"))), cohort="all"),
        fair_sharing=True,
    )
    c.sim.flavors = [flavor("default")]
    c.queue("a", "a")
    c.queue("b", "b")
    for i in range(10):
        c.add(f"a{i}", "a", "1")
    c.sim.settle()
    assert len(running_in(c, "a")) == 8
    assert (share(c, "a"), share(c, "b"), share(c, "shared")) == (625.0, 0.0, 0.0)
    for i in range(5):
        c.add(f"b{i}", "b", "1")
    c.sim.settle()
    assert running_in(c, "b") == []
    for want_a, want_b in ((7, 1), (6, 2), (5, 3), (5, 3)):
        c.sim.finish(running_in(c, "a")[0])
        c.sim.settle()
        assert (len(running_in(c, "a")), len(running_in(c, "b"))) == (want_a, want_b)
    assert (share(c, "a"), share(c, "b")) == (250.0, 250.0)
    for name in running_in(c, "a")[:2]:
        c.sim.finish(name)
    c.sim.settle()
    assert (len(running_in(c, "a")), len(running_in(c, "b"))) == (4, 4)
    assert (share(c, "a"), share(c, "b"), share(c, "shared")) == (125.0, 375.0, 0.0)


def test_fair_sharing_shouldnt_reserve_quota_because_not_enough_resources():
    c = Cluster(
        cq("a", rg(fq("default", res(CPU, "3"))), cohort="all"),
        cq("b", rg(fq("default", res(CPU, "1"))), cohort="all"),
        cq("shared", rg(fq("default", res(CPU, "4"))), cohort="all"),
        fair_sharing=True,
    )
    c.sim.flavors = [flavor("default")]
    c.queue("a", "a")
    c.add("wl", "a", "10")
    c.sim.settle()
    assert c.sim.condition("wl", "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, previously considered "
        "podsets requests (0) + current podset request (10) > maximum capacity (8)"
    )


def test_fair_sharing_hierarchical_cohorts_admit_workloads_respecting_fair_share():
    c = Cluster(
        cq("second-left", rg(fq("default", res(CPU, "2"))), cohort="second-left"),
        cq("second-right", rg(fq("default", res(CPU, "2"))), cohort="second-right"),
        fair_sharing=True,
    )
    c.sim.flavors = [flavor("default")]
    c.sim.cohorts = [
        cohort("first-left", parent="root"),
        cohort("first-right", parent="root"),
        cohort("second-left", parent="first-left"),
        cohort("second-right", parent="first-left"),
        cohort("bank", rg(fq("default", res(CPU, "10"))), parent="first-right"),
    ]
    c.queue("second-left", "second-left")
    c.queue("second-right", "second-right")
    for i in range(5):
        c.add(f"l{i}", "second-left", "1")
        c.add(f"r{i}", "second-right", "1")
    c.sim.settle()
    assert (len(running_in(c, "second-left")), len(running_in(c, "second-right"))) == (5, 5)
    assert share(c, "first-left") == pytest.approx(6 * 1000 / 14)
    assert share(c, "second-left") == pytest.approx(3 * 1000 / 14)
    assert share(c, "second-right") == pytest.approx(3 * 1000 / 14)
    assert (share(c, "first-right"), share(c, "bank")) == (0.0, 0.0)


def test_fair_sharing_prefers_flavor_with_remaining_guarantees_at_cohort_level():
    fungibility = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    preemption = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}

    def queue(name: str, cohort_name: str, f1: str, f2: str) -> dict:
        groups = rg(fq("flavor1", res(CPU, f1, "10")), fq("flavor2", res(CPU, f2, "10")))
        return cq(name, groups, cohort=cohort_name, weight="1", fungibility=fungibility, preemption=preemption)

    c = Cluster(
        queue("cq-p1", "cohort-a", "3", "3"),
        queue("cq-p2", "cohort-a", "3", "3"),
        queue("cq-p3", "cohort-a", "2", "4"),
        queue("cq-p4", "cohort-b", "2", "0"),
        fair_sharing=True,
    )
    c.sim.flavors = [flavor("flavor1"), flavor("flavor2")]
    zero = rg(fq("flavor1", res(CPU, "0", "10")), fq("flavor2", res(CPU, "0", "10")))
    c.sim.cohorts = [
        cohort("root-cohort"),
        cohort("cohort-a", zero, parent="root-cohort", weight="1"),
        cohort("cohort-b", zero, parent="root-cohort", weight="1"),
    ]
    c.queue("cq-p1", "cq-p1")
    for i in range(18):
        c.add(f"w{i}", "cq-p1", "1")
    c.sim.settle()
    assert len(running_in(c, "cq-p1")) == 18
    assert share(c, "cq-p1") == 600.0
    assert share(c, "cohort-a") == 0.0


# test/integration/singlecluster/scheduler/quotacheckstrategy (IgnoreUndeclared)


def test_ignore_undeclared_resources_are_neither_assigned_nor_counted():
    config = KueueConfig(fair_sharing=False, quota_check_strategy="IgnoreUndeclared")
    snap = Snapshot.from_objects(
        resource_flavors=[flavor("default")],
        cluster_queues=[cq("test-cq", rg(fq("default", res(CPU, "10"))))],
        local_queues=[lq("test-lq", "ns", "test-cq")],
        workloads=[wl("undeclared-penalty-wl", "ns", "test-lq", {CPU: "2", GPU: "100"})],
        config=config,
        now=T0,
    )
    result = Scheduler().cycle(snap, T0)
    assert [
        (a.podset_assignments[0]["flavors"], a.podset_assignments[0]["resourceUsage"]) for a in result.admitted
    ] == [({CPU: "default"}, {CPU: "2"})]
    assert snap.cluster_queues["test-cq"].usage == {("default", CPU): 2000}


def test_should_admit_workload_when_nominal_quota_is_1e_for_cpu():
    snap = Snapshot.from_objects(
        resource_flavors=[flavor("default")],
        cluster_queues=[cq("test-cq", rg(fq("default", res(CPU, "1E"))))],
        local_queues=[lq("test-lq", "ns", "test-cq")],
        workloads=[wl("wl-1", "ns", "test-lq", {CPU: "3"})],
        config=KueueConfig(fair_sharing=False, quota_check_strategy="IgnoreUndeclared"),
        now=T0,
    )
    assert [a.workload.name for a in Scheduler().cycle(snap, T0).admitted] == ["wl-1"]


# test/integration/singlecluster/scheduler/inadmissible/equivalence_test.go (SchedulingEquivalenceHashing)


def run_until_settled(queues: list[dict], lqs: list[dict], workloads: list[dict], namespaces=None):
    scheduler = Scheduler()
    snap = Snapshot.from_objects(
        resource_flavors=[flavor("on-demand")],
        cluster_queues=queues,
        local_queues=lqs,
        workloads=workloads,
        namespaces=namespaces,
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    results = scheduler.run(snap, T0)
    return scheduler, {a.workload.name for r in results for a in r.admitted}


def test_should_admit_a_fitting_workload_behind_identical_no_fit_workloads_in_best_effort_fifo():
    workloads = [wl(f"nofit-{i}", "ns", "equiv-queue", {CPU: "10"}, created=i) for i in range(10)]
    workloads.append(wl("fits", "ns", "equiv-queue", {CPU: "1"}, created=10))
    scheduler, admitted = run_until_settled(
        [cq("equiv-cq", od_cpu("2"))], [lq("equiv-queue", "ns", "equiv-cq")], workloads
    )
    assert admitted == {"fits"}
    assert scheduler.queues.inadmissible["equiv-cq"] == {f"ns/nofit-{i}" for i in range(10)}


def test_should_not_hash_workloads_that_dont_fit_due_to_namespace_mismatch():
    workloads = [wl(f"nomatch-{i}", "ns", "ns-queue", {CPU: "1"}, created=i) for i in range(5)]
    workloads.append(wl("matching-fit", "matching", "match-queue", {CPU: "1"}, created=5))
    _, admitted = run_until_settled(
        [cq("ns-mismatch-cq", od_cpu("5"), selector={"matchLabels": {"match": "true"}})],
        [lq("ns-queue", "ns", "ns-mismatch-cq"), lq("match-queue", "matching", "ns-mismatch-cq")],
        workloads,
        namespaces=[{"metadata": {"name": "ns"}}, {"metadata": {"name": "matching", "labels": {"match": "true"}}}],
    )
    assert admitted == {"matching-fit"}


def test_should_bulk_move_equivalent_workloads_that_need_preemption_but_have_no_candidates():
    workloads = [wl("blocker", "ns", "preempt-queue", {CPU: "2"}, admitted=at("preempt-nocandidate-cq", "on-demand"))]
    workloads += [wl(f"blocked-{i}", "ns", "preempt-queue", {CPU: "1"}, created=i) for i in range(10)]
    scheduler, admitted = run_until_settled(
        [cq("preempt-nocandidate-cq", od_cpu("2"), preemption=WITHIN_LOWER)],
        [lq("preempt-queue", "ns", "preempt-nocandidate-cq")],
        workloads,
    )
    assert admitted == set()
    assert scheduler.queues.inadmissible["preempt-nocandidate-cq"] == {f"ns/blocked-{i}" for i in range(10)}


# -- pkg/scheduler/scheduler_afs_test.go: TestScheduleForAFS (Admission Fair Sharing orders a ClusterQueue's heads by
# their LocalQueues' decayed usage; a LocalQueue's initial usage is its status' consumedResources) -----------------


def run_afs(initial: dict[str, str], workloads: list[tuple[str, str, str, int]], afs: bool = True) -> tuple[set, dict]:
    """workloads: (name, local queue, cpu, created); returns the admitted names and the pending messages."""
    from kubesim.kueue.config import AdmissionFairSharing

    queues = []
    for name, weight in (("lq-a", "1"), ("lq-b", "1"), ("lq-c", "1"), ("lq-zero", "0")):
        q = lq(name, "default", "cq1")
        q["spec"]["fairSharing"] = {"weight": weight}
        if name in initial:
            q["status"] = {"fairSharing": {"admissionFairSharingStatus": {"consumedResources": {CPU: initial[name]}}}}
        queues.append(q)
    queue = cq("cq1", rg(fq("default", res(CPU, "8"), res(MEM, "8Gi"))))
    queue["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    config = KueueConfig(
        fair_sharing=afs,
        admission_fair_sharing=AdmissionFairSharing(usage_half_life_seconds=10, usage_sampling_interval_seconds=1)
        if afs
        else None,
    )
    snap = Snapshot.from_objects(
        resource_flavors=[flavor("default")],
        cluster_queues=[queue],
        local_queues=queues,
        workloads=[
            wl(n, "default", q, podsets=[pod_set("one", 1, {CPU: cpu})], created=created)
            for n, q, cpu, created in workloads
        ],
        namespaces=[{"metadata": {"name": "default"}}],
        config=config,
        now=T0,
    )
    results = Scheduler().run(snap, T0)
    admitted = {a.workload.name for r in results for a in r.admitted}
    messages = {p.workload.name: p.message for r in results for p in r.pending if p.workload.name not in admitted}
    return admitted, messages


NO_CPU = "couldn't assign flavors to pod set one: insufficient unused quota for cpu in flavor default, {} more needed"


def test_afs_admits_workload_from_less_active_localqueue():
    admitted, messages = run_afs({"lq-a": "8", "lq-b": "2"}, [("wl-a1", "lq-a", "8", 0), ("wl-b1", "lq-b", "8", 1)])
    assert admitted == {"wl-b1"}
    assert messages == {"wl-a1": NO_CPU.format(8)}


def test_afs_does_not_prioritize_a_zero_weight_localqueue():
    admitted, messages = run_afs(
        {"lq-a": "0", "lq-zero": "0"}, [("wl-z1", "lq-zero", "8", 0), ("wl-a1", "lq-a", "8", 1)]
    )
    assert admitted == {"wl-a1"}
    assert messages == {"wl-z1": NO_CPU.format(8)}


def test_afs_without_afs_classic_admission_decision_ignores_queue_usage():
    admitted, messages = run_afs(
        {"lq-a": "8", "lq-b": "2"}, [("wl-a1", "lq-a", "8", 0), ("wl-b1", "lq-b", "8", 1)], afs=False
    )
    assert admitted == {"wl-a1"}
    assert messages == {"wl-b1": NO_CPU.format(8)}


def test_afs_admits_one_workload_from_each_localqueue_when_quota_is_limited():
    admitted, messages = run_afs(
        {"lq-a": "4", "lq-b": "4"},
        [("wl-a1", "lq-a", "4", 0), ("wl-a2", "lq-a", "4", 1), ("wl-b1", "lq-b", "4", 2), ("wl-b2", "lq-b", "4", 3)],
    )
    assert admitted == {"wl-a1", "wl-b1"}
    assert messages["wl-a2"] == NO_CPU.format(4)


def test_afs_schedules_normally_when_queues_have_equal_usage():
    admitted, _ = run_afs(
        {"lq-a": "2", "lq-b": "2", "lq-c": "2"},
        [("wl-a1", "lq-a", "4", 0), ("wl-b1", "lq-b", "3", 0), ("wl-c1", "lq-c", "1", 0)],
    )
    assert admitted == {"wl-a1", "wl-b1", "wl-c1"}


def test_afs_admits_workload_from_lq_b_with_uninitialized_cache():
    admitted, messages = run_afs({"lq-a": "8"}, [("wl-a1", "lq-a", "8", 0), ("wl-b1", "lq-b", "8", 1)])
    assert admitted == {"wl-b1"}
    assert messages == {"wl-a1": NO_CPU.format(8)}


# TestIsPreferred (flavorassigner_test.go): which of two flavors' (preemption mode, borrowing level) wins.
PREFERRED_CASES = {
    "feature gate disabled prioritises preemption": (("fit", 0), ("preempt", 0), None, True),
    "explicit BorrowingOverPreemption prioritises borrowing distance": (
        ("preempt", 1),
        ("fit", 2),
        "BorrowingOverPreemption",
        False,
    ),
    "explicit PreemptionOverBorrowing prioritises lower preemption": (
        ("preempt", 1),
        ("fit", 2),
        "PreemptionOverBorrowing",
        True,
    ),
    "explicit PreemptionOverBorrowing breaks borrowing ties with preemption": (
        ("preempt", 1),
        ("fit", 1),
        "PreemptionOverBorrowing",
        False,
    ),
    "explicit PreemptionOverBorrowing rejects no-candidate flavor before borrowing comparison": (
        ("none", 1),
        ("fit", 2),
        "PreemptionOverBorrowing",
        False,
    ),
    "explicit PreemptionOverBorrowing prefers fit over shallower-borrowing no-candidate flavor": (
        ("fit", 2),
        ("none", 1),
        "PreemptionOverBorrowing",
        True,
    ),
    "no-candidate flavor remains preferable to no-fit flavor": (("none", 1), ("nofit", 0), None, True),
    "no-fit flavor remains worse than no-candidate flavor": (("nofit", 0), ("none", 1), None, False),
    "no-candidate flavors retain borrowing preference": (("none", 1), ("none", 2), "PreemptionOverBorrowing", True),
    "no-candidate flavors retain borrowing preference in reverse": (
        ("none", 2),
        ("none", 1),
        "PreemptionOverBorrowing",
        False,
    ),
}


@pytest.mark.parametrize("name", list(PREFERRED_CASES))
def test_is_preferred(name: str) -> None:
    from kubesim.kueue.scheduler import flavors as fl

    modes = {"fit": fl.G_FIT, "preempt": fl.G_PREEMPT, "none": fl.G_NO_CANDIDATES, "nofit": fl.G_NO_FIT}
    a, b, preference, want = PREFERRED_CASES[name]
    got = fl.is_preferred(
        fl.Granular(modes[a[0]], a[1]), fl.Granular(modes[b[0]], b[1]), preference or "BorrowingOverPreemption"
    )
    assert got is want


# TestIsNoFitDueToCapacityAndLimits (flavorassigner_test.go): the QuotaReserved reason of a workload that fits
# nowhere, and the reason recorded per flavor tried.
NOFIT_FLAVORS = [
    flavor("flavor-a", labels={"type": "a"}),
    {"metadata": {"name": "flavor-b"}, "spec": {"nodeTaints": [taint("key", "val")]}},
    flavor("flavor-shared", labels={"type": "shared"}),
]


def two_flavor_cq(name: str, a: tuple[str, str], b: tuple[str, str], cohort_name: str = "") -> dict:
    return cq(name, rg(fq("flavor-a", res(CPU, *a)), fq("flavor-b", res(CPU, *b))), cohort=cohort_name)


NOFIT_CQ = two_flavor_cq("cq", ("2", "4"), ("2", "4"))
SHARED_CQ = cq(
    "shared-cq",
    rg(fq("flavor-shared", res(CPU, "2", "4")), fq("flavor-a", res(CPU, "2", "4"))),
    rg(fq("flavor-shared", res(MEM, "2Gi", "4Gi"))),
    cohort="cohort",
)
SHARED_SIBLING = cq(
    "sibling",
    rg(fq("flavor-shared", res(CPU, "2", "2")), fq("flavor-a", res(CPU, "2", "2"))),
    rg(fq("flavor-shared", res(MEM, "2Gi", "2Gi"))),
    cohort="cohort",
)
TOLERATE_KEY = [{"key": "key", "operator": "Equal", "value": "val", "effect": "NoSchedule"}]

NOFIT_CASES = {
    "succeeds to schedule on flavor-a": (
        main(cpu="1"),
        NOFIT_CQ,
        [],
        {},
        "",
        {"flavor-a": "", "flavor-b": "NoMatchingFlavor"},
    ),
    "insufficient quota": (
        main(cpu="3"),
        NOFIT_CQ,
        [],
        {},
        "ExceedsMaxQuota",
        {"flavor-a": "ExceedsMaxQuota", "flavor-b": "NoMatchingFlavor"},
    ),
    "exceeds max capacity limits": (
        main(cpu="5"),
        NOFIT_CQ,
        [],
        {},
        "ExceedsMaxQuota",
        {"flavor-a": "ExceedsMaxQuota", "flavor-b": "NoMatchingFlavor"},
    ),
    "taints mismatch": (
        main(cpu="1", selector={"type": "wrong"}),
        NOFIT_CQ,
        [],
        {},
        "NoMatchingFlavor",
        {"flavor-a": "NoMatchingFlavor", "flavor-b": "NoMatchingFlavor"},
    ),
    "succeeds to schedule on flavor-b with a tolerated taint": (
        main(cpu="1", selector={"type": "non-existent"}, tolerations=TOLERATE_KEY),
        NOFIT_CQ,
        [],
        {},
        "",
        {"flavor-a": "NoMatchingFlavor"},
    ),
    "prioritization of structural mismatch over capacity mismatch": (
        main(cpu="3", memory="20Gi", selector={"type": "wrong"}),
        NOFIT_CQ,
        [],
        {},
        "NoMatchingFlavor",
        {"flavor-a": "NoMatchingFlavor", "flavor-b": "NoMatchingFlavor"},
    ),
    "insufficient capacity, cohort has available capacity (waiting for quota)": (
        main(cpu="3"),
        two_flavor_cq("cq", ("2", "2"), ("2", "2"), "cohort"),
        [two_flavor_cq("sibling", ("2", "2"), ("2", "2"), "cohort")],
        {"sibling": {("flavor-a", CPU): "2", ("flavor-b", CPU): "2"}},
        "WaitingForQuota",
        {"flavor-a": "WaitingForQuota", "flavor-b": "NoMatchingFlavor"},
    ),
    "exceeds cohort max capacity limits": (
        main(cpu="5"),
        two_flavor_cq("cq", ("2", "2"), ("2", "2"), "cohort"),
        [two_flavor_cq("sibling", ("2", "2"), ("2", "2"), "cohort")],
        {},
        "ExceedsMaxQuota",
        {"flavor-a": "ExceedsMaxQuota", "flavor-b": "NoMatchingFlavor"},
    ),
    "exceeds borrowing limit but cohort has capacity": (
        main(cpu="4"),
        two_flavor_cq("cq", ("2", "1"), ("2", "1"), "cohort"),
        [two_flavor_cq("sibling", ("5", "5"), ("5", "5"), "cohort")],
        {},
        "ExceedsMaxQuota",
        {"flavor-a": "ExceedsMaxQuota", "flavor-b": "NoMatchingFlavor"},
    ),
    "flavor spanning multiple resource groups": (
        main(cpu="3", memory="3Gi", selector={"type": "a"}),
        SHARED_CQ,
        [SHARED_SIBLING],
        {"sibling": {("flavor-shared", CPU): "2", ("flavor-shared", MEM): "2Gi", ("flavor-a", CPU): "2"}},
        "NoMatchingFlavor",
        {"flavor-shared": "NoMatchingFlavor", "flavor-a": "WaitingForQuota"},
    ),
}


@pytest.mark.parametrize("name", list(NOFIT_CASES))
def test_is_no_fit_due_to_capacity_and_limits(name: str) -> None:
    from kubesim.kueue.scheduler.flavors import FlavorAssigner
    from kubesim.kueue.scheduler.preemption import Preemptor

    podset, queue, siblings, usage, want_reason, want_attempts = NOFIT_CASES[name]
    workloads = [wl("wl", "ns", "lq", podsets=[podset])]
    workloads += [usage_workload(f"usage-{q}", q, u, 0) for q, u in usage.items()]
    snap = Snapshot.from_objects(
        resource_flavors=NOFIT_FLAVORS,
        cluster_queues=[queue, *siblings],
        local_queues=[lq("lq", "ns", queue["metadata"]["name"])],
        workloads=workloads,
        config=KueueConfig(fair_sharing=False, quota_check_strategy="BlockUndeclared"),
        now=T0,
    )
    node = snap.cluster_queues[queue["metadata"]["name"]]
    assignment = FlavorAssigner(snap.workloads["ns/wl"], node, snap, Preemptor(snap, T0).simulate).assign()
    assert assignment.no_fit_reason == want_reason
    for ps in assignment.podsets:
        for flavor_name, _, reason in ps.attempts:
            if flavor_name in want_attempts:
                assert reason == want_attempts[flavor_name], flavor_name


# TestRequeueAndUpdate: a head that did not fit goes to the inadmissible set, one skipped after nomination back to
# the heap (a BestEffortFIFO ClusterQueue).
@pytest.mark.parametrize(
    ("name", "reason", "set_aside"),
    [("workload didn't fit", "", True), ("skipped with summary", "FailedAfterNomination", False)],
)
def test_requeue_and_update(name: str, reason: str, set_aside: bool) -> None:
    from kubesim.kueue.scheduler import Queues

    snap = Snapshot.from_objects(
        cluster_queues=[cq("cq")],
        local_queues=[lq("q1", "ns1", "cq")],
        workloads=[wl("w1", "ns1", "q1")],
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    queues = Queues()
    assert queues.requeue(snap.cluster_queues["cq"], snap.workloads["ns1/w1"], reason) is set_aside
    assert queues.inadmissible.get("cq", set()) == ({"ns1/w1"} if set_aside else set())
