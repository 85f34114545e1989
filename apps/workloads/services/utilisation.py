"""GPU utilisation and idle detection: the worker stores what Prometheus reports; the admin sets the idle rule."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction

from apps.accounts import access
from apps.accounts.selectors import notification_preference
from apps.core.actors import Actor
from apps.core.audit import audit_record
from apps.core.tasks import enqueue_on_commit
from apps.workloads.models import IdlePolicy, Workload, WorkloadUtilisation

from .notifications import workload_idle_channels_record
from .transitions import _event

IDLE_NOTIFY_TASK = "worker.tasks.workload_idle_notify"
GPU_IDLE_REASON = "GpuIdle"


def idle_policy_update(*, actor: Actor, threshold_percent: int, idle_seconds: int, cull_notebooks: bool,
                       warning_minutes: int) -> IdlePolicy:
    """The admin's idle rule; audited."""
    if not access.can_manage_idle_policy(actor):
        raise PermissionDenied("Only admins set the idle rule.")
    with transaction.atomic():
        policy = IdlePolicy.objects.select_for_update().get_or_create(pk=1)[0]
        before = {"threshold_percent": policy.threshold_percent, "idle_seconds": policy.idle_seconds,
                  "cull_notebooks": policy.cull_notebooks, "warning_minutes": policy.warning_minutes}
        policy.threshold_percent, policy.idle_seconds = threshold_percent, idle_seconds
        policy.cull_notebooks, policy.warning_minutes = cull_notebooks, warning_minutes
        policy.full_clean()
        policy.save()
        audit_record(actor=actor, action="idle_policy.update", obj=policy, before=before,
                     after={"threshold_percent": threshold_percent, "idle_seconds": idle_seconds,
                            "cull_notebooks": cull_notebooks, "warning_minutes": warning_minutes})
    return policy


def _merge_pairs(points: list[list[float]]) -> list[list[float]]:
    """Halve a chart series: each two neighbours become their mean (time, utilisation, memory)."""
    merged = []
    for index in range(0, len(points) - 1, 2):
        first, second = points[index], points[index + 1]
        merged.append([round((a + b) / 2, 3) for a, b in zip(first, second, strict=True)])
    if len(points) % 2:
        merged.append(points[-1])
    return merged


def _replicas_merged(stored: list[dict[str, Any]], per_pod: dict[str, list[tuple[datetime, float]]],
                     counted_until: datetime | None) -> list[dict[str, Any]]:
    """Each pod's figures with its samples after `counted_until` added, by pod name; a pod not measured within
    REPLICAS_KEPT of the newest sample goes (WorkloadUtilisation.replicas)."""
    by_pod = {entry["pod"]: dict(entry) for entry in stored}
    for pod, points in per_pod.items():
        fresh = sorted(point for point in points if counted_until is None or point[0] > counted_until)
        if not fresh:
            continue
        entry = by_pod.setdefault(pod, {"pod": pod, "mean_percent": 0.0, "last_percent": 0.0, "samples": 0,
                                        "last_at": 0.0})
        samples = entry["samples"] + len(fresh)
        entry["mean_percent"] = round((entry["mean_percent"] * entry["samples"] + sum(
            util for _, util in fresh)) / samples, 3)
        entry["samples"], entry["last_percent"] = samples, round(fresh[-1][1], 3)
        entry["last_at"] = max(entry["last_at"], fresh[-1][0].timestamp())
    newest = max((entry["last_at"] for entry in by_pod.values()), default=0.0)
    kept = WorkloadUtilisation.REPLICAS_KEPT.total_seconds()
    return [by_pod[pod] for pod in sorted(by_pod) if by_pod[pod]["last_at"] >= newest - kept]


def workload_utilisation_record(*, workload: Workload, samples: list[tuple[datetime, float, float]],
                                policy: IdlePolicy, now: datetime,
                                replicas: dict[str, list[tuple[datetime, float]]] | None = None,
                                ) -> list[tuple[datetime, float, float]]:
    """Add Prometheus' samples (time, mean GPU util %, framebuffer MiB) newer than what is already counted; update
    the idle stretch and flag the workload (event + e-mail to the owner) when it reaches the policy's duration.
    `replicas`: an inference service's samples per pod (pod name -> [(time, GPU util %)]), kept beside the mean.

    Returns the samples it accepted (the caller adds the same ones to the hourly showback figures), so a repeated
    refresh over the same window counts nothing twice."""
    with transaction.atomic():
        row, _ = WorkloadUtilisation.objects.select_for_update().get_or_create(workload=workload)
        fresh = sorted(s for s in samples if row.sampled_until is None or s[0] > row.sampled_until)
        if not fresh:
            return []
        if replicas:
            row.replicas = _replicas_merged(row.replicas, replicas, row.sampled_until)
        total = (row.mean_percent or 0.0) * row.samples + sum(util for _, util, _ in fresh)
        row.samples += len(fresh)
        row.mean_percent = total / row.samples
        row.peak_memory_mib = max([row.peak_memory_mib or 0.0, *(memory for _, _, memory in fresh)])
        row.last_percent = fresh[-1][1]
        row.sampled_until = fresh[-1][0]
        series = [*row.series, *([moment.timestamp(), round(util, 1), round(memory)] for moment, util, memory in fresh)]
        while len(series) > WorkloadUtilisation.MAX_POINTS:
            series = _merge_pairs(series)
        row.series = series
        for moment, util, _ in fresh:
            if util < policy.threshold_percent:
                row.idle_since = row.idle_since or moment
            else:
                row.idle_since, row.idle_flagged_at = None, None
        idle_since = row.idle_since
        if idle_since is not None and row.idle_flagged_at is None and \
                (fresh[-1][0] - idle_since).total_seconds() >= policy.idle_seconds:
            row.idle_flagged_at = now
            event = _event(workload, from_status=workload.status, to_status=workload.status, reason=GPU_IDLE_REASON,
                           message=f"GPUs below {policy.threshold_percent}% for "
                                   f"{_duration_text(policy.idle_seconds)}",
                           at=now, details={"idle_since": idle_since.isoformat()})
            workload_idle_channels_record(workload, event, policy=policy)
            preference = notification_preference(workload.owner_id) if workload.owner_id is not None else None
            if preference and preference.wants("idle"):  # the flag and the page show it either way
                enqueue_on_commit(IDLE_NOTIFY_TASK, workload.pk)
        row.save()
    return fresh


def _duration_text(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} minutes"
    return f"{seconds} s"
