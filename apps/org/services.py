"""Writes to the organisation. Each service checks access, enforces the quota rules, saves in one transaction
and writes its audit row in that same transaction, so a refused change leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from apps.accounts import access
from apps.accounts.access import Action
from apps.core import intents
from apps.core.audit import audit_record, snapshot
from apps.core.kueue_names import names as kueue_names
from apps.core.sealed import seal
from apps.core.services import model_delete, model_save, model_update, stale_message, version_check

from .models import (
    DataSource,
    Department,
    ImagePullSecret,
    KueueSyncRun,
    KueueSyncState,
    NodePool,
    PriorityClass,
    Project,
    Quota,
)
from .validators import (
    mount_path_errors,
    project_namespace_error,
    project_namespace_rule,
    validate_dns_subdomain,
    validate_nfs_server,
)


def _org_changed() -> None:
    """Every committed organisation change asks for a Kueue reconcile (it coalesces bursts of changes)."""
    kueue_sync_request()


DENIED = "You may not make this change."


def _require(actor: Any, action: Action, obj: Any = None) -> None:
    access.require(actor, action, obj, DENIED)


# --- node pools ------------------------------------------------------------------------------------------------

NODE_POOL_FIELDS = {
    "slug", "name", "description", "gpu_resource", "gpu_product", "cut", "mig_profile", "replicas_per_card",
    "node_labels", "node_taints", "capacity", "card_fraction_numerator", "card_fraction_denominator",
    "over_subscribable", "price_per_card_hour",
}


def _pool_capacity_error(pool: NodePool) -> str | None:
    if pool.over_subscribable:
        return None
    assigned = Quota.objects.filter(node_pool=pool, department__isnull=False).aggregate(total=Sum("deserved"))["total"]
    if assigned and assigned > pool.capacity:
        return (f"Departments hold {assigned} deserved units on {pool.slug}, more than a capacity of {pool.capacity}. "
                "Lower their quotas first, or mark the pool over-subscribable.")
    return None


def _field_errors(obj: Any, errors: dict[str, list[str]]) -> dict[str, list[str]]:
    """`errors` plus every field and constraint error of full_clean (a change refused for several reasons says them
    all at once)."""
    try:
        obj.full_clean()
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            errors.setdefault(name, []).extend(messages)
    return errors


def node_pool_create(*, actor: Any, **fields: Any) -> NodePool:
    _require(actor, Action.MANAGE)
    pool = NodePool()
    model_update(pool, fields, NODE_POOL_FIELDS)
    with transaction.atomic():
        model_save(pool)
        audit_record(actor=actor, action="node_pool.create", obj=pool, before=None, after=snapshot(pool))
        _org_changed()
    return pool


def node_pool_update(*, actor: Any, node_pool: NodePool, expected_version: int | None = None,
                     **changes: Any) -> NodePool:
    """`expected_version`: the version the change was read at (a stale one raises StaleWrite), as in every
    `*_update` service here."""
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        pool = NodePool.objects.select_for_update().get(pk=node_pool.pk)
        version_check(pool, expected_version)
        before = snapshot(pool)
        errors: dict[str, list[str]] = {}
        if "slug" in changes and changes["slug"] != pool.slug and pool.quotas.exists():
            errors["slug"] = ["The name of a pool in use cannot change: it names its Kueue objects."]
        changed = model_update(pool, changes, NODE_POOL_FIELDS)
        if not changed:
            return pool
        _field_errors(pool, errors)
        if not {"capacity", "over_subscribable"} & set(errors) and (capacity_error := _pool_capacity_error(pool)):
            errors["capacity"] = [capacity_error]
        if errors:
            raise ValidationError(errors)
        model_save(pool, update_fields=[*changed, "updated_at"])
        audit_record(actor=actor, action="node_pool.update", obj=pool, before=before, after=snapshot(pool))
        _org_changed()
    return pool


def node_pool_delete(*, actor: Any, node_pool: NodePool) -> None:
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        count = node_pool.quotas.count()
        if count:
            raise ValidationError(
                f"{count} quota{'s' if count != 1 else ''} still use {node_pool.slug}; remove them first."
            )
        audit_record(actor=actor, action="node_pool.delete", obj=node_pool, before=snapshot(node_pool), after=None)
        model_delete(node_pool, what=f"pool {node_pool.slug}")
        _org_changed()


# --- departments -----------------------------------------------------------------------------------------------

DEPARTMENT_FIELDS = {"slug", "name", "description", "min_project_weight", "max_project_weight"}


def department_create(*, actor: Any, **fields: Any) -> Department:
    _require(actor, Action.MANAGE)
    department = Department()
    model_update(department, fields, DEPARTMENT_FIELDS)
    with transaction.atomic():
        model_save(department)
        audit_record(actor=actor, action="department.create", obj=department, before=None, after=snapshot(department),
                     department=department)
        _org_changed()
    return department


def department_update(*, actor: Any, department: Department, expected_version: int | None = None,
                      **changes: Any) -> Department:
    _require(actor, Action.MANAGE, department)
    with transaction.atomic():
        department = Department.objects.select_for_update().get(pk=department.pk)
        version_check(department, expected_version)
        before = snapshot(department)
        errors: dict[str, list[str]] = {}
        if "slug" in changes and changes["slug"] != department.slug:
            errors["slug"] = ["A department's name in Kubernetes cannot change once created."]
        changed = model_update(department, changes, DEPARTMENT_FIELDS)
        if not changed:
            return department
        if _field_errors(department, errors):
            raise ValidationError(errors)
        model_save(department, update_fields=[*changed, "updated_at"])
        audit_record(actor=actor, action="department.update", obj=department, before=before,
                     after=snapshot(department), department=department)
        _org_changed()
    return department


def department_delete(*, actor: Any, department: Department) -> None:
    _require(actor, Action.MANAGE, department)
    with transaction.atomic():
        count = department.projects.count()
        if count:
            raise ValidationError(
                f"{department.name} still has {count} project{'s' if count != 1 else ''}; move or delete them first."
            )
        audit_record(actor=actor, action="department.delete", obj=department, before=snapshot(department), after=None)
        for quota in department.quotas.select_related("node_pool"):
            audit_record(actor=actor, action="quota.delete", obj=quota, before=snapshot(quota), after=None)
        model_delete(department, what=f"department {department.slug}")
        _org_changed()


# --- projects --------------------------------------------------------------------------------------------------

PROJECT_FIELDS = set(access.PROJECT_FIELDS)


def _project_namespace_error(project: Project) -> str | None:
    """The namespace rule (validators.project_namespace_error) plus its database half: a namespace named after
    another project (`<prefix><its slug>`) is that project's. One that another project holds already is refused
    by the uniqueness check."""
    if error := project_namespace_error(project.namespace):
        return error
    prefix = kueue_names().project_prefix
    owner = project.namespace[len(prefix):] if project.namespace.startswith(prefix) else ""
    if owner and owner != project.slug and Project.objects.filter(slug=owner).exclude(pk=project.pk).exists():
        return f"{project_namespace_rule()}; '{project.namespace}' is reserved for project {owner}."
    return None


def _clean_project(project: Project) -> None:
    """full_clean plus the namespace rule, every error at once (a namespace that is no DNS label, or that another
    project holds, gets that one message)."""
    errors: dict[str, list[ValidationError]] = {}
    try:
        project.full_clean()
    except ValidationError as exc:
        errors = exc.update_error_dict(errors)
    if "namespace" not in errors and (namespace_error := _project_namespace_error(project)):
        errors["namespace"] = [ValidationError(namespace_error, code="project_namespace")]
    if errors:
        raise ValidationError(errors)


def project_create(*, actor: Any, department: Department, **fields: Any) -> Project:
    _require(actor, Action.MANAGE_PROJECTS, department)
    project = Project(department=department)
    model_update(project, fields, PROJECT_FIELDS - {"department"})
    if not project.namespace and project.slug:
        project.namespace = kueue_names().project_namespace(project.slug)
    _clean_project(project)
    with transaction.atomic():
        model_save(project)
        audit_record(actor=actor, action="project.create", obj=project, before=None, after=snapshot(project),
                     project=project)
        _org_changed()
    return project


def project_update(
    *, actor: Any, project: Project, over_quota_weights: Mapping[str, Any] | None = None,
    expected_version: int | None = None, **changes: Any
) -> Project:
    """Change a project: the fields `access.project_fields_editable` gives this actor (team leads: the default
    priority class; department admins and admins: every field), and, in the same transaction, its over-quota
    weights per pool (`over_quota_weights`: pool slug -> weight, each through `quota_update`).

    Resending a field's current value is no change. One audit row for the project ("project.default_priority_class"
    when only that changed, else "project.update") plus one per changed quota.
    """
    editable = access.project_fields_editable(actor, project)
    if not editable:
        raise PermissionDenied(DENIED)
    unknown = set(changes) - PROJECT_FIELDS
    if unknown:
        raise ValidationError(f"These fields cannot be changed here: {', '.join(sorted(unknown))}.")
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        version_check(project, expected_version)
        changed = [name for name, value in changes.items() if getattr(project, name) != value]
        if set(changed) - editable:
            raise PermissionDenied(DENIED)
        for immutable in ("slug", "namespace", "department"):
            if immutable in changed:
                raise ValidationError({immutable: "This cannot change once the project exists in the cluster."})
        if changed:
            before = snapshot(project)
            for name in changed:
                setattr(project, name, changes[name])
            model_save(project, update_fields=[*changed, "updated_at"])
            only_defaults = set(changed) <= access.PROJECT_DEFAULTS_FIELDS
            audit_record(actor=actor, action="project.default_priority_class" if only_defaults else "project.update",
                         obj=project, before=before, after=snapshot(project), project=project)
            if not only_defaults:  # the default priority class is the portal's; Kueue never sees it
                _org_changed()
        if over_quota_weights:
            _project_weights_set(actor=actor, project=project, weights=over_quota_weights)
    return project


def _project_weights_set(*, actor: Any, project: Project, weights: Mapping[str, Any]) -> None:
    """Set a project's weight on several pools (pool slug -> weight); every refusal is reported, none is saved."""
    quotas = {quota.node_pool.slug: quota for quota in project.quotas.select_related("node_pool")}
    errors: list[str] = []
    for slug, weight in weights.items():
        quota = quotas.get(slug)
        if quota is None:
            errors.append(f"{project.name} has no quota on {slug}.")
            continue
        try:
            quota_update(actor=actor, quota=quota, over_quota_weight=weight)
        except ValidationError as exc:
            errors.extend(f"{slug}: {message}" for message in exc.messages)
    if errors:
        raise ValidationError({"over_quota_weights": errors})


