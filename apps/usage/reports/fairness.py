"""Fairness over time: each visible project's share of its department's use on a pool, week by week, beside its
over-quota weight's share among the department's projects on that pool (what Kueue's fair sharing divides idle
capacity by), and, where the cluster runs Kueue's Admission Fair Sharing, the decayed usage Kueue orders the
project's LocalQueues by (mirrored from LocalQueue status.fairSharing.admissionFairSharingStatus).

A lead asking "why do we wait more this week" reads: our share of use ran above our weight's share (Kueue lets
others borrow first), or our decayed usage is the highest (AFS admits the less-used queues first).

A department's weekly total on a pool counts all of its projects, seen or not: it is the department's own figure
(the quota dashboard shows its roll-up the same way); only the viewer's projects are listed. Five queries.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import OuterRef, Subquery, Sum
from django.utils import timezone

from apps.cluster.models import ClusterQueueState, LocalQueueState
from apps.core.actors import Actor
from apps.core.quantities import quantity
from apps.org.models import NodePool, Quota
from apps.org.selectors import projects_for

from ..models import UsageSlice
from ..services import usage_timelines_settle
from .ledger import card_hours, overlapping
from .window import Window

WEEKS = 4


@dataclass
class FairnessRow:
    project: str
    project_slug: str
    department: str
    pool: NodePool
    deserved: int
    weight: Decimal
    weight_share: float | None  # the weight over the department's projects' weights on the pool
    hours: list[float]  # the project's GPU-hours per week
    shares: list[float | None]  # of the department's GPU-hours on the pool per week; None when it used none
    afs_usage: Decimal | None = None  # Kueue's decayed usage (GPU units) summed over the project's LocalQueues

    @property
    def weight_share_text(self) -> str:
        return _percent(self.weight_share)

    @property
    def week_cells(self) -> list[tuple[str, float]]:
        """(share of the department's GPU-hours as text, GPU-hours) per week, for the page."""
        return [(_percent(share), hours) for share, hours in zip(self.shares, self.hours, strict=True)]


def _percent(value: float | None) -> str:
    return "" if value is None else f"{value * 100:.1f}%"


@dataclass
class Fairness:
    weeks: list[Window]
    rows: list[FairnessRow]
    admission_fair_sharing: bool  # some LocalQueue reports AFS usage


def recent_weeks(now: datetime, count: int = WEEKS) -> list[Window]:
    """The last `count` calendar weeks (Monday 00:00 local), the current one last, up to now."""
    today = timezone.localtime(now).date()
    monday = timezone.make_aware(datetime.combine(today - timedelta(days=today.weekday()), datetime.min.time()))
    starts = [monday - timedelta(days=7 * back) for back in range(count - 1, -1, -1)]
    return [Window(start, start + timedelta(days=7)) for start in starts]


def fairness(*, user: Actor, department_id: int | None = None, node_pool_id: int | None = None,
             now: datetime | None = None, weeks: int = WEEKS) -> Fairness:
    now = now or timezone.now()
    windows = recent_weeks(now, weeks)
    visible = {project.pk: project for project in projects_for(user).select_related("department").filter(
        **({"department_id": department_id} if department_id is not None else {}))}
    department_ids = {project.department_id for project in visible.values()}
    quotas = list(Quota.objects.filter(project__department_id__in=department_ids).values(
        "project_id", "project__department_id", "node_pool_id", "deserved", "over_quota_weight"))
    usage_timelines_settle()
    whole = Window(windows[0].start, windows[-1].end)
    weekly = UsageSlice.objects.filter(department_id__in=department_ids).filter(overlapping(whole, now)).values(
        "project_id", "department_id", "node_pool_id").annotate(**{
            f"h{index}": Sum(card_hours(week, now), filter=overlapping(week, now), default=0.0)
            for index, week in enumerate(windows)}).order_by()
    used: dict[tuple[int, int], dict[str, Any]] = {(row["project_id"], row["node_pool_id"]): dict(row)
                                                   for row in weekly}
    cluster_queue_pool = ClusterQueueState.objects.filter(name=OuterRef("cluster_queue")).values("node_pool_id")[:1]
    afs: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    pools = {pool.pk: pool for pool in NodePool.objects.all()}
    reported = False
    for queue in LocalQueueState.objects.filter(project_id__in=list(visible)).exclude(afs_consumed={}).annotate(
            pool_id=Subquery(cluster_queue_pool)).values("project_id", "pool_id", "afs_consumed"):
        pool = pools.get(queue["pool_id"])
        value = (queue["afs_consumed"] or {}).get(pool.gpu_resource) if pool else None
        if pool is None or value is None:
            continue
        try:
            afs[(queue["project_id"], pool.pk)] += quantity(value)
            reported = True
        except ValueError:
            continue  # a quantity Kueue would not write: shown as not reported

    department_hours: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0] * len(windows))
    for (_, pool_id), row in used.items():
        for index in range(len(windows)):
            department_hours[(row["department_id"], pool_id)][index] += float(row[f"h{index}"] or 0.0)
    weights: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    for quota in quotas:
        weights[(quota["project__department_id"], quota["node_pool_id"])] += quota["over_quota_weight"]

    rows = []
    keys = {(q["project_id"], q["node_pool_id"]): q for q in quotas if q["project_id"] in visible}
    for key in sorted(set(keys) | {key for key in used if key[0] in visible}):
        if node_pool_id is not None and key[1] != node_pool_id:
            continue
        project, pool = visible[key[0]], pools[key[1]]
        quota_row = keys.get(key)
        weight = quota_row["over_quota_weight"] if quota_row else Decimal(0)
        total_weight = weights[(project.department_id, pool.pk)]
        hours = [float(used[key][f"h{index}"] or 0.0) if key in used else 0.0 for index in range(len(windows))]
        totals = department_hours.get((project.department_id, pool.pk), [0.0] * len(windows))
        rows.append(FairnessRow(
            project=project.name, project_slug=project.slug, department=project.department.name, pool=pool,
            deserved=quota_row["deserved"] if quota_row else 0, weight=weight,
            weight_share=float(weight / total_weight) if total_weight else None, hours=hours,
            shares=[mine / total if total else None for mine, total in zip(hours, totals, strict=True)],
            afs_usage=afs.get(key)))
    rows.sort(key=lambda row: (row.department, row.pool.name, row.project))
    return Fairness(weeks=windows, rows=rows, admission_fair_sharing=reported)
