"""Submit a Kubernetes manifest of any kind the portal observes: checked whole (apps.workloads.manifests), placed
by the same quota rules as the forms, recorded like any submission (row, history, outbox intent, audit, once per
key); the worker creates the prepared object, the watcher follows it as one of the portal's own."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from apps.accounts.access import Action, can
from apps.cluster.selectors import served_kinds
from apps.core import intents, kueue_names
from apps.core.actors import Actor
from apps.core.audit import audit_record
from apps.org.models import NodePool, PriorityClass, Project
from apps.org.policies import LABEL_FIELDS, violations
from apps.org.selectors import effective_policy
from apps.workloads.manifests import ManifestErrors, Target, check_manifest, parse_manifest, prepared_manifest
from apps.workloads.models import MAX_PODS, MAX_RUNTIME_SECONDS, Credential, Status, Workload
from apps.workloads.selectors import default_priority_class
from apps.workloads.validation import fits_errors, shape_errors

from .submissions import _earlier_submission
from .transitions import SUBMIT_DEADLINE, SUBMIT_INTENT, SUBMIT_TASK, _event

# fits_errors' keys that are the manifest's own sizes in a manifest submission.
_SIZE_FIELDS = ("gpus", "cpu", "memory_gib")
# The policy's refusals that belong to a manifest submission's own fields (the rest are the manifest's).
_POLICY_FIELDS = ("max_runtime_seconds", "priority_class", *LABEL_FIELDS.values())


def _target(actor: Actor, project: Project, pool: NodePool, profile: str) -> Target:
    own = frozenset(credential.secret_name for credential in Credential.objects.filter(
        project=project, owner_id=getattr(actor, "pk", None), deleted_at=None).only("pk"))
    return Target(namespace=project.namespace, project_name=project.name, gpu_resource=pool.gpu_resource,
                  pool_name=pool.name, own_secrets=own, profile=profile, served=served_kinds())


def workload_manifest_validate(*, actor: Actor, project: Project, manifest: str, node_pool: NodePool,
                               model_label: str, data_class: str, priority_class: PriorityClass | None = None,
                               preemptible: bool | None = None, max_runtime_seconds: int | None = None,
                               resubmitted_from: Workload | None = None) -> tuple[Workload, dict[str, Any]]:
    """The unsaved row of a manifest submission and its checked object; ValidationError with every refusal (the
    manifest's each led by its field path). This is the dry run (the API's `?dry_run=true`, the manifest page's
    Check): it writes nothing (no row, no intent, no audit) and calls no cluster, and the submission makes
    exactly these checks first."""
    if not can(actor, Action.SUBMIT, project):
        raise PermissionDenied("You may not submit work in this project.")
    errors: dict[str, list[str]] = {}
    checked = None
    policy = effective_policy(project)
    try:
        obj = parse_manifest(manifest)
        checked, problems = check_manifest(obj, _target(actor, project, node_pool, policy.pod_security))
        if problems:
            errors["manifest"] = problems
    except ManifestErrors as error:
        errors.update(error.errors)
    errors.update(shape_errors({"kind": "manifest", "model_label": model_label, "data_class": data_class}))
    if max_runtime_seconds is not None and not 60 <= max_runtime_seconds <= MAX_RUNTIME_SECONDS:
        errors["max_runtime_seconds"] = [f"Give from 60 to {MAX_RUNTIME_SECONDS} seconds."]
    if max_runtime_seconds is None:
        max_runtime_seconds = policy.get("default_runtime_seconds") or policy.get("max_runtime_seconds")
    chosen = policy.get("default_priority_class")
    if priority_class is None and chosen is not None and preemptible in (None, chosen.preemptible):
        priority_class = chosen
    if preemptible is None:
        preemptible = priority_class.preemptible if priority_class else True
    if priority_class is None:
        priority_class = default_priority_class(project=project, preemptible=preemptible)
        if priority_class is None:
            errors["priority_class"] = ["No priority class exists yet; ask an admin to create one."]
    found = violations(policy, units=checked.units if checked else None, images=checked.images if checked else (),
                       runtime_seconds=max_runtime_seconds,
                       priority_class=priority_class.name if priority_class else None,
                       labels={"model_label": model_label, "data_class": data_class})
    for name, messages in found.items():
        if name in _POLICY_FIELDS:
            errors[name] = messages if name in LABEL_FIELDS.values() else [*errors.get(name, []), *messages]
        else:  # a size or a container's image: the manifest's, led by its path
            where = "manifest" if name == "gpus" else name
            errors.setdefault("manifest", []).extend(f"{where}: {message}" for message in messages)
    if node_pool.kai:  # a manifest's object goes to Kueue's queues, which a KAI pool has not (README, KAI pools)
        errors.setdefault("node_pool", []).append(
            f"{node_pool.name} is scheduled by KAI Scheduler; a manifest runs through Kueue's queues, which it has "
            "not. Submit the work with the training, batch or notebook form there, or choose a Kueue pool.")
        raise ValidationError(errors)
    if checked is None:
        raise ValidationError(errors)
    sizes = []
    if checked.units < 1:
        sizes.append(f"manifest: it asks for no {node_pool.gpu_resource}; work in the portal holds GPUs of its pool "
                     f"(requests and limits of {node_pool.gpu_resource} on a container).")
    if checked.pods > MAX_PODS:
        sizes.append(f"manifest: {checked.pods} pods; at most {MAX_PODS}.")
    largest = max(checked.pod_sets, key=lambda entry: (entry["gpus"], entry["count"]))
    fits = fits_errors(project=project, pool=node_pool, units=checked.units, gpus=checked.gpus_per_pod,
                       preemptible=preemptible, cpu=checked.cpu_total, memory_gib=checked.memory_gib_total,
                       pod_count=1)
    for name, messages in fits.items():
        if name in _SIZE_FIELDS:
            sizes += [f"manifest: {message}" for message in messages]
        else:
            errors.setdefault(name, []).extend(messages)
    if sizes:
        errors.setdefault("manifest", []).extend(sizes)
    if errors:
        raise ValidationError(errors)
    workload = Workload(
        project=project, owner=actor, kind=checked.entry.kind, name=checked.name, image=checked.image,
        node_pool=node_pool, gpus=checked.gpus_per_pod, cpu=Decimal(largest["cpu"]),
        memory_gib=Decimal(largest["memory_gib"]), pods=max(checked.pods, 1), pod_sets=checked.pod_sets,
        pod_set_units=checked.units, priority_class=priority_class, preemptible=preemptible,
        max_runtime_seconds=max_runtime_seconds, model_label=model_label, data_class=data_class,
        object_api_version=checked.entry.api_version, resubmitted_from=resubmitted_from)
    return workload, checked.obj


def workload_submit_manifest_once(*, actor: Actor, submission_key: str | None, submission_digest: str = "",
                                  **fields: Any) -> tuple[Workload, bool]:
    """`workload_manifest_validate`, then the row, its history, the submit intent and the audit row in one
    transaction, once per `submission_key` (as `workload_submit_once`). Returns the workload and whether this call
    created it."""
    if submission_key and (earlier := _earlier_submission(actor, submission_key, submission_digest)):
        return earlier, False
    workload, obj = workload_manifest_validate(actor=actor, **fields)
    workload.submission_key, workload.submission_digest = submission_key or "", submission_digest
    project = workload.project
    try:
        with transaction.atomic():
            workload.save()
            workload.job_name = workload.object_name = kueue_names.job_name(workload.pk)
            workload.manifest = prepared_manifest(workload, obj)
            workload.save(update_fields=["job_name", "object_name", "manifest"])
            _event(workload, from_status="", to_status=Status.SUBMITTING, reason="Submitted",
                   message=f"{workload.get_kind_display()} manifest submitted to the {workload.queue_name} queue of "
                           f"{project.namespace}", actor=actor)
            intents.intent_record(kind=SUBMIT_INTENT, task=SUBMIT_TASK, target_id=workload.pk,
                                  deadline=SUBMIT_DEADLINE)
            audit_record(actor=actor, action="workload.resubmit" if workload.resubmitted_from_id else "workload.submit",
                         obj=workload, before=None, after={
                "name": workload.name, "kind": workload.kind, "manifest": True, "image": workload.image,
                "node_pool_id": workload.node_pool_id, "gpus": workload.gpus, "pods": workload.pods,
                "units": workload.pod_set_units, "priority_class_id": workload.priority_class_id,
                "preemptible": workload.preemptible, "max_runtime_seconds": workload.max_runtime_seconds,
                "resubmitted_from_id": workload.resubmitted_from_id},
                project=project)
    except IntegrityError:
        if submission_key and (earlier := _earlier_submission(actor, submission_key, submission_digest)):
            return earlier, False
        raise
    return workload, True
