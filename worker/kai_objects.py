"""The organisation -> KAI Scheduler contract for the pools KAI schedules (README, Kueue and KAI in one cluster), as
pure functions beside `kueue_objects` (the same snapshot in, plain manifests out).

Per KAI pool, in KAI's queue hierarchy (`scheduling.run.ai/v2` Queue, cluster-scoped; KAI's docs/queues/README.md):
- a parent Queue per department with a quota row on the pool or a project that has one: GPU quota = the department's
  deserved units there, limit = its limit;
- under it a leaf Queue per project with a quota row on the pool (only leaf queues take work): GPU quota = the
  project's deserved units, limit = its limit, overQuotaWeight = its over-quota weight.

KAI reads a missing or 0 limit as "nothing beyond what is allocated may be added", and -1 as no limit; the portal's
limit is the most units including over-quota use, which is what KAI's limit caps, so it is written as is (an
unlimited one as -1), always explicitly. CPU and memory stay unlimited (-1) unless the quota row gives them (KAI
counts millicpus and megabytes of 10^6 bytes). Priority is left to KAI's default: the organisation has no queue
priority of its own. Every Queue carries the portal's ownership label and KAI's shard label with the pool's slug, so
the pool's scheduling shard (nodes labelled the same) takes it.

KAI orders work by its pods' priorityClassName, a Kubernetes PriorityClass (scheduling.k8s.io/v1), which nothing else
in the cluster creates for the organisation's classes (Kueue's WorkloadPriorityClasses are another kind). So while any
pool is KAI's, each of the organisation's priority classes is also a PriorityClass of the same name and value (never
the cluster's default); the portal's work on KAI pools names it (worker/manifests.py).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from apps.core.kueue_names import (
    DEPARTMENT_LABEL,
    KAI_NODE_POOL_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POOL_LABEL,
    PROJECT_LABEL,
    KueueNames,
    names,
)
from apps.core.kueue_tree import NO_QUOTA, PoolQuota

from .kueue_objects import DepartmentSpec, OrgSnapshot, PoolSpec, PriorityClassSpec

KAI_API = "scheduling.run.ai/v2"
UNLIMITED = -1
MILLICPU_PER_CORE = 1000
MEGABYTES_PER_GIB = Decimal(2**30) / Decimal(10**6)


def number(value: Decimal | int) -> int | float:
    """A JSON number as KAI's Queue takes it (float64 fields): integers stay integers."""
    decimal = Decimal(value)
    return int(decimal) if decimal == decimal.to_integral_value() else float(decimal)


def _gpu(quota: PoolQuota) -> dict[str, Any]:
    return {"quota": quota.deserved, "limit": UNLIMITED if quota.limit is None else quota.limit,
            "overQuotaWeight": number(quota.weight)}


def _other(amount: Decimal | None, weight: Decimal) -> dict[str, Any]:
    return {"quota": UNLIMITED if amount is None else number(amount), "limit": UNLIMITED,
            "overQuotaWeight": number(weight)}


def queue_resources(quota: PoolQuota) -> dict[str, Any]:
    """A Queue's `resources` for a quota row: GPU from deserved, limit and weight; CPU and memory when given."""
    cores = None if quota.cpu_cores is None else Decimal(quota.cpu_cores) * MILLICPU_PER_CORE
    megabytes = None if quota.memory_gib is None else quota.memory_gib * MEGABYTES_PER_GIB
    return {"gpu": _gpu(quota), "cpu": _other(cores, quota.weight), "memory": _other(megabytes, quota.weight)}


def _queue(name: str, labels: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": KAI_API, "kind": "Queue",
            "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY, **labels}}, "spec": spec}


def _pool_queues(pool: PoolSpec, departments: tuple[DepartmentSpec, ...], naming: KueueNames) -> list[dict[str, Any]]:
    objects = []
    for department in departments:
        projects = [project for project in department.projects if pool.slug in project.quotas]
        quota = department.quotas.get(pool.slug)
        if quota is None and not projects:
            continue
        labels = {POOL_LABEL: pool.slug, KAI_NODE_POOL_LABEL: pool.slug, DEPARTMENT_LABEL: department.slug}
        parent = naming.kai_department_queue(department.slug, pool.slug)
        objects.append(_queue(parent, labels, {"resources": queue_resources(quota or NO_QUOTA)}))
        for project in projects:
            objects.append(_queue(naming.kai_project_queue(project.slug, pool.slug),
                                  {**labels, PROJECT_LABEL: project.slug},
                                  {"parentQueue": parent, "resources": queue_resources(project.quotas[pool.slug])}))
    return objects


def priority_class(spec: PriorityClassSpec) -> dict[str, Any]:
    """The Kubernetes PriorityClass KAI reads for one of the organisation's priority classes."""
    obj: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                           "metadata": {"name": spec.name, "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
                           "value": spec.value}  # never globalDefault (false, which the API server omits)
    if spec.description:
        obj["description"] = spec.description
    return obj


def kai_objects(org: OrgSnapshot, naming: KueueNames | None = None) -> list[dict[str, Any]]:
    """Every object KAI Scheduler needs from the organisation for the KAI pools: the priority classes (when there is
    a KAI pool at all), then the Queues, parents before children."""
    naming = naming or names()
    kai_pools = [pool for pool in org.pools if pool.kai]
    classes = [priority_class(spec) for spec in org.priority_classes] if kai_pools else []
    return classes + [obj for pool in kai_pools for obj in _pool_queues(pool, org.departments, naming)]
