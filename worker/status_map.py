"""Kueue's view of a workload -> the portal's status (docs/architecture.md, The life of a submission), as pure
functions.

Input: the batch/v1 Job and its Kueue Workload as the API returns them (either may be missing). Output: what the
portal should record, as the `Observation` the workloads state machine takes (apps/workloads/observation.py):
status, reason, message, admission, timestamps, and any preemption the conditions show.
Conditions carry their own transition times, so a preemption that was followed by a requeue before the watcher
looked is still seen and recorded.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apps.core import kueue_conditions as kueue
from apps.workloads.models import Status
from apps.workloads.observation import Observation, Preemption

REQUEUED_AFTER_PREEMPTION = "Back in the queue after a preemption, waiting for its next scheduling attempt"


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def _true(conditions: dict[str, dict[str, Any]], kind: str) -> dict[str, Any] | None:
    condition = conditions.get(kind)
    return condition if condition and condition.get("status") == kueue.TRUE else None


def _admission(workload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    admission = (workload.get("status") or {}).get("admission") or {}
    assignments = [
        {"name": podset.get("name", ""), "flavors": podset.get("flavors", {}), "count": podset.get("count"),
         "resource_usage": podset.get("resourceUsage", {})}
        for podset in admission.get("podSetAssignments") or []
    ]
    return admission.get("clusterQueue", ""), ({"pod_sets": assignments} if assignments else {})


def _checks(workload: dict[str, Any]) -> list[dict[str, str]]:
    """The Workload's admission checks (status.admissionChecks): name, state and message each."""
    return [{"name": c.get("name", ""), "state": c.get("state", ""), "message": c.get("message", "")}
            for c in (workload.get("status") or {}).get("admissionChecks") or []]


def _preemption(conditions: dict[str, dict[str, Any]]) -> Preemption | None:
    preempted = _true(conditions, kueue.PREEMPTED)
    if preempted is None:
        return None
    message = preempted.get("message", "")
    match = kueue.PREEMPTOR.search(message)
    return Preemption(
        at=parse_time(preempted.get("lastTransitionTime")),  # type: ignore[arg-type]
        reason=preempted.get("reason", ""), message=message,
        preemptor_workload_uid=match.group("uid") if match else "",
        preemptor_job_uid=match.group("job_uid") if match else "",
    )


def job_ended(job: dict[str, Any] | None, common: dict[str, Any]) -> Observation | None:
    """A Job that completed or failed, as the portal's status (its completion time, else its condition's); None while
    it has not. Shared by Kueue's Jobs and KAI's (worker/kai_status.py)."""
    job_conditions, job_status = _conditions(job), (job or {}).get("status") or {}
    for kind, status in ((kueue.JOB_COMPLETE, Status.SUCCEEDED), (kueue.JOB_FAILED, Status.FAILED)):
        done = _true(job_conditions, kind)
        if done:
            at = parse_time(job_status.get("completionTime") or done.get("lastTransitionTime"))
            return Observation(status=status, reason=done.get("reason", kind), message=done.get("message", ""),
                               at=at, finished_at=at, **common)
    return None


