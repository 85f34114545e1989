"""Enqueue worker tasks by name after the current transaction commits (apps never import worker)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from portal.celery import app as celery_app

logger = logging.getLogger(__name__)


def enqueue_now(name: str, *args: Any, **options: Any) -> bool:
    """Send a task; a broker outage is logged, not raised: beat sweeps pick the work up later."""
    try:
        celery_app.send_task(name, args=args, **options)
    except Exception:  # the broker is down or unreachable; nothing is lost, see apps/core/intents.py (the outbox)
        logger.warning("could not enqueue %s%r; the periodic sweep will retry", name, args, exc_info=True)
        return False
    return True


def enqueue_on_commit(name: str, *args: Any, **options: Any) -> None:
    transaction.on_commit(lambda: enqueue_now(name, *args, **options))
