"""Cases ported from Kueue's own preemption tests (pkg/scheduler/preemption/preemption_fair_test.go), run through
a full scheduling cycle on plain data: same trees, same admitted workloads, same expected victims and reasons."""

from __future__ import annotations

from kubesim.kueue import workload_status as ws
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler import Scheduler, Snapshot
from tests.kubesim.kueue.sim import T0

CPU = "cpu"


def rg(nominal: int | None, lending: int | None = None) -> list[dict]:
    if nominal is None:
        return []
    r = {"name": CPU, "nominalQuota": str(nominal)}
    if lending is not None:
        r["lendingLimit"] = str(lending)
    return [{"coveredResources": [CPU], "flavors": [{"name": "default", "resources": [r]}]}]


def cq(
    name: str,
    cohort: str,
    nominal: int | None,
    weight: str | None = None,
    reclaim: str = "Never",
    within: str = "Never",
    lending: int | None = None,
) -> dict:
    spec: dict = {
        "cohortName": cohort,
        "namespaceSelector": {},
        "resourceGroups": rg(nominal, lending),
        "preemption": {"reclaimWithinCohort": reclaim, "withinClusterQueue": within},
    }
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"metadata": {"name": name}, "spec": spec}


def cohort(name: str, parent: str | None = None, nominal: int | None = None, weight: str | None = None) -> dict:
    spec: dict = {"resourceGroups": rg(nominal)}
    if parent:
        spec["parentName"] = parent
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"metadata": {"name": name}, "spec": spec}


def workload(name: str, cpu: int, priority: int = 0, admitted_in: str | None = None) -> dict:
    obj = {
        "metadata": {"name": name, "namespace": "", "uid": f"uid-{name}", "creationTimestamp": ws.ts(T0)},
        "spec": {
            "queueName": "incoming",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {CPU: str(cpu)}}}]}},
                }
            ],
        },
        "status": {},
    }
    if admitted_in:
        psa = [{"name": "main", "flavors": {CPU: "default"}, "resourceUsage": {CPU: str(cpu)}, "count": 1}]
        ws.set_quota_reservation(obj, admitted_in, psa, T0)
    return obj


def victims(
    cqs: list[dict], cohorts: list[dict], admitted: list[dict], incoming: dict, target: str, fair: bool = True
) -> set:
    lq = {"metadata": {"name": "incoming", "namespace": ""}, "spec": {"clusterQueue": target}}
    snap = Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": "default"}, "spec": {}}],
        cohorts=cohorts,
        cluster_queues=cqs,
        local_queues=[lq],
        workloads=[*admitted, incoming],
        config=KueueConfig(fair_sharing=fair),
        now=T0,
    )
    result = Scheduler().cycle(snap, T0)
    return {
        (p.victim.name, p.reason, p.message.split("; ", 1)[1]) if not fair else (p.victim.name, p.reason)
        for p in result.preempted
    }


def test_hierarchical_preemption():
    cqs = [
        cq("a", "LEFT", 1, weight="2", reclaim="Any"),
        cq("b", "LEFT", 1),
        cq("c", "ROOT", 1),
        cq("d", "RIGHT", 1),
        cq("e", "RIGHT", 1, weight="0.99"),
    ]
    cohorts = [cohort("ROOT", nominal=5), cohort("LEFT", "ROOT", 5, weight="2"), cohort("RIGHT", "ROOT", 5)]
    admitted = [workload(f"{q}{i}", 1, priority=i, admitted_in=q) for q in "bcde" for i in range(1, 6)]
    got = victims(cqs, cohorts, admitted, workload("unit", 5), "a")
    fs = "InCohortFairSharing"
    assert got == {("b1", fs), ("b2", fs), ("c1", fs), ("c2", fs), ("e1", fs)}


