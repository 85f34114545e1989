"""Quotas, one at a time: the rules that span rows, each field's bounds by role, and the quota guards (the
receivers of `signals.quota_size_proposed`). A change to a quota's deserved units is announced with
`signals.quota_deserved_changed` (the usage ledger records it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, cast

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Sum

from apps.accounts import access
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.services import version_check, version_check_locked
from apps.org import signals
from apps.org.models import Department, NodePool, Project, Quota

from .common import DENIED
from .kueue_sync import _org_changed
from .notifications import quota_channels_record


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
    """The rules that span rows (docs/architecture.md, Where each rule lives) for one quota, given the sums around
    it; pure, no queries.

    For a project quota: `department_deserved` is its department's deserved units on the pool and
    `siblings_deserved` what the department's other projects hold. For a department quota: `projects_deserved`
    is what its projects hold and `other_departments_deserved` what the other departments hold. Returns
    field -> message in the order the rules are checked (empty: the quota is fine). The quota table (its Save and
    its live check, `_quota_table_plan`) calls this with proposed values; `_check_quota_rules` with the stored ones.
    """
    errors: dict[str, str] = {}
    if pool.serving:
        errors["node_pool"] = (f"{pool.slug} is a serving pool: it has no quotas (and no Kueue queues); reserve its "
                               "cards for projects' inference services instead.")
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


def _quota_field_errors(actor: Actor, quota: Quota, changed: Iterable[str]) -> dict[str, list[str]]:
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
    """Every guard's refusal of this quota's proposed size, by field (empty: all guards pass). The guards are the
    receivers of `signals.quota_size_proposed` (the workloads app's: running non-preemptible work)."""
    errors: dict[str, list[str]] = {}
    for _, response in signals.quota_size_proposed.send(sender=Quota, quota=quota):
        refusals = cast("Mapping[str, list[str]] | None", response)  # the stubs type a response as a string
        for name, messages in (refusals or {}).items():
            errors.setdefault(name, []).extend(messages)
    return errors


def _run_quota_guards(quota: Quota) -> None:
    if errors := _quota_guard_errors(quota):
        raise ValidationError(errors)


def _quota_audit_action(before: dict[str, Any] | None, changed: Iterable[str]) -> str:
    if before is None:
        return "quota.create"
    return "quota.weight" if set(changed) == {access.QUOTA_WEIGHT_FIELD} else "quota.update"


def quota_update(*, actor: Actor, quota: Quota, expected_version: int | None = None, **changes: Any) -> Quota:
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
        if "deserved" in changed:
            signals.quota_deserved_changed.send(sender=Quota, quota=quota, deserved=quota.deserved)
        quota_channels_record(changes=[(quota, audit_record(
            actor=actor, action=_quota_audit_action(before, changed), obj=quota, before=before,
            after=snapshot(quota), **_quota_scope(quota)))])
        _org_changed()
    return quota


def quota_create(
    *,
    actor: Actor,
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
        signals.quota_deserved_changed.send(sender=Quota, quota=quota, deserved=quota.deserved)
        quota_channels_record(changes=[(quota, audit_record(
            actor=actor, action="quota.create", obj=quota, before=None, after=snapshot(quota), **_quota_scope(quota)))])
        _org_changed()
    return quota


def quota_set(
    *,
    actor: Actor,
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


def quota_delete(*, actor: Actor, quota: Quota, expected_version: int | None = None) -> None:
    """`expected_version`: the version the delete was based on (a stale one raises StaleWrite)."""
    if not access.can_manage_quotas_of(actor, quota.owner):
        raise PermissionDenied(DENIED)
    if quota.department_id is not None and Quota.objects.filter(
        project__department_id=quota.department_id, node_pool_id=quota.node_pool_id
    ).exists():
        raise ValidationError("The department's projects still have quotas on this pool; remove those first.")
    with transaction.atomic():
        version_check_locked(quota, expected_version)
        _run_quota_guards(Quota(pk=quota.pk, node_pool=quota.node_pool, project=quota.project,
                                department=quota.department, deserved=0))
        quota_channels_record(changes=[(quota, audit_record(
            actor=actor, action="quota.delete", obj=quota, before=snapshot(quota), after=None, **_quota_scope(quota)))])
        quota.delete()
        signals.quota_deserved_changed.send(sender=Quota, quota=quota, deserved=0)
        _org_changed()
