"""E-mail to a workload's owner about the changes they opted in to, sent by the worker after commit."""

from __future__ import annotations

from apps.accounts.selectors import notification_preference
from apps.core.tasks import enqueue_on_commit
from apps.workloads.models import Status, Workload

NOTIFY_TASK = "worker.tasks.workload_notify"
NOTIFIABLE = frozenset({Status.ADMITTED, Status.PREEMPTED, Status.SUCCEEDED, Status.FAILED})


def _notify_on_commit(workload: Workload, statuses: list[str]) -> None:
    """E-mail the owner about the transitions they opted in to (after commit, by the worker)."""
    wanted = [status for status in statuses if status in NOTIFIABLE]
    if not wanted or workload.owner_id is None:
        return
    preference = notification_preference(workload.owner_id)
    for status in wanted:
        if preference and preference.wants(status):
            enqueue_on_commit(NOTIFY_TASK, workload.pk, status)
