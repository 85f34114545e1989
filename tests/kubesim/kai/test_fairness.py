"""KAI's division of a pool's GPUs into fair shares (kubesim.kai.fairness), on the examples of KAI's fairness docs."""

from __future__ import annotations

from kubesim.kai.fairness import QueueNode, fair_shares, forest, requests


def shares(queues: list[QueueNode], asked: dict[str, float], capacity: float) -> dict[str, float]:
    roots = forest(queues)
    return {k: round(v, 6) for k, v in fair_shares(roots, requests(roots, asked), capacity).items()}


def test_deserved_quota_first_then_the_surplus_by_weight():
    queues = [QueueNode("a", quota=2, limit=-1, weight=1), QueueNode("b", quota=2, limit=-1, weight=3)]
    assert shares(queues, {"a": 10, "b": 10}, 12) == {"a": 4.0, "b": 8.0}


def test_a_queue_never_gets_more_than_it_asks_or_its_limit():
    queues = [QueueNode("a", quota=0, limit=3, weight=1), QueueNode("b", quota=0, limit=-1, weight=1),
              QueueNode("c", quota=1, limit=0, weight=5)]
    assert shares(queues, {"a": 10, "b": 2, "c": 10}, 10) == {"a": 3.0, "b": 2.0, "c": 1.0}


def test_the_higher_priority_bucket_takes_the_surplus_first():
    queues = [QueueNode("p2", priority=2, limit=-1, weight=1), QueueNode("p1", priority=1, limit=-1, weight=100)]
    assert shares(queues, {"p2": 6, "p1": 6}, 8) == {"p2": 6.0, "p1": 2.0}


def test_a_parents_share_is_divided_between_its_children():
    queues = [QueueNode("dept-a", quota=4, limit=-1), QueueNode("dept-b", quota=4, limit=-1),
              QueueNode("a1", parent="dept-a", quota=1, limit=-1, weight=1),
              QueueNode("a2", parent="dept-a", quota=1, limit=-1, weight=2),
              QueueNode("b1", parent="dept-b", quota=4, limit=-1)]
    got = shares(queues, {"a1": 8, "a2": 8, "b1": 1}, 8)
    assert got["dept-a"] == 7.0 and got["dept-b"] == 1.0
    assert (got["a1"], got["a2"]) == (round(1 + 5 / 3, 6), round(1 + 10 / 3, 6))
