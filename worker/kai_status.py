"""KAI Scheduler's view of a portal workload -> the portal's status, as pure functions beside `status_map` (Kueue's).

Work on a KAI pool has no Kueue Workload: KAI schedules the Job's pods as the gang its PodGroup describes (README,
Kueue and KAI in one cluster; docs/architecture.md, The life of a submission). What the portal records comes from
three objects, read as the API returns them:

- the batch/v1 Job: finished or failed (its conditions), or being deleted, exactly as on a Kueue pool;
- the PodGroup (`scheduling.run.ai/v2alpha2`, named and owned like the Job): the gang's size (`spec.minMember`), its
  leaf Queue, and while it waits the scheduling condition saying why (`status.schedulingConditions`);
- its pods, kept by the watcher as `KaiPod`s: the gang holds its GPUs once `minMember` of them are bound to nodes
  (admitted, from the moment the last of those was bound) and runs once as many are ready. A pod KAI evicts carries a
  `DisruptionTarget` condition with reason `PreemptionByScheduler` just before it is deleted: the preemption, kept by
  the watcher after the pod is gone; the Job then makes new pods and the workload waits again.

KAI keeps no queue positions, so none are recorded; the cluster's own times are used wherever it gives them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps.core import kai_conditions as kai
from apps.core import kueue_conditions as kueue
from apps.core.kueue_names import KAI_QUEUE_LABEL
from apps.workloads.models import Status
from apps.workloads.observation import Observation, Preemption

from .status_map import parse_time

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class KaiPod:
    """What the watcher keeps of one pod of a portal Job on a KAI pool (a few values, not the object)."""

    uid: str
    job_uid: str  # the Job that controls it
    resource_version: str
    phase: str
    bound_at: datetime | None  # bound to a node: PodScheduled=True's transition (its start time without one)
    ready_at: datetime | None  # Ready=True's transition
    leaving: bool  # being deleted, or marked for eviction: it holds nothing the gang can count on
    preemption: Preemption | None = None  # KAI evicted it (DisruptionTarget, PreemptionByScheduler)


def on_kai(job: dict[str, Any]) -> bool:
    """Whether a portal Job runs on a KAI pool: it names a KAI queue, never a Kueue one (the shared contract)."""
    return bool((job["metadata"].get("labels") or {}).get(KAI_QUEUE_LABEL))


def _condition(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == kueue.TRUE), {})


def _controller_uid(metadata: dict[str, Any], kind: str) -> str:
    return next((str(ref.get("uid", "")) for ref in metadata.get("ownerReferences") or []
                 if ref.get("controller") and ref.get("kind") == kind), "")


def pod_group_job_uid(pod_group: dict[str, Any]) -> str:
    """The Job a portal PodGroup belongs to (its controller owner), "" for any other."""
    return _controller_uid(pod_group.get("metadata") or {}, "Job")


def compact_pod_group(pod_group: dict[str, Any]) -> dict[str, Any]:
    """The part of a PodGroup the status needs: its name, size, queue and scheduling conditions."""
    metadata, spec, status = pod_group["metadata"], pod_group.get("spec") or {}, pod_group.get("status") or {}
    return {"metadata": {key: metadata.get(key) for key in ("name", "namespace", "uid", "resourceVersion",
                                                            "creationTimestamp")},
            "spec": {"minMember": spec.get("minMember"), "queue": spec.get("queue", "")},
            "status": {"schedulingConditions": status.get("schedulingConditions") or []}}


def compact_pod(pod: dict[str, Any]) -> KaiPod | None:
    """A pod of a portal Job as the watcher keeps it; None for a pod no Job controls."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    job_uid = _controller_uid(metadata, "Job")
    if not job_uid:
        return None
    conditions = status.get("conditions") or []
    bound_at = None
    if (pod.get("spec") or {}).get("nodeName"):
        scheduled = _condition(conditions, "PodScheduled")
        bound_at = _time(scheduled.get("lastTransitionTime")) or _time(status.get("startTime")) or _time(
            metadata.get("creationTimestamp"))
    ready = _condition(conditions, "Ready")
    evicted = _condition(conditions, kai.DISRUPTION_TARGET)
    preemption = None
    if evicted.get("reason") == kai.PREEMPTION_BY_SCHEDULER and _time(evicted.get("lastTransitionTime")):
        preemption = Preemption(at=_time(evicted.get("lastTransitionTime")),  # type: ignore[arg-type]
                                reason=kai.PREEMPTION_BY_SCHEDULER, message=str(evicted.get("message") or ""),
                                preemptor_workload_uid="", preemptor_job_uid="")
    return KaiPod(uid=str(metadata.get("uid", "")), job_uid=job_uid,
                  resource_version=str(metadata.get("resourceVersion", "")), phase=str(status.get("phase") or ""),
                  bound_at=bound_at, ready_at=_time(ready.get("lastTransitionTime")) if ready else None,
                  leaving=bool(metadata.get("deletionTimestamp") or evicted), preemption=preemption)


