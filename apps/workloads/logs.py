"""Pod log tails: the worker fetches them (the web process never talks to Kubernetes) and stores the last lines.

`workload_logs_refresh_request` is asked by the detail page on every render while a workload holds quota; it enqueues
at most one fetch per workload every REFRESH_SECONDS (a cache `add` is the atomic "first caller wins"; the stored
`fetched_at` also counts, so a restart of the web process does not cause a burst). Once a workload has finished, one
last fetch is made if the stored tail predates the finish, so the final lines (exit code) stay readable.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.core.tasks import enqueue_on_commit

from .models import FINAL_STATUSES, HOLDING_STATUSES, Workload, WorkloadLogTail

LOGS_TASK = "worker.tasks.workload_logs_fetch"
REFRESH_SECONDS = 10
TAIL_LINES = 100
MAX_TAIL_CHARS = 64_000


def log_tails(*, workload: Workload) -> list[WorkloadLogTail]:
    return list(WorkloadLogTail.objects.filter(workload=workload).order_by("pod"))


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


def workload_log_tails_store(*, workload_id: int, tails: dict[str, tuple[str, str]], at: datetime) -> int:
    """Replace the workload's stored tails with what the worker read: pod -> (text, error). Returns pods stored."""
    with transaction.atomic():
        if not Workload.objects.filter(pk=workload_id).exists():
            return 0
        for pod, (text, error) in tails.items():
            WorkloadLogTail.objects.update_or_create(workload_id=workload_id, pod=pod, defaults={
                "text": text[-MAX_TAIL_CHARS:], "error": error[:500], "fetched_at": at})
        if tails:  # pods of a finished Job may be gone: keep the last tail read rather than showing nothing
            WorkloadLogTail.objects.filter(workload_id=workload_id).exclude(pod__in=list(tails)).delete()
    return len(tails)
