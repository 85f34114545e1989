"""What a proposed policy would refuse among the work already live in its scope (docs/architecture.md, Policies):
admins see it before they save. It lives here, not in apps.org, because it reads workloads (the stack puts
workloads above org); the rules themselves are apps.org.policies'.

Nothing is stopped or changed by a policy: work already admitted or queued keeps running. The preview names the work
the same submission check would now refuse, so that whoever sets the policy can warn its owners first."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Q

from apps.org.models import Policy
from apps.org.policies import LABEL_FIELDS, EffectivePolicy, merge, violations
from apps.workloads.models import LIVE_STATUSES, Origin, Status, Workload

# How many refused workloads a preview lists; the count beyond it is still given.
BREAKING_SHOWN = 50


@dataclass(frozen=True)
class Breaking:
    """A live workload the proposed policy would refuse, with every rule it breaks (field -> messages)."""

    workload: Workload
    violations: dict[str, list[str]]


@dataclass(frozen=True)
class BreakingPreview:
    rows: list[Breaking]
    total: int  # all refused, `rows` holds the first BREAKING_SHOWN
    checked: int  # live workloads in the scope


def _scope_order(policy: Policy) -> int:
    return 2 if policy.project_id else 1 if policy.department_id else 0


def workloads_breaking(*, policy: Policy) -> BreakingPreview:
    """The live work in `policy`'s scope (saved or not: the form's values) that the policy, merged over the scopes
    above it and under the projects' own policies, would refuse. Work from outside the portal is left out: no policy
    is applied to it. Two queries: the work (with its projects and priority classes) and the policies."""
    live = Workload.objects.filter(status__in=LIVE_STATUSES - {Status.STOPPING}).exclude(origin=Origin.OUTSIDE)
    if policy.project_id:
        live = live.filter(project_id=policy.project_id)
    elif policy.department_id:
        live = live.filter(project__department_id=policy.department_id)
    work = list(live.select_related("project", "priority_class").order_by("project__slug", "-created_at", "-pk"))
    department_ids = {row.project.department_id for row in work}
    project_ids = {row.project_id for row in work}
    others = [row for row in Policy.objects.filter(
        Q(department__isnull=True, project__isnull=True) | Q(department_id__in=department_ids)
        | Q(project_id__in=project_ids)).select_related("department", "project", "default_priority_class")
        if (row.department_id, row.project_id) != (policy.department_id, policy.project_id)]
    effective_by_project: dict[int, EffectivePolicy] = {}
    rows: list[Breaking] = []
    total = 0
    for workload in work:
        project = workload.project
        effective = effective_by_project.get(project.pk)
        if effective is None:
            chain = [row for row in others if (row.department_id is None and row.project_id is None)
                     or row.department_id == project.department_id or row.project_id == project.pk]
            effective = effective_by_project[project.pk] = merge(
                sorted([*chain, policy], key=_scope_order), pod_security=settings.MANIFEST_POD_SECURITY)
        found = violations(
            effective, units=workload.gpu_units, images=[("image", workload.image)] if workload.image else [],
            runtime_seconds=workload.max_runtime_seconds,
            priority_class=workload.priority_class.name if workload.priority_class else None,
            idle_minutes=workload.notebook_idle_timeout_minutes,
            labels={name: getattr(workload, name) for name in LABEL_FIELDS.values()})
        if found:
            total += 1
            if len(rows) < BREAKING_SHOWN:
                rows.append(Breaking(workload=workload, violations=found))
    return BreakingPreview(rows=rows, total=total, checked=len(work))
