"""Inference services: a model server as a Deployment on a serving pool (a LeaderWorkerSet when a replica spans
several pods), never queued and never preempted, held to its project's serving reservation on that pool
(docs/architecture.md, Inference services).

The reservation is checked against every live service of the project on the pool, with the reservation's row
locked, so two submits (or scale-ups) at once cannot both take its last units. Scaling and a new image are recorded
like a submission: the row and its audit row first, then an intent the worker carries to the Deployment.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Sum

from apps.accounts import access
from apps.accounts.access import Action, can
from apps.core import intents, kueue_names
from apps.core.actors import Actor
from apps.core.audit import audit_record
from apps.org.models import NodePool, Project, ServingReservation
from apps.workloads.models import LIVE_STATUSES, Kind, Origin, Status, Workload
from apps.workloads.selectors import serving_services, serving_units
from apps.workloads.signals import quota_units_changed

from .submissions import _earlier_submission
from .transitions import SUBMIT_DEADLINE, SUBMIT_INTENT, SUBMIT_TASK, _event, _transition

INFERENCE_PATCH_INTENT = "workload.inference_patch"
INFERENCE_PATCH_TASK = "worker.tasks.inference_patch"
DEFAULT_SERVING_PORT = 8000  # vLLM's
DEPLOYMENT_API_VERSION = "apps/v1"
LEADERWORKERSET_API_VERSION = "leaderworkerset.x-k8s.io/v1"  # a replica of several pods: one leader, the rest workers


def serving_object_kind(workload: Workload) -> str:
    """What runs an inference service's replicas, by the API version recorded at submit."""
    return "LeaderWorkerSet" if workload.object_api_version == LEADERWORKERSET_API_VERSION else "Deployment"


def serving_units_in_use(*, project: Project, node_pool: NodePool, exclude: Workload | None = None) -> int:
    """Units the project's live inference services hold on the pool (replicas x pods x GPUs each)."""
    rows = serving_services().filter(project=project, node_pool=node_pool)
    if exclude is not None:
        rows = rows.exclude(pk=exclude.pk)
    return rows.aggregate(total=Sum(serving_units()))["total"] or 0


def _reservation_errors(workload: Workload, *, field: str) -> dict[str, list[str]]:
    """Whether `workload` fits its project's reservation on its pool beside the project's other live services;
    the refusal is on `field` (what the caller asked to change). Locks the reservation row."""
    pool, project = workload.node_pool, workload.project
    if not pool.serving:
        return {"node_pool": [f"{pool.slug} is not a serving pool; inference services run on serving pools only."]}
    reservation = ServingReservation.objects.select_for_update().filter(project=project, node_pool=pool).first()
    if reservation is None:
        return {"node_pool": [f"{project.slug} has no serving reservation on {pool.slug}; ask an admin for one."]}
    others = serving_units_in_use(project=project, node_pool=pool, exclude=workload if workload.pk else None)
    wanted = workload.gpu_units
    if others + wanted > reservation.cards:
        room = max(0, reservation.cards - others)
        return {field: [f"{project.slug} reserves {reservation.cards} units of {pool.slug} for serving and its other "
                        f"services hold {others}, so this one can have at most {room}; it asks for {wanted} "
                        f"({workload.replicas} replicas x {workload.pods} pods x {workload.gpus} GPUs)."]}
    return {}


def _require_submit(actor: Actor, project: Project) -> None:
    if not can(actor, Action.SUBMIT, project):
        raise PermissionDenied("You may not submit work in this project.")


_REQUIRED = frozenset({"project", "node_pool", "name", "image", "gpus", "model_label", "data_class"})
_DEFAULTS: dict[str, Any] = {"replicas": 1, "pods": 1, "serving_port": None, "command": None, "args": None,
                             "env": None, "cpu": 1, "memory_gib": 8}
# Stand-ins for values a check does not know (never saved): the checks that need them are left out.
_STAND_INS: dict[str, Any] = {"name": "draft", "image": "draft", "gpus": 1, "model_label": "draft",
                              "data_class": "draft"}


