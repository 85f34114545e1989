"""Reads of workloads, always scoped through the access module (a row the user may not see does not exist)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from apps.accounts.access import Action, can_anywhere, projects_for, scoped_to_projects
from apps.org.models import NodePool, Project, Quota

from .models import LIVE_STATUSES, Workload, WorkloadTemplate
from .validation import non_preemptible_units_held


def visible_workloads(*, user: Any) -> QuerySet[Workload]:
    """Every workload in a project the user may view."""
    return scoped_to_projects(Workload.objects.all(), user, Action.VIEW)


def offers_scope_filter(*, user: Any) -> bool:
    """Team leads, department admins and admins may switch from their own work to everything in their scope."""
    return can_anywhere(user, Action.STOP_ANY)


def default_scope(*, user: Any) -> str:
    """Users who submit start on their own work; viewers, who own none, on everything they may see."""
    return "mine" if can_anywhere(user, Action.SUBMIT) else "all"


def workload_list(*, user: Any, scope: str = "mine", status: str = "", kind: str = "",
                  project: Project | None = None) -> QuerySet[Workload]:
    """The list page's rows with everything a row shows joined in: a fixed number of queries however many rows."""
    rows = visible_workloads(user=user).select_related("project", "node_pool", "owner", "priority_class")
    if scope != "all":
        rows = rows.filter(owner=user)
    if status == "live":
        rows = rows.filter(status__in=LIVE_STATUSES)
    elif status:
        rows = rows.filter(status=status)
    if kind:
        rows = rows.filter(kind=kind)
    if project is not None:
        rows = rows.filter(project=project)
    return rows


def workload_for_page(*, user: Any, pk: int) -> Workload | None:
    return visible_workloads(user=user).select_related(
        "project__department", "node_pool", "owner", "priority_class", "stop_requested_by", "resubmitted_from",
    ).filter(pk=pk).first()


def submit_projects(*, user: Any) -> QuerySet[Project]:
    return projects_for(user, Action.SUBMIT).select_related("department", "default_priority_class").order_by(
        "department__name", "name")


def templates(*, kind: str | None = None) -> QuerySet[WorkloadTemplate]:
    rows = WorkloadTemplate.objects.all()
    return rows if kind is None else rows.filter(kind=kind)


@dataclass
class PoolPanel:
    """What the project has on the chosen pool, for the submit page's side panel."""

    project: Project
    pool: NodePool
    quota: Quota | None
    units: int | None  # what the form currently asks for, when it can be computed
    preemptible: bool
    held_non_preemptible: int = 0
    other_pools: list[Quota] = field(default_factory=list)

    @property
    def non_preemptible_room(self) -> int:
        """Deserved units not held by the project's running non-preemptible work."""
        return max(0, (self.quota.deserved if self.quota else 0) - self.held_non_preemptible)

    @property
    def fits_limit(self) -> bool | None:
        if self.quota is None or self.units is None:
            return None
        return self.quota.limit is None or self.units <= self.quota.limit

    @property
    def fits_non_preemptible(self) -> bool | None:
        """Whether this request could run non-preemptible here at all (inside the deserved quota)."""
        if self.quota is None or self.units is None:
            return None
        return self.units <= self.quota.deserved

    @property
    def fits_non_preemptible_now(self) -> bool | None:
        if self.quota is None or self.units is None:
            return None
        return self.units <= self.non_preemptible_room


def pool_panel(*, project: Project, pool: NodePool, units: int | None, preemptible: bool) -> PoolPanel:
    quotas = list(Quota.objects.filter(project=project).select_related("node_pool").order_by("node_pool__name"))
    quota = next((q for q in quotas if q.node_pool_id == pool.pk), None)
    held = non_preemptible_units_held(project_id=project.pk, pool_id=pool.pk) if quota else 0
    return PoolPanel(project=project, pool=pool, quota=quota, units=units, preemptible=preemptible,
                     held_non_preemptible=held, other_pools=[q for q in quotas if q.node_pool_id != pool.pk])
