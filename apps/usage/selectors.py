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

A serving pool has no quotas and no Kueue objects: it shows each visible project's serving reservation and the
units its live inference services hold of it (replicas x pods x GPUs, as the submit checks them), read in one
query with the other figures' (docs/architecture.md, Inference services).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Count, Max, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from apps.accounts.access import Action, ScopeAt, can, department_ids_seen
from apps.cluster.models import ClusterQueueState, CohortState
from apps.core.actors import Actor
from apps.org.models import Budget, NodePool, Quota, ServingReservation
from apps.workloads.models import WAITING_STATUSES
from apps.workloads.selectors import (
    Tally,
    kai_queue_waiting,
    serving_services,
    serving_units,
    tallies_by_pool,
    tallies_of,
    tally_rows,
)

from .budgets import BudgetStatus, budget_statuses_for
from .reads import ScopedRead, read_together

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
    pending: Decimal = ZERO  # GPU units the waiting work asks for (a share of a card on a KAI pool as that share)
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
class Reservation:
    """One project's serving reservation on a serving pool and the units its live inference services hold."""

    name: str
    slug: str
    reserved: int
    in_use: int

    @property
    def free(self) -> int:
        """What the project may still start; nothing while a lowered reservation is below what runs."""
        return max(0, self.reserved - self.in_use)


@dataclass(frozen=True)
class Pool:
    """What the dashboard shows of a node pool (its heading), read with the rows that put it on show."""

    pk: int
    slug: str
    name: str
    gpu_resource: str
    capacity: int
    serving: bool


POOL_FIELDS = ("pk", "slug", "name", "gpu_resource", "capacity", "serving")


@dataclass
class PoolDashboard:
    pool: Pool
    departments: list[Figures]  # each with its visible projects as children
    cluster: Figures | None
    reservations: list[Reservation] = field(default_factory=list)  # serving pools only


def balance(*, deserved: int, used: Decimal, lends: bool) -> tuple[Decimal, Decimal]:
    """(borrowed, lent) of one project on one pool: use beyond deserved, and idle deserved quota when it lends."""
    return max(ZERO, used - deserved), max(ZERO, deserved - used) if lends else ZERO


def _pool_of(row: dict[str, Any]) -> Pool:
    return Pool(*(row[f"node_pool__{name}"] for name in POOL_FIELDS))


def _department_scope(department_ids: Sequence[int] | None) -> dict[str, Any]:
    return {} if department_ids is None else {"project__department_id__in": department_ids}


def _pool_columns(department_ids: Sequence[int] | None) -> tuple[str, ...]:
    """The pools' headings, read with the rows that put them on show by those who do not see every pool."""
    return () if department_ids is None else tuple(f"node_pool__{name}" for name in POOL_FIELDS)


def _held_in(department_ids: Sequence[int] | None) -> Q:
    """Rows of the departments on show held by a department or by one of its projects."""
    return Q() if department_ids is None else Q(department_id__in=department_ids) | Q(
        project__department_id__in=department_ids)


def _quotas(department_ids: Sequence[int] | None) -> QuerySet[Quota, Any]:
    """Quota rows of the departments on show and of all their projects (a roll-up sums every project's borrowed and
    lent, seen or not); usage comes from the queue mirror. Plain values, not models: a researcher's department may
    hold hundreds of quota rows it only sums. No ordering: everything is sorted by name."""
    return Quota.objects.filter(_held_in(department_ids)).order_by().values(
        "project_id", "department_id", "node_pool_id", "deserved", "limit", "project__department_id",
        "project__does_not_lend", "project__name", "project__slug", "department__name", "department__slug",
        "project__department__name", "project__department__slug", *_pool_columns(department_ids))


def _cohorts(department_ids: Sequence[int] | None) -> QuerySet[CohortState, Any]:
    """The cohort mirrors of the departments on show and of their projects, for their weighted shares: read beside
    the quota rows and matched to them in Python rather than as two subqueries of the quota read, which PostgreSQL
    ran as a scan of the cohort mirror per quota row and per share."""
    return CohortState.objects.filter(_held_in(department_ids)).order_by().values(
        "name", "project_id", "department_id", "node_pool_id", "weighted_share")


