"""What the watcher does with work submitted outside the portal: mirror each Kueue Workload of a project's namespace
as a workload of that project (docs/architecture.md, Work submitted outside the portal).

The row is keyed by the Kueue Workload's uid, so a replayed event or a resync finds the same row. Its status then
follows the same state machine as the portal's own work (`observe.workload_observe`), so lists, queues, forecasts,
preemption sentences and the GPU-hour ledger count it the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from apps.core.kueue_names import ELASTIC, GUARANTEED
from apps.core.quantities import quantity
from apps.core.services import lock_many_for_transaction
from apps.org.models import NodePool, PriorityClass, Project, ProjectNamespace
from apps.workloads.models import (
    FINAL_STATUSES,
    HOLDING_STATUSES,
    Origin,
    Status,
    Workload,
    WorkloadEvent,
)
from apps.workloads.observation import Observation, OutsideWork, PodSet, Unmapped
from apps.workloads.selectors import preemptor_id
from apps.workloads.signals import quotas_held

from .observe import WATCHER_IGNORES, workloads_observe

MAX_OUTSIDE_PODS = 100_000  # more pods than any cluster runs: a malformed object, refused from the mirror
MAX_NAME = Workload._meta.get_field("name").max_length or 40


@dataclass(frozen=True)
class Placement:
    """Where outside work queues: its pool, and whether its LocalQueue is the pool's elastic (preemptible) one."""

    pool: NodePool
    preemptible: bool


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


def _projects_by_namespace(namespaces: set[str]) -> dict[str, Project]:
    """The project of each namespace: its own, or the one an admin mapped it to (ProjectNamespace)."""
    found = {p.namespace: p for p in Project.objects.filter(namespace__in=namespaces)}
    for mapping in ProjectNamespace.objects.filter(namespace__in=namespaces - set(found)).select_related("project"):
        found[mapping.namespace] = mapping.project
    return found


@dataclass
class _Lookups:
    """The org rows a batch names, each read once: projects by namespace, pools by slug, users, priority classes."""

    projects: dict[str, Project]
    pools: dict[str, NodePool]
    users: dict[str, Any]
    priority_classes: dict[str, PriorityClass]

    @classmethod
    def of(cls, works: Sequence[OutsideWork]) -> _Lookups:
        usernames = {name for work in works for name in (work.portal_user, work.cluster_user) if name}
        return cls(
            projects=_projects_by_namespace({w.namespace for w in works}),
            pools={pool.slug: pool for pool in NodePool.objects.filter(
                slug__in={w.queue_name.partition("-")[2] for w in works})},
            users={user.username: user for user in get_user_model()._default_manager.filter(
                username__in=usernames, is_active=True)} if usernames else {},
            priority_classes={pc.name: pc for pc in PriorityClass.objects.filter(
                name__in={w.priority_class for w in works if w.priority_class})},
        )

    def placement(self, queue_name: str) -> Placement | None:
        """The pool and queue kind a LocalQueue name stands for (`guaranteed-<pool>` / `elastic-<pool>`), if it is
        one of the portal's."""
        kind, _, pool_slug = queue_name.partition("-")
        pool = self.pools.get(pool_slug) if kind in (GUARANTEED, ELASTIC) else None
        return Placement(pool=pool, preemptible=kind == ELASTIC) if pool else None

    def attributed(self, work: OutsideWork) -> Any:
        """The portal user the object names: its owner label first, else the Kubernetes user the cluster stamped."""
        return self.users.get(work.portal_user) or self.users.get(work.cluster_user)


def _values(work: OutsideWork, lookups: _Lookups) -> dict[str, Any] | Unmapped:
    """The row's fields for one Kueue Workload, or why it cannot be mirrored."""
    project = lookups.projects.get(work.namespace)
    if project is None:
        return _unmapped(work, "no_project", f"namespace {work.namespace} belongs to no project")
    where = lookups.placement(work.queue_name)
    if where is None:
        return _unmapped(work, "no_queue", f"queue {work.queue_name or '(none)'!r} is none of the portal's")
    try:
        sizes = _sizes(work, where.pool)
    except (ValueError, KeyError) as error:
        return _unmapped(work, "malformed", str(error))
    return {
        **sizes, "project": project, "node_pool": where.pool, "preemptible": where.preemptible, "kind": work.kind,
        "owner": lookups.attributed(work), "submitted_by": (work.cluster_user or work.manager)[:253],
        "priority_class": lookups.priority_classes.get(work.priority_class),
        "object_api_version": work.object_api_version[:253], "object_name": work.object_name[:253],
        "name": work.object_name[:MAX_NAME], "image": next((p.image for p in work.pod_sets if p.image), "")[:255],
        "kueue_name": work.kueue_name, "k8s_uid": work.object_uid, "kueue_priority": work.priority,
        "max_runtime_seconds": work.max_runtime_seconds,
        "namespace": "" if work.namespace == project.namespace else work.namespace,
    }


def workload_mirror_outside(*, work: OutsideWork, observation: Observation) -> int | Unmapped:
    """One Kueue Workload from outside the portal: `workloads_mirror_outside` for a batch of one."""
    return workloads_mirror_outside(items=[(work, observation)])[work.kueue_uid]