def test_borrowing_cq_in_non_borrowing_cohort_is_protected():
    cqs = [cq("a", "ROOT", 5, weight="10", reclaim="Any", within="LowerPriority"), cq("b", "RIGHT", None, "0.1")]
    cohorts = [cohort("ROOT"), cohort("RIGHT", "ROOT", 1, weight="0.1")]
    admitted = [workload(n, 1, priority=-1, admitted_in="a") for n in ("a1", "a2", "a3")]
    admitted.append(workload("b1", 1, priority=-1, admitted_in="b"))
    got = victims(cqs, cohorts, admitted, workload("unit", 5), "a")
    assert got == {("a1", "InClusterQueue"), ("a2", "InClusterQueue"), ("a3", "InClusterQueue")}


def test_deep_preemption():
    cqs = [cq("a", "AAA", 0, reclaim="Any"), cq("b", "BBB", 0)]
    cohorts = [
        cohort("ROOT"),
        cohort("A", "ROOT", weight="1.01"),
        cohort("AA", "A"),
        cohort("AAA", "AA"),
        cohort("B", "ROOT", weight="0.99"),
        cohort("BB", "B"),
        cohort("BBB", "BB"),
        cohort("C", "ROOT"),
        cohort("CC", "C"),
        cohort("CCC", "CC"),
        cohort("CCCC", "CCC", 1),
    ]
    got = victims(cqs, cohorts, [workload("b1", 1, admitted_in="b")], workload("a1", 1), "a")
    assert got == {("b1", "InCohortFairSharing")}


def test_zero_weight_cq_and_cohort_can_reclaim_nominal_quota():
    cqs = [cq("a", "ROOT", 1, weight="0.0", reclaim="Any"), cq("b", "ROOT", 0, weight="1.0")]
    got = victims(cqs, [], [workload("b1", 1, admitted_in="b")], workload("a1", 1), "a")
    assert got == {("b1", "InCohortReclamation")}
    cqs = [cq("a", "A", 0, weight="0.0", reclaim="Any"), cq("b", "ROOT", 0, weight="1.0")]
    cohorts = [cohort("A", "ROOT", 1, weight="0.0")]
    got = victims(cqs, cohorts, [workload("b1", 1, admitted_in="b")], workload("a1", 1), "a")
    assert got == {("b1", "InCohortFairSharing")}


# Classic preemption: pkg/scheduler/preemption/preemption_hierarchical_test.go


def test_classic_preempt_with_hierarchical_advantage():
    cqs = [
        cq("q", "c", 0, within="LowerPriority", reclaim="Any"),
        cq("q_borrowing", "r", 0, within="LowerPriority", reclaim="Any"),
    ]
    cohorts = [cohort("r"), cohort("c", "r", 2)]
    got = victims(
        cqs, cohorts, [workload("admitted2", 2, admitted_in="q_borrowing")], workload("in", 2), "q", fair=False
    )
    assert got == {("admitted2", "InCohortReclamation", "preemptor path: /r/c/q; preemptee path: /r/q_borrowing")}


def test_classic_respect_lending_limits():
    cqs = [
        cq("q", "c", 3, within="LowerPriority", reclaim="Any", lending=2),
        cq("q_borrowing", "r", 0, within="LowerPriority", reclaim="Any"),
    ]
    cohorts = [cohort("r"), cohort("c", "r", 2)]
    admitted = [workload("admitted_borrowing", 4, admitted_in="q_borrowing")]
    got = victims(cqs, cohorts, admitted, workload("in", 5, priority=-2), "q", fair=False)
    assert got == {
        ("admitted_borrowing", "InCohortReclamation", "preemptor path: /r/c/q; preemptee path: /r/q_borrowing")
    }


