"""The outbox: every change the portal asks of the cluster is a row before it is a message.

Why: a broker outage (or a Redis that restarts empty) loses messages, and a worker killed mid-task loses its work.
Neither may lose a user's submission or stop. So the database, not the broker, remembers what is wanted.

The design, one rule per line:

- **Record in the same transaction.** A service that wants the cluster changed calls `intent_record` inside the
  transaction of the user's action; the task is sent after commit (`enqueue_on_commit`). A rolled-back action leaves
  no intent; a lost message leaves the intent open. Kinds today: `workload.submit` and `workload.stop` (target: the
  workload; apps.workloads.services), `kueue.sync` (the org -> Kueue reconcile, no target; apps.org.services),
  `credential.sync` and `pull_secret.sync` (write or remove a credential's or a registry's Secret; their values wait
  sealed on the row, apps.core.sealed), `workload.gang_repair` (the watcher's request that the worker make a KAI gang's
  pods match its row: evicted ranks made again, ranks outliving its end stopped) and `notification.deliver` (a
  webhook, Slack, Teams or e-mail delivery; apps.org.services). Keeping a notebook alive only writes the portal's
  database, so it is no intent. Sends go by task name, so Celery's router puts each on its queue
  (portal.celery.route_task): the first send and the sweep's re-sends of a delivery alike land on the notifications
  queue.
- **A deadline, then the sweep.** `next_attempt_at` is when an intent not yet done is due. The beat task
  `worker.tasks.intents_sweep` (every 15 s) sends the task of every due intent again (`intents_claim_due`: a
  conditional claim, so two sweeps never both send it) and pushes the deadline back with exponential backoff
  (after the first deadline, 1, 2, 4 and 8 minutes, then every 10), so a long backlog is not multiplied. Intents
  never expire: a stop is retried until the Job is gone. Giving up is the domain's decision (a submission becomes
  `submit_failed`).
- **Tasks lease what they work on.** A task starts with `intent_claim`: a conditional UPDATE that leases the open
  intents of its target (`claimed_until`, counted in `attempts`) unless another task holds them (`busy`: that task
  finishes, or its lease runs out and the sweep sends it again). The lease outlives the hard task time limit, so a
  lease still running belongs to a live task and an expired one to a killed worker. A failing task records
  `last_error` and its retry time (`intent_release`). Tasks also run when they find no intent (a direct call): the
  intent is bookkeeping and the sweep's memory, the domain rows' own claims keep tasks exclusive.
- **Done when the domain says so.** An intent is done (`done_at`, `outcome`) when what it asked for is true or can
  never be: the workloads app closes submit and stop intents in the very transition that leaves `submitting` or
  `stopping` (whoever makes it: the task, the watcher, a rejection); the reconcile closes the `kueue.sync` intents it
  covered (those visible when it started, so a change committed during a pass is picked up by the next one) once a
  read back after its pass shows the cluster as intended, and otherwise leaves them open for the sweep.
- **Idempotent work.** Jobs have deterministic names (a create answering 409 adopts the existing Job), deleting a
  Job already gone is success, and status transitions are conditional UPDATEs. A duplicate send costs a no-op, so
  the broker's at-least-once delivery (acks_late, a visibility timeout of minutes) and the sweep's re-sends are safe.
- Done intents are kept for a week (`intents_prune`), for whoever asks what happened.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from .models import Intent
from .tasks import enqueue_on_commit

BACKOFF_BASE = timedelta(seconds=30)
BACKOFF_MAX = timedelta(minutes=10)
KEEP_DONE = timedelta(days=7)
SWEEP_BATCH = 500
ERROR_CHARS = 2000


def lease() -> timedelta:
    """How long a task's lease lasts: past the hard time limit, after which Celery has killed the task."""
    return timedelta(seconds=int(settings.CELERY_TASK_TIME_LIMIT) + 30)


def _args(target_id: int | None) -> tuple[int, ...]:
    return () if target_id is None else (target_id,)


def intent_record(*, kind: str, task: str, target_id: int | None, deadline: timedelta, send: bool = True) -> Intent:
    """Record what the cluster must be asked, in the caller's transaction; send its task after commit.

    `deadline`: how long until the sweep sends it again if it is not done. `send=False` leaves the first send to the
    sweep too (work that must wait, e.g. until another task's lease runs out).
    """
    now = timezone.now()
    intent = Intent.objects.create(kind=kind, task=task, target_id=target_id, created_at=now,
                                   next_attempt_at=now + deadline, dispatches=1 if send else 0)
    if send:
        enqueue_on_commit(task, *_args(target_id))
    return intent


