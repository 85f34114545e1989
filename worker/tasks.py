"""Celery tasks: thin, id-based, idempotent. The logic lives in worker modules and app services.

Submit, stop and the org reconcile work off outbox rows (apps.core.intents): each task leases its intents first
(`intent_claim`; another task holding them means `busy`), records failures on them, and the transitions it makes
close them. `intents_sweep` (beat) sends again whatever is past its deadline, so nothing a broker loses stays lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from celery import Task, shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone

from apps.core import intents, metrics, request_ids, sealed
from apps.core.kueue_names import (
    KAI_POD_GROUP_API_VERSION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PROJECT_LABEL,
    REQUEST_ID_ANNOTATION,
    WORKLOAD_ID_LABEL,
)
from apps.core.services import sealed_secret_applied
from apps.core.tasks import enqueue_now
from apps.org import services as org_services
from apps.org.models import (
    BudgetCrossing,
    ImagePullSecret,
    NotificationChannel,
    NotificationDelivery,
    NotificationEvent,
)
from apps.usage import budgets as usage_budgets
from apps.workloads import logs as workload_logs
from apps.workloads import selectors as workload_selectors
from apps.workloads import services as workload_services
from apps.workloads.explain import explain_workloads
from apps.workloads.frameworks import framework_entry
from apps.workloads.manifests import ManifestKind, manifest_kind_of
from apps.workloads.models import Credential, IdlePolicy, Kind, Status, Workload
from apps.workloads.selectors import forecasts_computed_since, preemptions_seen_by, queue_position_label

from . import notifications, utilisation
from .forecast import forecasts_refresh as forecasts_compute_and_store
from .frameworks import framework_manifest, framework_schema_errors
from .gateway import ClusterError, Gateway, gateway
from .kai_status import FINISHED_PHASES
from .kueue_sync import desired_from_database, reconcile
from .manifests import (
    CONTAINER_NAME,
    attachments_of,
    companions,
    gang_pod_name,
    inference_companions,
    inference_object,
    is_kai_gang,
    is_multi_node,
    job_manifest,
    kai_gang_pod,
    kai_gang_pod_group,
    pull_secret,
    user_secret,
)
from .manifests import inference_patch as inference_patch_body
from .notebook_activity import read_server_activity
from .outside_work import stop_target
from .status_map import observe, parse_time

logger = logging.getLogger(__name__)


class TransientClusterError(Exception):
    """The API server is away or overloaded; Celery retries with backoff."""


@shared_task(autoretry_for=(TransientClusterError,), retry_backoff=2, retry_backoff_max=60, max_retries=8,
             retry_jitter=True)
def kueue_sync() -> list[str]:
    """Reconcile Kueue's objects with the organisation; coalesces bursts of org changes into few passes."""
    run = org_services.kueue_sync_claim()
    if run is None:
        return []  # another worker is reconciling; it sees the open requests when it finishes and runs again
    # The requests this pass covers: those committed by now, whose changes the reconcile below reads.
    claim = intents.intent_claim(kind=org_services.KUEUE_SYNC_INTENT, target_id=None)
    started = time.monotonic()
    try:
        result = reconcile(gateway(), desired_from_database())
    except ClusterError as error:
        metrics.RECONCILE_DURATION.observe(time.monotonic() - started)
        described = error.describe()
        org_services.kueue_sync_finish(run=run, changes=[], error=described)
        intents.intent_release(claim, error=described,
                               retry_at=timezone.now() + org_services.KUEUE_SYNC_DEADLINE)
        if error.transient:
            raise TransientClusterError(error.message) from error
        logger.error("kueue sync refused by the API server: %s", error.describe())
        return []
    metrics.RECONCILE_DURATION.observe(time.monotonic() - started)
    metrics.RECONCILE_CHANGES.inc(len(result.changes))
    if result.unsettled:  # done only when a read back shows the cluster as intended: the sweep sends it again
        intents.intent_release(claim, error=" ".join(result.unsettled),
                               retry_at=timezone.now() + org_services.KUEUE_SYNC_DEADLINE)
    else:
        intents.intents_complete(kind=org_services.KUEUE_SYNC_INTENT, target_id=None, outcome="reconciled",
                                 ids=claim.ids)
    again = org_services.kueue_sync_finish(run=run, changes=result.changes, project_errors=result.problems)
    if again or intents.intents_open(kind=org_services.KUEUE_SYNC_INTENT, target_id=None, besides=claim.ids):
        kueue_sync.delay()
    return result.changes


# 404 is not here: a new project's namespace may not be synced yet, so it is worth a retry.
PERMANENT_STATUS = {400, 403, 422}


