"""The visibility API keeps each ClusterQueue's pending order between asks (kubesim.kueue.visibility.PendingOrder):
asked again with nothing written it answers from what it kept, a write to a workload of the queue makes the order
again, and the answers are those of an order made from nothing."""

from __future__ import annotations

from kubesim.kueue.visibility import PendingOrder
from tests.kubesim.kueue.conftest import Cluster
from tests.kubesim.kueue.test_e2e import setup_queue


def rows(items: list[dict]) -> list[tuple]:
    return [(i["metadata"]["ownerReferences"][0]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
            for i in items]


def test_a_kept_order_answers_until_a_write_touches_its_queue(kc: Cluster):
    kc.priority_class("urgent", 100)
    ns = setup_queue(kc, 1)
    kc.local_queue("lq2", "cq", ns)
    kc.cluster_queue("other", 0)
    kc.local_queue("elsewhere", "other", ns)
    for name, queue in (("running", "lq"), ("a", "lq"), ("b", "lq2"), ("waits", "elsewhere")):
        kc.job(ns, name, queue, 1)
        kc.settle(1)
    order = kc.ks.sim.kueue.pending_order
    assert rows(kc.pending_cq("cq")) == [("a", 0, 0), ("b", 1, 0)]
    assert rows(kc.pending_lq(ns, "elsewhere")) == [("waits", 0, 0)]
    kept, kept_other = order.by_cluster_queue["cq"][1], order.by_cluster_queue["other"][1]
    assert rows(kc.pending_lq(ns, "lq2")) == [("b", 1, 0)]
    assert order.by_cluster_queue["cq"][1] is kept  # nothing written since: what it kept

    kc.job(ns, "c", "lq", 1, priority_class="urgent")  # a write to a workload of cq
    kc.settle(1)
    assert rows(kc.pending_cq("cq")) == [("c", 0, 0), ("a", 1, 1), ("b", 2, 0)]
    assert rows(kc.pending_lq(ns, "lq")) == [("c", 0, 0), ("a", 1, 1)]
    assert order.by_cluster_queue["cq"][1] is not kept
    assert rows(kc.pending_lq(ns, "elsewhere")) == [("waits", 0, 0)]
    assert order.by_cluster_queue["other"][1] is kept_other  # not its queue's

    kc.batch.delete_namespaced_job("running", ns, propagation_policy="Background")  # c is admitted in its place
    kc.settle(1)
    assert rows(kc.pending_cq("cq")) == [("a", 0, 0), ("b", 1, 0)]
    store = kc.ks.sim.store
    with store.lock:
        made_afresh = PendingOrder(kc.ks.sim.kueue.state)
        for queue, local in (("cq", None), ("cq", (ns, "lq2")), ("other", None)):
            assert [(wl.key, at, in_lq) for wl, at, in_lq in order.positions(store, queue, local)] == [
                (wl.key, at, in_lq) for wl, at, in_lq in made_afresh.positions(store, queue, local)]
