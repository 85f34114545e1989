"""Pod log tails: the worker fetches them (the web process never talks to Kubernetes) and stores the last lines of
each pod with its main container's exit code once it has terminated.

The watcher's state machine asks for a read when a workload starts running and when it finishes
(`workload_logs_read_on_commit`), so the first read of a running workload has lines and a failed one keeps its exit
code and last lines after its pods are gone. `workload_logs_refresh_request` is asked by the detail page on every
render while a workload holds quota, and by the API's reads; it enqueues at most one fetch per workload every
REFRESH_SECONDS (a cache `add` is the atomic "first caller wins"; the stored `fetched_at` also counts, so a restart of
the web process does not cause a burst). Once a workload has finished, one last fetch is made if the stored tail
predates the finish, so the final lines (exit code) stay readable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.core.tasks import enqueue_on_commit

from .models import FINAL_STATUSES, HOLDING_STATUSES, Status, Workload, WorkloadLogTail

LOGS_TASK = "worker.tasks.workload_logs_fetch"
REFRESH_SECONDS = 10
TAIL_LINES = 100
MAX_TAIL_CHARS = 64_000
# How long after a workload finished its pods are still worth a read: past it they may be gone, and the detail page
# stops waiting for the final one.
FINAL_READ_SECONDS = 60


@dataclass(frozen=True)
class PodLog:
    """What the worker read of one pod: the tail of its log, why it could not be read, and how its main container
    ended (None while it runs)."""

    text: str = ""
    error: str = ""
    exit_code: int | None = None
    exit_reason: str = ""


def log_tails(*, workload: Workload) -> list[WorkloadLogTail]:
    return list(WorkloadLogTail.objects.filter(workload=workload).order_by("pod"))


def failed_exits(tails: list[WorkloadLogTail]) -> list[WorkloadLogTail]:
    """The pods whose main container ended with a non-zero exit code, in pod order."""
    return [tail for tail in tails if tail.exit_code]


def final_read_pending(*, workload: Workload, last_fetch: datetime | None, now: datetime | None = None) -> bool:
    """A workload that ran and finished moments ago whose last read (its final lines, its exit code) is not stored
    yet (`last_fetch`: the newest stored tail's time): the detail page keeps polling for it."""
    if (workload.from_outside or not workload.job_name or not workload.started_at or workload.finished_at is None
            or workload.status not in (Status.SUCCEEDED, Status.FAILED)):
        return False
    now = now or timezone.now()
    if now - workload.finished_at > timedelta(seconds=FINAL_READ_SECONDS):
        return False
    return last_fetch is None or last_fetch < workload.finished_at


def workload_logs_read_on_commit(*, workload: Workload, statuses: list[str], ran: bool) -> bool:
    """Ask the worker for a read after commit when the workload just moved through `statuses`: started running (its
    first lines are then read before anyone asks), or finished having `ran` (its last lines and exit code, before the
    pods go)."""
    if workload.from_outside or not workload.job_name:
        return False
    started = Status.RUNNING in statuses
    ended = ran and bool({Status.SUCCEEDED, Status.FAILED} & set(statuses))
    if not (started or ended):
        return False
    enqueue_on_commit(LOGS_TASK, workload.pk)
    return True


def _wants_fetch(workload: Workload, last_fetch: datetime | None, now: datetime) -> bool:
    if not workload.job_name:
        return False
    if workload.status in HOLDING_STATUSES:
        return last_fetch is None or now - last_fetch >= timedelta(seconds=REFRESH_SECONDS)
    if workload.status in FINAL_STATUSES and workload.started_at:
        return last_fetch is None or (workload.finished_at is not None and last_fetch < workload.finished_at)
    return False


UNKNOWN: Any = object()


def workload_logs_refresh_request(*, workload: Workload, last_fetch: datetime | None = UNKNOWN,
                                  now: datetime | None = None) -> bool:
    """Enqueue a log fetch for the workload when one is due; True when it did. `last_fetch` is the newest stored
    tail's time when the caller knows it (None: there is none), else one query finds it."""
    if not workload.job_name or workload.status not in HOLDING_STATUSES | FINAL_STATUSES:
        return False  # no pods to read
    now = now or timezone.now()
    if last_fetch is UNKNOWN:
        last_fetch = WorkloadLogTail.objects.filter(workload=workload).aggregate(at=Max("fetched_at"))["at"]
    if not _wants_fetch(workload, last_fetch, now):
        return False
    if not cache.add(f"workload-logs-refresh:{workload.pk}", 1, timeout=REFRESH_SECONDS):
        return False  # another request enqueued one within the window
    enqueue_on_commit(LOGS_TASK, workload.pk)
    return True


def workload_log_tails_store(*, workload_id: int, tails: dict[str, PodLog], at: datetime) -> int:
    """Replace the workload's stored tails with what the worker read, by pod. Returns pods stored."""
    with transaction.atomic():
        if not Workload.objects.filter(pk=workload_id).exists():
            return 0
        for pod, read in tails.items():
            WorkloadLogTail.objects.update_or_create(workload_id=workload_id, pod=pod, defaults={
                "text": read.text[-MAX_TAIL_CHARS:], "error": read.error[:500], "exit_code": read.exit_code,
                "exit_reason": read.exit_reason[:100], "fetched_at": at})
        if tails:  # pods of a finished Job may be gone: keep the last tail read rather than showing nothing
            WorkloadLogTail.objects.filter(workload_id=workload_id).exclude(pod__in=list(tails)).delete()
    return len(tails)
