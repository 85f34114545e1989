"""The facts of many waiting workloads, in a fixed number of queries, for one viewer: the pools' quotas and the
mirror of their ClusterQueues (as `capacity.PoolTree`), the peers of preemptions, the nodes of gangs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Exists, OuterRef, Q, Value
from django.utils import timezone

from apps.accounts import access
from apps.accounts.access import Action
from apps.cluster.models import ClusterQueueState, LocalQueueState, NodeState
from apps.core import kueue_conditions as kueue
from apps.core.actors import Actor
from apps.org.models import Project, Quota
from apps.org.selectors import holding_budgets
from apps.workloads.capacity import ZERO, DepartmentQuota, PoolTree, ProjectQuota
from apps.workloads.models import PREEMPTED_STATUSES, Status, Workload, WorkloadEvent

from .explainer import explain, waits
from .facts import BudgetHold, Explanation, Peer, Share, WaitFacts


@dataclass(frozen=True)
class _Quota:
    """One department or project quota on a pool, as explanations read it: its figures, and for a project's its
    project's name, department and lending, and whether the viewer may see the project."""

    node_pool_id: int
    deserved: int
    limit: int | None
    department_id: int | None  # a department's quota
    project_id: int | None  # a project's quota
    project_name: str
    project_department_id: int | None  # None only for a department's quota
    project_department_name: str
    does_not_lend: bool
    visible: bool


def _quota_rows(pool_ids: set[int], viewer: Actor | None) -> list[_Quota]:
    """Every department and project quota on the pools, with their projects' names, departments and lending, and
    whether the viewer may see each project: one query, read as plain values (the hundred quotas of a pool built as
    models with their projects and departments cost a poll more CPU than the rest of the explanations' queries)."""
    rows = Quota.objects.filter(node_pool_id__in=pool_ids)
    if viewer is not None:
        seen = access.restrict(Project.objects.filter(pk=OuterRef("project_id")), viewer, Action.VIEW)
        rows = rows.annotate(visible=Exists(seen))
    else:
        rows = rows.annotate(visible=Value(False))
    return [_Quota(*row) for row in rows.values_list(
        "node_pool_id", "deserved", "limit", "department_id", "project_id", "project__name",
        "project__department_id", "project__department__name", "project__does_not_lend", "visible")]


@dataclass
class _Pool:
    """One pool's quotas, usage and tree, with the names the viewer may read."""

    tree: PoolTree
    used: Decimal
    names: dict[int, str]  # project id -> name, for the projects the viewer may see
    department_quota: dict[int, _Quota]
    project_quota: dict[int, _Quota]
    queue_usage: dict[tuple[int, bool], Decimal]

    def share(self, project_id: int, units: Decimal, own: Workload) -> Share:
        if project_id == own.project_id:
            return Share(own.project.name, units)
        return Share(self.names.get(project_id), units)


def _pools(waiting: list[Workload], quotas: list[_Quota], states: list[dict[str, Any]]) -> dict[int, _Pool]:
    pools: dict[int, _Pool] = {}
    for workload in waiting:
        pool = workload.node_pool
        if pool.pk in pools:
            continue
        mine = [q for q in quotas if q.node_pool_id == pool.pk]
        usage: dict[tuple[int, bool], Decimal] = defaultdict(lambda: ZERO)
        used = ZERO
        for state in states:
            if state["node_pool_id"] == pool.pk:
                used += state["used"]
                if state["project_id"] is not None:
                    usage[(state["project_id"], state["guaranteed"])] += state["used"]
        project_quota = {q.project_id: q for q in mine if q.project_id is not None}
        department_quota = {q.department_id: q for q in mine if q.department_id is not None}
        tree = PoolTree.build(
            capacity=pool.capacity,
            departments=[DepartmentQuota(d, q.deserved, q.limit) for d, q in department_quota.items()],
            projects=[ProjectQuota(p, q.project_department_id, q.deserved, q.limit, lends=not q.does_not_lend,
                                   guaranteed_used=usage[(p, True)], elastic_used=usage[(p, False)])
                      for p, q in project_quota.items() if q.project_department_id is not None])
        names = {p: q.project_name for p, q in project_quota.items() if q.visible}
        pools[pool.pk] = _Pool(tree=tree, used=used, names=names, department_quota=department_quota,
                               project_quota=project_quota, queue_usage=usage)
    return pools


# A preempted workload's preemptor, Kueue's reason and when; a preempting one's victims.
_PeerFacts = tuple[Peer | None, str, datetime | None, tuple[Peer, ...]]


@dataclass(frozen=True)
class _Standing:
    """What every waiting workload of one project on one pool reads alike: its quotas and who holds, keeps back and
    keeps the pool (the same tuples for each of the project's rows, so built once per project and pool)."""

    quota: _Quota | None
    mine: ProjectQuota | None
    department_id: int | None
    dept: _Quota | None
    department_used: Decimal | None
    holders: tuple[Share, ...]
    department_holders: tuple[Share, ...]
    held_back: dict[str, tuple[Share, ...]]
    keepers: tuple[Share, ...]