def project_delete(*, actor: Any, project: Project) -> None:
    _require(actor, Action.MANAGE_PROJECTS, project)
    with transaction.atomic():
        audit_record(actor=actor, action="project.delete", obj=project, before=snapshot(project), after=None,
                     department=project.department)
        for quota in project.quotas.all():
            audit_record(actor=actor, action="quota.delete", obj=quota, before=snapshot(quota), after=None,
                         department=project.department)
        model_delete(project, what=f"project {project.slug}")
        _org_changed()


# --- quotas ----------------------------------------------------------------------------------------------------


def quota_rule_errors(
    *,
    pool: NodePool,
    deserved: int,
    limit: int | None,
    department: Department,
    for_project: bool,
    department_deserved: int = 0,
    siblings_deserved: int = 0,
    projects_deserved: int = 0,
    other_departments_deserved: int = 0,
) -> dict[str, str]:
    """The rules that span rows (DESIGN section 4) for one quota, given the sums around it; pure, no queries.

    For a project quota: `department_deserved` is its department's deserved units on the pool and
    `siblings_deserved` what the department's other projects hold. For a department quota: `projects_deserved`
    is what its projects hold and `other_departments_deserved` what the other departments hold. Returns
    field -> message in the order the rules are checked (empty: the quota is fine). The quota table (its Save and
    its live check, `_quota_table_plan`) calls this with proposed values; `_check_quota_rules` with the stored ones.
    """
    errors: dict[str, str] = {}
    if limit is not None and limit < deserved:
        errors["limit"] = f"The limit ({limit}) cannot be below the deserved quota ({deserved})."
    if for_project:
        if siblings_deserved + deserved > department_deserved:
            room = max(0, department_deserved - siblings_deserved)
            errors["deserved"] = (
                f"{department.name} has {department_deserved} deserved units on {pool.slug} and its other projects "
                f"hold {siblings_deserved}, so this project can have at most {room}. Raise the department's quota "
                "first or lower another project's."
            )
        return errors
    if deserved < projects_deserved:
        errors["deserved"] = (
            f"The department's projects hold {projects_deserved} deserved units on {pool.slug}; "
            "lower theirs before lowering the department's."
        )
    elif not pool.over_subscribable and other_departments_deserved + deserved > pool.capacity:
        room = max(0, pool.capacity - other_departments_deserved)
        errors["deserved"] = (
            f"{pool.slug} has {pool.capacity} units and other departments hold {other_departments_deserved}, so at "
            f"most {room} can be given here. Lower another department's quota, or mark the pool over-subscribable."
        )
    return errors