@shared_task(bind=True, max_retries=6)
def workload_submit(self: Task, workload_id: int) -> str:
    """Create the workload's Job (and a notebook's Service); idempotent through its deterministic name."""
    submit_claim = workload_services.workload_claim_submit(workload_id=workload_id)
    if submit_claim.busy:
        return "busy"  # another task holds it: it finishes, or its lease runs out and the sweep sends it again
    claim, workload = submit_claim.intents, submit_claim.workload
    if workload is None:  # already submitted, stopped, or another worker holds it
        return "not claimed"
    entry = _object_kind(workload)
    inference = workload.kind == Kind.INFERENCE
    problems: list[str] = []  # what the object's schema refuses, for the kinds built here (custom resources)
    if inference:  # a Deployment or LeaderWorkerSet, never queued (docs/architecture.md, Inference services)
        manifest = inference_object(workload, request_id=request_ids.current(), attachments=attachments_of(workload))
        problems = framework_schema_errors(manifest) if is_multi_node(workload) else []
    elif workload.runs_on_framework:
        manifest = framework_manifest(workload, request_id=request_ids.current(), attachments=attachments_of(workload))
        problems = framework_schema_errors(manifest)
    elif entry is not None:  # a manifest: the object prepared at submit, created as it is
        manifest = _with_request_id(dict(workload.manifest or {}), request_ids.current())
    elif is_kai_gang(workload):  # its PodGroup first: the gang's pods follow it (docs/architecture.md)
        manifest = kai_gang_pod_group(workload, request_id=request_ids.current())
    else:
        manifest = job_manifest(workload, request_id=request_ids.current(), attachments=attachments_of(workload))
    if problems:  # checked against its kind's schema before it is sent
        workload_services.workload_mark_rejected(
            workload=workload, message=f"The portal built a {manifest['kind']} its schema refuses: "
                                       f"{' '.join(problems)}")
        metrics.SUBMISSIONS.labels("rejected").inc()
        return "rejected"
    uid = ""  # set once the object itself exists: a companion refused then takes it back
    try:
        gw = gateway()
        if inference:
            uid = _create_or_adopt_in(gw, _serving_path(workload), manifest)
            for companion in inference_companions(workload, uid):
                _create_or_adopt(gw, companion)  # its Service, and the Ingress or HTTPRoute publishing it
        elif entry is not None:
            uid = _create_or_adopt_in(gw, entry.collection_path(workload.project.namespace), manifest)
        else:
            uid = _create_or_adopt(gw, manifest)
        for companion in companions(workload, uid) if entry is None and not inference else []:
            _create_or_adopt(gw, companion)  # a notebook's token, Service and route; a gang's Service
        if is_kai_gang(workload):
            _gang_pods_create(gw, workload, request_id=request_ids.current())
    except ClusterError as error:
        if error.status in PERMANENT_STATUS or not error.transient:
            if uid:
                _take_back(gw, workload)
            workload_services.workload_mark_rejected(workload=workload, message=f"The cluster refused the job: "
                                                                                f"{error.message}")
            metrics.SUBMISSIONS.labels("rejected").inc()
            return "rejected"
        workload_services.workload_release_claim(workload=workload)
        if self.request.retries >= self.max_retries:
            workload_services.workload_mark_submit_failed(
                workload_id=workload_id, message=f"Gave up after {self.request.retries + 1} attempts: {error.message}")
            metrics.SUBMISSIONS.labels("submit_failed").inc()
            return "submit_failed"
        countdown = min(60, 2 ** (self.request.retries + 1))
        # Should the retry's message be lost too, the sweep sends it again once this is past.
        intents.intent_release(claim, error=error.describe(), retry_at=timezone.now() + timedelta(
            seconds=countdown) + workload_services.SUBMIT_DEADLINE)
        metrics.SUBMISSIONS.labels("retry").inc()
        raise self.retry(exc=error, countdown=countdown) from error
    mark = workload_services.workload_mark_deployed if inference else workload_services.workload_mark_submitted
    if not mark(workload=workload, uid=uid, manifest=manifest):
        # Stopped while we were creating it: take the Job back out, and record the stop if nobody has yet.
        deleted = _delete_own(gw, workload)
        _record_deletion(workload_id, deleted)
        metrics.SUBMISSIONS.labels("stopped_meanwhile").inc()
        return "stopped meanwhile"
    metrics.SUBMISSIONS.labels("submitted").inc()
    metrics.SUBMIT_TO_JOB.observe((timezone.now() - workload.created_at).total_seconds())
    return "submitted"


def _take_back(gw: Gateway, workload: Workload) -> None:
    """Delete the object a refused submission created before its companion (a Service, a route) was refused: a row
    marked rejected must leave nothing running that holds GPUs unrecorded."""
    try:
        _delete_own(gw, workload)
    except ClusterError as error:
        logger.warning("workload %s: could not delete what its refused submission created: %s", workload.pk,
                       error.describe())