def _standing(workload: Workload, pool: _Pool) -> _Standing:
    tree, own = pool.tree, workload.project_id
    mine = tree.projects.get(own)
    department_id = mine.department_id if mine else None
    # Idle deserved units that projects which do not lend keep out of each level (its own project's too: they are
    # kept for its non-preemptible work, not lent to its preemptible work).
    keeping = [p for p in tree.projects.values() if p.held_back > 0]
    return _Standing(
        quota=pool.project_quota.get(own), mine=mine, department_id=department_id,
        dept=pool.department_quota.get(department_id) if department_id is not None else None,
        department_used=tree.department_used(department_id) if department_id is not None else None,
        holders=tuple(pool.share(p.project_id, p.used, workload) for p in tree.projects.values()),
        department_holders=tuple(pool.share(p.project_id, p.used, workload) for p in tree.projects.values()
                                 if p.department_id == department_id),
        held_back={
            "project": tuple(pool.share(p.project_id, p.held_back, workload) for p in keeping if p.project_id == own),
            "department": tuple(pool.share(p.project_id, p.held_back, workload) for p in keeping
                                if p.department_id == department_id),
            "pool": tuple(pool.share(p.project_id, p.held_back, workload) for p in keeping),
        },
        keepers=tuple(pool.share(p.project_id, Decimal(p.deserved), workload) for p in tree.projects.values()
                      if not p.lends and p.deserved > 0),
    )


def _budget_holds(waiting: list[Workload]) -> dict[int, BudgetHold]:
    """Project id -> the budget holding its new preemptible work (its own, else its department's), for the projects
    of the given waiting preemptible workloads: one query, none without such a workload."""
    projects = {w.project_id: w.project.department_id for w in waiting if w.preemptible}
    if not projects:
        return {}
    budgets = list(holding_budgets().filter(Q(project_id__in=projects) | Q(department_id__in=set(projects.values()))))
    now = timezone.now()
    found: dict[int, BudgetHold] = {}
    for project_id, department_id in projects.items():
        own = [b for b in budgets if b.project_id == project_id]
        above = [b for b in budgets if b.department_id == department_id]
        for budget in own or above:
            scope = f"project {budget.project.name}" if budget.project else f"department {budget.owner}"
            found[project_id] = BudgetHold(scope=scope, amount=budget.amount_text(), period=budget.period_text(now))
            break
    return found


def _facts(workload: Workload, pool: _Pool, queue: dict[str, Any] | None, local: LocalQueueState | None,
           peers: _PeerFacts, node_allocatable: tuple[int, ...] | None = None,
           standing: _Standing | None = None, budget_hold: BudgetHold | None = None) -> WaitFacts:
    tree, own = pool.tree, workload.project_id
    standing = standing or _standing(workload, pool)
    quota, mine, dept = standing.quota, standing.mine, standing.dept
    inactive = local is not None or (queue is not None and not queue["active"])
    # A stopped ClusterQueue makes its LocalQueues inactive too ("ClusterQueueIsInactive"): its own reason says why.
    source: Any = local if local is not None and (queue is None or queue["active"]) else None
    preemptor, preemption_reason, preempted_at, victims = peers
    return WaitFacts(
        has_quota=quota is not None and mine is not None,
        deserved=quota.deserved if quota else None, limit=quota.limit if quota else None,
        project_used=mine.used if mine else None,
        queue_used=pool.queue_usage[(own, not workload.preemptible)],
        department=quota.project_department_name if quota is not None else "",
        department_deserved=dept.deserved if dept else None, department_limit=dept.limit if dept else None,
        department_used=standing.department_used,
        pool_capacity=workload.node_pool.capacity, pool_used=pool.used,
        assessment=tree.assess(project_id=own, guaranteed=not workload.preemptible, units=workload.gpu_units),
        holders=standing.holders,
        department_holders=standing.department_holders,
        held_back=standing.held_back,
        keepers=standing.keepers,
        queue_active=not inactive,
        queue_reason=source.active_reason if source else (queue["active_reason"] if queue else ""),
        queue_message=source.active_message if source else (queue["active_message"] if queue else ""),
        preemptor=preemptor, preemption_reason=preemption_reason, preempted_at=preempted_at, victims=victims,
        node_allocatable=node_allocatable,
        budget_hold=budget_hold if workload.preemptible else None,
    )