def _check_quota_rules(quota: Quota) -> None:
    """The rules that span rows (against the stored sums), the model's constraints, then the quota guards: raises
    every refusal at once. The constraints come after the rules, whose messages say more than theirs."""
    errors: dict[str, list[str]] = {name: [message] for name, message in _quota_rule_errors(quota).items()}
    if not errors:
        quota.validate_constraints()
    for name, messages in _quota_guard_errors(quota).items():
        errors.setdefault(name, []).extend(messages)
    if errors:
        raise ValidationError(errors)


def _quota_rule_errors(quota: Quota) -> dict[str, str]:
    """`quota_rule_errors` for one quota against the stored sums around it."""
    pool = quota.node_pool
    if quota.project is not None:
        department = quota.project.department
        department_quota = Quota.objects.filter(department=department, node_pool=pool).first()
        return quota_rule_errors(
            pool=pool, deserved=quota.deserved, limit=quota.limit, department=department, for_project=True,
            department_deserved=department_quota.deserved if department_quota else 0,
            siblings_deserved=Quota.objects.filter(project__department=department, node_pool=pool)
            .exclude(pk=quota.pk).aggregate(total=Sum("deserved"))["total"] or 0,
        )
    assert quota.department is not None and quota.department_id is not None  # one owner: quota_set checked
    return quota_rule_errors(
        pool=pool, deserved=quota.deserved, limit=quota.limit, department=quota.department, for_project=False,
        projects_deserved=Quota.objects.filter(project__department_id=quota.department_id, node_pool=pool)
        .aggregate(total=Sum("deserved"))["total"] or 0,
        other_departments_deserved=0 if pool.over_subscribable else Quota.objects.filter(
            department__isnull=False, node_pool=pool).exclude(pk=quota.pk).aggregate(total=Sum("deserved"))["total"]
        or 0,
    )


