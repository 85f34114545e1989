"""Scheduler core on plain data: the scenarios of Kueue's documentation, with the outcomes the docs state."""

from __future__ import annotations

from datetime import timedelta

from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler import Scheduler
from tests.kubesim.kueue.sim import Sim, cluster_queue, cohort, flavor, local_queue, quota_spec

CLASSIC = KueueConfig(fair_sharing=False)


def single_queue(capacity: int = 4, **kw) -> Sim:
    sim = Sim(kw.pop("config", None))
    sim.cqs.append(cluster_queue("cq", capacity, **kw))
    sim.lqs.append(local_queue("lq", "cq"))
    return sim


def test_fifo_within_a_queue():
    sim = single_queue(4)
    for name in ("a", "b", "c"):
        sim.add(name, "lq", 2)
    sim.settle()
    assert sim.running() == {"a", "b"}
    qr = sim.condition("c", "QuotaReserved")
    assert qr["status"] == "False"
    assert qr["reason"] == "WaitingForQuota"
    assert qr["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor f, "
        "2 more needed"
    )
    assert sim.condition("c", "Admitted")["reason"] == "NoReservation"
    sim.finish("a")
    sim.settle()
    assert sim.running() == {"b", "c"}


def test_admitted_status_shape():
    sim = single_queue(4)
    sim.add("a", "lq", 2, count=2)
    sim.settle()
    wl = sim.workloads["a"]
    assert wl["status"]["admission"] == {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "main", "flavors": {"nvidia.com/gpu": "f"}, "resourceUsage": {"nvidia.com/gpu": "4"}, "count": 2}
        ],
    }
    assert sim.condition("a", "QuotaReserved")["message"] == "Quota reserved in ClusterQueue cq"
    assert sim.condition("a", "Admitted")["message"] == "The workload is admitted"


def test_priority_orders_the_queue():
    sim = single_queue(1)
    sim.add("low", "lq", 1, priority=10)
    sim.add("high", "lq", 1, priority=100)
    sim.settle()
    assert sim.running() == {"high"}


def test_within_cluster_queue_preemption_lower_priority():
    for config in (CLASSIC, KueueConfig()):
        sim = single_queue(2, within="LowerPriority", config=config)
        sim.add("low", "lq", 2, priority=10)
        sim.settle()
        sim.add("high", "lq", 2, priority=100)
        sim.add("same", "lq", 2, priority=10)
        sim.settle()
        assert sim.running() == {"high"}
        pre = sim.condition("low", "Preempted")
        assert pre["reason"] == "InClusterQueue"
        assert pre["message"] == (
            "Preempted to accommodate a workload (UID: uid-0002, JobUID: job-0002) due to prioritization in the "
            "ClusterQueue; preemptor path: /cq; preemptee path: /cq"
        )
        assert sim.condition("low", "Evicted")["reason"] == "Preempted"
        assert sim.condition("low", "Requeued")["status"] == "True"
        assert sim.workloads["low"]["status"]["schedulingStats"]["evictions"] == [
            {"reason": "Preempted", "underlyingCause": "", "count": 1}
        ]


def test_within_cluster_queue_never_does_not_preempt():
    sim = single_queue(2)
    sim.add("low", "lq", 2, priority=10)
    sim.settle()
    sim.add("high", "lq", 2, priority=100)
    sim.settle()
    assert sim.running() == {"low"}
    assert sim.condition("high", "QuotaReserved")["reason"] == "WaitingForQuota"


def test_lower_or_newer_equal_priority():
    sim = single_queue(2, within="LowerOrNewerEqualPriority", config=CLASSIC)
    old = sim.add("old", "lq", 2, priority=10)
    newer = sim.add("newer", "lq", 2, priority=10)
    # newer was created later but admitted first (e.g. old was deactivated meanwhile)
    old["spec"]["active"] = False
    sim.settle()
    assert sim.running() == {"newer"}
    old["spec"]["active"] = True
    sim.queues.flush()
    sim.settle()
    assert sim.running() == {"old"}
    assert newer["status"]["conditions"]


def two_queue_cohort(config=None, a_kw=None, b_kw=None) -> Sim:
    sim = Sim(config)
    sim.cqs.append(cluster_queue("cq-a", 4, cohort="co", **(a_kw or {})))
    sim.cqs.append(cluster_queue("cq-b", 4, cohort="co", **(b_kw or {})))
    sim.lqs += [local_queue("lq-a", "cq-a"), local_queue("lq-b", "cq-b")]
    return sim


