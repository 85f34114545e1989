"""Preemption cases ported from Kueue's own tests (identical at v0.19.2 and later), each named after its upstream case:
pkg/scheduler/preemption/preemption_test.go (TestPreemption, TestCandidatesOrdering, TestPreemptionMessage),
preemption_hierarchical_test.go (TestHierarchicalPreemptions), preemption_fair_test.go (TestFairPreemptions),
common/preemption_policy_test.go, fairsharing/ordering_test.go, pkg/cache/scheduler/fair_sharing_test.go
(TestDominantResourceShare), and the preemption and Fair Sharing integration scenarios.

Each unit case asks kubesim's preemptor for the targets of the incoming workload under the flavor assignment the
upstream case gives (upstream calls GetTargets with it too), on a snapshot built from plain API objects: same trees,
same admitted workloads, same incoming workload, same expected victims with their reasons and preemptor / preemptee
paths. The snapshot must be left as it was. Cases whose assignment the flavor assigner would choose itself are also
run through a full scheduling cycle, which must preempt the same workloads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from kubesim.kernel.quantity import format_amount
from kubesim.kueue import workload_status as ws
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler import Scheduler, Snapshot
from kubesim.kueue.scheduler.flavors import FIT, PREEMPT, Assignment, FlavorAssignment, PodSetAssignment
from kubesim.kueue.scheduler.model import workload_info
from kubesim.kueue.scheduler.preemption import FairTargets, Preemptor, cq_path, order_candidates, satisfies_policy
from kubesim.kueue.scheduler.quota import dominant_resource_share
from kubesim.kueue.scheduler.scheduler import preemption_message
from tests.kubesim.kueue.sim import GPU, T0, Sim, local_queue, quota_spec
from tests.kubesim.kueue.sim import cluster_queue as sim_cq
from tests.kubesim.kueue.sim import cohort as sim_cohort
from tests.kubesim.kueue.sim import flavor as sim_flavor

CPU, MEM = "cpu", "memory"
LP, LONEP, ANY, NEVER = "LowerPriority", "LowerOrNewerEqualPriority", "Any", "Never"
ICQ, RECLAIM, WHILE_BORROWING = "InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing"


# -- objects ----------------------------------------------------------------------------------------------------


def res(name: str, nominal: str, borrowing: str | None = None, lending: str | None = None) -> dict:
    r = {"name": name, "nominalQuota": nominal}
    if borrowing is not None:
        r["borrowingLimit"] = borrowing
    if lending is not None:
        r["lendingLimit"] = lending
    return r


def group(**flavors: list[dict]) -> dict:
    covered = sorted({r["name"] for rs in flavors.values() for r in rs})
    return {"coveredResources": covered, "flavors": [{"name": f, "resources": rs} for f, rs in flavors.items()]}


def cluster_queue(
    name: str,
    cohort: str | None,
    *groups: dict,
    within: str | None = None,
    reclaim: str | None = None,
    borrow_threshold: int | None = None,
    weight: str | None = None,
) -> dict:
    preemption: dict = {}
    if within:
        preemption["withinClusterQueue"] = within
    if reclaim:
        preemption["reclaimWithinCohort"] = reclaim
    if borrow_threshold is not None:
        preemption["borrowWithinCohort"] = {"policy": LP, "maxPriorityThreshold": borrow_threshold}
    spec: dict = {"namespaceSelector": {}, "resourceGroups": list(groups), "preemption": preemption}
    if cohort:
        spec["cohortName"] = cohort
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"metadata": {"name": name}, "spec": spec}


def cohort(name: str, parent: str | None = None, *groups: dict, weight: str | None = None) -> dict:
    spec: dict = {"resourceGroups": list(groups)}
    if parent:
        spec["parentName"] = parent
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"metadata": {"name": name}, "spec": spec}


def workload(
    name: str,
    priority: int = 0,
    requests: dict[str, str] | None = None,
    admitted_in: str | None = None,
    flavors: dict[str, str] | None = None,
    usage: dict[str, str] | None = None,
    reserved_at=T0,
    created=T0,
    podsets: list[tuple[str, int, dict[str, str]]] | None = None,
    evicted: bool = False,
) -> dict:
    """A Workload; admitted_in reserves quota there (flavor "default" for every resource unless flavors says
    otherwise, usage the requests unless given, as upstream's admissions may say)."""
    podsets = podsets or [("main", 1, requests or {})]
    obj: dict = {
        "metadata": {
            "name": name,
            "namespace": "",
            "uid": f"wl-{name}",
            "creationTimestamp": ws.ts(created),
            "labels": {"kueue.x-k8s.io/job-uid": f"job-{name}"},
        },
        "spec": {
            "queueName": "incoming",
            "priority": priority,
            "podSets": [
                {
                    "name": ps_name,
                    "count": count,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": dict(reqs)}}]}},
                }
                for ps_name, count, reqs in podsets
            ],
        },
        "status": {},
    }
    if admitted_in:
        used = usage or requests or {}
        psa = [
            {
                "name": "main",
                "flavors": {r: (flavors or {}).get(r, "default") for r in used},
                "resourceUsage": dict(used),
                "count": 1,
            }
        ]
        ws.set_quota_reservation(obj, admitted_in, psa, reserved_at)
    if evicted:
        obj["status"].setdefault("conditions", []).append(
            {
                "type": "Evicted",
                "status": "True",
                "reason": "Preempted",
                "message": "preempted",
                "lastTransitionTime": ws.ts(T0),
            }
        )
    return obj


def default_cluster_queues() -> list[dict]:
    """TestPreemption's defaultClusterQueues."""
    cohort_quota = group(default=[res(CPU, "6", "6"), res(MEM, "3Gi", "3Gi")])
    no_limits = group(default=[res(CPU, "6"), res(MEM, "3Gi")])
    return [
        cluster_queue(
            "standalone",
            None,
            group(default=[res(CPU, "6")]),
            group(alpha=[res(MEM, "3Gi")], beta=[res(MEM, "3Gi")]),
            within=LP,
        ),
        cluster_queue("c1", "cohort", cohort_quota, within=LP, reclaim=LP),
        cluster_queue("c2", "cohort", cohort_quota, within=NEVER, reclaim=ANY),
        cluster_queue("d1", "cohort-no-limits", no_limits, within=LP, reclaim=LP),
        cluster_queue("d2", "cohort-no-limits", no_limits, within=NEVER, reclaim=ANY),
        cluster_queue(
            "l1", "legion", group(default=[res(CPU, "6", "12"), res(MEM, "3Gi", "6Gi")]), within=LP, reclaim=LP
        ),
        cluster_queue("preventStarvation", None, group(default=[res(CPU, "6")]), within=LONEP),
        cluster_queue(
            "a_standard",
            "with_shared_cq",
            group(default=[res(CPU, "1", "12")]),
            within=NEVER,
            reclaim=LP,
            borrow_threshold=0,
        ),
        cluster_queue(
            "b_standard",
            "with_shared_cq",
            group(default=[res(CPU, "1", "12")]),
            within=LP,
            reclaim=ANY,
            borrow_threshold=0,
        ),
        cluster_queue(
            "a_best_effort",
            "with_shared_cq",
            group(default=[res(CPU, "1", "12")]),
            within=NEVER,
            reclaim=LP,
            borrow_threshold=0,
        ),
        cluster_queue(
            "b_best_effort",
            "with_shared_cq",
            group(default=[res(CPU, "0", "13")]),
            within=NEVER,
            reclaim=LP,
            borrow_threshold=0,
        ),
        cluster_queue("shared", "with_shared_cq", group(default=[res(CPU, "10")])),
        cluster_queue("lend1", "cohort-lend", group(default=[res(CPU, "6", lending="4")]), within=LP, reclaim=LP),
        cluster_queue("lend2", "cohort-lend", group(default=[res(CPU, "6", lending="2")]), within=LP, reclaim=LP),
        cluster_queue("a", "cohort-three", group(default=[res(CPU, "2"), res(MEM, "2")]), within=LP, reclaim=ANY),
        cluster_queue("b", "cohort-three", group(default=[res(CPU, "2"), res(MEM, "2")])),
        cluster_queue("c", "cohort-three", group(default=[res(CPU, "2"), res(MEM, "2")])),
    ]


@dataclass
class Case:
    """One upstream case: the incoming workload, its ClusterQueue, the assignment upstream gives GetTargets, the
    admitted workloads, the expected victims; cycle says whether a full cycle must preempt the same ones (only
    when the flavor assigner would itself produce upstream's assignment). cqs None: TestPreemption's defaults."""

    incoming: dict
    target: str
    modes: dict[str, dict[str, tuple[str, int]]]
    admitted: list[dict]
    want: set[tuple[str, str, str]]
    cycle: bool = True
    cqs: list[dict] | None = None
    cohorts: list[dict] = field(default_factory=list)
    fair: bool = False  # Fair Sharing on (TestFairPreemptions), with these preemption strategies (None: default)
    strategies: list[str] | None = None


# -- running a case -------------------------------------------------------------------------------------------


def _snapshot(case: Case, workloads: list[dict]) -> Snapshot:
    lq = {"metadata": {"name": "incoming", "namespace": ""}, "spec": {"clusterQueue": case.target}}
    config = KueueConfig(fair_sharing=case.fair)
    if case.strategies is not None:
        config.preemption_strategies = list(case.strategies)
    return Snapshot.from_objects(
        resource_flavors=[
            {"metadata": {"name": f}, "spec": {}} for f in ("default", "alpha", "beta", "premium", "cheap")
        ],
        cohorts=case.cohorts,
        cluster_queues=default_cluster_queues() if case.cqs is None else case.cqs,
        local_queues=[lq],
        workloads=workloads,
        config=config,
        now=T0,
    )


def _usages(snap: Snapshot) -> dict:
    nodes = {f"cq/{n}": q for n, q in snap.cluster_queues.items()} | {f"cohort/{n}": c for n, c in snap.cohorts.items()}
    return {k: {fr: v for fr, v in node.usage.items() if v} for k, node in nodes.items()}


def targets(case: Case) -> set[tuple[str, str, str]]:
    """(victim, reason, 'preemptor path: ...; preemptee path: ...') for GetTargets under the assignment modes
    ({podset: {resource: (flavor, FIT | PREEMPT)}})."""
    target, modes = case.target, case.modes
    snap = _snapshot(case, case.admitted)
    wl = workload_info(case.incoming, snap.config)
    wl.cluster_queue = target
    assignment = Assignment()
    for ps in wl.podsets:
        psa = PodSetAssignment(ps.name, ps.count, {r: v * ps.count for r, v in ps.requests.items()})
        for r, (flavor, mode) in modes[ps.name].items():
            psa.flavors[r] = FlavorAssignment(flavor, mode, 0)
            fr = (flavor, r)
            assignment.usage[fr] = assignment.usage.get(fr, 0) + psa.requests.get(r, 0)
        assignment.podsets.append(psa)
    before = _usages(snap)
    got = Preemptor(snap, T0).get_targets(wl, assignment)
    assert _usages(snap) == before, "the snapshot was left modified"
    cq = snap.cluster_queues[target]
    return {
        (
            t.workload.name,
            t.reason,
            f"preemptor path: {cq_path(cq)}; preemptee path: {cq_path(snap.cluster_queues[t.workload.cluster_queue])}",
        )
        for t in got
    }


def cycle_victims(case: Case) -> set[tuple[str, str, str]]:
    """The same question through a whole scheduling cycle (flavor assignment included)."""
    snap = _snapshot(case, [*case.admitted, case.incoming])
    result = Scheduler().cycle(snap, T0)
    return {(p.victim.name, p.reason, p.message.split("; ", 1)[1]) for p in result.preempted}


def one(**resources: tuple[str, int]) -> dict[str, dict[str, tuple[str, int]]]:
    """singlePodSetAssignment: the main PodSet's resources -> (flavor, mode)."""
    return {"main": dict(resources)}


def paths(preemptor: str, preemptee: str) -> str:
    return f"preemptor path: {preemptor}; preemptee path: {preemptee}"


def incoming(priority: int = 0, created=T0, **requests: str) -> dict:
    return workload("in", priority, requests, created=created)


# -- TestPreemption ----------------------------------------------------------------------------------------------

DEFAULT_PREEMPT = one(cpu=("default", PREEMPT))


def standalone(name: str, priority: int, cpu: str) -> dict:
    return workload(name, priority, {CPU: cpu}, "standalone")


CASES: dict[str, Case] = {
    "preempt lowest priority": Case(
        incoming(1, cpu="2"),
        "standalone",
        DEFAULT_PREEMPT,
        [standalone("low", -1, "2"), standalone("mid", 0, "2"), standalone("high", 1, "2")],
        {("low", ICQ, paths("/standalone", "/standalone"))},
    ),
    "preempt multiple": Case(
        incoming(1, cpu="3"),
        "standalone",
        DEFAULT_PREEMPT,
        [standalone("low", -1, "2"), standalone("mid", 0, "2"), standalone("high", 1, "2")],
        {("low", ICQ, paths("/standalone", "/standalone")), ("mid", ICQ, paths("/standalone", "/standalone"))},
    ),
    "no preemption for low priority": Case(
        incoming(-1, cpu="1"),
        "standalone",
        DEFAULT_PREEMPT,
        [standalone("low", -1, "3"), standalone("mid", 0, "3")],
        set(),
    ),
    "not enough low priority workloads": Case(
        incoming(0, cpu="4"),
        "standalone",
        DEFAULT_PREEMPT,
        [standalone("low", -1, "3"), standalone("mid", 0, "3")],
        set(),
    ),
    "some free quota, preempt low priority": Case(
        incoming(1, cpu="2"),
        "standalone",
        DEFAULT_PREEMPT,
        [standalone("low", -1, "1"), standalone("mid", 0, "1"), standalone("high", 1, "3")],
        {("low", ICQ, paths("/standalone", "/standalone"))},
    ),
    "minimal set excludes low priority": Case(
        incoming(1, cpu="2"),
        "standalone",
        DEFAULT_PREEMPT,
        [standalone("low", -1, "1"), standalone("mid", 0, "2"), standalone("high", 1, "3")],
        {("mid", ICQ, paths("/standalone", "/standalone"))},
    ),
    "only preempt workloads using the chosen flavor": Case(
        incoming(1, cpu="1", memory="2Gi"),
        "standalone",
        one(cpu=("default", FIT), memory=("beta", PREEMPT)),
        [
            workload("low", -1, {MEM: "2Gi"}, "standalone", {MEM: "alpha"}),
            workload("mid", 0, {MEM: "1Gi"}, "standalone", {MEM: "beta"}),
            workload("high", 1, {MEM: "1Gi"}, "standalone", {MEM: "beta"}),
        ],
        {("mid", ICQ, paths("/standalone", "/standalone"))},
        cycle=False,  # the flavor assigner would pick alpha, the first flavor where preemption frees enough
    ),
    "reclaim quota from borrower": Case(
        incoming(1, cpu="3"),
        "c1",
        DEFAULT_PREEMPT,
        [
            workload("c1-low", -1, {CPU: "3"}, "c1"),
            workload("c2-mid", 0, {CPU: "3"}, "c2"),
            workload("c2-high", 1, {CPU: "6"}, "c2"),
        ],
        {("c2-mid", RECLAIM, paths("/cohort/c1", "/cohort/c2"))},
    ),
    "reclaim quota if workload requests 0 resources for a resource at nominal quota": Case(
        incoming(1, cpu="3", memory="0"),
        "c1",
        one(cpu=("default", PREEMPT), memory=("default", FIT)),
        [
            workload("c1-low", -1, {CPU: "3", MEM: "3Gi"}, "c1"),
            workload("c2-mid", 0, {CPU: "3"}, "c2"),
            workload("c2-high", 1, {CPU: "6"}, "c2"),
        ],
        {("c2-mid", RECLAIM, paths("/cohort/c1", "/cohort/c2"))},
    ),
    "no workloads borrowing": Case(
        incoming(1, cpu="4"),
        "c1",
        DEFAULT_PREEMPT,
        [workload("c1-high", 1, {CPU: "4"}, "c1"), workload("c2-low-1", -1, {CPU: "4"}, "c2")],
        set(),
    ),
    "not enough workloads borrowing": Case(
        incoming(1, cpu="4"),
        "c1",
        DEFAULT_PREEMPT,
        [
            workload("c1-high", 1, {CPU: "4"}, "c1"),
            workload("c2-low-1", -1, {CPU: "4"}, "c2"),
            workload("c2-low-2", -1, {CPU: "4"}, "c2"),
        ],
        set(),
    ),
    "preempting locally and borrowing other resources in cohort, without cohort candidates": Case(
        incoming(1, cpu="4", memory="5Gi"),
        "c1",
        one(cpu=("default", PREEMPT), memory=("default", PREEMPT)),
        [
            workload("c1-low", -1, {CPU: "4"}, "c1"),
            workload("c2-low-1", -1, {CPU: "4"}, "c2"),
            workload("c2-high-2", 1, {CPU: "4"}, "c2"),
        ],
        {("c1-low", ICQ, paths("/cohort/c1", "/cohort/c1"))},
        cycle=False,  # memory fits by borrowing: the assigner's assignment differs (memory Fit)
    ),
    "preempting locally and borrowing same resource in cohort": Case(
        incoming(1, cpu="4"),
        "c1",
        DEFAULT_PREEMPT,
        [
            workload("c1-med", 0, {CPU: "4"}, "c1"),
            workload("c1-low", -1, {CPU: "4"}, "c1"),
            workload("c2-low-1", -1, {CPU: "4"}, "c2"),
        ],
        {("c1-low", ICQ, paths("/cohort/c1", "/cohort/c1"))},
    ),
    "preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort": Case(
        incoming(1, cpu="4"),
        "d1",
        DEFAULT_PREEMPT,
        [
            workload("d1-med", 0, {CPU: "4"}, "d1"),
            workload("d1-low", -1, {CPU: "4"}, "d1"),
            workload("d2-low-1", -1, {CPU: "4"}, "d2"),
        ],
        {("d1-low", ICQ, paths("/cohort-no-limits/d1", "/cohort-no-limits/d1"))},
    ),
    "preempting locally and borrowing other resources in cohort, with cohort candidates": Case(
        incoming(1, cpu="2", memory="5Gi"),
        "c1",
        one(cpu=("default", PREEMPT), memory=("default", PREEMPT)),
        [
            workload("c1-med", 0, {CPU: "4"}, "c1"),
            workload("c2-low-1", -1, {CPU: "5"}, "c2"),
            workload("c2-low-2", -1, {CPU: "1"}, "c2"),
            workload("c2-low-3", -1, {CPU: "1"}, "c2"),
        ],
        {("c1-med", ICQ, paths("/cohort/c1", "/cohort/c1"))},
        cycle=False,  # memory fits by borrowing: the assigner's assignment differs (memory Fit)
    ),
    "preempting locally and not borrowing same resource in 1-queue cohort": Case(
        incoming(1, cpu="4"),
        "l1",
        DEFAULT_PREEMPT,
        [workload("l1-med", 0, {CPU: "4"}, "l1"), workload("l1-low", -1, {CPU: "2"}, "l1")],
        {("l1-med", ICQ, paths("/legion/l1", "/legion/l1"))},
    ),
    "do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority": Case(
        incoming(0, cpu="4"),
        "c1",
        DEFAULT_PREEMPT,
        [
            workload("c1", 0, {CPU: "2"}, "c1"),
            workload("c2-1", 0, {CPU: "4"}, "c2"),
            workload("c2-2", 0, {CPU: "4"}, "c2"),
        ],
        set(),
    ),
    "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny": Case(
        incoming(0, cpu="4"),
        "c2",
        DEFAULT_PREEMPT,
        [
            workload("c1-1", 0, {CPU: "4"}, "c1"),
            workload("c1-2", 1, {CPU: "4"}, "c1"),
            workload("c2", 0, {CPU: "2"}, "c2"),
        ],
        {("c1-1", RECLAIM, paths("/cohort/c2", "/cohort/c1"))},
    ),
    "preempt from all ClusterQueues in cohort": Case(
        incoming(0, cpu="4"),
        "c1",
        DEFAULT_PREEMPT,
        [
            workload("c1-low", -1, {CPU: "3"}, "c1"),
            workload("c1-mid", 0, {CPU: "2"}, "c1"),
            workload("c2-low", -1, {CPU: "3"}, "c2"),
            workload("c2-mid", 0, {CPU: "4"}, "c2"),
        ],
        {("c1-low", ICQ, paths("/cohort/c1", "/cohort/c1")), ("c2-low", RECLAIM, paths("/cohort/c1", "/cohort/c2"))},
    ),
    "can't preempt workloads in ClusterQueue for withinClusterQueue=Never": Case(
        incoming(1, cpu="4"),
        "c2",
        DEFAULT_PREEMPT,
        [workload("c2-low", -1, {CPU: "3"}, "c2")],
        set(),
    ),
    "each podset preempts a different flavor": Case(
        workload("in", 0, podsets=[("launcher", 1, {MEM: "2Gi"}), ("workers", 2, {MEM: "1Gi"})]),
        "standalone",
        {"launcher": {MEM: ("alpha", PREEMPT)}, "workers": {MEM: ("beta", PREEMPT)}},
        [
            workload("low-alpha", -1, {MEM: "2Gi"}, "standalone", {MEM: "alpha"}),
            workload("low-beta", -1, {MEM: "2Gi"}, "standalone", {MEM: "beta"}),
        ],
        {
            ("low-alpha", ICQ, paths("/standalone", "/standalone")),
            ("low-beta", ICQ, paths("/standalone", "/standalone")),
        },
    ),
    "preempt newer workloads with the same priority": Case(
        workload("in", 1, podsets=[("launcher", 1, {CPU: "2"})], created=T0 - timedelta(seconds=15)),
        "preventStarvation",
        {"launcher": {CPU: ("default", PREEMPT)}},
        [
            workload("wl1", 2, {CPU: "2"}, "preventStarvation"),
            workload("wl2", 1, {CPU: "2"}, "preventStarvation", reserved_at=T0 + timedelta(seconds=1)),
            workload("wl3", 1, {CPU: "2"}, "preventStarvation"),
        ],
        {("wl2", ICQ, paths("/preventStarvation", "/preventStarvation"))},
    ),
    "use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue "
    "while borrowing": Case(
        incoming(0, cpu="10"),
        "a_standard",
        DEFAULT_PREEMPT,
        [
            workload("a_best_effort_low", -1, {CPU: "10"}, "a_best_effort"),
            workload("b_best_effort_low", -1, {CPU: "1"}, "b_best_effort"),
        ],
        {("a_best_effort_low", WHILE_BORROWING, paths("/with_shared_cq/a_standard", "/with_shared_cq/a_best_effort"))},
    ),
    "use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above "
    "MaxPriorityThreshold, if borrowing is required even after the preemption": Case(
        incoming(2, cpu="10"),
        "a_standard",
        DEFAULT_PREEMPT,
        [workload("b_standard", 1, {CPU: "10"}, "b_standard")],
        set(),
    ),
    "use BorrowWithinCohort; allow preempting a lower-priority workload with priority above MaxPriorityThreshold, "
    "if borrowing is not required after the preemption": Case(
        incoming(2, cpu="1"),
        "a_standard",
        DEFAULT_PREEMPT,
        [workload("b_standard", 1, {CPU: "13"}, "b_standard")],
        {("b_standard", RECLAIM, paths("/with_shared_cq/a_standard", "/with_shared_cq/b_standard"))},
    ),
    "use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same ClusterQueue": Case(
        incoming(2, cpu="1"),
        "a_standard",
        DEFAULT_PREEMPT,
        [workload("a_standard", 1, {CPU: "13"}, "a_standard")],
        set(),
    ),
    "use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already above nominal": Case(
        incoming(3, cpu="1"),
        "b_standard",
        DEFAULT_PREEMPT,
        [
            workload("a_standard_1", 1, {CPU: "10"}, "a_standard"),
            workload("a_standard_2", 1, {CPU: "1"}, "a_standard"),
            workload("b_standard_1", 1, {CPU: "1"}, "b_standard"),
            workload("b_standard_2", 2, {CPU: "1"}, "b_standard"),
        ],
        {("b_standard_1", ICQ, paths("/with_shared_cq/b_standard", "/with_shared_cq/b_standard"))},
    ),
    "use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold": Case(
        incoming(2, cpu="2"),
        "b_standard",
        DEFAULT_PREEMPT,
        [
            workload("b_standard_high", 2, {CPU: "10"}, "b_standard"),
            workload("b_standard_mid", 1, {CPU: "1"}, "b_standard"),
            workload("a_best_effort_low", -1, {CPU: "1"}, "a_best_effort"),
            workload("a_best_effort_lower", -2, {CPU: "1"}, "a_best_effort"),
        ],
        {
            (
                "a_best_effort_lower",
                WHILE_BORROWING,
                paths("/with_shared_cq/b_standard", "/with_shared_cq/a_best_effort"),
            ),
            ("b_standard_mid", ICQ, paths("/with_shared_cq/b_standard", "/with_shared_cq/b_standard")),
        },
    ),
    "reclaim quota from lender": Case(
        incoming(1, cpu="3"),
        "lend1",
        DEFAULT_PREEMPT,
        [
            workload("lend1-low", -1, {CPU: "3"}, "lend1"),
            workload("lend2-mid", 0, {CPU: "3"}, "lend2"),
            workload("lend2-high", 1, {CPU: "4"}, "lend2"),
        ],
        {("lend2-mid", RECLAIM, paths("/cohort-lend/lend1", "/cohort-lend/lend2"))},
    ),
    "preempt from all ClusterQueues in cohort-lend": Case(
        incoming(0, cpu="4"),
        "lend1",
        DEFAULT_PREEMPT,
        [
            workload("lend1-low", -1, {CPU: "3"}, "lend1"),
            workload("lend1-mid", 0, {CPU: "2"}, "lend1"),
            workload("lend2-low", -1, {CPU: "3"}, "lend2"),
            workload("lend2-mid", 0, {CPU: "4"}, "lend2"),
        ],
        {
            ("lend1-low", ICQ, paths("/cohort-lend/lend1", "/cohort-lend/lend1")),
            ("lend2-low", RECLAIM, paths("/cohort-lend/lend1", "/cohort-lend/lend2")),
        },
    ),
    "cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit": Case(
        incoming(0, cpu="9"),
        "lend1",
        DEFAULT_PREEMPT,
        [workload("lend2-low", -1, {CPU: "10"}, "lend2")],
        set(),
        cycle=False,  # the assigner finds no fit at all (9 > 6 + 2 requestable): there is no preemption to ask for
    ),
    "preemptions from cq when target queue is exhausted for the single requested resource": Case(
        incoming(0, cpu="2"),
        "a",
        DEFAULT_PREEMPT,
        [
            workload("a1", -2, {CPU: "1"}, "a"),
            workload("a2", -2, {CPU: "1"}, "a"),
            workload("a3", -1, {CPU: "1"}, "a"),
            workload("b1", 0, {CPU: "1"}, "b"),
            workload("b2", 0, {CPU: "1"}, "b"),
            workload("b3", 0, {CPU: "1"}, "b"),
        ],
        {
            ("a1", ICQ, paths("/cohort-three/a", "/cohort-three/a")),
            ("a2", ICQ, paths("/cohort-three/a", "/cohort-three/a")),
        },
    ),
    "preemptions from cq when target queue is exhausted for two requested resources": Case(
        incoming(0, cpu="2", memory="2"),
        "a",
        one(cpu=("default", PREEMPT), memory=("default", PREEMPT)),
        [
            workload("a1", -2, {CPU: "1", MEM: "1"}, "a"),
            workload("a2", -2, {CPU: "1", MEM: "1"}, "a"),
            workload("a3", -1, {CPU: "1", MEM: "1"}, "a"),
            workload("b1", 0, {CPU: "1", MEM: "1"}, "b"),
            workload("b2", 0, {CPU: "1", MEM: "1"}, "b"),
            workload("b3", 0, {CPU: "1", MEM: "1"}, "b"),
        ],
        {
            ("a1", ICQ, paths("/cohort-three/a", "/cohort-three/a")),
            ("a2", ICQ, paths("/cohort-three/a", "/cohort-three/a")),
        },
    ),
    "preemptions from cq when target queue is exhausted for one requested resource, but not the other": Case(
        incoming(0, cpu="2", memory="2"),
        "a",
        one(cpu=("default", PREEMPT), memory=("default", PREEMPT)),
        [
            workload("a1", -2, {CPU: "1"}, "a"),
            workload("a2", -2, {CPU: "1"}, "a"),
            workload("a3", -1, {CPU: "1"}, "a"),
            workload("b1", 0, {CPU: "1"}, "b"),
            workload("b2", 0, {CPU: "1"}, "b"),
            workload("b3", 0, {CPU: "1"}, "b"),
        ],
        {
            ("a1", ICQ, paths("/cohort-three/a", "/cohort-three/a")),
            ("a2", ICQ, paths("/cohort-three/a", "/cohort-three/a")),
        },
        cycle=False,  # memory fits: the assigner's assignment differs (memory Fit)
    ),
    "allow preemption from other cluster queues if target cq is not exhausted for the requested resource": Case(
        incoming(0, cpu="2"),
        "a",
        DEFAULT_PREEMPT,
        [
            workload("a1", -1, {CPU: "1"}, "a"),
            workload("b1", 0, {CPU: "1"}, "b"),
            workload("b2", 0, {CPU: "1"}, "b"),
            workload("b3", 0, {CPU: "1"}, "b"),
            workload("b4", 0, {CPU: "1"}, "b"),
            workload("b5", -1, {CPU: "1"}, "b"),
        ],
        {
            ("a1", ICQ, paths("/cohort-three/a", "/cohort-three/a")),
            ("b5", RECLAIM, paths("/cohort-three/a", "/cohort-three/b")),
        },
    ),
    "long range preemption": Case(
        incoming(0, cpu="8"),
        "cq-left",
        DEFAULT_PREEMPT,
        [workload("to-be-preempted", 0, {CPU: "5"}, "cq-right")],
        {("to-be-preempted", RECLAIM, paths("/root/cohort-left/cq-left", "/root/cohort-right/cq-right"))},
        cqs=[
            cluster_queue("cq-left", "cohort-left", group(default=[res(CPU, "10")]), reclaim=ANY),
            cluster_queue("cq-right", "cohort-right", group(default=[res(CPU, "0")])),
        ],
        cohorts=[cohort("cohort-left", "root"), cohort("cohort-right", "root")],
    ),
}


# -- TestHierarchicalPreemptions ---------------------------------------------------------------------------------
# Upstream's ClusterQueues without quota list the flavor with no resources (or no resource group at all); a nominal
# quota of 0 is the same quota.


def hq(
    name: str, parent: str, cpu: str = "0", reclaim: str = ANY, borrow_threshold: int | None = None, **more: str
) -> dict:
    """A ClusterQueue of the hierarchical cases: withinClusterQueue LowerPriority."""
    resources = [res(CPU, cpu, lending=more.pop("lending", None))] + [res(r, v) for r, v in more.items()]
    return cluster_queue(
        name, parent, group(default=resources), within=LP, reclaim=reclaim, borrow_threshold=borrow_threshold
    )


def hc(name: str, parent: str | None = None, **quota: str) -> dict:
    return cohort(name, parent, *([group(default=[res(r, v) for r, v in quota.items()])] if quota else []))


def cpu_in(name: str, priority: int, cpu: str, cq_name: str, **kw) -> dict:
    return workload(name, priority, {CPU: cpu}, cq_name, **kw)


R_C2 = [hc("r"), hc("c", "r", cpu="2")]
R1_C4 = [hc("r", cpu="1"), hc("c", "r", cpu="4")]
Q_RC = paths("/r/c/q", "/r/c/q")
Q_BORROWING = paths("/r/c/q", "/r/q_borrowing")
Q_SAME_COHORT = paths("/r/c/q", "/r/c/q_same_cohort")

HIERARCHICAL: dict[str, Case] = {
    "preempt with hierarchical advantage": Case(
        incoming(0, cpu="2"),
        "q",
        DEFAULT_PREEMPT,
        [cpu_in("admitted2", 0, "2", "q_borrowing")],
        {("admitted2", RECLAIM, Q_BORROWING)},
        cqs=[hq("q", "c"), hq("q_borrowing", "r")],
        cohorts=R_C2,
    ),
    "avoid queues within nominal quota": Case(
        incoming(0, cpu="2"),
        "q",
        DEFAULT_PREEMPT,
        [cpu_in("admitted1", -10, "2", "q_nominal"), cpu_in("admitted2", 0, "2", "q_borrowing")],
        {("admitted2", RECLAIM, Q_BORROWING)},
        cqs=[hq("q_nominal", "r", "2"), hq("q", "c"), hq("q_borrowing", "r")],
        cohorts=R_C2,
    ),
    "preempt multiple with hierarchical advantage": Case(
        incoming(0, cpu="2"),
        "q",
        DEFAULT_PREEMPT,
        [cpu_in("admitted1", 1, "1", "q_borrowing"), cpu_in("admitted2", 2, "1", "q_borrowing")],
        {("admitted1", RECLAIM, Q_BORROWING), ("admitted2", RECLAIM, Q_BORROWING)},
        cqs=[hq("q", "c"), hq("q_borrowing", "r")],
        cohorts=R_C2,
    ),
    "preempt in cohort and own CQ": Case(
        incoming(1, cpu="2"),
        "q",
        DEFAULT_PREEMPT,
        [
            cpu_in("admitted_not_preemptible", 1, "1", "q_same_cohort"),
            cpu_in("admitted_preemptible", 0, "1", "q_same_cohort", usage={CPU: "2"}),
            cpu_in("admitted_own_queue", -1, "1", "q"),
        ],
        {("admitted_own_queue", ICQ, Q_RC), ("admitted_preemptible", WHILE_BORROWING, Q_SAME_COHORT)},
        cqs=[hq("q", "c", borrow_threshold=0), hq("q_same_cohort", "c")],
        cohorts=[hc("r"), hc("c", "r", cpu="3")],
    ),
    "prefer to preempt hierarchical candidate": Case(
        incoming(0, cpu="1"),
        "q",
        DEFAULT_PREEMPT,
        [cpu_in("admitted_borrowing", 1, "1", "q_borrowing"), cpu_in("admitted_same_queue", -2, "1", "q")],
        {("admitted_borrowing", RECLAIM, Q_BORROWING)},
        cqs=[hq("q", "c"), hq("q_borrowing", "r")],
        cohorts=R_C2,
    ),
    "forced to preempt priority candidate": Case(
        incoming(0, cpu="2"),
        "q",
        DEFAULT_PREEMPT,
        [cpu_in("admitted_nominal", -10, "2", "q_nominal"), cpu_in("admitted_same_cohort", -1, "2", "q_same_cohort")],
        {("admitted_same_cohort", WHILE_BORROWING, Q_SAME_COHORT)},
        cqs=[hq("q", "c", borrow_threshold=0), hq("q_nominal", "r", "2"), hq("q_same_cohort", "c")],
        cohorts=R_C2,
    ),
    "incoming workload fits in CQ nominal quota": Case(
        incoming(0, cpu="4"),
        "q",
        DEFAULT_PREEMPT,
        [
            cpu_in("admitted_borrowing", 10, "3", "q_borrowing"),
            cpu_in("admitted_same_cohort", 10, "3", "q_same_cohort"),
        ],
        {("admitted_borrowing", RECLAIM, Q_BORROWING), ("admitted_same_cohort", RECLAIM, Q_SAME_COHORT)},
        cqs=[hq("q", "c", "4"), hq("q_borrowing", "r"), hq("q_same_cohort", "c")],
        cohorts=R_C2,
    ),
    "preempt hierarchical and priority candidates": Case(
        incoming(0, cpu="3"),
        "q",
        DEFAULT_PREEMPT,
        [
            cpu_in("admitted_borrowing", -1, "2", "q_borrowing"),
            cpu_in("admitted_same_cohort_preemptible", -1, "1", "q_same_cohort"),
            cpu_in("admitted_borrowing_not_preemptible", 1, "2", "q_borrowing"),
        ],
        {
            ("admitted_borrowing", RECLAIM, Q_BORROWING),
            ("admitted_same_cohort_preemptible", WHILE_BORROWING, Q_SAME_COHORT),
        },
        cqs=[hq("q", "c", reclaim=LP, borrow_threshold=0), hq("q_borrowing", "r"), hq("q_same_cohort", "c")],
        cohorts=R1_C4,
    ),
    "preempt hierarchical candidates and inside CQ": Case(
        incoming(0, cpu="3"),
        "q",
        DEFAULT_PREEMPT,
        [
            cpu_in("admitted_borrowing", -1, "2", "q_borrowing"),
            cpu_in("admitted_same_queue_preemptible", -1, "1", "q"),
            cpu_in("admitted_borrowing_not_preemptible", 1, "2", "q_borrowing"),
        ],
        {("admitted_borrowing", RECLAIM, Q_BORROWING), ("admitted_same_queue_preemptible", ICQ, Q_RC)},
        cqs=[hq("q", "c", reclaim=LP, borrow_threshold=0), hq("q_borrowing", "r"), hq("q_same_cohort", "c")],
        cohorts=R1_C4,
    ),
    "reclaim nominal quota from lowest priority workload, excluding non-borrowing": Case(
        incoming(0, cpu="1"),
        "q",
        DEFAULT_PREEMPT,
        [
            cpu_in("admitted_borrowing_prio_8", 8, "1", "q_borrowing"),
            cpu_in("admitted_borrowing_prio_9", 9, "1", "q_borrowing"),
            cpu_in("admitted_borrowing_prio_10", 9, "1", "q_borrowing"),
            cpu_in("admitted_nominal", -2, "2", "q_nominal"),
        ],
        {("admitted_borrowing_prio_8", RECLAIM, Q_BORROWING)},
        cqs=[hq("q", "c"), hq("q_borrowing", "r"), hq("q_nominal", "r", "2")],
        cohorts=[hc("r"), hc("c", "r", cpu="3")],
    ),
    "infeasible preemption all available workloads in pruned subtrees": Case(
        incoming(0, cpu="2"),
        "q",
        DEFAULT_PREEMPT,
        [
            cpu_in("admitted_other_1", -10, "1", "q_other"),
            cpu_in("admitted_other_2", -10, "1", "q_other"),
            cpu_in("admitted_same_cohort", 0, "2", "q_same_cohort"),
        ],
        set(),
        cqs=[hq("q_other", "c_other"), hq("q", "c"), hq("q_same_cohort", "c")],
        cohorts=[hc("r"), hc("c", "r", cpu="2"), hc("c_other", "r", cpu="2")],
    ),
    "hiearchical preemption with multiple resources": Case(
        incoming(-2, cpu="2", memory="1Gi"),
        "q",
        one(cpu=("default", PREEMPT), memory=("default", PREEMPT)),
        [
            workload("admitted_borrowing", 0, {CPU: "3", MEM: "1Gi"}, "q_borrowing"),
            workload("admitted_same_cohort", -2, {CPU: "1", MEM: "3Gi"}, "q_same_cohort"),
        ],
        {("admitted_borrowing", RECLAIM, Q_BORROWING)},
        cqs=[hq("q", "c", memory="0"), hq("q_borrowing", "r", memory="0"), hq("q_same_cohort", "c", memory="0")],
        cohorts=[hc("r", cpu="3"), hc("c", "r", cpu="4", memory="4Gi")],
    ),
    "respect lending limits": Case(
        incoming(-2, cpu="5"),
        "q",
        DEFAULT_PREEMPT,
        [cpu_in("admitted_borrowing", 0, "4", "q_borrowing")],
        {("admitted_borrowing", RECLAIM, Q_BORROWING)},
        cqs=[hq("q", "c", "3", lending="2"), hq("q_borrowing", "r")],
        cohorts=R_C2,
    ),
    "reclaim in complex hierarchy": Case(
        incoming(-2, cpu="7"),
        "q5",
        DEFAULT_PREEMPT,
        [
            cpu_in("admitted_borrowing_1", -6, "4", "q1"),
            cpu_in("admitted_borrowing_2", -5, "4", "q1"),
            cpu_in("admitted_borrowing_3", -9, "4", "q2"),
            cpu_in("admitted_borrowing_4", -10, "4", "q2"),
            cpu_in("admitted_borrowing_5", -4, "4", "q3"),
            cpu_in("admitted_borrowing_6", -3, "3", "q3"),
            cpu_in("admitted_borrowing_7", 4, "2", "q4"),
            cpu_in("admitted_borrowing_8", 2, "3", "q4"),
        ],
        {
            ("admitted_borrowing_1", RECLAIM, paths("/r/c11/c21/c31/q5", "/r/c12/q1")),
            ("admitted_borrowing_4", RECLAIM, paths("/r/c11/c21/c31/q5", "/r/c11/c23/q2")),
        },
        cqs=[hq(q, c) for q, c in (("q1", "c12"), ("q2", "c23"), ("q3", "c22"), ("q4", "c32"), ("q5", "c31"))],
        cohorts=[hc("r")]
        + [
            hc(n, p, cpu="4")
            for n, p in (
                ("c11", "r"),
                ("c12", "r"),
                ("c21", "c11"),
                ("c22", "c11"),
                ("c23", "c11"),
                ("c31", "c21"),
                ("c32", "c21"),
            )
        ],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_preemption(name: str) -> None:
    """TestPreemption."""
    case = CASES[name]
    assert targets(case) == case.want
    if case.cycle:
        assert cycle_victims(case) == case.want


@pytest.mark.parametrize("name", list(HIERARCHICAL))
def test_hierarchical_preemptions(name: str) -> None:
    """TestHierarchicalPreemptions."""
    case = HIERARCHICAL[name]
    assert targets(case) == case.want
    if case.cycle:
        assert cycle_victims(case) == case.want


def test_hierarchical_preemptions_prefer_to_preempt_evicted_workloads() -> None:
    """TestHierarchicalPreemptions "prefer to preempt evicted workloads": the workload already being evicted is the
    target (upstream counts it as preempted without writing to it again)."""
    case = Case(
        incoming(0, cpu="1"),
        "q",
        DEFAULT_PREEMPT,
        [
            cpu_in("admitted_borrowing", -10, "1", "q_borrowing"),
            cpu_in("evicted_same_cohort", -1, "1", "q_same_cohort", evicted=True),
        ],
        set(),
        cqs=[hq("q", "c", borrow_threshold=0), hq("q_borrowing", "r"), hq("q_same_cohort", "c")],
        cohorts=R_C2,
    )
    assert {name for name, _, _ in targets(case)} == {"evicted_same_cohort"}


# -- TestFairPreemptions (preemption_fair_test.go) ---------------------------------------------------------------
# Upstream checks the targets' names and reasons there (no paths). Its admitted workloads' UIDs are their names, as
# here (the wl- prefix keeps their order).

FS = "InCohortFairSharing"


def fair_cq(
    name: str,
    cohort_name: str | None,
    cpu: str | None,
    *,
    within: str | None = LP,
    reclaim: str | None = ANY,
    weight: str | None = None,
    borrow_threshold: int | None = None,
) -> dict:
    groups = [group(default=[res(CPU, cpu)])] if cpu is not None else []
    return cluster_queue(
        name, cohort_name, *groups, within=within, reclaim=reclaim, weight=weight, borrow_threshold=borrow_threshold
    )


def fair_cohort(name: str, parent: str | None = None, cpu: str | None = None, weight: str | None = None) -> dict:
    return cohort(name, parent, *([group(default=[res(CPU, cpu)])] if cpu is not None else []), weight=weight)


def base_cqs() -> list[dict]:
    """TestFairPreemptions' baseCQs."""
    return [fair_cq(n, "all", "3", borrow_threshold=-3) for n in "abc"] + [
        fair_cq("preemptible", "all", "0", within=None, reclaim=None)
    ]


def units(cq_name: str, *names: str, priority: int = 0) -> list[dict]:
    return [workload(n, priority, {CPU: "1"}, cq_name) for n in names]


def sized(name: str, cpu: str, cq_name: str, priority: int = 0) -> list[dict]:
    return [workload(name, priority, {CPU: cpu}, cq_name)]


def fair(incoming_cpu: str, target: str, admitted: list[dict], want: set, **kw) -> Case:
    kw.setdefault("cqs", base_cqs())
    return Case(incoming(0, cpu=incoming_cpu), target, DEFAULT_PREEMPT, admitted, want, fair=True, **kw)


def stop_at_first(cq: dict) -> dict:
    """flavorFungibility whenCanBorrow and whenCanPreempt MayStopSearch."""
    cq["spec"]["flavorFungibility"] = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    return cq


A3, B5 = units("a", "a1", "a2", "a3"), units("b", "b1", "b2", "b3", "b4", "b5")
FAIR: dict[str, Case] = {
    "reclaim nominal from user using the most": fair("1", "c", A3 + B5 + units("c", "c1"), {("b1", RECLAIM)}),
    "can reclaim from queue using less, if taking the latest workload from user using the most isn't enough": fair(
        "3",
        "c",
        sized("a1", "3", "a") + sized("a2", "1", "a") + sized("b1", "2", "b") + sized("b2", "3", "b"),
        {("a1", RECLAIM)},
    ),
    "reclaim borrowable quota from user using the most": fair("1", "a", A3 + B5 + units("c", "c1"), {("b1", FS)}),
    "preempt one from each CQ borrowing": fair(
        "2",
        "c",
        sized("a1", "0.5", "a")
        + sized("a2", "0.5", "a")
        + sized("a3", "3", "a")
        + sized("b1", "0.5", "b")
        + sized("b2", "0.5", "b")
        + sized("b3", "3", "b"),
        {("a1", RECLAIM), ("b1", RECLAIM)},
    ),
    "can't preempt when everyone under nominal": fair(
        "1", "c", A3 + units("b", "b1", "b2", "b3") + units("c", "c1", "c2", "c3"), set()
    ),
    "can't preempt when it would switch the imbalance": fair("2", "a", A3 + B5, set()),
    "can preempt lower priority workloads from same CQ": fair(
        "2",
        "a",
        units("a", "a1_low", "a2_low", priority=-1) + units("a", "a3", "a4") + B5,
        {("a1_low", ICQ), ("a2_low", ICQ)},
    ),
    "can preempt a combination of same CQ and highest user": fair(
        "2",
        "a",
        units("a", "a_low", priority=-1) + units("a", "a2", "a3") + B5 + units("b", "b6"),
        {("a_low", ICQ), ("b1", FS)},
    ),
    "preempt huge workload if there is no other option, as long as the target CQ gets a lower share": fair(
        "2", "a", sized("b1", "9", "b"), {("b1", RECLAIM)}
    ),
    "can't preempt huge workload if the incoming is also huge": fair(
        "5", "a", sized("a1", "2", "a") + sized("b1", "7", "b"), set()
    ),
    "can't preempt 2 smaller workloads if the incoming is huge": fair(
        "6", "a", sized("b1", "2", "b") + sized("b2", "2", "b") + sized("b3", "3", "b"), set()
    ),
    "preempt from target and others even if over nominal": fair(
        "4",
        "a",
        sized("a1_low", "2", "a", -1) + sized("a2_low", "1", "a", -1) + sized("b1", "3", "b") + sized("b2", "3", "b"),
        {("a1_low", ICQ), ("b1", FS)},
    ),
    "prefer to preempt workloads that don't make the target CQ have the biggest share": fair(
        "3.5",
        "a",
        sized("b1", "2", "b") + sized("b2", "1", "b") + sized("b3", "2", "b") + sized("c1", "1", "c"),
        {("b2", FS)},
    ),
    "preempt from different cluster queues if the end result has a smaller max share": fair(
        "3.5",
        "a",
        sized("b1", "2", "b") + sized("b2", "2.5", "b") + sized("c1", "2", "c") + sized("c2", "2.5", "c"),
        {("b1", FS), ("c1", FS)},
    ),
    "scenario above does not flap": fair(
        "2", "b", sized("a1", "3.5", "a") + sized("b2", "2.5", "b") + sized("c2", "2.5", "c"), set()
    ),
    "cannot preempt if it would make the candidate CQ go under nominal after preempting one element": fair(
        "4", "a", sized("b1", "3", "b") + sized("b2", "3", "b") + sized("c1", "3", "c"), set()
    ),
    "workloads under priority threshold not capriciously preempted": fair(
        "2",
        "a",
        A3
        + units("b", "b1", "b2", "b3")
        + units("preemptible", "preemptible1", "preemptible2", "preemptible3", priority=-3),
        set(),
    ),
    "preempt lower priority first, even if big": fair(
        "1",
        "a",
        sized("a1", "3", "a") + sized("b_low", "5", "b", 0) + sized("b_high", "1", "b", 1),
        {("b_low", FS)},
        strategies=["LessThanInitialShare"],
    ),
    "preempt workload that doesn't transfer the imbalance, even if high priority": fair(
        "1",
        "a",
        sized("a1", "3", "a") + sized("b_low", "5", "b", 0) + sized("b_high", "1", "b", 1),
        {("b_high", FS)},
        strategies=["LessThanOrEqualToFinalShare"],
    ),
    "CQ with higher weight can preempt more": fair(
        "2",
        "a",
        A3 + B5 + units("b", "b6"),
        {("b1", FS), ("b2", FS)},
        cqs=[fair_cq("a", "all", "3", weight="2"), fair_cq("b", "all", "3"), fair_cq("c", "all", "3")],
    ),
    "can preempt anything borrowing from CQ with 0 weight": fair(
        "3",
        "a",
        A3 + B5 + units("b", "b6"),
        {("b1", FS), ("b2", FS), ("b3", FS)},
        cqs=[fair_cq("a", "all", "3"), fair_cq("b", "all", "3", weight="0"), fair_cq("c", "all", "3")],
    ),
    "can't preempt nominal from CQ with 0 weight": fair(
        "1",
        "a",
        A3 + units("b", "b1", "b2", "b3"),
        set(),
        cqs=[fair_cq("a", "all", "3"), fair_cq("b", "all", "3", weight="0")],
    ),
    "can't preempt nominal from Cohort with 0 weight": fair(
        "1",
        "left-cq",
        units("right-cq", "right-1"),
        set(),
        cqs=[
            fair_cq("left-cq", "root", "0", within=None),
            fair_cq("right-cq", "right-cohort", "0", within=None, weight="0"),
        ],
        cohorts=[fair_cohort("right-cohort", "root", "1", weight="0")],
    ),
    "can preempt within cluster queue when no cohort": Case(
        incoming(1000, cpu="1"),
        "a",
        DEFAULT_PREEMPT,
        units("a", "a1"),
        {("a1", ICQ)},
        cqs=[fair_cq("a", None, "1", reclaim=None)],
        fair=True,
    ),
    "hierarchical preemption": fair(
        "5",
        "a",
        [workload(f"{q}{i}", i, {CPU: "1"}, q) for q in "bcde" for i in range(1, 6)],
        {("b1", FS), ("b2", FS), ("c1", FS), ("c2", FS), ("e1", FS)},
        cqs=[
            fair_cq("a", "LEFT", "1", within=None, weight="2"),
            fair_cq("b", "LEFT", "1", within=None, reclaim=None),
            fair_cq("c", "ROOT", "1", within=None, reclaim=None),
            fair_cq("d", "RIGHT", "1", within=None, reclaim=None),
            fair_cq("e", "RIGHT", "1", within=None, reclaim=None, weight="0.99"),
        ],
        cohorts=[
            fair_cohort("ROOT", cpu="5"),
            fair_cohort("LEFT", "ROOT", "5", weight="2"),
            fair_cohort("RIGHT", "ROOT", "5"),
        ],
    ),
    "borrowing cq in non-borrowing cohort is protected": fair(
        "5",
        "a",
        units("a", "a1", "a2", "a3", priority=-1) + units("b", "b1", priority=-1),
        {("a1", ICQ), ("a2", ICQ), ("a3", ICQ)},
        cqs=[
            fair_cq("a", "ROOT", "5", weight="10"),
            fair_cq("b", "RIGHT", None, within=None, reclaim=None, weight="0.1"),
        ],
        cohorts=[fair_cohort("ROOT"), fair_cohort("RIGHT", "ROOT", "1", weight="0.1")],
    ),
    "forced to preempt within clusterqueue because borrowing workload too important": fair(
        "4",
        "a",
        units("a", "a1", "a2", "a3", priority=-1) + sized("b1", "4", "b", 100),
        {("a1", ICQ), ("a2", ICQ), ("a3", ICQ)},
        cqs=[
            fair_cq("a", "ROOT", "5", reclaim=LP, weight="10"),
            fair_cq("b", "RIGHT", None, within=None, reclaim=None, weight="0.1"),
        ],
        cohorts=[fair_cohort("ROOT"), fair_cohort("RIGHT", "ROOT", "3", weight="0.1")],
    ),
    "deep preemption": fair(
        "1",
        "a",
        units("b", "b1"),
        {("b1", FS)},
        cqs=[fair_cq("a", "AAA", "0", within=None), fair_cq("b", "BBB", "0", within=None, reclaim=None)],
        cohorts=[
            fair_cohort("ROOT"),
            fair_cohort("A", "ROOT", weight="1.01"),
            fair_cohort("AA", "A"),
            fair_cohort("AAA", "AA"),
            fair_cohort("B", "ROOT", weight="0.99"),
            fair_cohort("BB", "B"),
            fair_cohort("BBB", "BB"),
            fair_cohort("C", "ROOT"),
            fair_cohort("CC", "C"),
            fair_cohort("CCC", "CC"),
            fair_cohort("CCCC", "CCC", "1"),
        ],
    ),
    "cq with zero weight can reclaim nominal quota": fair(
        "1",
        "a",
        units("b", "b1"),
        {("b1", RECLAIM)},
        cqs=[
            fair_cq("a", "ROOT", "1", within=None, weight="0.0"),
            fair_cq("b", "ROOT", "0", within=None, reclaim=None, weight="1.0"),
        ],
    ),
    "cohort with zero weight can reclaim nominal quota": fair(
        "1",
        "a",
        units("b", "b1"),
        {("b1", FS)},
        cqs=[
            fair_cq("a", "A", "0", within=None, weight="0.0"),
            fair_cq("b", "ROOT", "0", within=None, reclaim=None, weight="1.0"),
        ],
        cohorts=[fair_cohort("A", "ROOT", "1", weight="0.0")],
    ),
    "nominal first: workload fitting within nominal can preempt despite high aggregate DRS": Case(
        incoming(0, cpu="1"),
        "a",
        one(cpu=("premium", PREEMPT)),
        [workload(n, 0, {CPU: "1"}, "a", {CPU: "premium"}) for n in ("a_prem1", "a_prem2")]
        + [workload(f"a_cheap{i}", 0, {CPU: "1"}, "a", {CPU: "cheap"}) for i in range(1, 6)]
        + [workload("b_prem1", 0, {CPU: "1"}, "b", {CPU: "premium"})],
        {("b_prem1", RECLAIM)},
        cqs=[
            stop_at_first(
                cluster_queue("a", "all", group(premium=[res(CPU, "3")], cheap=[res(CPU, "0")]), reclaim=ANY)
            ),
            cluster_queue("b", "all", group(premium=[res(CPU, "0")], cheap=[res(CPU, "6")])),
        ],
        fair=True,
    ),
    "zero weight borrowing preemptor cannot preempt from a borrowing CQ with a non-zero weight": fair(
        "1",
        "a",
        units("a", "a1") + units("b", "b1", "b2"),
        set(),
        cqs=[
            fair_cq("a", "all", "1", within=None, weight="0"),
            fair_cq("b", "all", "1", within=None, reclaim=None, weight="1"),
        ],
    ),
    "zero weight borrowing preemptor can preempt from a borrowing CQ which also has zero weight": fair(
        "2",
        "a",
        units("b", "b1", "b2", "b3"),
        {("b1", FS)},
        cqs=[
            fair_cq("a", "all", "1", within=None, weight="0"),
            fair_cq("b", "all", "0", within=None, reclaim=None, weight="0"),
        ],
        cohorts=[fair_cohort("all", cpu="3")],
    ),
    "non-zero weight borrowing preemptor preempts from a borrowing CQ": fair(
        "2",
        "a",
        units("b", "b1", "b2", "b3"),
        {("b1", FS)},
        cqs=[
            fair_cq("a", "all", "1", within=None, weight="1"),
            fair_cq("b", "all", "0", within=None, reclaim=None, weight="1"),
        ],
        cohorts=[fair_cohort("all", cpu="3")],
    ),
    "candidates skipped by the first strategy are still available to the second strategy": fair(
        "1",
        "p",
        sized("p1", "2", "p") + sized("y1", "2", "y") + sized("y2", "2", "y") + units("x", "x1", "x2"),
        {("y1", FS), ("x1", FS)},
        cqs=[
            fair_cq("p", "A", "2", within=None, weight="1"),
            fair_cq("y", "A", "2", within=None, reclaim=None, weight="1"),
            fair_cq("x", "ROOT", "1", within=None, reclaim=None, weight="1"),
        ],
        cohorts=[fair_cohort("A", "ROOT", "1", weight="0")],
    ),
}
# TestFairPreemptionSkipsUnsatisfiableTournament: the outcome (no target) with either preemptor weight; upstream also
# counts its log lines, which kubesim does not write.
for _weight in ("0", "1"):
    FAIR[f"skips unsatisfiable tournament: preemptor weight {_weight}"] = fair(
        "1",
        "a",
        units("a", "a1") + units("b", "b1", "b2"),
        set(),
        cqs=[
            fair_cq("a", "all", "1", within=None, weight=_weight),
            fair_cq("b", "all", "1", within=None, reclaim=None, weight="1"),
        ],
    )


@pytest.mark.parametrize("name", list(FAIR))
def test_fair_preemptions(name: str) -> None:
    """TestFairPreemptions."""
    case = FAIR[name]
    assert {(n, r) for n, r, _ in targets(case)} == case.want
    if case.cycle:
        assert {(n, r) for n, r, _ in cycle_victims(case)} == case.want


# -- TestCandidatesOrdering (preemption_test.go) -----------------------------------------------------------------
# The priority-boost cases are not ported: kubesim does not model the PriorityBoost annotation.


def _ordered(workloads: list[dict], usage: dict[str, float] | None = None) -> list[str]:
    """The candidates in CandidatesOrdering's order for a preemptor in ClusterQueue "preemptor"; usage gives the
    LocalQueues' Admission Fair Sharing usage (both ClusterQueues then use AFS admission)."""
    config = KueueConfig.from_dict({"admissionFairSharing": {"usageHalfLifeTime": "168h"}} if usage else {})
    scope = {"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}} if usage else {}
    cqs = [cluster_queue(n, None, group(default=[res(CPU, "10")])) for n in ("preemptor", "different_cq")]
    for q in cqs:
        q["spec"].update(scope)
    snap = Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": "default"}, "spec": {}}], cluster_queues=cqs, config=config, now=T0
    )
    snap.lq_usage.update({("", lq): v for lq, v in (usage or {}).items()})
    candidates = [workload_info(w, config) for w in workloads]
    order_candidates(snap, candidates, "preemptor", T0)
    return [c.name for c in candidates]


def _in(name: str, cq_name: str, priority: int = 0, reserved_at=T0, queue: str = "incoming") -> dict:
    obj = workload(name, priority, {CPU: "1"}, cq_name, reserved_at=reserved_at)
    obj["spec"]["queueName"] = queue
    return obj


def test_candidates_ordering_workloads_sorted_by_priority() -> None:
    assert _ordered([_in("high", "preemptor", 10), _in("low", "preemptor", -10)]) == ["low", "high"]


def test_candidates_ordering_evicted_workload_first() -> None:
    evicted = workload("evicted", 0, {CPU: "1"}, evicted=True)
    assert _ordered([_in("other", "preemptor", 10), evicted]) == ["evicted", "other"]


def test_candidates_ordering_workload_from_different_cq_first() -> None:
    assert _ordered([_in("preemptorCq", "preemptor", 10), _in("other", "different_cq", 10)]) == [
        "other",
        "preemptorCq",
    ]


def test_candidates_ordering_old_workloads_last() -> None:
    got = _ordered(
        [
            _in("older", "preemptor", reserved_at=T0 - timedelta(seconds=1)),
            _in("younger", "preemptor", reserved_at=T0 + timedelta(seconds=1)),
            _in("current", "preemptor"),
        ]
    )
    assert got == ["younger", "current", "older"]


def test_candidates_ordering_workloads_with_higher_lq_usage_first() -> None:
    low = _in("low_lq_usage", "preemptor", 1, queue="low_usage_lq")
    mid = _in("mid_lq_usage", "preemptor", 10, queue="mid_usage_lq")
    usage = {"low_usage_lq": 0.1, "mid_usage_lq": 0.5}
    assert _ordered([low, mid], usage) == ["mid_lq_usage", "low_lq_usage"]


def test_candidates_ordering_workloads_from_different_cq_are_sorted_based_on_priority_and_timestamp() -> None:
    mid = _in("mid_lq_usage", "preemptor", 10, queue="mid_usage_lq")
    high = _in("high_lq_usage_different_cq", "different_cq", 1, queue="high_usage_lq_different_cq")
    usage = {"mid_usage_lq": 0.5, "high_usage_lq_different_cq": 1.0}
    assert _ordered([mid, high], usage) == ["high_lq_usage_different_cq", "mid_lq_usage"]


# -- TestSatisfiesPreemptionPolicy (common/preemption_policy_test.go) ---------------------------------------------
# Not ported: the SchedulerTimestampPreemptionBuffer cases (an alpha gate, off by default, removed after v0.19) and
# the PriorityBoost ones (not modelled).

POLICY_CASES = {
    "LowerPriority: preemptor has higher priority": ((10, 0), (5, 0), LP, True),
    "LowerPriority: preemptor has same priority": ((10, 0), (10, 0), LP, False),
    "LowerOrNewerEqualPriority: preemptor has same priority, same timestamp": ((10, 0), (10, 0), LONEP, False),
    "LowerOrNewerEqualPriority: preemptor has same priority, newer timestamp (within 5min buffer)": (
        (10, 60),
        (10, 0),
        LONEP,
        False,
    ),
    "LowerOrNewerEqualPriority: preemptor has same priority, older timestamp (within 5min buffer)": (
        (10, 0),
        (10, 60),
        LONEP,
        True,
    ),
    "PreemptionPolicyAny": ((10, 0), (10, 360), ANY, True),
    "PreemptionPolicyNever": ((10, 0), (10, 360), NEVER, False),
}


@pytest.mark.parametrize("name", list(POLICY_CASES))
def test_satisfies_preemption_policy(name: str) -> None:
    (p_priority, p_created), (c_priority, c_created), policy, want = POLICY_CASES[name]
    config = KueueConfig(fair_sharing=False)
    preemptor = workload_info(workload("preemptor", p_priority, created=T0 + timedelta(seconds=p_created)), config)
    candidate = workload_info(workload("candidate", c_priority, created=T0 + timedelta(seconds=c_created)), config)
    assert satisfies_policy(preemptor, candidate, policy) is want


# -- TestMakeClusterQueueOrdering (fairsharing/ordering_test.go) ---------------------------------------------------

ORDERING_CASES: dict[str, tuple] = {
    # (ClusterQueues (name, cohort, nominal cpu), cohorts, admitted (name, cq, cpu), preemptor, candidate queues,
    #  actions, expected order of target queues)
    "no cohort: preemptor CQ yielded for in-CQ preemption; repro for nil pointer panic issue": (
        [("preemptor", None, "4")],
        [],
        [("wl1", "preemptor", "1")],
        "preemptor",
        {"preemptor"},
        [],
        ["preemptor"],
    ),
    "no cohort: DropQueue ends the iteration with candidates remaining": (
        [("preemptor", None, "4")],
        [],
        [("wl1", "preemptor", "1"), ("wl2", "preemptor", "1")],
        "preemptor",
        {"preemptor"},
        ["drop"],
        ["preemptor"],
    ),
    "non-borrowing CQ is pruned even with candidates": (
        [("preemptor", "all", "4"), ("target", "all", "5")],
        [],
        [("t1", "target", "2")],
        "preemptor",
        {"target"},
        [],
        [],
    ),
    "higher DRS CQ returned before lower DRS CQ": (
        [("preemptor", "all", "4"), ("high", "all", "2"), ("low", "all", "2")],
        [],
        [("h1", "high", "5"), ("l1", "low", "3")],
        "preemptor",
        {"high", "low"},
        [],
        ["high", "low"],
    ),
    "CQ with highest DRS returned again while it still has candidates": (
        [("preemptor", "all", "4"), ("high", "all", "2"), ("low", "all", "2")],
        [],
        [("h1", "high", "3"), ("h2", "high", "2"), ("l1", "low", "3")],
        "preemptor",
        {"high", "low"},
        [],
        ["high", "high", "low"],
    ),
    "drop queue prevents CQ from being returned again": (
        [("preemptor", "all", "4"), ("high", "all", "2"), ("low", "all", "2")],
        [],
        [("h1", "high", "3"), ("h2", "high", "2"), ("l1", "low", "3")],
        "preemptor",
        {"high", "low"},
        ["drop", "pop"],
        ["high", "low"],
    ),
    "hierarchical cohorts: higher-DRS subtree visited first": (
        [("preemptor-cq", "root", "4"), ("left-cq", "left-cohort", "2"), ("right-cq", "right-cohort", "2")],
        [cohort("root"), cohort("left-cohort", "root"), cohort("right-cohort", "root")],
        [("lc1", "left-cq", "5"), ("rc1", "right-cq", "3")],
        "preemptor-cq",
        {"left-cq", "right-cq"},
        [],
        ["left-cq", "right-cq"],
    ),
}


@pytest.mark.parametrize("name", list(ORDERING_CASES))
def test_make_cluster_queue_ordering(name: str) -> None:
    queues, cohorts, admitted, preemptor, candidate_queues, actions, want = ORDERING_CASES[name]
    case = Case(
        incoming(),
        preemptor,
        DEFAULT_PREEMPT,
        [workload(n, 0, {CPU: cpu}, q) for n, q, cpu in admitted],
        set(),
        cqs=[cluster_queue(n, c, group(default=[res(CPU, cpu)])) for n, c, cpu in queues],
        cohorts=cohorts,
        fair=True,
    )
    snap = _snapshot(case, case.admitted)
    candidates = [w for w in snap.workloads.values() if w.cluster_queue in candidate_queues]
    ordering = FairTargets(snap.cluster_queues[preemptor], candidates, T0)
    got = []
    for i, target in enumerate(ordering.iterate()):
        got.append(target.name)
        if i < len(actions) and actions[i] == "drop":
            ordering.drop(target)
        else:
            ordering.pop(target)
        assert len(got) <= 50, "the ordering does not end"
    assert got == want


# -- TestDominantResourceShare (pkg/cache/scheduler/fair_sharing_test.go) ------------------------------------------
# The shares Fair Sharing preemption compares. Usage is reserved by workloads in ClusterQueue "cq" (one per flavor
# and resource, in Kueue's int64 units: CPU in millis); extra is the workload's request added to every node's share.
# Results: {node: (rounded weighted share, dominant resource, borrowing)}.

EXAMPLE_GPU = "example.com/gpu"
MAX_SHARE = 2**63 - 1


def quota(name: str, nominal: str, lending: str | None = None, borrowing: str | None = None) -> dict:
    return res(name, nominal, borrowing, lending)


def drs_queue(name: str, cohort_name: str | None, weight: str | None, **flavors: list[dict]) -> dict:
    return cluster_queue(name, cohort_name, group(**flavors), weight=weight)


def _pair(cq_quota: list[dict], lending_quota: list[dict], cq_weight: str = "1", lending_weight: str = "1") -> list:
    return [
        drs_queue("cq", "test-cohort", cq_weight, default=cq_quota),
        drs_queue("lending-cq", "test-cohort", lending_weight, default=lending_quota),
    ]


_NOT_BORROWING = (0, "", False)
_LENDER_AND_COHORT = {"lending-cq": _NOT_BORROWING, "test-cohort": _NOT_BORROWING}
CPU_GPU_2_5 = [quota(CPU, "2"), quota(EXAMPLE_GPU, "5")]
CPU_GPU_8_5 = [quota(CPU, "8"), quota(EXAMPLE_GPU, "5")]

DRS_CASES: dict[str, tuple] = {
    # (ClusterQueues, cohorts, usage {(flavor, resource): amount}, extra, want)
    "no cohort": (
        [drs_queue("cq", None, None, default=[quota(CPU, "2000"), quota(EXAMPLE_GPU, "5")])],
        [],
        {("default", CPU): 1_000, ("default", EXAMPLE_GPU): 2},
        {},
        {"cq": _NOT_BORROWING},
    ),
    "usage below nominal": (
        _pair(CPU_GPU_2_5, CPU_GPU_8_5),
        [],
        {("default", CPU): 1_000, ("default", EXAMPLE_GPU): 2},
        {},
        {"cq": _NOT_BORROWING, **_LENDER_AND_COHORT},
    ),
    "usage above nominal": (
        _pair(CPU_GPU_2_5, CPU_GPU_8_5),
        [],
        {("default", CPU): 3_000, ("default", EXAMPLE_GPU): 7},
        {},
        {"cq": (200, EXAMPLE_GPU, True), **_LENDER_AND_COHORT},
    ),
    "usage slightly above nominal in a cohort with large quotas": (
        _pair([quota(EXAMPLE_GPU, "500")], [quota(EXAMPLE_GPU, "1000")], lending_weight="300"),
        [],
        {("default", EXAMPLE_GPU): 501},
        {},
        {"cq": (1, EXAMPLE_GPU, True), **_LENDER_AND_COHORT},
    ),
    "usage way above nominal in a cohort with large quotas and weights": (
        _pair([quota(EXAMPLE_GPU, "500")], [quota(EXAMPLE_GPU, "1000")], cq_weight="300", lending_weight="300"),
        [],
        {("default", EXAMPLE_GPU): 800},
        {},
        {"cq": (1, EXAMPLE_GPU, True), **_LENDER_AND_COHORT},
    ),
    "one resource above nominal": (
        _pair(CPU_GPU_2_5, CPU_GPU_8_5),
        [],
        {("default", CPU): 3_000, ("default", EXAMPLE_GPU): 3},
        {},
        {"cq": (100, CPU, True), **_LENDER_AND_COHORT},
    ),
    "usage with workload above nominal": (
        _pair(CPU_GPU_2_5, CPU_GPU_8_5),
        [],
        {("default", CPU): 1_000, ("default", EXAMPLE_GPU): 2},
        {("default", CPU): 4_000, ("default", EXAMPLE_GPU): 4},
        {"cq": (300, CPU, True), **_LENDER_AND_COHORT},
    ),
    "A resource with zero lendable": (
        _pair(
            [quota(CPU, "2"), quota(EXAMPLE_GPU, "2", lending="0")],
            [quota(CPU, "8"), quota(EXAMPLE_GPU, "64", lending="0")],
        ),
        [],
        {("default", CPU): 1_000, ("default", EXAMPLE_GPU): 1},
        {("default", CPU): 4_000, ("default", EXAMPLE_GPU): 4},
        {"cq": (300, CPU, True), **_LENDER_AND_COHORT},
    ),
    "multiple flavors": (
        [
            cluster_queue(
                "cq",
                "test-cohort",
                group(**{"on-demand": [quota(CPU, "20")], "spot": [quota(CPU, "80")]}),
                weight="1",
            ),
            drs_queue("lending-cq", "test-cohort", "1", default=[quota(CPU, "100")]),
        ],
        [],
        {("on-demand", CPU): 15_000, ("spot", CPU): 5_000},
        {("on-demand", CPU): 10_000},
        {"cq": (25, CPU, True), **_LENDER_AND_COHORT},
    ),
    "above nominal with integer weight": (
        _pair([quota(EXAMPLE_GPU, "5")], [quota(EXAMPLE_GPU, "5")], cq_weight="2"),
        [],
        {("default", EXAMPLE_GPU): 7},
        {},
        {"cq": (100, EXAMPLE_GPU, True), **_LENDER_AND_COHORT},
    ),
    "above nominal with decimal weight": (
        _pair([quota(EXAMPLE_GPU, "5")], [quota(EXAMPLE_GPU, "5")], cq_weight="0.5"),
        [],
        {("default", EXAMPLE_GPU): 7},
        {},
        {"cq": (400, EXAMPLE_GPU, True), **_LENDER_AND_COHORT},
    ),
    "above nominal with zero weight": (
        _pair([quota(EXAMPLE_GPU, "5")], [quota(EXAMPLE_GPU, "10")], cq_weight="0"),
        [],
        {("default", EXAMPLE_GPU): 7},
        {},
        {"cq": (MAX_SHARE, EXAMPLE_GPU, True), **_LENDER_AND_COHORT},
    ),
    "cohort has resource share": (
        [drs_queue("cq", "child-cohort", "1", default=[quota(EXAMPLE_GPU, "5")])],
        [cohort("child-cohort", "root", weight="2"), cohort("root", None, group(default=[quota(EXAMPLE_GPU, "45")]))],
        {("default", EXAMPLE_GPU): 10},
        {},
        {"cq": (100, EXAMPLE_GPU, True), "child-cohort": (50, EXAMPLE_GPU, True), "root": _NOT_BORROWING},
    ),
    "resource share defined for resources only available at the root cohort": (
        [drs_queue("cq", "child-cohort", "1", default=[quota(EXAMPLE_GPU, "0")])],
        [cohort("child-cohort", "root", weight="2"), cohort("root", None, group(default=[quota(EXAMPLE_GPU, "50")]))],
        {("default", EXAMPLE_GPU): 10},
        {},
        {"cq": (200, EXAMPLE_GPU, True), "child-cohort": (100, EXAMPLE_GPU, True), "root": _NOT_BORROWING},
    ),
    "resource share affected by borrowing limit": (
        [drs_queue("cq", "child-cohort", None, default=[quota(EXAMPLE_GPU, "0")])],
        [
            cohort("child-cohort", "root", group(default=[quota(EXAMPLE_GPU, "0", borrowing="10")])),
            cohort("root", None, group(default=[quota(EXAMPLE_GPU, "50")])),
        ],
        {("default", EXAMPLE_GPU): 10},
        {},
        {"cq": (1000, EXAMPLE_GPU, True), "child-cohort": (200, EXAMPLE_GPU, True), "root": _NOT_BORROWING},
    ),
    "borrowing against unlimited lendable capacity (exabyte-scale quota)": (
        _pair([quota(CPU, "0")], [quota(CPU, "1E")]),
        [],
        {("default", CPU): 1_000},
        {},
        {"cq": (1, CPU, True), **_LENDER_AND_COHORT},
    ),
}


@pytest.mark.parametrize("name", list(DRS_CASES))
def test_dominant_resource_share(name: str) -> None:
    queues, cohorts, usage, extra, want = DRS_CASES[name]
    admitted = []
    for i, ((flavor, resource), amount) in enumerate(usage.items()):
        quantity = format_amount(resource, amount)
        admitted.append(workload(f"workload-{i}", 0, {resource: quantity}, "cq", {resource: flavor}))
    case = Case(incoming(), "cq", DEFAULT_PREEMPT, admitted, set(), cqs=queues, cohorts=cohorts, fair=True)
    snap = _snapshot(case, admitted)
    nodes = {**snap.cluster_queues, **snap.cohorts}
    got = {}
    for node_name, node in nodes.items():
        share = dominant_resource_share(node, extra)
        got[node_name] = (share.weighted_share(), share.dominant, share.borrowing)
    assert got == want


# -- Integration scenarios (test/integration/singlecluster/scheduler/preemption_test.go) ----------------------------
# Driven through tests/kubesim/kueue/sim.py, which applies the scheduler's decisions as the controllers do and
# finishes every eviction at once (upstream finishes them by hand, so only the settled outcome is compared, never the
# interim). The suite runs classic preemption; priorities are upstream's low -1, mid 0, high 1, very high 2.
# Not ported: "Should retry on failed preemptions" and "Should issue preemption exactly once" (API write failures),
# the ElasticJobs and preemption-gate contexts (not modelled), and "Should prevent other workloads from stealing quota
# when a preemptor is waiting for multiple evictions", which turns on the alpha PrioritizePreemptorWorkloads gate
# (off by default in v0.19 and v0.20; kubesim models the defaults).

LOW, MID, HIGH, VERY_HIGH = -1, 0, 1, 2


def _sim(
    *queues: dict, cohorts: list[dict] | None = None, flavors: tuple[str, ...] = ("f",), fair: bool = False
) -> Sim:
    sim = Sim(KueueConfig(fair_sharing=fair))
    sim.flavors = [sim_flavor(f) for f in flavors]
    sim.cqs = list(queues)
    sim.cohorts = cohorts or []
    sim.lqs = [local_queue(q["metadata"]["name"], q["metadata"]["name"]) for q in queues]
    return sim


def _victims(sim: Sim) -> set[tuple[str, str]]:
    return {(p.victim.name, p.reason) for p in sim.preemptions}


def test_integration_single_cq_preempt_lower_priority_when_not_enough_quota() -> None:
    """In a single ClusterQueue: Should preempt Workloads with lower priority when there is not enough quota."""
    sim = _sim(sim_cq("cq", 4, within=LONEP))
    for name, priority in (("low-wl-1", LOW), ("low-wl-2", LOW), ("mid-wl", MID), ("high-wl-1", HIGH)):
        sim.add(name, "cq", 1, priority=priority)
    sim.settle()
    assert sim.running() == {"low-wl-1", "low-wl-2", "mid-wl", "high-wl-1"}
    sim.add("low-wl-3", "cq", 1, priority=LOW)
    sim.settle()
    assert not sim.admitted("low-wl-3")
    sim.add("high-wl-2", "cq", 2, priority=HIGH)
    sim.settle()
    assert sim.running() == {"mid-wl", "high-wl-1", "high-wl-2"}
    assert _victims(sim) == {("low-wl-1", ICQ), ("low-wl-2", ICQ)}


def test_integration_single_cq_preempt_newer_workloads_with_the_same_priority() -> None:
    """In a single ClusterQueue: Should preempt newer Workloads with the same priority when there is not enough
    quota."""
    sim = _sim(sim_cq("cq", 4, within=LONEP))
    sim.add("wl-1", "cq", 1, priority=LOW)
    sim.add("wl-2", "cq", 1, priority=LOW)
    sim.settle()
    sim.add("wl-3", "cq", 3, priority=LOW)
    sim.settle()
    assert not sim.admitted("wl-3")
    sim.add("wl-4", "cq", 1, priority=LOW)
    sim.settle()
    assert sim.running() == {"wl-1", "wl-2", "wl-4"}
    sim.finish("wl-1")
    sim.settle()
    assert sim.running() == {"wl-2", "wl-3"}
    assert _victims(sim) == {("wl-4", ICQ)}


def _three_in_cohort() -> Sim:
    return _sim(
        sim_cq("alpha-cq", 2, cohort="all", within=LP, reclaim=ANY),
        sim_cq("beta-cq", 2, cohort="all"),
        sim_cq("gamma-cq", 2, cohort="all", within=LP, reclaim=ANY),
    )


def test_integration_cohort_preempt_borrowers_when_using_less_than_nominal() -> None:
    """In a ClusterQueue that is part of a cohort: Should preempt Workloads in the cohort borrowing quota, when the
    ClusterQueue is using less than nominal quota (and the Preempted condition once they are admitted again)."""
    sim = _three_in_cohort()
    sim.add("alpha-low", "alpha-cq", 1, priority=LOW)
    sim.add("beta-mid", "beta-cq", 1, priority=MID)
    sim.add("beta-high", "beta-cq", 4, priority=HIGH)
    sim.settle()
    assert sim.running() == {"alpha-low", "beta-mid", "beta-high"}
    mid = sim.add("alpha-mid", "alpha-cq", 2, priority=MID)
    sim.settle()
    assert sim.running() == {"alpha-mid", "beta-high"}
    assert sim.cq_of("alpha-mid") == "alpha-cq"
    prefix = f"Preempted to accommodate a workload (UID: {mid['metadata']['uid']}, JobUID: "
    prefix += f"{mid['metadata']['labels']['kueue.x-k8s.io/job-uid']}) due to "
    want = {
        "alpha-low": (
            ICQ,
            prefix + "prioritization in the ClusterQueue; preemptor path: /all/alpha-cq; preemptee path: /all/alpha-cq",
        ),
        "beta-mid": (
            RECLAIM,
            prefix + "reclamation within the cohort; preemptor path: /all/alpha-cq; preemptee path: /all/beta-cq",
        ),
    }
    for name, (reason, message) in want.items():
        condition = sim.condition(name, "Preempted")
        assert (condition["status"], condition["reason"], condition["message"]) == ("True", reason, message)
    sim.finish("alpha-mid")
    sim.settle()
    assert sim.running() == {"alpha-low", "beta-mid", "beta-high"}
    for name, (_, message) in want.items():
        condition = sim.condition(name, "Preempted")
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "False",
            "QuotaReserved",
            "Previously: " + message,
        )


def test_integration_cohort_no_preemption_if_the_cluster_queue_requires_borrowing() -> None:
    """In a ClusterQueue that is part of a cohort: Should not preempt Workloads in the cohort, if the ClusterQueue
    requires borrowing."""
    sim = _three_in_cohort()
    sim.add("alpha-high-1", "alpha-cq", 2, priority=HIGH)
    sim.add("beta-low", "beta-cq", 4, priority=LOW)
    sim.settle()
    sim.add("alpha-high-2", "alpha-cq", 2, priority=HIGH)
    sim.settle()
    assert sim.running() == {"alpha-high-1", "beta-low"}
    assert not sim.preemptions


def test_integration_cohort_concurrent_preemptors_with_different_priorities() -> None:
    """In a ClusterQueue that is part of a cohort: Should preempt all necessary workloads in concurrent scheduling
    with different priorities."""
    sim = _three_in_cohort()
    sim.add("beta-mid", "beta-cq", 3, priority=MID)
    sim.add("beta-high", "beta-cq", 3, priority=HIGH)
    sim.settle()
    sim.add("alpha-mid", "alpha-cq", 2, priority=MID)
    sim.add("gamma-mid", "gamma-cq", 2, priority=MID)
    sim.settle()
    assert sim.running() == {"alpha-mid", "gamma-mid"}
    assert _victims(sim) == {("beta-mid", RECLAIM), ("beta-high", RECLAIM)}


def test_integration_cohort_concurrent_preemptors_with_the_same_priority() -> None:
    """In a ClusterQueue that is part of a cohort: Should preempt all necessary workloads in concurrent scheduling
    with the same priority: the settled outcome, which upstream expects with RecomputeAssignmentUponPreemptionTargets-
    Overlap both off and on (kubesim follows v0.20's on; the first cycle's two evictions are checked in
    test_upstream_recompute.py)."""
    sim = _three_in_cohort()
    for i in range(3):
        sim.add(f"beta-{i}", "beta-cq", 2)
    sim.settle()
    sim.add("alpha", "alpha-cq", 2)
    sim.add("gamma", "gamma-cq", 2)
    sim.settle()
    running = sim.running()
    assert {"alpha", "gamma"} <= running and len(running - {"alpha", "gamma"}) == 1
    assert len(sim.preemptions) == 2


def test_integration_strict_fifo_reclaims_from_cohort_despite_pending_workloads() -> None:
    """In a cohort with StrictFIFO: Should reclaim from cohort even if another CQ has pending workloads."""
    sim = _sim(
        sim_cq("alpha-cq", 2, cohort="all", strategy="StrictFIFO", within=LP, reclaim=ANY),
        sim_cq("beta-cq", 2, cohort="all", strategy="StrictFIFO", within=LP, reclaim=ANY),
    )
    sim.add("use-all", "alpha-cq", 4, priority=1)
    sim.settle()
    sim.add("pending", "alpha-cq", 1, priority=0)
    sim.settle()
    assert sim.running() == {"use-all"}
    sim.add("preemptor", "beta-cq", 1, priority=-1)
    sim.settle()
    assert sim.admitted("preemptor") and not sim.admitted("use-all")
    assert _victims(sim) == {("use-all", RECLAIM)}


def test_integration_shared_cluster_queue_preempting_while_borrowing() -> None:
    """When most quota is in a shared ClusterQueue in a cohort: should allow preempting workloads while borrowing
    (the victim comes back on the fallback flavor)."""

    def tier(name: str, threshold: int | None) -> dict:
        groups = [
            {
                "coveredResources": [GPU],
                "flavors": [
                    {"name": "one", "resources": [{"name": GPU, "nominalQuota": "1", "borrowingLimit": "10"}]},
                    {"name": "fallback", "resources": [{"name": GPU, "nominalQuota": "10", "borrowingLimit": "0"}]},
                ],
            }
        ]
        q = sim_cq(name, 0, cohort="all", reclaim=LP, borrow_policy=LP, threshold=threshold, groups=groups)
        q["spec"]["flavorFungibility"] = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
        return q

    shared = sim_cq("shared-cq", 0, cohort="all", groups=[quota_spec("one", 10)])
    sim = _sim(
        tier("a-standard-cq", MID),
        tier("a-best-effort-cq", None),
        tier("b-best-effort-cq", None),
        tier("b-standard-cq", MID),
        shared,
        flavors=("one", "fallback"),
    )

    def flavor_of(name: str) -> tuple[str | None, str | None]:
        adm = sim.workloads[name]["status"].get("admission") or {}
        flavors = [f for ps in adm.get("podSetAssignments") or [] for f in (ps.get("flavors") or {}).values()]
        return adm.get("clusterQueue"), (flavors[0] if flavors else None)

    sim.add("a-best-effort-low", "a-best-effort-cq", 5, priority=LOW)
    sim.settle()
    assert flavor_of("a-best-effort-low") == ("a-best-effort-cq", "one")
    sim.add("b-best-effort-low", "b-best-effort-cq", 1, priority=LOW)
    sim.settle()
    assert flavor_of("b-best-effort-low") == ("b-best-effort-cq", "one")
    sim.add("b-standard-high", "b-standard-cq", 5, priority=HIGH)
    sim.settle()
    assert flavor_of("b-standard-high") == ("b-standard-cq", "one")
    top = sim.add("a-standard-very-high", "a-standard-cq", 7, priority=VERY_HIGH)
    sim.settle()
    assert _victims(sim) == {("a-best-effort-low", WHILE_BORROWING)}
    assert sim.condition("a-best-effort-low", "Preempted")["message"].endswith(
        "preemptor path: /all/a-standard-cq; preemptee path: /all/a-best-effort-cq"
    )
    assert top["status"]["admission"]["clusterQueue"] == "a-standard-cq"
    assert flavor_of("a-standard-very-high") == ("a-standard-cq", "one")
    assert flavor_of("a-best-effort-low") == ("a-best-effort-cq", "fallback")
    assert flavor_of("b-standard-high") == ("b-standard-cq", "one")
    assert flavor_of("b-best-effort-low") == ("b-best-effort-cq", "one")


def test_integration_preempt_with_lending_limit() -> None:
    """With lending limit: Should be able to preempt when lending limit enabled."""
    sim = _sim(sim_cq("prod-cq", 5, cohort="all", lending=4, reclaim=ANY), sim_cq("dev-cq", 5, cohort="all"))
    sim.add("wl-1", "dev-cq", 4, priority=0)
    sim.add("wl-2", "dev-cq", 5, priority=1)
    sim.settle()
    assert sim.running() == {"wl-1", "wl-2"}
    sim.add("wl-3", "prod-cq", 4)
    sim.settle()
    assert sim.running() == {"wl-2", "wl-3"} and sim.cq_of("wl-3") == "prod-cq"
    assert _victims(sim) == {("wl-1", RECLAIM)}


def test_integration_borrow_within_cohort_preempts_while_borrowing() -> None:
    """When borrowWithinCohort is used and PrioritySortingWithinCohort disabled: should allow preempting workloads
    while borrowing (one preemptor at a time, so the entry order the gate changes plays no part)."""

    def queue(name: str, nominal: int, borrowing: int | None, **kw) -> dict:
        q = sim_cq(name, nominal, cohort="all", borrowing=borrowing, within=LP, reclaim=ANY, **kw)
        q["spec"]["flavorFungibility"] = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
        return q

    sim = _sim(
        queue("a-cq", 0, 10),
        queue("b-cq", 5, 5, borrow_policy=LP, threshold=VERY_HIGH),
        queue("c-cq", 5, None),
    )
    sim.add("a-low", "a-cq", 4, priority=MID)
    sim.settle()
    sim.add("b1-high", "b-cq", 4, priority=HIGH)
    sim.settle()
    assert sim.running() == {"a-low", "b1-high"}
    sim.add("b2-high", "b-cq", 4, priority=HIGH)
    sim.settle()
    assert sim.running() == {"b1-high", "b2-high"}
    assert _victims(sim) == {("a-low", WHILE_BORROWING)}


def test_integration_multi_level_cohort_guaranteed_queue_has_preferential_access() -> None:
    """In a multi-level cohort: workloads in guaranteed cq should have preferential access to the resources."""
    sim = _sim(
        sim_cq("best-effort", 0, cohort="root", within=LP, reclaim=ANY),
        sim_cq("guaranteed", 0, cohort="guaranteed", within=LP, reclaim=ANY),
        cohorts=[sim_cohort("root"), sim_cohort("guaranteed", "root", 3)],
    )
    sim.add("best-effort-wl", "best-effort", 3, priority=HIGH)
    sim.settle()
    assert sim.running() == {"best-effort-wl"}
    sim.add("guaranteed-wl", "guaranteed", 3, priority=MID)
    sim.settle()
    assert sim.running() == {"guaranteed-wl"}
    assert _victims(sim) == {("best-effort-wl", RECLAIM)}


def test_integration_afs_preempts_from_the_local_queue_with_higher_recent_usage() -> None:
    """Using AdmissionFairSharing at Cohort level (test/integration/singlecluster/scheduler/fairsharing/
    fair_sharing_test.go): should preempt a workload from LQ with higher recent usage, despite its higher priority.
    The LocalQueues' sampled usage is given as their status would show it; upstream's suite runs Fair Sharing, and
    classic preemption orders its candidates the same way."""
    cq1 = cluster_queue("cq1", "all", group(default=[res(CPU, "16")]), within=NEVER)
    cq1["spec"]["queueingStrategy"] = "StrictFIFO"
    cq1["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    cq2 = cluster_queue("cq2", "all", group(default=[res(CPU, "16")]), within=LP, reclaim=ANY)

    def lq(name: str, cq_name: str, consumed: str | None) -> dict:
        obj: dict = {
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterQueue": cq_name, "fairSharing": {"weight": "1"}},
        }
        if consumed:
            obj["status"] = {"fairSharing": {"admissionFairSharingStatus": {"consumedResources": {CPU: consumed}}}}
        return obj

    def in_queue(name: str, queue: str, cpu: str, priority: int, admitted_in: str | None = None) -> dict:
        obj = workload(name, priority, {CPU: cpu}, admitted_in)
        obj["metadata"]["namespace"] = "ns"
        obj["spec"]["queueName"] = queue
        return obj

    admitted = [in_queue("high-a", "lq-a", "20", 10, "cq1"), in_queue("low-b", "lq-b", "12", 1, "cq1")]
    for fair_sharing in (True, False):
        config = KueueConfig.from_dict(
            {"admissionFairSharing": {"usageHalfLifeTime": "2s", "usageSamplingInterval": "1s"}}
        )
        config.fair_sharing = fair_sharing
        snap = Snapshot.from_objects(
            resource_flavors=[{"metadata": {"name": "default"}, "spec": {}}],
            cluster_queues=[cq1, cq2],
            local_queues=[lq("lq-a", "cq1", "20"), lq("lq-b", "cq1", "12"), lq("lq-c", "cq2", None)],
            workloads=[*admitted, in_queue("reclaimer", "lq-c", "10", 0)],
            config=config,
            now=T0,
        )
        result = Scheduler().cycle(snap, T0)
        assert [(p.victim.name, p.reason) for p in result.preempted] == [("high-a", RECLAIM)], fair_sharing


# -- Fair Sharing integration scenarios (test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go) --


def _running_per_queue(sim: Sim) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in sim.running():
        cq_name = sim.cq_of(name) or ""
        counts[cq_name] = counts.get(cq_name, 0) + 1
    return counts


def _weighted_share(sim: Sim, name: str) -> int:
    snap = sim.snapshot()
    node = snap.cluster_queues.get(name) or snap.cohorts[name]
    return dominant_resource_share(node).weighted_share()


def test_fair_integration_admits_workloads_respecting_fair_share() -> None:
    """Preemption is enabled: Admits workloads respecting fair share (cq-b reclaims four units from cq-a, cq-c one
    more; cq-a's weighted share is then 112)."""
    sim = _sim(*(sim_cq(n, 3, cohort="all", within=LP, reclaim=ANY) for n in "abc"), fair=True)
    for i in range(10):
        sim.add(f"a{i}", "a", 1)
    sim.settle()
    for i in range(5):
        sim.add(f"b{i}", "b", 1)
    sim.settle()
    assert _running_per_queue(sim) == {"a": 5, "b": 4}
    sim.add("c0", "c", 1)
    sim.settle()
    assert _running_per_queue(sim) == {"a": 4, "b": 4, "c": 1}
    assert _weighted_share(sim, "a") == 112


def test_fair_integration_zero_weights_do_not_cause_an_infinite_preemption_cycle() -> None:
    """Preemption is enabled and CQs have 0 weight: should not cause an infinite preemption cycle."""
    cohorts = [sim_cohort("top-cohort", None, 8)]
    sim = _sim(
        sim_cq("best-effort-cq-a", 0, cohort="top-cohort", reclaim=ANY, weight="0"),
        sim_cq("best-effort-cq-b", 0, cohort="top-cohort", reclaim=ANY, weight="0"),
        cohorts=cohorts,
        fair=True,
    )
    sim.add("wl-a1", "best-effort-cq-a", 4, priority=9001)
    sim.add("wl-a2", "best-effort-cq-a", 4, priority=100)
    sim.settle()
    sim.add("wl-b1", "best-effort-cq-b", 4, priority=100)
    sim.settle()
    assert sim.running() == {"wl-a1", "wl-b1"}
    assert [p.victim.name for p in sim.preemptions] == ["wl-a2"]


def test_fair_integration_hierarchical_cohorts_preempt_to_enforce_fair_share() -> None:
    """using hierarchical cohorts: preempts workloads to enforce fair share (weights best-effort 0.5, llm 2)."""
    cohorts = [
        sim_cohort("root", None, 12),
        sim_cohort("research", "root"),
        sim_cohort("chemistry", "research"),
        sim_cohort("physics", "research"),
        sim_cohort("llm", "research", weight="2.0"),
        sim_cohort("best-effort", "root", weight="0.5"),
    ]
    queues = [
        sim_cq("chemistry-queue", 0, cohort="chemistry", reclaim=LP),
        sim_cq("physics-queue", 0, cohort="physics", reclaim=LP),
        sim_cq("llm-queue", 0, cohort="llm", reclaim=LP),
        sim_cq("best-effort-queue", 0, cohort="best-effort"),
    ]
    sim = _sim(*queues, cohorts=cohorts, fair=True)
    for i in range(6):
        sim.add(f"best-effort-low-{i}", "best-effort-queue", 1, priority=-1)
        sim.add(f"physics-low-{i}", "physics-queue", 1, priority=-1)
    sim.settle()
    assert _weighted_share(sim, "best-effort") == 1000 and _weighted_share(sim, "physics") == 500
    for i in range(6):
        for q in queues:
            sim.add(f"{q['metadata']['name']}-high-{i}", q["metadata"]["name"], 1, priority=100)
    sim.settle()
    assert _running_per_queue(sim) == {
        "best-effort-queue": 4,
        "physics-queue": 2,
        "chemistry-queue": 2,
        "llm-queue": 4,
    }
    shares = {n: _weighted_share(sim, n) for n in ("best-effort", "research", "chemistry", "physics", "llm")}
    assert shares == {
        "best-effort": math.ceil(4 * 1000 / 12 / 0.5),
        "research": math.ceil(8 * 1000 / 12),
        "chemistry": math.ceil(2 * 1000 / 12),
        "physics": math.ceil(2 * 1000 / 12),
        "llm": math.ceil(4 * 1000 / 12 / 2),
    }


def _dominant_share_head_sim() -> Sim:
    """ClusterQueue head is ineligible for admission due to DominantResourceShare (kueue#7101)."""
    fungibility = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    queues = [sim_cq(n, 0, cohort="cohort-a", within=LP, reclaim=ANY, weight="1") for n in ("cq-p1", "cq-p2")]
    for q in queues:
        q["spec"]["flavorFungibility"] = fungibility
    cohorts = [sim_cohort("root-cohort"), sim_cohort("cohort-a", "root-cohort", 9, weight="1")]
    sim = _sim(*queues, cohorts=cohorts, fair=True)
    for i in range(4):
        sim.add(f"p1-{i}", "cq-p1", 2)
    sim.settle()
    assert _running_per_queue(sim) == {"cq-p1": 4}
    return sim


@pytest.mark.parametrize(
    "blocking, admissible",
    [((), 5), ((6,), 5), ((6,), 4), ((7, 6), 5)],
    ids=[
        "workload of size 5 preempts using LessThanInitialShare policy and admits",
        "workload of size 5 admits with inadmissible higher priority workload at ClusterQueue head",
        "workload of size 4 admits with inadmissible higher priority workload at ClusterQueue head",
        "workload admits when several higher priority blocking workloads in front",
    ],
)
def test_fair_integration_admits_behind_an_ineligible_head(blocking: tuple[int, ...], admissible: int) -> None:
    sim = _dominant_share_head_sim()
    for i, size in enumerate(blocking):
        sim.add(f"blocking-{i}", "cq-p2", size, priority=999)
        sim.settle()
        assert _running_per_queue(sim) == {"cq-p1": 4}
    sim.add("admissible", "cq-p2", admissible)
    sim.settle()
    assert _running_per_queue(sim) == {"cq-p1": 2, "cq-p2": 1} and sim.admitted("admissible")
    assert _weighted_share(sim, "cq-p1") == math.ceil(4 * 1000 / 9)
    assert _weighted_share(sim, "cq-p2") == math.ceil(admissible * 1000 / 9)


def test_fair_integration_workload_behind_an_inadmissible_head_admits() -> None:
    """ClusterQueue head has inadmissible workload (kueue#6929): workload which fits behind ClusterQueue head is able
    to admit (it reclaims cohort-a's quota from cq2's borrowers)."""
    fungibility = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    queues = [
        sim_cq("cq1", 0, cohort="cohort-a", within=LP, reclaim=ANY, weight="1"),
        sim_cq("cq2", 0, cohort="root", within=LP, reclaim=ANY, weight="1"),
    ]
    for q in queues:
        q["spec"]["flavorFungibility"] = fungibility
    sim = _sim(*queues, cohorts=[sim_cohort("cohort-a", "root", 3, weight="1")], fair=True)
    sim.add("cq2-1", "cq2", 1)
    sim.add("cq2-2", "cq2", 1)
    sim.settle()
    sim.add("inadmissible", "cq1", 4, priority=999)
    sim.settle()
    assert _running_per_queue(sim) == {"cq2": 2}
    sim.add("admissible", "cq1", 3)
    sim.settle()
    assert _running_per_queue(sim) == {"cq1": 1} and sim.admitted("admissible")
    assert _weighted_share(sim, "cq1") == 1000 and _weighted_share(sim, "cq2") == 0


def test_fair_integration_queue_can_reclaim_its_nominal_quota() -> None:
    """Preemption is enabled in fairsharing and there are large values of quota and weights: Queue can reclaim its
    nominal quota."""
    sim = _sim(*(sim_cq(n, 600, cohort="all", within=LP, reclaim=ANY, weight="300") for n in "ab"), fair=True)
    for i in range(10):
        sim.add(f"a{i}", "a", 100)
    sim.settle()
    assert _running_per_queue(sim) == {"a": 10}
    sim.add("b0", "b", 500)
    sim.settle()
    assert _running_per_queue(sim) == {"a": 7, "b": 1}


def test_fair_integration_guaranteed_workload_preempts_a_single_best_effort_workload() -> None:
    """Preemption is enabled in fairsharing and there are best effort and guaranteed workloads: Guaranteed workloads
    cause preemption of a single best effort workload (the lower-priority one, the queues' shares being equal)."""
    sim = _sim(
        sim_cq("best-effort-a", 0, cohort="all"),
        sim_cq("best-effort-b", 0, cohort="all"),
        sim_cq("guaranteed", 8, cohort="all", reclaim=ANY),
        fair=True,
    )
    sim.add("best-effort-a-wl", "best-effort-a", 4, priority=2)
    sim.settle()
    sim.add("best-effort-b-wl", "best-effort-b", 4, priority=1)
    sim.settle()
    assert sim.running() == {"best-effort-a-wl", "best-effort-b-wl"}
    sim.add("guaranteed-wl", "guaranteed", 4)
    sim.settle()
    assert sim.running() == {"best-effort-a-wl", "guaranteed-wl"}
    assert _victims(sim) == {("best-effort-b-wl", RECLAIM)}


# -- TestPreemptionMessage (preemption_test.go) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "uid, job_uid, reason, paths_given, want",
    [
        (
            "",
            "",
            "",
            ("", ""),
            "(UID: UNKNOWN, JobUID: UNKNOWN) due to UNKNOWN; preemptor path: UNKNOWN; preemptee path: UNKNOWN",
        ),
        (
            "uid",
            "",
            "",
            ("", ""),
            "(UID: uid, JobUID: UNKNOWN) due to UNKNOWN; preemptor path: UNKNOWN; preemptee path: UNKNOWN",
        ),
        (
            "uid",
            "juid",
            "",
            ("", ""),
            "(UID: uid, JobUID: juid) due to UNKNOWN; preemptor path: UNKNOWN; preemptee path: UNKNOWN",
        ),
        (
            "uid",
            "juid",
            ICQ,
            ("/a", "/b"),
            "(UID: uid, JobUID: juid) due to prioritization in the ClusterQueue; "
            "preemptor path: /a; preemptee path: /b",
        ),
    ],
)
def test_preemption_message(uid: str, job_uid: str, reason: str, paths_given: tuple[str, str], want: str) -> None:
    obj = workload("preemptor")
    obj["metadata"]["uid"] = uid
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": job_uid} if job_uid else {}
    preemptor = workload_info(obj, KueueConfig())
    got = preemption_message(preemptor, reason, *paths_given)
    assert got == "Preempted to accommodate a workload " + want
