"""Reads for the queue pages (KueueViz's views, scoped by role): cluster queues, local queues, cohorts, resource
flavors and each pool's nodes, all from the watcher's mirror; a fixed number of queries however many rows.

Scope (the access module decides, through the scope paths the mirror models declare):
- cluster and local queues: those of the projects the viewer may see (queues of no project: admins only);
- cohorts: the project cohorts of those projects, the department cohorts of the departments the viewer may see or
  belongs to through a project, and the pools' root cohorts only for those who see everything. A cohort's figures
  are its own whole subtree's (a department's roll-up counts all its projects, seen or not, as the quota dashboard's
  does);
- resource flavors (one per node pool) and nodes: everyone who may view anything, since they say nothing of anyone's
  work; the pool-wide in use, pending and admitted figures only for those who see everything (as the dashboard's
  cluster row).

Figures in GPU units. A queue's borrowing is Kueue's `flavorsUsage[].borrowed`; its lending is the nominal quota it
leaves idle for the cohort, which a guaranteed queue of a project that lends has (an elastic queue's nominal quota is
0, and a "does not lend" project's guaranteed queue has lendingLimit 0). A KAI leaf Queue's two rows (its
non-preemptible and its preemptible work) count as pending the portal's waiting work there: KAI's Queue status has
resource totals only (`apps.workloads.selectors.kai_queue_waiting`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Count, Max, Q, QuerySet, Sum

from apps.accounts import access
from apps.accounts.access import Action, sees_everything
from apps.cluster.models import ClusterQueueState, CohortState, LocalQueueState, NodeState, UnmappedWork
from apps.core.actors import Actor
from apps.org.models import NodePool
from apps.org.selectors import projects_for
from apps.workloads.models import WAITING_STATUSES
from apps.workloads.selectors import kai_queue_waiting, workload_tallies

ZERO = Decimal(0)
TABS = {
    "cluster-queues": "Cluster queues",
    "local-queues": "Local queues",
    "cohorts": "Cohorts",
    "flavors": "Resource flavors",
}


def lending(queue: ClusterQueueState) -> Decimal:
    """Nominal quota the queue leaves idle for its cohort to borrow (0 when its project does not lend)."""
    lends = queue.project is None or not queue.project.does_not_lend
    return max(ZERO, queue.nominal - queue.used) if lends else ZERO


def cluster_queues_for(user: Actor) -> QuerySet[ClusterQueueState]:
    """The cluster queues the viewer may see, by pool then name (the page's and the API's rows)."""
    return (
        access.restrict(ClusterQueueState.objects.all(), user, Action.VIEW)
        .select_related("project__department", "node_pool")
        .order_by("node_pool__name", "name")
    )


def with_kai_waiting(rows: list[ClusterQueueState]) -> list[ClusterQueueState]:
    """`rows` with the pending count of each KAI queue row set from the portal's waiting work (one query, none
    without such a row)."""
    kai = [row for row in rows if ClusterQueueState.names_kai_queue(row.name)]
    if kai:
        waiting = kai_queue_waiting(project_id__in={row.project_id for row in kai})
        for row in kai:
            if row.project_id is not None and row.node_pool_id is not None:  # else a project or pool no longer there
                row.pending_workloads = waiting.get((row.project_id, row.node_pool_id, row.guaranteed), 0)
    return rows


def cluster_queues(*, user: Actor) -> list[ClusterQueueState]:
    """The cluster queues the viewer may see, by pool then name, each with `lending` set (and a KAI queue row's
    pending count)."""
    rows = with_kai_waiting(list(cluster_queues_for(user)))
    for row in rows:
        row.lending = lending(row)  # type: ignore[attr-defined]
    return rows


def _kai_waiting_by_pool(pools: list[NodePool]) -> dict[int, int]:
    """The portal's waiting work per KAI pool (what its queue rows count as pending); no query without a KAI pool."""
    if not any(pool.kai for pool in pools):
        return {}
    by_pool: dict[int, int] = defaultdict(int)
    for (_, pool_id, _), count in kai_queue_waiting(node_pool_id__in=[pool.pk for pool in pools if pool.kai]).items():
        by_pool[pool_id] += count
    return by_pool


