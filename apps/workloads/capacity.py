"""Kueue's quota arithmetic over the portal's cohort tree of one pool, as pure functions.

The tree is `apps.core.kueue_tree`'s, the one `worker/kueue_objects.py` writes: here each of its cohorts and
ClusterQueues becomes a `Node` carrying its mirrored usage. `available` and `potential_available` follow Kueue's
`resource_node.go` (and kubesim's port of it), so "N more needed" here is the number Kueue writes in its own message
when the mirror is up to date.

Input is the organisation's quotas (what the pages show) and the mirrored usage of each ClusterQueue; no ORM here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal

from apps.core.kueue_names import queue_kind
from apps.core.kueue_tree import DepartmentMember, PoolQuota, ProjectMember, cohort_tree

ZERO = Decimal(0)


@dataclass(eq=False)
class Node:
    """A cohort or a ClusterQueue: its own quota on the pool's one resource, its subtree quota and usage."""

    name: str
    nominal: Decimal = ZERO
    borrowing_limit: Decimal | None = None
    lending_limit: Decimal | None = None
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    subtree: Decimal = ZERO
    usage: Decimal = ZERO

    def add(self, child: Node) -> Node:
        child.parent = self
        self.children.append(child)
        return child

    def path(self) -> Iterator[Node]:
        """This node and its ancestors, up to the root."""
        node: Node | None = self
        while node is not None:
            yield node
            node = node.parent


def local_quota(node: Node) -> Decimal:
    """Capacity a lending limit keeps inside the node's subtree (never visible to its parent)."""
    if node.lending_limit is None:
        return ZERO
    return max(ZERO, node.subtree - node.lending_limit)


def local_available(node: Node) -> Decimal:
    return max(ZERO, local_quota(node) - node.usage)


def available(node: Node) -> Decimal:
    """Unused capacity the node may take now, honouring borrowing limits up the tree (may be negative)."""
    if node.parent is None:
        return node.subtree - node.usage
    parent_available = available(node.parent)
    if node.borrowing_limit is not None:
        kept = local_quota(node)
        stored_in_parent = node.subtree - kept
        used_in_parent = max(ZERO, node.usage - kept)
        parent_available = min(stored_in_parent - used_in_parent + node.borrowing_limit, parent_available)
    return local_available(node) + parent_available


def potential_available(node: Node) -> Decimal:
    """The most the node could ever use with nothing else running (bounded by borrowing limits)."""
    if node.parent is None:
        return node.subtree
    most = local_quota(node) + potential_available(node.parent)
    if node.borrowing_limit is not None:
        most = min(node.subtree + node.borrowing_limit, most)
    return most


def _units(value: int | None) -> Decimal | None:
    return None if value is None else Decimal(value)


def _settle(node: Node) -> None:
    """Subtree quotas and cohort usage bottom-up (ClusterQueue usage is set already)."""
    if not node.children:
        node.subtree = node.nominal
        return
    node.subtree, node.usage = node.nominal, ZERO
    for child in node.children:
        _settle(child)
        kept = local_quota(child)
        node.subtree += child.subtree - kept
        node.usage += max(ZERO, child.usage - kept)


@dataclass(frozen=True)
class ProjectQuota:
    """One project's quota and mirrored usage on the pool."""

    project_id: int
    department_id: int
    deserved: int
    limit: int | None
    lends: bool = True
    guaranteed_used: Decimal = ZERO
    elastic_used: Decimal = ZERO

    @property
    def used(self) -> Decimal:
        return self.guaranteed_used + self.elastic_used

    @property
    def held_back(self) -> Decimal:
        """Deserved units idle but kept from everyone else (a project that does not lend)."""
        return ZERO if self.lends else max(ZERO, self.deserved - self.guaranteed_used)


@dataclass(frozen=True)
class DepartmentQuota:
    department_id: int
    deserved: int = 0
    limit: int | None = None


@dataclass(frozen=True)
class Assessment:
    """What the tree says about `units` more in one queue: free now, ever, and which level is short.

    `short_at` is the lowest level of the queue's path whose own bound leaves less than the request
    ("queue", "project", "department" or "pool"; None when it fits); `room` maps each level to what its bound
    leaves for this queue (None: no bound of its own).
    """

    units: int
    available: Decimal
    potential: Decimal
    short_at: str | None
    room: dict[str, Decimal | None]

    @property
    def fits(self) -> bool:
        return self.available >= self.units

    @property
    def ever_fits(self) -> bool:
        return self.potential >= self.units

    @property
    def more_needed(self) -> Decimal:
        return max(ZERO, self.units - max(ZERO, self.available))