def explain_workloads(workloads: list[Workload], *, viewer: Actor | None = None) -> dict[int, Explanation | None]:
    """Explanations for many workloads as `viewer` may read them (None: names no other project): three queries
    whatever their number (the pools' quotas with the viewer's visibility, the pools' ClusterQueues, the projects'
    stopped LocalQueues), one or two more when any of them was preempted or is preempting others, one more when a
    gang waits for admission (its pool's nodes), and one for the viewer's grants unless the request has asked the
    access module already.

    The rows need `project` and `node_pool` joined.
    """
    waiting = [w for w in workloads if waits(w)]
    result: dict[int, Explanation | None] = {w.pk: None for w in workloads}
    if not waiting:
        return result
    pool_ids = {w.node_pool_id for w in waiting}
    quotas = _quota_rows(pool_ids, viewer)
    states: list[dict[str, Any]] = [dict(row) for row in ClusterQueueState.objects.filter(
        node_pool_id__in=pool_ids).values("name", "project_id", "node_pool_id", "guaranteed", "used", "active",
                                          "active_reason", "active_message")]
    stopped_local = {(q.namespace, q.name): q for q in LocalQueueState.objects.filter(
        project_id__in={w.project_id for w in waiting}, active=False)}
    pools = _pools(waiting, quotas, states)
    peers = _peers(waiting, viewer)
    nodes = _nodes(waiting)
    # A budget explains the wait only where Kueue holds the queue (its LocalQueue mirrored stopped): no query else.
    holds = _budget_holds([w for w in waiting if (w.project.namespace, w.queue_name) in stopped_local])
    queues = {state["name"]: state for state in states}
    standings: dict[tuple[int, int], _Standing] = {}
    for workload in waiting:
        pool = pools[workload.node_pool_id]
        key = (workload.node_pool_id, workload.project_id)
        if key not in standings:
            standings[key] = _standing(workload, pool)
        facts = _facts(workload, pool, queues.get(workload.cluster_queue_name),
                       stopped_local.get((workload.project.namespace, workload.queue_name)),
                       peers.get(workload.pk, (None, "", None, ())), nodes.get(workload.node_pool_id),
                       standings[key], holds.get(workload.project_id))
        result[workload.pk] = explain(workload, facts)
    return result


def _nodes(waiting: list[Workload]) -> dict[int, tuple[int, ...]]:
    """Pool id -> allocatable units of its ready, schedulable nodes, for the pools of gangs waiting for admission:
    one query, none without such a gang. A pool without mirrored nodes is left out (unknown)."""
    pool_ids = {w.node_pool_id for w in waiting if w.pod_count > 1 and w.status != Status.ADMITTED}
    if not pool_ids:
        return {}
    found: dict[int, list[int]] = {}
    for pool_id, units, ready, unschedulable in NodeState.objects.filter(node_pool_id__in=pool_ids).values_list(
            "node_pool_id", "allocatable_gpus", "ready", "unschedulable"):
        found.setdefault(pool_id, [])
        if ready and not unschedulable:
            found[pool_id].append(units)
    return {pool_id: tuple(units) for pool_id, units in found.items()}


def _peers(waiting: list[Workload], viewer: Actor | None) -> dict[int, _PeerFacts]:
    """For preempted and requeued workloads their last preemption (preemptor, reason, when), for preempting ones their
    victims: one query for the events, one for the preemptors, none if neither.

    Whether the viewer may see a peer is the access module's answer (a subquery in the same queries), as on every
    other page."""
    preempted = {w.pk: w for w in waiting if w.status in PREEMPTED_STATUSES}
    preempting = {w.k8s_uid: w for w in waiting
                  if w.status_reason == kueue.WAITING_FOR_PREEMPTED_WORKLOADS and w.k8s_uid}
    if not preempted and not preempting:
        return {}
    events = list(_seen(WorkloadEvent.objects.filter(to_status=Status.PREEMPTED).filter(
        Q(workload_id__in=list(preempted)) | Q(details__preemptor_job_uid__in=list(preempting))), viewer,
        "workload_id").select_related("workload__project").order_by("at", "id"))
    uids = {e.details.get("preemptor_job_uid") for e in events if e.workload_id in preempted} - {None, ""}
    preemptors = {w.k8s_uid: w for w in _seen(Workload.objects.filter(k8s_uid__in=uids), viewer, "pk")
                  .select_related("project")} if uids else {}

    def peer(other: Workload, visible: bool) -> Peer:
        return Peer(other.pk, other.name, other.project.name) if visible else Peer()

    found: dict[int, _PeerFacts] = {}
    victims: dict[int, dict[int, Peer]] = defaultdict(dict)
    for event in events:
        if event.workload_id in preempted:
            other = preemptors.get(event.details.get("preemptor_job_uid", ""))
            found[event.workload_id] = (peer(other, other.visible) if other else None, event.reason,
                                        event.cluster_at or event.at, ())
        preemptor = preempting.get(event.details.get("preemptor_job_uid", ""))
        if preemptor is not None and event.at >= (preemptor.last_preempted_at or preemptor.created_at):
            victims[preemptor.pk][event.workload_id] = peer(event.workload, event.visible)
    for workload_id, seen in victims.items():
        found[workload_id] = (None, "", None, tuple(seen.values()))
    return found


def _seen(queryset: Any, viewer: Actor | None, workload_path: str) -> Any:
    """The rows annotated with `visible`: whether the viewer may see the workload at `workload_path`."""
    if viewer is None:
        return queryset.annotate(visible=Value(False))
    may_see = access.restrict(Workload.objects.filter(pk=OuterRef(workload_path)), viewer, Action.VIEW)
    return queryset.annotate(visible=Exists(may_see))