def test_borrowing_within_cohort():
    sim = two_queue_cohort()
    sim.add("big", "lq-a", 6)
    sim.settle()
    assert sim.running() == {"big"}
    sim.add("b1", "lq-b", 2)
    sim.add("b2", "lq-b", 2)
    sim.settle()
    assert sim.running() == {"big", "b1"}


def test_borrowing_limit():
    sim = two_queue_cohort(a_kw={"borrowing": 1})
    sim.add("six", "lq-a", 6)
    sim.add("five", "lq-a", 5)
    sim.settle()
    assert sim.running() == {"five"}
    qr = sim.condition("six", "QuotaReserved")
    assert qr["reason"] == "ExceedsMaxQuota"
    assert qr["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor f, previously "
        "considered podsets requests (0) + current podset request (6) > maximum capacity (5)"
    )


def test_lending_limit_zero():
    sim = two_queue_cohort(b_kw={"lending": 0})
    sim.add("five", "lq-a", 5)
    sim.add("four", "lq-a", 4)
    sim.settle()
    assert sim.running() == {"four"}
    assert sim.condition("five", "QuotaReserved")["reason"] == "ExceedsMaxQuota"


def test_lending_limit_partial():
    sim = two_queue_cohort(b_kw={"lending": 1})
    sim.add("six", "lq-a", 6)
    sim.add("five", "lq-a", 5)
    sim.settle()
    assert sim.running() == {"five"}


def test_reclaim_within_cohort_classic_and_fair():
    for config in (CLASSIC, KueueConfig()):
        sim = two_queue_cohort(config, b_kw={"reclaim": "Any"})
        for i in range(4):
            sim.add(f"a{i}", "lq-a", 2)
        sim.settle()
        assert sim.running() == {"a0", "a1", "a2", "a3"}
        sim.add("b", "lq-b", 4)
        sim.settle()
        assert "b" in sim.running()
        victims = list(sim.preemptions)
        assert len(victims) == 2
        assert {p.reason for p in victims} == {"InCohortReclamation"}
        assert victims[0].message.endswith(
            "due to reclamation within the cohort; preemptor path: /co/cq-b; preemptee path: /co/cq-a"
        )
        # most recently admitted go first; the two admitted last are a2 and a3 (same time: higher UID order)
        assert len(sim.running() & {"a0", "a1", "a2", "a3"}) == 2


def test_reclaim_never_waits():
    sim = two_queue_cohort(CLASSIC)
    for i in range(4):
        sim.add(f"a{i}", "lq-a", 2)
    sim.settle()
    sim.add("b", "lq-b", 4)
    sim.settle()
    assert "b" not in sim.running()
    assert sim.condition("b", "QuotaReserved")["reason"] == "WaitingForQuota"


def test_borrow_within_cohort_threshold_classic():
    def build(threshold: int) -> Sim:
        sim = two_queue_cohort(
            CLASSIC, b_kw={"reclaim": "Any", "borrow_policy": "LowerPriority", "threshold": threshold}
        )
        sim.cqs.append(cluster_queue("cq-c", 4, cohort="co"))
        for i in range(5):
            sim.add(f"a{i}", "lq-a", 2, priority=10)
        sim.settle()
        sim.add("b", "lq-b", 6, priority=100)  # must borrow 2 while preempting a's borrowed work
        sim.settle()
        return sim

    sim = build(50)
    assert "b" in sim.running()
    assert [p.reason for p in sim.preemptions] == ["InCohortReclaimWhileBorrowing"] * 2
    assert "due to reclamation within the cohort while borrowing" in sim.preemptions[0].message
    sim = build(5)  # candidates above the threshold may only be reclaimed without borrowing
    assert "b" not in sim.running()
    assert not sim.preemptions


def test_hierarchical_cohort_quota_is_additive():
    sim = Sim()
    sim.cohorts += [cohort("org", nominal=4), cohort("team", parent="org")]
    sim.cqs.append(cluster_queue("cq-a", 2, cohort="team"))
    sim.lqs.append(local_queue("lq-a", "cq-a"))
    sim.add("seven", "lq-a", 7)
    sim.add("six", "lq-a", 6)
    sim.settle()
    assert sim.running() == {"six"}
    assert sim.condition("seven", "QuotaReserved")["message"].endswith("> maximum capacity (6)")


def test_hierarchical_cohort_borrowing_limit():
    sim = Sim()
    sim.cohorts += [cohort("org", nominal=8), cohort("team", parent="org", nominal=0, borrowing=3)]
    sim.cqs.append(cluster_queue("cq-a", 2, cohort="team"))
    sim.lqs.append(local_queue("lq-a", "cq-a"))
    sim.add("six", "lq-a", 6)
    sim.add("five", "lq-a", 5)
    sim.settle()
    assert sim.running() == {"five"}


