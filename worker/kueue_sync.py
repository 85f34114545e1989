"""Reconcile the cluster's Kueue objects with the organisation (DESIGN section 4).

Compute the desired objects from the database, read what the portal owns in the cluster, and apply only the
differences in a safe order: shrinking updates first (children before parents), then creates and growing updates
(parents before children), then deletes (children before parents). Nothing without the portal's ownership label
is ever touched, and every write is sent with fieldValidation=Strict.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Prefetch

from apps.org.models import Department, NodePool, PriorityClass, Project, Quota

from .kueue_objects import DepartmentSpec, Naming, OrgSnapshot, PoolQuota, PoolSpec, PriorityClassSpec, ProjectSpec


def naming() -> Naming:
    return Naming(
        root_cohort_prefix=settings.KUEUE_ROOT_COHORT_PREFIX,
        department_cohort_prefix=settings.KUEUE_DEPARTMENT_COHORT_PREFIX,
        project_prefix=settings.KUEUE_PROJECT_PREFIX,
    )


def _quotas(quotas: list[Quota]) -> dict[str, PoolQuota]:
    return {
        quota.node_pool.slug: PoolQuota(deserved=quota.deserved, limit=quota.limit, weight=quota.over_quota_weight)
        for quota in quotas
    }


def org_snapshot() -> OrgSnapshot:
    """The organisation as plain data, in four queries whatever its size."""
    quotas = Quota.objects.select_related("node_pool")
    departments = Department.objects.order_by("slug").prefetch_related(
        Prefetch("quotas", queryset=quotas),
        Prefetch("projects", queryset=Project.objects.order_by("slug").prefetch_related(
            Prefetch("quotas", queryset=quotas))),
    )
    return OrgSnapshot(
        pools=tuple(
            PoolSpec(slug=pool.slug, gpu_resource=pool.gpu_resource, capacity=pool.capacity,
                     node_labels=dict(pool.node_labels), node_taints=tuple(pool.node_taints))
            for pool in NodePool.objects.order_by("slug")
        ),
        departments=tuple(
            DepartmentSpec(
                slug=department.slug, quotas=_quotas(list(department.quotas.all())),
                projects=tuple(
                    ProjectSpec(slug=project.slug, namespace=project.namespace, does_not_lend=project.does_not_lend,
                                quotas=_quotas(list(project.quotas.all())))
                    for project in department.projects.all()
                ),
            )
            for department in departments
        ),
        priority_classes=tuple(
            PriorityClassSpec(name=pc.name, value=pc.value, description=pc.description)
            for pc in PriorityClass.objects.order_by("name")
        ),
    )