def _budgets(department_ids: Sequence[int] | None) -> QuerySet[Budget, Any]:
    """Whether a budget is held in the departments on show (by a department or one of its projects): every budget a
    viewer may see is among these, so with none the full page skips the budgets' own queries."""
    return Budget.objects.filter(_held_in(department_ids)).order_by().values("pk")[:1]


def _reservations(department_ids: Sequence[int] | None) -> QuerySet[ServingReservation, dict[str, Any]]:
    """The serving reservations of the departments on show, each with the units its live inference services hold."""
    held = serving_services().filter(project_id=OuterRef("project_id"), node_pool_id=OuterRef(
        "node_pool_id")).values("project_id").annotate(units=Sum(serving_units())).values("units")
    return ServingReservation.objects.filter(**_department_scope(department_ids)).order_by().annotate(
        in_use=Coalesce(Subquery(held), 0)).values("project_id", "project__department_id", "project__name",
                                                   "project__slug", "node_pool_id", "cards", "in_use",
                                                   *_pool_columns(department_ids))


def _states(department_ids: Sequence[int] | None) -> QuerySet[ClusterQueueState, Any]:
    """The queue mirrors of the departments on show."""
    return ClusterQueueState.objects.filter(**_department_scope(department_ids)).values(
        "name", "project_id", "project__department_id", "project__does_not_lend", "node_pool_id", "guaranteed", "used",
        "used_borrowed", "nominal", "pending_workloads", "admitted_workloads").order_by()


# The dashboard's reads, compiled once per process and number of departments (apps/usage/reads.py): at 10,000
# workloads building and compiling them cost the page more than PostgreSQL took to answer them.
_QUOTAS = ScopedRead(_quotas)
_COHORTS = ScopedRead(_cohorts)
_RESERVATIONS = ScopedRead(_reservations)
_STATES = ScopedRead(_states)
_TALLIES = ScopedRead(lambda department_ids: tally_rows(statuses=WAITING_STATUSES,
                                                       **_department_scope(department_ids)))
_BUDGETS = ScopedRead(_budgets)
# Only for those who see everything: every pool, and the cluster's use of each.
_POOLS = ScopedRead(lambda _: NodePool.objects.order_by().values(*POOL_FIELDS))
_CLUSTER_USED = ScopedRead(lambda _: ClusterQueueState.objects.values("node_pool_id").annotate(
    used=Sum("used")).order_by())


def quota_dashboard(*, user: Actor) -> list[PoolDashboard]:
    """The dashboard figures for the viewer: one round trip (`read_together`) of five statements for those who do
    not see everything (quotas, cohort mirrors, serving reservations, queue mirrors, tallies), of seven for those who
    do (every pool, and the cluster's use, besides), however many projects and pools; one more query with a KAI
    queue on show (its rows' pending, `kai_queue_waiting`).

    The scope comes from the viewer's grants, which the request has read already, not from reads of its own: the
    departments on show are those the access module lets the viewer see (`department_ids_seen`, one list for every
    read), and a project's row is shown when `can` lets them see it, asked once per project of the rows read. A
    department or project is on show only where it holds quota, so the quota rows carry the names of every one of
    them; those who do not see everything read the pools' headings with the quota rows and reservations that put the
    pools on show."""
    return _dashboard(user, budgets=False)[0]


def quota_page(*, user: Actor) -> tuple[list[PoolDashboard], list[BudgetStatus]]:
    """The full page: the dashboard and the budgets the viewer may see. Whether a budget is held in the departments
    on show at all comes in the dashboard's round trip, so the budgets' own queries (`budget_statuses_for`) run only
    when there is one."""
    pools, budgeted = _dashboard(user, budgets=True)
    return pools, budget_statuses_for(user) if budgeted else []