def test_classic_reclaim_in_complex_hierarchy():
    cohorts = [cohort("r")] + [
        cohort(n, p, 4)
        for n, p in (
            ("c11", "r"),
            ("c12", "r"),
            ("c21", "c11"),
            ("c22", "c11"),
            ("c23", "c11"),
            ("c31", "c21"),
            ("c32", "c21"),
        )
    ]
    cqs = [
        cq(n, c, 0, within="LowerPriority", reclaim="Any")
        for n, c in (("q1", "c12"), ("q2", "c23"), ("q3", "c22"), ("q4", "c32"), ("q5", "c31"))
    ]
    admitted = [
        workload("admitted_borrowing_1", 4, -6, "q1"),
        workload("admitted_borrowing_2", 4, -5, "q1"),
        workload("admitted_borrowing_3", 4, -9, "q2"),
        workload("admitted_borrowing_4", 4, -10, "q2"),
        workload("admitted_borrowing_5", 4, -4, "q3"),
        workload("admitted_borrowing_6", 3, -3, "q3"),
        workload("admitted_borrowing_7", 2, 4, "q4"),
        workload("admitted_borrowing_8", 3, 2, "q4"),
    ]
    got = victims(cqs, cohorts, admitted, workload("in", 7, priority=-2), "q5", fair=False)
    assert got == {
        ("admitted_borrowing_1", "InCohortReclamation", "preemptor path: /r/c11/c21/c31/q5; preemptee path: /r/c12/q1"),
        (
            "admitted_borrowing_4",
            "InCohortReclamation",
            "preemptor path: /r/c11/c21/c31/q5; preemptee path: /r/c11/c23/q2",
        ),
    }


# Admission order with Fair Sharing: pkg/scheduler/scheduler_fs_test.go


def test_hierarchical_fair_sharing_schedules_workload_which_wins_tournament():
    cohorts = [cohort("A", nominal=200), cohort("B", "A"), cohort("C", "A")]
    cqs = [cq(n, c, 0) for n, c in (("d", "B"), ("e", "B"), ("f", "C"), ("g", "C"))]
    lqs = [{"metadata": {"name": f"lq-{n}", "namespace": ""}, "spec": {"clusterQueue": n}} for n in "defg"]
    admitted = [
        workload("d0", 10, admitted_in="d"),
        workload("e0", 20, admitted_in="e"),
        workload("g0", 100, admitted_in="g"),
    ]
    pending = []
    for name, cpu in (("d1", 70), ("e1", 61), ("f1", 1), ("g1", 1)):
        w = workload(name, cpu)
        w["spec"]["queueName"] = f"lq-{name[0]}"
        pending.append(w)
    snap = Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": "default"}, "spec": {}}],
        cohorts=cohorts,
        cluster_queues=cqs,
        local_queues=lqs,
        workloads=admitted + pending,
        config=KueueConfig(),
        now=T0,
    )
    result = Scheduler().cycle(snap, T0)
    assert [a.workload.name for a in result.admitted] == ["d1"]
    assert sorted((p.workload.name, p.reason, p.message) for p in result.pending) == [
        (n, "WaitingForQuota", "Workload no longer fits after processing another workload") for n in ("e1", "f1", "g1")
    ]


