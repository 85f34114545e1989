"""The one door of every status change, and the outbox rows it closes.

Every status change goes through `_transition`, which is a conditional UPDATE on the expected current status (so
two processes can never both move the same workload) and writes the WorkloadEvent in the same transaction, with
the notification channels' deliveries of the change (apps.workloads.services.notifications).

What users ask of the cluster is an outbox row (apps.core.intents) recorded with their action: a submission records
a `workload.submit` intent, a stop (the user's, or the idle-notebook cull) a `workload.stop` intent. `_transition`
closes them in the transition that leaves `submitting` or `stopping`, whoever makes it: the worker, or the watcher
when the cluster got there first (a Job that finished before its stop took effect, a Job already deleted).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.core import intents
from apps.core.actors import Actor
from apps.workloads.models import REASON_LENGTH, Status, Workload, WorkloadEvent

from .notifications import workload_channels_record

SUBMIT_TASK = "worker.tasks.workload_submit"
STOP_TASK = "worker.tasks.workload_stop"
SUBMIT_INTENT = "workload.submit"
STOP_INTENT = "workload.stop"
# A gang on a KAI pool has no Job to replace its evicted pods or stop its last ones: the portal does (the watcher asks,
# worker.tasks.kai_gang_repair makes the cluster match the row).
GANG_REPAIR_TASK = "worker.tasks.kai_gang_repair"
GANG_REPAIR_INTENT = "workload.gang_repair"
GANG_REPAIR_DEADLINE = timedelta(seconds=30)
# A claim older than this belonged to a task Celery has killed (it outlives the hard time limit).
SUBMIT_CLAIM_TIMEOUT = intents.lease()
SUBMIT_DEADLINE = timedelta(seconds=30)  # not submitted by then: the sweep sends the task again
STOP_DEADLINE = timedelta(seconds=30)


def _event(workload: Workload, *, from_status: str, to_status: str, reason: str = "", message: str = "",
           actor: Actor | None = None, at: datetime | None = None, cluster_at: datetime | None = None,
           details: dict[str, Any] | None = None) -> WorkloadEvent:
    """Events are stamped with the portal's clock (their order) and, when known, the cluster's (their truth)."""
    return WorkloadEvent.objects.create(
        workload=workload, at=at or timezone.now(), cluster_at=cluster_at, from_status=from_status,
        to_status=to_status, reason=reason, message=message, details=details or {},
        actor=actor,
    )


def _transition(workload: Workload, *, expected: Iterable[str], to_status: str, reason: str = "", message: str = "",
                actor: Actor | None = None, at: datetime | None = None, cluster_at: datetime | None = None,
                details: dict[str, Any] | None = None, reread: bool = True, **fields: Any) -> bool:
    """Move the workload to `to_status` if it is still in one of `expected`; False when someone moved it first.
    `details` go on the event (e.g. a preemption's preemptor), `fields` on the workload with its new status.

    `reread=False`: the caller's `workload` is the row as it stands but for its status (the caller locked it in this
    transaction, or holds its submit claim), and `expected` is one status: the conditional UPDATE alone decides, with
    no second read of the row. Inside a caller's transaction it adds no savepoint: on SQLite every statement here runs
    while the database's one write lock is held (docs/architecture.md, One writer on SQLite)."""
    expected = list(expected)
    reason = reason[:REASON_LENGTH]  # a cluster's condition reason may be up to 1,024 characters
    updated = {"status": to_status, "status_reason": reason, "status_message": message, **fields}
    with transaction.atomic(savepoint=False):
        if reread:
            current = Workload.objects.select_for_update().filter(pk=workload.pk, status__in=expected).first()
            if current is None:
                return False
            from_status = current.status
            Workload.objects.filter(pk=workload.pk).update(**updated)
        else:
            [from_status] = expected
            if not Workload.objects.filter(pk=workload.pk, status=from_status).update(**updated):
                return False
            current = workload
        event = _event(current, from_status=from_status, to_status=to_status, reason=reason, message=message,
                       actor=actor, at=at, cluster_at=cluster_at, details=details)
        _close_intents(from_status, to_status, workload.pk)
        workload_channels_record(current, event)
    for name, value in updated.items():
        setattr(workload, name, value)
    return True


def _close_intents(from_status: str, to_status: str, workload_id: int) -> None:
    """Leaving `submitting` or `stopping` is what their intents asked for, or the sign they never can be done."""
    if from_status == to_status:
        return
    if from_status == Status.SUBMITTING:
        intents.intents_complete(kind=SUBMIT_INTENT, target_id=workload_id, outcome=to_status)
    elif from_status == Status.STOPPING:
        intents.intents_complete(kind=STOP_INTENT, target_id=workload_id, outcome=to_status)


def _record_stop(workload: Workload, *, deadline: timedelta = STOP_DEADLINE, send: bool = True) -> None:
    intents.intent_record(kind=STOP_INTENT, task=STOP_TASK, target_id=workload.pk, deadline=deadline, send=send)