def _dashboard(user: Actor, *, budgets: bool) -> tuple[list[PoolDashboard], bool]:
    """The dashboard, and (with `budgets`) whether a budget is held in the departments on show."""
    departments_seen = department_ids_seen(user)
    everything = departments_seen is None
    department_ids = None if departments_seen is None else sorted(departments_seen)
    seen: dict[int, bool] = {}

    def sees(project_id: int, department_id: int) -> bool:  # asked once per project
        if project_id not in seen:
            seen[project_id] = everything or can(user, Action.VIEW, ScopeAt(department_id, project_id))
        return seen[project_id]

    # The reads in one round trip (apps/usage/reads.py).
    reads = [_QUOTAS, _COHORTS, _RESERVATIONS, _STATES, _TALLIES]
    reads += [_BUDGETS] if budgets else []
    reads += [_POOLS, _CLUSTER_USED] if everything else []
    quotas, cohorts, reservation_rows, states, tally_rows_, *more = read_together(department_ids, *reads)
    budgeted = bool(more.pop(0)) if budgets else False
    reservations: dict[int, list[Reservation]] = defaultdict(list)
    pools: dict[int, Pool] = {}
    for held_row in reservation_rows:
        if not sees(held_row["project_id"], held_row["project__department_id"]):
            continue
        reservations[held_row["node_pool_id"]].append(Reservation(
            name=held_row["project__name"], slug=held_row["project__slug"], reserved=held_row["cards"],
            in_use=held_row["in_use"]))
        if not everything:
            pools[held_row["node_pool_id"]] = _pool_of(held_row)
    if everything:
        pool_rows, cluster_rows = more
        pools = {row["pk"]: Pool(**row) for row in pool_rows}
        cluster_used = {row["node_pool_id"]: row["used"] or ZERO for row in cluster_rows}
    else:  # only pools where the viewer's scope holds quota or a reservation have anything to show
        pools.update((q["node_pool_id"], _pool_of(q)) for q in quotas if q["node_pool_id"] not in pools)
    # The weighted share Kueue reports on an owner's cohort on a pool (the last by name, should two cohorts ever be
    # mirrored for one owner): a project's, and a department's (its cohort has no project).
    shares: dict[tuple[str, int, int], int | None] = {}
    for cohort in sorted(cohorts, key=lambda c: c["name"]):
        owner = ("project", cohort["project_id"]) if cohort["project_id"] else ("department", cohort["department_id"])
        shares[(*owner, cohort["node_pool_id"])] = cohort["weighted_share"]
    # Pending demand from the kept tallies, not from the waiting rows: a department may have tens of thousands.
    waiting = tallies_by_pool(tallies_of(tuple(row.values()) for row in tally_rows_), statuses=WAITING_STATUSES)
    pending = {key: tally.units for key, tally in waiting.items()}
    department_pending: dict[tuple[int, int], Decimal] = defaultdict(lambda: ZERO)
    for (_, pool_id), tally in waiting.items():
        department_pending[(tally.department_id, pool_id)] += tally.units

    project_quota = {(q["project_id"], q["node_pool_id"]): q for q in quotas if q["project_id"]}
    department_quota = {(q["department_id"], q["node_pool_id"]): q for q in quotas if q["department_id"]}
    # The departments that hold quota (of their own or of a project), the only ones with a row to show.
    departments = sorted({(q["department__name"], q["department_id"], q["department__slug"]) if q["department_id"]
                          else (q["project__department__name"], q["project__department_id"],
                                q["project__department__slug"]) for q in quotas})
    used: dict[tuple[int, int], Decimal] = defaultdict(lambda: ZERO)
    queues: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    # Every project of the departments on show, seen or not: department, and whether it lends.
    project_owner: dict[int, tuple[int, bool]] = {q["project_id"]: (q["project__department_id"],
                                                                    not q["project__does_not_lend"])
                                                  for q in quotas if q["project_id"]}
    # KAI's Queues count no workloads: their rows' pending is the portal's waiting work (one query, only with KAI
    # rows on show).
    department_scope = {} if department_ids is None else {"project__department_id__in": department_ids}
    kai_waiting = kai_queue_waiting(**department_scope) if any(
        ClusterQueueState.names_kai_queue(state["name"]) for state in states) else {}
    for state in states:
        key = (state["project_id"], state["node_pool_id"])
        if ClusterQueueState.names_kai_queue(state["name"]):
            state["pending_workloads"] = kai_waiting.get((*key, state["guaranteed"]), 0)
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
    for pool in sorted(pools.values(), key=lambda p: p.name):
        rows = []
        for department_name, department_id, department_slug in departments:
            dq = department_quota.get((department_id, pool.pk))
            projects = sorted((q for (_, pool_id), q in project_quota.items()
                               if pool_id == pool.pk and q["project__department_id"] == department_id
                               and sees(q["project_id"], department_id)),
                              key=lambda q: q["project__name"])
            dept = Figures(name=department_name, slug=department_slug, level="department",
                           deserved=dq["deserved"] if dq else 0, limit=dq["limit"] if dq else None,
                           has_quota=dq is not None,
                           weighted_share=shares.get(("department", department_id, pool.pk)),
                           used=department_used[(department_id, pool.pk)],
                           borrowed=department_borrowed[(department_id, pool.pk)],
                           lent=department_lent[(department_id, pool.pk)],
                           pending=department_pending[(department_id, pool.pk)])
            if dq is None and not projects:
                continue
            for quota in projects:  # only the projects on show; the roll-up above counts all of them
                key = (quota["project_id"], pool.pk)
                lends = not quota["project__does_not_lend"]
                borrowed, lent = balance(deserved=quota["deserved"], used=used[key], lends=lends)
                dept.children.append(Figures(
                    name=quota["project__name"], slug=quota["project__slug"], level="project",
                    deserved=quota["deserved"], limit=quota["limit"], used=used[key], pending=pending.get(key, ZERO),
                    borrowed=borrowed, lent=lent, lends=lends, weighted_share=shares.get(("project", *key)),
                    queues=sorted(queues[key], key=lambda q: q["name"])))
            rows.append(dept)
        serving = sorted(reservations.get(pool.pk, []), key=lambda r: r.name)
        cluster = None
        if everything:
            # A serving pool has no queues: what its inference services hold is its use (all of them are on show).
            in_use = Decimal(sum(r.in_use for r in serving)) if pool.serving else cluster_used.get(pool.pk, ZERO)
            cluster = Figures(name="Cluster", slug=pool.slug, level="cluster", deserved=pool.capacity,
                              limit=pool.capacity, used=in_use, borrowed=max(ZERO, in_use - pool.capacity),
                              pending=sum((d.pending for d in rows), ZERO))
        if rows or cluster or serving:
            result.append(PoolDashboard(pool=pool, departments=rows, cluster=cluster, reservations=serving))
    return result, budgeted