def test_fair_sharing_preempts_from_the_queue_with_the_highest_share():
    def two_groups(on_demand: tuple[int, int], spot: tuple[int, int] | None) -> list[dict]:
        flavors = [
            {
                "name": "on-demand",
                "resources": [{"name": CPU, "nominalQuota": str(on_demand[0]), "borrowingLimit": str(on_demand[1])}],
            }
        ]
        if spot is not None:
            flavors.append(
                {
                    "name": "spot",
                    "resources": [{"name": CPU, "nominalQuota": str(spot[0]), "borrowingLimit": str(spot[1])}],
                }
            )
        return [{"coveredResources": [CPU], "flavors": flavors}]

    def queue(name: str, groups: list[dict], **preemption: str) -> dict:
        return {
            "metadata": {"name": name},
            "spec": {
                "cohortName": "eng",
                "namespaceSelector": {},
                "queueingStrategy": "StrictFIFO",
                "resourceGroups": groups,
                "preemption": preemption,
            },
        }

    cqs = [
        queue("eng-alpha", two_groups((50, 50), (100, 0))),
        queue(
            "eng-beta", two_groups((50, 10), (0, 100)), reclaimWithinCohort="Any", withinClusterQueue="LowerPriority"
        ),
        queue("eng-gamma", two_groups((50, 0), None)),
    ]

    def reserved(name: str, cpu: int, cq_name: str, flavor: str) -> dict:
        obj = workload(name, cpu)
        psa = [{"name": "main", "flavors": {CPU: flavor}, "resourceUsage": {CPU: str(cpu)}, "count": 1}]
        ws.set_quota_reservation(obj, cq_name, psa, T0)
        return obj

    admitted = [reserved("all_spot", 100, "eng-alpha", "spot")]
    admitted += [reserved(f"alpha{i}", 20, "eng-alpha", "on-demand") for i in range(1, 5)]
    admitted += [reserved("gamma1", 10, "eng-gamma", "on-demand")]
    admitted += [reserved(f"gamma{i}", 20, "eng-gamma", "on-demand") for i in range(2, 5)]
    preemptor = workload("preemptor", 30)
    preemptor["metadata"]["uid"] = "wl-preemptor"
    preemptor["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": "job-preemptor"}
    lq = {"metadata": {"name": "incoming", "namespace": ""}, "spec": {"clusterQueue": "eng-beta"}}
    snap = Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": f}, "spec": {}} for f in ("on-demand", "spot")],
        cohorts=[],
        cluster_queues=cqs,
        local_queues=[lq],
        workloads=[*admitted, preemptor],
        config=KueueConfig(),
        now=T0,
    )
    result = Scheduler().cycle(snap, T0)
    message = (
        "Preempted to accommodate a workload (UID: wl-preemptor, JobUID: job-preemptor) due to reclamation "
        "within the cohort; preemptor path: /eng/eng-beta; preemptee path: /eng/"
    )
    assert {(p.victim.name, p.reason, p.message) for p in result.preempted} == {
        ("alpha1", "InCohortReclamation", message + "eng-alpha"),
        ("gamma1", "InCohortReclamation", message + "eng-gamma"),
    }
    assert [(p.reason, p.message) for p in result.pending] == [
        (
            "WaitingForPreemptedWorkloads",
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 30 more "
            "needed, insufficient unused quota for cpu in flavor spot, 30 more needed. Pending the preemption of 2 "
            "workload(s)",
        )
    ]


# Classic scheduling: pkg/scheduler/scheduler_test.go


def test_capacity_held_for_a_lender_that_cannot_always_reclaim():
    def run(reclaim: str):
        def gpu_queue(name: str, nominal: int, **preemption: str) -> dict:
            groups = [
                {
                    "coveredResources": ["gpu"],
                    "flavors": [{"name": "on-demand", "resources": [{"name": "gpu", "nominalQuota": str(nominal)}]}],
                }
            ]
            return {
                "metadata": {"name": name},
                "spec": {
                    "cohortName": "root",
                    "namespaceSelector": {},
                    "resourceGroups": groups,
                    "preemption": preemption,
                },
            }

        def wl(name: str, ns: str, gpu: int, admitted_in: str | None = None) -> dict:
            obj = {
                "metadata": {"name": name, "namespace": ns, "uid": name, "creationTimestamp": ws.ts(T0)},
                "spec": {
                    "queueName": "lq",
                    "priority": 0,
                    "podSets": [
                        {
                            "name": "main",
                            "count": 1,
                            "template": {
                                "spec": {"containers": [{"name": "c", "resources": {"requests": {"gpu": str(gpu)}}}]}
                            },
                        }
                    ],
                },
                "status": {},
            }
            if admitted_in:
                psa = [
                    {"name": "main", "flavors": {"gpu": "on-demand"}, "resourceUsage": {"gpu": str(gpu)}, "count": 1}
                ]
                ws.set_quota_reservation(obj, admitted_in, psa, T0)
            return obj

        cqs = [gpu_queue("ClusterQueueA", 2, reclaimWithinCohort=reclaim), gpu_queue("ClusterQueueB", 0)]
        lqs = [
            {"metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": cq_name}}
            for ns, cq_name in (("eng-alpha", "ClusterQueueA"), ("eng-beta", "ClusterQueueB"))
        ]
        workloads = [
            wl("a1-admitted", "eng-alpha", 1, "ClusterQueueA"),
            wl("a2-pending", "eng-alpha", 2),
            wl("b1-pending", "eng-beta", 1),
        ]
        snap = Snapshot.from_objects(
            resource_flavors=[{"metadata": {"name": "on-demand"}, "spec": {}}],
            cluster_queues=cqs,
            local_queues=lqs,
            workloads=workloads,
            config=KueueConfig(fair_sharing=False),
            now=T0,
        )
        return Scheduler().cycle(snap, T0)

    blocked = run("LowerPriority")
    assert blocked.admitted == []
    assert sorted((p.workload.name, p.reason, p.message) for p in blocked.pending) == [
        (
            "a2-pending",
            "WaitingForQuota",
            "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, "
            "1 more needed",
        ),
        ("b1-pending", "WaitingForQuota", "Workload no longer fits after processing another workload"),
    ]
    free = run("Any")
    assert [a.workload.name for a in free.admitted] == ["b1-pending"]