def _quota_scope(quota: Quota) -> dict[str, Any]:
    return {"project": quota.project} if quota.project_id else {"department": quota.department}


SIZE_FIELDS = access.QUOTA_FIELDS - {access.QUOTA_WEIGHT_FIELD}


def _decimal(value: Any) -> Any:
    """A weight or CPU count as a Decimal when it reads as a finite number; anything else is left for full_clean."""
    if value is None or isinstance(value, Decimal):
        return value
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return value
    return number if number.is_finite() else value


def _quota_values(values: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _decimal(value) if name in {"over_quota_weight", "cpu_cores"} else value
            for name, value in values.items()}


def _quota_field_errors(actor: Any, quota: Quota, changed: Iterable[str]) -> dict[str, list[str]]:
    """What is wrong with the changed fields of one quota on their own: a team lead's weight outside the
    department's bounds, then each field's type and bounds (full_clean). No rule that spans rows."""
    errors: dict[str, list[str]] = {}
    exclude = []
    weight = quota.over_quota_weight
    if access.QUOTA_WEIGHT_FIELD in changed and quota.project is not None and access.quota_weight_bounded(
            actor, quota):
        department = quota.project.department
        low, high = department.min_project_weight, department.max_project_weight
        if not isinstance(weight, Decimal) or not weight.is_finite() or not low <= weight <= high:
            errors[access.QUOTA_WEIGHT_FIELD] = [
                f"Choose a weight between {format(low.normalize(), 'f')} and {format(high.normalize(), 'f')}, "
                f"the bounds set for {department.name}."
            ]
            exclude.append(access.QUOTA_WEIGHT_FIELD)
    try:
        # The pool and the owner are rows the services looked up themselves: no query to check they exist.
        quota.full_clean(exclude=[*exclude, "node_pool", "department", "project"], validate_unique=False,
                         validate_constraints=False)
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            errors.setdefault(name, []).extend(messages)
    return errors


def _quota_guard_errors(quota: Quota) -> dict[str, list[str]]:
    """Every registered guard's refusal of this quota's proposed size, by field (empty: all guards pass)."""
    errors: dict[str, list[str]] = {}
    for hook in _quota_guards:
        try:
            hook(quota)
        except ValidationError as exc:
            found = exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.messages}
            for name, messages in found.items():
                errors.setdefault(name, []).extend(messages)
    return errors


def _run_quota_guards(quota: Quota) -> None:
    if errors := _quota_guard_errors(quota):
        raise ValidationError(errors)


def _quota_audit_action(before: dict[str, Any] | None, changed: Iterable[str]) -> str:
    if before is None:
        return "quota.create"
    return "quota.weight" if set(changed) == {access.QUOTA_WEIGHT_FIELD} else "quota.update"


def quota_update(*, actor: Any, quota: Quota, expected_version: int | None = None, **changes: Any) -> Quota:
    """Change an existing quota: the one entry for every role, pages and API alike.

    `access.quota_fields_editable` says which fields this actor may change on this quota (team leads: the
    over-quota weight of their projects' quotas, within the department's bounds; department admins: everything of
    their projects' quotas; admins: everything). A change to any other field is refused with PermissionDenied and
    nothing is saved; resending a field's current value is no change. The rules that span rows are checked against
    the stored sums (the pool row is locked first when a size changes). One transaction, one audit row:
    "quota.weight" when only the weight changed, else "quota.update".
    """
    unknown = set(changes) - access.QUOTA_FIELDS
    if unknown:
        raise ValidationError(dict.fromkeys(sorted(unknown), "This field of a quota cannot be changed here."))
    changes = _quota_values(changes)
    with transaction.atomic():
        if set(changes) & SIZE_FIELDS:
            # Sizes are compared with sums over the pool, so changes to one pool go one at a time (as on create).
            NodePool.objects.select_for_update().filter(pk=quota.node_pool_id).first()
        quota = (
            Quota.objects.select_for_update(of=("self",))
            .select_related("node_pool", "department", "project__department")
            .get(pk=quota.pk)
        )
        version_check(quota, expected_version)
        editable = access.quota_fields_editable(actor, quota)
        changed = [name for name, value in changes.items() if getattr(quota, name) != value]
        if not editable or set(changed) - editable:
            raise PermissionDenied(DENIED)
        if not changed:
            return quota
        before = snapshot(quota)
        for name in changed:
            setattr(quota, name, changes[name])
        if errors := _quota_field_errors(actor, quota, changed):
            raise ValidationError(errors)
        if set(changed) & SIZE_FIELDS:
            _check_quota_rules(quota)
        quota.save(update_fields=[*changed, "updated_at"])
        audit_record(actor=actor, action=_quota_audit_action(before, changed), obj=quota, before=before,
                     after=snapshot(quota), **_quota_scope(quota))
        _org_changed()
    return quota