def _whole(queryset: QuerySet[Any, Any], **aggregates: Any) -> QuerySet[Any, Any]:
    """`queryset.aggregate(**aggregates)` as a queryset, to compile once: grouped by a constant, which the ORM leaves
    out of the GROUP BY, so it reads one row of aggregates even over no rows, as `aggregate()` does."""
    return queryset.order_by().annotate(whole=Value(1)).values("whole").annotate(**aggregates).values(*aggregates)


# The marker's five reads: compiled once per process and sent in one round trip (apps/usage/reads.py), like the
# dashboard's; they take no scope (each is of every department).
_MARKER_READS = (
    ScopedRead(lambda _: _whole(ClusterQueueState.objects.all(), n=Count("pk"), at=Max("observed_at"))),
    ScopedRead(lambda _: _whole(CohortState.objects.all(), n=Count("pk"), at=Max("observed_at"))),
    # The quotas and the reservations through their pools: a serving pool holds no quotas, so the join adds the two
    # up rather than multiplying them.
    ScopedRead(lambda _: _whole(NodePool.objects.all(), n=Count("quotas", distinct=True),
                                at=Max("quotas__updated_at"),
                                reservations=Count("serving_reservations", distinct=True),
                                reserved_at=Max("serving_reservations__updated_at"))),
    ScopedRead(lambda _: tally_rows(statuses=WAITING_STATUSES)),
    ScopedRead(lambda _: _whole(serving_services(), n=Count("pk"), newest=Max("pk"), units=Sum(serving_units()))),
)


def quota_dashboard_marker() -> str:
    """A fingerprint of everything the dashboard shows, from five small reads in one round trip: the queue and
    cohort mirrors, the quotas and serving reservations, the tallies of the waiting workloads and the live inference
    services. The view adds the viewer's grants (their scope)."""
    queues, cohorts, quotas, tallies, serving = read_together(None, *_MARKER_READS)
    # The waiting work as the kept tallies count it (their count of changes moves whenever a waiting workload is
    # replaced by another of the same size too); the live inference services are few and read from their rows.
    waiting = Tally()
    for tally in tallies_of(tuple(row.values()) for row in tallies).values():
        waiting.add(tally)
    return "|".join(str(part) for part in (*queues[0].values(), *cohorts[0].values(), *quotas[0].values(),
                                           waiting.workloads, waiting.unit_hundredths, waiting.changes,
                                           *serving[0].values()))
