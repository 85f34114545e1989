"""The organisation -> Kueue contract (docs/architecture.md, The organisation in Kueue), as pure functions.

Input is a plain snapshot of the organisation (no ORM), output is the list of Kubernetes objects the cluster
should hold: per node pool a ResourceFlavor and its own cohort tree (root, department and project Cohorts), two
ClusterQueues per project and pool, the project namespaces with their LocalQueues (also in the namespaces admins
mapped to the project, which select the same ClusterQueues), and the WorkloadPriorityClasses. The tree's shape
and numbers are `apps.core.kueue_tree`'s; this module writes them as manifests. Every object carries the portal's
ownership label, so reconcile never touches anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from apps.core.kueue_names import (
    DEPARTMENT_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POOL_LABEL,
    PROJECT_LABEL,
    KueueNames,
    local_queue,
    names,
)
from apps.core.kueue_tree import (
    DepartmentMember,
    PoolQuota,
    ProjectCohort,
    ProjectMember,
    QueueQuota,
    cohort_tree,
)

KUEUE_API = "kueue.x-k8s.io/v1beta2"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class PoolSpec:
    slug: str
    gpu_resource: str
    capacity: int
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[dict[str, str], ...] = ()
    scheduler: str = "kueue"  # or "kai": KAI Scheduler's Queues instead (worker/kai_objects.py), no Kueue objects

    @property
    def kai(self) -> bool:
        return self.scheduler == "kai"


@dataclass(frozen=True)
class ProjectSpec:
    slug: str
    namespace: str
    does_not_lend: bool
    quotas: dict[str, PoolQuota]  # pool slug -> quota
    # Existing namespaces admins mapped to the project: they get its LocalQueues, never created or deleted here.
    mapped_namespaces: tuple[str, ...] = ()
    # An exceeded budget holds the project's new preemptible work (docs/architecture.md, Budgets): its elastic
    # LocalQueues get stopPolicy Hold (Kueue admits nothing new from them; admitted work runs on).
    hold_preemptible: bool = False


@dataclass(frozen=True)
class DepartmentSpec:
    slug: str
    quotas: dict[str, PoolQuota]
    projects: tuple[ProjectSpec, ...]


@dataclass(frozen=True)
class PriorityClassSpec:
    name: str
    value: int
    description: str


@dataclass(frozen=True)
class OrgSnapshot:
    pools: tuple[PoolSpec, ...]
    departments: tuple[DepartmentSpec, ...]
    priority_classes: tuple[PriorityClassSpec, ...]


def quantity(value: Decimal | int) -> str | int:
    """A Kubernetes quantity: integers stay integers, decimals lose trailing zeros (2.50 -> "2.5")."""
    if isinstance(value, int):
        return value
    normalized = value.normalize()
    return int(normalized) if normalized == normalized.to_integral() else format(normalized, "f")


def _metadata(name: str, labels: dict[str, str], namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY, **labels}}
    if namespace is not None:
        metadata["namespace"] = namespace
    return metadata


def _resource_group(pool: PoolSpec, resource: dict[str, Any]) -> dict[str, Any]:
    return {
        "coveredResources": [pool.gpu_resource],
        "flavors": [{"name": pool.slug, "resources": [{"name": pool.gpu_resource, **resource}]}],
    }


def resource_flavor(pool: PoolSpec) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if pool.node_labels:
        spec["nodeLabels"] = dict(pool.node_labels)
    if pool.node_taints:
        spec["nodeTaints"] = [dict(taint) for taint in pool.node_taints]
        # Portal workloads tolerate their own pool's taints; Kueue injects these on admission.
        spec["tolerations"] = [
            {"key": taint["key"], "operator": "Equal", "value": taint.get("value", ""), "effect": taint["effect"]}
            for taint in pool.node_taints
        ]
    metadata = _metadata(pool.slug, {POOL_LABEL: pool.slug})
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": metadata, "spec": spec}


def _members(pool: PoolSpec, departments: tuple[DepartmentSpec, ...]
             ) -> list[DepartmentMember[DepartmentSpec, ProjectSpec]]:
    """The departments and projects as members of the pool's tree: each project with a quota row on the pool."""
    return [
        DepartmentMember(owner=department, quota=department.quotas.get(pool.slug), projects=tuple(
            ProjectMember(owner=project, quota=project.quotas[pool.slug], lends=not project.does_not_lend)
            for project in department.projects if pool.slug in project.quotas))
        for department in departments
    ]