def lending_case(
    cqs: list[dict], cohorts: list[dict], admitted: tuple[str, str, int], pending: tuple[str, int], flavor: str
) -> list[tuple[str, str]]:
    lq = {"metadata": {"name": "incoming", "namespace": ""}, "spec": {"clusterQueue": pending[0]}}
    done = workload("existing", admitted[2])
    psa = [{"name": "main", "flavors": {CPU: flavor}, "resourceUsage": {CPU: str(admitted[2])}, "count": 1}]
    ws.set_quota_reservation(done, admitted[0], psa, T0)
    snap = Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": flavor}, "spec": {}}],
        cohorts=cohorts,
        cluster_queues=cqs,
        local_queues=[lq],
        workloads=[done, workload("pending", pending[1])],
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    return [(p.reason, p.message) for p in Scheduler().cycle(snap, T0).pending]


def limited_queue(name: str, cohort_name: str, flavor: str, nominal: int, lending=None, borrowing=None) -> dict:
    r = {"name": CPU, "nominalQuota": str(nominal)}
    if lending is not None:
        r["lendingLimit"] = str(lending)
    if borrowing is not None:
        r["borrowingLimit"] = str(borrowing)
    groups = [{"coveredResources": [CPU], "flavors": [{"name": flavor, "resources": [r]}]}]
    return {
        "metadata": {"name": name},
        "spec": {"cohortName": cohort_name, "namespaceSelector": {}, "resourceGroups": groups},
    }


def test_workload_exceeds_lending_limit_when_borrowing_in_cohort():
    cqs = [
        limited_queue("lend-a", "lend", "default", 3, lending=2),
        limited_queue("lend-b", "lend", "default", 2, lending=2),
    ]
    got = lending_case(cqs, [], ("lend-b", "", 2), ("lend-b", 3), "default")
    assert got == [
        (
            "WaitingForQuota",
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
            "1 more needed",
        )
    ]


def test_hierarchical_cohort_respects_lending_limit_when_borrowing():
    cqs = [
        limited_queue("cq-lender", "child", "on-demand", 10, lending=3),
        limited_queue("cq-borrower", "child", "on-demand", 5, borrowing=10),
    ]
    cohorts = [cohort("root"), cohort("child", "root")]
    got = lending_case(cqs, cohorts, ("cq-borrower", "", 5), ("cq-borrower", 4), "on-demand")
    assert got == [
        (
            "WaitingForQuota",
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
            "1 more needed",
        )
    ]


def test_hierarchical_cohort_workload_borrowing_less_is_scheduled_first():
    cohorts = [cohort("root"), cohort("guaranteed", "root", 4)]
    cqs = [cq("guaranteed", "guaranteed", 0), cq("best-effort", "root", 0)]
    lqs = [
        {"metadata": {"name": f"lq-{n}", "namespace": ""}, "spec": {"clusterQueue": n}}
        for n in ("guaranteed", "best-effort")
    ]
    g, b = workload("guaranteed", 4, priority=0), workload("best-effort", 4, priority=3)
    g["spec"]["queueName"], b["spec"]["queueName"] = "lq-guaranteed", "lq-best-effort"
    snap = Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": "default"}, "spec": {}}],
        cohorts=cohorts,
        cluster_queues=cqs,
        local_queues=lqs,
        workloads=[g, b],
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    result = Scheduler().cycle(snap, T0)
    assert [a.workload.name for a in result.admitted] == ["guaranteed"]
    assert [(p.workload.name, p.message) for p in result.pending] == [
        ("best-effort", "Workload no longer fits after processing another workload")
    ]