def quota_create(
    *,
    actor: Any,
    node_pool: NodePool,
    department: Department | None = None,
    project: Project | None = None,
    deserved: int,
    limit: int | None = None,
    over_quota_weight: Decimal | int | str = 1,
    cpu_cores: Decimal | None = None,
    memory_gib: int | None = None,
) -> Quota:
    """Give a department or project a quota on a pool it has none on yet (quota_update changes existing ones):
    admins for a department, department admins for its projects."""
    if (department is None) == (project is None):
        raise ValidationError("A quota belongs to exactly one department or project.")
    quota = Quota(node_pool=node_pool, department=department, project=project, **_quota_values({
        "deserved": deserved, "limit": limit, "over_quota_weight": over_quota_weight, "cpu_cores": cpu_cores,
        "memory_gib": memory_gib,
    }))
    if not access.can_manage_quotas_of(actor, quota.owner):
        raise PermissionDenied(DENIED)
    with transaction.atomic():
        # Lock the pool row: every rule compares sums over the pool, so changes to one pool go one at a time.
        quota.node_pool = NodePool.objects.select_for_update().get(pk=node_pool.pk)
        if Quota.objects.filter(node_pool=node_pool, department=department, project=project).exists():
            raise ValidationError(f"This {'project' if project is not None else 'department'} already has a quota "
                                  "on that pool.")
        if errors := _quota_field_errors(actor, quota, access.QUOTA_FIELDS):
            raise ValidationError(errors)
        _check_quota_rules(quota)
        quota.save()
        audit_record(actor=actor, action="quota.create", obj=quota, before=None, after=snapshot(quota),
                     **_quota_scope(quota))
        _org_changed()
    return quota


def quota_set(
    *,
    actor: Any,
    node_pool: NodePool,
    department: Department | None = None,
    project: Project | None = None,
    deserved: int,
    limit: int | None,
    over_quota_weight: Decimal | int | str = 1,
    cpu_cores: Decimal | None = None,
    memory_gib: int | None = None,
) -> Quota:
    """Give a department or project its quota on a pool with every field as given: quota_update when it has one,
    quota_create when not (the demo organisation and scripts)."""
    values: dict[str, Any] = {"deserved": deserved, "limit": limit, "over_quota_weight": over_quota_weight,
                              "cpu_cores": cpu_cores, "memory_gib": memory_gib}
    existing = None
    if (department is None) != (project is None):
        existing = Quota.objects.filter(node_pool=node_pool, department=department, project=project).first()
    if existing is not None:
        return quota_update(actor=actor, quota=existing, **values)
    return quota_create(actor=actor, node_pool=node_pool, department=department, project=project, **values)


_quota_guards: list[Callable[[Quota], None]] = []


def quota_guard(check: Callable[[Quota], None]) -> Callable[[Quota], None]:
    """Register an extra check run before a quota's size is saved (the workloads app's non-preemptible guard)."""
    _quota_guards.append(check)
    return check


def quota_delete(*, actor: Any, quota: Quota) -> None:
    if not access.can_manage_quotas_of(actor, quota.owner):
        raise PermissionDenied(DENIED)
    if quota.department_id is not None and Quota.objects.filter(
        project__department_id=quota.department_id, node_pool_id=quota.node_pool_id
    ).exists():
        raise ValidationError("The department's projects still have quotas on this pool; remove those first.")
    with transaction.atomic():
        _run_quota_guards(Quota(pk=quota.pk, node_pool=quota.node_pool, project=quota.project,
                                department=quota.department, deserved=0))
        audit_record(actor=actor, action="quota.delete", obj=quota, before=snapshot(quota), after=None,
                     **_quota_scope(quota))
        quota.delete()
        _org_changed()


# --- the quota table: many cells of one department at once ------------------------------------------------------


class QuotaTableError(ValidationError):
    """A refused quota table save: `rows` holds every message, by row index (in the order given) and field."""

    def __init__(self, rows: dict[int, dict[str, list[str]]]) -> None:
        self.rows = rows
        super().__init__([f"Row {index}, {name}: {message}" for index, fields in sorted(rows.items())
                          for name, messages in fields.items() for message in messages])


def quota_table_save(*, actor: Any, department: Department, rows: Sequence[Mapping[str, Any]]) -> list[Quota]:
    """Change many cells of a department's quota table at once: all or nothing, every refusal reported.

    Each row names a cell, `node_pool` (a pool slug) and `project` (a project of the department by id or slug;
    None for the department's own row), and any of deserved, limit, over_quota_weight, cpu_cores and memory_gib.
    A row's `version` is the version of the cell's quota it was read at (0: read without a quota); a cell changed
    since is refused with a message that names the change (the page always sends it, the API may).
    An existing quota changes only the fields its row names; a new one needs `deserved` (no limit and weight 1
    unless given). Every row is checked by `_quota_table_plan` (see there), and any refusal raises QuotaTableError
    with all of them and saves nothing. Returns the quotas that changed; one audit row each.
    """
    _require(actor, Action.MANAGE_PROJECTS, department)
    with transaction.atomic():
        plan = _quota_table_plan(actor=actor, department=department, rows=rows, lock=True)
        if plan.errors:
            raise QuotaTableError(plan.errors)
        for _, quota, changed, before in plan.proposals:
            if before is None:
                quota.save()
            else:
                quota.save(update_fields=[*changed, "updated_at"])
            audit_record(actor=actor, action=_quota_audit_action(before, changed), obj=quota, before=before,
                         after=snapshot(quota), **_quota_scope(quota))
        if plan.proposals:
            _org_changed()
    return [quota for _, quota, _, _ in plan.proposals]


