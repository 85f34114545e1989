"""The portal's cohort tree on one node pool: which cohorts and ClusterQueues Kueue holds for the organisation, with
their quotas, limits and weights. The one description of the tree; pure (plain values in, frozen dataclasses out).

Per pool:
- a root cohort whose nominal quota is the capacity no department was given (none when over-subscribed);
- under it a cohort per department with a quota row on the pool or a project that has one: nominal = its deserved
  quota not handed to its projects, borrowing limit = limit - deserved, its over-quota weight;
- under that a cohort per project with a quota row on the pool: no quota of its own, borrowing limit = limit -
  deserved (on the cohort, so both of its queues share it), its over-quota weight;
- under that the project's two ClusterQueues: `guaranteed` (nominal = deserved, never borrows, lends nothing when
  the project does not lend) for non-preemptible work, `elastic` (nominal 0, borrows) for preemptible work.

`worker/kueue_objects.py` writes this tree as Kueue objects (names from `kueue_names`); `apps/workloads/capacity.py`
runs Kueue's quota arithmetic on it. Departments and projects are whatever the caller identifies them by (`owner`: a
slug, an id, its own record), kept in the caller's order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Generic, TypeVar

DepartmentKey = TypeVar("DepartmentKey")
ProjectKey = TypeVar("ProjectKey")

DEFAULT_WEIGHT = Decimal(1)


@dataclass(frozen=True)
class PoolQuota:
    """A department's or project's quota row on the pool: deserved units, the most units including over-quota use
    (None: unlimited) and the over-quota weight that splits idle capacity."""

    deserved: int
    limit: int | None
    weight: Decimal = DEFAULT_WEIGHT
    # Optional CPU and memory quotas: only KAI Scheduler's Queues take them (worker/kai_objects.py); None: none set.
    cpu_cores: Decimal | None = None
    memory_gib: int | None = None

    @property
    def over_quota(self) -> int | None:
        """What the limit allows beyond the deserved quota: the cohort's borrowing limit (None: unbounded)."""
        return None if self.limit is None else max(0, self.limit - self.deserved)


NO_QUOTA = PoolQuota(deserved=0, limit=None)


@dataclass(frozen=True)
class ProjectMember(Generic[ProjectKey]):
    owner: ProjectKey
    quota: PoolQuota
    lends: bool = True  # False: its idle deserved quota stays with it (lendingLimit 0 on its guaranteed queue)


@dataclass(frozen=True)
class DepartmentMember(Generic[DepartmentKey, ProjectKey]):
    owner: DepartmentKey
    quota: PoolQuota | None  # None: no quota row of its own on the pool
    projects: tuple[ProjectMember[ProjectKey], ...] = ()  # those with a quota row on the pool


@dataclass(frozen=True)
class QueueQuota:
    """One of a project's two ClusterQueues on the pool (None: no such limit)."""

    guaranteed: bool
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None


@dataclass(frozen=True)
class ProjectCohort(Generic[ProjectKey]):
    """A project's cohort: no nominal quota of its own; its borrowing limit bounds both of its queues together."""

    owner: ProjectKey
    borrowing_limit: int | None
    weight: Decimal
    guaranteed: QueueQuota
    elastic: QueueQuota

    @property
    def queues(self) -> tuple[QueueQuota, QueueQuota]:
        return self.guaranteed, self.elastic


@dataclass(frozen=True)
class DepartmentCohort(Generic[DepartmentKey, ProjectKey]):
    owner: DepartmentKey
    nominal: int
    borrowing_limit: int | None
    weight: Decimal
    projects: tuple[ProjectCohort[ProjectKey], ...]


@dataclass(frozen=True)
class CohortTree(Generic[DepartmentKey, ProjectKey]):
    """The root cohort of a pool and everything under it; no departments: the pool has no quota rows."""

    nominal: int
    departments: tuple[DepartmentCohort[DepartmentKey, ProjectKey], ...]


def cohort_tree(*, capacity: int, departments: Iterable[DepartmentMember[DepartmentKey, ProjectKey]]
                ) -> CohortTree[DepartmentKey, ProjectKey]:
    """The pool's tree for its departments (with their projects); a department with neither a quota row nor a
    project on the pool has no place in it."""
    members = [department for department in departments if department.quota is not None or department.projects]
    assigned = sum(department.quota.deserved for department in members if department.quota is not None)
    # An over-subscribed pool leaves no unassigned quota.
    return CohortTree(nominal=max(0, capacity - assigned),
                      departments=tuple(_department_cohort(department) for department in members))


def _department_cohort(member: DepartmentMember[DepartmentKey, ProjectKey]
                       ) -> DepartmentCohort[DepartmentKey, ProjectKey]:
    quota = member.quota or NO_QUOTA
    handed_out = sum(project.quota.deserved for project in member.projects)
    return DepartmentCohort(owner=member.owner, nominal=max(0, quota.deserved - handed_out),
                            borrowing_limit=quota.over_quota, weight=quota.weight,
                            projects=tuple(_project_cohort(project) for project in member.projects))


def _project_cohort(member: ProjectMember[ProjectKey]) -> ProjectCohort[ProjectKey]:
    quota = member.quota
    return ProjectCohort(
        owner=member.owner, borrowing_limit=quota.over_quota, weight=quota.weight,
        guaranteed=QueueQuota(guaranteed=True, nominal=quota.deserved, borrowing_limit=0,
                              lending_limit=None if member.lends else 0),
        elastic=QueueQuota(guaranteed=False, nominal=0, borrowing_limit=None, lending_limit=None),
    )