def _gang_pods_create(gw: Gateway, workload: Workload, *, request_id: str = "",
                      missing: set[int] | None = None) -> int:
    """Create (or adopt, on a retry) the pods of a KAI gang's ranks, all of them or the `missing` ones; how many were
    asked for."""
    attachments = attachments_of(workload)
    indexes = sorted(missing) if missing is not None else range(workload.pods)
    for index in indexes:
        _create_or_adopt(gw, kai_gang_pod(workload, index, request_id=request_id, attachments=attachments))
    return len(indexes)


def _delete_own(gw: Gateway, workload: Workload) -> dict[str, Any] | None:
    """Delete what the portal created for a workload of its own, its pods first (foreground); a KAI gang's pods have
    no owner, so they are deleted by the portal's labels before their PodGroup (its Service goes with that)."""
    if is_kai_gang(workload):
        gw.delete_path(f"/api/v1/namespaces/{workload.project.namespace}/pods", propagation=STOP_PROPAGATION,
                       label_selector=_gang_selector(workload))
    return gw.delete_path(_object_path(workload), propagation=STOP_PROPAGATION)


def _gang_selector(workload: Workload) -> str:
    return f"{MANAGED_BY_LABEL}={MANAGED_BY},{WORKLOAD_ID_LABEL}={workload.pk}"


def _with_request_id(manifest: dict[str, Any], request_id: str) -> dict[str, Any]:
    if not request_id:
        return manifest
    metadata = dict(manifest.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), REQUEST_ID_ANNOTATION: request_id}
    return {**manifest, "metadata": metadata}


def _object_kind(workload: Workload) -> ManifestKind | None:
    """The kind of what the portal creates for a workload of its own, None for its Job: a manifest's kind, or the
    framework's object of a training on one."""
    return framework_entry(workload) if workload.runs_on_framework else manifest_kind_of(workload.kind)


def _object_path(workload: Workload) -> str:
    """The API path of what the portal created for a workload of its own: its Job, or a manifest's or framework's
    object."""
    entry = _object_kind(workload)
    if workload.kind == Kind.INFERENCE and not workload.from_outside:
        return f"{_serving_path(workload)}/{workload.job_name}"
    if not workload.from_outside and is_kai_gang(workload):
        namespace = workload.project.namespace
        return f"/apis/{KAI_POD_GROUP_API_VERSION}/namespaces/{namespace}/podgroups/{workload.job_name}"
    if entry is None:
        return f"/apis/batch/v1/namespaces/{workload.project.namespace}/jobs/{workload.job_name}"
    return f"{entry.collection_path(workload.project.namespace)}/{workload.job_name}"


def _serving_path(workload: Workload) -> str:
    """The collection of what runs an inference service's replicas: Deployments, or LeaderWorkerSets."""
    if is_multi_node(workload):
        return f"/apis/{workload.object_api_version}/namespaces/{workload.project.namespace}/leaderworkersets"
    return f"/apis/apps/v1/namespaces/{workload.project.namespace}/deployments"


@shared_task(autoretry_for=(TransientClusterError,), retry_backoff=2, retry_backoff_max=60, max_retries=8)
def inference_patch(workload_id: int) -> str:
    """Bring an inference service's Deployment (or LeaderWorkerSet) to its row's replicas and image (a scale, or a
    rollout of a new image); the row is the truth, so a repeated or late patch is harmless."""
    claim = intents.intent_claim(kind=workload_services.INFERENCE_PATCH_INTENT, target_id=workload_id)
    if claim.busy:
        return "busy"
    workload = Workload.objects.select_related("project__department", "node_pool", "owner").filter(
        pk=workload_id, kind=Kind.INFERENCE).first()
    if workload is None or workload.status not in {Status.ADMITTED, Status.RUNNING}:
        # Not created yet (the submit builds it from the row as it is then) or gone: nothing to patch.
        intents.intents_complete(kind=workload_services.INFERENCE_PATCH_INTENT, target_id=workload_id,
                                 outcome="nothing to patch", ids=claim.ids)
        return "nothing to patch"
    try:
        gateway().raw_patch(f"{_serving_path(workload)}/{workload.job_name}",
                            inference_patch_body(workload, attachments=attachments_of(workload)))
    except ClusterError as error:
        intents.intent_release(claim, error=error.describe(), retry_at=timezone.now() + STOP_RETRY_AFTER)
        if error.transient:
            raise TransientClusterError(error.message) from error
        raise
    intents.intents_complete(kind=workload_services.INFERENCE_PATCH_INTENT, target_id=workload_id,
                             outcome="patched", ids=claim.ids)
    return "patched"


def _create_or_adopt_in(gw: Any, collection_path: str, obj: dict[str, Any]) -> str:
    """`_create_or_adopt` for an object of any kind, by its collection's path."""
    try:
        return gw.create_in(collection_path, obj)["metadata"]["uid"]
    except ClusterError as error:
        if not error.already_exists:
            raise
    return gw.raw_get(f"{collection_path}/{obj['metadata']['name']}")["metadata"]["uid"]