def quota_table_check(*, actor: Any, department: Department,
                      rows: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, list[str]]]:
    """Every refusal `quota_table_save` would give for these rows, by row index and field; saves nothing.

    The quota table's live check: it runs Save's own `_quota_table_plan` (the guards included, such as the running
    non-preemptible one), so what the check passes Save accepts, unless the stored table changed in between.
    """
    _require(actor, Action.MANAGE_PROJECTS, department)
    return _quota_table_plan(actor=actor, department=department, rows=rows, lock=False).errors


@dataclass
class _QuotaTablePlan:
    errors: dict[int, dict[str, list[str]]]
    # (row index, the quota with the proposed values, the fields that change, its snapshot before or None if new)
    proposals: list[tuple[int, Quota, list[str], dict[str, Any] | None]]


def _quota_table_plan(*, actor: Any, department: Department, rows: Sequence[Mapping[str, Any]],
                      lock: bool) -> _QuotaTablePlan:
    """The proposed table and every refusal of it: the one rule function of the quota table's Save and live check.

    Every row is checked (the fields this actor may change on it, per `access.quota_fields_editable`, each field's
    bounds, then the rules that span rows on the proposed table as a whole, so the order of the rows does not
    matter, then the quota guards for the rows still fine). Only the cells the rows name are checked: a rule that
    spans rows is reported on the changed cell that breaks it. `lock` takes the pool and quota rows for update (Save).
    """
    errors: dict[int, dict[str, list[str]]] = {}

    def refuse(index: int, name: str, message: str) -> None:
        errors.setdefault(index, {}).setdefault(name, []).append(message)

    project_keys = [row.get("project") for row in rows if row.get("project") is not None]
    pool_rows = NodePool.objects.filter(slug__in={row.get("node_pool") for row in rows}).order_by("pk")
    pools = {pool.slug: pool for pool in (pool_rows.select_for_update() if lock else pool_rows)}
    projects = {project.pk: project for project in department.projects.filter(
        Q(pk__in=[key for key in project_keys if isinstance(key, int)])
        | Q(slug__in=[key for key in project_keys if isinstance(key, str)])
    )}
    project_by_key: dict[int | str, Project] = {}
    for found in projects.values():
        project_by_key[found.pk] = project_by_key[found.slug] = found
    pools_by_pk = {pool.pk: pool for pool in pools.values()}
    # Every quota of the department and its projects on these pools: the sums the rules compare.
    cells: dict[tuple[int | None, int], Quota] = {}
    quota_rows = Quota.objects.filter(Q(department=department) | Q(project__department=department),
                                      node_pool__in=list(pools_by_pk))
    for quota in (quota_rows.select_for_update(of=("self",)) if lock else quota_rows):
        quota.node_pool = pools_by_pk[quota.node_pool_id]
        if quota.project_id is None:
            quota.department = department
        elif quota.project_id in projects:
            quota.project = projects[quota.project_id]
        cells[(quota.project_id, quota.node_pool_id)] = quota
    other_departments = {
        row["node_pool"]: row["total"] for row in Quota.objects.filter(
            department__isnull=False, node_pool__in=list(pools_by_pk)).exclude(department=department)
        .values("node_pool").annotate(total=Sum("deserved"))
    }

    seen: dict[tuple[int | None, int], int] = {}
    proposals: list[tuple[int, Quota, list[str], dict[str, Any] | None]] = []
    for index, row in enumerate(rows):
        values = {name: value for name, value in row.items() if name not in {"node_pool", "project", "version"}}
        for name in sorted(set(values) - access.QUOTA_FIELDS):
            refuse(index, name, "This field of a quota cannot be changed here.")
        slug = row.get("node_pool")
        pool = pools.get(slug) if isinstance(slug, str) else None
        if pool is None:
            refuse(index, "node_pool", f"There is no node pool {slug!r}.")
        project: Project | None = None
        if row.get("project") is not None:
            project = project_by_key.get(row["project"])
            if project is None:
                refuse(index, "project", f"{department.name} has no project {row['project']!r}.")
        if index in errors or pool is None:
            continue
        key = (project.pk if project else None, pool.pk)
        if key in seen:
            refuse(index, "node_pool", f"Row {seen[key]} already changes this quota.")
            continue
        seen[key] = index
        values = _quota_values(values)
        stored_quota = cells.get(key)
        if (stale := _quota_cell_stale(stored_quota, row.get("version"), project or department, pool)) is not None:
            refuse(index, "version", stale)
            continue
        before: dict[str, Any] | None = None
        if stored_quota is None:
            if "deserved" not in values:
                refuse(index, "deserved", "A new quota needs its deserved units (0 for none).")
                continue
            quota = Quota(node_pool=pool, project=project, department=None if project else department)
            changed = list(access.QUOTA_FIELDS)
        else:
            quota, before = stored_quota, snapshot(stored_quota)
            changed = [name for name, value in values.items() if getattr(quota, name) != value]
        if before is None and not access.can_manage_quotas_of(actor, quota.owner):
            refused = sorted(values)
        else:
            editable = access.quota_fields_editable(actor, quota)
            refused = sorted(name for name in changed if name not in editable)
        for name in refused:
            refuse(index, name, "You may not change this field of this quota.")
        if refused:
            continue
        if not changed:
            continue
        stored = {name: getattr(quota, name) for name in access.QUOTA_FIELDS}
        for name, value in values.items():
            setattr(quota, name, value)
        if field_errors := _quota_field_errors(actor, quota, changed):
            for name, messages in field_errors.items():
                for message in messages:
                    refuse(index, name, message)
            for name, value in stored.items():  # the other rows' sums count what is stored
                setattr(quota, name, value)
            continue
        cells[key] = quota
        proposals.append((index, quota, changed, before))

    # The rules that span rows, on the proposed table: the sums include every proposed cell.
    for index, quota, changed, before in proposals:
        if not (before is None or set(changed) & SIZE_FIELDS):
            continue
        pool_id = quota.node_pool_id
        department_quota = cells.get((None, pool_id))
        projects_deserved = sum(cell.deserved for (project_id, cell_pool), cell in cells.items()
                                if project_id is not None and cell_pool == pool_id)
        rule_errors = quota_rule_errors(
            pool=quota.node_pool, deserved=quota.deserved, limit=quota.limit, department=department,
            for_project=quota.project_id is not None,
            department_deserved=department_quota.deserved if department_quota else 0,
            siblings_deserved=projects_deserved - quota.deserved, projects_deserved=projects_deserved,
            other_departments_deserved=other_departments.get(pool_id, 0),
        )
        for name, message in rule_errors.items():
            refuse(index, name, message)
    for index, quota, changed, before in proposals:
        if index in errors or not (before is None or set(changed) & SIZE_FIELDS):
            continue
        for name, messages in _quota_guard_errors(quota).items():
            for message in messages:
                refuse(index, name, message)
    return _QuotaTablePlan(errors=errors, proposals=proposals)