def fair_pair(weight_a: str, weight_b: str, capacity: int = 12) -> Sim:
    sim = Sim()
    sim.cohorts.append(cohort("root", nominal=capacity))
    sim.cqs.append(cluster_queue("cq-a", 0, cohort="root", reclaim="Any", within="LowerPriority", weight=weight_a))
    sim.cqs.append(cluster_queue("cq-b", 0, cohort="root", reclaim="Any", within="LowerPriority", weight=weight_b))
    sim.lqs += [local_queue("lq-a", "cq-a"), local_queue("lq-b", "cq-b")]
    return sim


def test_fair_sharing_splits_idle_quota_by_weight():
    sim = fair_pair("2", "1")
    for i in range(12):
        sim.add(f"a{i}", "lq-a", 1)
        sim.add(f"b{i}", "lq-b", 1)
    sim.settle()
    running = sim.running()
    assert len([n for n in running if n.startswith("a")]) == 8
    assert len([n for n in running if n.startswith("b")]) == 4


def test_fair_sharing_reclaims_towards_weights():
    sim = fair_pair("2", "1")
    for i in range(12):
        sim.add(f"b{i}", "lq-b", 1)
    sim.settle()
    assert len(sim.running()) == 12
    for i in range(12):
        sim.add(f"a{i}", "lq-a", 1)
    sim.settle()
    running = sim.running()
    assert len([n for n in running if n.startswith("a")]) == 8
    assert len([n for n in running if n.startswith("b")]) == 4
    assert {p.reason for p in sim.preemptions} == {"InCohortFairSharing"}
    assert "due to Fair Sharing within the cohort; preemptor path: /root/cq-a; preemptee path: /root/cq-b" in (
        sim.preemptions[0].message
    )


def test_fair_sharing_equal_weights():
    sim = fair_pair("1", "1")
    for i in range(12):
        sim.add(f"a{i}", "lq-a", 1)
        sim.add(f"b{i}", "lq-b", 1)
    sim.settle()
    assert len([n for n in sim.running() if n.startswith("a")]) == 6


def test_strict_fifo_head_blocks():
    sim = single_queue(4, strategy="StrictFIFO")
    sim.add("running", "lq", 2)
    sim.settle()
    sim.add("big", "lq", 4)
    sim.add("small", "lq", 1)
    sim.settle()
    assert sim.running() == {"running"}
    assert "QuotaReserved" not in {c["type"] for c in sim.workloads["small"]["status"].get("conditions", [])}


def test_best_effort_fifo_moves_head_aside():
    sim = single_queue(4)
    sim.add("running", "lq", 2)
    sim.settle()
    sim.add("big", "lq", 4)
    sim.add("small", "lq", 1)
    sim.settle()
    assert sim.running() == {"running", "small"}
    sim.finish("running")
    sim.settle()
    assert sim.running() == {"small"}  # big needs 4, only 3 free
    sim.finish("small")
    sim.settle()
    assert sim.running() == {"big"}


def test_missing_local_queue_is_reported_by_snapshot():
    sim = single_queue(4)
    sim.add("lost", "nope", 1)
    snap = sim.snapshot()
    assert [(w.name, r, m) for w, r, m in snap.orphans] == [("lost", "Misconfigured", "LocalQueue nope doesn't exist")]


def test_inactive_cluster_queue_missing_flavor():
    sim = single_queue(4, flavor_name="ghost")
    snap = sim.snapshot()
    cq = snap.cluster_queues["cq"]
    assert cq.inactive_reason == "FlavorNotFound"
    assert cq.inactive_message == "Can't admit new workloads: references missing ResourceFlavor(s): ghost."


def test_no_matching_flavor():
    sim = single_queue(4)
    sim.flavors = [flavor("f", {"gpu": "h100"})]
    sim.add("wrong", "lq", 1, node_selector={"gpu": "a100"})
    sim.settle()
    qr = sim.condition("wrong", "QuotaReserved")
    assert qr["reason"] == "NoMatchingFlavor"
    assert qr["message"] == "couldn't assign flavors to pod set main: flavor f doesn't match node affinity"


