"""GET /api/v1/workloads/<id>/logs/: the pods' log tails, and following them as a streamed response.

The web process never talks to Kubernetes: the worker stores each pod's last lines (apps/workloads/logs.py) and
reading them asks for a fresh fetch when one is due. Following polls those stored tails and sends the lines it has
not sent yet, as plain text, until the workload has finished and its last lines were read, or `timeout` seconds
passed. A tail holds the last TAIL_LINES lines, so a pod that writes faster than the fetches can skip lines in a
follow (the tail is a window, not a stream); the lines sent are in order and never repeated.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from apps.core.tasks import enqueue_on_commit
from apps.workloads import logs
from apps.workloads.models import FINAL_STATUSES, Workload, WorkloadLogTail

POLL_SECONDS = 1.0
MAX_FOLLOW_SECONDS = 3600
FINAL_READ_SECONDS = 20


def new_lines(sent: list[str], current: list[str]) -> list[str]:
    """The lines of `current` (a pod's latest tail) that follow what `sent` (the previous tail) ended with: the
    longest end of `sent` that starts `current` is the overlap."""
    if not sent:
        return current
    for overlap in range(min(len(sent), len(current)), 0, -1):
        if sent[-overlap:] == current[:overlap]:
            return current[overlap:]
    return current


def tails_payload(workload: Workload, tails: list[WorkloadLogTail], lines: int | None) -> dict[str, Any]:
    return {
        "workload": workload.pk, "status": workload.status,
        "pending": not tails and workload.status not in FINAL_STATUSES,
        "pods": [{"pod": tail.pod, "lines": tail.text.splitlines()[-lines:] if lines else tail.text.splitlines(),
                  "error": tail.error, "fetched_at": tail.fetched_at} for tail in tails],
    }


def follow(*, workload_id: int, timeout: float, multi_pod: bool,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[str]:
    """The lines of each pod as they come, prefixed with the pod's name when there are several pods.

    Once the workload has finished, one more read is asked for and awaited (up to FINAL_READ_SECONDS: the pods of a
    finished Job may be gone), so the last lines, the exit, are sent before the closing line."""
    sent: dict[str, list[str]] = {}
    deadline = time.monotonic() + min(timeout, MAX_FOLLOW_SECONDS)
    final_seen: datetime | None = None
    while True:
        workload = Workload.objects.filter(pk=workload_id).first()
        if workload is None:
            return
        finished = workload.status in FINAL_STATUSES
        if finished and final_seen is None:
            final_seen = timezone.now()
            if workload.job_name and workload.started_at:
                enqueue_on_commit(logs.LOGS_TASK, workload.pk)
        elif not finished:
            logs.workload_logs_refresh_request(workload=workload)
        tails = logs.log_tails(workload=workload)
        for tail in tails:
            current = tail.text.splitlines()
            for line in new_lines(sent.get(tail.pod, []), current):
                yield f"{tail.pod} | {line}\n" if multi_pod else f"{line}\n"
            if tail.error and sent.get(tail.pod) is None:
                yield f"[{tail.pod}: {tail.error}]\n"
            sent[tail.pod] = current
        if final_seen is not None and (
                not workload.job_name or not workload.started_at
                or any(tail.fetched_at >= final_seen for tail in tails)
                or timezone.now() - final_seen > timedelta(seconds=FINAL_READ_SECONDS)):
            yield f"[{workload.name} {workload.status}]\n"
            return
        if time.monotonic() >= deadline:
            return
        sleep(POLL_SECONDS)
