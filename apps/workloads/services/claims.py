"""What the worker does: claim a submission, record that the Job exists (or why not), record a stop."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.core import intents
from apps.workloads.models import Status, Workload
from apps.workloads.signals import quota_released

from .transitions import (
    GANG_REPAIR_DEADLINE,
    GANG_REPAIR_INTENT,
    GANG_REPAIR_TASK,
    SUBMIT_CLAIM_TIMEOUT,
    SUBMIT_INTENT,
    _record_stop,
    _transition,
)


@dataclass(frozen=True)
class SubmitClaim:
    """What a submit task holds: the lease of the submission's intents and, when it is ours to submit, the row
    (claimed; with what building its Job reads). `busy`: another task holds the intents."""

    intents: intents.Claim
    workload: Workload | None

    @property
    def busy(self) -> bool:
        return self.intents.busy


def workload_claim_submit(*, workload_id: int) -> SubmitClaim:
    """Lease the submission's intents (apps/core/intents.py) and claim the submitting row for one worker, in one
    transaction: on SQLite each write transaction waits for the database's one writer, so a submission takes two (this
    and the mark), not four (docs/architecture.md, One writer on SQLite). The row is read after commit, outside it.

    Not ours (`workload` None) when another task holds the intents (busy), another worker holds a live claim (the
    lease goes back), or the row is no longer submitting (its intents are done: nothing is left to ask)."""
    now = timezone.now()
    with transaction.atomic():
        claim = intents.intent_claim(kind=SUBMIT_INTENT, target_id=workload_id)
        if claim.busy:
            return SubmitClaim(intents=claim, workload=None)
        submitting = Workload.objects.filter(pk=workload_id, status=Status.SUBMITTING)
        claimed = submitting.filter(
            Q(submit_claimed_at__isnull=True) | Q(submit_claimed_at__lt=now - SUBMIT_CLAIM_TIMEOUT),
        ).update(submit_claimed_at=now, submit_attempts=F("submit_attempts") + 1)
        if not claimed:
            if submitting.exists():
                intents.intent_release(claim)
            else:
                intents.intents_complete(kind=SUBMIT_INTENT, target_id=workload_id, outcome="not submitting",
                                         ids=claim.ids)
            return SubmitClaim(intents=claim, workload=None)
    return SubmitClaim(intents=claim, workload=Workload.objects.select_related(
        "project__department", "node_pool", "priority_class", "owner").get(pk=workload_id))


def workload_release_claim(*, workload: Workload) -> None:
    """Give the claim back so a retry can take it."""
    Workload.objects.filter(pk=workload.pk, status=Status.SUBMITTING).update(submit_claimed_at=None)


def workload_mark_submitted(*, workload: Workload, uid: str, manifest: dict[str, Any]) -> bool:
    """The Job (or a KAI gang's PodGroup and pods) exists in the cluster. False when the workload was stopped
    meanwhile (the caller deletes what it made); when the watcher already saw it move on, only the submission details
    are filled in. It now waits for its pool's scheduler: Kueue, or KAI Scheduler on a KAI pool.

    `workload`: the row as the claim read it (`workload_claim_submit`). One transaction either way, so on SQLite the
    worker waits for the write lock once (docs/architecture.md, One writer on SQLite)."""
    fields: dict[str, Any] = {"k8s_uid": uid, "manifest": manifest, "submitted_at": timezone.now(),
                              "submit_claimed_at": None}
    scheduler = workload.node_pool.get_scheduler_display()
    # A gang on a KAI pool is a PodGroup and its ranks (worker/manifests.py), everything else a Job.
    made = (f"PodGroup {workload.job_name} and its {workload.pods} pods" if manifest.get("kind") == "PodGroup"
            else f"Job {workload.job_name}")
    with transaction.atomic():
        if _transition(workload, expected=[Status.SUBMITTING], to_status=Status.QUEUED, reason="Created",
                       message=f"{made} created in {workload.project.namespace}; waiting for {scheduler}",
                       reread=False, **fields):
            return True
        return bool(Workload.objects.filter(pk=workload.pk).exclude(
            status__in=[Status.STOPPING, Status.STOPPED]).update(**fields))


def workload_mark_deployed(*, workload: Workload, uid: str, manifest: dict[str, Any]) -> bool:
    """An inference service's Deployment exists: no queue, so it goes straight to admitted (its pods are being
    started). False when it was stopped meanwhile (the caller deletes the Deployment). One transaction, as
    `workload_mark_submitted`."""
    fields: dict[str, Any] = {"k8s_uid": uid, "manifest": manifest, "submitted_at": timezone.now(),
                              "admitted_at": timezone.now(), "submit_claimed_at": None}
    with transaction.atomic():
        if _transition(workload, expected=[Status.SUBMITTING], to_status=Status.ADMITTED, reason="Deployed",
                       message=f"Deployment {workload.job_name} created in {workload.project.namespace}; serving "
                               "pools have no queue", reread=False, **fields):
            return True
        return bool(Workload.objects.filter(pk=workload.pk).exclude(
            status__in=[Status.STOPPING, Status.STOPPED]).update(**fields))


def workload_mark_rejected(*, workload: Workload, message: str, reason: str = "Rejected") -> bool:
    return _transition(workload, expected=[Status.SUBMITTING], to_status=Status.REJECTED, reason=reason,
                       message=message, finished_at=timezone.now(), submit_claimed_at=None)


def workload_mark_submit_failed(*, workload_id: int, message: str) -> bool:
    workload = Workload(pk=workload_id)
    return _transition(workload, expected=[Status.SUBMITTING], to_status=Status.SUBMIT_FAILED,
                       reason="SubmitFailed", message=message, finished_at=timezone.now(), submit_claimed_at=None)


def workload_mark_stopped(*, workload: Workload, message: str, reason: str = "Stopped",
                          cluster_at: datetime | None = None) -> bool:
    """stopping -> stopped; the GPU-hour interval closes at the cluster's time of the stop when known."""
    ended_at = cluster_at or timezone.now()
    with transaction.atomic():
        if not _transition(workload, expected=[Status.STOPPING], to_status=Status.STOPPED, reason=reason,
                           message=message, cluster_at=cluster_at, finished_at=ended_at):
            return False
        quota_released.send(sender=Workload, workload_id=workload.pk, at=ended_at, reason=reason)
    return True