def _create_or_adopt(gw: Any, obj: dict[str, Any]) -> str:
    """Create obj; when it exists already (a retry), adopt it. Returns its uid."""
    try:
        return gw.create(obj)["metadata"]["uid"]
    except ClusterError as error:
        if not error.already_exists:
            raise
    existing = gw.get(obj["kind"], obj["metadata"]["name"], namespace=obj["metadata"]["namespace"])
    return existing["metadata"]["uid"]


# Foreground: the API marks the Job with the cluster's deletionTimestamp (the time the stop took effect, for the
# GPU-hour ledger) and removes it once its pods are gone.
STOP_PROPAGATION = "Foreground"
STOP_RETRY_AFTER = timedelta(seconds=90)  # past the autoretry's longest backoff: the sweep's turn


@shared_task(autoretry_for=(TransientClusterError,), retry_backoff=2, retry_backoff_max=60, max_retries=8)
def workload_stop(workload_id: int) -> str:
    """Delete a stopping workload's Job (Kueue drops its Workload with it) and record it stopped.

    Also deletes the Job of an already stopped workload whose stop intent is still open: the follow-up recorded when
    a submission was in flight during the stop (apps.workloads.services.workload_stop_finish).
    """
    claim = intents.intent_claim(kind=workload_services.STOP_INTENT, target_id=workload_id)
    if claim.busy:
        return "busy"  # another task holds it: it finishes, or its lease runs out and the sweep sends it again
    workload = Workload.objects.select_related("project").filter(pk=workload_id).first()
    follow_up = workload is not None and workload.status == Status.STOPPED and bool(claim.ids)
    if workload is None or not (workload.status == Status.STOPPING or follow_up):
        intents.intents_complete(kind=workload_services.STOP_INTENT, target_id=workload_id,
                                 outcome="nothing to stop", ids=claim.ids)
        return "not stopping"
    try:
        deleted = _delete_work(workload)
    except ClusterError as error:
        intents.intent_release(claim, error=error.describe(), retry_at=timezone.now() + STOP_RETRY_AFTER)
        if error.transient:
            raise TransientClusterError(error.message) from error
        raise
    if not follow_up:
        _record_deletion(workload_id, deleted)
    intents.intents_complete(kind=workload_services.STOP_INTENT, target_id=workload_id,
                             outcome="deleted again" if follow_up else "stopped", ids=claim.ids)
    return "deleted again" if follow_up else "stopped"


def _delete_work(workload: Workload) -> dict[str, Any] | None:
    """Delete what runs the workload, its pods first (foreground): the portal's Job, or the object that work from
    outside the portal belongs to (docs/architecture.md, Work submitted outside the portal)."""
    if not workload.from_outside:
        return _delete_own(gateway(), workload)
    target = stop_target(namespace=workload.cluster_namespace, api_version=workload.object_api_version,
                         kind=workload.kind, name=workload.object_name)
    if target is None:
        raise ClusterError(400, "BadRequest", f"the portal cannot stop a {workload.get_kind_display()}")
    path, selector = target
    return gateway().delete_path(path, propagation=STOP_PROPAGATION, label_selector=selector)


def _record_deletion(workload_id: int, deleted: dict[str, Any] | None) -> None:
    """Record a stopping workload's end from the object the API answered the delete with: a Job's final state if it
    had finished first, else stopped at the deletion's time (its deletionTimestamp: the cluster's clock, which the
    GPU-hours count by, as for any other kind); stopped at the portal's time when it was gone already."""
    observation = observe(deleted, None) if deleted and deleted.get("kind") == "Job" else None
    if observation is not None:
        workload_services.workload_observe(workload_id=workload_id, observation=observation)
    deleted_at = parse_time(((deleted or {}).get("metadata") or {}).get("deletionTimestamp") or "")
    workload_services.workload_stop_finish(workload_id=workload_id, cluster_at=deleted_at)  # no-op once recorded


# A gang is wanted while it waits or runs: its evicted ranks are made again (a Job would make its pods again too).
GANG_WANTED = frozenset({Status.QUEUED, Status.REQUEUED, Status.PREEMPTED, Status.ADMITTED, Status.RUNNING})
GANG_FINISHED = frozenset({Status.SUCCEEDED, Status.FAILED})
GANG_WAIT = timedelta(seconds=10)  # evicted pods still terminating: looked at again after this


