"""KAI Scheduler's view of a portal workload -> the portal's status, as pure functions beside `status_map` (Kueue's).

Work on a KAI pool has no Kueue Workload (README, Kueue and KAI in one cluster; docs/architecture.md, The life of a
submission). It is either a batch/v1 Job, whose pods KAI's pod-grouper puts in PodGroups of its own (one per pod,
`pg-<pod>-<job uid>`, minMember 1), or a gang: the portal's PodGroup `wl-<id>` (minMember = its pods) and its
ownerless pods. Each pod names its PodGroup in its `pod-group-name` annotation, whatever made it; what the portal
records comes from, read as the API returns them:

- the batch/v1 Job: finished or failed (its conditions), or being deleted, exactly as on a Kueue pool; a gang has no
  Job: it finished when its pods all succeeded, failed when one failed (not evicted), and is gone with its PodGroup;
- the pods' PodGroups: the gang's size (`spec.minMember`), the leaf Queue, and while a pod waits the scheduling
  condition of its PodGroup saying why (`status.schedulingConditions`);
- the pods, kept by the watcher as `KaiPod`s: the work holds its GPUs once `minMember` of them are bound to nodes
  (admitted, from the moment the last of those was bound) and runs once as many are ready. A pod KAI evicts carries a
  `DisruptionTarget` condition with reason `PreemptionByScheduler` just before it is deleted: the preemption, kept by
  the watcher after the pod is gone; the Job (or the portal, for a gang) then makes new pods and the workload waits
  again.

KAI keeps no queue positions, so none are recorded; the cluster's own times are used wherever it gives them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps.core import kai_conditions as kai
from apps.core import kueue_conditions as kueue
from apps.core.kueue_names import (
    KAI_POD_GROUP_ANNOTATION,
    KAI_QUEUE_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    WORKLOAD_ID_LABEL,
)
from apps.workloads.models import Status
from apps.workloads.observation import Observation, Preemption

from .status_map import job_ended, parse_time

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class KaiPod:
    """What the watcher keeps of one pod of portal work on a KAI pool (a few values, not the object)."""

    uid: str
    job_uid: str  # the work it belongs to: its Job's uid, or `gang_key` of the gang's PodGroup (an ownerless pod)
    resource_version: str
    phase: str
    bound_at: datetime | None  # bound to a node: PodScheduled=True's transition (its start time without one)
    ready_at: datetime | None  # Ready=True's transition
    leaving: bool  # being deleted, or marked for eviction: it holds nothing the gang can count on
    preemption: Preemption | None = None  # KAI evicted it (DisruptionTarget, PreemptionByScheduler)
    pod_group: str = ""  # the PodGroup it belongs to (`pod-group-name`: the grouper's, or the portal's for a gang)
    name: str = ""
    finished_at: datetime | None = None  # its main container's end, once the pod succeeded or failed
    failure: str = ""  # why it failed, as the kubelet says (the pod's reason and message, or its container's exit)
    failure_reason: str = ""  # the kubelet's reason for a failed pod (DeadlineExceeded: past the runtime limit)


def on_kai(job: dict[str, Any]) -> bool:
    """Whether a portal Job runs on a KAI pool: it names a KAI queue, never a Kueue one (the shared contract)."""
    return bool((job["metadata"].get("labels") or {}).get(KAI_QUEUE_LABEL))


def gang_key(namespace: str, name: str) -> str:
    """How the watcher keys a gang (its PodGroup by namespace and name, which its pods name): never a uid."""
    return f"{namespace}/{name}"


def is_gang(pod_group: dict[str, Any]) -> bool:
    """Whether a PodGroup is a portal gang's (owned by nothing, the portal's labels) rather than one KAI's grouper made
    for the pods of a Job (owned by the Job)."""
    metadata = pod_group.get("metadata") or {}
    labels = metadata.get("labels") or {}
    return (not metadata.get("ownerReferences") and labels.get(MANAGED_BY_LABEL) == MANAGED_BY
            and bool(labels.get(WORKLOAD_ID_LABEL)))


def _condition(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == kueue.TRUE), {})


def _controller_uid(metadata: dict[str, Any], kind: str) -> str:
    return next((str(ref.get("uid", "")) for ref in metadata.get("ownerReferences") or []
                 if ref.get("controller") and ref.get("kind") == kind), "")


def pod_group_owner_uid(pod_group: dict[str, Any]) -> str:
    """What a PodGroup belongs to: its owner's uid (the Job whose pod KAI's grouper made it for), else its own (a
    gang's PodGroup is the gang). The preemptor of an eviction is found this way from the PodGroup KAI names."""
    metadata = pod_group.get("metadata") or {}
    owners = metadata.get("ownerReferences") or []
    return str(owners[0].get("uid", "")) if owners else str(metadata.get("uid", ""))


def compact_pod_group(pod_group: dict[str, Any]) -> dict[str, Any]:
    """The part of a PodGroup the status needs: its name, owner, labels, size, queue and scheduling conditions."""
    metadata, spec, status = pod_group["metadata"], pod_group.get("spec") or {}, pod_group.get("status") or {}
    return {"metadata": {key: metadata.get(key) for key in ("name", "namespace", "uid", "resourceVersion",
                                                            "creationTimestamp", "deletionTimestamp", "labels",
                                                            "ownerReferences")},
            "spec": {"minMember": spec.get("minMember"), "queue": spec.get("queue", "")},
            "status": {"schedulingConditions": status.get("schedulingConditions") or []}}


def compact_pod(pod: dict[str, Any]) -> KaiPod | None:
    """A pod of portal work on a KAI pool as the watcher keeps it: one a Job controls, or an ownerless one naming its
    gang's PodGroup; None for any other."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    pod_group = str((metadata.get("annotations") or {}).get(KAI_POD_GROUP_ANNOTATION) or "")
    job_uid = _controller_uid(metadata, "Job")
    if not job_uid and not metadata.get("ownerReferences") and pod_group:
        job_uid = gang_key(str(metadata.get("namespace", "")), pod_group)
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
    phase = str(status.get("phase") or "")
    finished_at, failure = _ending(status) if phase in FINISHED_PHASES else (None, "")
    return KaiPod(uid=str(metadata.get("uid", "")), job_uid=job_uid,
                  resource_version=str(metadata.get("resourceVersion", "")), phase=phase,
                  bound_at=bound_at, ready_at=_time(ready.get("lastTransitionTime")) if ready else None,
                  leaving=bool(metadata.get("deletionTimestamp") or evicted), preemption=preemption,
                  pod_group=pod_group, name=str(metadata.get("name", "")), finished_at=finished_at,
                  failure=failure if phase == "Failed" else "",
                  failure_reason=str(status.get("reason") or "") if phase == "Failed" else "")


def _ending(status: dict[str, Any]) -> tuple[datetime | None, str]:
    """(when a finished pod's containers ended, why it failed as the kubelet put it)."""
    ends, failure = [], ""
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if end := _time(terminated.get("finishedAt")):
            ends.append(end)
        if not failure and terminated.get("exitCode"):
            failure = f"{terminated.get('reason') or 'Error'} (exit code {terminated['exitCode']})"
    if status.get("reason") or status.get("message"):
        failure = " ".join(str(part) for part in (status.get("reason"), status.get("message")) if part)
    return (max(ends) if ends else None), failure
def _time(value: Any) -> datetime | None:
    try:
        return parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _nth(times: Iterable[datetime], n: int) -> datetime:
    """The n-th earliest (1-based): when the n-th pod of a gang got there."""
    return sorted(times)[n - 1]


def _groups_of(pod_groups: Mapping[str, dict[str, Any]], pods: list[KaiPod]) -> list[dict[str, Any]]:
    """The PodGroups the pods name (each once, in the pods' order)."""
    names = dict.fromkeys(p.pod_group for p in sorted(pods, key=lambda p: p.name) if p.pod_group)
    return [pod_groups[name] for name in names if name in pod_groups]


def _waiting_condition(pod_groups: Mapping[str, dict[str, Any]], pods: list[KaiPod]) -> dict[str, Any]:
    """The scheduling condition of the first pod still waiting to be bound, by its PodGroup ({} without one)."""
    for pod in sorted(pods, key=lambda p: p.name):
        if pod.bound_at is None and not pod.leaving and pod.phase not in FINISHED_PHASES:
            group = pod_groups.get(pod.pod_group) or {}
            condition = kai.scheduling_condition((group.get("status") or {}).get("schedulingConditions"))
            if condition:
                return condition
    return {}


def _common(groups: list[dict[str, Any]], condition: dict[str, Any], pods: list[KaiPod], *, queue: str, uid: str,
            deleted: Any, preemption: Preemption | None) -> tuple[dict[str, Any], int]:
    """What every observation of KAI work carries, and the gang's size (the largest minMember its pods' PodGroups
    ask, 1 for a Job's pods, which KAI's grouper puts one to a PodGroup)."""
    min_member = max([int((g.get("spec") or {}).get("minMember") or 1) for g in groups] or [1])
    queue = next((str((g.get("spec") or {}).get("queue")) for g in groups if (g.get("spec") or {}).get("queue")),
                 queue)
    ever_bound = [p for p in pods if p.bound_at is not None and not p.leaving]
    started = [p.ready_at for p in ever_bound if p.ready_at is not None]
    admitted_at = None
    if len(ever_bound) >= min_member:
        admitted_at = _nth((p.bound_at for p in ever_bound if p.bound_at), min_member)
    return {
        "conditions": [condition] if condition else [],
        "kai_queue": queue,
        "preemption": preemption,
        "admitted_at": admitted_at,
        "started_at": min(started) if started else None,
        "deleted_at": parse_time(deleted),
        "job_uid": uid,
    }, min_member


def _scheduled(common: dict[str, Any], condition: dict[str, Any], pods: list[KaiPod], min_member: int,
               created: Any) -> Observation:
    """Queued, admitted or running, from the pods KAI bound and the condition of what waits."""
    # Pods bound to a node and not being evicted, finished ones included: they stay until the work goes, so the moment
    # the gang was bound (its min_member-th pod) stays the same until KAI evicts it (the evicted pods are deleted).
    ever_bound = [p for p in pods if p.bound_at is not None and not p.leaving]
    holding = [p for p in ever_bound if p.phase not in FINISHED_PHASES]
    ready = [p for p in holding if p.ready_at is not None]
    admitted_at = common["admitted_at"]
    if admitted_at is not None:
        # Running once the gang's pods are ready (all of them when fewer are left, as a batch's last pods finish).
        if not holding or len(ready) >= min(min_member, len(holding)):
            times = [p.ready_at for p in (ready or ever_bound) if p.ready_at is not None]
            at = _nth(times, min(min_member, len(times))) if times else admitted_at
            # A batch run's later pods may wait while its first ones run: say what KAI says of them.
            unbound = [p for p in pods if p.bound_at is None and not p.leaving and p.phase not in FINISHED_PHASES]
            message = "Pods are running"
            if unbound and condition:
                said = str(condition.get("message") or kai.first_reason(condition).get("message") or "")
                message += f"; {len(unbound)} more waiting for KAI Scheduler: {said}"
            return Observation(status=Status.RUNNING, reason=kueue.RUNNING, message=message, at=at, **common)
        return Observation(status=Status.ADMITTED, reason=kueue.ADMITTED,
                           message=f"Scheduled by KAI Scheduler in queue {common['kai_queue']}", at=admitted_at,
                           **common)
    if condition:
        message = str(condition.get("message") or kai.first_reason(condition).get("message") or "")
        at = parse_time(condition.get("lastTransitionTime"))
    else:
        message = "Waiting for KAI Scheduler to schedule its pods"
        at = parse_time(created)
    return Observation(status=Status.QUEUED, reason=kai.reason_of(condition), message=message, at=at, **common)


def observe_kai(job: dict[str, Any] | None, pod_groups: Mapping[str, dict[str, Any]], pods: Iterable[KaiPod],
                preemption: Preemption | None = None) -> Observation | None:
    """What the portal status of a Job on a KAI pool is now; None without the Job. `pod_groups`: the compacted
    PodGroups of its namespace by name, of which those its pods name are read."""
    if job is None:
        return None
    metadata = job["metadata"]
    pods = list(pods)
    groups = _groups_of(pod_groups, pods)
    condition = _waiting_condition(pod_groups, pods)
    common, min_member = _common(groups, condition, pods, queue=str((metadata.get("labels") or {}).get(
        KAI_QUEUE_LABEL, "")), uid=metadata.get("uid", ""), deleted=metadata.get("deletionTimestamp"),
        preemption=preemption)
    ended = job_ended(job, common)
    if ended:
        return ended
    if common["deleted_at"]:
        at = common["deleted_at"]
        return Observation(status=Status.STOPPED, reason=kueue.JOB_DELETED,
                           message="The Job was deleted outside the portal", at=at, finished_at=at, **common)
    return _scheduled(common, condition, pods, min_member, metadata.get("creationTimestamp"))


POD_FAILED = "PodFailed"
GANG_SUCCEEDED = "PodsSucceeded"
POD_GROUP_DELETED = "PodGroupDeleted"


def observe_kai_gang(pod_group: dict[str, Any] | None, pods: Iterable[KaiPod],
                     preemption: Preemption | None = None) -> Observation | None:
    """What the portal status of a gang on a KAI pool is now (its PodGroup, compacted, and its ownerless pods); None
    without the PodGroup. The portal is the gang's controller: it finished once its pods all succeeded, and failed
    as soon as one failed (an evicted pod is not a failure: the portal makes it again, worker/tasks.py
    kai_gang_repair)."""
    if pod_group is None:
        return None
    metadata = pod_group["metadata"]
    pods = list(pods)
    groups = {str(metadata.get("name")): pod_group}
    condition = _waiting_condition(groups, pods)
    common, min_member = _common([pod_group], condition, pods, queue="", uid=metadata.get("uid", ""),
                                 deleted=metadata.get("deletionTimestamp"), preemption=preemption)
    staying = [p for p in pods if not p.leaving]
    failed = sorted((p for p in staying if p.phase == "Failed"), key=lambda p: p.name)
    if failed:
        pod = failed[0]
        message = f"Pod {pod.name} failed" + (f": {pod.failure}" if pod.failure else "")
        return Observation(status=Status.FAILED, reason=pod.failure_reason or POD_FAILED, message=message,
                           at=pod.finished_at, finished_at=pod.finished_at, **common)
    succeeded = [p for p in staying if p.phase == "Succeeded"]
    if len(succeeded) >= min_member:
        at = max((p.finished_at for p in succeeded if p.finished_at), default=None)
        return Observation(status=Status.SUCCEEDED, reason=GANG_SUCCEEDED, message="All pods succeeded", at=at,
                           finished_at=at, **common)
    if common["deleted_at"]:
        at = common["deleted_at"]
        return Observation(status=Status.STOPPED, reason=POD_GROUP_DELETED,
                           message="The PodGroup was deleted outside the portal", at=at, finished_at=at, **common)
    return _scheduled(common, condition, pods, min_member, metadata.get("creationTimestamp"))


def gang_missing(pods: Iterable[KaiPod], min_member: int) -> bool:
    """Whether a gang still wanted lacks pods: fewer than its size are there and not leaving (KAI evicted some, or
    they were deleted), so the portal makes them again under the same names."""
    return len([p for p in pods if not p.leaving]) < min_member


def gang_outliving(pods: Iterable[KaiPod]) -> bool:
    """Whether pods of a finished gang still run (a rank failed while the others went on): the portal stops them."""
    return any(p.phase not in FINISHED_PHASES and not p.leaving for p in pods)