def test_untolerated_taint_then_next_flavor():
    sim = Sim()
    sim.flavors = [flavor("spot", taints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}]), flavor("f")]
    groups = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4"}]},
                {"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4"}]},
            ],
        }
    ]
    sim.cqs.append(cluster_queue("cq", groups=groups))
    sim.lqs.append(local_queue("lq", "cq"))
    sim.add("plain", "lq", 1)
    sim.add("tolerant", "lq", 1, tolerations=[{"key": "spot", "operator": "Exists"}])
    sim.settle()
    assert sim.workloads["plain"]["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"nvidia.com/gpu": "f"}
    assert sim.workloads["tolerant"]["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "nvidia.com/gpu": "spot"
    }


def test_namespace_selector_mismatch():
    sim = single_queue(4, namespace_selector={"matchLabels": {"team": "a"}})
    sim.namespaces = [{"metadata": {"name": "default", "labels": {"team": "b"}}}]
    sim.add("x", "lq", 1)
    sim.settle()
    qr = sim.condition("x", "QuotaReserved")
    assert (qr["reason"], qr["message"]) == ("Misconfigured", "workload namespace doesn't match ClusterQueue selector")


def test_ignore_undeclared_vs_block_undeclared():
    sim = single_queue(4)
    sim.add("x", "lq", 1, cpu="2")
    sim.settle()
    assert sim.running() == {"x"}
    assert sim.workloads["x"]["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {"nvidia.com/gpu": "1"}
    strict = single_queue(4, config=KueueConfig(quota_check_strategy="BlockUndeclared"))
    strict.add("x", "lq", 1, cpu="2")
    strict.settle()
    qr = strict.condition("x", "QuotaReserved")
    assert qr["reason"] == "NoMatchingFlavor"
    assert qr["message"] == "couldn't assign flavors to pod set main: resource cpu unavailable in ClusterQueue"


def test_partial_admission():
    sim = single_queue(4)
    sim.add("gang", "lq", 1, count=6, min_count=2)
    sim.settle()
    assert sim.running() == {"gang"}
    psa = sim.workloads["gang"]["status"]["admission"]["podSetAssignments"][0]
    assert psa["count"] == 4
    assert psa["resourceUsage"] == {"nvidia.com/gpu": "4"}


def test_multiple_resource_groups_resources():
    sim = Sim()
    groups = [quota_spec("f", 4), quota_spec("f", 8, resource="cpu")]
    sim.cqs.append(cluster_queue("cq", groups=groups))
    sim.lqs.append(local_queue("lq", "cq"))
    sim.add("x", "lq", 1, cpu="6")
    sim.add("y", "lq", 1, cpu="6")
    sim.settle()
    assert sim.running() == {"x"}
    assert (
        "insufficient unused quota for cpu in flavor f, 4 more needed" in sim.condition("y", "QuotaReserved")["message"]
    )


def test_single_cycle_api_and_no_longer_fits():
    """Both heads fit alone; the non-borrowing one goes first and the other no longer fits (classic order)."""
    sim = two_queue_cohort(CLASSIC)
    sim.cqs[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "2"
    sim.cqs[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "2"
    sim.add("a-borrows", "lq-a", 3)
    sim.add("b-fits", "lq-b", 2)
    result = Scheduler(CLASSIC).cycle(sim.snapshot(), sim.now)
    assert [a.workload.name for a in result.admitted] == ["b-fits"]
    assert [(p.workload.name, p.reason, p.message) for p in result.pending] == [
        ("a-borrows", "WaitingForQuota", "Workload no longer fits after processing another workload")
    ]


def test_fair_sharing_tournament_prefers_lower_share():
    """With Fair Sharing the head of the queue with the lower DRS (with its workload) is admitted first."""
    sim = fair_pair("1", "1", capacity=4)
    sim.add("a-big", "lq-a", 3)
    sim.add("b-small", "lq-b", 2)
    result = Scheduler().cycle(sim.snapshot(), sim.now)
    assert [a.workload.name for a in result.admitted] == ["b-small"]


def test_eviction_accumulates_past_execution_time():
    sim = single_queue(2, within="LowerPriority")
    sim.add("low", "lq", 2, priority=10)
    sim.settle()
    sim.now += timedelta(seconds=30)
    sim.add("high", "lq", 2, priority=100)
    sim.settle()
    assert sim.workloads["low"]["status"]["accumulatedPastExecutionTimeSeconds"] == 30


def two_flavor_groups(a: int, b: int) -> list[dict]:
    return [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {"name": "fa", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(a)}]},
                {"name": "fb", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(b)}]},
            ],
        }
    ]