def test_classic_preemption_only_when_the_workload_fits_within_nominal():
    cqs = [
        cq("other-alpha", "other", 2, reclaim="Any", within="LowerPriority"),
        cq("other-beta", "other", 2),
    ]
    admitted = [
        workload("a1", 1, priority=-1, admitted_in="other-alpha"),
        workload("b1", 1, priority=-1, admitted_in="other-beta"),
    ]
    lq = {"metadata": {"name": "incoming", "namespace": ""}, "spec": {"clusterQueue": "other-alpha"}}
    snap = Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": "default"}, "spec": {}}],
        cluster_queues=cqs,
        local_queues=[lq],
        workloads=[*admitted, workload("incoming", 3, priority=1)],
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    result = Scheduler().cycle(snap, T0)
    assert result.preempted == [] and result.admitted == []
    assert [(p.reason, p.message) for p in result.pending] == [
        (
            "WaitingForQuota",
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
            "1 more needed",
        )
    ]


def test_preemption_while_borrowing_does_not_block_a_borrower_in_another_queue():
    def queue(name: str, nominal: int, borrowing: int | None = None, **preemption) -> dict:
        r = {"name": CPU, "nominalQuota": str(nominal)}
        if borrowing is not None:
            r["borrowingLimit"] = str(borrowing)
        groups = [{"coveredResources": [CPU], "flavors": [{"name": "default", "resources": [r]}]}]
        return {
            "metadata": {"name": name},
            "spec": {"cohortName": "pwb", "namespaceSelector": {}, "resourceGroups": groups, "preemption": preemption},
        }

    bwc = {"policy": "LowerPriority"}
    cqs = [
        queue("cq_shared", 4, 0),
        queue("cq_a", 0, 3, reclaimWithinCohort="LowerPriority", borrowWithinCohort=bwc),
        queue("cq_b", 0, reclaimWithinCohort="LowerPriority", borrowWithinCohort=bwc),
    ]
    lqs = [{"metadata": {"name": f"lq_{n}", "namespace": ""}, "spec": {"clusterQueue": f"cq_{n}"}} for n in "ab"]
    a, b = workload("a", 3), workload("b", 1)
    a["spec"]["queueName"], b["spec"]["queueName"] = "lq_a", "lq_b"
    snap = Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": "default"}, "spec": {}}],
        cluster_queues=cqs,
        local_queues=lqs,
        workloads=[workload("admitted_a", 2, admitted_in="cq_a"), a, b],
        config=KueueConfig(fair_sharing=False),
        now=T0,
    )
    result = Scheduler().cycle(snap, T0)
    assert [x.workload.name for x in result.admitted] == ["b"]
    assert [(p.workload.name, p.reason, p.message) for p in result.pending] == [
        (
            "a",
            "WaitingForQuota",
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more "
            "needed",
        )
    ]


