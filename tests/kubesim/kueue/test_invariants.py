"""Randomised cohort trees and workloads: whatever the scheduler decides, quota is never overcommitted."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler.quota import available
from tests.kubesim.kueue.sim import Sim, cluster_queue, cohort, local_queue


def random_sim(seed: int, fair: bool) -> Sim:
    rng = random.Random(seed)
    sim = Sim(KueueConfig(fair_sharing=fair))
    sim.cohorts.append(cohort("root", nominal=rng.randint(0, 4)))
    for d in range(rng.randint(1, 3)):
        sim.cohorts.append(cohort(f"d{d}", parent="root", nominal=rng.randint(0, 4), weight=str(rng.randint(0, 3))))
    policies = ["Never", "LowerPriority", "Any"]
    for c in range(rng.randint(2, 6)):
        parent = rng.choice([c_["metadata"]["name"] for c_ in sim.cohorts])
        borrowing = rng.choice([None, 0, rng.randint(1, 6)])
        nominal = rng.randint(0, 6)
        lending = rng.choice([None, None, rng.randint(0, nominal)])
        sim.cqs.append(
            cluster_queue(
                f"cq{c}",
                nominal,
                cohort=parent,
                borrowing=borrowing,
                lending=lending,
                within=rng.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
                reclaim=rng.choice(policies),
                strategy=rng.choice(["BestEffortFIFO", "StrictFIFO"]),
                weight=str(rng.randint(0, 3)),
            )
        )
        sim.lqs.append(local_queue(f"lq{c}", f"cq{c}"))
    return sim


def assert_no_overcommit(sim: Sim) -> None:
    snap = sim.snapshot()
    for cq in snap.cluster_queues.values():
        for fr, used in cq.usage.items():
            assert available(cq, fr) >= 0, (cq.name, fr, used)
            q = cq.quotas[fr]
            if q.borrowing_limit is not None:
                assert used <= q.nominal + q.borrowing_limit, (cq.name, used)
    for node in snap.cohorts.values():
        if node.parent is None:
            for fr, used in node.usage.items():
                assert used <= node.subtree_quota.get(fr, 0), (node.name, fr)


@pytest.mark.parametrize("fair", [True, False])
@pytest.mark.parametrize("seed", range(40))
def test_random_scenarios_never_overcommit(seed: int, fair: bool):
    sim = random_sim(seed, fair)
    rng = random.Random(seed * 7919)
    n = 0
    for _round in range(4):
        for _ in range(rng.randint(3, 10)):
            n += 1
            sim.add(f"w{n}", f"lq{rng.randrange(len(sim.cqs))}", rng.randint(1, 4), priority=rng.choice([0, 10, 100]))
        sim.settle()  # raises when the scheduler does not settle
        assert_no_overcommit(sim)
        sim.now += timedelta(seconds=2)  # paced releases of repeatedly preempted workloads come due
        sim.settle()
        assert_no_overcommit(sim)
        running = sorted(sim.running())
        for name in rng.sample(running, k=min(len(running), rng.randint(0, 3))):
            sim.finish(name)
        sim.settle()
        assert_no_overcommit(sim)
