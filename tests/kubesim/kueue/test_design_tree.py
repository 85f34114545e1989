"""The design's per-pool cohort tree (docs/architecture.md, The organisation in Kueue): root / department / project
cohorts, and a guaranteed plus an elastic ClusterQueue per project. Outcomes from
the shared reference's quota-mapping-review.md, section 3.3.

The tree is the portal's own mapping (worker.kueue_objects.desired_objects on an organisation snapshot), applied to
kubesim's scheduler, so these outcomes fail if the mapping drifts from the design.
"""

from __future__ import annotations

from decimal import Decimal

from apps.core.kueue_names import KueueNames, local_queue
from tests.kubesim.kueue.sim import GPU, Sim
from worker.kueue_objects import DepartmentSpec, OrgSnapshot, PoolQuota, PoolSpec, ProjectSpec, desired_objects

POOL = "h100"
NP, PREEMPTIBLE = 125, 75
# The default prefixes, whatever this installation configures: the preemption paths below spell them out.
NAMES = KueueNames()


def quota(deserved: int, weight: str | None = None) -> PoolQuota:
    return PoolQuota(deserved=deserved, limit=None, weight=Decimal(weight or 1))


def org(capacity: int, departments: dict[str, dict], project_weights: dict[str, str] | None = None) -> OrgSnapshot:
    """departments: {dept: {"deserved": D, "weight": w, "projects": {proj: deserved}}}, all on one pool."""
    return OrgSnapshot(
        pools=(PoolSpec(slug=POOL, gpu_resource=GPU, capacity=capacity, node_labels={"portal.gpu/pool": POOL}),),
        departments=tuple(
            DepartmentSpec(
                slug=dept, quotas={POOL: quota(d["deserved"], d.get("weight"))},
                projects=tuple(
                    ProjectSpec(slug=proj, namespace=NAMES.project_namespace(proj), does_not_lend=False,
                                quotas={POOL: quota(deserved, (project_weights or {}).get(proj))})
                    for proj, deserved in d["projects"].items()
                ),
            )
            for dept, d in departments.items()
        ),
        priority_classes=(),
    )


def build(capacity: int, departments: dict[str, dict], project_weights: dict[str, str] | None = None) -> Sim:
    """A scheduler holding exactly the objects the portal maps this organisation to."""
    sim = Sim()
    sim.apply(desired_objects(org(capacity, departments, project_weights), NAMES))
    return sim


def s1() -> Sim:
    return build(16, {"d1": {"deserved": 8, "projects": {"p": 4, "q": 4}}, "d2": {"deserved": 8, "projects": {"x": 8}}})


def submit(sim: Sim, proj: str, queue: str, n: int, gpu: int = 1, prefix: str | None = None) -> list[str]:
    """n workloads in the project's LocalQueue of that kind, as the portal's Jobs land (names `<proj>-<g|e>-<i>`)."""
    guaranteed = queue == "guaranteed"
    prio = NP if guaranteed else PREEMPTIBLE
    names = []
    for i in range(n):
        name = f"{prefix or proj + '-' + queue[0]}-{i}"
        sim.add(name, local_queue(POOL, guaranteed=guaranteed), gpu, namespace=NAMES.project_namespace(proj),
                priority=prio)
        names.append(name)
    return names


def test_non_preemptible_work_is_never_preempted():
    sim = s1()
    p_np = submit(sim, "p", "guaranteed", 4)
    q_np = submit(sim, "q", "guaranteed", 2)
    sim.settle()
    assert set(p_np + q_np) <= sim.running()
    # everyone floods the pool with preemptible work, including P itself
    for proj in ("p", "q", "x"):
        submit(sim, proj, "elastic", 16)
    sim.settle()
    assert set(p_np + q_np) <= sim.running()
    assert not any(p.victim.name in p_np + q_np for p in sim.preemptions)
    # P's own elastic work cannot take P's deserved quota from P's guaranteed work
    assert not any(n.startswith("p-e") for n in sim.running())
    assert len(sim.running()) == 16