@shared_task(autoretry_for=(TransientClusterError,), retry_backoff=2, retry_backoff_max=60, max_retries=8)
def kai_gang_repair(workload_id: int) -> str:
    """Make a gang's pods on a KAI pool match its row, the portal being the gang's controller (docs/architecture.md,
    The life of a submission): while it is wanted, the ranks KAI evicted (or someone deleted) are made again under
    their names once the old pods are gone, so it waits for KAI again as a Job's would; once it finished or failed,
    its ranks still running are deleted. Submitting and stopping are the submit's and the stop's. Idempotent: the
    names are deterministic, and ranks made while a stop came are taken back (the row is read again after)."""
    kind = workload_services.GANG_REPAIR_INTENT
    claim = intents.intent_claim(kind=kind, target_id=workload_id)
    if claim.busy:
        return "busy"
    workload = Workload.objects.select_related("project", "node_pool", "priority_class", "owner").filter(
        pk=workload_id).first()
    if workload is None or workload.from_outside or not workload.k8s_uid or not is_kai_gang(workload):
        intents.intents_complete(kind=kind, target_id=workload_id, outcome="nothing to repair", ids=claim.ids)
        return "nothing to repair"
    try:
        outcome = _gang_repair(gateway(), workload)
    except ClusterError as error:
        intents.intent_release(claim, error=error.describe(), retry_at=timezone.now() + STOP_RETRY_AFTER)
        if error.transient:
            raise TransientClusterError(error.message) from error
        raise
    if outcome == "waiting":
        intents.intent_release(claim, error="evicted pods are still terminating", retry_at=timezone.now() + GANG_WAIT)
        return outcome
    intents.intents_complete(kind=kind, target_id=workload_id, outcome=outcome, ids=claim.ids)
    return outcome


def _gang_repair(gw: Gateway, workload: Workload) -> str:
    namespace = workload.project.namespace
    pods = gw.list("Pod", namespace=namespace, label_selector=_gang_selector(workload))
    if workload.status in GANG_FINISHED:
        outliving = [pod["metadata"]["name"] for pod in pods if not pod["metadata"].get("deletionTimestamp")
                     and (pod.get("status") or {}).get("phase") not in FINISHED_PHASES]
        for name in outliving:
            gw.delete("Pod", name, namespace=namespace)
        return f"stopped {len(outliving)}"
    if workload.status not in GANG_WANTED:
        return "not wanted"
    try:
        group = gw.get("PodGroup", workload.job_name, namespace=namespace)
    except ClusterError as error:
        if not error.not_found:
            raise
        return "gone"  # the watcher records the gang gone
    if group["metadata"].get("uid") != workload.k8s_uid or group["metadata"].get("deletionTimestamp"):
        return "gone"
    if any(pod["metadata"].get("deletionTimestamp") for pod in pods):
        return "waiting"  # a rank of the same name is still there: made again once it is gone
    present = {pod["metadata"]["name"] for pod in pods}
    missing = {index for index in range(workload.pods) if gang_pod_name(workload, index) not in present}
    if not missing:
        return "complete"
    _gang_pods_create(gw, workload, missing=missing)
    if Workload.objects.filter(pk=workload.pk, status__in=[Status.STOPPING, Status.STOPPED]).exists():
        for index in missing:  # stopped meanwhile: the stop may have deleted the pods before these came
            gw.delete("Pod", gang_pod_name(workload, index), namespace=namespace)
        return "stopped meanwhile"
    return f"made {len(missing)}"


@shared_task(expires=14)
def intents_sweep() -> int:
    """Send again every intent past its deadline (the outbox, apps.core.intents); beat runs it every 15 s."""
    sent = 0
    for task, target_id in intents.intents_claim_due():
        if not enqueue_now(task, *(() if target_id is None else (target_id,))):
            break  # the broker is away: these come due again after their backoff
        sent += 1
    intents.intents_prune()
    return sent


@shared_task(expires=14)
def workload_tallies_fold() -> int:
    """Fold the workload tallies' changes into them (apps.workloads.services.tallies); beat runs it every 10 s, so
    the pages that read the tallies read few changes."""
    return workload_services.workload_tallies_fold()


@shared_task(expires=55)
def notebooks_cull_idle() -> int:
    """Stop notebooks idle past their timeout: first read what each notebook server says of its own activity (through
    the service proxy), then stop those with no sign of use (keep-alive, server activity) for their timeout, then
    those whose GPUs stayed idle under the admin's idle policy."""
    running = workload_selectors.notebooks_running()
    try:
        observed = read_server_activity(gateway(), running)
    except ClusterError as error:
        logger.info("notebook activity not read: %s", error.describe())
        observed = {}  # the cluster is away: decide on what the portal knows (never stop on a guess of activity)
    workload_services.notebook_server_activity_record(observed=observed)
    culled = sum(workload_services.notebook_cull(workload=workload) for workload in workload_selectors.notebooks_idle())
    return culled + sum(workload_services.notebook_cull_gpu_idle(workload=workload)
                        for workload in workload_selectors.notebooks_gpu_idle())


