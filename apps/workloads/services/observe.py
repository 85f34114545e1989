"""What the watcher does: record what the cluster says about each workload (the state machine on the cluster's
observations), Kueue's queue positions, and Jobs that disappeared."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.core import kueue_conditions as kueue
from apps.workloads.logs import workload_logs_read_on_commit
from apps.workloads.models import (
    HOLDING_STATUSES,
    PREEMPTED_STATUSES,
    QUEUED_STATUSES,
    Kind,
    Origin,
    Status,
    Workload,
)
from apps.workloads.observation import Observation
from apps.workloads.signals import quota_held, quota_released

from .claims import workload_stop_finish
from .notifications import _notify_on_commit, notifications_batch
from .transitions import _transition

# Rows the watcher leaves alone: they are over.
WATCHER_IGNORES = frozenset({Status.STOPPED, Status.SUCCEEDED, Status.FAILED, Status.SUBMIT_FAILED})


def workload_observe(*, workload_id: int, observation: Observation, preemptor_id: int | None = None) -> list[str]:
    """Record what the cluster says about a workload; returns the statuses it moved through (for notifications).
    `workloads_observe` for a batch of one."""
    return workloads_observe(observations=[(workload_id, observation, preemptor_id)]).get(workload_id, [])


def workloads_observe(*, observations: Sequence[tuple[int, Observation, int | None]]) -> dict[int, list[str]]:
    """Record what the cluster says about many workloads (each with its preemptor's row, when preempted) in one
    transaction; returns the statuses each moved through.

    The watcher applies a burst of Jobs as one batch (docs/architecture.md, The watcher): the rows are locked and read
    together (in id order, so two batches never deadlock with each other), with their project, owner and pool, and
    the notification channels and e-mail opt-ins of the batch are read once, when a change first needs them.
    Idempotent: replaying the same observation (a resync, a re-delivered watch event) writes no new events. A row is
    locked first, so its transitions need no second read of it (`_transition(reread=False)`).
    """
    wanted = {workload_id: (observation, preemptor_id) for workload_id, observation, preemptor_id in observations}
    moved: dict[int, list[str]] = {}
    with transaction.atomic():
        # FOR NO KEY UPDATE, as an UPDATE locks: another transaction's rows that name these (an Event's, checked at
        # its commit) do not wait for the batch, nor the batch for them, so they never deadlock.
        rows = list(Workload.objects.select_for_update(of=("self",), no_key=True).select_related(
            "project", "owner", "node_pool").filter(pk__in=list(wanted)).exclude(status__in=WATCHER_IGNORES).order_by(
            "pk"))
        with notifications_batch(rows):
            for row in rows:
                observation, preemptor_id = wanted[row.pk]
                moved[row.pk] = _observe(row, observation, preemptor_id)
    return moved


def _observe(row: Workload, observation: Observation, preemptor_id: int | None) -> list[str]:
    """One locked row's share of `workloads_observe`: its transitions, with what Kueue says written beside the last
    one (one UPDATE), its ledger and its notifications."""
    moved: list[str] = []
    mirror: dict[str, Any] = {}
    if observation.kueue_name:  # else Kueue's Workload is gone (a deleted Job): keep what it last said
        mirror.update(kueue_name=observation.kueue_name, kueue_conditions=observation.conditions,
                      cluster_queue=observation.cluster_queue, admission=observation.admission)
    elif observation.kai_queue:  # a KAI pool's: the leaf Queue and the PodGroup's scheduling conditions
        mirror.update(kueue_conditions=observation.conditions, cluster_queue=observation.kai_queue)
    for name in ("admitted_at", "started_at", "finished_at"):
        value = getattr(observation, name)
        if value and not getattr(row, name):
            mirror[name] = value
    if observation.job_uid and not row.k8s_uid:
        # The Job exists but no worker recorded it (the one that created it died): the row adopts it.
        mirror.update(k8s_uid=observation.job_uid, submitted_at=row.submitted_at or timezone.now())
    if row.status == Status.STOPPING:
        return _observe_stopping(row, observation, mirror)
    if row.status == Status.SUBMITTING:
        _transition(row, expected=[Status.SUBMITTING], to_status=Status.QUEUED, reason="Created",
                    message=f"Job {row.job_name} created in {row.project.namespace}; waiting for "
                            f"{'KAI Scheduler' if observation.kai_queue else 'Kueue'}", reread=False)
        moved.append(Status.QUEUED)
    preemption = observation.preemption
    if preemption and (row.last_preempted_at is None or preemption.at > row.last_preempted_at):
        if row.status != Status.PREEMPTED and _transition(
                row, expected=[row.status], to_status=Status.PREEMPTED, reason=preemption.reason,
                message=preemption.message, cluster_at=preemption.at,
                details={"preemptor_workload_id": preemptor_id, "preemptor_job_uid": preemption.preemptor_job_uid,
                         "preemptor_kueue_uid": preemption.preemptor_workload_uid}, reread=False):
            moved.append(Status.PREEMPTED)
        mirror["last_preempted_at"] = preemption.at
        quota_released.send(sender=Workload, workload_id=row.pk, at=preemption.at,
                            reason=f"Preempted ({preemption.reason})")
    status = observation.status
    if status == Status.QUEUED and row.status in PREEMPTED_STATUSES:
        status = Status.REQUEUED  # back in the queue after a preemption: its own status until admitted again
    if status not in QUEUED_STATUSES:
        mirror.update(queue_position_local=None, queue_position_cluster=None)
    if status != row.status:
        if status == Status.RUNNING and row.kind == Kind.NOTEBOOK:
            mirror["last_activity_at"] = timezone.now()  # a notebook that just started counts as in use
        reason = kueue.REQUEUED if status == Status.REQUEUED else observation.reason
        if _transition(row, expected=[row.status], to_status=status, reason=reason, message=observation.message,
                       cluster_at=observation.at, reread=False, **mirror):
            moved.append(status)
            mirror = {}
    else:
        mirror["status_reason"], mirror["status_message"] = observation.reason, observation.message
    if mirror:
        Workload.objects.filter(pk=row.pk).update(**mirror)
    _account(row, observation)
    _notify_on_commit(row, moved)
    workload_logs_read_on_commit(workload=row, statuses=moved, ran=bool(row.started_at or observation.started_at))
    return moved


def _observe_stopping(row: Workload, observation: Observation, mirror: dict[str, Any]) -> list[str]:
    """A stop not yet done by the worker: mirror the cluster and keep the ledger (the Job holds its GPUs until it is
    gone), and move the status only when the Job is over: finished on its own (its final state, at the cluster's
    time) or being deleted (stopped, at the deletion's time). Either closes the stop intent."""
    moved: list[str] = []
    preemption = observation.preemption
    if preemption and (row.last_preempted_at is None or preemption.at > row.last_preempted_at):
        mirror["last_preempted_at"] = preemption.at
    mirror.update(queue_position_local=None, queue_position_cluster=None)
    Workload.objects.filter(pk=row.pk).update(**mirror)
    _account(row, observation)
    if observation.status in {Status.SUCCEEDED, Status.FAILED} or (
            observation.status == Status.STOPPED and not observation.deleted_at):
        if _transition(row, expected=[Status.STOPPING], to_status=observation.status, reason=observation.reason,
                       message=observation.message, cluster_at=observation.at, reread=False,
                       finished_at=observation.finished_at or observation.at or timezone.now()):
            moved.append(observation.status)
    elif observation.deleted_at and workload_stop_finish(workload_id=row.pk, cluster_at=observation.deleted_at):
        moved.append(Status.STOPPED)
    _notify_on_commit(row, moved)
    workload_logs_read_on_commit(workload=row, statuses=moved, ran=bool(row.started_at or observation.started_at))
    return moved


def _account(workload: Workload, observation: Observation) -> None:
    """Keep the GPU-hour ledger in step, on the cluster's clock: one interval per admission, open while held."""
    admitted_at = observation.admitted_at
    if observation.status in HOLDING_STATUSES:
        if admitted_at:
            quota_held.send(sender=Workload, workload=workload, at=admitted_at)
        return
    ended_at = observation.finished_at or observation.at
    if ended_at is None:
        return  # no cluster time to close on yet; a later observation will have one
    quota_released.send(sender=Workload, workload_id=workload.pk, at=ended_at,
                        reason=observation.reason or observation.status)
    if admitted_at and observation.finished_at:
        # Finished before the watcher ever saw it running (a dropped watch): record the stretch closed.
        quota_held.send(sender=Workload, workload=workload, at=admitted_at, ended_at=observation.finished_at,
                            reason=observation.reason or observation.status)


def workload_positions_set(*, positions: dict[int, tuple[int, int]],
                           queued: dict[int, tuple[int | None, int | None]], at: datetime) -> int:
    """Queue positions from Kueue's visibility API; queued workloads it did not list lose theirs. `queued`: the
    positions the queued rows had when read. Only rows whose positions changed are written, all in one transaction (none
    when nothing changed: on SQLite each write waits for the database's one writer, docs/architecture.md, One writer on
    SQLite); each UPDATE is still conditional on the row being queued. Returns how many rows were written."""
    changed = {pk: position for pk, position in positions.items() if pk in queued and queued[pk] != position}
    lost = [pk for pk, (local, _) in queued.items() if pk not in positions and local is not None]
    if not changed and not lost:
        return 0
    written = 0
    with transaction.atomic():
        for workload_id, (local, cluster) in changed.items():
            written += Workload.objects.filter(pk=workload_id, status__in=QUEUED_STATUSES).update(
                queue_position_local=local, queue_position_cluster=cluster, positions_at=at)
        if lost:
            written += Workload.objects.filter(pk__in=lost).update(
                queue_position_local=None, queue_position_cluster=None, positions_at=at)
    return written


def workloads_gone(*, workload_ids: Iterable[int], at: datetime, cluster_at: datetime | None = None) -> None:
    """Live workloads whose Job disappeared: a stop the worker did not get to record (the stop is done), or a Job
    someone else removed. `cluster_at`: the cluster's time of the deletion when known (else `at`, the portal's)."""
    at = cluster_at or at
    for workload in Workload.objects.filter(pk__in=list(workload_ids)).exclude(
            status__in=WATCHER_IGNORES | {Status.SUBMITTING, Status.REJECTED}):
        if workload.status == Status.STOPPING:
            workload_stop_finish(workload_id=workload.pk, cluster_at=cluster_at)
            continue
        with transaction.atomic():
            if _transition(workload, expected=[workload.status], to_status=Status.STOPPED, reason=kueue.JOB_DELETED,
                           message="The Job was deleted outside the portal", cluster_at=cluster_at, finished_at=at):
                quota_released.send(sender=Workload, workload_id=workload.pk, at=at, reason=kueue.JOB_DELETED)


NO_LONGER_MAPPED = "NoLongerMapped"


def workloads_unmapped(*, kueue_uids: Iterable[str], at: datetime, detail: str) -> None:
    """Live rows of work from outside the portal whose Kueue Workload it can no longer count as a project's (its
    namespace unmapped, its queue no longer the portal's): stopped as far as the portal is concerned, with the reason,
    and their GPU-hour stretch closed, so nothing goes on counting what the portal no longer sees."""
    for workload in Workload.objects.filter(origin=Origin.OUTSIDE, kueue_uid__in=list(kueue_uids)).exclude(
            status__in=WATCHER_IGNORES | {Status.SUBMITTING, Status.REJECTED}):
        with transaction.atomic():
            if _transition(workload, expected=[workload.status], to_status=Status.STOPPED, reason=NO_LONGER_MAPPED,
                           message=f"No longer counted as this project's work: {detail}", finished_at=at):
                quota_released.send(sender=Workload, workload_id=workload.pk, at=at, reason=NO_LONGER_MAPPED)
