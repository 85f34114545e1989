"""RecomputeAssignmentUponPreemptionTargetsOverlap (beta, on by default since Kueue 0.20) cases ported from Kueue's
own tests, run through kubesim's real scheduling cycle on plain data. Each test id names its upstream case.

An entry whose nominated preemption targets include a workload an earlier entry of the same cycle already chose to
preempt no longer just waits ("Workload has overlapping preemption targets with another workload", v0.19). Its
flavor assignment is searched again on the snapshot as it will be once this cycle's victims are gone (their
preemptors' usage still charged), keeping to the flavors it was nominated with; then it waits for those preemptions
when it fits ("... but will fit after these preemptions complete", WaitingForPreemptedWorkloads), preempts its new
targets, or is requeued as the new search says.

Sources:
- pkg/scheduler/scheduler_recompute_preemption_test.go, TestScheduleRecomputePreemptionTargets: every case but
  "legacy overlap skip with RecomputePreemptionTargetsUponOverlap disabled" (the gate off: kubesim has no feature
  gates and always behaves as v0.20's default). The two "flavor stickiness" variants that differ only in TAS gates
  expect the same outcome and are run as such (kubesim has no TAS).
- pkg/scheduler/flavorassigner/flavorassigner_test.go, TestRecomputeRecordsLastTriedFlavorIdx: where the search made
  again with the nominated flavors pinned leaves its flavor bookmark (quota only; the upstream case reaches the
  search through TAS, which kubesim does not model).
- test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go, "RecomputeAssignmentUponPreemption-
  TargetsOverlap with multiple flavors", and test/integration/singlecluster/scheduler/preemption_test.go, "Should
  preempt all necessary workloads in concurrent scheduling with the same priority
  (RecomputeAssignmentUponPreemptionTargetsOverlap=true)", replayed through `sim.py`.
- pkg/scheduler/scheduler_test.go, TestFitsDedupsOverlappingVictims, is in test_upstream_admission.py.
- TestScheduleForFairSharing's "multiple preemptions skip overlapping preemption targets" runs upstream with the gate
  off; its v0.20 outcome is asserted in test_upstream_cases.py.
- The TAS case of TestScheduleForTASPreemption is not ported (no TAS in kubesim).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from kubesim.kernel.quantity import format_amount, to_amount
from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler import Scheduler, Snapshot
from kubesim.kueue.scheduler.flavors import FIT, PREEMPT, FlavorAssigner
from kubesim.kueue.scheduler.preemption import Preemptor
from kubesim.kueue.scheduler.quota import add_usage
from tests.kubesim.kueue.sim import GPU, T0, Sim, local_queue
from tests.kubesim.kueue.sim import cluster_queue as sim_cq
from tests.kubesim.kueue.test_upstream_admission import cohort, cq, flavor, fq, lq, res, rg

CPU = "cpu"
MAIN = "main"
RECLAIM_ANY = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
DEFERRED = "Workload has overlapping preemption targets with another workload, but will fit after these preemptions "
DEFERRED += "complete"
WAITING_PREEMPTED, WAITING_QUOTA = C.REASON_WAITING_FOR_PREEMPTED, C.REASON_WAITING_FOR_QUOTA


def workload(
    name: str,
    namespace: str,
    queue: str,
    cpu: str,
    *,
    uid: str = "",
    job_uid: str = "",
    priority: int | None = None,
    created: int = 0,
    admitted: tuple[str, str] | None = None,
) -> dict:
    """MakeWorkload with one 'main' PodSet of one pod requesting cpu; admitted=(cluster queue, flavor) reserves
    its quota (ReserveQuotaAt ... AdmittedAt)."""
    metadata: dict = {
        "name": name,
        "namespace": namespace,
        "uid": uid or name,
        "creationTimestamp": ws.ts(T0 + timedelta(seconds=created)),
    }
    if job_uid:
        metadata["labels"] = {C.JOB_UID_LABEL: job_uid}
    spec: dict = {
        "queueName": queue,
        "podSets": [
            {"name": MAIN, "count": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {
                "requests": {CPU: cpu}}}]}}}
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    obj: dict = {"metadata": metadata, "spec": spec, "status": {}}
    if admitted is not None:
        cq_name, flavor_name = admitted
        usage = {CPU: format_amount(CPU, to_amount(CPU, cpu))}
        ws.set_quota_reservation(obj, cq_name, [{"name": MAIN, "flavors": {CPU: flavor_name}, "resourceUsage": usage,
                                                 "count": 1}], T0)
    return obj


def preempted_by(uid: str, job_uid: str, why: str, preemptor_path: str, preemptee_path: str) -> str:
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to {why}; preemptor path: "
        f"{preemptor_path}; preemptee path: {preemptee_path}"
    )


def unused(flavor_name: str, more: str) -> str:
    return f"insufficient unused quota for cpu in flavor {flavor_name}, {more} more needed"


def couldnt(*reasons: str) -> str:
    return f"couldn't assign flavors to pod set {MAIN}: " + ", ".join(reasons)


# -- TestScheduleRecomputePreemptionTargets' fixture ----------------------------------------------------------------

FLAVORS = [flavor("default"), flavor("on-demand")]

#                     root-cohort (nominal: 3005)
#                   /              |              \
#         parent-cohort-a   parent-cohort-b   parent-cohort-c
#            (nominal: 0)
#            /        \            |                 |
#         cq-hero   cq-noisy    cq-tiny           cq-rest
#       (nom: 3000) (nom: 0)   (nom: 50)         (nom: 0)
DEFAULT_COHORTS = [
    cohort("root-cohort", rg(fq("default", res(CPU, "3005")))),
    cohort("parent-cohort-a", rg(fq("default", res(CPU, "0"))), parent="root-cohort"),
    cohort("parent-cohort-b", parent="root-cohort"),
    cohort("parent-cohort-c", parent="root-cohort"),
]
CLUSTER_QUEUES = [
    cq("cq-hero", rg(fq("default", res(CPU, "3000"))), cohort="parent-cohort-a", preemption=RECLAIM_ANY),
    cq("cq-noisy", rg(fq("default", res(CPU, "0"))), cohort="parent-cohort-a", preemption=RECLAIM_ANY),
    cq("cq-tiny", rg(fq("default", res(CPU, "50"))), cohort="parent-cohort-b", preemption=RECLAIM_ANY),
    cq("cq-rest", rg(fq("default", res(CPU, "0"))), cohort="parent-cohort-c", preemption=RECLAIM_ANY),
]
LOCAL_QUEUES = [lq(f"lq-{n}", "eng-alpha", f"cq-{n}") for n in ("hero", "noisy", "tiny", "rest")]

HERO = "/root-cohort/parent-cohort-a/cq-hero"
NOISY = "/root-cohort/parent-cohort-a/cq-noisy"
TINY = "/root-cohort/parent-cohort-b/cq-tiny"
REST = "/root-cohort/parent-cohort-c/cq-rest"


@dataclass
class Case:
    """One upstream case and the outcome of one cycle: preempted {victim: (reason, message)}; pending
    {workload: (QuotaReserved reason, message)}; left / inadmissible: pending workloads per ClusterQueue after the
    cycle (in the heap / set aside); recomputations: the upstream case's preemption_target_recomputations_total
    counters {cluster queue: {result: count}} (only the ClusterQueues it names are compared)."""

    workloads: list[dict]
    fair_sharing: bool = False
    cohorts: list[dict] = field(default_factory=lambda: DEFAULT_COHORTS)
    cluster_queues: list[dict] = field(default_factory=list)
    local_queues: list[dict] = field(default_factory=list)
    preempted: dict[str, tuple[str, str]] = field(default_factory=dict)
    pending: dict[str, tuple[str, str]] = field(default_factory=dict)
    left: dict[str, list[str]] = field(default_factory=dict)
    inadmissible: dict[str, list[str]] = field(default_factory=dict)
    recomputations: dict[str, dict[str, int]] = field(default_factory=dict)


def run_case(case: Case) -> None:
    snap = Snapshot.from_objects(
        resource_flavors=FLAVORS,
        cohorts=case.cohorts,
        cluster_queues=CLUSTER_QUEUES + case.cluster_queues,
        local_queues=LOCAL_QUEUES + case.local_queues,
        workloads=case.workloads,
        namespaces=[{"metadata": {"name": n}} for n in ("default", "eng-alpha")],
        config=KueueConfig(fair_sharing=case.fair_sharing),
        now=T0,
    )
    scheduler = Scheduler()
    result = scheduler.cycle(snap, T0)
    assert not result.admitted
    assert {p.victim.key: (p.reason, p.message) for p in result.preempted} == case.preempted
    assert {p.workload.key: (p.reason, p.message) for p in result.pending} == case.pending
    left: dict[str, list[str]] = {}
    aside: dict[str, list[str]] = {}
    for name, pending in snap.pending.items():
        for w in pending:
            target = aside if w.key in scheduler.queues.inadmissible.get(name, set()) else left
            target.setdefault(name, []).append(w.key)
    assert left == case.left
    assert aside == case.inadmissible
    counts: dict[str, dict[str, int]] = {}
    for cq_name, outcome in result.recomputations:
        if cq_name in case.recomputations:
            counts.setdefault(cq_name, {}).setdefault(outcome, 0)
            counts[cq_name][outcome] += 1
    assert counts == case.recomputations


def stickiness_case(recomputations: dict[str, dict[str, int]]) -> Case:
    """cq-1 (priority 11) and cq-2 (priority 10) both target wl-admitted-default on the default flavor; cq-2 goes
    first under Fair Sharing (cq-1 uses 20 CPU). cq-1's head searches again, pinned to default, finds nothing to
    preempt there and does not switch to on-demand."""
    two_flavors = rg(fq("default", res(CPU, "5")), fq("on-demand", res(CPU, "5")))
    return Case(
        fair_sharing=True,
        cohorts=[cohort("root")],
        cluster_queues=[cq(n, two_flavors, cohort="root", preemption=RECLAIM_ANY) for n in ("cq-1", "cq-2")],
        local_queues=[lq("lq-1", "default", "cq-1"), lq("lq-2", "default", "cq-2")],
        workloads=[
            workload("wl-admitted-default", "default", "lq-1", "10", uid="wl-admitted-default-uid",
                     admitted=("cq-1", "default")),
            workload("wl-admitted-on-demand", "default", "lq-1", "10", uid="wl-admitted-on-demand-uid",
                     admitted=("cq-1", "on-demand")),
            workload("wl-pending-high-prio-1", "default", "lq-1", "10", uid="wl-pending-high-prio-1-uid",
                     job_uid="job-high-prio-1-uid", priority=11),
            workload("wl-pending-high-prio-2", "default", "lq-2", "10", uid="wl-pending-high-prio-2-uid",
                     job_uid="job-high-prio-2-uid", priority=10, created=1),
        ],
        preempted={
            "default/wl-admitted-default": (
                "InCohortFairSharing",
                preempted_by("wl-pending-high-prio-2-uid", "job-high-prio-2-uid", "Fair Sharing within the cohort",
                             "/root/cq-2", "/root/cq-1"),
            ),
        },
        pending={
            "default/wl-pending-high-prio-1": (
                WAITING_QUOTA,
                couldnt(unused("default", "10"),
                        "skipping flavor on-demand as it is not found in the nomination mapping for resource cpu"),
            ),
            "default/wl-pending-high-prio-2": (
                WAITING_PREEMPTED,
                couldnt(unused("default", "10"), unused("on-demand", "10"))
                + ". Pending the preemption of 1 workload(s)",
            ),
        },
        left={"cq-2": ["default/wl-pending-high-prio-2"]},
        inadmissible={"cq-1": ["default/wl-pending-high-prio-1"]},
        recomputations=recomputations,
    )


def two_reclaim_case(fair_sharing: bool) -> Case:
    """wl-tiny-pending (first: older) and wl-hero both reclaim from wl-rest-admitted. wl-hero, searching again
    without it and with wl-tiny-pending's 50 charged, fits: it waits for that preemption. With Fair Sharing,
    wl-rest-pending (cq-rest) also wanted wl-rest-admitted; searched again it finds no candidate (945 more
    needed) and is set aside."""
    workloads = [
        workload("wl-rest-admitted", "eng-alpha", "lq-rest", "6055", priority=0 if fair_sharing else None,
                 admitted=("cq-rest", "default")),
        workload("wl-hero", "eng-alpha", "lq-hero", "2950", job_uid="job-h-uid", created=1),
        workload("wl-tiny-pending", "eng-alpha", "lq-tiny", "50", job_uid="job-t-uid"),
    ]
    pending = {
        "eng-alpha/wl-hero": (WAITING_PREEMPTED, DEFERRED),
        "eng-alpha/wl-tiny-pending": (
            WAITING_PREEMPTED,
            couldnt(unused("default", "50")) + ". Pending the preemption of 1 workload(s)",
        ),
    }
    inadmissible = {}
    if fair_sharing:
        workloads.append(workload("wl-rest-pending", "eng-alpha", "lq-rest", "4000", priority=10, created=2))
        pending["eng-alpha/wl-rest-pending"] = (WAITING_QUOTA, couldnt(unused("default", "945")))
        inadmissible = {"cq-rest": ["eng-alpha/wl-rest-pending"]}
    return Case(
        fair_sharing=fair_sharing,
        workloads=workloads,
        preempted={
            "eng-alpha/wl-rest-admitted": (
                "InCohortReclamation",
                preempted_by("wl-tiny-pending", "job-t-uid", "reclamation within the cohort", TINY, REST),
            ),
        },
        pending=pending,
        left={"cq-hero": ["eng-alpha/wl-hero"], "cq-tiny": ["eng-alpha/wl-tiny-pending"]},
        inadmissible=inadmissible,
        recomputations={"cq-hero": {"deferred_fit": 1}},
    )


RECOMPUTE_CASES: dict[str, Case] = {
    # wl-tiny-pending goes first (Fair Sharing) and takes wl-rest-admitted; wl-hero had chosen it too, searches
    # again and finds wl-noisy-admitted (borrowing cq-hero's nominal quota) to preempt in the same cycle.
    "with fair sharing: hierarchical nominal-first prefers non-borrowing leaf CQ": Case(
        fair_sharing=True,
        workloads=[
            workload("wl-noisy-admitted", "eng-alpha", "lq-noisy", "3000", admitted=("cq-noisy", "default")),
            workload("wl-tiny-admitted", "eng-alpha", "lq-tiny", "60", admitted=("cq-tiny", "default")),
            workload("wl-rest-admitted", "eng-alpha", "lq-rest", "2995", admitted=("cq-rest", "default")),
            workload("wl-hero", "eng-alpha", "lq-hero", "2990", job_uid="job-h-uid", created=1),
            workload("wl-tiny-pending", "eng-alpha", "lq-tiny", "10", job_uid="job-t-uid"),
        ],
        preempted={
            "eng-alpha/wl-noisy-admitted": (
                "InCohortReclamation",
                preempted_by("wl-hero", "job-h-uid", "reclamation within the cohort", HERO, NOISY),
            ),
            "eng-alpha/wl-rest-admitted": (
                "InCohortFairSharing",
                preempted_by("wl-tiny-pending", "job-t-uid", "Fair Sharing within the cohort", TINY, REST),
            ),
        },
        pending={
            "eng-alpha/wl-hero": (
                WAITING_PREEMPTED,
                couldnt(unused("default", "5")) + ". Pending the preemption of 1 workload(s)",
            ),
            "eng-alpha/wl-tiny-pending": (
                WAITING_PREEMPTED,
                couldnt(unused("default", "10")) + ". Pending the preemption of 1 workload(s)",
            ),
        },
        left={"cq-hero": ["eng-alpha/wl-hero"], "cq-tiny": ["eng-alpha/wl-tiny-pending"]},
        recomputations={"cq-hero": {"new_targets": 1}},
    ),
    "with fair sharing: two workloads reclaim nominal quota; RecomputePreemptionTargetsUponOverlap enabled": (
        two_reclaim_case(fair_sharing=True)
    ),
    "two workloads reclaim nominal quota; RecomputePreemptionTargetsUponOverlap enabled": two_reclaim_case(False),
    "flavor stickiness with RecomputePreemptionTargetsUponOverlap": stickiness_case({"cq-1": {"skipped": 1}}),
    "flavor stickiness with RecomputePreemptionTargetsUponOverlap and TAS disabled": stickiness_case({}),
    "flavor stickiness with RecomputePreemptionTargetsUponOverlap and TAS recomputation disabled": stickiness_case({}),
}


@pytest.mark.parametrize("name", list(RECOMPUTE_CASES), ids=list(RECOMPUTE_CASES))
def test_schedule_recompute_preemption_targets(name: str) -> None:
    run_case(RECOMPUTE_CASES[name])


# -- flavorassigner_test.go: TestRecomputeRecordsLastTriedFlavorIdx (quota part) ------------------------------------


@pytest.mark.parametrize(
    ("tightened", "want_mode", "want_tried"),
    [
        # The search stops on the nominated flavor, and the bookmark names it.
        pytest.param(False, FIT, 0, id="quota still accepts the nominated flavor: bookmark keeps naming it"),
        # The nominated flavor has no room and no candidates, so the search walks on; flavor-2 is passed over (not
        # nominated), and having reached the last flavor the bookmark says start over.
        pytest.param(True, PREEMPT, -1, id="quota tightened as well: bookmark says start over"),
    ],
)
def test_recompute_records_last_tried_flavor_idx(tightened: bool, want_mode: int, want_tried: int) -> None:
    try_next = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing"}
    queues = [
        cq("cq", rg(fq("flavor-1", res(CPU, "10")), fq("flavor-2", res(CPU, "10"))), cohort="cohort",
           fungibility=try_next),
        cq("sibling", rg(fq("flavor-1", res(CPU, "0")), fq("flavor-2", res(CPU, "0"))), cohort="cohort"),
    ]
    snap = Snapshot.from_objects(
        resource_flavors=[flavor("flavor-1"), flavor("flavor-2")],
        cluster_queues=queues,
        local_queues=[lq("lq", "default", "cq")],
        workloads=[workload("wl", "default", "lq", "3")],
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    node, wl = snap.cluster_queues["cq"], snap.workloads["default/wl"]
    oracle = Preemptor(snap, T0).simulate
    nominated = FlavorAssigner(wl, node, snap, oracle).assign()
    assert nominated.mode() == FIT and nominated.last_tried() == [{CPU: 0}]
    if tightened:
        for f in ("flavor-1", "flavor-2"):
            add_usage(node, (f, CPU), 10_000)
    recomputed = FlavorAssigner(wl, node, snap, oracle, pinned=nominated.flavor_names()).assign()
    assert recomputed.mode() == want_mode
    assert recomputed.last_tried() == [{CPU: want_tried}]


# -- integration scenarios, replayed through sim.py --------------------------------------------------------------


def two_flavor_queue(name: str, nominal: int) -> dict:
    """A ClusterQueue of cohort-a with nominal GPUs on flavor1 and on flavor2 (the integration's cpu as GPUs)."""
    quotas = [{"name": f, "resources": [{"name": GPU, "nominalQuota": str(nominal)}]} for f in ("flavor1", "flavor2")]
    return sim_cq(name, cohort="cohort-a", within="LowerPriority", reclaim="Any",
                  groups=[{"coveredResources": [GPU], "flavors": quotas}])


def test_fair_integration_hero_workload_sticks_to_preferred_flavor_if_overlap_resolved() -> None:
    """fair_sharing_test.go, RecomputeAssignmentUponPreemptionTargetsOverlap with multiple flavors: hero workload
    sticks to preferred flavor if overlap resolved. wlA (flavor1) and wlB (flavor2) fill the cohort from cq-rest;
    hero and tiny both choose wlA; hero preempts it, tiny (searched again on flavor1 only) fits once wlA is gone and
    waits; both are then admitted on flavor1 and wlB is never preempted."""
    sim = Sim(KueueConfig(fair_sharing=True))
    sim.flavors = [{"metadata": {"name": f}, "spec": {}} for f in ("flavor1", "flavor2")]
    sim.cohorts = [{"metadata": {"name": "cohort-a"}, "spec": {}}]
    sim.cqs = [two_flavor_queue("cq-hero", 100), two_flavor_queue("cq-tiny", 50), two_flavor_queue("cq-rest", 0)]
    sim.lqs = [local_queue(n, n) for n in ("cq-hero", "cq-tiny", "cq-rest")]
    sim.add("wlA", "cq-rest", 150, priority=10)
    sim.settle()
    sim.add("wlB", "cq-rest", 150, priority=10)
    sim.settle()
    assert sim.running() == {"wlA", "wlB"}
    assert [p["flavors"][GPU] for n in ("wlA", "wlB")
            for p in sim.workloads[n]["status"]["admission"]["podSetAssignments"]] == ["flavor1", "flavor2"]
    sim.add("wlHero", "cq-hero", 100, priority=100)
    sim.add("wlTiny", "cq-tiny", 50, priority=50)

    probe = Scheduler(sim.config)
    first = probe.cycle(sim.snapshot(), sim.now)  # one cycle, on a copy of the state
    assert [(p.victim.name, p.preemptor.name) for p in first.preempted] == [("wlA", "wlHero")]
    assert {p.workload.name: (p.reason, p.message) for p in first.pending}["wlTiny"] == (WAITING_PREEMPTED, DEFERRED)
    assert first.recomputations == [("cq-tiny", "deferred_fit")]
    # It waits as a preemptor does: kept at its queue's head, its flavor search to start over next time.
    assert probe.queues.sticky == {"cq-hero": "default/wlHero", "cq-tiny": "default/wlTiny"}
    assert "default/wlTiny" not in probe.queues.progress

    sim.settle()
    assert sim.running() == {"wlB", "wlHero", "wlTiny"}
    assert {n: sim.workloads[n]["status"]["admission"]["podSetAssignments"][0]["flavors"][GPU]
            for n in ("wlHero", "wlTiny")} == {"wlHero": "flavor1", "wlTiny": "flavor1"}
    assert [p.victim.name for p in sim.preemptions] == ["wlA"]
    assert sim.condition("wlB", C.PREEMPTED) is None


def test_integration_cohort_concurrent_preemptors_with_the_same_priority_recompute_on() -> None:
    """preemption_test.go, In a ClusterQueue that is part of a cohort: Should preempt all necessary workloads in
    concurrent scheduling with the same priority (RecomputeAssignmentUponPreemptionTargetsOverlap=true). alpha and
    gamma both first choose the same beta workload; gamma searches again and takes another, so two are evicted in
    the first cycle; afterwards alpha, gamma and one beta workload run."""
    sim = Sim(KueueConfig(fair_sharing=False))
    sim.cqs = [
        sim_cq("alpha-cq", 2, cohort="all", within="LowerPriority", reclaim="Any"),
        sim_cq("beta-cq", 2, cohort="all"),
        sim_cq("gamma-cq", 2, cohort="all", within="LowerPriority", reclaim="Any"),
    ]
    sim.lqs = [local_queue(n, n) for n in ("alpha-cq", "beta-cq", "gamma-cq")]
    for i in range(3):
        sim.add(f"beta-{i}", "beta-cq", 2)
    sim.settle()
    assert sim.running() == {"beta-0", "beta-1", "beta-2"}
    sim.add("alpha", "alpha-cq", 2)
    sim.add("gamma", "gamma-cq", 2)

    first = Scheduler(sim.config).cycle(sim.snapshot(), sim.now)  # one cycle, on a copy of the state
    assert len({p.victim.name for p in first.preempted}) == 2
    assert {p.preemptor.name for p in first.preempted} == {"alpha", "gamma"}
    assert [outcome for _, outcome in first.recomputations] == ["new_targets"]

    sim.settle()
    running = sim.running()
    assert {"alpha", "gamma"} <= running and len(running - {"alpha", "gamma"}) == 1
    assert len(sim.preemptions) == 2