def _time(value: Any) -> datetime | None:
    try:
        return parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _nth(times: Iterable[datetime], n: int) -> datetime:
    """The n-th earliest (1-based): when the n-th pod of a gang got there."""
    return sorted(times)[n - 1]


def observe_kai(job: dict[str, Any] | None, pod_group: dict[str, Any] | None, pods: Iterable[KaiPod],
                preemption: Preemption | None = None) -> Observation | None:
    """What the portal status of a Job on a KAI pool is now; None without the Job."""
    if job is None:
        return None
    metadata, job_status = job["metadata"], job.get("status") or {}
    spec = (pod_group or {}).get("spec") or {}
    condition = kai.scheduling_condition(((pod_group or {}).get("status") or {}).get("schedulingConditions"))
    min_member = max(1, int(spec.get("minMember") or 1))
    pods = list(pods)
    # Pods bound to a node and not being evicted, finished ones included: the Job keeps those, so the moment the gang
    # was bound (its min_member-th pod) stays the same until KAI evicts it (the evicted pods are deleted).
    ever_bound = [p for p in pods if p.bound_at is not None and not p.leaving]
    holding = [p for p in ever_bound if p.phase not in FINISHED_PHASES]
    ready = [p for p in holding if p.ready_at is not None]
    admitted_at = None
    if len(ever_bound) >= min_member:
        admitted_at = _nth((p.bound_at for p in ever_bound if p.bound_at), min_member)
    started = [p.ready_at for p in ever_bound if p.ready_at is not None]
    common: dict[str, Any] = {
        "conditions": [condition] if condition else [],
        "kai_queue": str(spec.get("queue") or (metadata.get("labels") or {}).get(KAI_QUEUE_LABEL, "")),
        "preemption": preemption,
        "admitted_at": admitted_at,
        "started_at": min(started) if started else None,
        "deleted_at": parse_time(metadata.get("deletionTimestamp")),
        "job_uid": metadata.get("uid", ""),
    }
    job_conditions = job_status.get("conditions") or []
    for kind, status in ((kueue.JOB_COMPLETE, Status.SUCCEEDED), (kueue.JOB_FAILED, Status.FAILED)):
        done = _condition(job_conditions, kind)
        if done:
            at = parse_time(job_status.get("completionTime") or done.get("lastTransitionTime"))
            return Observation(status=status, reason=done.get("reason", kind), message=done.get("message", ""),
                               at=at, finished_at=at, **common)
    if common["deleted_at"]:
        at = common["deleted_at"]
        return Observation(status=Status.STOPPED, reason=kueue.JOB_DELETED,
                           message="The Job was deleted outside the portal", at=at, finished_at=at, **common)
    if admitted_at is not None:
        # Running once the gang's pods are ready (all of them when fewer are left, as a batch's last pods finish).
        if not holding or len(ready) >= min(min_member, len(holding)):
            times = [p.ready_at for p in (ready or ever_bound) if p.ready_at is not None]
            at = _nth(times, min(min_member, len(times))) if times else admitted_at
            return Observation(status=Status.RUNNING, reason=kueue.RUNNING, message="Pods are running", at=at,
                               **common)
        return Observation(status=Status.ADMITTED, reason=kueue.ADMITTED,
                           message=f"Scheduled by KAI Scheduler in queue {common['kai_queue']}", at=admitted_at,
                           **common)
    if condition:
        message = str(condition.get("message") or kai.first_reason(condition).get("message") or "")
        at = parse_time(condition.get("lastTransitionTime"))
    else:
        message = "Waiting for KAI Scheduler to schedule its pods"
        at = parse_time(((pod_group or {}).get("metadata") or {}).get("creationTimestamp") or metadata.get(
            "creationTimestamp"))
    return Observation(status=Status.QUEUED, reason=kai.reason_of(condition), message=message, at=at, **common)
