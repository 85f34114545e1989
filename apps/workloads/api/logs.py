"""GET /api/v1/workloads/<id>/logs/: the pods' log tails, and following them as a streamed response.

The web process never talks to Kubernetes: the worker stores each pod's last lines (apps/workloads/logs.py) and
reading them asks for a fresh fetch when one is due. The first read of a running workload whose tail is not stored
yet waits a few seconds for the worker's read (FIRST_READ_SECONDS) rather than answering "no lines yet".

Following polls those stored tails and sends the lines it has not sent yet, as plain text, until the workload has
finished and its last lines were read, or `timeout` seconds passed, or the client went away. A tail holds the last
TAIL_LINES lines, so a pod that writes faster than the fetches can skip lines in a follow (the tail is a window, not
a stream); the lines sent are in order and never repeated. Lines carry their pod's name when the workload runs
several pods over its life (a gang, a batch's completions) or when a second pod turns up (a retry), so the lines of
successive pods never run together. A follow holds one of the web's threads and, between its polls, no database
connection (docs/architecture.md, Serving the portal).
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from apps.core.tasks import enqueue_on_commit
from apps.workloads import logs
from apps.workloads.models import FINAL_STATUSES, HOLDING_STATUSES, Workload, WorkloadLogTail

POLL_SECONDS = 2.0  # the worker reads a live workload's logs every REFRESH_SECONDS; this only bounds the delay
MAX_FOLLOW_SECONDS = 3600
FINAL_READ_SECONDS = 20
FIRST_READ_SECONDS = 5.0
FIRST_READ_POLL_SECONDS = 0.25

# wait(seconds) -> False once the client has gone (the follow then ends at once)
Wait = Callable[[float], bool]


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
                  "error": tail.error, "exit_code": tail.exit_code, "exit_reason": tail.exit_reason,
                  "fetched_at": tail.fetched_at} for tail in tails],
    }


def release_connection() -> None:
    """Give the thread's database connection back (to the web's pool) while a long request waits, unless the caller
    holds a transaction on it."""
    if not connection.in_atomic_block:
        connection.close()


def first_read(*, workload: Workload, wait: Wait | None = None) -> list[WorkloadLogTail]:
    """The stored tails; for a workload holding pods with none stored yet, the worker's read (asked for by the
    caller) awaited up to FIRST_READ_SECONDS."""
    tails = logs.log_tails(workload=workload)
    if tails or not workload.job_name or workload.status not in HOLDING_STATUSES:
        return tails
    wait = wait or _sleep
    deadline = time.monotonic() + FIRST_READ_SECONDS
    while not tails and time.monotonic() < deadline:
        release_connection()
        if not wait(FIRST_READ_POLL_SECONDS):
            break
        tails = logs.log_tails(workload=workload)
    return tails


def closing_line(workload: Workload, tails: list[WorkloadLogTail]) -> str:
    """`[<name> <status>]`, with the exit codes of the pods that failed."""
    codes = sorted({tail.exit_code for tail in logs.failed_exits(tails) if tail.exit_code is not None})
    if not codes:
        return f"[{workload.name} {workload.status}]\n"
    said = f"exit code {codes[0]}" if len(codes) == 1 else f"exit codes {', '.join(map(str, codes))}"
    return f"[{workload.name} {workload.status}: {said}]\n"


def follow(*, workload_id: int, timeout: float, multi_pod: bool, sleep: Wait | None = None) -> Iterator[str]:
    """The lines of each pod as they come, prefixed with the pod's name when there are (or may be) several pods.

    Once the workload has finished, one more read is asked for and awaited (up to FINAL_READ_SECONDS: the pods of a
    finished Job may be gone), so the last lines, the exit, are sent before the closing line. `sleep` waits between
    polls and says whether the client is still there."""
    wait = sleep or _sleep
    sent: dict[str, list[str]] = {}
    prefixed = multi_pod
    deadline = time.monotonic() + min(timeout, MAX_FOLLOW_SECONDS)
    final_seen: datetime | None = None
    while True:
        workload = Workload.objects.filter(pk=workload_id).first()
        if workload is None:
            return
        tails = logs.log_tails(workload=workload)
        finished = workload.status in FINAL_STATUSES
        if finished and final_seen is None:
            final_seen = timezone.now()
            if workload.job_name and workload.started_at:
                enqueue_on_commit(logs.LOGS_TASK, workload.pk)
        elif not finished:
            logs.workload_logs_refresh_request(workload=workload,
                                               last_fetch=max((tail.fetched_at for tail in tails), default=None))
        prefixed = prefixed or len({*sent, *(tail.pod for tail in tails)}) > 1
        for tail in tails:
            current = tail.text.splitlines()
            for line in new_lines(sent.get(tail.pod, []), current):
                yield f"{tail.pod} | {line}\n" if prefixed else f"{line}\n"
            if tail.error and sent.get(tail.pod) is None:
                yield f"[{tail.pod}: {tail.error}]\n"
            sent[tail.pod] = current
        if final_seen is not None and (
                not workload.job_name or not workload.started_at
                or any(tail.fetched_at >= final_seen for tail in tails)
                or timezone.now() - final_seen > timedelta(seconds=FINAL_READ_SECONDS)):
            yield closing_line(workload, tails)
            return
        if time.monotonic() >= deadline:
            return
        release_connection()
        if not wait(min(POLL_SECONDS, max(0.0, deadline - time.monotonic()))):
            return


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return True


def client_waiter(meta: dict[str, Any]) -> Wait:
    """A wait that ends early, answering False, when the client closes its connection: gunicorn hands the request's
    socket over (`gunicorn.socket`), and an end of stream on it while we wait means nobody reads the follow any more,
    so its thread is free at once rather than when the next line would have failed to send. Elsewhere (the test
    client, another server, a TLS socket, which cannot be peeked at) a plain sleep."""
    client = meta.get("gunicorn.socket")
    if not isinstance(client, socket.socket) or isinstance(client, ssl.SSLSocket):
        return _sleep

    def wait(seconds: float) -> bool:
        started = time.monotonic()
        try:
            readable, _, _ = select.select([client], [], [], seconds)
            if readable and client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                return False  # the client closed its end
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:  # reset by the peer, or the socket is gone
            return False
        time.sleep(max(0.0, seconds - (time.monotonic() - started)))  # bytes sent ahead (pipelining) wait here
        return True

    return wait