@shared_task(expires=55)
def utilisation_refresh() -> int:
    """Store the GPU utilisation Prometheus reports (chart, idle flags, showback); samples stored, 0 without one."""
    prometheus = utilisation.client()
    if prometheus is None:
        return 0
    try:
        return utilisation.refresh(prometheus).samples
    except utilisation.PrometheusUnavailable as error:
        logger.warning("GPU utilisation not refreshed: %s", error)
        return 0


@shared_task
def workload_idle_notify(workload_id: int) -> bool:
    """One e-mail to the owner: their workload holds GPUs it does not use."""
    workload = Workload.objects.select_related("owner", "project", "node_pool").filter(pk=workload_id).first()
    if workload is None or workload.owner is None or not workload.owner.email:
        return False
    policy = IdlePolicy.current()
    event = workload.events.filter(reason=workload_services.GPU_IDLE_REASON).order_by("-id").first()
    body = [f"Your {workload.kind} workload {workload.name} in {workload.project.name} holds "
            f"{workload.gpu_amount_words} on {workload.node_pool.name}, not being used: "
            f"{event.message if event else f'below {policy.threshold_percent}%'}.",
            "Stop it if you are done, so others can use the cards."]
    if workload.kind == Kind.NOTEBOOK and policy.cull_notebooks:
        body.append(f"Idle notebooks are stopped automatically: this one in {policy.warning_minutes} minutes unless "
                    "you keep it alive from its page.")
    body.append(f"Details: {settings.PORTAL_BASE_URL}{reverse('workloads:detail', args=[workload.pk])}")
    send_mail(f"[GPU Portal] {workload.name} holds idle GPUs", "\n".join(body), None, [workload.owner.email])
    return True


# A change to a queue asks for a refresh this many seconds later, so a burst of changes costs one (worker/forecast.py).
FORECAST_COALESCE_SECONDS = 2
FORECAST_TASK = "worker.tasks.forecasts_refresh"


@shared_task(expires=55)
def forecasts_refresh(requested_at: str | None = None) -> int:
    """Recompute every waiting workload's start forecast; beat runs it every minute and the watcher asks for it when
    a workload moves. A request that a refresh started since has covered is dropped, so bursts coalesce."""
    if requested_at and forecasts_computed_since(at=datetime.fromisoformat(requested_at)):
        return 0
    return forecasts_compute_and_store()


_forecast_asked = {"at": 0.0}
_forecast_asking = threading.Lock()


def forecasts_refresh_soon() -> bool:
    """Ask for a refresh after the coalescing delay (the watcher calls this when a workload's status moved).

    A request sent within the delay has not run yet and will cover this change too, so it is not sent again: a
    burst of changes costs the broker one message per delay, not one per change."""
    with _forecast_asking:
        now = time.monotonic()
        if now - _forecast_asked["at"] < FORECAST_COALESCE_SECONDS:
            return True
        _forecast_asked["at"] = now
    if enqueue_now(FORECAST_TASK, timezone.now().isoformat(), countdown=FORECAST_COALESCE_SECONDS):
        return True
    _forecast_asked["at"] = 0.0  # not sent: the next change asks again
    return False


SECRET_RETRY_AFTER = timedelta(seconds=60)


def _create_or_replace(gw: Any, obj: dict[str, Any]) -> None:
    try:
        gw.create(obj)
        return
    except ClusterError as error:
        if not error.already_exists:
            raise
    existing = gw.get(obj["kind"], obj["metadata"]["name"], namespace=obj["metadata"]["namespace"])
    gw.replace({**obj, "metadata": {**obj["metadata"], "resourceVersion": existing["metadata"]["resourceVersion"]}})


SecretRow = TypeVar("SecretRow", Credential, ImagePullSecret)


def _sync_secret(*, kind: str, target_id: int, row: SecretRow | None,
                 build: Callable[[SecretRow, dict[str, Any]], dict[str, Any]], applied: Callable[..., None]) -> str:
    """Write (or delete) the Secret of a credential or pull secret row; the sealed values are cleared once written."""
    claim = intents.intent_claim(kind=kind, target_id=target_id)
    if claim.busy:
        return "busy"
    if row is None:
        intents.intents_complete(kind=kind, target_id=target_id, outcome="gone", ids=claim.ids)
        return "gone"
    namespace = row.project.namespace
    try:
        if row.deleted_at is not None:
            gateway().delete("Secret", row.secret_name, namespace=namespace)
            type(row).objects.filter(pk=row.pk).delete()
            outcome = "deleted"
        elif row.sealed:
            sealed_text = row.sealed
            try:
                values = sealed.unseal(sealed_text)
            except sealed.SealBroken as error:
                applied(sealed=sealed_text, error=str(error))
                intents.intents_complete(kind=kind, target_id=target_id, outcome="unreadable", ids=claim.ids)
                return "unreadable"
            _create_or_replace(gateway(), build(row, values))
            applied(sealed=sealed_text)
            outcome = "applied"
        else:
            outcome = "nothing to write"
    except ClusterError as error:
        applied(sealed="", error=error.describe())
        intents.intent_release(claim, error=error.describe(), retry_at=timezone.now() + SECRET_RETRY_AFTER)
        return "retry later"  # the sweep sends it again (a new project's namespace may not exist yet)
    intents.intents_complete(kind=kind, target_id=target_id, outcome=outcome, ids=claim.ids)
    return outcome


