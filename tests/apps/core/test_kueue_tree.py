"""The one description of a pool's cohort tree: what each cohort and ClusterQueue holds, from the quota rows."""

from __future__ import annotations

from decimal import Decimal

from apps.core.kueue_tree import DepartmentMember, PoolQuota, ProjectMember, QueueQuota, cohort_tree
from apps.workloads.capacity import DepartmentQuota, PoolTree, ProjectQuota


def test_each_level_holds_what_its_parent_did_not_hand_down():
    tree = cohort_tree(capacity=16, departments=[
        DepartmentMember("research", PoolQuota(10, 12, Decimal(2)), projects=(
            ProjectMember("vision", PoolQuota(4, 8, Decimal("1.5"))),
            ProjectMember("serving", PoolQuota(2, None), lends=False),
        )),
    ])
    assert tree.nominal == 6  # 16 - the department's 10
    (research,) = tree.departments
    assert (research.owner, research.nominal, research.borrowing_limit, research.weight) == (
        "research", 4, 2, Decimal(2))
    vision, serving = research.projects
    assert (vision.owner, vision.borrowing_limit, vision.weight) == ("vision", 4, Decimal("1.5"))
    assert vision.guaranteed == QueueQuota(guaranteed=True, nominal=4, borrowing_limit=0, lending_limit=None)
    assert vision.elastic == QueueQuota(guaranteed=False, nominal=0, borrowing_limit=None, lending_limit=None)
    assert serving.borrowing_limit is None
    assert serving.guaranteed.lending_limit == 0  # it does not lend


def test_members_without_quota_and_over_subscribed_pools():
    tree = cohort_tree(capacity=8, departments=[
        DepartmentMember("big", PoolQuota(10, None)),
        DepartmentMember("empty", None),  # no quota row and no project on the pool: not in the tree
        DepartmentMember("quotaless", None, projects=(ProjectMember("p", PoolQuota(2, None)),)),
    ])
    assert tree.nominal == 0  # over-subscribed: nothing left unassigned
    assert [d.owner for d in tree.departments] == ["big", "quotaless"]
    quotaless = tree.departments[1]
    assert (quotaless.nominal, quotaless.borrowing_limit, quotaless.weight) == (0, None, Decimal(1))
    assert cohort_tree(capacity=8, departments=[]).departments == ()


def test_capacity_reads_the_same_tree():
    pool = PoolTree.build(capacity=16, departments=[DepartmentQuota(1, 10, 12)],
                          projects=[ProjectQuota(7, 1, 4, 8), ProjectQuota(8, 1, 2, None, lends=False)])
    department = pool.root.children[0]
    assert (pool.root.nominal, department.nominal, department.borrowing_limit) == (6, 4, 2)
    vision = pool.queues[(7, True)].parent
    assert vision is not None and vision.borrowing_limit == 4
    assert (pool.queues[(7, True)].nominal, pool.queues[(7, True)].borrowing_limit) == (4, 0)
    assert pool.queues[(8, True)].lending_limit == 0
    assert pool.queues[(7, False)].nominal == 0 and pool.queues[(7, False)].borrowing_limit is None