def local_queues_for(user: Actor) -> QuerySet[LocalQueueState]:
    """The local queues of the projects the viewer may see, by namespace then name."""
    return (
        access.restrict(LocalQueueState.objects.all(), user, Action.VIEW)
        .select_related("project__department")
        .order_by("namespace", "name")
    )


def local_queues(*, user: Actor) -> list[LocalQueueState]:
    return list(local_queues_for(user))


@dataclass
class CohortFigures:
    """One cohort and the sums over the cluster queues of its whole subtree."""

    cohort: CohortState
    level: str  # root | department | project
    depth: int
    used: Decimal = ZERO
    borrowed: Decimal = ZERO
    nominal: Decimal = ZERO
    pending: int = 0
    admitted: int = 0
    queues: int = 0
    children: list[CohortFigures] = field(default_factory=list)


def cohorts(*, user: Actor) -> list[tuple[NodePool | None, list[CohortFigures]]]:
    """Per pool, the cohorts the viewer may see in tree order (parents before children), with their subtree's
    figures; three queries."""
    everything = sees_everything(user)
    visible = access.restrict(CohortState.objects.all(), user, Action.VIEW)
    if not everything:
        member_departments = projects_for(user).values("department_id")
        visible = CohortState.objects.filter(
            Q(pk__in=visible.values("pk")) | Q(project__isnull=True, department_id__in=member_departments)
        )
    shown = set(visible.values_list("pk", flat=True))
    every = list(CohortState.objects.select_related("node_pool", "department", "project"))
    by_name = {row.name: row for row in every}
    children: dict[str, list[CohortState]] = defaultdict(list)
    for row in every:
        children[row.parent].append(row)
    figures = {
        row.name: CohortFigures(
            cohort=row, level="project" if row.project_id else "department" if row.department_id else "root", depth=0
        )
        for row in every
    }
    for queue in ClusterQueueState.objects.values(
        "cohort", "used", "used_borrowed", "nominal", "pending_workloads", "admitted_workloads"
    ):
        name, seen = queue["cohort"], set()
        while name in figures and name not in seen:  # up the tree: every ancestor counts the queue
            seen.add(name)
            entry = figures[name]
            entry.used += queue["used"]
            entry.borrowed += queue["used_borrowed"]
            entry.nominal += queue["nominal"]
            entry.pending += queue["pending_workloads"]
            entry.admitted += queue["admitted_workloads"]
            entry.queues += 1
            name = by_name[name].parent
    pools: dict[int | None, list[CohortFigures]] = defaultdict(list)

    def walk(row: CohortState, depth: int) -> None:
        entry = figures[row.name]
        entry.depth = depth
        if row.pk in shown:
            pools[row.node_pool_id].append(entry)
        for child in sorted(children[row.name], key=lambda c: c.name):
            walk(child, depth + 1)

    for root in sorted((row for row in every if row.parent not in by_name), key=lambda r: r.name):
        walk(root, 0)
    pool_rows = {row.node_pool_id: row.node_pool for row in every}
    return sorted(
        ((pool_rows[pool_id], rows) for pool_id, rows in pools.items()),
        key=lambda item: item[0].name if item[0] else "~",
    )


@dataclass
class FlavorFigures:
    """A node pool as Kueue's ResourceFlavor, with its nodes' totals and (for those who see everything) its use."""

    pool: NodePool
    nodes: int = 0
    schedulable_nodes: int = 0
    allocatable: int = 0
    schedulable_allocatable: int = 0
    used: Decimal | None = None
    borrowed: Decimal | None = None
    pending: int | None = None
    admitted: int | None = None