def _secret_labels(row: Credential | ImagePullSecret) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY, PROJECT_LABEL: row.project.slug}


@shared_task
def credential_sync(credential_id: int) -> str:
    """Write a user's credential into its Kubernetes Secret (or remove it once deleted)."""
    row = Credential.objects.select_related("project").filter(pk=credential_id).first()
    return _sync_secret(
        kind=workload_services.CREDENTIAL_INTENT, target_id=credential_id, row=row,
        build=lambda credential, values: user_secret(name=credential.secret_name,
                                                     namespace=credential.project.namespace, values=values,
                                                     labels=_secret_labels(credential)),
        applied=lambda **kwargs: sealed_secret_applied(model=Credential, pk=credential_id, **kwargs))


@shared_task
def pull_secret_sync(pull_secret_id: int) -> str:
    """Write a project's registry credentials into their dockerconfigjson Secret (or remove it once deleted)."""
    row = ImagePullSecret.objects.select_related("project").filter(pk=pull_secret_id).first()
    return _sync_secret(
        kind=org_services.PULL_SECRET_INTENT, target_id=pull_secret_id, row=row,
        build=lambda secret, values: pull_secret(name=secret.secret_name, namespace=secret.project.namespace,
                                                 registry=values["registry"], username=values["username"],
                                                 password=values["password"], labels=_secret_labels(secret)),
        applied=lambda **kwargs: sealed_secret_applied(model=ImagePullSecret, pk=pull_secret_id, **kwargs))


@shared_task(expires=55)
def budgets_evaluate() -> int:
    """The budget sweep (apps/usage/budgets.py): crossings recorded and notified once, holds set and released."""
    return usage_budgets.budgets_evaluate()


@shared_task
def budget_evaluate(budget_id: int) -> int:
    """The sweep for one budget right after it is created or changed (apps.org.services.budgets): a raise that ends
    the excess releases its hold now, one that does not keeps it, a scope already over a new budget is held now."""
    return usage_budgets.budgets_evaluate(budget_ids=[budget_id])


@shared_task
def budget_notify(crossing_id: int) -> bool:
    """One e-mail to those who look after a budget's scope: it crossed a threshold this period."""
    crossing = BudgetCrossing.objects.select_related("budget__department", "budget__project").filter(
        pk=crossing_id).first()
    if crossing is None:
        return False
    budget = crossing.budget
    recipients = usage_budgets.budget_recipients(budget)
    if not recipients:
        return False
    period = budget.period_text(crossing.period_start)
    spent = format(crossing.spent.normalize(), "f")
    body = [f"{budget.owner} has spent {spent} of its {budget.amount_text()} budget for {period}, crossing "
            f"{crossing.threshold}%."]
    if budget.on_exceed == budget.OnExceed.HOLD_PREEMPTIBLE:
        body.append("When the budget is spent, new preemptible work of its scope waits until the period rolls over "
                    "or the budget is raised; work already running goes on.")
    body.append(f"Budgets: {settings.PORTAL_BASE_URL}{reverse('usage:quota')}")
    send_mail(f"[GPU Portal] {budget.owner} at {crossing.threshold}% of its budget for {period}", "\n".join(body),
              None, recipients)
    return True