def test_guaranteed_work_reclaims_lent_quota_in_cohort_reclamation():
    sim = s1()
    q_el = submit(sim, "q", "elastic", 8)  # Q uses P's idle deserved quota
    x_el = submit(sim, "x", "elastic", 8)  # X uses its own deserved quota: the pool is full
    sim.settle()
    assert set(q_el + x_el) == sim.running()
    p_np = submit(sim, "p", "guaranteed", 4)
    sim.settle()
    assert set(p_np) <= sim.running()
    assert len(sim.preemptions) == 4
    assert {p.reason for p in sim.preemptions} == {"InCohortReclamation"}
    msg = sim.preemptions[0].message
    assert "due to reclamation within the cohort; preemptor path: /portal-h100/dept-d1-h100/proj-p-h100/" in msg
    assert msg.endswith("preemptee path: /portal-h100/dept-d1-h100/proj-q-h100/proj-q-h100-elastic")
    victim = sim.workloads[sim.preemptions[0].victim.name]
    assert victim["status"]["conditions"]


def test_elastic_work_reclaims_lent_quota_with_fair_sharing():
    sim = s1()
    q_el = submit(sim, "q", "elastic", 8)
    x_el = submit(sim, "x", "elastic", 8)
    sim.settle()
    assert set(q_el + x_el) == sim.running()
    p_el = submit(sim, "p", "elastic", 4)
    sim.settle()
    assert set(p_el) <= sim.running()
    assert {p.reason for p in sim.preemptions} == {"InCohortFairSharing"}
    assert len([n for n in sim.running() if n.startswith("q-")]) == 4


def test_reclaim_across_departments():
    sim = s1()
    x_el = submit(sim, "x", "elastic", 12)  # X borrows 4 from department d1
    q_el = submit(sim, "q", "elastic", 4)  # Q at its deserved quota
    sim.settle()
    assert set(x_el + q_el) == sim.running()
    p_np = submit(sim, "p", "guaranteed", 4)
    sim.settle()
    assert set(p_np) <= sim.running()
    assert len(sim.preemptions) == 4
    assert all(p.victim.name.startswith("x-e") for p in sim.preemptions)


def test_project_within_deserved_is_protected_from_other_projects():
    sim = s1()
    p_el = submit(sim, "p", "elastic", 4)  # P at its deserved quota, with preemptible work only
    q_el = submit(sim, "q", "elastic", 6)  # Q above its deserved quota
    sim.settle()
    assert set(p_el + q_el) <= sim.running()
    x_np = submit(sim, "x", "guaranteed", 8)
    sim.settle()
    assert set(x_np) <= sim.running()
    assert set(p_el) <= sim.running()  # P was never a victim
    assert {p.victim.name for p in sim.preemptions} <= set(q_el)


def test_over_quota_splits_by_project_weight():
    sim = build(12, {"d1": {"deserved": 0, "projects": {"p": 0, "q": 0}}}, project_weights={"p": "2", "q": "1"})
    submit(sim, "p", "elastic", 12)
    submit(sim, "q", "elastic", 12)
    sim.settle()
    running = sim.running()
    assert len([n for n in running if n.startswith("p-")]) == 8
    assert len([n for n in running if n.startswith("q-")]) == 4


def test_over_quota_splits_by_department_weight():
    sim = build(
        12,
        {
            "d1": {"deserved": 0, "weight": "3", "projects": {"p": 0}},
            "d2": {"deserved": 0, "weight": "1", "projects": {"x": 0}},
        },
    )
    submit(sim, "p", "elastic", 12)
    submit(sim, "x", "elastic", 12)
    sim.settle()
    running = sim.running()
    assert len([n for n in running if n.startswith("p-")]) == 9
    assert len([n for n in running if n.startswith("x-")]) == 3


def test_guaranteed_queue_never_exceeds_deserved():
    sim = s1()
    p_np = submit(sim, "p", "guaranteed", 6)
    sim.settle()
    assert len(set(p_np) & sim.running()) == 4
    pending = [n for n in p_np if n not in sim.running()]
    qr = sim.condition(pending[0], "QuotaReserved")
    assert qr["reason"] == "WaitingForQuota"