def _inference_draft(*, actor: Actor, values: dict[str, Any],
                     unknown: set[str]) -> tuple[Workload, dict[str, list[str]]]:
    """The unsaved service for `values` and every refusal of it; checks that need a field in `unknown` are left out.
    Run inside a transaction: the reservation's row is locked while its room is counted."""
    if extra := set(values) - _REQUIRED - set(_DEFAULTS):
        raise TypeError(f"inference services have no {', '.join(sorted(extra))}")
    known = {**_DEFAULTS, **{name: value for name, value in values.items() if name not in unknown}}
    unknown = unknown | (_REQUIRED - set(known))
    project, node_pool = known.get("project"), known.get("node_pool")
    if project is not None:
        _require_submit(actor, project)
    serving_port = known["serving_port"]
    workload = Workload(
        project=project, owner=actor, kind=Kind.INFERENCE, node_pool=node_pool,
        **{name: known.get(name, _STAND_INS[name]) for name in ("name", "image", "gpus", "model_label", "data_class")},
        pods=known["pods"], replicas=known["replicas"],
        serving_port=DEFAULT_SERVING_PORT if serving_port is None else serving_port,
        command=known["command"] or [], args=known["args"] or [], env=known["env"] or [],
        cpu=Decimal(str(known["cpu"])), memory_gib=Decimal(str(known["memory_gib"])), preemptible=False,
        object_api_version=LEADERWORKERSET_API_VERSION if known["pods"] != 1 else DEPLOYMENT_API_VERSION,
    )
    errors: dict[str, list[str]] = {}
    try:
        workload.full_clean(exclude=["owner", "project", "node_pool", "priority_class", "kueue_uid", *errors,
                                     *unknown])
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if project is not None and node_pool is not None and not {"gpus", "replicas", "pods"} & (set(errors) | unknown):
        for key, messages in _reservation_errors(workload, field="replicas").items():
            errors.setdefault(key, []).extend(messages)
    return workload, errors


def inference_check(*, actor: Actor, unknown: Iterable[str], **known: Any) -> None:
    """Every refusal `inference_submit` would give, as far as the fields' values are known (as `workload_check`):
    the form calls it when some fields failed their own checks, so one answer shows them all. Records nothing."""
    with transaction.atomic():
        _, errors = _inference_draft(actor=actor, values=known, unknown=set(unknown))
    if errors:
        raise ValidationError(errors)


def inference_submit(*, actor: Actor, **fields: Any) -> Workload:
    """Record an inference service (every refusal at once); the worker creates its Deployment (a LeaderWorkerSet of
    `pods`-pod groups when `pods` > 1) and Service after commit, named after the row's id."""
    workload, _ = inference_submit_once(actor=actor, submission_key=None, **fields)
    return workload


def inference_submit_once(*, actor: Actor, submission_key: str | None, submission_digest: str = "",
                          **fields: Any) -> tuple[Workload, bool]:
    """`inference_submit`, once per `submission_key` (the form's one-time token, an API Idempotency-Key), as
    `workload_submit_once`: a repeat answers the first service and records nothing. Returns the service and whether
    this call created it."""
    if submission_key and (earlier := _earlier_submission(actor, submission_key, submission_digest)):
        return earlier, False
    try:
        with transaction.atomic():
            workload, errors = _inference_draft(actor=actor, values=fields, unknown=set())
            if errors:
                raise ValidationError(errors)
            workload.submission_key, workload.submission_digest = submission_key or "", submission_digest
            workload.save()
            workload.job_name = workload.object_name = kueue_names.job_name(workload.pk)
            workload.save(update_fields=["job_name", "object_name"])
            pool = workload.node_pool
            _event(workload, from_status="", to_status=Status.SUBMITTING, reason="Submitted",
                   message=f"Submitted as a {serving_object_kind(workload)} of {workload.replicas}"
                           + (f" groups of {workload.pods} pods" if workload.pods > 1 else "")
                           + f" on {pool.slug} (serving: never queued)",
                   actor=actor)
            intents.intent_record(kind=SUBMIT_INTENT, task=SUBMIT_TASK, target_id=workload.pk,
                                  deadline=SUBMIT_DEADLINE)
            audit_record(actor=actor, action="workload.submit", obj=workload, before=None,
                         after={"name": workload.name, "kind": Kind.INFERENCE, "image": workload.image,
                                "node_pool_id": pool.pk, "gpus": workload.gpus, "pods": workload.pods,
                                "replicas": workload.replicas, "serving_port": workload.serving_port},
                         project=workload.project)
    except IntegrityError:
        # The same key committed meanwhile (a double click racing itself): that one is the submission.
        if submission_key and (earlier := _earlier_submission(actor, submission_key, submission_digest)):
            return earlier, False
        raise
    return workload, True


_CHANGEABLE = {"replicas", "image"}


