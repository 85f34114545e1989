"""The controllers' patched snapshots must equal a snapshot built from scratch: incremental passes are an
optimisation, never a different answer. The job integration's passes look at the Jobs that changed, not at all."""

from __future__ import annotations

from kubesim.kueue.controllers import SchedulerController, StatusController
from kubesim.kueue.integrations.jobframework import JobReconciler
from kubesim.kueue.scheduler import Snapshot
from kubesim.kueue.state import build_snapshot

from .conftest import Cluster


def _view(snap: Snapshot) -> tuple:
    pending = {cq: [w.key for w in wls] for cq, wls in snap.pending.items() if wls}
    orphans = [(w.key, reason, message) for w, reason, message in snap.orphans]
    reserving = {
        name: sorted((k, w.cluster_queue, w.reserved_at, sorted(w.usage.items())) for k, w in cq.workloads.items())
        for name, cq in snap.cluster_queues.items()
    }
    # The quota trees as the scheduler reads them: usage (zero entries aside) and subtree quota of every node.
    nodes = [*snap.cluster_queues.values(), *snap.cohorts.values()]
    tree = {
        (node.is_cohort, node.name): (
            sorted((fr, v) for fr, v in node.usage.items() if v),
            sorted(node.subtree_quota.items()),
            node.parent.name if node.parent else None,
        )
        for node in nodes
    }
    return pending, orphans, sorted(snap.workloads), reserving, tree, sorted(snap.lq_usage.items())


def _check(kc: Cluster) -> None:
    sim = kc.ks.sim
    with sim.store.lock:
        for c in sim.controllers:
            if isinstance(c, StatusController):
                assert _view(c._live.snap) == _view(build_snapshot(sim.store, c.config, None))
            if isinstance(c, SchedulerController):
                assert _view(c._live.snap) == _view(build_snapshot(sim.store, c.config, sim.clock.now()))


def _lq_pending(kc: Cluster, ns: str, name: str) -> int:
    return kc.get("localqueues", name, ns).get("status", {}).get("pendingWorkloads")


def test_patched_snapshots_match_full_builds(kc: Cluster) -> None:
    kc.flavor()
    kc.cluster_queue("held", 2, stopPolicy="Hold")
    kc.cluster_queue("open", 1)
    ns = kc.namespace()
    kc.local_queue("lq-held", "held", ns)
    kc.local_queue("lq-open", "open", ns)
    kc.settle()
    for i in range(4):
        kc.job(ns, f"h{i}", "lq-held")
        kc.job(ns, f"o{i}", "lq-open")
        kc.job(ns, f"x{i}", "lq-missing")
        _check(kc)
    kc.settle()
    _check(kc)
    assert _lq_pending(kc, ns, "lq-held") == 4
    assert _lq_pending(kc, ns, "lq-open") == 3
    assert sum(kc.admitted(ns, f"o{i}") for i in range(4)) == 1
    kc.local_queue("lq-missing", "open", ns)
    _check(kc)
    kc.batch.delete_namespaced_job(
        next(f"o{i}" for i in range(4) if kc.admitted(ns, f"o{i}")), ns, propagation_policy="Background"
    )
    kc.settle()
    _check(kc)
    kc.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "held", {"spec": {"stopPolicy": "None"}}
    )
    kc.settle()
    _check(kc)
    assert sum(kc.admitted(ns, f"h{i}") for i in range(4)) == 2  # same-second ties are ordered by UID
    assert _lq_pending(kc, ns, "lq-held") == 2


def _job_controller(kc: Cluster) -> JobReconciler:
    return next(c for c in kc.ks.sim.controllers if isinstance(c, JobReconciler) and c.kind.kind == "Job")


def test_a_new_job_is_reconciled_without_visiting_the_others(kc: Cluster) -> None:
    """Creates arrive while thousands of Jobs exist: each settle after one create must look at that Job (a few
    passes: its Workload created, admitted, the Job started), never at every Job."""
    kc.flavor()
    kc.cluster_queue("cq", 100)
    ns = kc.namespace()
    kc.local_queue("lq", "cq", ns)
    for i in range(40):
        kc.job(ns, f"old-{i}", "lq")
    kc.settle()
    controller = _job_controller(kc)
    before = controller.visited
    kc.job(ns, "new", "lq")
    kc.settle()
    assert kc.admitted(ns, "new")
    assert controller.visited - before <= 5
    # A flavor change is a broad trigger (every Job's Workload may read it): that pass does look at all 41.
    before = controller.visited
    kc.flavor("a100", "a100")
    assert controller.visited - before >= 41
