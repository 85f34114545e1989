"""Pure functions that change a Workload dict's status the way Kueue's workload package does.

Shared by the controllers (which then write through the store) and by anyone replaying scheduler decisions on
plain objects (tests, the portal's forecasts). Each returns True when it changed something.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from kubesim.kueue import constants as C
from kubesim.kueue.scheduler.model import find_condition, parse_time


def ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(obj: dict, ctype: str, status: str, reason: str, message: str, now: datetime) -> bool:
    """meta.SetStatusCondition: lastTransitionTime moves only when the status flips."""
    conds = obj.setdefault("status", {}).setdefault("conditions", [])
    gen = (obj.get("metadata") or {}).get("generation")
    message = message[:32768]
    for c in conds:
        if c.get("type") == ctype:
            changed = False
            if c.get("status") != status:
                c["status"], c["lastTransitionTime"], changed = status, ts(now), True
            for key, val in (("reason", reason), ("message", message), ("observedGeneration", gen)):
                if val is not None and c.get(key) != val:
                    c[key], changed = val, True
            return changed
    cond = {"type": ctype, "status": status, "lastTransitionTime": ts(now), "reason": reason, "message": message}
    if gen is not None:
        cond["observedGeneration"] = gen
    conds.append(cond)
    return True


def remove_condition(obj: dict, ctype: str) -> bool:
    conds = (obj.get("status") or {}).get("conditions") or []
    kept = [c for c in conds if c.get("type") != ctype]
    if len(kept) == len(conds):
        return False
    obj["status"]["conditions"] = kept
    return True


def _reset_active(obj: dict, ctype: str, reason: str, now: datetime) -> bool:
    prev = find_condition(obj, ctype)
    if prev is None or prev.get("status") != "True":
        return False
    return set_condition(obj, ctype, "False", reason, "Previously: " + (prev.get("message") or ""), now)


def checks_ready(obj: dict) -> bool:
    """HasAllChecksReady: every admission check listed in status.admissionChecks is Ready."""
    return all(c.get("state") == C.CHECK_READY for c in (obj.get("status") or {}).get("admissionChecks") or [])


def sync_admitted(obj: dict, now: datetime) -> bool:
    """Admitted = QuotaReserved and every admission check Ready; leaving Admitted accumulates run time."""
    qr = find_condition(obj, C.QUOTA_RESERVED)
    admitted = find_condition(obj, C.ADMITTED)
    if qr is None and admitted is None:
        return False
    reserved = qr is not None and qr.get("status") == "True"
    if reserved and checks_ready(obj):
        return set_condition(obj, C.ADMITTED, "True", "Admitted", "The workload is admitted", now)
    if admitted is not None and admitted.get("status") == "True":
        since = parse_time(admitted.get("lastTransitionTime")) or now
        status = obj.setdefault("status", {})
        past = int(status.get("accumulatedPastExecutionTimeSeconds") or 0)
        status["accumulatedPastExecutionTimeSeconds"] = past + int((now - since).total_seconds())
    if reserved:
        message = "The workload has not all checks ready"
        return set_condition(obj, C.ADMITTED, "False", "UnsatisfiedAdmissionChecks", message, now)
    return set_condition(obj, C.ADMITTED, "False", "NoReservation", "The workload has no reservation", now)


def set_check_state(obj: dict, name: str, state: str, message: str, now: datetime, **extra: object) -> bool:
    """SetAdmissionCheckState: add or update one check; lastTransitionTime moves when the state does."""
    checks = obj.setdefault("status", {}).setdefault("admissionChecks", [])
    for c in checks:
        if c.get("name") == name:
            before = dict(c)
            if c.get("state") != state:
                c["state"], c["lastTransitionTime"] = state, ts(now)
            c["message"] = message
            c.update({k: v for k, v in extra.items() if v is not None})
            return c != before
    checks.append({"name": name, "state": state, "message": message, "lastTransitionTime": ts(now), **extra})
    return True


def sync_checks(obj: dict, names: list[str], now: datetime) -> bool:
    """The workload lists exactly the checks its ClusterQueue asks of it (new ones Pending), sorted by name."""
    status = obj.setdefault("status", {})
    before = status.get("admissionChecks")
    if not names and not before:
        return False
    if not names:  # Kueue drops the list (nil) when no check applies
        status.pop("admissionChecks", None)
        return True
    status["admissionChecks"] = [c for c in before or [] if c.get("name") in names]
    for name in names:
        if not any(c.get("name") == name for c in status["admissionChecks"]):
            set_check_state(obj, name, C.CHECK_PENDING, "", now)
    status["admissionChecks"].sort(key=lambda c: c.get("name", ""))  # kept sorted by name, as Kueue does
    return status["admissionChecks"] != before


def reset_checks_on_eviction(obj: dict, now: datetime) -> None:
    """Every check not Pending goes back to Pending (keeping name and requeueAfterSeconds); a Retry counts one
    more retry."""
    for c in (obj.get("status") or {}).get("admissionChecks") or []:
        state = c.get("state")
        if state == C.CHECK_PENDING:
            continue
        if state == C.CHECK_RETRY:
            c["retryCount"] = int(c.get("retryCount") or 0) + 1
        else:  # Kueue rebuilds the entry: only a Retry carries a retry count on
            c.pop("retryCount", None)
        c.update(state=C.CHECK_PENDING, message=f"Reset to Pending after eviction. Previously: {state}")
        c["lastTransitionTime"] = ts(now)
        c.pop("podSetUpdates", None)


def retry_time(obj: dict) -> datetime | None:
    """The latest lastTransitionTime + requeueAfterSeconds over the checks in Retry (GetMaxRetryTime)."""
    times = [
        at + timedelta(seconds=int(c["requeueAfterSeconds"]))
        for c in (obj.get("status") or {}).get("admissionChecks") or []
        if c.get("state") == C.CHECK_RETRY and c.get("requeueAfterSeconds") is not None
        if (at := parse_time(c.get("lastTransitionTime"))) is not None
    ]
    return max(times) if times else None


def set_quota_reservation(
    obj: dict, cluster_queue: str, podset_assignments: list[dict], now: datetime, checks: list[str] | None = None
) -> bool:
    """SetQuotaReservation + SyncAdmittedCondition: reserve, list the admission checks the ClusterQueue asks
    (admitted at once when there are none), and flip Evicted/Preempted to 'Previously'."""
    obj.setdefault("status", {})["admission"] = {"clusterQueue": cluster_queue, "podSetAssignments": podset_assignments}
    sync_checks(obj, checks or [], now)
    message = f"Quota reserved in ClusterQueue {cluster_queue}"
    set_condition(obj, C.QUOTA_RESERVED, "True", "QuotaReserved", message, now)
    _reset_active(obj, C.EVICTED, "QuotaReserved", now)
    _reset_active(obj, C.PREEMPTED, "QuotaReserved", now)
    sync_admitted(obj, now)
    return True


def unset_quota_reservation(obj: dict, reason: str, message: str, now: datetime) -> bool:
    """UnsetQuotaReservationWithCondition: QuotaReserved=False with reason/message, admission cleared."""
    changed = set_condition(obj, C.QUOTA_RESERVED, "False", reason, message, now)
    status = obj.setdefault("status", {})
    if status.get("admission") is not None:
        status["admission"] = None
        changed = True
    return sync_admitted(obj, now) or changed


def _count_eviction(obj: dict, reason: str, cause: str) -> None:
    stats = obj.setdefault("status", {}).setdefault("schedulingStats", {})
    evictions = stats.setdefault("evictions", [])
    for e in evictions:
        if e.get("reason") == reason and (e.get("underlyingCause") or "") == cause:
            e["count"] = int(e.get("count", 0)) + 1
            return
    evictions.append({"reason": reason, "underlyingCause": cause, "count": 1})


def evict(obj: dict, reason: str, message: str, now: datetime, cause: str = "") -> bool:
    """workload evict: Evicted=True (reason Deactivated gets 'DueTo<cause>'), admission checks back to Pending,
    eviction counted in schedulingStats."""
    ev_reason = f"{reason}DueTo{cause}" if reason == C.EVICTED_DEACTIVATED and cause else reason
    set_condition(obj, C.EVICTED, "True", ev_reason, message, now)
    reset_checks_on_eviction(obj, now)  # at eviction, as Kueue's prepareForEviction does
    _count_eviction(obj, reason, cause)
    return True


def preempt(obj: dict, reason: str, message: str, now: datetime) -> bool:
    """Eviction by preemption: Preempted=True with the preemption reason, Evicted=True reason Preempted."""
    set_condition(obj, C.PREEMPTED, "True", reason, message, now)
    return evict(obj, C.EVICTED_PREEMPTED, message, now)


def release_after_eviction(obj: dict, now: datetime) -> bool:
    """What the job reconciler does once an evicted job has stopped: Requeued, and the reservation is released."""
    ev = find_condition(obj, C.EVICTED)
    if ev is None or ev.get("status") != "True":
        return False
    requeued = ev.get("reason") in (C.EVICTED_PREEMPTED, "NodeFailures")
    changed = set_condition(obj, C.REQUEUED, "True" if requeued else "False", ev["reason"], ev.get("message", ""), now)
    if ev.get("reason") == C.EVICTED_ADMISSION_CHECK:
        at = retry_time(obj)  # a Retry check's requeueAfterSeconds holds the workload back (requeueState)
        if at is not None and at > now:
            state = obj["status"].setdefault("requeueState", {})
            state["requeueAt"] = ts(at)
            state.setdefault("count", 0)
    reset_checks_on_eviction(obj, now)
    return unset_quota_reservation(obj, C.REASON_PENDING_EVALUATION, ev.get("message", ""), now) or changed


def set_pending(
    obj: dict, reason: str, message: str, now: datetime, resource_requests: list[dict] | None = None
) -> bool:
    """A scheduler verdict for a pending workload (no-op when the condition already says so); with the PodSets'
    requests in status.resourceRequests when the scheduler evaluated it."""
    changed = unset_quota_reservation(obj, reason, message, now)
    if resource_requests is not None and obj["status"].get("resourceRequests") != resource_requests:
        obj["status"]["resourceRequests"] = resource_requests
        changed = True
    return changed