def workload_stop_finish(*, workload_id: int, cluster_at: datetime | None = None) -> bool:
    """The Job is gone or going (the worker deleted it, or the watcher saw it deleted): record the stop.

    `cluster_at`: the cluster's time of the deletion when known. If a submission was in flight (its claim still
    live), that task may yet create the Job after this; it deletes it when it notices the stop, and a follow-up stop
    intent, due when its claim runs out, deletes it again in case that worker died first. False when the workload was
    not stopping.
    """
    workload = Workload.objects.select_related("stop_requested_by").filter(pk=workload_id,
                                                                          status=Status.STOPPING).first()
    if workload is None:
        return False
    if workload.status_reason == "IdleTimeout":
        reason, message = "IdleTimeout", workload.status_message
    else:
        who = workload.stop_requested_by.get_username() if workload.stop_requested_by else "the portal"
        reason, message = "Stopped", f"Stopped by {who}"
    with transaction.atomic():
        if not workload_mark_stopped(workload=workload, message=message, reason=reason, cluster_at=cluster_at):
            return False
        claimed_at = workload.submit_claimed_at
        if claimed_at and claimed_at > timezone.now() - SUBMIT_CLAIM_TIMEOUT:
            _record_stop(workload, deadline=claimed_at + SUBMIT_CLAIM_TIMEOUT - timezone.now(), send=False)
    return True


def workload_gang_repair_request(*, workload_id: int) -> bool:
    """The watcher saw a gang on a KAI pool whose pods differ from what its row may want (pods evicted or deleted
    while it waits or runs; pods still running after it finished or failed): one open intent per gang, its task
    sent after commit and again by the sweep until it is done. False when one is open already."""
    with transaction.atomic():
        Workload.objects.select_for_update().filter(pk=workload_id).first()  # one request at a time per gang
        if intents.intents_open(kind=GANG_REPAIR_INTENT, target_id=workload_id):
            return False
        intents.intent_record(kind=GANG_REPAIR_INTENT, task=GANG_REPAIR_TASK, target_id=workload_id,
                              deadline=GANG_REPAIR_DEADLINE)
    return True
