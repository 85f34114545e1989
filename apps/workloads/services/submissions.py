"""What users do to their workloads: submit (once per key), the live check, stop, bulk stop, keep alive."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import QuerySet
from django.utils import timezone

from apps.accounts import access
from apps.accounts.access import Action, can
from apps.cluster.selectors import served_for_training
from apps.core import intents, kueue_names
from apps.core.actors import Actor
from apps.core.audit import audit_record
from apps.org.models import DataSource, NodePool, PriorityClass, Project
from apps.org.policies import LABEL_FIELDS, EffectivePolicy, violations
from apps.org.selectors import budget_holds, effective_policy
from apps.workloads.frameworks import framework_entry, framework_errors, framework_object, framework_settings_of
from apps.workloads.models import (
    LIVE_STATUSES,
    PORTAL_KIND_VALUES,
    Credential,
    Framework,
    Kind,
    Status,
    Workload,
    WorkloadUtilisation,
)
from apps.workloads.selectors import default_priority_class
from apps.workloads.validation import (
    attachments_errors,
    fits_errors,
    gpu_fraction_errors,
    kai_pool_errors,
    shape_errors,
)

from .transitions import SUBMIT_DEADLINE, SUBMIT_INTENT, SUBMIT_TASK, _event, _record_stop, _transition


def workload_submit(*, actor: Actor, **fields: Any) -> Workload:
    """Validate (the fields of `workload_validate`) and record a submission; the worker creates the Job after commit."""
    workload, _ = workload_submit_once(actor=actor, submission_key=None, **fields)
    return workload


class SubmissionKeyReused(ValidationError):
    """An idempotency key sent again with a different request: refused, since it names another submission."""


def _earlier_submission(actor: Actor, submission_key: str, submission_digest: str) -> Workload | None:
    earlier = Workload.objects.filter(owner=actor, submission_key=submission_key).first()
    if earlier is not None and submission_digest and earlier.submission_digest != submission_digest:
        raise SubmissionKeyReused(
            f"This Idempotency-Key was used for another request (workload {earlier.pk}, {earlier.name}); "
            "nothing was submitted. Send a new key with a new submission.")
    return earlier


def workload_submit_once(*, actor: Actor, submission_key: str | None, submission_digest: str = "",
                         **fields: Any) -> tuple[Workload, bool]:
    """`workload_submit`, once per `submission_key` (a submit form's one-time token, an API Idempotency-Key; unique
    per owner): a repeat answers the first workload and records nothing (one row, one intent). With a
    `submission_digest` (of the API request), a repeat with another digest raises SubmissionKeyReused. Returns the
    workload and whether this call created it; a created one carries its event and attachments as prefetched."""
    if submission_key and (earlier := _earlier_submission(actor, submission_key, submission_digest)):
        return earlier, False
    workload = workload_validate(actor=actor, **fields)
    workload.submission_key, workload.submission_digest = submission_key or "", submission_digest
    project = workload.project
    # Everything that needs no id is worked out before the transaction: on SQLite it holds the database's one write
    # lock, which the other submissions, the worker and the watcher wait for (docs/architecture.md, One writer on
    # SQLite).
    runs_as = f" as a {framework_entry(workload).name}" if workload.runs_on_framework else ""
    runs_as += f" on the {workload.training_runtime} runtime" if workload.training_runtime else ""
    queue = (f"KAI Scheduler's {kueue_names.names().kai_project_queue(project.slug, workload.node_pool.slug)} "
             "queue" if workload.node_pool.kai else f"the {workload.queue_name} queue of {project.namespace}")
    audited = _submitted(workload)
    try:
        with transaction.atomic():
            workload.save()
            workload.job_name = kueue_names.job_name(workload.pk)
            if workload.runs_on_framework:  # the TrainJob, JobSet or RayJob is named like the portal's Job
                workload.object_name = workload.job_name
            workload.save(update_fields=["job_name", "object_name"])
            # A new row has no attachments to replace: add what was chosen (set() would read the none there are).
            if workload.chosen_data_sources:
                workload.data_sources.add(*workload.chosen_data_sources)
            if workload.chosen_credentials:
                workload.credentials.add(*workload.chosen_credentials)
            submitted = _event(workload, from_status="", to_status=Status.SUBMITTING, reason="Submitted",
                               message=f"Submitted{runs_as} to {queue}", actor=actor)
            intents.intent_record(kind=SUBMIT_INTENT, task=SUBMIT_TASK, target_id=workload.pk,
                                  deadline=SUBMIT_DEADLINE)
            audit_record(actor=actor, action="workload.resubmit" if workload.resubmitted_from_id else "workload.submit",
                         obj=workload, before=None, after=audited, project=project)
    except IntegrityError:
        # The same key committed meanwhile (a double click racing itself): that one is the submission.
        if submission_key and (earlier := _earlier_submission(actor, submission_key, submission_digest)):
            return earlier, False
        raise
    # The row as a read would give it back, so the caller can answer with it without reading it: decimals at their
    # columns' scale, and what the submission wrote kept as a prefetch would leave it (in the models' orders).
    for column in _DECIMAL_COLUMNS:
        if (value := getattr(workload, column.attname)) is not None:
            setattr(workload, column.attname, value.quantize(Decimal(1).scaleb(-column.decimal_places)))
    prefetched = {
        "events": _as_prefetched(workload.events, [submitted]),
        "data_sources": _as_prefetched(workload.data_sources, sorted(
            workload.chosen_data_sources, key=lambda source: (source.name, source.pk))),
        "credentials": _as_prefetched(workload.credentials, sorted(
            workload.chosen_credentials, key=lambda credential: (credential.name, credential.pk)))}
    workload._prefetched_objects_cache = prefetched  # type: ignore[attr-defined]  # Django's, as prefetch fills it
    return workload, True


def _as_prefetched(manager: Any, rows: list[Any]) -> QuerySet[Any]:
    """The relation's queryset holding these rows, as prefetch_related leaves it: `.all()` answers from them, while
    `.get()` or `.filter()` still read the database."""
    queryset = manager.get_queryset()
    queryset._result_cache = rows
    queryset._prefetch_done = True
    return queryset


_DECIMAL_COLUMNS = [column for column in Workload._meta.concrete_fields if isinstance(column, models.DecimalField)]


# What an audit row keeps of a submission: what it asks for, not its whole spec (env values may be secrets).
_AUDITED_FIELDS = ("name", "kind", "framework", "object_api_version", "training_runtime", "image", "node_pool_id",
                   "gpus", "gpu_fraction", "pods", "completions", "parallelism", "priority_class_id", "preemptible",
                   "max_runtime_seconds", "resubmitted_from_id")


def _submitted(workload: Workload) -> dict[str, Any]:
    values = {name: getattr(workload, name) for name in _AUDITED_FIELDS}
    values["gpu_fraction"] = None if workload.gpu_fraction is None else str(workload.gpu_fraction)
    return values


def workload_validate(
    *,
    actor: Actor,
    project: Project,
    kind: str,
    name: str,
    image: str,
    node_pool: NodePool,
    gpus: int,
    model_label: str,
    gpu_fraction: Decimal | str | None = None,
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
    framework: str = Framework.NONE,
    ray_version: str | None = None,
    ray_entrypoint: str | None = None,
    ray_working_dir: str | None = None,
) -> Workload:
    """Every check `workload_submit` makes, without saving or enqueueing: the unsaved row (the forms' live check).
    Raises every refusal at once (field -> messages)."""
    values = {
        "project": project, "kind": kind, "name": name, "image": image, "node_pool": node_pool, "gpus": gpus,
        "gpu_fraction": gpu_fraction, "model_label": model_label, "data_class": data_class, "command": command,
        "args": args, "env": env,
        "cpu": cpu, "memory_gib": memory_gib, "pods": pods, "completions": completions, "parallelism": parallelism,
        "priority_class": priority_class, "preemptible": preemptible, "max_runtime_seconds": max_runtime_seconds,
        "notebook_idle_timeout_minutes": notebook_idle_timeout_minutes, "notebook_port": notebook_port,
        "shm_gib": shm_gib, "data_sources": data_sources, "credentials": credentials,
        "resubmitted_from": resubmitted_from, "framework": framework, "ray_version": ray_version,
        "ray_entrypoint": ray_entrypoint, "ray_working_dir": ray_working_dir,
    }
    workload, errors = _workload_draft(actor=actor, values=values, unknown=set())
    if errors:
        raise ValidationError(errors)
    return workload


def workload_check(*, actor: Actor, unknown: Iterable[str], **known: Any) -> None:
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
    "gpu_fraction": None, "command": None, "args": None, "env": None, "cpu": 1, "memory_gib": 8, "pods": 1,
    "completions": 1, "parallelism": 1, "priority_class": None, "preemptible": None, "max_runtime_seconds": None,
    "notebook_idle_timeout_minutes": None, "notebook_port": None, "shm_gib": None, "data_sources": None,
    "credentials": None, "resubmitted_from": None, "framework": Framework.NONE, "ray_version": None,
    "ray_entrypoint": None, "ray_working_dir": None,
}
_WORKLOAD_FIELDS = _REQUIRED | set(_DEFAULTS)
# The sizes that decide how many units a workload holds, by kind.
_UNIT_FIELDS = {Kind.TRAINING: {"gpus", "gpu_fraction", "pods"},
                Kind.BATCH: {"gpus", "gpu_fraction", "completions", "parallelism"},
                Kind.NOTEBOOK: {"gpus", "gpu_fraction"}}
# The fields only one kind has: another kind given one (other than its default) is refused, not silently dropped.
_KIND_ONLY_FIELDS = {"pods": Kind.TRAINING, "completions": Kind.BATCH, "parallelism": Kind.BATCH,
                     "notebook_idle_timeout_minutes": Kind.NOTEBOOK, "notebook_port": Kind.NOTEBOOK}


def _workload_draft(*, actor: Actor, values: dict[str, Any],
                    unknown: set[str]) -> tuple[Workload, dict[str, list[str]]]:
    """The unsaved row for `values` and every refusal of it; checks that need a field in `unknown` are left out."""
    values = {**_DEFAULTS, **{name: value for name, value in values.items() if name not in unknown}}
    project, kind, node_pool = values.get("project"), values.get("kind"), values.get("node_pool")
    if project is not None and not can(actor, Action.SUBMIT, project):
        raise PermissionDenied("You may not submit work in this project.")
    if kind not in PORTAL_KIND_VALUES:
        raise ValidationError({"kind": f"Choose one of: {', '.join(PORTAL_KIND_VALUES)}."})
    errors: dict[str, list[str]] = {
        name: [f"Only {Kind(owner).label.lower()} workloads have this; leave it out of a {kind} workload."]
        for name, owner in _KIND_ONLY_FIELDS.items()
        if owner != kind and name not in unknown and values[name] != _DEFAULTS[name]}
    priority_class, preemptible = values["priority_class"], values["preemptible"]
    policy = effective_policy(project) if project is not None else None
    if priority_class is None and policy is not None and "priority_class" not in unknown:
        chosen = policy.get("default_priority_class")
        if chosen is not None and preemptible in (None, chosen.preemptible):
            priority_class = chosen
    if preemptible is None:
        preemptible = priority_class.preemptible if priority_class else True
    if priority_class is None and project is not None and "priority_class" not in unknown:
        priority_class = default_priority_class(project=project, preemptible=preemptible)
        if priority_class is None:
            errors["priority_class"] = ["No priority class exists yet; ask an admin to create one."]
    notebook_port, idle_minutes = values["notebook_port"], values["notebook_idle_timeout_minutes"]
    if kind == Kind.NOTEBOOK:  # defaults only for what was not given: the model refuses port 0 (not 8888)
        notebook_port = 8888 if notebook_port is None else notebook_port
        idle_limit = policy.get("max_notebook_idle_minutes") if policy is not None else None
        idle_minutes = min(120, idle_limit or 120) if idle_minutes is None else idle_minutes
    runtime = values["max_runtime_seconds"]
    if runtime is None and policy is not None:
        runtime = policy.get("default_runtime_seconds") or policy.get("max_runtime_seconds")
    pods, completions, parallelism = values["pods"], values["completions"], values["parallelism"]
    workload = Workload(
        project=project, owner=actor, kind=kind, name=values.get("name", ""), image=values.get("image", ""),
        command=values["command"] or [], args=values["args"] or [], env=values["env"] or [], node_pool=node_pool,
        gpus=values.get("gpus", 0), cpu=Decimal(str(values["cpu"])), memory_gib=Decimal(str(values["memory_gib"])),
        pods=pods if kind == Kind.TRAINING else 1,
        completions=completions if kind == Kind.BATCH else 1, parallelism=parallelism if kind == Kind.BATCH else 1,
        priority_class=priority_class, preemptible=preemptible, max_runtime_seconds=runtime,
        model_label=values.get("model_label", ""), data_class=values.get("data_class", ""),
        notebook_idle_timeout_minutes=idle_minutes if kind == Kind.NOTEBOOK else None,
        notebook_port=notebook_port if kind == Kind.NOTEBOOK else None, resubmitted_from=values["resubmitted_from"],
        shm_gib=None if values["shm_gib"] in (None, "") else Decimal(str(values["shm_gib"])),
        gpu_fraction=None if values["gpu_fraction"] in (None, "") else Decimal(str(values["gpu_fraction"])),
    )
    framework = values["framework"]
    errors.update(framework_errors(kind=kind, framework=framework, values=values, unknown=unknown))
    if "framework" not in errors and "framework" not in unknown and kind == Kind.TRAINING:
        # The served kinds are read only for a framework (the live check of other training stays as cheap as it was).
        served, torch_runtime = served_for_training() if framework != Framework.NONE else (None, "")
        entry, refusal = framework_object(framework, served, torch_runtime)
        if refusal:
            errors["framework"] = [refusal]
        workload.framework = framework
        workload.framework_settings = framework_settings_of(framework, values)
        workload.object_api_version = entry.api_version if entry else ""
        workload.training_runtime = torch_runtime if entry and entry.name == "TrainJob" else ""
    workload.chosen_data_sources = list(values["data_sources"] or [])
    workload.chosen_credentials = list(values["credentials"] or [])
    shape: dict[str, Any] = {"kind": kind, "command": workload.command, "args": workload.args, "env": workload.env,
             **{name: values[name] for name in ("name", "image", "model_label", "data_class", "pods", "completions",
                                                 "parallelism", "cpu", "memory_gib") if name in values}}
    errors.update(shape_errors(shape))
    sizes_known = not (_UNIT_FIELDS[Kind(kind)] & unknown)
    for name, messages in gpu_fraction_errors(
            pool=node_pool, kind=kind, gpus=None if "gpus" in unknown else workload.gpus,
            gpu_fraction=None if "gpu_fraction" in unknown else workload.gpu_fraction,
            pod_count=workload.pod_count if sizes_known else None,
            framework="" if "framework" in unknown else framework).items():
        errors.setdefault(name, []).extend(messages)
    if project is not None and node_pool is not None and node_pool.kai:
        held_projects, held_departments = budget_holds()
        for name, messages in kai_pool_errors(
                project=project, pool=node_pool, preemptible=preemptible,
                framework="" if "framework" in unknown else framework, held_projects=held_projects,
                held_departments=held_departments).items():
            errors.setdefault(name, []).extend(messages)
    for name, messages in attachments_errors(
            project=project, owner=actor, data_sources=workload.chosen_data_sources,
            credentials=workload.chosen_credentials, shm_gib=None if "shm_gib" in unknown else workload.shm_gib,
            memory_gib=None if "memory_gib" in unknown else workload.memory_gib).items():
        errors.setdefault(name, []).extend(messages)
    try:
        # kueue_uid is the watcher's key for work from outside the portal, never a submission's: not checked here.
        workload.full_clean(exclude=["owner", "project", "node_pool", "priority_class", "kueue_uid", *unknown,
                                     *errors])
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            errors.setdefault(name, []).extend(messages)
    if policy is not None:
        _policy_errors(errors, policy, workload, sizes_known=sizes_known, unknown=unknown)
    if project is not None and node_pool is not None:
        for name, messages in fits_errors(
                project=project, pool=node_pool, units=workload.gpu_units if sizes_known else None,
                gpus=None if "gpus" in unknown else workload.gpus, preemptible=preemptible,
                cpu=None if "cpu" in unknown else workload.cpu,
                memory_gib=None if "memory_gib" in unknown else workload.memory_gib,
                pod_count=workload.pod_count if sizes_known else None,
                gpu_fraction=None if "gpu_fraction" in unknown else workload.gpu_fraction).items():
            errors.setdefault(name, []).extend(messages)
    return workload, errors


def _policy_errors(errors: dict[str, list[str]], policy: EffectivePolicy, workload: Workload, *, sizes_known: bool,
                   unknown: set[str]) -> None:
    """Add every way the draft breaks the policy that applies to its project, as far as its fields are known. An
    empty label a policy requires says so instead of the plain "required" (docs/architecture.md, Policies)."""
    known = {name: name not in unknown for name in ("image", "max_runtime_seconds", "priority_class",
                                                   "notebook_idle_timeout_minutes", *LABEL_FIELDS.values())}
    found = violations(
        policy, units=workload.gpu_units if sizes_known else None,
        images=[("image", workload.image)] if known["image"] else [],
        runtime_seconds=workload.max_runtime_seconds if known["max_runtime_seconds"] else None,
        priority_class=workload.priority_class.name if known["priority_class"] and workload.priority_class else None,
        idle_minutes=workload.notebook_idle_timeout_minutes if known["notebook_idle_timeout_minutes"] else None,
        labels={name: getattr(workload, name) for name in LABEL_FIELDS.values() if known[name]})
    for name, messages in found.items():
        if name in LABEL_FIELDS.values():
            errors[name] = messages
        else:
            errors.setdefault(name, []).extend(messages)


def workload_stop(*, actor: Actor, workload: Workload, bulk: bool = False) -> Workload:
    """A researcher stops their own work, a team lead anything in scope; the worker deletes the Job (for work from
    outside the portal, the object it belongs to). Every stop is audited, the owner's own too (`bulk`: one of a bulk
    stop's)."""
    if not access.can_stop_workload(actor, workload):
        raise PermissionDenied("You may not stop this workload.")
    if workload.kind == Kind.OTHER:
        raise ValidationError(f"The portal cannot stop this kind of work; delete {workload.object_name} in the "
                              "cluster (kubectl delete).")
    if workload.status not in LIVE_STATUSES or workload.status == Status.STOPPING:
        raise ValidationError(f"This workload is {workload.get_status_display().lower()}; there is nothing to stop.")
    workload_status = workload.status
    with transaction.atomic():
        if not _transition(workload, expected=LIVE_STATUSES - {Status.STOPPING}, to_status=Status.STOPPING,
                           reason="StopRequested", message=f"Stop requested by {actor.get_username()}", actor=actor,
                           stop_requested_by=actor):
            raise ValidationError("This workload changed meanwhile; reload and try again.")
        audit_record(actor=actor, action="workload.stop", obj=workload, before={"status": workload_status},
                     after={"status": Status.STOPPING, "bulk": bulk}, project=workload.project)
        _record_stop(workload)
    return workload


BULK_STOP_LIMIT = 200


def workloads_stop(*, actor: Actor, workloads: Sequence[Workload]) -> list[Workload]:
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
            workload_stop(actor=actor, workload=workload, bulk=True)
    return list(workloads)


def workload_touch(*, actor: Actor, workload: Workload) -> None:
    """The owner is still using a notebook: push its idle deadline back. A GPU-idle stretch starts again from now,
    so the notebook is flagged, and its owner warned, afresh before it could be stopped."""
    if not access.can_keep_alive(actor, workload):
        raise PermissionDenied("Only the owner can keep a notebook alive.")
    now = timezone.now()
    with transaction.atomic():
        Workload.objects.filter(pk=workload.pk).update(last_activity_at=now)
        WorkloadUtilisation.objects.filter(workload=workload, idle_since__isnull=False).update(
            idle_since=now, idle_flagged_at=None)