def flavors(*, user: Actor) -> list[FlavorFigures]:
    """Every pool with its nodes' totals; three queries (four with a KAI pool)."""
    result = {pool.pk: FlavorFigures(pool=pool) for pool in NodePool.objects.order_by("name")}
    for node in NodeState.objects.filter(node_pool__isnull=False).values(
        "node_pool_id", "allocatable_gpus", "ready", "unschedulable"
    ):
        entry = result.get(node["node_pool_id"])
        if entry is None:
            continue
        entry.nodes += 1
        entry.allocatable += node["allocatable_gpus"]
        if node["ready"] and not node["unschedulable"]:
            entry.schedulable_nodes += 1
            entry.schedulable_allocatable += node["allocatable_gpus"]
    if sees_everything(user):
        for usage in (
            ClusterQueueState.objects.filter(node_pool__isnull=False)
            .values("node_pool_id")
            .annotate(
                used=Sum("used"),
                borrowed=Sum("used_borrowed"),
                pending=Sum("pending_workloads"),
                admitted=Sum("admitted_workloads"),
            )
            .order_by()
        ):
            entry = result.get(usage["node_pool_id"])
            if entry is not None:
                entry.used, entry.borrowed = usage["used"], usage["borrowed"]
                entry.pending, entry.admitted = usage["pending"], usage["admitted"]
        for pool_id, waiting in _kai_waiting_by_pool([entry.pool for entry in result.values()]).items():
            result[pool_id].pending = (result[pool_id].pending or 0) + waiting
    return list(result.values())


@dataclass
class PoolNodes:
    pool: NodePool
    nodes: list[NodeState]
    flavor: FlavorFigures


def pool_nodes(*, user: Actor, slug: str) -> PoolNodes | None:
    """The pool's nodes by name, with the pool's totals; None for no such pool."""
    pool = NodePool.objects.filter(slug=slug).first()
    if pool is None:
        return None
    nodes = list(NodeState.objects.filter(node_pool=pool).order_by("name"))
    flavor = FlavorFigures(pool=pool, nodes=len(nodes), allocatable=sum(n.allocatable_gpus for n in nodes))
    for node in nodes:
        if node.schedulable:
            flavor.schedulable_nodes += 1
            flavor.schedulable_allocatable += node.allocatable_gpus
    if sees_everything(user):
        usage = ClusterQueueState.objects.filter(node_pool=pool).aggregate(
            used=Sum("used"),
            borrowed=Sum("used_borrowed"),
            pending=Sum("pending_workloads"),
            admitted=Sum("admitted_workloads"),
        )
        flavor.used, flavor.borrowed = usage["used"] or ZERO, usage["borrowed"] or ZERO
        flavor.pending = (usage["pending"] or 0) + _kai_waiting_by_pool([pool]).get(pool.pk, 0)
        flavor.admitted = usage["admitted"] or 0
    return PoolNodes(pool=pool, nodes=nodes, flavor=flavor)


def nodes_in_pools() -> QuerySet[NodeState]:
    """Every node the watcher placed in a pool, by pool then name (what the pools' Nodes pages list; a node says
    nothing of anyone's work, so everyone who may view anything sees them)."""
    return NodeState.objects.filter(node_pool__isnull=False).select_related("node_pool").order_by("node_pool__name",
                                                                                                  "name")


def queues_marker() -> str:
    """A fingerprint of everything the queue and node pages show, from aggregates only (no rows): the mirrors, the
    pools and, with a KAI pool, the tallies of the waiting work there (a KAI queue's pending; their count of changes
    moves when a waiting workload is replaced by another too). The views add the viewer's grants (their scope)."""
    parts: list[Any] = []
    for model in (ClusterQueueState, LocalQueueState, CohortState, NodeState):
        parts.extend(model.objects.aggregate(n=Count("pk"), at=Max("observed_at")).values())
    pools = NodePool.objects.aggregate(n=Count("pk"), at=Max("updated_at"),
                                       kai=Count("pk", filter=Q(scheduler=NodePool.Scheduler.KAI)))
    parts.extend(pools.values())
    if pools["kai"]:
        waiting = workload_tallies(statuses=WAITING_STATUSES, node_pool__scheduler=NodePool.Scheduler.KAI).values()
        parts.extend((sum(tally.workloads for tally in waiting), sum(tally.changes for tally in waiting)))
    return "|".join(str(part) for part in parts)


def unmapped_work() -> QuerySet[UnmappedWork]:
    """Work the watcher could not count as a project's, the most GPUs first (the caller checked the viewer may see
    it: `access.can_view_unmapped_work`)."""
    return UnmappedWork.objects.select_related("project").order_by("-gpus", "namespace", "name", "pk")
