"""Writes to the organisation. Each service checks access, enforces the quota rules, saves in one transaction
and writes its audit row in that same transaction, so a refused change leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import Q, Sum
from django.utils import timezone

from apps.accounts import access
from apps.accounts.access import Action, can
from apps.core import intents
from apps.core.audit import audit_record, snapshot
from apps.core.kueue_names import names as kueue_names

from .models import Department, KueueSyncRun, KueueSyncState, NodePool, PriorityClass, Project, Quota


def _org_changed() -> None:
    """Every committed organisation change asks for a Kueue reconcile (it coalesces bursts of changes)."""
    kueue_sync_request()


def _require(actor: Any, action: Action, obj: Any = None) -> None:
    access.require(actor, action, obj, "You may not make this change.")


def _save(obj: models.Model, *, update_fields: list[str] | None = None) -> None:
    """Validate every field and model constraint, then save; database races surface as ValidationError too."""
    obj.full_clean()
    try:
        with transaction.atomic():
            obj.save(update_fields=update_fields)
    except IntegrityError as exc:  # a concurrent write won a uniqueness race
        raise ValidationError("This conflicts with a change made at the same time; reload and try again.") from exc


def _apply(obj: models.Model, changes: dict[str, Any], allowed: set[str]) -> list[str]:
    unknown = set(changes) - allowed
    if unknown:
        raise ValidationError(f"These fields cannot be changed here: {', '.join(sorted(unknown))}.")
    changed = []
    for name, value in changes.items():
        if getattr(obj, name) != value:
            setattr(obj, name, value)
            changed.append(name)
    return changed


# --- node pools ------------------------------------------------------------------------------------------------

NODE_POOL_FIELDS = {
    "slug", "name", "description", "gpu_resource", "gpu_product", "cut", "mig_profile", "replicas_per_card",
    "node_labels", "node_taints", "capacity", "card_fraction_numerator", "card_fraction_denominator",
    "over_subscribable", "price_per_card_hour",
}


def _check_pool_capacity(pool: NodePool) -> None:
    if pool.over_subscribable:
        return
    assigned = Quota.objects.filter(node_pool=pool, department__isnull=False).aggregate(total=Sum("deserved"))["total"]
    if assigned and assigned > pool.capacity:
        raise ValidationError({
            "capacity": f"Departments hold {assigned} deserved units on {pool.slug}, more than a capacity of "
                        f"{pool.capacity}. Lower their quotas first, or mark the pool over-subscribable."
        })


def node_pool_create(*, actor: Any, **fields: Any) -> NodePool:
    _require(actor, Action.MANAGE)
    pool = NodePool()
    _apply(pool, fields, NODE_POOL_FIELDS)
    with transaction.atomic():
        _save(pool)
        audit_record(actor=actor, action="node_pool.create", obj=pool, before=None, after=snapshot(pool))
        _org_changed()
    return pool


def node_pool_update(*, actor: Any, node_pool: NodePool, **changes: Any) -> NodePool:
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        pool = NodePool.objects.select_for_update().get(pk=node_pool.pk)
        before = snapshot(pool)
        if "slug" in changes and changes["slug"] != pool.slug and pool.quotas.exists():
            raise ValidationError({"slug": "The name of a pool in use cannot change: it names its Kueue objects."})
        changed = _apply(pool, changes, NODE_POOL_FIELDS)
        if not changed:
            return pool
        _save(pool, update_fields=[*changed, "updated_at"])
        _check_pool_capacity(pool)
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
        node_pool.delete()
        _org_changed()


# --- departments -----------------------------------------------------------------------------------------------

DEPARTMENT_FIELDS = {"slug", "name", "description", "min_project_weight", "max_project_weight"}


def department_create(*, actor: Any, **fields: Any) -> Department:
    _require(actor, Action.MANAGE)
    department = Department()
    _apply(department, fields, DEPARTMENT_FIELDS)
    with transaction.atomic():
        _save(department)
        audit_record(actor=actor, action="department.create", obj=department, before=None, after=snapshot(department),
                     department=department)
        _org_changed()
    return department


def department_update(*, actor: Any, department: Department, **changes: Any) -> Department:
    _require(actor, Action.MANAGE, department)
    with transaction.atomic():
        department = Department.objects.select_for_update().get(pk=department.pk)
        before = snapshot(department)
        if "slug" in changes and changes["slug"] != department.slug:
            raise ValidationError({"slug": "A department's name in Kubernetes cannot change once created."})
        changed = _apply(department, changes, DEPARTMENT_FIELDS)
        if not changed:
            return department
        _save(department, update_fields=[*changed, "updated_at"])
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
        department.delete()
        _org_changed()


# --- projects --------------------------------------------------------------------------------------------------

PROJECT_FIELDS = {"slug", "name", "description", "department", "namespace", "does_not_lend", "default_priority_class"}


def project_create(*, actor: Any, department: Department, **fields: Any) -> Project:
    _require(actor, Action.MANAGE_PROJECTS, department)
    project = Project(department=department)
    _apply(project, fields, PROJECT_FIELDS - {"department"})
    if not project.namespace and project.slug:
        project.namespace = kueue_names().project_namespace(project.slug)
    with transaction.atomic():
        _save(project)
        audit_record(actor=actor, action="project.create", obj=project, before=None, after=snapshot(project),
                     project=project)
        _org_changed()
    return project


def project_update(*, actor: Any, project: Project, **changes: Any) -> Project:
    _require(actor, Action.MANAGE_PROJECTS, project)
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        before = snapshot(project)
        for immutable in ("slug", "namespace", "department"):
            if immutable in changes and changes[immutable] != getattr(project, immutable):
                raise ValidationError({immutable: "This cannot change once the project exists in the cluster."})
        changed = _apply(project, changes, PROJECT_FIELDS)
        if not changed:
            return project
        _save(project, update_fields=[*changed, "updated_at"])
        audit_record(actor=actor, action="project.update", obj=project, before=before, after=snapshot(project),
                     project=project)
        _org_changed()
    return project


def project_delete(*, actor: Any, project: Project) -> None:
    _require(actor, Action.MANAGE_PROJECTS, project)
    with transaction.atomic():
        audit_record(actor=actor, action="project.delete", obj=project, before=snapshot(project), after=None,
                     department=project.department)
        for quota in project.quotas.all():
            audit_record(actor=actor, action="quota.delete", obj=quota, before=snapshot(quota), after=None,
                         department=project.department)
        project.delete()
        _org_changed()


def project_defaults_set(*, actor: Any, project: Project, default_priority_class: PriorityClass | None) -> Project:
    """A team lead's change of the priority class a project's submissions start from."""
    _require(actor, Action.EDIT_WEIGHT, project)
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        if project.default_priority_class_id == (default_priority_class.pk if default_priority_class else None):
            return project
        before = snapshot(project)
        project.default_priority_class = default_priority_class
        project.save(update_fields=["default_priority_class", "updated_at"])
        audit_record(actor=actor, action="project.default_priority_class", obj=project, before=before,
                     after=snapshot(project), project=project)
    return project


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
    field -> message in the order the rules are checked (empty: the quota is fine). The quota table's live
    validation calls this with proposed values; `_check_quota_rules` with the stored ones.
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
    """The rules that span rows, checked against the stored sums; raises the first refusal."""
    pool = quota.node_pool
    if quota.limit is not None and quota.limit < quota.deserved:
        raise ValidationError(
            {"limit": f"The limit ({quota.limit}) cannot be below the deserved quota ({quota.deserved})."}
        )
    if quota.project is not None:
        department = quota.project.department
        department_quota = Quota.objects.filter(department=department, node_pool=pool).first()
        errors = quota_rule_errors(
            pool=pool, deserved=quota.deserved, limit=quota.limit, department=department, for_project=True,
            department_deserved=department_quota.deserved if department_quota else 0,
            siblings_deserved=Quota.objects.filter(project__department=department, node_pool=pool)
            .exclude(pk=quota.pk).aggregate(total=Sum("deserved"))["total"] or 0,
        )
    else:
        assert quota.department is not None and quota.department_id is not None  # one owner: quota_set checked
        errors = quota_rule_errors(
            pool=pool, deserved=quota.deserved, limit=quota.limit, department=quota.department, for_project=False,
            projects_deserved=Quota.objects.filter(project__department_id=quota.department_id, node_pool=pool)
            .aggregate(total=Sum("deserved"))["total"] or 0,
            other_departments_deserved=0 if pool.over_subscribable else Quota.objects.filter(
                department__isnull=False, node_pool=pool).exclude(pk=quota.pk).aggregate(total=Sum("deserved"))["total"]
            or 0,
        )
    if errors:
        field_name, message = next(iter(errors.items()))
        raise ValidationError({field_name: message})


def _quota_scope(quota: Quota) -> dict[str, Any]:
    return {"project": quota.project} if quota.project_id else {"department": quota.department}


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
    """Create or change a department's or project's quota on a pool."""
    if (department is None) == (project is None):
        raise ValidationError("A quota belongs to exactly one department or project.")
    if project is not None:
        _require(actor, Action.MANAGE_PROJECTS, project)
    else:
        _require(actor, Action.MANAGE, department)
    with transaction.atomic():
        # Lock the pool row: every rule compares sums over the pool, so changes to one pool go one at a time.
        pool = NodePool.objects.select_for_update().get(pk=node_pool.pk)
        quota = Quota.objects.select_for_update().filter(
            node_pool=pool, department=department, project=project
        ).first()
        before = snapshot(quota) if quota else None
        if quota is None:
            quota = Quota(node_pool=pool, department=department, project=project)
        quota.node_pool = pool
        changed = _apply(quota, {
            "deserved": deserved, "limit": limit, "over_quota_weight": Decimal(str(over_quota_weight)),
            "cpu_cores": cpu_cores, "memory_gib": memory_gib,
        }, {"deserved", "limit", "over_quota_weight", "cpu_cores", "memory_gib"})
        if before is not None and not changed:
            return quota
        quota.full_clean(validate_constraints=False)
        _check_quota_rules(quota)  # before the constraints, whose messages are generic
        quota.validate_constraints()
        for hook in _quota_guards:
            hook(quota)
        quota.save()
        audit_record(actor=actor, action="quota.create" if before is None else "quota.update", obj=quota,
                     before=before, after=snapshot(quota), **_quota_scope(quota))
        _org_changed()
    return quota


def quota_create(
    *,
    actor: Any,
    node_pool: NodePool,
    department: Department | None = None,
    project: Project | None = None,
    **values: Any,
) -> Quota:
    """Give a department or project a quota on a pool it has none on yet (quota_set also changes existing ones)."""
    if project is not None:
        _require(actor, Action.MANAGE_PROJECTS, project)
    elif department is not None:
        _require(actor, Action.MANAGE, department)
    with transaction.atomic():
        NodePool.objects.select_for_update().filter(pk=node_pool.pk).first()  # the same lock quota_set takes
        if (department is None) != (project is None) and Quota.objects.filter(
            node_pool=node_pool, department=department, project=project
        ).exists():
            owner = "project" if project is not None else "department"
            raise ValidationError(f"This {owner} already has a quota on that pool.")
        return quota_set(actor=actor, node_pool=node_pool, department=department, project=project, **values)


_quota_guards: list[Callable[[Quota], None]] = []


def quota_guard(check: Callable[[Quota], None]) -> Callable[[Quota], None]:
    """Register an extra check run before a quota is saved (the workloads app's non-preemptible guard)."""
    _quota_guards.append(check)
    return check


def quota_weight_set(*, actor: Any, quota: Quota, over_quota_weight: Decimal | int | str) -> Quota:
    """A team lead's change of a project's over-quota weight, inside the department's bounds."""
    weight = Decimal(str(over_quota_weight))
    if quota.project_id is None:
        _require(actor, Action.MANAGE, quota.department)
    else:
        _require(actor, Action.EDIT_WEIGHT, quota.project)
    with transaction.atomic():
        quota = (
            Quota.objects.select_for_update(of=("self",))
            .select_related("project__department", "node_pool")
            .get(pk=quota.pk)
        )
        if quota.project is not None and not can(actor, Action.MANAGE_PROJECTS, quota.project):
            department = quota.project.department
            if not department.min_project_weight <= weight <= department.max_project_weight:
                raise ValidationError({"over_quota_weight": (
                    f"Choose a weight between {format(department.min_project_weight.normalize(), 'f')} and "
                    f"{format(department.max_project_weight.normalize(), 'f')}, the bounds set for {department.name}."
                )})
        if quota.over_quota_weight == weight:
            return quota
        before = snapshot(quota)
        quota.over_quota_weight = weight
        quota.full_clean()
        quota.save(update_fields=["over_quota_weight", "updated_at"])
        audit_record(actor=actor, action="quota.weight", obj=quota, before=before, after=snapshot(quota),
                     **_quota_scope(quota))
        _org_changed()
    return quota


def quota_delete(*, actor: Any, quota: Quota) -> None:
    if quota.project_id:
        _require(actor, Action.MANAGE_PROJECTS, quota.project)
    else:
        _require(actor, Action.MANAGE, quota.department)
        assert quota.department_id is not None  # a stored quota has exactly one owner (its check constraint)
        if Quota.objects.filter(project__department_id=quota.department_id, node_pool_id=quota.node_pool_id).exists():
            raise ValidationError("The department's projects still have quotas on this pool; remove those first.")
    with transaction.atomic():
        for hook in _quota_guards:
            hook(Quota(pk=quota.pk, node_pool=quota.node_pool, project=quota.project, department=quota.department,
                       deserved=0))
        audit_record(actor=actor, action="quota.delete", obj=quota, before=snapshot(quota), after=None,
                     **_quota_scope(quota))
        quota.delete()
        _org_changed()


# --- priority classes ------------------------------------------------------------------------------------------

PRIORITY_CLASS_FIELDS = {"name", "value", "preemptible", "description"}


def priority_class_create(*, actor: Any, **fields: Any) -> PriorityClass:
    _require(actor, Action.MANAGE)
    priority_class = PriorityClass()
    _apply(priority_class, fields, PRIORITY_CLASS_FIELDS)
    with transaction.atomic():
        _save(priority_class)
        audit_record(actor=actor, action="priority_class.create", obj=priority_class, before=None,
                     after=snapshot(priority_class))
        _org_changed()
    return priority_class


def priority_class_update(*, actor: Any, priority_class: PriorityClass, **changes: Any) -> PriorityClass:
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        priority_class = PriorityClass.objects.select_for_update().get(pk=priority_class.pk)
        before = snapshot(priority_class)
        if "name" in changes and changes["name"] != priority_class.name:
            raise ValidationError({"name": "A priority class cannot be renamed: running work refers to it by name."})
        changed = _apply(priority_class, changes, PRIORITY_CLASS_FIELDS)
        if not changed:
            return priority_class
        _save(priority_class, update_fields=[*changed, "updated_at"])
        audit_record(actor=actor, action="priority_class.update", obj=priority_class, before=before,
                     after=snapshot(priority_class))
        _org_changed()
    return priority_class


def priority_class_delete(*, actor: Any, priority_class: PriorityClass) -> None:
    _require(actor, Action.MANAGE)
    with transaction.atomic():
        audit_record(actor=actor, action="priority_class.delete", obj=priority_class, before=snapshot(priority_class),
                     after=None)
        priority_class.delete()
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


def kueue_sync_finish(*, run: KueueSyncRun, changes: list[str], error: str = "") -> bool:
    """Record the outcome and release the claim; True when a change arrived meanwhile and another pass is due."""
    with transaction.atomic():
        run.finished_at = timezone.now()
        run.ok = not error
        run.changes = changes
        run.error = error
        run.save(update_fields=["finished_at", "ok", "changes", "error"])
        KueueSyncState.objects.filter(pk=1).update(running_since=None)
        stale = KueueSyncRun.objects.values_list("pk", flat=True)[KUEUE_SYNC_RUNS_KEPT:]
        KueueSyncRun.objects.filter(pk__in=list(stale)).delete()
        state = KueueSyncState.objects.get(pk=1)
    return state.requested_at is not None and state.requested_at > run.started_at
