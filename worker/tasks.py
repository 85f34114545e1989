"""Celery tasks: thin, id-based, idempotent. The logic lives in worker modules and app services."""

from __future__ import annotations

import logging
from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone

from apps.org import services as org_services
from apps.workloads import logs as workload_logs
from apps.workloads import services as workload_services
from apps.workloads.explain import explain_workloads
from apps.workloads.models import Kind, Status, Workload

from .gateway import ClusterError, gateway
from .kueue_sync import desired_from_database, reconcile
from .manifests import WORKLOAD_ID_LABEL, job_manifest, notebook_service

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
    if org_services.kueue_sync_finish(run=run, changes=result.changes, project_errors=result.project_errors):
        kueue_sync.delay()
    return result.changes


# 404 is not here: a new project's namespace may not be synced yet, so it is worth a retry.
PERMANENT_STATUS = {400, 403, 422}


@shared_task(bind=True, max_retries=6)
def workload_submit(self: Task, workload_id: int) -> str:
    """Create the workload's Job (and a notebook's Service); idempotent through its deterministic name."""
    workload = workload_services.workload_claim_submit(workload_id=workload_id)
    if workload is None:
        return "not claimed"  # already submitted, stopped, or another worker holds it
    manifest = job_manifest(workload)
    try:
        gw = gateway()
        uid = _create_or_adopt(gw, manifest)
        if workload.kind == Kind.NOTEBOOK:
            _create_or_adopt(gw, notebook_service(workload, uid))
    except ClusterError as error:
        if error.status in PERMANENT_STATUS or not error.transient:
            workload_services.workload_mark_rejected(workload=workload, message=f"The cluster refused the job: "
                                                                                f"{error.message}")
            return "rejected"
        workload_services.workload_release_claim(workload=workload)
        if self.request.retries >= self.max_retries:
            workload_services.workload_mark_submit_failed(
                workload_id=workload_id, message=f"Gave up after {self.request.retries + 1} attempts: {error.message}")
            return "submit_failed"
        raise self.retry(exc=error, countdown=min(60, 2 ** (self.request.retries + 1))) from error
    if not workload_services.workload_mark_submitted(workload=workload, uid=uid, manifest=manifest):
        # Stopped while we were creating it: take the Job back out.
        gw.delete("Job", manifest["metadata"]["name"], namespace=manifest["metadata"]["namespace"])
        return "stopped meanwhile"
    return "submitted"


def _create_or_adopt(gw: Any, obj: dict[str, Any]) -> str:
    """Create obj; when it exists already (a retry), adopt it. Returns its uid."""
    try:
        return gw.create(obj)["metadata"]["uid"]
    except ClusterError as error:
        if not error.already_exists:
            raise
    existing = gw.get(obj["kind"], obj["metadata"]["name"], namespace=obj["metadata"]["namespace"])
    return existing["metadata"]["uid"]


@shared_task(autoretry_for=(TransientClusterError,), retry_backoff=2, retry_backoff_max=60, max_retries=8)
def workload_stop(workload_id: int) -> str:
    """Delete a stopping workload's Job (Kueue drops its Workload with it) and record it stopped."""
    workload = Workload.objects.select_related("project", "stop_requested_by").filter(
        pk=workload_id, status=Status.STOPPING).first()
    if workload is None:
        return "not stopping"
    try:
        gateway().delete("Job", workload.job_name, namespace=workload.project.namespace, propagation="Background")
    except ClusterError as error:
        if error.transient:
            raise TransientClusterError(error.message) from error
        raise
    who = workload.stop_requested_by.get_username() if workload.stop_requested_by else "the portal"
    reason = "IdleTimeout" if workload.status_reason == "IdleTimeout" else "Stopped"
    message = workload.status_message if reason == "IdleTimeout" else f"Stopped by {who}"
    workload_services.workload_mark_stopped(workload=workload, message=message, reason=reason)
    return "stopped"


@shared_task(expires=55)
def workloads_sweep_submitting() -> int:
    """Re-enqueue submissions a broker outage may have lost (the outbox of DESIGN section 2)."""
    stuck = workload_services.workloads_stuck_submitting()
    for workload_id in stuck:
        workload_submit.delay(workload_id)
    return len(stuck)


@shared_task(expires=55)
def notebooks_cull_idle() -> int:
    """Stop notebooks idle past their timeout."""
    return sum(workload_services.notebook_cull(workload=workload) for workload in workload_services.notebooks_idle())


@shared_task
def workload_notify(workload_id: int, status: str) -> bool:
    """One e-mail to the owner about one transition they asked to hear about."""
    workload = Workload.objects.select_related("owner", "project", "node_pool").filter(pk=workload_id).first()
    if workload is None or not workload.owner.email:
        return False
    event = workload.events.filter(to_status=status).order_by("-id").first()
    label = Status(status).label.lower()
    body = [f"Your {workload.kind} workload {workload.name} in {workload.project.name} is {label}.",
            f"GPUs: {workload.gpu_units} x {workload.node_pool.name}"]
    if event and event.message:
        body.append(f"Kueue says: {event.message}")
    # If it waits now (requeued after a preemption, a gang waiting for its pods), say why, as its owner may read it.
    explanation = explain_workloads([workload], viewer=workload.owner)[workload.pk]
    if explanation is not None:
        body.append(f"Why it waits: {explanation.sentence}")
    body.append(f"Details: {settings.PORTAL_BASE_URL}{reverse('workloads:detail', args=[workload.pk])}")
    send_mail(f"[GPU Portal] {workload.name} {label}", "\n".join(body), None, [workload.owner.email])
    return True


@shared_task(expires=30)
def workload_logs_fetch(workload_id: int) -> int:
    """Read the last lines of each pod of the workload and store them for the detail page; returns pods read."""
    workload = Workload.objects.select_related("project").filter(pk=workload_id).first()
    if workload is None or not workload.job_name:
        return 0
    namespace = workload.project.namespace
    gw = gateway()
    try:
        listed = gw.raw_get(f"/api/v1/namespaces/{namespace}/pods",
                            query=[("labelSelector", f"{WORKLOAD_ID_LABEL}={workload.pk}")])
    except ClusterError as error:
        logger.info("pods of workload %s not listed: %s", workload_id, error.message)
        return 0  # the detail page asks again on its next poll
    tails: dict[str, tuple[str, str]] = {}
    for pod in (listed or {}).get("items", []):
        name = pod["metadata"]["name"]
        try:
            text = gw.raw_get(f"/api/v1/namespaces/{namespace}/pods/{name}/log",
                              query=[("tailLines", workload_logs.TAIL_LINES)])
            tails[name] = (text if isinstance(text, str) else "", "")
        except ClusterError as error:
            tails[name] = ("", error.message)
    return workload_logs.workload_log_tails_store(workload_id=workload.pk, tails=tails, at=timezone.now())