def fungibility_sim(config, fungibility: dict | None, a: int, b: int, **kw) -> Sim:
    sim = Sim(config)
    sim.flavors = [flavor("fa"), flavor("fb")]
    cq = cluster_queue("cq", groups=two_flavor_groups(a, b), **kw)
    if fungibility:
        cq["spec"]["flavorFungibility"] = fungibility
    sim.cqs.append(cq)
    sim.lqs.append(local_queue("lq", "cq"))
    return sim


def assigned_flavor(sim: Sim, name: str) -> str:
    return sim.workloads[name]["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"]


def test_flavor_fungibility_borrow_vs_next_flavor():
    for fungibility, expected in ((None, "fa"), ({"whenCanBorrow": "TryNextFlavor"}, "fb")):
        sim = fungibility_sim(CLASSIC, fungibility, 2, 4, cohort="co")
        other = cluster_queue("lender", cohort="co", groups=two_flavor_groups(4, 0))
        sim.cqs.append(other)
        sim.add("three", "lq", 3)
        sim.settle()
        assert assigned_flavor(sim, "three") == expected


def test_flavor_fungibility_preempt_vs_next_flavor():
    for fungibility, expected, victims in (
        (None, "fb", 0),
        ({"whenCanPreempt": "MayStopSearch"}, "fa", 1),
    ):
        sim = fungibility_sim(CLASSIC, fungibility, 2, 2, within="LowerPriority")
        sim.add("low", "lq", 2, priority=1)
        sim.settle()
        assert assigned_flavor(sim, "low") == "fa"
        sim.add("high", "lq", 2, priority=10)
        sim.settle()
        assert assigned_flavor(sim, "high") == expected
        assert len(sim.preemptions) == victims


def test_fair_sharing_less_than_initial_share_only():
    """S2-b alone: preempt while the preemptor (with its workload) stays below the target, so 7:5 becomes 6:6."""
    config = KueueConfig(preemption_strategies=["LessThanInitialShare"])
    sim = fair_pair("1", "1")
    sim.config = config
    for i in range(7):
        sim.add(f"b{i}", "lq-b", 1)
    sim.settle()
    for i in range(7):
        sim.add(f"a{i}", "lq-a", 1)
    sim.settle()
    running = sim.running()
    assert len([n for n in running if n.startswith("a")]) == 6
    assert len([n for n in running if n.startswith("b")]) == 6


def test_cohort_cycle_keeps_member_queues_out_of_scheduling():
    sim = Sim()
    sim.cohorts += [cohort("x", parent="y"), cohort("y", parent="x")]
    sim.cqs.append(cluster_queue("cq", 4, cohort="x"))
    sim.lqs.append(local_queue("lq", "cq"))
    sim.add("w", "lq", 1)
    sim.settle()
    assert sim.running() == set()
    cq = sim.snapshot().cluster_queues["cq"]
    assert (cq.active, cq.schedulable) == (True, False)  # status stays Active; the controller reports "inactive"
    sim.cohorts[1]["spec"].pop("parentName")  # break the cycle
    sim.queues.flush()
    sim.settle()
    assert sim.running() == {"w"}


def test_equivalent_workloads_are_set_aside_together():
    """SchedulingEquivalenceHashing: one failed evaluation sets aside every queued workload of the same shape."""
    sim = single_queue(2)
    sim.add("running", "lq", 2)
    sim.settle()
    for i in range(5):
        sim.add(f"same{i}", "lq", 1)
    sim.add("other", "lq", 1, priority=-1)  # a different shape is still evaluated
    results = Scheduler(sim.config, sim.queues).run(sim.snapshot(), sim.now)
    assert len(results) == 3  # same0 (+ 4 set aside), other, then nothing left to pop
    evaluated = [p.workload.name for r in results for p in r.pending if p.evaluated]
    assert evaluated == ["same0", "other"]
    sim.settle()
    assert sim.condition("same3", "QuotaReserved") is None  # never evaluated, as in Kueue
    sim.finish("running")
    sim.settle()
    assert sim.running() == {"same0", "same1"}


def test_set_aside_workload_that_was_evicted_shows_the_bypass_message():
    sim = single_queue(2, within="LowerPriority")
    sim.add("low1", "lq", 1, priority=1)
    sim.add("low2", "lq", 1, priority=1)
    sim.settle()
    sim.add("high", "lq", 2, priority=10)
    sim.settle()
    assert sim.running() == {"high"}
    first = sim.condition("low1", "QuotaReserved")
    second = sim.condition("low2", "QuotaReserved")
    assert {first["message"], second["message"]} == {
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor f, "
        "1 more needed",
        "Bypassed scheduling evaluation because an equivalent workload recently failed",
    }
    assert first["reason"] == second["reason"] == "WaitingForQuota"
