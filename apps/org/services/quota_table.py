"""The quota table: many cells of one department at once, checked by one rule function for Save and the live
check (apps/org/quota_table.py is its page)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, Sum

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.services import stale_message
from apps.org import signals
from apps.org.models import Department, NodePool, Project, Quota

from .common import _require
from .kueue_sync import _org_changed
from .notifications import quota_channels_record
from .quotas import (
    SIZE_FIELDS,
    _quota_audit_action,
    _quota_field_errors,
    _quota_guard_errors,
    _quota_scope,
    _quota_values,
    quota_rule_errors,
)


class QuotaTableError(ValidationError):
    """A refused quota table save: `rows` holds every message, by row index (in the order given) and field."""

    def __init__(self, rows: dict[int, dict[str, list[str]]]) -> None:
        self.rows = rows
        super().__init__([f"Row {index}, {name}: {message}" for index, fields in sorted(rows.items())
                          for name, messages in fields.items() for message in messages])


def quota_table_save(*, actor: Actor, department: Department, rows: Sequence[Mapping[str, Any]]) -> list[Quota]:
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
        changes = []
        for _, quota, changed, before in plan.proposals:
            if before is None:
                quota.save()
            else:
                quota.save(update_fields=[*changed, "updated_at"])
            if before is None or "deserved" in changed:
                signals.quota_deserved_changed.send(sender=Quota, quota=quota, deserved=quota.deserved)
            changes.append((quota, audit_record(
                actor=actor, action=_quota_audit_action(before, changed), obj=quota, before=before,
                after=snapshot(quota), **_quota_scope(quota))))
        quota_channels_record(changes=changes)
        if plan.proposals:
            _org_changed()
    return [quota for _, quota, _, _ in plan.proposals]


def quota_table_check(*, actor: Actor, department: Department,
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


def _quota_table_plan(*, actor: Actor, department: Department, rows: Sequence[Mapping[str, Any]],
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
