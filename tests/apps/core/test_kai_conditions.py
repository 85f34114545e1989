"""KAI Scheduler's vocabulary as the portal reads it (apps/core/kai_conditions.py)."""

from decimal import Decimal

from apps.core import kai_conditions as kai


def test_the_current_condition_and_its_first_reason():
    old = {"type": "UnschedulableOnNodePool", "status": "True", "reasons": [{"reason": "OverLimit"}]}
    new = {"type": "UnschedulableOnNodePool", "status": "True", "reason": "Unschedulable", "reasons": []}
    assert kai.scheduling_condition([old, new]) == new and kai.scheduling_condition(None) == {}
    assert (kai.reason_of(old), kai.reason_of(new), kai.reason_of({})) == ("OverLimit", "Unschedulable", "Pending")


def test_gpu_amounts_and_what_nodes_lack():
    assert kai.gpus({"nvidia.com/gpu": "1500m"}) == Decimal("1.5") and kai.gpus({"nvidia.com/gpu": "2"}) == 2
    assert kai.gpus({}) is None and kai.gpus({"nvidia.com/gpu": "lots"}) is None
    message = ("0/4 nodes are available, 1 node(s) didn't have enough resources: CPU cores, 3 node(s) didn't have "
               "enough resources: GPUs.")
    assert kai.lacking(message) == ["CPU cores", "GPUs"]


def test_the_preemptor_named_in_an_eviction():
    reclaim = kai.PREEMPTOR.search("Pod team/wl-3-x was preempted by workload nlp/wl-9.")
    assert reclaim and (reclaim["namespace"], reclaim["name"], reclaim["priority"]) == ("nlp", "wl-9", None)
    same = kai.PREEMPTOR.search("Pod team/wl-3-x was preempted by higher priority workload team/wl-4")
    assert same and (same["name"], bool(same["priority"])) == ("wl-4", True)
