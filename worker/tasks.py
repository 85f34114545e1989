"""Celery tasks: thin, id-based, idempotent. The logic lives in worker modules and app services."""

from __future__ import annotations

import logging

from celery import shared_task

from apps.org import services as org_services

from .gateway import ClusterError, gateway
from .kueue_sync import desired_from_database, reconcile

logger = logging.getLogger(__name__)


class TransientClusterError(Exception):
    """The API server is away or overloaded; Celery retries with backoff."""


@shared_task(autoretry_for=(TransientClusterError,), retry_backoff=2, retry_backoff_max=60, max_retries=8,
             retry_jitter=True)
def kueue_sync() -> list[str]:
    """Reconcile Kueue's objects with the organisation; coalesces bursts of org changes into few passes."""
    run = org_services.kueue_sync_claim()
    if run is None:
        return []  # another worker is reconciling; it sees the request flag and runs again
    try:
        result = reconcile(gateway(), desired_from_database())
    except ClusterError as error:
        org_services.kueue_sync_finish(run=run, changes=[], error=f"{error.status} {error.reason}: {error.message}")
        if error.transient:
            raise TransientClusterError(error.message) from error
        logger.error("kueue sync refused by the API server: %s", error.message)
        return []
    if org_services.kueue_sync_finish(run=run, changes=result.changes):
        kueue_sync.delay()
    return result.changes
