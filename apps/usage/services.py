"""Writes of the cluster mirror (the watcher is the only caller). Upserts keyed by Kubernetes name, idempotent."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import DateTimeField, F, Value
from django.db.models.functions import Greatest

from apps.org.labels import DEPARTMENT_LABEL, POOL_LABEL, PROJECT_LABEL
from apps.org.models import Department, NodePool, Project

from .models import ClusterQueueState, CohortState, LocalQueueState


def _units(value: Any) -> Decimal:
    try:
        return Decimal(str(value))
    except ArithmeticError:
        return Decimal(0)


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
        if condition.get("type") == "Active":
            return condition.get("status") == "True", condition.get("reason", ""), condition.get("message", "")
    return True, "", ""


def _owners(labels: dict[str, str]) -> dict[str, Any]:
    """The org rows named by the portal's labels (None when they no longer exist)."""
    return {
        "node_pool": NodePool.objects.filter(slug=labels.get(POOL_LABEL, "")).first(),
        "project": Project.objects.filter(slug=labels.get(PROJECT_LABEL, "")).first(),
    }


def cluster_queue_mirror(*, obj: dict[str, Any], at: datetime) -> None:
    metadata, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    reserved, reserved_borrowed = _flavor_totals(status.get("flavorsReservation"))
    used, used_borrowed = _flavor_totals(status.get("flavorsUsage"))
    active, reason, message = _active(status)
    ClusterQueueState.objects.update_or_create(name=metadata["name"], defaults={
        **_owners(metadata.get("labels") or {}), "guaranteed": metadata["name"].endswith("-guaranteed"),
        "cohort": spec.get("cohortName", ""), "nominal": _nominal(spec),
        "pending_workloads": status.get("pendingWorkloads", 0) or 0,
        "reserving_workloads": status.get("reservingWorkloads", 0) or 0,
        "admitted_workloads": status.get("admittedWorkloads", 0) or 0,
        "reserved": reserved, "reserved_borrowed": reserved_borrowed, "used": used, "used_borrowed": used_borrowed,
        "weighted_share": (status.get("fairSharing") or {}).get("weightedShare"),
        "active": active, "active_reason": reason, "active_message": message, "observed_at": at,
    })


def local_queue_mirror(*, obj: dict[str, Any], at: datetime) -> None:
    metadata, status = obj["metadata"], obj.get("status") or {}
    active, reason, message = _active(status)
    LocalQueueState.objects.update_or_create(namespace=metadata["namespace"], name=metadata["name"], defaults={
        "project": _owners(metadata.get("labels") or {})["project"],
        "cluster_queue": (obj.get("spec") or {}).get("clusterQueue", ""),
        "pending_workloads": status.get("pendingWorkloads", 0) or 0,
        "reserving_workloads": status.get("reservingWorkloads", 0) or 0,
        "admitted_workloads": status.get("admittedWorkloads", 0) or 0,
        "active": active, "active_reason": reason, "active_message": message, "observed_at": at,
    })


def cohort_mirror(*, obj: dict[str, Any], at: datetime) -> None:
    metadata, status = obj["metadata"], obj.get("status") or {}
    labels = metadata.get("labels") or {}
    CohortState.objects.update_or_create(name=metadata["name"], defaults={
        **_owners(labels), "department": Department.objects.filter(slug=labels.get(DEPARTMENT_LABEL, "")).first(),
        "parent": (obj.get("spec") or {}).get("parentName", ""),
        "weighted_share": (status.get("fairSharing") or {}).get("weightedShare"), "observed_at": at,
    })


def mirror_forget(*, kind: str, name: str, namespace: str = "") -> None:
    model = {"ClusterQueue": ClusterQueueState, "LocalQueue": LocalQueueState, "Cohort": CohortState}[kind]
    filters = {"name": name, **({"namespace": namespace} if kind == "LocalQueue" else {})}
    model.objects.filter(**filters).delete()


def mirror_keep_only(*, kind: str, keys: set[tuple[str, str]]) -> None:
    """After a full relist: drop mirror rows of objects that no longer exist."""
    model = {"ClusterQueue": ClusterQueueState, "LocalQueue": LocalQueueState, "Cohort": CohortState}[kind]
    with transaction.atomic():
        for row in model.objects.all():
            if (getattr(row, "namespace", ""), row.name) not in keys:
                row.delete()


# --- the GPU-hour ledger ------------------------------------------------------------------------------------------


def usage_interval_open(*, workload: Any, at: datetime, ended_at: datetime | None = None, reason: str = "") -> bool:
    """Record the stretch of quota that began at `at` (Kueue's admission time); idempotent.

    No-op when an interval starting then exists already, or when another one is still open. With `ended_at` the
    stretch is recorded closed at once: the watcher learnt of the admission only after it ended.
    """
    from .models import UsageInterval

    existing = UsageInterval.objects.filter(workload_id=workload.pk)
    if existing.filter(started_at=at).exists() or (ended_at is None and existing.filter(ended_at__isnull=True)
                                                      .exists()):
        return False
    pool = workload.node_pool
    UsageInterval.objects.create(
        workload_id=workload.pk, project_id=workload.project_id, department_id=workload.project.department_id,
        user_id=workload.owner_id, node_pool_id=pool.pk, units=workload.gpu_units,
        card_fraction_numerator=pool.card_fraction_numerator, card_fraction_denominator=pool.card_fraction_denominator,
        queue=UsageInterval.Queue.ELASTIC if workload.preemptible else UsageInterval.Queue.GUARANTEED,
        model_label=workload.model_label, data_class=workload.data_class, started_at=at,
        ended_at=None if ended_at is None else max(at, ended_at), end_reason=reason[:100] if ended_at else "",
    )
    return True


def usage_interval_close(*, workload_id: int, at: datetime, reason: str) -> bool:
    """Stop counting; an interval closes once (no-op when none is open). Never ends before it began."""
    from .models import UsageInterval

    return bool(UsageInterval.objects.filter(workload_id=workload_id, ended_at__isnull=True).update(
        ended_at=Greatest(F("started_at"), Value(at, output_field=DateTimeField())), end_reason=reason[:100]))
