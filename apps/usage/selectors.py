"""Quota usage dashboards: per pool, the projects and departments a viewer may see, with Kueue's live figures.

Everything comes from the watcher's mirror (`ClusterQueueState`, `CohortState`) and the org's quotas; a fixed number
of queries whatever the number of projects. Scope (decided by the access module):
- project rows: the projects the viewer may see;
- department roll-ups: the departments the viewer may see (a researcher sees the department of their project); a
  roll-up counts all of the department's projects, since it is the department's own figure;
- the cluster roll-up: only for viewers who see everything.

Definitions (GPU units), per project and pool, by the organisation's quota rather than by ClusterQueue (the same
rule as the GPU-hour reports, apps/usage/split.py): in use = the sum of `flavorsUsage` of the project's guaranteed
and elastic ClusterQueues together; borrowed = in use beyond the project's deserved quota (preemptible work inside
deserved is not borrowing, although Kueue runs it in the elastic queue); lent = deserved quota left idle, which Kueue
lets the cohort borrow (a `does_not_lend` project's guaranteed queue has lendingLimit 0: it lends nothing); pending
demand = the GPU units of the project's waiting workloads (queued or preempted, not yet re-admitted); weighted share
= the fair-sharing share Kueue reports on the project's (department's) Cohort.

A department's in use, borrowed, lent and pending are the sums of those of all its projects on the pool (borrowed
and lent are per project: a project above its deserved quota borrows even when a sibling's idle quota is what it
uses, and that sibling lends); its deserved and limit are the department's own quota (deserved units not handed to
a project sit in the department's cohort and are in no project's figures). The cluster row has no lent figure.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Count, Max, Q, Sum

from apps.accounts.access import grants_for, sees_everything
from apps.cluster.models import ClusterQueueState, CohortState
from apps.core.actors import Actor
from apps.org.models import NodePool, Quota
from apps.org.selectors import departments_for, projects_for
from apps.workloads.models import WAITING_STATUSES, Workload
from apps.workloads.selectors import requested_units

ZERO = Decimal(0)


@dataclass
class Figures:
    """One row of the dashboard: a project, a department or the cluster on one pool."""

    name: str
    slug: str
    level: str  # "project" | "department" | "cluster"
    deserved: int = 0
    limit: int | None = None
    used: Decimal = ZERO
    pending: int = 0
    weighted_share: int | None = None
    borrowed: Decimal = ZERO
    lent: Decimal = ZERO
    queues: list[dict[str, Any]] = field(default_factory=list)
    children: list[Figures] = field(default_factory=list)
    has_quota: bool = True
    lends: bool = True  # a project marked "does not lend" keeps its idle deserved quota (lendingLimit 0)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name, "slug": self.slug, "deserved": self.deserved, "limit": self.limit,
            "used": self.used, "borrowed": self.borrowed, "lent": self.lent, "pending": self.pending,
            "weighted_share": self.weighted_share,
        }
        if self.level == "project":
            data["queues"] = self.queues
        return data


@dataclass
class PoolDashboard:
    pool: NodePool
    departments: list[Figures]  # each with its visible projects as children
    cluster: Figures | None


def balance(*, deserved: int, used: Decimal, lends: bool) -> tuple[Decimal, Decimal]:
    """(borrowed, lent) of one project on one pool: use beyond deserved, and idle deserved quota when it lends."""
    return max(ZERO, used - deserved), max(ZERO, deserved - used) if lends else ZERO


def quota_dashboard(*, user: Actor) -> list[PoolDashboard]:
    """The dashboard figures for the viewer: at most eight queries, however many projects and pools."""
    everything = sees_everything(user)
    visible_projects = {p.pk: p for p in projects_for(user).select_related("department")}
    if everything or grants_for(user).departments:
        departments = {d.pk: d for d in departments_for(user)}
    else:  # bound to projects only: their departments came with them
        departments = {p.department_id: p.department for p in visible_projects.values()}
    department_ids = list(departments)
    # Quota rows of the departments on show and of all their projects (a roll-up sums every project's borrowed and
    # lent, seen or not); usage comes from the queue mirror.
    # Plain values, not models: a researcher's department may hold hundreds of quota rows it only sums.
    quotas = list(Quota.objects.filter(Q(department_id__in=department_ids) | Q(
        project__department_id__in=department_ids)).values(
        "project_id", "department_id", "node_pool_id", "deserved", "limit", "project__department_id",
        "project__does_not_lend"))
    pools = list(NodePool.objects.order_by("name"))
    if not everything:  # only pools where the viewer's scope holds quota have anything to show
        holding = {q["node_pool_id"] for q in quotas}
        pools = [pool for pool in pools if pool.pk in holding]
    states = list(ClusterQueueState.objects.filter(project__department_id__in=department_ids).values(
        "name", "project_id", "project__department_id", "project__does_not_lend", "node_pool_id", "guaranteed", "used",
        "used_borrowed", "nominal", "pending_workloads", "admitted_workloads"))
    if everything:
        cluster_used = {row["node_pool_id"]: row["used"] or ZERO for row in ClusterQueueState.objects.values(
            "node_pool_id").annotate(used=Sum("used")).order_by()}
    cohorts: dict[tuple[str, int | None, int | None], int | None] = {}
    for cohort in CohortState.objects.filter(Q(department_id__in=department_ids, project__isnull=True) | Q(
            project_id__in=list(visible_projects))):
        owner = ("project", cohort.project_id) if cohort.project_id else ("department", cohort.department_id)
        cohorts[(*owner, cohort.node_pool_id)] = cohort.weighted_share
    pending_rows = list(Workload.objects.filter(
        status__in=WAITING_STATUSES, project__department_id__in=department_ids).values(
        "project_id", "project__department_id", "node_pool_id").annotate(units=Sum(requested_units())).order_by())
    pending = {(row["project_id"], row["node_pool_id"]): row["units"] or 0 for row in pending_rows}
    department_pending: dict[tuple[int, int], int] = defaultdict(int)
    for row in pending_rows:
        department_pending[(row["project__department_id"], row["node_pool_id"])] += row["units"] or 0

    project_quota = {(q["project_id"], q["node_pool_id"]): q for q in quotas if q["project_id"]}
    department_quota = {(q["department_id"], q["node_pool_id"]): q for q in quotas if q["department_id"]}
    used: dict[tuple[int, int], Decimal] = defaultdict(lambda: ZERO)
    queues: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    # Every project of the departments on show, seen or not: department, and whether it lends.
    project_owner: dict[int, tuple[int, bool]] = {q["project_id"]: (q["project__department_id"],
                                                                    not q["project__does_not_lend"])
                                                  for q in quotas if q["project_id"]}
    for state in states:
        key = (state["project_id"], state["node_pool_id"])
        used[key] += state["used"]
        project_owner.setdefault(state["project_id"], (state["project__department_id"],
                                                       not state["project__does_not_lend"]))
        queues[key].append({"name": state["name"], "guaranteed": state["guaranteed"], "used": state["used"],
                            "borrowed": state["used_borrowed"], "nominal": state["nominal"],
                            "pending_workloads": state["pending_workloads"],
                            "admitted_workloads": state["admitted_workloads"]})
    # Department roll-ups: the sums of their projects' figures (in use, borrowed, lent).
    department_used: dict[tuple[int, int], Decimal] = defaultdict(lambda: ZERO)
    department_borrowed: dict[tuple[int, int], Decimal] = defaultdict(lambda: ZERO)
    department_lent: dict[tuple[int, int], Decimal] = defaultdict(lambda: ZERO)
    for project_id, pool_id in set(used) | set(project_quota):
        department_id, lends = project_owner[project_id]
        quota = project_quota.get((project_id, pool_id))
        borrowed, lent = balance(deserved=quota["deserved"] if quota else 0, used=used[(project_id, pool_id)],
                                 lends=lends)
        department_used[(department_id, pool_id)] += used[(project_id, pool_id)]
        department_borrowed[(department_id, pool_id)] += borrowed
        department_lent[(department_id, pool_id)] += lent

    result = []
    for pool in pools:
        rows = []
        for department in sorted(departments.values(), key=lambda d: d.name):
            dq = department_quota.get((department.pk, pool.pk))
            projects = sorted((visible_projects[project_id] for project_id, pool_id in project_quota
                               if pool_id == pool.pk and project_id in visible_projects
                               and visible_projects[project_id].department_id == department.pk), key=lambda p: p.name)
            dept = Figures(name=department.name, slug=department.slug, level="department",
                           deserved=dq["deserved"] if dq else 0, limit=dq["limit"] if dq else None,
                           has_quota=dq is not None,
                           weighted_share=cohorts.get(("department", department.pk, pool.pk)),
                           used=department_used[(department.pk, pool.pk)],
                           borrowed=department_borrowed[(department.pk, pool.pk)],
                           lent=department_lent[(department.pk, pool.pk)],
                           pending=department_pending[(department.pk, pool.pk)])
            if dq is None and not projects:
                continue
            for project in projects:  # only the projects on show; the roll-up above counts all of them
                key = (project.pk, pool.pk)
                quota = project_quota[key]
                borrowed, lent = balance(deserved=quota["deserved"], used=used[key], lends=not project.does_not_lend)
                dept.children.append(Figures(
                    name=project.name, slug=project.slug, level="project", deserved=quota["deserved"],
                    limit=quota["limit"], used=used[key], pending=pending.get(key, 0), borrowed=borrowed, lent=lent,
                    lends=not project.does_not_lend, weighted_share=cohorts.get(("project", project.pk, pool.pk)),
                    queues=sorted(queues[key], key=lambda q: q["name"])))
            rows.append(dept)
        cluster = None
        if everything:
            in_use = cluster_used.get(pool.pk, ZERO)
            cluster = Figures(name="Cluster", slug=pool.slug, level="cluster", deserved=pool.capacity,
                              limit=pool.capacity, used=in_use, borrowed=max(ZERO, in_use - pool.capacity),
                              pending=sum(d.pending for d in rows))
        if rows or cluster:
            result.append(PoolDashboard(pool=pool, departments=rows, cluster=cluster))
    return result


def quota_dashboard_marker() -> str:
    """A fingerprint of everything the dashboard shows, from four aggregates (no rows): the queue and cohort mirrors,
    the quotas and the waiting workloads. The view adds the viewer's grants (their scope)."""

    queues = ClusterQueueState.objects.aggregate(n=Count("pk"), at=Max("observed_at"))
    cohorts = CohortState.objects.aggregate(n=Count("pk"), at=Max("observed_at"))
    quotas = Quota.objects.aggregate(n=Count("pk"), at=Max("updated_at"))
    waiting = Workload.objects.filter(status__in=WAITING_STATUSES).aggregate(n=Count("pk"), newest=Max("pk"),
                                                                    units=Sum(requested_units()))
    return "|".join(str(part) for part in (*queues.values(), *cohorts.values(), *quotas.values(), *waiting.values()))
