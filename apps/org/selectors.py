"""Reads of the organisation, always scoped through the access module."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from django.db.models import F, Prefetch, Q, QuerySet, Sum

from apps.accounts import access
from apps.accounts.access import Action
from apps.cluster.models import CohortState
from apps.core.models import AuditEvent

from .models import Department, KueueSyncRun, KueueSyncState, NodePool, Project, Quota


def departments_for(user: Any, action: Action = Action.VIEW) -> QuerySet[Department]:
    return access.restrict(Department.objects.all(), user, action)


def projects_for(user: Any, action: Action = Action.VIEW) -> QuerySet[Project]:
    return access.restrict(Project.objects.all(), user, action)


def quotas_for(user: Any, action: Action = Action.VIEW) -> QuerySet[Quota]:
    """Department quotas of visible departments and project quotas of visible projects."""
    return access.restrict(Quota.objects.all(), user, action)


def audit_events_for(user: Any) -> QuerySet[AuditEvent]:
    """Audit rows of the departments and projects the user audits; installation-wide rows for global admins."""
    return access.restrict(AuditEvent.objects.all(), user, Action.VIEW_AUDIT)


@dataclass
class ProjectRow:
    project: Project
    quotas: dict[int, Quota]  # node pool id -> quota


@dataclass
class DepartmentRow:
    department: Department
    quotas: dict[int, Quota]
    projects: list[ProjectRow] = field(default_factory=list)

    def projects_deserved(self, pool_id: int) -> int:
        return sum(row.quotas[pool_id].deserved for row in self.projects if pool_id in row.quotas)


def node_pools() -> QuerySet[NodePool]:
    return NodePool.objects.all()


def org_tree(*, user: Any) -> tuple[list[NodePool], list[DepartmentRow]]:
    """Departments and projects the user may see, with their quotas per pool; a fixed number of queries."""
    pools = list(node_pools())
    visible_projects = projects_for(user, Action.VIEW).select_related("default_priority_class").prefetch_related(
        Prefetch("quotas", queryset=Quota.objects.select_related("node_pool"))
    )
    departments = departments_for(user, Action.VIEW).prefetch_related(
        Prefetch("quotas", queryset=Quota.objects.select_related("node_pool")),
        Prefetch("projects", queryset=visible_projects, to_attr="visible_projects"),
    )
    rows = []
    for department in departments:
        row = DepartmentRow(department=department, quotas={q.node_pool_id: q for q in department.quotas.all()})
        row.projects = [
            ProjectRow(project=project, quotas={q.node_pool_id: q for q in project.quotas.all()})
            for project in cast("list[Project]", department.visible_projects)  # the plugin reads the base class
        ]
        rows.append(row)
    return pools, rows


@dataclass
class QuotaTableData:
    """What the quota table of one department shows: every pool, the department's quota and each project's per
    pool, and what the other departments hold per pool (for the pool capacity rule)."""

    pools: list[NodePool]
    department_quotas: dict[int, Quota]  # node pool id -> quota
    projects: list[ProjectRow]
    other_departments_deserved: dict[int, int]  # node pool id -> deserved units


def department_quota_table(*, department: Department) -> QuotaTableData:
    """The editable quota table's rows (the caller has checked the user may manage the department's projects)."""
    projects = department.projects.order_by("name").prefetch_related(Prefetch("quotas", queryset=Quota.objects.all()))
    return QuotaTableData(
        pools=list(node_pools()),
        department_quotas={q.node_pool_id: q for q in department.quotas.all()},
        projects=[ProjectRow(project=project, quotas={q.node_pool_id: q for q in project.quotas.all()})
                  for project in projects],
        other_departments_deserved={
            row["node_pool"]: row["total"]
            for row in Quota.objects.filter(department__isnull=False).exclude(department=department)
            .values("node_pool").annotate(total=Sum("deserved"))
        },
    )


def department_quotas(*, user: Any, department: Department) -> QuerySet[Quota]:
    """The quotas of a department and of its projects that the user may see, department first, then by project."""
    return quotas_for(user).filter(Q(department=department) | Q(project__department=department)).select_related(
        "node_pool", "department", "project"
    ).order_by(F("project__name").asc(nulls_first=True), "node_pool__slug")


def kueue_sync_status(*, limit: int = 50) -> dict[str, Any]:
    """The reconcile's state and its latest runs, for admins."""

    state = KueueSyncState.objects.filter(pk=1).first()
    runs = list(KueueSyncRun.objects.all()[:limit])
    last_ok = next((run for run in runs if run.ok), None)
    return {"state": state, "runs": runs, "last_ok": last_ok, "last": runs[0] if runs else None}


def project_weighted_shares(*, project_ids: list[int]) -> dict[tuple[int, int], int | None]:
    """(project id, pool id) -> the fair-sharing weighted share Kueue reports on the project's Cohort
    (`proj-<slug>-<pool>`), as the watcher mirrored it; one query."""
    return {(project_id, pool_id): share for project_id, pool_id, share in CohortState.objects.filter(
        project_id__in=project_ids, node_pool__isnull=False).values_list("project_id", "node_pool_id",
                                                                          "weighted_share")}
