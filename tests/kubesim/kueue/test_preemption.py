"""Fair-sharing preemption asked again and again within one cycle (one Preemptor): the candidates it keeps ordered
per ClusterQueue follow every change of that queue's workloads, so each answer is the one a fresh search gives."""

from __future__ import annotations

from datetime import timedelta

from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler import Snapshot
from kubesim.kueue.scheduler.flavors import PREEMPT, Assignment, FlavorAssignment, PodSetAssignment
from kubesim.kueue.scheduler.model import workload_info
from kubesim.kueue.scheduler.preemption import Preemptor
from tests.kubesim.kueue.sim import T0
from tests.kubesim.kueue.test_upstream_preemption import CPU, cluster_queue, group, res, workload


def _snapshot(admitted: list[dict]) -> Snapshot:
    """Queue `a` (5 CPUs, empty) and queues `b` and `c` (no quota of their own: all they run is borrowed)."""
    return Snapshot.from_objects(
        resource_flavors=[{"metadata": {"name": "default"}, "spec": {}}],
        cohorts=[],
        cluster_queues=[
            cluster_queue("a", "all", group(default=[res(CPU, "5")]), within="LowerPriority", reclaim="Any"),
            cluster_queue("b", "all", group(default=[res(CPU, "0")])),
            cluster_queue("c", "all", group(default=[res(CPU, "0")])),
        ],
        local_queues=[{"metadata": {"name": "incoming", "namespace": ""}, "spec": {"clusterQueue": "a"}}],
        workloads=admitted,
        config=KueueConfig(fair_sharing=True),
        now=T0,
    )


def _admitted(name: str, queue: str, seconds: int) -> dict:
    return workload(name, 0, {CPU: "1"}, queue, reserved_at=T0 + timedelta(seconds=seconds))


def _victims(preemptor: Preemptor, snapshot: Snapshot) -> list[str]:
    """Whom a 1-CPU workload of queue `a` preempts."""
    wl = workload_info(workload("in", 0, {CPU: "1"}), snapshot.config)
    wl.cluster_queue = "a"
    assignment = Assignment()
    psa = PodSetAssignment("main", 1, {CPU: 1000})
    psa.flavors[CPU] = FlavorAssignment("default", PREEMPT, 0)
    assignment.podsets.append(psa)
    assignment.usage[("default", CPU)] = 1000
    return sorted(t.workload.name for t in preemptor.get_targets(wl, assignment))


def test_one_preemptor_follows_the_workloads_a_cycle_adds_and_takes_out():
    """The queue furthest above its share gives the victim, its most recently admitted workload first (between
    queues of equal share, the one whose next candidate comes first)."""
    admitted = [_admitted(f"c{i}", "c", i) for i in (1, 2, 3)] + [_admitted("b1", "b", 50), _admitted("b2", "b", 60)]
    snap = _snapshot(admitted)
    kept = Preemptor(snap, T0)  # one per cycle: asked for each head
    b, c = snap.cluster_queues["b"], snap.cluster_queues["c"]

    def agree() -> list[str]:
        victims = _victims(kept, snap)
        assert victims == _victims(Preemptor(snap, T0), snap)  # what a search from scratch answers
        return victims

    assert agree() == ["c3"]  # c borrows 3, b 2
    assert agree() == ["c3"]  # asked again

    snap.remove_workload(c.workloads["/c1"])  # e.g. this cycle's victim, left out of a recompute
    snap.add_workload(workload_info(_admitted("b3", "b", 70), snap.config))  # admitted later in the cycle
    assert agree() == ["b3"]  # b borrows 3, c 2

    for name in ("b1", "b2", "b3"):
        snap.remove_workload(b.workloads[f"/{name}"])
    snap.remove_workload(c.workloads["/c3"])
    assert agree() == ["c2"]  # c is the only queue left borrowing
    assert not b.workloads
    assert sorted(c.workloads) == ["/c2"]  # every question left the snapshot as it was