def _quota_cell_stale(quota: Quota | None, read_version: int | None, owner: Department | Project,
                      pool: NodePool) -> str | None:
    """Why a quota table row read at `read_version` is stale (None: it is not, or the row did not say)."""
    if read_version is None or read_version == (quota.version if quota else 0):
        return None
    label = f"the quota of {owner.name} on {pool.slug}"
    if quota is None:
        return (f"{label[:1].upper()}{label[1:]} was removed since you opened the table. Nothing was saved; reload "
                "to see the current values, then make your change again.")
    return stale_message(quota, read_version, label=label)


# --- priority classes ------------------------------------------------------------------------------------------

PRIORITY_CLASS_FIELDS = {"name", "value", "preemptible", "description"}


def priority_class_create(*, actor: Any, **fields: Any) -> PriorityClass:
    _require(actor, Action.MANAGE)
    priority_class = PriorityClass()
    model_update(priority_class, fields, PRIORITY_CLASS_FIELDS)
    with transaction.atomic():
        model_save(priority_class)
        audit_record(actor=actor, action="priority_class.create", obj=priority_class, before=None,
                     after=snapshot(priority_class))
        _org_changed()
    return priority_class


def priority_class_update(*, actor: Any, priority_class: PriorityClass, expected_version: int | None = None,
                          **changes: Any) -> PriorityClass:
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        priority_class = PriorityClass.objects.select_for_update().get(pk=priority_class.pk)
        version_check(priority_class, expected_version)
        before = snapshot(priority_class)
        if "name" in changes and changes["name"] != priority_class.name:
            raise ValidationError({"name": "A priority class cannot be renamed: running work refers to it by name."})
        changed = model_update(priority_class, changes, PRIORITY_CLASS_FIELDS)
        if not changed:
            return priority_class
        model_save(priority_class, update_fields=[*changed, "updated_at"])
        audit_record(actor=actor, action="priority_class.update", obj=priority_class, before=before,
                     after=snapshot(priority_class))
        _org_changed()
    return priority_class


def priority_class_delete(*, actor: Any, priority_class: PriorityClass) -> None:
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        audit_record(actor=actor, action="priority_class.delete", obj=priority_class, before=snapshot(priority_class),
                     after=None)
        model_delete(priority_class, what=f"priority class {priority_class.name}")
        _org_changed()


# --- org -> Kueue reconcile bookkeeping (the worker runs the reconcile itself) -----------------------------------

KUEUE_SYNC_TASK = "worker.tasks.kueue_sync"
KUEUE_SYNC_INTENT = "kueue.sync"  # an outbox row per request (apps.core.intents); a pass closes those it covered
KUEUE_SYNC_DEADLINE = timedelta(seconds=60)
KUEUE_SYNC_STALE_AFTER = timedelta(minutes=5)  # a claim older than this belonged to a worker that died
KUEUE_SYNC_RUNS_KEPT = 500


def kueue_sync_request_by(*, actor: Any) -> None:
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


