"""The org -> Kueue reconcile's bookkeeping: every committed organisation change asks for one; the worker claims
and runs it (worker/kueue_sync.py) and records how it went."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts.access import Action
from apps.core import intents
from apps.core.actors import Actor
from apps.core.audit import audit_record
from apps.org.models import KueueSyncRun, KueueSyncState

from .common import _require

KUEUE_SYNC_TASK = "worker.tasks.kueue_sync"
KUEUE_SYNC_INTENT = "kueue.sync"  # an outbox row per request (apps.core.intents); a pass closes those it covered
KUEUE_SYNC_DEADLINE = timedelta(seconds=60)
KUEUE_SYNC_STALE_AFTER = timedelta(minutes=5)  # a claim older than this belonged to a worker that died
KUEUE_SYNC_RUNS_KEPT = 500


def _org_changed() -> None:
    """Every committed organisation change asks for a Kueue reconcile (it coalesces bursts of changes)."""
    kueue_sync_request()


def kueue_sync_request_by(*, actor: Actor) -> None:
    """An admin's "sync now": audited, then the same request as any org change."""
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        state, _ = KueueSyncState.objects.get_or_create(pk=1)
        audit_record(actor=actor, action="kueue_sync.request", obj=state, before=None,
                     after={"requested": True})
        kueue_sync_request()


def kueue_sync_request() -> None:
    """Mark a reconcile as wanted (an outbox row in the caller's transaction) and enqueue one after commit."""
    KueueSyncState.objects.get_or_create(pk=1)
    KueueSyncState.objects.filter(pk=1).update(requested_at=timezone.now())
    intents.intent_record(kind=KUEUE_SYNC_INTENT, task=KUEUE_SYNC_TASK, target_id=None, deadline=KUEUE_SYNC_DEADLINE)


def kueue_sync_claim() -> KueueSyncRun | None:
    """Claim the reconcile (conditional UPDATE); None when another worker holds a live claim."""
    now = timezone.now()
    KueueSyncState.objects.get_or_create(pk=1)
    claimed = KueueSyncState.objects.filter(
        Q(running_since__isnull=True) | Q(running_since__lt=now - KUEUE_SYNC_STALE_AFTER), pk=1
    ).update(running_since=now)
    if not claimed:
        return None
    return KueueSyncRun.objects.create(started_at=now)


def kueue_sync_finish(*, run: KueueSyncRun, changes: list[str], error: str = "",
                      project_errors: list[str] | None = None) -> bool:
    """Record the outcome and release the claim; True when a change arrived meanwhile and another pass is due.

    `error` is a run that failed as a whole; `project_errors` are the projects a completed run left out."""
    with transaction.atomic():
        run.finished_at = timezone.now()
        run.ok = not error
        run.changes = changes
        run.error = error
        run.project_errors = project_errors or []
        run.save(update_fields=["finished_at", "ok", "changes", "error", "project_errors"])
        KueueSyncState.objects.filter(pk=1).update(running_since=None)
        stale = KueueSyncRun.objects.values_list("pk", flat=True)[KUEUE_SYNC_RUNS_KEPT:]
        KueueSyncRun.objects.filter(pk__in=list(stale)).delete()
        state = KueueSyncState.objects.get(pk=1)
    return state.requested_at is not None and state.requested_at > run.started_at