def inference_update(*, actor: Actor, workload: Workload, **changes: Any) -> Workload:
    """Scale a live inference service (`replicas`) or roll it to a new `image`, in one audited change; the worker
    patches the Deployment, which replaces its pods a few at a time. A scale-up must fit the reservation."""
    if not access.can_stop_workload(actor, workload):
        raise PermissionDenied("You may not change this inference service.")
    errors: dict[str, list[str]] = {}
    if unknown := sorted(set(changes) - _CHANGEABLE):
        errors["non_field_errors"] = [f"Only replicas and image change here, not {', '.join(unknown)}."]
    with transaction.atomic():
        current = Workload.objects.select_for_update().select_related("project", "node_pool").get(pk=workload.pk)
        if current.kind != Kind.INFERENCE or current.origin != Origin.PORTAL:
            raise ValidationError("Only the portal's inference services are scaled or updated here.")
        if current.status not in LIVE_STATUSES or current.status == Status.STOPPING:
            raise ValidationError(f"This service is {current.get_status_display().lower()}; there is nothing to "
                                  "change.")
        before: dict[str, Any] = {"replicas": current.replicas, "image": current.image}
        for key in _CHANGEABLE & set(changes):
            setattr(current, key, changes[key])
        try:
            current.full_clean(exclude=["owner", "project", "node_pool", "priority_class", "kueue_uid",
                                        *(set(_CHANGEABLE) - set(changes))])
        except ValidationError as exc:
            errors.update(exc.message_dict)
        if "replicas" not in errors and current.replicas > before["replicas"]:
            errors.update(_reservation_errors(current, field="replicas"))
        if errors:
            raise ValidationError(errors)
        after = {"replicas": current.replicas, "image": current.image}
        if after == before:
            return current
        Workload.objects.filter(pk=current.pk).update(**after)
        what = " and ".join(f"{key} {before[key]} -> {after[key]}" for key in sorted(after)
                            if after[key] != before[key])
        _event(current, from_status=current.status, to_status=current.status, reason="Updated",
               message=f"{actor.get_username()} changed {what}", actor=actor)
        audit_record(actor=actor, action="workload.inference_update", obj=current, before=before, after=after,
                     project=current.project)
        intents.intent_record(kind=INFERENCE_PATCH_INTENT, task=INFERENCE_PATCH_TASK, target_id=current.pk,
                              deadline=SUBMIT_DEADLINE)
    return current


REPLICAS_CHANGED = "ReadyReplicasChanged"


def inference_observe(*, workload_id: int, uid: str, ready: int, replicas: int, updated: int, rolled_out: bool,
                      at: datetime) -> bool:
    """Mirror what an inference service's Deployment (or LeaderWorkerSet: a replica is a group of `pods` pods, ready
    when all are) says: its ready replicas, running from the first one ready, and the GPU-hour ledger, which counts
    the GPUs of the ready replicas (ready x pods x GPUs): each change of their number closes the
    open stretch at `at` and opens one with the new count (none while no replica is ready; docs/architecture.md,
    Inference services). A row still submitting adopts the Deployment (`uid`): its status may be seen before the
    worker that created it records it. Idempotent: the same count again writes nothing. False when nothing changed."""
    with transaction.atomic():
        row = Workload.objects.select_for_update().select_related("project", "node_pool").filter(
            pk=workload_id, kind=Kind.INFERENCE, origin=Origin.PORTAL).first()
        if row is not None and row.status == Status.SUBMITTING and _transition(
                row, expected=[Status.SUBMITTING], to_status=Status.ADMITTED, reason="Deployed",
                message=f"{serving_object_kind(row)} {row.job_name} seen in {row.project.namespace}; serving pools "
                        "have no queue",
                k8s_uid=uid, submitted_at=at, admitted_at=at):
            row.refresh_from_db()
        if row is None or row.status not in {Status.ADMITTED, Status.RUNNING}:
            return False  # not deployed yet (the worker marks it), or stopping/stopped: the stop closes the stretch
        message = (f"{ready} of {row.replicas} replicas ready" +
                   ("" if rolled_out else f"; rolling out ({updated} of {replicas} replicas updated)"))
        changed = (row.ready_replicas or 0) != ready
        if row.status == Status.ADMITTED and ready >= 1:
            _transition(row, expected=[Status.ADMITTED], to_status=Status.RUNNING, reason="ReplicaReady",
                        message=message, started_at=at, ready_replicas=ready)
        elif changed or row.status_message != message:
            Workload.objects.filter(pk=row.pk).update(ready_replicas=ready, status_message=message)
        else:
            return False
        if changed:
            quota_units_changed.send(sender=Workload, workload=row, at=at, units=ready * row.pods * row.gpus,
                                     reason=REPLICAS_CHANGED)
    return True