# --- data sources and image pull secrets (per project; admins and department admins) ----------------------------

PULL_SECRET_INTENT = "pull_secret.sync"  # noqa: S105 - an intent kind
PULL_SECRET_TASK = "worker.tasks.pull_secret_sync"  # noqa: S105 - a task name
SECRET_SYNC_DEADLINE = timedelta(seconds=60)


def _require_data_manager(actor: Any, project: Project) -> None:
    if not access.can_manage_data_of(actor, project):
        raise PermissionDenied("Only admins and the department's admins manage a project's data and registries.")


def _data_source_state(source: DataSource) -> dict[str, Any]:
    return {"name": source.name, "kind": source.kind, "target": source.target, "mount_path": source.mount_path,
            "read_only": source.read_only}


def data_source_create(*, actor: Any, project: Project, name: str, kind: str, mount_path: str,
                       read_only: bool = True, claim_name: str = "", nfs_server: str = "", nfs_path: str = "",
                       description: str = "") -> DataSource:
    """A PVC that exists in the project's namespace, or an NFS export, that the project's workloads may mount."""
    _require_data_manager(actor, project)
    source = DataSource(project=project, name=name, kind=kind, mount_path=mount_path, read_only=read_only,
                        claim_name=claim_name if kind == DataSource.Kind.PVC else "",
                        nfs_server=nfs_server if kind == DataSource.Kind.NFS else "",
                        nfs_path=nfs_path if kind == DataSource.Kind.NFS else "", description=description)
    errors: dict[str, list[str]] = {}
    try:
        source.full_clean()
    except ValidationError as exc:
        errors = exc.message_dict
    errors.setdefault("mount_path", []).extend(
        message for message in mount_path_errors(mount_path) if message not in errors.get("mount_path", []))
    if kind == DataSource.Kind.PVC:
        try:
            validate_dns_subdomain(claim_name)
        except ValidationError as exc:
            errors.setdefault("claim_name", []).extend(exc.messages)
    elif kind == DataSource.Kind.NFS:
        try:
            validate_nfs_server(nfs_server)
        except ValidationError as exc:
            errors.setdefault("nfs_server", []).extend(exc.messages)
        if not nfs_path.startswith("/") or "\x00" in nfs_path or ".." in nfs_path.split("/"):
            errors.setdefault("nfs_path", []).append("Give the export's absolute path on the server, e.g. /exports/"
                                                     "imagenet.")
    errors = {field: messages for field, messages in errors.items() if messages}
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        source.save()
        audit_record(actor=actor, action="data_source.create", obj=source, before=None,
                     after=_data_source_state(source), project=project)
    return source


def data_source_delete(*, actor: Any, data_source: DataSource) -> None:
    """Workloads already submitted keep their mount (their Job has it); new ones cannot pick it."""
    _require_data_manager(actor, data_source.project)
    with transaction.atomic():
        audit_record(actor=actor, action="data_source.delete", obj=data_source,
                     before=_data_source_state(data_source), after=None, project=data_source.project)
        data_source.delete()


def _pull_secret_state(secret: ImagePullSecret) -> dict[str, Any]:
    return {"name": secret.name, "registry": secret.registry, "username": secret.username}  # never the password


def pull_secret_create(*, actor: Any, project: Project, name: str, registry: str, username: str,
                       password: str) -> ImagePullSecret:
    """Registry credentials for every pod of the project; the password is sealed until the worker writes the
    Secret, then forgotten."""
    _require_data_manager(actor, project)
    secret = ImagePullSecret(project=project, name=name, registry=registry, username=username)
    errors: dict[str, list[str]] = {}
    try:
        secret.full_clean()
    except ValidationError as exc:
        errors = exc.message_dict
    if not password or len(password) > 4096 or "\x00" in password:
        errors.setdefault("password", []).append("Give the registry password or token (at most 4096 characters).")
    if errors:
        raise ValidationError(errors)
    secret.sealed = seal({"registry": registry, "username": username, "password": password})
    with transaction.atomic():
        secret.save()
        audit_record(actor=actor, action="pull_secret.create", obj=secret, before=None,
                     after=_pull_secret_state(secret), project=project)
        intents.intent_record(kind=PULL_SECRET_INTENT, task=PULL_SECRET_TASK, target_id=secret.pk,
                              deadline=SECRET_SYNC_DEADLINE)
    return secret


def pull_secret_delete(*, actor: Any, pull_secret: ImagePullSecret) -> None:
    """Marked deleted now (new pods stop naming it); the worker removes the Secret, then the row."""
    _require_data_manager(actor, pull_secret.project)
    with transaction.atomic():
        ImagePullSecret.objects.filter(pk=pull_secret.pk).update(deleted_at=timezone.now(), sealed="")
        audit_record(actor=actor, action="pull_secret.delete", obj=pull_secret,
                     before=_pull_secret_state(pull_secret), after=None, project=pull_secret.project)
        intents.intent_record(kind=PULL_SECRET_INTENT, task=PULL_SECRET_TASK, target_id=pull_secret.pk,
                              deadline=SECRET_SYNC_DEADLINE)