def workloads_mirror_outside(*, items: Sequence[tuple[OutsideWork, Observation]]) -> dict[str, int | Unmapped]:
    """Create or refresh the rows of Kueue Workloads from outside the portal; returns each one's row id by Kueue
    uid, or why it cannot be mirrored (nothing is written for it then).

    Rows seen for the first time are written together, already in the status Kueue reports, with their history
    (submitted, then that status) and their GPU-hour stretch: a first sync of thousands costs a few statements per
    batch, not per workload. Rows already mirrored go through `observe.workloads_observe` (the state machine), together,
    and only when what Kueue says of them changed.
    """
    lookups = _Lookups.of([work for work, _ in items])
    results: dict[str, int | Unmapped] = {}
    mapped: dict[str, tuple[OutsideWork, Observation, dict[str, Any]]] = {}
    for work, observation in items:
        values = _values(work, lookups)
        if isinstance(values, Unmapped):
            results[work.kueue_uid] = values
        else:
            mapped[work.kueue_uid] = (work, observation, values)
    if not mapped:
        return results
    with transaction.atomic():
        existing = {row.kueue_uid: row for row in Workload.objects.filter(kueue_uid__in=list(mapped))}
        # One writer per new row (another applier may have it).
        lock_many_for_transaction([f"workloads-outside:{uid}" for uid in set(mapped) - set(existing)])
        existing |= {row.kueue_uid: row for row in Workload.objects.filter(
            kueue_uid__in=list(set(mapped) - set(existing)))}
        fresh = [entry for uid, entry in mapped.items() if uid not in existing]
        for row in _create(fresh):
            results[row.kueue_uid] = row.pk
    news = []
    for uid, row in existing.items():
        work, observation, values = mapped[uid]
        changed = {name: value for name, value in values.items() if getattr(row, name) != value}
        if changed:
            Workload.objects.filter(pk=row.pk).update(**changed)
        if _news(row, observation):
            news.append((row.pk, observation, preemptor_id(observation)))
        results[uid] = row.pk
    if news:
        workloads_observe(observations=news)
    return results


def _news(row: Workload, observation: Observation) -> bool:
    """Whether Kueue says something of an already mirrored row that it has not recorded."""
    if row.status in WATCHER_IGNORES:
        return False
    preempted = observation.preemption is not None and (
        row.last_preempted_at is None or observation.preemption.at > row.last_preempted_at)
    return preempted or (row.status, row.status_reason, row.kueue_conditions, row.admission) != (
        observation.status, observation.reason, observation.conditions, observation.admission)


def _create(fresh: list[tuple[OutsideWork, Observation, dict[str, Any]]]) -> list[Workload]:
    """New rows in the status Kueue reports, their two history events and their GPU-hour stretches."""
    now = timezone.now()
    rows = []
    for work, observation, values in fresh:
        final = observation.status in FINAL_STATUSES
        rows.append(Workload(
            **values, origin=Origin.OUTSIDE, kueue_uid=work.kueue_uid, status=observation.status,
            status_reason=observation.reason or "SubmittedOutside", status_message=observation.message,
            submitted_at=work.created_at or now, model_label="", data_class="",
            kueue_conditions=observation.conditions, cluster_queue=observation.cluster_queue,
            admission=observation.admission, admitted_at=observation.admitted_at, started_at=observation.started_at,
            finished_at=(observation.finished_at or observation.at or now) if final else None,
            last_preempted_at=observation.preemption.at if observation.preemption else None))
    Workload.objects.bulk_create(rows, batch_size=1000)
    events, stretches = [], []
    for row, (work, observation, _) in zip(rows, fresh, strict=True):
        who = f" by {work.cluster_user or work.manager}" if work.cluster_user or work.manager else ""
        events.append(WorkloadEvent(
            workload=row, at=now, cluster_at=work.created_at, from_status="", to_status=Status.QUEUED,
            reason="SubmittedOutside",
            message=f"{row.get_kind_display()} {work.object_name} submitted outside the portal{who}"))
        if observation.status != Status.QUEUED:
            events.append(WorkloadEvent(workload=row, at=now, cluster_at=observation.at, from_status=Status.QUEUED,
                                        to_status=observation.status, reason=observation.reason,
                                        message=observation.message))
        stretch = _stretch(observation)
        if stretch is not None:
            stretches.append((row, *stretch))
    WorkloadEvent.objects.bulk_create(events, batch_size=2000)
    if stretches:
        quotas_held.send(sender=Workload, stretches=stretches)
    return rows


def _stretch(observation: Observation) -> tuple[datetime, datetime | None, str] | None:
    """The GPU-hour stretch a first-seen workload held: from its admission, open while it holds quota, else closed
    when it finished or was preempted (as `observe._account` records it for a row seen all along)."""
    admitted_at = observation.admitted_at
    if admitted_at is None:
        return None
    if observation.status in HOLDING_STATUSES:
        return admitted_at, None, ""
    ended_at = observation.finished_at or (observation.preemption.at if observation.preemption else None)
    if ended_at is None:
        return None
    return admitted_at, ended_at, observation.reason or observation.status


def _unmapped(work: OutsideWork, reason: str, detail: str) -> Unmapped:
    gpus = 0
    for pod_set in work.pod_sets:
        for resource, value in pod_set.requests.items():
            if resource.startswith("nvidia.com/") or resource.endswith("/gpu"):  # read already: valid quantities
                gpus += math.ceil(quantity(value)) * max(pod_set.count, 0)
    return Unmapped(uid=work.kueue_uid, namespace=work.namespace, name=work.kueue_name, reason=reason, detail=detail,
                    object_kind=work.kind, gpus=min(gpus, 2**31 - 1))