def test_fair_sharing_multiple_preemptions_skip_overlapping_targets():
    """TestScheduleForFairSharing "multiple preemptions skip overlapping preemption targets". Upstream runs it with
    RecomputeAssignmentUponPreemptionTargetsOverlap off (v0.19's skip: pretending-preemptor waits with "Workload has
    overlapping preemption targets with another workload"). kubesim has no feature gates and follows v0.20's default
    (on): pretending-preemptor searches again with a1 and c1 gone and preemptor's usage charged; cpu then fits and it
    preempts b1 for its beta-resource in the same cycle."""

    def queue(name: str, quotas: dict[str, int]) -> dict:
        groups = [
            {
                "coveredResources": list(quotas),
                "flavors": [
                    {"name": "default", "resources": [{"name": r, "nominalQuota": str(v)} for r, v in quotas.items()]}
                ],
            }
        ]
        return {
            "metadata": {"name": name},
            "spec": {
                "cohortName": "other",
                "namespaceSelector": {},
                "resourceGroups": groups,
                "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            },
        }

    def wl(name: str, ns: str, priority: int, requests: dict[str, int], admitted_in: str | None = None) -> dict:
        obj = {
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": f"wl-{name}",
                "creationTimestamp": ws.ts(T0),
                "labels": {"kueue.x-k8s.io/job-uid": f"job-{name}"},
            },
            "spec": {
                "queueName": "other",
                "priority": priority,
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "c", "resources": {"requests": {r: str(v) for r, v in requests.items()}}}
                                ]
                            }
                        },
                    }
                ],
            },
            "status": {},
        }
        if admitted_in:
            psa = [
                {
                    "name": "main",
                    "flavors": dict.fromkeys(requests, "default"),
                    "resourceUsage": {r: str(v) for r, v in requests.items()},
                    "count": 1,
                }
            ]
            ws.set_quota_reservation(obj, admitted_in, psa, T0)
        return obj

    cqs = [
        queue("other-alpha", {CPU: 0, "alpha-resource": 1}),
        queue("other-beta", {CPU: 0, "beta-resource": 1}),
        queue("other-gamma", {CPU: 0, "gamma-resource": 1}),
        queue("resource-bank", {CPU: 9}),
    ]
    lqs = [
        {"metadata": {"name": "other", "namespace": f"eng-{n}"}, "spec": {"clusterQueue": f"other-{n}"}}
        for n in ("alpha", "beta", "gamma")
    ]
    workloads = [
        wl("a1", "eng-alpha", 0, {"alpha-resource": 1}, "other-alpha"),
        wl("b1", "eng-beta", 0, {"beta-resource": 1}, "other-beta"),
        wl("c1", "eng-gamma", 0, {CPU: 9, "gamma-resource": 1}, "other-gamma"),
        wl("preemptor", "eng-alpha", 100, {CPU: 3, "alpha-resource": 1}),
        wl("pretending-preemptor", "eng-beta", 99, {CPU: 3, "beta-resource": 1}),
    ]
    snap = Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": "default"}, "spec": {}}],
        cluster_queues=cqs,
        local_queues=lqs,
        workloads=workloads,
        config=KueueConfig(),
        now=T0,
    )
    result = Scheduler().cycle(snap, T0)
    prefix = "Preempted to accommodate a workload (UID: wl-preemptor, JobUID: job-preemptor) due to "
    assert {(p.victim.name, p.reason, p.message) for p in result.preempted} == {
        (
            "a1",
            "InClusterQueue",
            prefix + "prioritization in the ClusterQueue; preemptor path: /other/other-alpha; "
            "preemptee path: /other/other-alpha",
        ),
        (
            "c1",
            "InCohortFairSharing",
            prefix + "Fair Sharing within the cohort; preemptor path: /other/other-alpha; "
            "preemptee path: /other/other-gamma",
        ),
        (
            "b1",
            "InClusterQueue",
            "Preempted to accommodate a workload (UID: wl-pretending-preemptor, JobUID: job-pretending-preemptor) due "
            "to prioritization in the ClusterQueue; preemptor path: /other/other-beta; preemptee path: "
            "/other/other-beta",
        ),
    }
    assert result.recomputations == [("other-beta", "new_targets")]
    assert sorted((p.workload.name, p.reason, p.message) for p in result.pending) == [
        (
            "preemptor",
            "WaitingForPreemptedWorkloads",
            "couldn't assign flavors to pod set main: insufficient unused quota for alpha-resource in flavor default, "
            "1 more needed, insufficient unused quota for cpu in flavor default, 3 more needed. Pending the preemption "
            "of 2 workload(s)",
        ),
        (
            "pretending-preemptor",
            "WaitingForPreemptedWorkloads",
            "couldn't assign flavors to pod set main: insufficient unused quota for beta-resource in flavor default, "
            "1 more needed. Pending the preemption of 1 workload(s)",
        ),
    ]
