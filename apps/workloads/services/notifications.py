"""Telling people about a workload's changes: e-mail to its owner about the changes they opted in to (sent by the
worker after commit), and the events of the notification channels of its owner and its project
(docs/architecture.md, Notification channels), recorded in the transaction of the change."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.urls import reverse

from apps.accounts.models import NotificationPreference
from apps.accounts.selectors import notification_preference, notification_preferences
from apps.core import kueue_conditions as kueue
from apps.core.tasks import enqueue_on_commit
from apps.org import services as org_services
from apps.org.models import NotificationChannel, NotificationEvent
from apps.org.selectors import notification_channels_listening, notification_channels_of
from apps.workloads.explain.reasons import HUMAN_PREEMPTION
from apps.workloads.models import IdlePolicy, Kind, Status, Workload, WorkloadEvent

NOTIFY_TASK = "worker.tasks.workload_notify"
NOTIFIABLE = frozenset({Status.ADMITTED, Status.PREEMPTED, Status.SUCCEEDED, Status.FAILED})
# The channel event of each transition (by the status it moves to; leaving `submitting` for the queue is the
# submission reaching the cluster).
CHANNEL_EVENTS = {
    Status.ADMITTED: NotificationEvent.WORKLOAD_ADMITTED,
    Status.PREEMPTED: NotificationEvent.WORKLOAD_PREEMPTED,
    Status.REQUEUED: NotificationEvent.WORKLOAD_REQUEUED,
    Status.SUCCEEDED: NotificationEvent.WORKLOAD_FINISHED,
    Status.FAILED: NotificationEvent.WORKLOAD_FAILED,
    Status.SUBMIT_FAILED: NotificationEvent.WORKLOAD_FAILED,
    Status.REJECTED: NotificationEvent.WORKLOAD_FAILED,
}


class _Batch:
    """The notification channels and e-mail opt-ins of a batch of workloads, each read once for all of them when a
    change first needs it (`notifications_batch`)."""

    def __init__(self, workloads: Sequence[Workload]) -> None:
        self.user_ids = {workload.owner_id for workload in workloads if workload.owner_id is not None}
        self.project_ids = {workload.project_id for workload in workloads}
        self._channels: list[NotificationChannel] | None = None
        self._preferences: dict[int, NotificationPreference] | None = None

    def covers(self, workload: Workload) -> bool:
        return workload.project_id in self.project_ids and (
            workload.owner_id is None or workload.owner_id in self.user_ids)

    def listening(self, workload: Workload, event: str) -> list[NotificationChannel]:
        if self._channels is None:
            self._channels = notification_channels_of(user_ids=self.user_ids, project_ids=self.project_ids)
        return [channel for channel in self._channels if event in channel.events and (
            channel.project_id == workload.project_id or (channel.user_id and channel.user_id == workload.owner_id))]

    def preference(self, user_id: int) -> NotificationPreference | None:
        if self._preferences is None:
            self._preferences = notification_preferences(self.user_ids)
        return self._preferences.get(user_id)


_BATCH: ContextVar[_Batch | None] = ContextVar("notifications_batch", default=None)


@contextlib.contextmanager
def notifications_batch(workloads: Sequence[Workload]) -> Iterator[None]:
    """While open, the changes of these workloads read their listeners and opt-ins from one read for the batch."""
    token = _BATCH.set(_Batch(workloads))
    try:
        yield
    finally:
        _BATCH.reset(token)


def _notify_on_commit(workload: Workload, statuses: list[str]) -> None:
    """E-mail the owner about the transitions they opted in to (after commit, by the worker)."""
    wanted = [status for status in statuses if status in NOTIFIABLE]
    if not wanted or workload.owner_id is None:
        return
    batch = _BATCH.get()
    preference = batch.preference(workload.owner_id) if batch and batch.covers(workload) else \
        notification_preference(workload.owner_id)
    for status in wanted:
        if preference and preference.wants(status):
            enqueue_on_commit(NOTIFY_TASK, workload.pk, status)


def _link(workload: Workload) -> str:
    return f"{settings.PORTAL_BASE_URL}{reverse('workloads:detail', args=[workload.pk])}"


def _object(workload: Workload, event: WorkloadEvent) -> dict[str, Any]:
    return {"type": "workload", "id": workload.pk, "name": workload.name, "kind": workload.kind,
            "project": workload.project.slug, "owner": workload.owner.username if workload.owner else None,
            "status": event.to_status, "previous_status": event.from_status, "reason": event.reason,
            "message": event.message, "gpus": workload.gpu_units,
            "gpu_fraction": None if workload.gpu_fraction is None else float(workload.gpu_fraction),
            "node_pool": workload.node_pool.slug if workload.node_pool_id else None}


def _listening(workload: Workload, name: str) -> list[NotificationChannel]:
    if (batch := _BATCH.get()) is not None and batch.covers(workload):
        return batch.listening(workload, name)
    return notification_channels_listening(event=name, user_ids=[workload.owner_id] if workload.owner_id else [],
                                           project_ids=[workload.project_id])


def _emit(workload: Workload, event: WorkloadEvent, name: str, summary: str, extra: dict[str, Any],
          channels: list[NotificationChannel]) -> int:
    return org_services.notifications_emit(
        event=name, key=f"workload:{workload.pk}:event:{event.pk}", obj={**_object(workload, event), **extra},
        summary=summary, link=_link(workload), channels=channels)


def workload_channels_record(workload: Workload, event: WorkloadEvent) -> int:
    """Record the channel event of one status change (none for changes no channel hears about); idempotent per
    transition, the event row naming it."""
    if event.from_status == event.to_status:
        return 0
    if event.from_status == Status.SUBMITTING and event.to_status == Status.QUEUED:
        name: str = NotificationEvent.WORKLOAD_SUBMITTED
    elif event.to_status in CHANNEL_EVENTS:
        name = CHANNEL_EVENTS[Status(event.to_status)]
    elif event.to_status == Status.STOPPED and event.reason == kueue.DEACTIVATED_AT_RUNTIME_LIMIT:
        name = NotificationEvent.WORKLOAD_RUNTIME_LIMIT
    else:
        return 0
    # Who listens first: for a change no channel hears, nothing more is read (inside the transition's transaction,
    # which on SQLite holds the database's one write lock).
    channels = _listening(workload, name)
    if not channels:
        return 0
    label = Status(event.to_status).label.lower()
    summary = f"{workload.kind.capitalize()} workload {workload.name} in {workload.project.name} is {label}."
    extra: dict[str, Any] = {}
    if name == NotificationEvent.WORKLOAD_RUNTIME_LIMIT:
        # Kueue stops it (deactivates its Workload) once it has run for the limit the portal gave it.
        extra["max_runtime_seconds"] = workload.max_runtime_seconds
        summary = (f"{workload.kind.capitalize()} workload {workload.name} in {workload.project.name} was stopped: "
                   f"it reached its runtime limit of {workload.max_runtime_seconds} seconds.")
    elif name == NotificationEvent.WORKLOAD_PREEMPTED:
        plain = HUMAN_PREEMPTION.get(event.reason, "")
        extra["plain_reason"] = f"Preempted {plain}." if plain else \
            f"Preempted by {workload.node_pool.get_scheduler_display()}."
        summary = f"{summary} {extra['plain_reason']}"
    elif name == NotificationEvent.WORKLOAD_SUBMITTED:
        summary = f"{workload.kind.capitalize()} workload {workload.name} was submitted to {workload.project.name}."
    return _emit(workload, event, name, summary, extra, channels)


def workload_idle_channels_record(workload: Workload, event: WorkloadEvent, *, policy: IdlePolicy) -> int:
    """The idle warning: the workload holds GPUs it does not use (a notebook is told when it will be stopped, the
    policy's warning time after this, with the keep-alive link)."""
    channels = _listening(workload, NotificationEvent.WORKLOAD_IDLE_WARNING)
    if not channels:
        return 0
    summary = f"{workload.kind.capitalize()} workload {workload.name} in {workload.project.name} holds " \
              f"{workload.gpu_amount_words} not being used: {event.message}."
    extra: dict[str, Any] = {}
    if workload.kind == Kind.NOTEBOOK and policy.cull_notebooks:
        extra["keep_alive"] = _link(workload)  # its page has the Keep alive button (a POST, never a GET link)
        extra["stops_at"] = (event.at + policy.warning).isoformat()
        summary = (f"{summary} It will be stopped in {policy.warning_minutes} minutes ({extra['stops_at']}) unless "
                   f"kept alive from {extra['keep_alive']}.")
    return _emit(workload, event, NotificationEvent.WORKLOAD_IDLE_WARNING, summary, extra, channels)