def observe(job: dict[str, Any] | None, workload: dict[str, Any] | None) -> Observation | None:
    """What the portal status is now; None when there is nothing to say yet (no Job, no Workload)."""
    if job is None and workload is None:
        return None
    conditions = _conditions(workload)
    job_status = (job or {}).get("status") or {}
    common: dict[str, Any] = {
        "conditions": list(conditions.values()),
        "kueue_name": ((workload or {}).get("metadata") or {}).get("name", ""),
        "preemption": _preemption(conditions),
        "started_at": parse_time(job_status.get("startTime")),
        "deleted_at": parse_time(((job or {}).get("metadata") or {}).get("deletionTimestamp")),
        "job_uid": ((job or {}).get("metadata") or {}).get("uid", ""),
    }
    if workload is not None:
        common["cluster_queue"], common["admission"] = _admission(workload)
        admitted = _true(conditions, kueue.ADMITTED)
        common["admitted_at"] = parse_time(admitted.get("lastTransitionTime")) if admitted else None

    ended = job_ended(job, common)
    if ended:
        return ended
    finished = _true(conditions, kueue.FINISHED)
    if finished:
        at = parse_time(finished.get("lastTransitionTime"))
        status = Status.SUCCEEDED if finished.get("reason") == kueue.SUCCEEDED else Status.FAILED
        return Observation(status=status, reason=finished.get("reason", ""), message=finished.get("message", ""),
                           at=at, finished_at=at, **common)
    if common["deleted_at"]:
        # Deleted before it finished, its pods going away: the portal's stop, or someone else's delete (the message
        # is for the latter; a stopping workload records its own stop).
        at = common["deleted_at"]
        return Observation(status=Status.STOPPED, reason=kueue.JOB_DELETED,
                           message="The Job was deleted outside the portal", at=at, finished_at=at, **common)
    evicted = _true(conditions, kueue.EVICTED)
    if evicted and evicted.get("reason", "").startswith(kueue.DEACTIVATED):
        at = parse_time(evicted.get("lastTransitionTime"))
        return Observation(status=Status.STOPPED, reason=evicted["reason"], message=evicted.get("message", ""),
                           at=at, finished_at=at, **common)
    if workload is None:
        return None  # Kueue has not made its Workload yet: nothing new to say
    reserved = _true(conditions, kueue.QUOTA_RESERVED)
    if reserved and _true(conditions, kueue.ADMITTED) and not evicted:
        ready = _true(conditions, kueue.PODS_READY)
        if ready or int(job_status.get("ready") or 0) > 0:
            at = parse_time((ready or {}).get("lastTransitionTime") or job_status.get("startTime"))
            return Observation(status=Status.RUNNING, reason=kueue.RUNNING, message="Pods are running", at=at,
                               **common)
        return Observation(status=Status.ADMITTED, reason=kueue.ADMITTED,
                           message=_true(conditions, kueue.ADMITTED).get("message", ""),  # type: ignore[union-attr]
                           at=common["admitted_at"], **common)
    checks = _checks(workload)
    if reserved and not evicted and any(c["state"] != kueue.CHECK_READY for c in checks):
        # Quota reserved, admission waits on its admission checks (e.g. capacity a ProvisioningRequest brings up).
        common["admission"] = {**common["admission"], "checks": checks}
        waiting = [c for c in checks if c["state"] != kueue.CHECK_READY]
        message = "; ".join(f"{c['name']}: {c['state']}" + (f" ({c['message']})" if c["message"] else "")
                            for c in waiting)
        return Observation(status=Status.QUEUED, reason=kueue.UNSATISFIED_ADMISSION_CHECKS, message=message,
                           at=parse_time(reserved.get("lastTransitionTime")), **common)
    if evicted and evicted.get("reason") == kueue.EVICTED_BY_PREEMPTION and reserved:
        # Evicted but still holding quota while its pods go away.
        preempted = _true(conditions, kueue.PREEMPTED) or evicted
        return Observation(status=Status.PREEMPTED, reason=preempted.get("reason", kueue.EVICTED_BY_PREEMPTION),
                           message=preempted.get("message", ""), at=parse_time(evicted.get("lastTransitionTime")),
                           **common)
    pending = conditions.get(kueue.QUOTA_RESERVED) or {}
    reason = pending.get("reason", kueue.PENDING)
    status = Status.REJECTED if reason in kueue.NEVER_ADMITTABLE else Status.QUEUED
    message = pending.get("message", "")
    if kueue.PREEMPTOR.search(message):
        # Kueue's eviction leaves the preemption's own message (UIDs, cohort paths) on QuotaReserved until the next
        # scheduling attempt; the preemption is recorded with those words, the wait that follows reads plainly.
        message = REQUEUED_AFTER_PREEMPTION
    common["cluster_queue"], common["admission"] = "", {}
    return Observation(status=status, reason=reason, message=message,
                       at=parse_time(pending.get("lastTransitionTime")), **common)
