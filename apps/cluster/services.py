"""Writes of the cluster mirror (the watcher is the only caller). Upserts keyed by Kubernetes name, idempotent."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from django.db import transaction
from django.db.models import Model
from django.utils.dateparse import parse_datetime

from apps.core import kai_conditions as kai
from apps.core import kueue_conditions as kueue
from apps.core.kueue_names import DEPARTMENT_LABEL, GUARANTEED, POOL_LABEL, PROJECT_LABEL

from .models import ClusterQueueState, CohortState, LocalQueueState, NodeState, UnmappedWork, WatcherHeartbeat

# The org models the mirror's labels name, reached through the mirror's own relations (cluster sits below org).
_NodePool = CohortState._meta.get_field("node_pool").related_model
_Department = CohortState._meta.get_field("department").related_model
_Project = CohortState._meta.get_field("project").related_model


def _units(value: Any) -> Decimal:
    try:
        return Decimal(str(value))
    except ArithmeticError:
        return Decimal(0)


def _timestamp(value: Any) -> datetime | None:
    """A Kubernetes timestamp, or None when absent or unreadable (a mirror row never fails on one field)."""
    try:
        return parse_datetime(value) if isinstance(value, str) and value else None
    except ValueError:
        return None


def _flavor_totals(entries: list[dict[str, Any]] | None) -> tuple[Decimal, Decimal]:
    """Sum of total and borrowed over flavors (a portal queue covers one pool's GPU resource)."""
    total = borrowed = Decimal(0)
    for flavor in entries or []:
        for resource in flavor.get("resources") or []:
            total += _units(resource.get("total", 0))
            borrowed += _units(resource.get("borrowed", 0))
    return total, borrowed


def _nominal(spec: dict[str, Any]) -> Decimal:
    return sum((_units(resource.get("nominalQuota", 0)) for group in spec.get("resourceGroups") or []
                for flavor in group.get("flavors") or [] for resource in flavor.get("resources") or []), Decimal(0))


def _active(status: dict[str, Any]) -> tuple[bool, str, str]:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kueue.ACTIVE:
            return (condition.get("status") == kueue.TRUE, condition.get("reason", ""),
                    condition.get("message", ""))
    return True, "", ""


class _OrgRows:
    """The org rows a batch of mirrored objects names by the portal's labels, each model read once by slug (None for
    a slug that no longer exists)."""

    def __init__(self, objs: list[dict[str, Any]]) -> None:
        labels = [(obj["metadata"].get("labels") or {}) for obj in objs]
        self.rows: dict[tuple[type[Model], str], Any] = {
            (model, row.slug): row
            for model, label in ((_NodePool, POOL_LABEL), (_Project, PROJECT_LABEL), (_Department, DEPARTMENT_LABEL))
            for row in cast(Any, model._default_manager.filter(
                slug__in={each.get(label, "") for each in labels} - {""}))
        }

    def get(self, model: type[Model], labels: dict[str, str], label: str) -> Any:
        return self.rows.get((model, labels.get(label, "")))


def _upsert(model: type[Model], rows: Sequence[Model], unique_fields: list[str]) -> None:
    """Insert or update each row by its Kubernetes name in one statement (the last copy of a name wins)."""
    if not rows:
        return
    by_key = {tuple(getattr(row, name) for name in unique_fields): row for row in rows}
    fields = [field.name for field in model._meta.concrete_fields if not field.primary_key
              and field.name not in unique_fields]
    model._default_manager.bulk_create(list(by_key.values()), update_conflicts=True, unique_fields=unique_fields,
                                       update_fields=fields)


def cluster_queues_mirror(*, objs: list[dict[str, Any]], at: datetime) -> None:
    """Mirror ClusterQueues (a watcher pass's batch, or one list): one statement for all of them."""
    org = _OrgRows(objs)
    rows = []
    for obj in objs:
        metadata, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        labels = metadata.get("labels") or {}
        reserved, reserved_borrowed = _flavor_totals(status.get("flavorsReservation"))
        used, used_borrowed = _flavor_totals(status.get("flavorsUsage"))
        active, reason, message = _active(status)
        rows.append(ClusterQueueState(
            name=metadata["name"], node_pool=org.get(_NodePool, labels, POOL_LABEL),
            project=org.get(_Project, labels, PROJECT_LABEL), guaranteed=metadata["name"].endswith(f"-{GUARANTEED}"),
            cohort=spec.get("cohortName", ""), nominal=_nominal(spec),
            pending_workloads=status.get("pendingWorkloads", 0) or 0,
            reserving_workloads=status.get("reservingWorkloads", 0) or 0,
            admitted_workloads=status.get("admittedWorkloads", 0) or 0,
            reserved=reserved, reserved_borrowed=reserved_borrowed, used=used, used_borrowed=used_borrowed,
            weighted_share=(status.get("fairSharing") or {}).get("weightedShare"),
            active=active, active_reason=reason, active_message=message, observed_at=at))
    _upsert(ClusterQueueState, rows, ["name"])


# A KAI leaf Queue is mirrored as two queue rows, as Kueue's two ClusterQueues of a project on a pool are: what its
# non-preemptible work holds (inside the deserved quota, like the guaranteed queue) and what its preemptible work
# holds. A Kubernetes name has no "/", so these names never meet a ClusterQueue's.
KAI_ROWS = {True: "non-preemptible", False: "preemptible"}


def kai_row_name(queue: str, *, guaranteed: bool) -> str:
    return f"{queue}/{KAI_ROWS[guaranteed]}"


def kai_queues_mirror(*, objs: list[dict[str, Any]], at: datetime) -> None:
    """Mirror KAI Scheduler's leaf Queues of the portal (a project's on a KAI pool) from their status: the GPUs its
    work holds (`status.allocated`), of which non-preemptible (`allocatedNonPreemptible`); parents are not mirrored
    (departments' use is their projects' sum). One statement for the batch."""
    org = _OrgRows(objs)
    rows = []
    for obj in objs:
        metadata, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        labels = metadata.get("labels") or {}
        if not labels.get(PROJECT_LABEL):
            continue
        held = kai.gpus(status.get("allocated")) or Decimal(0)
        guaranteed = min(held, kai.gpus(status.get("allocatedNonPreemptible")) or Decimal(0))
        deserved = _units(((spec.get("resources") or {}).get("gpu") or {}).get("quota", 0))
        for is_guaranteed, used, nominal in ((True, guaranteed, max(deserved, Decimal(0))),
                                             (False, held - guaranteed, Decimal(0))):
            rows.append(ClusterQueueState(
                name=kai_row_name(metadata["name"], guaranteed=is_guaranteed),
                node_pool=org.get(_NodePool, labels, POOL_LABEL), project=org.get(_Project, labels, PROJECT_LABEL),
                guaranteed=is_guaranteed, cohort=spec.get("parentQueue", ""), nominal=nominal, used=used,
                used_borrowed=max(Decimal(0), used - nominal) if is_guaranteed else Decimal(0), observed_at=at))
    _upsert(ClusterQueueState, rows, ["name"])


def local_queues_mirror(*, objs: list[dict[str, Any]], at: datetime) -> None:
    """Mirror LocalQueues, one statement for the batch."""
    org = _OrgRows(objs)
    rows = []
    for obj in objs:
        metadata, status = obj["metadata"], obj.get("status") or {}
        active, reason, message = _active(status)
        afs = (status.get("fairSharing") or {}).get("admissionFairSharingStatus") or {}
        rows.append(LocalQueueState(
            namespace=metadata["namespace"], name=metadata["name"],
            project=org.get(_Project, metadata.get("labels") or {}, PROJECT_LABEL),
            cluster_queue=(obj.get("spec") or {}).get("clusterQueue", ""),
            pending_workloads=status.get("pendingWorkloads", 0) or 0,
            reserving_workloads=status.get("reservingWorkloads", 0) or 0,
            admitted_workloads=status.get("admittedWorkloads", 0) or 0,
            afs_consumed=dict(afs.get("consumedResources") or {}), afs_updated_at=_timestamp(afs.get("lastUpdate")),
            active=active, active_reason=reason, active_message=message, observed_at=at))
    _upsert(LocalQueueState, rows, ["namespace", "name"])


def cohorts_mirror(*, objs: list[dict[str, Any]], at: datetime) -> None:
    """Mirror Cohorts, one statement for the batch."""
    org = _OrgRows(objs)
    rows = []
    for obj in objs:
        metadata, status = obj["metadata"], obj.get("status") or {}
        labels = metadata.get("labels") or {}
        rows.append(CohortState(
            name=metadata["name"], node_pool=org.get(_NodePool, labels, POOL_LABEL),
            project=org.get(_Project, labels, PROJECT_LABEL),
            department=org.get(_Department, labels, DEPARTMENT_LABEL),
            parent=(obj.get("spec") or {}).get("parentName", ""),
            weighted_share=(status.get("fairSharing") or {}).get("weightedShare"), observed_at=at))
    _upsert(CohortState, rows, ["name"])


def nodes_mirror(*, objs: list[dict[str, Any]], at: datetime) -> None:
    """Mirror Nodes. A node's pool is the first pool (by slug) whose node labels it carries: nodes are not the
    portal's, so the pool's selector decides, as it does for the pool's pods."""
    pools: list[Any] = list(_NodePool._default_manager.exclude(node_labels={}).order_by("slug"))
    rows = []
    for obj in objs:
        metadata, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        labels = metadata.get("labels") or {}
        pool = next((pool for pool in pools if all(labels.get(key) == value
                                                    for key, value in pool.node_labels.items())), None)
        allocatable = (status.get("allocatable") or {}).get(pool.gpu_resource, 0) if pool is not None else 0
        ready = any(condition.get("type") == kueue.NODE_READY and condition.get("status") == kueue.TRUE
                    for condition in status.get("conditions") or [])
        taints = [{key: taint[key] for key in ("key", "value", "effect") if taint.get(key)}
                  for taint in spec.get("taints") or [] if isinstance(taint, dict)]
        rows.append(NodeState(
            name=metadata["name"], node_pool=pool, allocatable_gpus=max(0, int(_units(allocatable))), ready=ready,
            unschedulable=bool(spec.get("unschedulable")), labels=dict(labels), taints=taints,
            allocatable={name: str(quantity) for name, quantity in (status.get("allocatable") or {}).items()},
            observed_at=at))
    _upsert(NodeState, rows, ["name"])


_MIRROR_MODELS: dict[str, type[ClusterQueueState] | type[LocalQueueState] | type[CohortState] | type[NodeState]] = {
    "ClusterQueue": ClusterQueueState, "LocalQueue": LocalQueueState, "Cohort": CohortState, "Node": NodeState,
    "Queue": ClusterQueueState,  # KAI's, as two rows each (kai_queues_mirror)
}


def _kind_rows(kind: str) -> Any:
    """The mirror rows of one kind: a ClusterQueue's and a KAI Queue's share a table, told apart by the name."""
    rows = _MIRROR_MODELS[kind].objects.all()
    if kind == "ClusterQueue":
        return rows.exclude(name__contains="/")
    if kind == "Queue":
        return rows.filter(name__contains="/")
    return rows


def mirror_forget(*, kind: str, name: str, namespace: str = "") -> None:
    if kind == "Queue":
        _kind_rows(kind).filter(name__in=[kai_row_name(name, guaranteed=flag) for flag in KAI_ROWS]).delete()
        return
    filters = {"name": name, **({"namespace": namespace} if kind == "LocalQueue" else {})}
    _kind_rows(kind).filter(**filters).delete()


def mirror_keep_only(*, kind: str, keys: set[tuple[str, str]]) -> None:
    """After a full relist: drop mirror rows of objects that no longer exist."""
    if kind == "Queue":
        keys = {(namespace, kai_row_name(name, guaranteed=flag)) for namespace, name in keys for flag in KAI_ROWS}
    with transaction.atomic():
        for row in _kind_rows(kind):
            if (getattr(row, "namespace", ""), row.name) not in keys:
                row.delete()


def watcher_heartbeat(*, at: datetime, error: str = "") -> None:
    """Record one try of the watcher's: the cluster answered (no error) or why not."""
    fields: dict[str, Any] = {"beat_at": at, "error": error}
    if not error:
        fields["cluster_seen_at"] = at
    WatcherHeartbeat.objects.update_or_create(pk=1, defaults=fields)


def watcher_served_kinds(*, kinds: list[str], at: datetime, torch_runtime: str = "") -> None:
    """The kinds of work the cluster serves and its ClusterTrainingRuntime for PyTorch, as the watcher's last full
    list found them (manifests of other kinds are refused at submit; PyTorch runs as a TrainJob only on a runtime)."""
    served = {"served_kinds": sorted(kinds), "torch_runtime": torch_runtime}
    WatcherHeartbeat.objects.update_or_create(pk=1, defaults=served, create_defaults={"beat_at": at, **served})


def unmapped_record(*, uid: str, namespace: str, name: str, reason: str, at: datetime, detail: str = "",
                    object_kind: str = "", gpus: int = 0) -> None:
    """Keep one object the portal cannot count as a project's work (first seen once, then refreshed)."""
    project = _Project._default_manager.filter(namespace=namespace).first()
    values = {"namespace": namespace, "name": name[:253], "reason": reason, "detail": detail[:500],
              "object_kind": object_kind[:63], "gpus": gpus, "project": project, "seen_at": at}
    UnmappedWork.objects.update_or_create(uid=uid, defaults=values, create_defaults={**values, "first_seen_at": at})


def unmapped_seen(*, uid: str) -> bool:
    return UnmappedWork.objects.filter(uid=uid).exists()


def unmapped_forget(*, uid: str) -> None:
    """The object is gone, or the portal can now map it."""
    UnmappedWork.objects.filter(uid=uid).delete()


def unmapped_forget_many(*, uids: set[str]) -> None:
    """These objects are mapped now (one statement for a whole batch)."""
    if uids:
        UnmappedWork.objects.filter(uid__in=uids).delete()


def unmapped_keep_only(*, uids: set[str], reasons: set[str]) -> None:
    """After a full pass over the objects of these reasons: drop the rows of the others (gone or mapped now)."""
    UnmappedWork.objects.filter(reason__in=reasons).exclude(uid__in=uids).delete()