def _pool_tree(pool: PoolSpec, departments: tuple[DepartmentSpec, ...], naming: KueueNames) -> list[dict[str, Any]]:
    """The cohort tree and queues of one pool, for the departments and projects with a quota row on it."""
    tree = cohort_tree(capacity=pool.capacity, departments=_members(pool, departments))
    if not tree.departments:
        return []
    root_name = naming.root_cohort(pool.slug)
    root_spec: dict[str, Any] = {}
    if tree.nominal:
        root_spec["resourceGroups"] = [_resource_group(pool, {"nominalQuota": tree.nominal})]
    objects: list[dict[str, Any]] = [{
        "apiVersion": KUEUE_API, "kind": "Cohort", "metadata": _metadata(root_name, {POOL_LABEL: pool.slug}),
        "spec": root_spec,
    }]
    for cohort in tree.departments:
        department = cohort.owner
        resource: dict[str, Any] = {"nominalQuota": cohort.nominal}
        if cohort.borrowing_limit is not None:
            resource["borrowingLimit"] = cohort.borrowing_limit
        department_cohort = naming.department_cohort(department.slug, pool.slug)
        objects.append({
            "apiVersion": KUEUE_API, "kind": "Cohort",
            "metadata": _metadata(department_cohort, {POOL_LABEL: pool.slug, DEPARTMENT_LABEL: department.slug}),
            "spec": {"parentName": root_name, "fairSharing": {"weight": quantity(cohort.weight)},
                     "resourceGroups": [_resource_group(pool, resource)]},
        })
        for project in cohort.projects:
            objects.extend(_project_objects(pool, department, project, department_cohort, naming))
    return objects


def _queue_resource(queue: QueueQuota) -> dict[str, Any]:
    resource: dict[str, Any] = {"nominalQuota": queue.nominal}
    if queue.borrowing_limit is not None:
        resource["borrowingLimit"] = queue.borrowing_limit
    if queue.lending_limit is not None:
        resource["lendingLimit"] = queue.lending_limit
    return resource


def _project_objects(pool: PoolSpec, department: DepartmentSpec, cohort: ProjectCohort[ProjectSpec], parent: str,
                     naming: KueueNames) -> list[dict[str, Any]]:
    project = cohort.owner
    labels = {POOL_LABEL: pool.slug, DEPARTMENT_LABEL: department.slug, PROJECT_LABEL: project.slug}
    cohort_name = naming.project_cohort(project.slug, pool.slug)
    cohort_spec: dict[str, Any] = {"parentName": parent, "fairSharing": {"weight": quantity(cohort.weight)}}
    if cohort.borrowing_limit is not None:
        cohort_spec["resourceGroups"] = [_resource_group(
            pool, {"nominalQuota": 0, "borrowingLimit": cohort.borrowing_limit}
        )]
    namespace_selector: dict[str, Any] = {"matchLabels": {NAMESPACE_NAME_LABEL: project.namespace}}
    if project.mapped_namespaces:
        namespace_selector = {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In",
                                                    "values": [project.namespace, *project.mapped_namespaces]}]}
    objects = [{"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": _metadata(cohort_name, labels),
                "spec": cohort_spec}]
    for queue in cohort.queues:
        objects.append({
            "apiVersion": KUEUE_API, "kind": "ClusterQueue",
            "metadata": _metadata(naming.cluster_queue(project.slug, pool.slug, guaranteed=queue.guaranteed), labels),
            "spec": {
                "cohortName": cohort_name, "namespaceSelector": namespace_selector,
                "queueingStrategy": "BestEffortFIFO",
                "resourceGroups": [_resource_group(pool, _queue_resource(queue))],
                # Guaranteed work never preempts its own queue; preemptible work gives way to higher priorities.
                "preemption": {"withinClusterQueue": "Never" if queue.guaranteed else "LowerPriority",
                               "reclaimWithinCohort": "Any"},
            },
        })
    for namespace_name in (project.namespace, *project.mapped_namespaces):
        for queue in cohort.queues:
            spec: dict[str, Any] = {
                "clusterQueue": naming.cluster_queue(project.slug, pool.slug, guaranteed=queue.guaranteed)}
            if not queue.guaranteed:
                # Always said, so lifting a hold is a change the reconcile sees (it compares what it wants).
                spec["stopPolicy"] = "Hold" if project.hold_preemptible else "None"
            objects.append({
                "apiVersion": KUEUE_API, "kind": "LocalQueue",
                "metadata": _metadata(local_queue(pool.slug, guaranteed=queue.guaranteed), labels, namespace_name),
                "spec": spec,
            })
    return objects


def namespace(project: ProjectSpec, department: DepartmentSpec) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": _metadata(project.namespace, {DEPARTMENT_LABEL: department.slug, PROJECT_LABEL: project.slug})}


def priority_class(spec: PriorityClassSpec) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
                           "metadata": _metadata(spec.name, {}), "value": spec.value}
    if spec.description:
        obj["description"] = spec.description
    return obj


def desired_objects(org: OrgSnapshot, naming: KueueNames | None = None) -> list[dict[str, Any]]:
    """Every Kueue object (and project namespace) the cluster should hold, parents before children (the order creates
    must follow). KAI pools have none: KAI Scheduler queues their work (worker/kai_objects.py)."""
    naming = naming or names()
    pools = [pool for pool in org.pools if not pool.kai]
    objects: list[dict[str, Any]] = [priority_class(spec) for spec in org.priority_classes]
    objects += [resource_flavor(pool) for pool in pools]
    objects += [namespace(project, department) for department in org.departments for project in department.projects]
    for pool in pools:
        objects += _pool_tree(pool, org.departments, naming)
    return objects