@dataclass(frozen=True)
class Claim:
    """The intents a task leased (`ids`), or `busy` when another task holds every open one."""

    kind: str
    target_id: int | None
    ids: tuple[int, ...]
    busy: bool


def intent_claim(*, kind: str, target_id: int | None) -> Claim:
    """Lease the open intents of (kind, target) whose lease is free (conditional UPDATE under row locks); within the
    caller's transaction when there is one, without a savepoint (two statements fewer while it holds the lock)."""
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        rows = list(Intent.objects.select_for_update().filter(kind=kind, target_id=target_id, done_at__isnull=True)
                    .values_list("pk", "claimed_until"))
        free = [pk for pk, until in rows if until is None or until <= now]
        if free:
            Intent.objects.filter(pk__in=free).update(claimed_until=now + lease(), attempts=F("attempts") + 1)
    return Claim(kind=kind, target_id=target_id, ids=tuple(free), busy=bool(rows) and not free)


def intent_release(claim: Claim, *, error: str = "", retry_at: datetime | None = None) -> None:
    """Give the lease back (the task failed or must wait). The sweep sends it again once past its deadline, moved to
    `retry_at` if that is later (a retry the task scheduled itself; a deadline the sweep backed off stays)."""
    if not claim.ids:
        return
    changes: dict[str, object] = {"claimed_until": None}
    if error:
        changes["last_error"] = error[:ERROR_CHARS]
    if retry_at is not None:
        changes["next_attempt_at"] = Greatest(F("next_attempt_at"), Value(retry_at, output_field=DateTimeField()))
    Intent.objects.filter(pk__in=claim.ids, done_at__isnull=True).update(**changes)


def intents_complete(*, kind: str, target_id: int | None, outcome: str, ids: tuple[int, ...] | None = None) -> int:
    """Mark the open intents of (kind, target) done (only `ids`, when given); returns how many."""
    open_ = Intent.objects.filter(kind=kind, target_id=target_id, done_at__isnull=True)
    if ids is not None:
        open_ = open_.filter(pk__in=ids)
    return open_.update(done_at=timezone.now(), outcome=outcome[:100], claimed_until=None)


def intents_open(*, kind: str, target_id: int | None, besides: tuple[int, ...] = ()) -> bool:
    """Whether (kind, target) has open intents, other than `besides` (a task's own, released for the sweep)."""
    return Intent.objects.filter(kind=kind, target_id=target_id, done_at__isnull=True).exclude(pk__in=besides).exists()


def _backoff(dispatches: int) -> timedelta:
    return min(BACKOFF_BASE * 2 ** min(dispatches, 10), BACKOFF_MAX)


def intents_claim_due(*, now: datetime | None = None, limit: int = SWEEP_BATCH) -> list[tuple[str, int | None]]:
    """The (task, target) of every intent past its deadline and not leased, once each; their deadlines move on.

    Rows another sweep has locked are skipped, so concurrent sweeps never send the same intent twice.
    """
    now = now or timezone.now()
    with transaction.atomic():
        due = list(Intent.objects.select_for_update(skip_locked=True).filter(
            Q(claimed_until__isnull=True) | Q(claimed_until__lte=now),
            done_at__isnull=True, next_attempt_at__lte=now,
        ).order_by("next_attempt_at", "id").values_list("pk", "task", "target_id", "dispatches")[:limit])
        by_dispatches: dict[int, list[int]] = defaultdict(list)
        for pk, _, _, dispatches in due:
            by_dispatches[dispatches].append(pk)
        for dispatches, ids in by_dispatches.items():
            Intent.objects.filter(pk__in=ids).update(next_attempt_at=now + _backoff(dispatches),
                                                     dispatches=dispatches + 1)
    return list(dict.fromkeys((task, target_id) for _, task, target_id, _ in due))


def intents_prune(*, now: datetime | None = None) -> int:
    """Forget intents done more than a week ago (a batch per call)."""
    cutoff = (now or timezone.now()) - KEEP_DONE
    stale = list(Intent.objects.filter(done_at__lt=cutoff).values_list("pk", flat=True)[:SWEEP_BATCH])
    return Intent.objects.filter(pk__in=stale).delete()[0] if stale else 0