@shared_task
def notification_deliver(delivery_id: int) -> str:
    """Send one notification delivery (worker/notifications.py); a failure worth retrying goes back to the outbox
    with exponential backoff, up to the attempts allowed (apps.org.services.notifications)."""
    kind = org_services.NOTIFICATION_INTENT
    claim = intents.intent_claim(kind=kind, target_id=delivery_id)
    if claim.busy:
        return "busy"
    delivery = NotificationDelivery.objects.select_related("channel__user").filter(pk=delivery_id).first()
    if delivery is None or delivery.status != NotificationDelivery.Status.PENDING:
        intents.intents_complete(kind=kind, target_id=delivery_id, outcome="gone" if delivery is None else
                                 delivery.status, ids=claim.ids)
        return "nothing to send"
    if not delivery.channel.enabled and delivery.event != NotificationEvent.TEST:
        org_services.notification_delivery_attempted(delivery_id=delivery_id, delivered=False, final=True,
                                                     status_code=None, error="The channel was turned off.")
        intents.intents_complete(kind=kind, target_id=delivery_id, outcome="disabled", ids=claim.ids)
        return "disabled"
    channel = delivery.channel
    hook = channel.kind != NotificationChannel.Kind.EMAIL
    paused_until = org_services.notification_channel_turn(channel=channel) if hook and (
        delivery.event != NotificationEvent.TEST) else None  # "send test" always tries: it is how one checks
    if paused_until is not None:
        if delivery.created_at < timezone.now() - org_services.NOTIFICATION_GIVE_UP:
            org_services.notification_delivery_attempted(
                delivery_id=delivery_id, delivered=False, final=True, status_code=None,
                error=f"{channel.url_host} has not answered since a day after the event; given up.")
            intents.intents_complete(kind=kind, target_id=delivery_id, outcome="failed", ids=claim.ids)
            return "failed"
        intents.intent_release(claim, error=f"Waiting: {channel.url_host} did not answer; tried again from "
                                            f"{paused_until.isoformat()}.", retry_at=paused_until)
        return "receiver paused"
    attempt = notifications.send(delivery)
    if hook and (attempt.status_code is not None or attempt.retry):
        org_services.notification_channel_reached(channel=channel, answered=attempt.status_code is not None)
    attempts = delivery.attempts + 1
    final = not attempt.delivered and (not attempt.retry or attempts >= org_services.NOTIFICATION_MAX_ATTEMPTS)
    org_services.notification_delivery_attempted(delivery_id=delivery_id, delivered=attempt.delivered, final=final,
                                                 status_code=attempt.status_code, error=attempt.error)
    if attempt.delivered or final:
        outcome = "delivered" if attempt.delivered else "failed"
        intents.intents_complete(kind=kind, target_id=delivery_id, outcome=outcome, ids=claim.ids)
        return outcome
    intents.intent_release(claim, error=attempt.error,
                           retry_at=timezone.now() + org_services.notification_retry_at(attempts))
    return "retry later"


@shared_task
def workload_notify(workload_id: int, status: str) -> bool:
    """One e-mail to the owner about one transition they asked to hear about."""
    workload = Workload.objects.select_related("owner", "project", "node_pool").filter(pk=workload_id).first()
    if workload is None or workload.owner is None or not workload.owner.email:
        return False
    owner = workload.owner
    event = workload.events.filter(to_status=status).order_by("-id").first()
    label = Status(status).label.lower()
    body = [f"Your {workload.kind} workload {workload.name} in {workload.project.name} is {label}.",
            f"GPUs: {workload.gpu_amount_text} x {workload.node_pool.name}"]
    if status == Status.PREEMPTED:
        # The plain sentence of the pages (when, by whom as the owner may see it, why), never Kueue's UIDs and paths.
        found = preemptions_seen_by(workload=workload, user=owner)
        if found:
            body.append(found[-1]["note"].sentence)
    elif event and event.message:
        body.append(f"Kueue says: {event.message}")
    # If it waits now (requeued after a preemption, a gang waiting for its pods), say why, as its owner may read it.
    explanation = explain_workloads([workload], viewer=owner)[workload.pk]
    if explanation is not None:
        body.append(f"Why it waits: {explanation.sentence}")
    position = queue_position_label(workload)
    if position:
        body.append(f"Queue position: {position} (#1 is next)")
    body.append(f"Details: {settings.PORTAL_BASE_URL}{reverse('workloads:detail', args=[workload.pk])}")
    send_mail(f"[GPU Portal] {workload.name} {label}", "\n".join(body), None, [owner.email])
    return True


@shared_task(expires=30)
def workload_logs_fetch(workload_id: int) -> int:
    """Read the last lines of each pod of the workload, and how its main container ended, and store them for the
    detail page and the API; returns pods read."""
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
    tails: dict[str, workload_logs.PodLog] = {}
    for pod in (listed or {}).get("items", []):
        name = pod["metadata"]["name"]
        exit_code, exit_reason = _main_container_exit(pod)
        try:
            text = gw.raw_get(f"/api/v1/namespaces/{namespace}/pods/{name}/log",
                              query=[("tailLines", workload_logs.TAIL_LINES)])
            tails[name] = workload_logs.PodLog(text=text if isinstance(text, str) else "", exit_code=exit_code,
                                               exit_reason=exit_reason)
        except ClusterError as error:
            tails[name] = workload_logs.PodLog(error=error.message, exit_code=exit_code, exit_reason=exit_reason)
    return workload_logs.workload_log_tails_store(workload_id=workload.pk, tails=tails, at=timezone.now())


def _main_container_exit(pod: dict[str, Any]) -> tuple[int | None, str]:
    """(exit code, reason) of the pod's main container once it has terminated (its current state, else the last one
    it restarted from), else (None, "")."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    main = next((status for status in statuses if status.get("name") == CONTAINER_NAME),
                statuses[0] if statuses else {})
    for state in (main.get("state"), main.get("lastState")):
        terminated = (state or {}).get("terminated")
        if terminated and terminated.get("exitCode") is not None:
            return int(terminated["exitCode"]), str(terminated.get("reason") or "")
    return None, ""
