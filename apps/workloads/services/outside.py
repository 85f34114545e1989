"""What the watcher does with work submitted outside the portal: mirror each Kueue Workload of a project's namespace
as a workload of that project (docs/architecture.md, Work submitted outside the portal).

The row is keyed by the Kueue Workload's uid, so a replayed event or a resync finds the same row. Its status then
follows the same state machine as the portal's own work (`observe.workload_observe`), so lists, queues, forecasts,
preemption sentences and the GPU-hour ledger count it the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.core.kueue_names import ELASTIC, GUARANTEED
from apps.core.quantities import quantity
from apps.org.models import NodePool, PriorityClass, Project
from apps.workloads.models import Origin, Status, Workload
from apps.workloads.observation import Observation, OutsideWork, PodSet, Unmapped

from .transitions import _event

MAX_OUTSIDE_PODS = 100_000  # more pods than any cluster runs: a malformed object, refused from the mirror
MAX_NAME = Workload._meta.get_field("name").max_length or 40


@dataclass(frozen=True)
class Placement:
    """Where outside work queues: its pool, and whether its LocalQueue is the pool's elastic (preemptible) one."""

    pool: NodePool
    preemptible: bool


def placement(queue_name: str) -> Placement | None:
    """The pool and queue kind a LocalQueue name stands for (`guaranteed-<pool>` / `elastic-<pool>`), if it is one
    of the portal's."""
    kind, _, pool_slug = queue_name.partition("-")
    if kind not in (GUARANTEED, ELASTIC) or not pool_slug:
        return None
    pool = NodePool.objects.filter(slug=pool_slug).first()
    return Placement(pool=pool, preemptible=kind == ELASTIC) if pool else None


def _per_pod(pod_set: PodSet, resource: str) -> Decimal:
    return quantity(pod_set.requests[resource]) if resource in pod_set.requests else Decimal(0)


def _sizes(work: OutsideWork, pool: NodePool) -> dict[str, object]:
    """The row's size fields from the pod sets, in the pool's GPU units: whole units per pod (Kueue counts a request
    as written; a fraction of a device cannot be asked for), every pod set's count."""
    pod_sets = []
    for pod_set in work.pod_sets:
        if not 0 <= pod_set.count <= MAX_OUTSIDE_PODS:
            raise ValueError(f"pod set {pod_set.name!r} asks for {pod_set.count} pods")
        gpus = math.ceil(_per_pod(pod_set, pool.gpu_resource))
        pod_sets.append({"name": pod_set.name, "count": pod_set.count, "gpus": gpus,
                         "cpu": str(_per_pod(pod_set, "cpu").quantize(Decimal("0.001"))),
                         "memory_gib": str((_per_pod(pod_set, "memory") / 2**30).quantize(Decimal("0.01")))})
    if not pod_sets:
        raise ValueError("it declares no pod sets")
    largest = max(pod_sets, key=lambda entry: (entry["gpus"], entry["count"]))
    pods = sum(int(entry["count"]) for entry in pod_sets)  # type: ignore[call-overload]
    if pods > MAX_OUTSIDE_PODS:
        raise ValueError(f"it asks for {pods} pods")
    return {
        "pod_sets": pod_sets, "pods": max(pods, 1), "gpus": largest["gpus"],
        "pod_set_units": sum(int(entry["gpus"]) * int(entry["count"]) for entry in pod_sets),  # type: ignore[call-overload]
        "cpu": Decimal(str(largest["cpu"])), "memory_gib": Decimal(str(largest["memory_gib"])),
    }


def _attributed(work: OutsideWork) -> object | None:
    """The portal user the object names: its owner label first, else the Kubernetes user the cluster stamped."""
    users = get_user_model()._default_manager
    for username in (work.portal_user, work.cluster_user):
        if username:
            user = users.filter(username=username, is_active=True).first()
            if user is not None:
                return user
    return None


def workload_mirror_outside(*, work: OutsideWork, observation: Observation) -> int | Unmapped:
    """Create or refresh the row of one Kueue Workload from outside the portal; returns its id, or why it cannot be
    mirrored (nothing is written then). The status it reports is recorded by `observe.workload_observe`."""
    project = Project.objects.filter(namespace=work.namespace).first()
    if project is None:
        return _unmapped(work, "no_project", f"namespace {work.namespace} belongs to no project")
    where = placement(work.queue_name)
    if where is None:
        return _unmapped(work, "no_queue", f"queue {work.queue_name or '(none)'!r} is none of the portal's")
    try:
        sizes = _sizes(work, where.pool)
    except (ValueError, KeyError) as error:
        return _unmapped(work, "malformed", str(error))
    user = _attributed(work)
    values: dict[str, object] = {
        **sizes, "project": project, "node_pool": where.pool, "preemptible": where.preemptible, "kind": work.kind,
        "owner": user, "submitted_by": (work.cluster_user or work.manager)[:253],
        "priority_class": PriorityClass.objects.filter(name=work.priority_class).first() if work.priority_class
        else None,
        "object_api_version": work.object_api_version[:253], "object_name": work.object_name[:253],
        "name": work.object_name[:MAX_NAME], "image": next((p.image for p in work.pod_sets if p.image), "")[:255],
        "kueue_name": work.kueue_name, "k8s_uid": work.object_uid, "kueue_priority": work.priority,
        "max_runtime_seconds": work.max_runtime_seconds,
    }
    with transaction.atomic():
        row = Workload.objects.select_for_update().filter(kueue_uid=work.kueue_uid).first()
        if row is not None:
            changed = {name: value for name, value in values.items() if getattr(row, name) != value}
            if changed:
                Workload.objects.filter(pk=row.pk).update(**changed)
            return row.pk
        submitted_at = work.created_at or timezone.now()
        try:
            with transaction.atomic():
                row = Workload.objects.create(
                    **values, origin=Origin.OUTSIDE, kueue_uid=work.kueue_uid, status=Status.QUEUED,
                    status_reason="SubmittedOutside", submitted_at=submitted_at, model_label="", data_class="")
        except IntegrityError:  # another applier mirrored it first
            return Workload.objects.get(kueue_uid=work.kueue_uid).pk
        who = f" by {work.cluster_user or work.manager}" if work.cluster_user or work.manager else ""
        _event(row, from_status="", to_status=Status.QUEUED, reason="SubmittedOutside", cluster_at=work.created_at,
               message=f"{row.get_kind_display()} {work.object_name} submitted outside the portal{who}")
    return row.pk


def _unmapped(work: OutsideWork, reason: str, detail: str) -> Unmapped:
    gpus = 0
    for pod_set in work.pod_sets:
        for resource, value in pod_set.requests.items():
            if resource.startswith("nvidia.com/") or resource.endswith("/gpu"):  # read already: valid quantities
                gpus += math.ceil(quantity(value)) * max(pod_set.count, 0)
    return Unmapped(uid=work.kueue_uid, namespace=work.namespace, name=work.kueue_name, reason=reason, detail=detail,
                    object_kind=work.kind, gpus=min(gpus, 2**31 - 1))
