"""Writes to workloads. Users submit and stop; the worker and the watcher move the status along.

Every status change goes through `_transition`, which is a conditional UPDATE on the expected current status (so
two processes can never both move the same workload) and writes the WorkloadEvent in the same transaction.

What users ask of the cluster is an outbox row (apps.core.intents) recorded with their action: a submission records
a `workload.submit` intent, a stop (the user's, or the idle-notebook cull) a `workload.stop` intent. `_transition`
closes them in the transition that leaves `submitting` or `stopping`, whoever makes it: the worker, or the watcher
when the cluster got there first (a Job that finished before its stop took effect, a Job already deleted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery
from django.utils import timezone

from apps.accounts import access
from apps.accounts.access import Action, can
from apps.accounts.models import NotificationPreference
from apps.core import intents, kueue_names
from apps.core.audit import audit_record
from apps.core.sealed import seal
from apps.core.services import lock_for_transaction, version_check
from apps.core.tasks import enqueue_on_commit
from apps.org.models import DataSource, NodePool, PriorityClass, Project, Quota
from apps.org.services import quota_guard

from .models import (
    FORECAST_RECORD_DAYS,
    HOLDING_STATUSES,
    LIVE_STATUSES,
    PREEMPTED_STATUSES,
    QUEUED_STATUSES,
    Credential,
    ForecastRecord,
    IdlePolicy,
    Kind,
    Status,
    Workload,
    WorkloadEvent,
    WorkloadForecast,
    WorkloadTemplate,
    WorkloadUtilisation,
)
from .selectors import default_priority_class
from .signals import quota_held, quota_released
from .validation import attachments_errors, env_errors, fits_errors, non_preemptible_units_held, shape_errors

SUBMIT_TASK = "worker.tasks.workload_submit"
STOP_TASK = "worker.tasks.workload_stop"
SUBMIT_INTENT = "workload.submit"
STOP_INTENT = "workload.stop"
# A claim older than this belonged to a task Celery has killed (it outlives the hard time limit).
SUBMIT_CLAIM_TIMEOUT = intents.lease()
SUBMIT_DEADLINE = timedelta(seconds=30)  # not submitted by then: the sweep sends the task again
STOP_DEADLINE = timedelta(seconds=30)


def _event(workload: Workload, *, from_status: str, to_status: str, reason: str = "", message: str = "",
           actor: Any = None, at: datetime | None = None, cluster_at: datetime | None = None,
           details: dict[str, Any] | None = None) -> WorkloadEvent:
    """Events are stamped with the portal's clock (their order) and, when known, the cluster's (their truth)."""
    return WorkloadEvent.objects.create(
        workload=workload, at=at or timezone.now(), cluster_at=cluster_at, from_status=from_status,
        to_status=to_status, reason=reason, message=message, details=details or {},
        actor=actor if getattr(actor, "is_authenticated", False) else None,
    )


def _transition(workload: Workload, *, expected: Iterable[str], to_status: str, reason: str = "", message: str = "",
                actor: Any = None, at: datetime | None = None, cluster_at: datetime | None = None,
                **fields: Any) -> bool:
    """Move the workload to `to_status` if it is still in one of `expected`; False when someone moved it first."""
    with transaction.atomic():
        current = Workload.objects.select_for_update().filter(pk=workload.pk, status__in=list(expected)).first()
        if current is None:
            return False
        updated = {"status": to_status, "status_reason": reason, "status_message": message, **fields}
        Workload.objects.filter(pk=workload.pk).update(**updated)
        _event(current, from_status=current.status, to_status=to_status, reason=reason, message=message,
               actor=actor, at=at, cluster_at=cluster_at)
        _close_intents(current.status, to_status, workload.pk)
    for name, value in updated.items():
        setattr(workload, name, value)
    return True


def _close_intents(from_status: str, to_status: str, workload_id: int) -> None:
    """Leaving `submitting` or `stopping` is what their intents asked for, or the sign they never can be done."""
    if from_status == to_status:
        return
    if from_status == Status.SUBMITTING:
        intents.intents_complete(kind=SUBMIT_INTENT, target_id=workload_id, outcome=to_status)
    elif from_status == Status.STOPPING:
        intents.intents_complete(kind=STOP_INTENT, target_id=workload_id, outcome=to_status)


def _record_stop(workload: Workload, *, deadline: timedelta = STOP_DEADLINE, send: bool = True) -> None:
    intents.intent_record(kind=STOP_INTENT, task=STOP_TASK, target_id=workload.pk, deadline=deadline, send=send)


# --- what users do -----------------------------------------------------------------------------------------------


def workload_submit(*, actor: Any, **fields: Any) -> Workload:
    """Validate (the fields of `workload_validate`) and record a submission; the worker creates the Job after commit."""
    workload, _ = workload_submit_once(actor=actor, submission_key=None, **fields)
    return workload


class SubmissionKeyReused(ValidationError):
    """An idempotency key sent again with a different request: refused, since it names another submission."""


def _earlier_submission(actor: Any, submission_key: str, submission_digest: str) -> Workload | None:
    earlier = Workload.objects.filter(owner=actor, submission_key=submission_key).first()
    if earlier is not None and submission_digest and earlier.submission_digest != submission_digest:
        raise SubmissionKeyReused(
            f"This Idempotency-Key was used for another request (workload {earlier.pk}, {earlier.name}); "
            "nothing was submitted. Send a new key with a new submission.")
    return earlier


def workload_submit_once(*, actor: Any, submission_key: str | None, submission_digest: str = "",
                         **fields: Any) -> tuple[Workload, bool]:
    """`workload_submit`, once per `submission_key` (a submit form's one-time token, an API Idempotency-Key; unique
    per owner): a repeat answers the first workload and records nothing (one row, one intent). With a
    `submission_digest` (of the API request), a repeat with another digest raises SubmissionKeyReused. Returns the
    workload and whether this call created it."""
    if submission_key and (earlier := _earlier_submission(actor, submission_key, submission_digest)):
        return earlier, False
    workload = workload_validate(actor=actor, **fields)
    workload.submission_key, workload.submission_digest = submission_key or "", submission_digest
    project = workload.project
    try:
        with transaction.atomic():
            workload.save()
            workload.job_name = kueue_names.job_name(workload.pk)
            workload.save(update_fields=["job_name"])
            workload.data_sources.set(workload.chosen_data_sources)
            workload.credentials.set(workload.chosen_credentials)
            _event(workload, from_status="", to_status=Status.SUBMITTING, reason="Submitted",
                   message=f"Submitted to the {workload.queue_name} queue of {project.namespace}", actor=actor)
            intents.intent_record(kind=SUBMIT_INTENT, task=SUBMIT_TASK, target_id=workload.pk,
                                  deadline=SUBMIT_DEADLINE)
    except IntegrityError:
        # The same key committed meanwhile (a double click racing itself): that one is the submission.
        if submission_key and (earlier := _earlier_submission(actor, submission_key, submission_digest)):
            return earlier, False
        raise
    return workload, True


def workload_validate(
    *,
    actor: Any,
    project: Project,
    kind: str,
    name: str,
    image: str,
    node_pool: NodePool,
    gpus: int,
    model_label: str,
    data_class: str,
    command: list[str] | None = None,
    args: list[str] | None = None,
    env: list[dict[str, str]] | None = None,
    cpu: Decimal | int | str = 1,
    memory_gib: Decimal | int | str = 8,
    pods: int = 1,
    completions: int = 1,
    parallelism: int = 1,
    priority_class: PriorityClass | None = None,
    preemptible: bool | None = None,
    max_runtime_seconds: int | None = None,
    notebook_idle_timeout_minutes: int | None = None,
    notebook_port: int | None = None,
    shm_gib: Decimal | int | str | None = None,
    data_sources: Iterable[DataSource] | None = None,
    credentials: Iterable[Credential] | None = None,
    resubmitted_from: Workload | None = None,
) -> Workload:
    """Every check `workload_submit` makes, without saving or enqueueing: the unsaved row (the forms' live check).
    Raises every refusal at once (field -> messages)."""
    values = {
        "project": project, "kind": kind, "name": name, "image": image, "node_pool": node_pool, "gpus": gpus,
        "model_label": model_label, "data_class": data_class, "command": command, "args": args, "env": env,
        "cpu": cpu, "memory_gib": memory_gib, "pods": pods, "completions": completions, "parallelism": parallelism,
        "priority_class": priority_class, "preemptible": preemptible, "max_runtime_seconds": max_runtime_seconds,
        "notebook_idle_timeout_minutes": notebook_idle_timeout_minutes, "notebook_port": notebook_port,
        "shm_gib": shm_gib, "data_sources": data_sources, "credentials": credentials,
        "resubmitted_from": resubmitted_from,
    }
    workload, errors = _workload_draft(actor=actor, values=values, unknown=set())
    if errors:
        raise ValidationError(errors)
    return workload


def workload_check(*, actor: Any, unknown: Iterable[str], **known: Any) -> None:
    """Every refusal `workload_submit` would give, as far as the fields' values are known: the forms and the API
    call this when some fields failed their own checks (`unknown`: the service's names of those fields), so one
    answer shows those fields' errors and every refusal of the others. Raises them all; None when there is none.

    The checks that need an unknown value are left out; a field neither known nor unknown takes its default.
    """
    values = {name: value for name, value in known.items() if name in _WORKLOAD_FIELDS}
    _, errors = _workload_draft(actor=actor, values=values, unknown=set(unknown) | (_REQUIRED - set(values)))
    if errors:
        raise ValidationError(errors)


_REQUIRED = frozenset({"project", "kind", "name", "image", "node_pool", "gpus", "model_label", "data_class"})
_DEFAULTS: dict[str, Any] = {
    "command": None, "args": None, "env": None, "cpu": 1, "memory_gib": 8, "pods": 1, "completions": 1,
    "parallelism": 1, "priority_class": None, "preemptible": None, "max_runtime_seconds": None,
    "notebook_idle_timeout_minutes": None, "notebook_port": None, "shm_gib": None, "data_sources": None,
    "credentials": None, "resubmitted_from": None,
}
_WORKLOAD_FIELDS = _REQUIRED | set(_DEFAULTS)
# The sizes that decide how many units a workload holds, by kind.
_UNIT_FIELDS = {Kind.TRAINING: {"gpus", "pods"}, Kind.BATCH: {"gpus", "completions", "parallelism"},
                Kind.NOTEBOOK: {"gpus"}}
# The fields only one kind has: another kind given one (other than its default) is refused, not silently dropped.
_KIND_ONLY_FIELDS = {"pods": Kind.TRAINING, "completions": Kind.BATCH, "parallelism": Kind.BATCH,
                     "notebook_idle_timeout_minutes": Kind.NOTEBOOK, "notebook_port": Kind.NOTEBOOK}


def _workload_draft(*, actor: Any, values: dict[str, Any], unknown: set[str]) -> tuple[Workload, dict[str, list[str]]]:
    """The unsaved row for `values` and every refusal of it; checks that need a field in `unknown` are left out."""
    values = {**_DEFAULTS, **{name: value for name, value in values.items() if name not in unknown}}
    project, kind, node_pool = values.get("project"), values.get("kind"), values.get("node_pool")
    if project is not None and not can(actor, Action.SUBMIT, project):
        raise PermissionDenied("You may not submit work in this project.")
    if kind not in Kind.values:
        raise ValidationError({"kind": f"Choose one of: {', '.join(Kind.values)}."})
    errors: dict[str, list[str]] = {
        name: [f"Only {Kind(owner).label.lower()} workloads have this; leave it out of a {kind} workload."]
        for name, owner in _KIND_ONLY_FIELDS.items()
        if owner != kind and name not in unknown and values[name] != _DEFAULTS[name]}
    priority_class, preemptible = values["priority_class"], values["preemptible"]
    if preemptible is None:
        preemptible = priority_class.preemptible if priority_class else True
    if priority_class is None and project is not None and "priority_class" not in unknown:
        priority_class = default_priority_class(project=project, preemptible=preemptible)
        if priority_class is None:
            errors["priority_class"] = ["No priority class exists yet; ask an admin to create one."]
    notebook_port, idle_minutes = values["notebook_port"], values["notebook_idle_timeout_minutes"]
    if kind == Kind.NOTEBOOK:  # defaults only for what was not given: the model refuses port 0 (not 8888)
        notebook_port = 8888 if notebook_port is None else notebook_port
        idle_minutes = 120 if idle_minutes is None else idle_minutes
    pods, completions, parallelism = values["pods"], values["completions"], values["parallelism"]
    workload = Workload(
        project=project, owner=actor, kind=kind, name=values.get("name", ""), image=values.get("image", ""),
        command=values["command"] or [], args=values["args"] or [], env=values["env"] or [], node_pool=node_pool,
        gpus=values.get("gpus", 0), cpu=Decimal(str(values["cpu"])), memory_gib=Decimal(str(values["memory_gib"])),
        pods=pods if kind == Kind.TRAINING else 1,
        completions=completions if kind == Kind.BATCH else 1, parallelism=parallelism if kind == Kind.BATCH else 1,
        priority_class=priority_class, preemptible=preemptible, max_runtime_seconds=values["max_runtime_seconds"],
        model_label=values.get("model_label", ""), data_class=values.get("data_class", ""),
        notebook_idle_timeout_minutes=idle_minutes if kind == Kind.NOTEBOOK else None,
        notebook_port=notebook_port if kind == Kind.NOTEBOOK else None, resubmitted_from=values["resubmitted_from"],
        shm_gib=None if values["shm_gib"] in (None, "") else Decimal(str(values["shm_gib"])),
    )
    workload.chosen_data_sources = list(values["data_sources"] or [])
    workload.chosen_credentials = list(values["credentials"] or [])
    shape: dict[str, Any] = {"kind": kind, "command": workload.command, "args": workload.args, "env": workload.env,
             **{name: values[name] for name in ("name", "image", "model_label", "data_class", "pods", "completions",
                                                 "parallelism") if name in values}}
    errors.update(shape_errors(shape))
    for name, messages in attachments_errors(
            project=project, owner=actor, data_sources=workload.chosen_data_sources,
            credentials=workload.chosen_credentials, shm_gib=None if "shm_gib" in unknown else workload.shm_gib,
            memory_gib=None if "memory_gib" in unknown else workload.memory_gib).items():
        errors.setdefault(name, []).extend(messages)
    try:
        workload.full_clean(exclude=["owner", "project", "node_pool", "priority_class", *unknown, *errors])
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            errors.setdefault(name, []).extend(messages)
    if project is not None and node_pool is not None:
        sizes_known = not (_UNIT_FIELDS[Kind(kind)] & unknown)
        for name, messages in fits_errors(
                project=project, pool=node_pool, units=workload.gpu_units if sizes_known else None,
                gpus=None if "gpus" in unknown else workload.gpus, preemptible=preemptible,
                cpu=None if "cpu" in unknown else workload.cpu,
                memory_gib=None if "memory_gib" in unknown else workload.memory_gib,
                pod_count=workload.pod_count if sizes_known else None).items():
            errors.setdefault(name, []).extend(messages)
    return workload, errors


def workload_stop(*, actor: Any, workload: Workload) -> Workload:
    """A researcher stops their own work, a team lead anything in scope; the worker deletes the Job."""
    if not access.can_stop_workload(actor, workload):
        raise PermissionDenied("You may not stop this workload.")
    own = access.stops_own_workload(actor, workload)
    if workload.status not in LIVE_STATUSES or workload.status == Status.STOPPING:
        raise ValidationError(f"This workload is {workload.get_status_display().lower()}; there is nothing to stop.")
    with transaction.atomic():
        if not _transition(workload, expected=LIVE_STATUSES - {Status.STOPPING}, to_status=Status.STOPPING,
                           reason="StopRequested", message=f"Stop requested by {actor.get_username()}", actor=actor,
                           stop_requested_by=actor):
            raise ValidationError("This workload changed meanwhile; reload and try again.")
        if not own:
            audit_record(actor=actor, action="workload.stop", obj=workload, before={"status": "live"},
                         after={"status": Status.STOPPING}, project=workload.project)
        _record_stop(workload)
    return workload


BULK_STOP_LIMIT = 200


def workloads_stop(*, actor: Any, workloads: Sequence[Workload]) -> list[Workload]:
    """Stop several workloads at once, all or nothing (the list's bulk stop, the API's `workloads/stop/`).

    Refused whole, with every offending workload named, when the actor may not stop one of them (403) or one has
    nothing to stop (400); then nothing changes. Each stop is `workload_stop`'s, audit row included.
    """
    forbidden = [w.name for w in workloads if not access.can_stop_workload(actor, w)]
    if forbidden:
        raise PermissionDenied(f"You may not stop {', '.join(forbidden)}; nothing was stopped.")
    if not workloads:
        raise ValidationError("Choose at least one workload to stop.")
    if len(workloads) > BULK_STOP_LIMIT:
        raise ValidationError(f"Stop at most {BULK_STOP_LIMIT} workloads at once; nothing was stopped.")
    finished = [w.name for w in workloads if w.status not in LIVE_STATUSES or w.status == Status.STOPPING]
    if finished:
        raise ValidationError(f"Nothing to stop in {', '.join(finished)} (finished or stopping already); nothing "
                              "was stopped.")
    with transaction.atomic():
        for workload in sorted(workloads, key=lambda w: w.pk):  # rows locked in one order: no deadlock
            workload_stop(actor=actor, workload=workload)
    return list(workloads)


def workload_touch(*, actor: Any, workload: Workload) -> None:
    """The owner is still using a notebook: push its idle deadline back."""
    if not access.can_keep_alive(actor, workload):
        raise PermissionDenied("Only the owner can keep a notebook alive.")
    Workload.objects.filter(pk=workload.pk).update(last_activity_at=timezone.now())


CREDENTIAL_INTENT = "credential.sync"
CREDENTIAL_TASK = "worker.tasks.credential_sync"
CREDENTIAL_DEADLINE = timedelta(seconds=60)
MAX_CREDENTIAL_KEYS = 32
MAX_CREDENTIAL_VALUE = 16_384


def _credential_values_errors(values: Any) -> list[str]:
    if not isinstance(values, dict) or not values:
        return ["Give at least one NAME=value pair."]
    if len(values) > MAX_CREDENTIAL_KEYS:
        return [f"At most {MAX_CREDENTIAL_KEYS} keys in one credential."]
    errors = env_errors([{"name": key, "value": value} for key, value in values.items()
                         if isinstance(key, str) and isinstance(value, str)])
    if any(not isinstance(value, str) or not value or len(value) > MAX_CREDENTIAL_VALUE for value in values.values()):
        errors.append(f"Every key needs a value of at most {MAX_CREDENTIAL_VALUE} characters.")
    return errors


def credential_create(*, actor: Any, project: Project, name: str, values: dict[str, str]) -> Credential:
    """A user's secret in a project. Only the name and the keys are kept in clear; the values are sealed until the
    worker writes the Kubernetes Secret, then cleared (they are never shown again, nor audited)."""
    if not can(actor, Action.SUBMIT, project):
        raise PermissionDenied("You may not submit work in this project, so you cannot store credentials there.")
    credential = Credential(owner=actor, project=project, name=name, keys=sorted(values) if isinstance(
        values, dict) else [])
    errors: dict[str, list[str]] = {}
    try:
        credential.full_clean()
    except ValidationError as exc:
        errors = exc.message_dict
    if messages := _credential_values_errors(values):
        errors["values"] = messages
    if errors:
        raise ValidationError(errors)
    credential.sealed = seal(values)
    with transaction.atomic():
        credential.save()
        audit_record(actor=actor, action="credential.create", obj=credential, before=None,
                     after={"name": credential.name, "keys": credential.keys}, project=project)
        intents.intent_record(kind=CREDENTIAL_INTENT, task=CREDENTIAL_TASK, target_id=credential.pk,
                              deadline=CREDENTIAL_DEADLINE)
    return credential


def credential_values_replace(*, actor: Any, credential: Credential, values: dict[str, str]) -> Credential:
    """Its owner rotates a credential: new values (and keys) sealed until the worker rewrites the Secret; workloads
    started before keep what they read at start."""
    if credential.owner_id != getattr(actor, "pk", None) or credential.deleted_at is not None:
        raise PermissionDenied("Only its owner changes a credential.")
    if messages := _credential_values_errors(values):
        raise ValidationError({"values": messages})
    before = {"name": credential.name, "keys": list(credential.keys)}
    with transaction.atomic():
        locked = Credential.objects.select_for_update().get(pk=credential.pk)
        locked.keys, locked.sealed, locked.applied_at, locked.apply_error = sorted(values), seal(values), None, ""
        locked.save(update_fields=["keys", "sealed", "applied_at", "apply_error"])
        audit_record(actor=actor, action="credential.replace_values", obj=locked, before=before,
                     after={"name": locked.name, "keys": locked.keys}, project=locked.project)
        intents.intent_record(kind=CREDENTIAL_INTENT, task=CREDENTIAL_TASK, target_id=locked.pk,
                              deadline=CREDENTIAL_DEADLINE)
    return locked


def credential_delete(*, actor: Any, credential: Credential) -> None:
    """Its owner deletes it: new workloads cannot pick it; the worker removes the Secret, then the row."""
    if credential.owner_id != getattr(actor, "pk", None):
        raise PermissionDenied("Only its owner deletes a credential.")
    with transaction.atomic():
        Credential.objects.filter(pk=credential.pk).update(deleted_at=timezone.now(), sealed="")
        audit_record(actor=actor, action="credential.delete", obj=credential,
                     before={"name": credential.name, "keys": credential.keys}, after=None, project=credential.project)
        intents.intent_record(kind=CREDENTIAL_INTENT, task=CREDENTIAL_TASK, target_id=credential.pk,
                              deadline=CREDENTIAL_DEADLINE)


def workload_template_create(*, actor: Any, name: str, kind: str, values: dict[str, Any],
                             description: str = "") -> WorkloadTemplate:
    """An admin's preset for a submission form (the form checks that `values` names only its fields)."""
    if not can(actor, Action.MANAGE):
        raise PermissionDenied("Only admins manage workload templates.")
    template = WorkloadTemplate(name=name, kind=kind, values=values, description=description)
    template.full_clean()
    with transaction.atomic():
        template.save()
        audit_record(actor=actor, action="workload_template.create", obj=template, before=None,
                     after=_template_state(template))
    return template


def workload_template_update(*, actor: Any, template: WorkloadTemplate, expected_version: int | None = None,
                             **changes: Any) -> WorkloadTemplate:
    """`expected_version`: the version the change was read at (a stale one raises StaleWrite)."""
    if not can(actor, Action.MANAGE):
        raise PermissionDenied("Only admins manage workload templates.")
    with transaction.atomic():
        template = WorkloadTemplate.objects.select_for_update().get(pk=template.pk)
        version_check(template, expected_version)
        before = _template_state(template)
        for field, value in changes.items():
            if field not in {"name", "kind", "values", "description"}:
                raise TypeError(f"unknown template field {field}")
            setattr(template, field, value)
        template.full_clean()
        template.save()
        audit_record(actor=actor, action="workload_template.update", obj=template, before=before,
                     after=_template_state(template))
    return template


def workload_template_delete(*, actor: Any, template: WorkloadTemplate) -> None:
    if not can(actor, Action.MANAGE):
        raise PermissionDenied("Only admins manage workload templates.")
    with transaction.atomic():
        audit_record(actor=actor, action="workload_template.delete", obj=template, before=_template_state(template),
                     after=None)
        template.delete()


def _template_state(template: WorkloadTemplate) -> dict[str, Any]:
    return {"name": template.name, "kind": template.kind, "description": template.description,
            "values": template.values, "version": template.version}


# --- what the worker does ----------------------------------------------------------------------------------------


def workload_claim_submit(*, workload_id: int) -> Workload | None:
    """Claim a submitting workload for one worker (conditional UPDATE); None if it is not ours to submit."""
    now = timezone.now()
    claimed = Workload.objects.filter(
        Q(submit_claimed_at__isnull=True) | Q(submit_claimed_at__lt=now - SUBMIT_CLAIM_TIMEOUT),
        pk=workload_id, status=Status.SUBMITTING,
    ).update(submit_claimed_at=now)
    if not claimed:
        return None
    Workload.objects.filter(pk=workload_id).update(submit_attempts=F("submit_attempts") + 1)
    return Workload.objects.select_related("project__department", "node_pool", "priority_class", "owner").get(
        pk=workload_id)


def workload_release_claim(*, workload: Workload) -> None:
    """Give the claim back so a retry can take it."""
    Workload.objects.filter(pk=workload.pk, status=Status.SUBMITTING).update(submit_claimed_at=None)


def workload_mark_submitted(*, workload: Workload, uid: str, manifest: dict[str, Any]) -> bool:
    """The Job exists in the cluster. False when the workload was stopped meanwhile (the caller deletes the Job);
    when the watcher already saw it move on, only the submission details are filled in."""
    fields: dict[str, Any] = {"k8s_uid": uid, "manifest": manifest, "submitted_at": timezone.now(),
                              "submit_claimed_at": None}
    if _transition(workload, expected=[Status.SUBMITTING], to_status=Status.QUEUED, reason="Created",
                   message=f"Job {workload.job_name} created in {workload.project.namespace}; waiting for Kueue",
                   **fields):
        return True
    if Workload.objects.filter(pk=workload.pk, status__in=[Status.STOPPING, Status.STOPPED]).exists():
        return False
    Workload.objects.filter(pk=workload.pk).update(**fields)
    return True


def workload_mark_rejected(*, workload: Workload, message: str, reason: str = "Rejected") -> bool:
    return _transition(workload, expected=[Status.SUBMITTING], to_status=Status.REJECTED, reason=reason,
                       message=message, finished_at=timezone.now(), submit_claimed_at=None)


def workload_mark_submit_failed(*, workload_id: int, message: str) -> bool:
    workload = Workload(pk=workload_id)
    return _transition(workload, expected=[Status.SUBMITTING], to_status=Status.SUBMIT_FAILED,
                       reason="SubmitFailed", message=message, finished_at=timezone.now(), submit_claimed_at=None)


def workload_mark_stopped(*, workload: Workload, message: str, reason: str = "Stopped",
                          cluster_at: datetime | None = None) -> bool:
    """stopping -> stopped; the GPU-hour interval closes at the cluster's time of the stop when known."""
    ended_at = cluster_at or timezone.now()
    with transaction.atomic():
        if not _transition(workload, expected=[Status.STOPPING], to_status=Status.STOPPED, reason=reason,
                           message=message, cluster_at=cluster_at, finished_at=ended_at):
            return False
        quota_released.send(sender=Workload, workload_id=workload.pk, at=ended_at, reason=reason)
    return True


def workload_stop_finish(*, workload_id: int, cluster_at: datetime | None = None) -> bool:
    """The Job is gone or going (the worker deleted it, or the watcher saw it deleted): record the stop.

    `cluster_at`: the cluster's time of the deletion when known. If a submission was in flight (its claim still
    live), that task may yet create the Job after this; it deletes it when it notices the stop, and a follow-up stop
    intent, due when its claim runs out, deletes it again in case that worker died first. False when the workload was
    not stopping.
    """
    workload = Workload.objects.select_related("stop_requested_by").filter(pk=workload_id,
                                                                          status=Status.STOPPING).first()
    if workload is None:
        return False
    if workload.status_reason == "IdleTimeout":
        reason, message = "IdleTimeout", workload.status_message
    else:
        who = workload.stop_requested_by.get_username() if workload.stop_requested_by else "the portal"
        reason, message = "Stopped", f"Stopped by {who}"
    with transaction.atomic():
        if not workload_mark_stopped(workload=workload, message=message, reason=reason, cluster_at=cluster_at):
            return False
        claimed_at = workload.submit_claimed_at
        if claimed_at and claimed_at > timezone.now() - SUBMIT_CLAIM_TIMEOUT:
            _record_stop(workload, deadline=claimed_at + SUBMIT_CLAIM_TIMEOUT - timezone.now(), send=False)
    return True


def notebooks_running() -> list[Workload]:
    """Notebooks whose server may be up: what the culler asks about its activity."""
    return list(Workload.objects.filter(kind=Kind.NOTEBOOK, status__in=[Status.ADMITTED, Status.RUNNING])
                .select_related("project").only("pk", "project__namespace", "server_activity_mark"))


def notebook_server_activity_record(*, observed: Mapping[int, Any], now: datetime | None = None) -> None:
    """What notebook servers reported (worker.notebook_activity.ServerStatus by workload id): a `last_activity`
    that changed since the last report, or one past the server's start on the first report, is activity now."""
    now = now or timezone.now()
    marks = dict(Workload.objects.filter(pk__in=list(observed)).values_list("pk", "server_activity_mark"))
    for workload_id, status in observed.items():
        previous = marks.get(workload_id)
        if previous is None or previous == status.last_activity:
            continue
        fields: dict[str, Any] = {"server_activity_mark": status.last_activity[:64]}
        if previous or status.used_since_start:
            fields["server_activity_at"] = now
        Workload.objects.filter(pk=workload_id).update(**fields)


def _last_sign_of_use(workload: Workload, activity: Mapping[int, datetime]) -> datetime | None:
    """The latest of: start or the owner's keep-alive, the server's own activity, any other signal given."""
    signs = [workload.last_activity_at or workload.submitted_at, workload.server_activity_at,
             activity.get(workload.pk)]
    return max((sign for sign in signs if sign is not None), default=None)


def notebooks_idle(*, now: datetime | None = None, activity: Mapping[int, datetime] | None = None) -> list[Workload]:
    """Running notebooks with no sign of use for longer than their idle timeout, all on the portal's clock.

    Signs of use: the notebook starting, the owner's "keep alive" (an override: it counts whatever the server says),
    the notebook server's own activity (notebook_server_activity_record), and `activity`: more signals by workload
    id (e.g. GPU utilisation above a threshold), the latest sign of each.
    """
    now = now or timezone.now()
    activity = activity or {}
    candidates = Workload.objects.filter(kind=Kind.NOTEBOOK, status__in=[Status.ADMITTED, Status.RUNNING])
    idle = []
    for workload in candidates.only("pk", "notebook_idle_timeout_minutes", "last_activity_at", "submitted_at",
                                    "server_activity_at", "status"):
        since = _last_sign_of_use(workload, activity)
        if since and workload.notebook_idle_timeout_minutes and \
                now - since > timedelta(minutes=workload.notebook_idle_timeout_minutes):
            workload.idle_since = since
            idle.append(workload)
    return idle


def notebook_cull(*, workload: Workload) -> bool:
    """Stop an idle notebook (beat); the event says why and since when."""
    minutes = workload.notebook_idle_timeout_minutes
    since = getattr(workload, "idle_since", None)
    message = f"Stopped after {minutes} minutes without activity"
    if since is not None:
        message += f" (no sign of use in the notebook or the portal since {since:%Y-%m-%d %H:%M} UTC)"
    with transaction.atomic():
        if not _transition(workload, expected=[Status.ADMITTED, Status.RUNNING], to_status=Status.STOPPING,
                           reason="IdleTimeout", message=message):
            return False
        _record_stop(workload)
    return True


# --- the guarantee non-preemptible work relies on ----------------------------------------------------------------


@quota_guard
def _deserved_covers_running_non_preemptible(quota: Quota) -> None:
    """Refuse lowering a project's deserved quota below what its running non-preemptible work holds."""
    if not quota.project_id:
        return
    held = non_preemptible_units_held(project_id=quota.project_id, pool_id=quota.node_pool_id)
    if quota.deserved < held:
        raise ValidationError({"deserved": (
            f"Running non-preemptible work in this project holds {held} {quota.node_pool.slug} units; the deserved "
            "quota cannot go below that until it finishes or is stopped.")})



# --- what the watcher does ---------------------------------------------------------------------------------------

# Rows the watcher leaves alone: they are over.
WATCHER_IGNORES = frozenset({Status.STOPPED, Status.SUCCEEDED, Status.FAILED, Status.SUBMIT_FAILED})


def workload_observe(*, workload_id: int, observation: Any, preemptor_id: int | None = None) -> list[str]:
    """Record what the cluster says about a workload; returns the statuses it moved through (for notifications).

    Idempotent: replaying the same observation (a resync, a re-delivered watch event) writes no new events.
    """
    moved: list[str] = []
    with transaction.atomic():
        row = Workload.objects.select_for_update().filter(pk=workload_id).first()
        if row is None or row.status in WATCHER_IGNORES:
            return moved
        mirror: dict[str, Any] = {}
        if observation.kueue_name:  # else Kueue's Workload is gone (a deleted Job): keep what it last said
            mirror.update(kueue_name=observation.kueue_name, kueue_conditions=observation.conditions,
                          cluster_queue=observation.cluster_queue, admission=observation.admission)
        for name in ("admitted_at", "started_at", "finished_at"):
            value = getattr(observation, name)
            if value and not getattr(row, name):
                mirror[name] = value
        if observation.job_uid and not row.k8s_uid:
            # The Job exists but no worker recorded it (the one that created it died): the row adopts it.
            mirror.update(k8s_uid=observation.job_uid, submitted_at=row.submitted_at or timezone.now())
        if row.status == Status.STOPPING:
            return _observe_stopping(row, observation, mirror)
        if row.status == Status.SUBMITTING:
            _transition(row, expected=[Status.SUBMITTING], to_status=Status.QUEUED, reason="Created",
                        message=f"Job {row.job_name} created in {row.project.namespace}; waiting for Kueue")
            moved.append(Status.QUEUED)
        preemption = observation.preemption
        if preemption and (row.last_preempted_at is None or preemption.at > row.last_preempted_at):
            if row.status != Status.PREEMPTED:
                from_status = row.status
                Workload.objects.filter(pk=row.pk).update(status=Status.PREEMPTED, status_reason=preemption.reason,
                                                          status_message=preemption.message)
                _event(row, from_status=from_status, to_status=Status.PREEMPTED, reason=preemption.reason,
                       message=preemption.message, cluster_at=preemption.at,
                       details={"preemptor_workload_id": preemptor_id,
                                "preemptor_job_uid": preemption.preemptor_job_uid,
                                "preemptor_kueue_uid": preemption.preemptor_workload_uid})
                row.status = Status.PREEMPTED
                moved.append(Status.PREEMPTED)
            mirror["last_preempted_at"] = preemption.at
            quota_released.send(sender=Workload, workload_id=row.pk, at=preemption.at,
                                reason=f"Preempted ({preemption.reason})")
        status = observation.status
        if status == Status.QUEUED and row.status in PREEMPTED_STATUSES:
            status = Status.REQUEUED  # back in the queue after a preemption: its own status until admitted again
        if status != row.status:
            reason = "Requeued" if status == Status.REQUEUED else observation.reason
            _transition(row, expected=[row.status], to_status=status, reason=reason,
                        message=observation.message, cluster_at=observation.at)
            moved.append(status)
        else:
            mirror["status_reason"], mirror["status_message"] = observation.reason, observation.message
        if status not in QUEUED_STATUSES:
            mirror.update(queue_position_local=None, queue_position_cluster=None)
        if Status.RUNNING in moved and row.kind == Kind.NOTEBOOK:
            mirror["last_activity_at"] = timezone.now()  # a notebook that just started counts as in use
        if mirror:
            Workload.objects.filter(pk=row.pk).update(**mirror)
        _account(row, observation)
        _notify_on_commit(row, moved)
    return moved


def _observe_stopping(row: Workload, observation: Any, mirror: dict[str, Any]) -> list[str]:
    """A stop not yet done by the worker: mirror the cluster and keep the ledger (the Job holds its GPUs until it is
    gone), and move the status only when the Job is over: finished on its own (its final state, at the cluster's
    time) or being deleted (stopped, at the deletion's time). Either closes the stop intent."""
    moved: list[str] = []
    preemption = observation.preemption
    if preemption and (row.last_preempted_at is None or preemption.at > row.last_preempted_at):
        mirror["last_preempted_at"] = preemption.at
    mirror.update(queue_position_local=None, queue_position_cluster=None)
    Workload.objects.filter(pk=row.pk).update(**mirror)
    _account(row, observation)
    if observation.status in {Status.SUCCEEDED, Status.FAILED} or (
            observation.status == Status.STOPPED and not observation.deleted_at):
        if _transition(row, expected=[Status.STOPPING], to_status=observation.status, reason=observation.reason,
                       message=observation.message, cluster_at=observation.at,
                       finished_at=observation.finished_at or observation.at or timezone.now()):
            moved.append(observation.status)
    elif observation.deleted_at and workload_stop_finish(workload_id=row.pk, cluster_at=observation.deleted_at):
        moved.append(Status.STOPPED)
    _notify_on_commit(row, moved)
    return moved


def _account(workload: Workload, observation: Any) -> None:
    """Keep the GPU-hour ledger in step, on the cluster's clock: one interval per admission, open while held."""
    admitted_at = observation.admitted_at
    if observation.status in HOLDING_STATUSES:
        if admitted_at:
            quota_held.send(sender=Workload, workload=workload, at=admitted_at)
        return
    ended_at = observation.finished_at or observation.at
    if ended_at is None:
        return  # no cluster time to close on yet; a later observation will have one
    quota_released.send(sender=Workload, workload_id=workload.pk, at=ended_at,
                        reason=observation.reason or observation.status)
    if admitted_at and observation.finished_at:
        # Finished before the watcher ever saw it running (a dropped watch): record the stretch closed.
        quota_held.send(sender=Workload, workload=workload, at=admitted_at, ended_at=observation.finished_at,
                            reason=observation.reason or observation.status)


NOTIFY_TASK = "worker.tasks.workload_notify"
NOTIFIABLE = frozenset({Status.ADMITTED, Status.PREEMPTED, Status.SUCCEEDED, Status.FAILED})


def _notify_on_commit(workload: Workload, statuses: list[str]) -> None:
    """E-mail the owner about the transitions they opted in to (after commit, by the worker)."""
    wanted = [status for status in statuses if status in NOTIFIABLE]
    if not wanted:
        return
    preference = _owner_preference(workload)
    for status in wanted:
        if preference and preference.wants(status):
            enqueue_on_commit(NOTIFY_TASK, workload.pk, status)


def _owner_preference(workload: Workload) -> NotificationPreference | None:
    return NotificationPreference.objects.filter(user_id=workload.owner_id).first()


def workload_positions_set(*, positions: dict[int, tuple[int, int]], queued_ids: Iterable[int], at: datetime) -> None:
    """Queue positions from Kueue's visibility API; queued workloads it did not list lose theirs."""
    for workload_id, (local, cluster) in positions.items():
        Workload.objects.filter(pk=workload_id, status__in=QUEUED_STATUSES).exclude(
            queue_position_local=local, queue_position_cluster=cluster).update(
            queue_position_local=local, queue_position_cluster=cluster, positions_at=at)
    Workload.objects.filter(pk__in=set(queued_ids) - set(positions)).exclude(
        queue_position_local=None).update(queue_position_local=None, queue_position_cluster=None, positions_at=at)


def workloads_gone(*, workload_ids: Iterable[int], at: datetime, cluster_at: datetime | None = None) -> None:
    """Live workloads whose Job disappeared: a stop the worker did not get to record (the stop is done), or a Job
    someone else removed. `cluster_at`: the cluster's time of the deletion when known (else `at`, the portal's)."""
    at = cluster_at or at
    for workload in Workload.objects.filter(pk__in=list(workload_ids)).exclude(
            status__in=WATCHER_IGNORES | {Status.SUBMITTING, Status.REJECTED}):
        if workload.status == Status.STOPPING:
            workload_stop_finish(workload_id=workload.pk, cluster_at=cluster_at)
            continue
        with transaction.atomic():
            if _transition(workload, expected=[workload.status], to_status=Status.STOPPED, reason="JobDeleted",
                           message="The Job was deleted outside the portal", cluster_at=cluster_at, finished_at=at):
                quota_released.send(sender=Workload, workload_id=workload.pk, at=at, reason="JobDeleted")


# --- start-time forecasts (computed by worker/forecast.py) --------------------------------------------------------

FORECAST_FIELDS = ("computed_at", "earliest", "likely", "latest", "basis", "reason", "message")


def workload_forecasts_store(*, computed_at: datetime, forecasts: dict[int, dict[str, Any]],
                             replayed: Mapping[int, tuple[datetime, datetime, datetime]] | None = None) -> int:
    """Replace the stored forecasts with one refresh's (it covers every waiting workload): each workload in
    `forecasts` gets its row (earliest, likely, latest, basis, reason, message), every other row goes. Workloads
    deleted meanwhile are skipped. `replayed`: the replay's own (earliest, likely, latest) of the estimated ones,
    recorded the first time each is estimated; records get their start once the workload has quota, and go after
    FORECAST_RECORD_DAYS. One transaction; returns the rows written.

    Refreshes can overlap (beat's and the watcher's): they store one at a time, and one computed before the stored
    forecasts were is dropped (0), so an older picture never replaces a newer one."""
    with transaction.atomic():
        lock_for_transaction("workload-forecasts")
        if WorkloadForecast.objects.filter(computed_at__gt=computed_at).exists():
            return 0
        WorkloadForecast.objects.exclude(workload_id__in=list(forecasts)).delete()
        present = set(Workload.objects.filter(pk__in=list(forecasts)).values_list("pk", flat=True))
        rows = [WorkloadForecast(workload_id=workload_id, computed_at=computed_at, **values)
                for workload_id, values in forecasts.items() if workload_id in present]
        WorkloadForecast.objects.bulk_create(rows, batch_size=1000, update_conflicts=True,
                                             unique_fields=["workload"], update_fields=list(FORECAST_FIELDS))
        _forecast_record_keep(computed_at=computed_at, replayed={
            workload_id: times for workload_id, times in (replayed or {}).items() if workload_id in present})
    return len(rows)


def _forecast_record_keep(*, computed_at: datetime,
                          replayed: Mapping[int, tuple[datetime, datetime, datetime]]) -> None:
    """Record first estimates (a workload already recorded keeps its first), give each record whose workload has
    got quota since its estimate that start (the first admission the mirror recorded after it, on the cluster's
    clock, whose times have whole seconds), and drop the old ones."""
    ForecastRecord.objects.bulk_create(
        [ForecastRecord(workload_id=workload_id, forecast_at=computed_at, earliest=earliest, likely=likely,
                        latest=latest) for workload_id, (earliest, likely, latest) in sorted(replayed.items())],
        batch_size=1000, ignore_conflicts=True)
    admissions = WorkloadEvent.objects.filter(
        workload_id=OuterRef("workload_id"), to_status__in=HOLDING_STATUSES,
        cluster_at__gte=OuterRef("forecast_at") - timedelta(seconds=1)).order_by("cluster_at")
    ForecastRecord.objects.filter(Exists(admissions), started_at__isnull=True).update(
        started_at=Subquery(admissions.values("cluster_at")[:1]))
    ForecastRecord.objects.filter(forecast_at__lt=computed_at - timedelta(days=FORECAST_RECORD_DAYS)).delete()


# --- GPU utilisation and idle detection (the worker stores what Prometheus reports) ----------------------------

IDLE_NOTIFY_TASK = "worker.tasks.workload_idle_notify"
GPU_IDLE_REASON = "GpuIdle"


def idle_policy_update(*, actor: Any, threshold_percent: int, idle_seconds: int, cull_notebooks: bool) -> IdlePolicy:
    """The admin's idle rule; audited."""
    if not access.can_manage_idle_policy(actor):
        raise PermissionDenied("Only admins set the idle rule.")
    with transaction.atomic():
        policy = IdlePolicy.objects.select_for_update().get_or_create(pk=1)[0]
        before = {"threshold_percent": policy.threshold_percent, "idle_seconds": policy.idle_seconds,
                  "cull_notebooks": policy.cull_notebooks}
        policy.threshold_percent, policy.idle_seconds = threshold_percent, idle_seconds
        policy.cull_notebooks = cull_notebooks
        policy.full_clean()
        policy.save()
        audit_record(actor=actor, action="idle_policy.update", obj=policy, before=before,
                     after={"threshold_percent": threshold_percent, "idle_seconds": idle_seconds,
                            "cull_notebooks": cull_notebooks})
    return policy


def _merge_pairs(points: list[list[float]]) -> list[list[float]]:
    """Halve a chart series: each two neighbours become their mean (time, utilisation, memory)."""
    merged = []
    for index in range(0, len(points) - 1, 2):
        first, second = points[index], points[index + 1]
        merged.append([round((a + b) / 2, 3) for a, b in zip(first, second, strict=True)])
    if len(points) % 2:
        merged.append(points[-1])
    return merged


def workload_utilisation_record(*, workload: Workload, samples: list[tuple[datetime, float, float]],
                                policy: IdlePolicy, now: datetime) -> list[tuple[datetime, float, float]]:
    """Add Prometheus' samples (time, mean GPU util %, framebuffer MiB) newer than what is already counted; update
    the idle stretch and flag the workload (event + e-mail to the owner) when it reaches the policy's duration.

    Returns the samples it accepted (the caller adds the same ones to the hourly showback figures), so a repeated
    refresh over the same window counts nothing twice."""
    with transaction.atomic():
        row, _ = WorkloadUtilisation.objects.select_for_update().get_or_create(workload=workload)
        fresh = sorted(s for s in samples if row.sampled_until is None or s[0] > row.sampled_until)
        if not fresh:
            return []
        total = (row.mean_percent or 0.0) * row.samples + sum(util for _, util, _ in fresh)
        row.samples += len(fresh)
        row.mean_percent = total / row.samples
        row.peak_memory_mib = max([row.peak_memory_mib or 0.0, *(memory for _, _, memory in fresh)])
        row.last_percent = fresh[-1][1]
        row.sampled_until = fresh[-1][0]
        series = [*row.series, *([moment.timestamp(), round(util, 1), round(memory)] for moment, util, memory in fresh)]
        while len(series) > WorkloadUtilisation.MAX_POINTS:
            series = _merge_pairs(series)
        row.series = series
        for moment, util, _ in fresh:
            if util < policy.threshold_percent:
                row.idle_since = row.idle_since or moment
            else:
                row.idle_since, row.idle_flagged_at = None, None
        idle_since = row.idle_since
        if idle_since is not None and row.idle_flagged_at is None and \
                (fresh[-1][0] - idle_since).total_seconds() >= policy.idle_seconds:
            row.idle_flagged_at = now
            _event(workload, from_status=workload.status, to_status=workload.status, reason=GPU_IDLE_REASON,
                   message=f"GPUs below {policy.threshold_percent}% for {_duration_text(policy.idle_seconds)}",
                   at=now, details={"idle_since": idle_since.isoformat()})
            preference = _owner_preference(workload)
            if preference and preference.wants("idle"):  # the flag and the page show it either way
                enqueue_on_commit(IDLE_NOTIFY_TASK, workload.pk)
        row.save()
    return fresh


def _duration_text(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} minutes"
    return f"{seconds} s"


def notebooks_gpu_idle(*, now: datetime | None = None) -> list[Workload]:
    """Running notebooks whose GPUs have stayed below the idle policy's threshold for its duration, and whose owner
    showed no activity in that time either (the keep-alive, or the notebook server's own activity, overrides)."""
    now = now or timezone.now()
    policy = IdlePolicy.current()
    if not policy.cull_notebooks:
        return []
    quiet_since = now - timedelta(seconds=policy.idle_seconds)
    return list(Workload.objects.filter(
        kind=Kind.NOTEBOOK, status__in=[Status.ADMITTED, Status.RUNNING],
        utilisation__idle_flagged_at__isnull=False, utilisation__idle_since__lte=quiet_since,
    ).filter(Q(last_activity_at__isnull=True) | Q(last_activity_at__lte=quiet_since)).order_by("pk"))


def notebook_cull_gpu_idle(*, workload: Workload) -> bool:
    """Stop a notebook whose GPUs stayed idle (beat); the event says why."""
    policy = IdlePolicy.current()
    message = (f"Stopped after its GPUs stayed below {policy.threshold_percent}% for "
               f"{_duration_text(policy.idle_seconds)}")
    with transaction.atomic():
        if not _transition(workload, expected=[Status.ADMITTED, Status.RUNNING], to_status=Status.STOPPING,
                           reason="IdleTimeout", message=message):
            return False
        _record_stop(workload)
    return True