LEVELS = ("queue", "project", "department", "pool")


@dataclass
class PoolTree:
    """The cohort tree of one pool with its usage; `assess` answers for one project's queue."""

    capacity: int
    projects: dict[int, ProjectQuota]
    departments: dict[int, DepartmentQuota]
    root: Node
    queues: dict[tuple[int, bool], Node]  # (project id, guaranteed) -> ClusterQueue node
    # What `assess` answered, by its arguments: the tree does not change once built, and a page's waiting rows ask
    # the same few questions (a queue's rows mostly one project's queue and a few sizes) many times over.
    _assessed: dict[tuple[int, bool, int], Assessment | None] = field(default_factory=dict, init=False, repr=False,
                                                                       compare=False)

    @classmethod
    def build(cls, *, capacity: int, departments: Iterable[DepartmentQuota],
              projects: Iterable[ProjectQuota]) -> PoolTree:
        by_department: dict[int, list[ProjectQuota]] = {}
        project_map = {}
        for project in projects:
            by_department.setdefault(project.department_id, []).append(project)
            project_map[project.project_id] = project
        department_map = {d.department_id: d for d in departments}
        for department_id in by_department:
            department_map.setdefault(department_id, DepartmentQuota(department_id))
        tree = cohort_tree(capacity=capacity, departments=[
            DepartmentMember(owner=department.department_id,
                             quota=PoolQuota(deserved=department.deserved, limit=department.limit),
                             projects=tuple(ProjectMember(owner=project.project_id, quota=PoolQuota(
                                 deserved=project.deserved, limit=project.limit), lends=project.lends)
                                 for project in by_department.get(department.department_id, [])))
            for department in department_map.values()
        ])
        root = Node("pool", nominal=Decimal(tree.nominal))
        queues: dict[tuple[int, bool], Node] = {}
        for department_cohort in tree.departments:
            cohort = root.add(Node(f"department:{department_cohort.owner}", nominal=Decimal(department_cohort.nominal),
                                   borrowing_limit=_units(department_cohort.borrowing_limit)))
            for project_cohort in department_cohort.projects:
                project = project_map[project_cohort.owner]
                node = cohort.add(Node(f"project:{project.project_id}",
                                       borrowing_limit=_units(project_cohort.borrowing_limit)))
                for queue, used in ((project_cohort.guaranteed, project.guaranteed_used),
                                    (project_cohort.elastic, project.elastic_used)):
                    queues[(project.project_id, queue.guaranteed)] = node.add(Node(
                        f"{queue_kind(guaranteed=queue.guaranteed)}:{project.project_id}",
                        nominal=Decimal(queue.nominal), borrowing_limit=_units(queue.borrowing_limit),
                        lending_limit=_units(queue.lending_limit), usage=used))
        _settle(root)
        return cls(capacity=capacity, projects=project_map, departments=department_map, root=root, queues=queues)

    @property
    def used(self) -> Decimal:
        return sum((p.used for p in self.projects.values()), ZERO)

    def department_used(self, department_id: int) -> Decimal:
        return sum((p.used for p in self.projects.values() if p.department_id == department_id), ZERO)

    def assess(self, *, project_id: int, guaranteed: bool, units: int) -> Assessment | None:
        """None when the project has no queue on this pool (no quota)."""
        key = (project_id, guaranteed, units)
        if key not in self._assessed:
            self._assessed[key] = self._assess(project_id=project_id, guaranteed=guaranteed, units=units)
        return self._assessed[key]

    def _assess(self, *, project_id: int, guaranteed: bool, units: int) -> Assessment | None:
        queue = self.queues.get((project_id, guaranteed))
        if queue is None:
            return None
        room: dict[str, Decimal | None] = {}
        short_at = None
        for level, node in zip(LEVELS, queue.path(), strict=True):
            room[level] = self._room(node)
            value = room[level]
            if short_at is None and value is not None and value < units:
                short_at = level
        return Assessment(units=units, available=available(queue), potential=potential_available(queue),
                          short_at=short_at, room=room)

    @staticmethod
    def _room(node: Node) -> Decimal | None:
        """What the node's own bound leaves for one more workload of its subtree (ancestors aside)."""
        if node.parent is None:
            return node.subtree - node.usage
        if node.borrowing_limit is None:
            return None
        kept = local_quota(node)
        return local_available(node) + node.subtree - kept - max(ZERO, node.usage - kept) + node.borrowing_limit
