"""The editable quota table of one department: rows = the department and its projects, columns = node pools.

The page checks the proposed table on every keystroke (htmx) with `services.quota_table_check`, and Save hands the
same changed cells to `services.quota_table_save` (which the API's `PATCH /api/v1/departments/<id>/quotas/` calls
too): both run the services' one rule function over them (the quota guards included, such as the running
non-preemptible one), so the live check never passes what Save refuses. Only changed cells are checked: an
untouched cell is never flagged, and a rule that spans rows is reported on the changed cell that breaks it.
Save is all or nothing, each refusal reported on its cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django import forms

from apps.accounts import access
from apps.core.actors import Actor
from apps.core.forms import VERSION_MISSING
from apps.core.http import parse_int

from . import selectors, services
from .forms import WEIGHT_BOUNDS
from .models import MAX_POOL_CAPACITY, Department, NodePool, Project, Quota


@dataclass
class Cell:
    key: str  # "d-<pool id>" for the department, "p<project id>-<pool id>" for a project
    pool: NodePool
    quota: Quota | None
    editable: bool
    deserved: int = 0
    limit: int | None = None
    weight: Decimal = Decimal(1)
    active: bool = False  # the cell holds (or will hold) a quota
    read_version: int | None = None  # the version of its quota the page was rendered from (0: none), as posted
    errors: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)  # bound form fields: deserved, limit, weight, version

    @property
    def changed(self) -> bool:
        if self.quota is None:
            return self.active
        return (self.deserved, self.limit, self.weight) != (
            self.quota.deserved, self.quota.limit, self.quota.over_quota_weight
        )


@dataclass
class Row:
    key: str
    label: str
    owner: Department | Project
    editable: bool
    cells: list[Cell]

    @property
    def is_department(self) -> bool:
        return isinstance(self.owner, Department)


@dataclass
class PoolTotals:
    pool: NodePool
    department_deserved: int
    projects_deserved: int
    other_departments_deserved: int

    @property
    def department_remaining(self) -> int:
        return self.department_deserved - self.projects_deserved

    @property
    def pool_remaining(self) -> int:
        return self.pool.capacity - self.other_departments_deserved - self.department_deserved


class QuotaTable:
    """Build with the department and the user; pass the POST data to validate or save a proposal."""

    def __init__(self, *, department: Department, user: Actor, data: Any = None) -> None:
        self.department = department
        self.user = user
        table = selectors.department_quota_table(department=department)
        self.pools = table.pools
        self.other_departments = table.other_departments_deserved
        self.rows = [self._row("d", department.name, department, table.department_quotas,
                               access.can_manage_quotas_of(user, department))]
        for project_row in table.projects:
            project = project_row.project
            self.rows.append(self._row(f"p{project.pk}", project.name, project, project_row.quotas,
                                       access.can_manage_quotas_of(user, project)))
        self.form = self._form(data)
        for row in self.rows:
            for cell in row.cells:
                cell.fields = {part: self.form[f"{cell.key}-{part}"]
                               for part in ("deserved", "limit", "weight", "version")}
        self.bound = data is not None
        self.stale = False  # a save refused because a cell changed since the page was rendered
        self._read()

    @property
    def editable(self) -> bool:
        return any(row.editable for row in self.rows)

    def _row(self, key: str, label: str, owner: Department | Project, quotas: dict[int, Quota], editable: bool) -> Row:
        cells = []
        for pool in self.pools:
            quota = quotas.get(pool.pk)
            cell = Cell(key=f"{key}-{pool.pk}", pool=pool, quota=quota, editable=editable)
            if quota is not None:
                cell.deserved, cell.limit, cell.weight = quota.deserved, quota.limit, quota.over_quota_weight
                cell.active = True
            cells.append(cell)
        return Row(key=key, label=label, owner=owner, editable=editable, cells=cells)

    def _form(self, data: Any) -> forms.Form:
        form = forms.Form(data)
        for row in self.rows:
            for cell in row.cells:
                quota = cell.quota
                common: dict[str, Any] = {"required": False, "disabled": not row.editable}
                form.fields[f"{cell.key}-deserved"] = forms.IntegerField(
                    min_value=0, max_value=MAX_POOL_CAPACITY, initial=quota.deserved if quota else None,
                    label=f"{row.label} deserved on {cell.pool.slug}", **common)
                form.fields[f"{cell.key}-limit"] = forms.IntegerField(
                    min_value=0, max_value=MAX_POOL_CAPACITY, initial=quota.limit if quota else None,
                    label=f"{row.label} limit on {cell.pool.slug}", **common)
                form.fields[f"{cell.key}-weight"] = forms.DecimalField(
                    max_digits=8, decimal_places=2, validators=WEIGHT_BOUNDS,
                    initial=format(quota.over_quota_weight.normalize(), "f") if quota else None,
                    label=f"{row.label} weight on {cell.pool.slug}", **common)
                form.fields[f"{cell.key}-version"] = forms.CharField(
                    widget=forms.HiddenInput, initial=quota.version if quota else 0, **common)
        return form

    def _read(self) -> None:
        """Read the proposal from the form into the cells (shape errors land on their cells)."""
        if not self.bound:
            return
        self.form.is_valid()
        for row in self.rows:
            for cell in row.cells:
                for part in ("deserved", "limit", "weight"):
                    # An ErrorList iterates as its messages; the stubs type its items as ValidationError | str.
                    cell.errors.extend(self.form.errors.get(f"{cell.key}-{part}", []))  # type: ignore[arg-type]
                if not row.editable or cell.errors:
                    continue
                data = self.form.cleaned_data
                cell.read_version = parse_int(data.get(f"{cell.key}-version"))
                deserved = data.get(f"{cell.key}-deserved")
                limit = data.get(f"{cell.key}-limit")
                weight = data.get(f"{cell.key}-weight")
                if cell.quota is None and deserved is None and limit is None:
                    cell.active = False
                    continue
                if cell.quota is not None and deserved is None:
                    cell.errors.append("Enter the deserved units (0 for none).")
                    continue
                cell.active = True
                cell.deserved = deserved or 0
                cell.limit = limit
                if weight is not None:
                    cell.weight = weight
                elif cell.quota is None:
                    cell.weight = Decimal(1)
                if cell.changed and cell.read_version is None:
                    cell.errors.append(VERSION_MISSING)

    # --- the live check -----------------------------------------------------------------------------------------

    def _deserved(self, row: Row, pool_index: int) -> int:
        cell = row.cells[pool_index]
        return cell.deserved if cell.active else 0

    def totals(self) -> list[PoolTotals]:
        result = []
        for index, pool in enumerate(self.pools):
            result.append(PoolTotals(
                pool=pool,
                department_deserved=self._deserved(self.rows[0], index),
                projects_deserved=sum(self._deserved(row, index) for row in self.rows[1:]),
                other_departments_deserved=self.other_departments.get(pool.pk, 0),
            ))
        return result

    def check(self) -> bool:
        """The live check: every refusal Save would give, on its cell (shape errors are on their cells already);
        True when there is none."""
        changes, rows = self._changes()
        if rows:
            self._report(changes, services.quota_table_check(actor=self.user, department=self.department, rows=rows))
        return not self.error_count

    @property
    def error_count(self) -> int:
        return sum(1 for row in self.rows for cell in row.cells if cell.errors)

    @property
    def changed_cells(self) -> list[tuple[Row, Cell]]:
        return [(row, cell) for row in self.rows if row.editable for cell in row.cells if cell.changed]

    # --- save ---------------------------------------------------------------------------------------------------

    def _changes(self) -> tuple[list[tuple[Row, Cell]], list[dict[str, Any]]]:
        """The changed cells without shape errors, and the rows the services take for them (in the same order)."""
        changes = [(row, cell) for row, cell in self.changed_cells if not cell.errors]
        rows = [{"node_pool": cell.pool.slug, "project": None if row.is_department else row.owner.pk,
                 "deserved": cell.deserved, "limit": cell.limit, "over_quota_weight": cell.weight,
                 "version": cell.read_version}
                for row, cell in changes]
        return changes, rows

    @staticmethod
    def _report(changes: list[tuple[Row, Cell]], errors: dict[int, dict[str, list[str]]]) -> None:
        for index, fields in errors.items():
            changes[index][1].errors.extend(message for messages in fields.values() for message in messages)

    def save(self) -> int:
        """Apply every changed cell through services.quota_table_save: all or nothing. Returns how many cells
        changed; on a refusal (or a shape error on any cell, when the live check runs instead so that every
        message shows) nothing is saved, every message lands on its cell and 0 is returned."""
        if self.error_count:
            self.check()
            return 0
        changes, rows = self._changes()
        try:
            saved = services.quota_table_save(actor=self.user, department=self.department, rows=rows)
        except services.QuotaTableError as exc:
            self._report(changes, exc.rows)
            self.stale = any("version" in fields for fields in exc.rows.values())
            return 0
        return len(saved)
