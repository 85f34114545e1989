"""The Fair Sharing tournament is kept between picks (only the winner's path is measured and played again), is not
played when at most one entry fits, and stops when no entry left would be admitted or preempt; the decisions must be
exactly those of Kueue's tournament played from scratch after every pick in every cycle (scheduler.go's fair sharing
iterator, which recomputes every share after each admission). The reference below is that from-scratch form."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta

import pytest

from kubesim.kueue.scheduler import Scheduler
from kubesim.kueue.scheduler.quota import add_usage, dominant_resource_share, remove_usage
from tests.kubesim.kueue.sim import Sim
from tests.kubesim.kueue.test_invariants import random_sim


class FromScratch(Scheduler):
    """Every share measured again and every tournament played again before each pick, in every cycle (no shortcut
    when at most one entry fits, or when no entry left can be admitted or preempt)."""

    def _order(self, snapshot, entries: list, *, gated: bool):
        return self._tournament(entries), True

    def _settled(self, snapshot, entries, preempted_keys) -> bool:
        return False

    def _tournament(self, entries: list) -> Iterator:
        by_cq = {id(e.queue): e for e in entries}
        remaining = sorted(entries, key=lambda e: e.queue.name)
        while remaining:
            first = remaining[0]
            winner = first
            if first.queue.parent is not None:
                root = first.queue.parent.root()
                shares = self._shares(root, by_cq)
                winner = self._play(root, by_cq, shares)
            remaining.remove(winner)
            del by_cq[id(winner.queue)]
            yield winner

    @staticmethod
    def _shares(root, by_cq: dict) -> dict:
        shares = {}
        for cq in root.subtree_cluster_queues():
            e = by_cq.get(id(cq))
            if e is None:
                continue
            usage = dict(e.assignment.usage) if not e.wl.has_reservation else {}
            for fr, v in usage.items():
                add_usage(cq, fr, v)
            drs = dominant_resource_share(cq)
            for ancestor in cq.path_to_root():
                shares[(id(ancestor), e.wl.key)] = (drs, usage)
                drs = dominant_resource_share(ancestor)
            for fr, v in usage.items():
                remove_usage(cq, fr, v)
        return shares

    def _play(self, cohort, by_cq: dict, shares: dict):
        candidates = [w for child in cohort.child_cohorts if (w := self._play(child, by_cq, shares)) is not None]
        candidates += [by_cq[id(cq)] for cq in cohort.child_cqs if id(cq) in by_cq]
        best = None
        for cur in candidates:
            if best is None or self._less(cur, best, id(cohort), shares):
                best = cur
        return best


def _history(sim: Sim) -> list:
    return sorted((name, sim.cq_of(name)) for name in sim.running())


@pytest.mark.parametrize("seed", range(120))
def test_kept_tournament_decides_as_the_one_played_from_scratch(seed: int):
    kept, scratch = random_sim(seed, True), random_sim(seed, True)
    scratch.scheduler = FromScratch
    rng = random.Random(seed * 104729)
    n = 0
    for _round in range(5):
        for _ in range(rng.randint(4, 14)):
            n += 1
            args = (f"w{n}", f"lq{rng.randrange(len(kept.cqs))}", rng.randint(1, 4))
            priority = rng.choice([0, 10, 100])
            kept.add(*args, priority=priority)
            scratch.add(*args, priority=priority)
        for sim in (kept, scratch):
            sim.settle()
        assert _history(kept) == _history(scratch)
        assert [(p.victim.key, p.preemptor.key) for p in kept.preemptions] == [
            (p.victim.key, p.preemptor.key) for p in scratch.preemptions]
        for name in rng.sample(sorted(kept.running()), k=min(len(kept.running()), rng.randint(1, 4))):
            kept.finish(name)
            scratch.finish(name)
        for sim in (kept, scratch):
            sim.now += timedelta(seconds=2)
            sim.settle()
        assert _history(kept) == _history(scratch)
