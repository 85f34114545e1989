"""Budgets (docs/architecture.md, Budgets): who may set them, the rule that a department's budget caps the sum of its
projects' (same period and metric), and the sweep's writes (threshold crossings, holds and their release).

A hold is a fact in the database (`Budget.held_period_start`), which the Kueue sync turns into `stopPolicy: Hold` on
the scope's elastic LocalQueues. Turning the hold off (`on_exceed` notify) or deleting a held budget clears it at once;
raising the amount (or changing its period or metric) asks the sweep to judge that budget again right after commit,
and the sweep releases the hold only if the scope is no longer over it: clearing it on any raise let preemptible work
in until the next sweep held it again when the raise was not enough (this layer cannot count what was spent; the
ledger is apps.usage's).

A change of amount re-arms the thresholds of the current period the scope has not reached under the new amount
(a crossing keeps what was spent when it was recorded, a floor of what is spent now), so 80 % of a raised budget
notifies again instead of never."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from apps.accounts import access
from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.services import model_update, version_check, version_check_locked
from apps.core.tasks import enqueue_on_commit
from apps.org.models import Budget, BudgetCrossing, Department, Project

from .common import DENIED, _field_errors
from .kueue_sync import kueue_sync_request

BUDGET_FIELDS = {"department", "project", "period", "metric", "amount", "thresholds", "on_exceed"}
BUDGET_CHANGEABLE = BUDGET_FIELDS - {"department", "project"}
NO_OWNER = "Give a department or a project."
BUDGET_EVALUATE_TASK = "worker.tasks.budget_evaluate"


def _snapshot(budget: Budget) -> dict[str, Any]:
    """The audit snapshot, the hold's moment as ISO text (audit rows are JSON)."""
    data = snapshot(budget)
    if data.get("held_period_start") is not None:
        data["held_period_start"] = data["held_period_start"].isoformat()
    return data


def _owner_of(fields: dict[str, Any]) -> Department | Project | None:
    return fields.get("project") or fields.get("department")


def _require_manager(actor: Actor, owner: Department | Project) -> None:
    if not access.can_manage_budgets_of(actor, owner):
        raise PermissionDenied(DENIED)


def _period_noun(budget: Budget) -> str:
    return f"{budget.get_period_display().lower()}ly {budget.get_metric_display()}"


def _amount(value: Decimal | None) -> str:
    return format((value or Decimal(0)).normalize(), "f")


def budget_cap_errors(budget: Budget) -> dict[str, list[str]]:
    """A department's budget caps the sum of its projects' budgets of the same period and metric; checked from both
    sides (a project budget above what is left, a department budget below what its projects hold)."""
    if budget.amount is None or budget.period not in Budget.Period.values or budget.metric not in Budget.Metric.values:
        return {}  # full_clean names those fields
    kind = {"period": budget.period, "metric": budget.metric}
    if budget.project is not None:
        department = budget.project.department
        cap = Budget.objects.filter(department=department, **kind).first()
        if cap is None:
            return {}
        siblings = Budget.objects.filter(project__department=department, **kind).exclude(pk=budget.pk).aggregate(
            total=Sum("amount"))["total"] or Decimal(0)
        if siblings + budget.amount > cap.amount:
            room = max(Decimal(0), cap.amount - siblings)
            return {"amount": [
                f"{department.name}'s {_period_noun(budget)} budget is {_amount(cap.amount)} and its other projects' "
                f"budgets add up to {_amount(siblings)}, so this project's can be at most {_amount(room)}. Raise the "
                "department's budget first or lower another project's."]}
        return {}
    if budget.department_id is None:
        return {}
    projects = Budget.objects.filter(project__department_id=budget.department_id, **kind).aggregate(
        total=Sum("amount"))["total"] or Decimal(0)
    if budget.amount < projects:
        return {"amount": [
            f"The department's projects' {_period_noun(budget)} budgets add up to {_amount(projects)}; a department's "
            "budget caps theirs, so lower theirs before lowering the department's."]}
    return {}


def _lock_department(budget: Budget) -> None:
    """Lock the department the budget falls under while the cap is checked: two project budgets checked at the same
    time cannot both fit."""
    department_id = budget.project.department_id if budget.project is not None else budget.department_id
    list(Department.objects.select_for_update().filter(pk=department_id or 0))


def _check(budget: Budget) -> None:
    errors = _field_errors(budget, {})
    if not errors:
        errors = budget_cap_errors(budget)
    if errors:
        raise ValidationError(errors)


def _save(budget: Budget, **kwargs: Any) -> None:
    """Save; two writers racing to the same owner, period and metric meet the unique constraint (a 400, not a 500)."""
    try:
        with transaction.atomic():
            budget.save(**kwargs)
    except IntegrityError as exc:
        raise ValidationError({"period": ["This scope already has a budget of that kind for that period."]}) from exc


def budget_create(*, actor: Actor, **fields: Any) -> Budget:
    owner = _owner_of(fields)
    if owner is None:
        raise ValidationError({"department": [NO_OWNER], "project": [NO_OWNER]})
    _require_manager(actor, owner)
    budget = Budget()
    model_update(budget, fields, BUDGET_FIELDS)
    with transaction.atomic():
        _lock_department(budget)
        _check(budget)
        _save(budget)
        audit_record(actor=actor, action="budget.create", obj=budget, before=None, after=_snapshot(budget),
                     department=budget.department, project=budget.project)
        enqueue_on_commit(BUDGET_EVALUATE_TASK, budget.pk)  # a scope already over it is held and told now
    return budget


def _crossings_rearm(budget: Budget) -> None:
    """Forget the current period's crossings the scope had not reached under the new amount (their recorded spent
    below the threshold's share of it): the sweep records and notifies them again once they are reached."""
    start = budget.current_period(timezone.now())[0]
    unreached = [crossing.pk for crossing in budget.crossings.filter(period_start=start)
                 if crossing.spent * 100 < crossing.threshold * budget.amount]
    if unreached:
        budget.crossings.filter(pk__in=unreached).delete()


def budget_update(*, actor: Actor, budget: Budget, expected_version: int | None = None, **changes: Any) -> Budget:
    """Change amount, thresholds, period, metric or what happens when it is exceeded; the owner is fixed (delete and
    create instead)."""
    fixed = sorted(set(changes) & {"department", "project"})
    if fixed:
        raise ValidationError({name: ["A budget's department or project cannot change; delete it and create another."]
                               for name in fixed})
    owner = budget.owner
    assert owner is not None  # a saved budget has exactly one owner (a database constraint)
    _require_manager(actor, owner)
    with transaction.atomic():
        _lock_department(budget)
        budget = Budget.objects.select_for_update(of=("self",)).select_related("project__department", "department").get(
            pk=budget.pk)
        version_check(budget, expected_version)
        before = _snapshot(budget)
        changed = model_update(budget, changes, BUDGET_CHANGEABLE)
        if not changed:
            return budget
        _check(budget)
        released = budget.held_period_start is not None and budget.on_exceed != Budget.OnExceed.HOLD_PREEMPTIBLE
        if released:
            budget.held_period_start = None
            changed.append("held_period_start")
        _save(budget, update_fields=[*changed, "updated_at"])
        if "period" in changed or "metric" in changed:
            budget.crossings.all().delete()  # another kind of budget: its thresholds count afresh
        elif "amount" in changed:
            _crossings_rearm(budget)
        audit_record(actor=actor, action="budget.update", obj=budget, before=before, after=_snapshot(budget),
                     department=budget.department, project=budget.project)
        if released:
            kueue_sync_request()
        enqueue_on_commit(BUDGET_EVALUATE_TASK, budget.pk)  # hold, release or notify now, not at the next sweep
    return budget


def budget_delete(*, actor: Actor, budget: Budget, expected_version: int | None = None) -> None:
    owner = budget.owner
    assert owner is not None
    _require_manager(actor, owner)
    with transaction.atomic():
        version_check_locked(budget, expected_version)
        held = Budget.objects.filter(pk=budget.pk, held_period_start__isnull=False).exists()
        audit_record(actor=actor, action="budget.delete", obj=budget, before=_snapshot(budget), after=None,
                     department=budget.department, project=budget.project)
        budget.delete()
        if held:
            kueue_sync_request()


# --- the sweep's writes (the portal acting by itself: no actor) ---------------------------------------------------


def budget_crossing_record(*, budget: Budget, period_start: datetime, threshold: int,
                           spent: Decimal) -> BudgetCrossing | None:
    """Record that `budget` crossed `threshold` percent in the period starting `period_start`; None when it was
    recorded before (the sweep runs every minute and may run twice at a takeover: each crossing counts once)."""
    with transaction.atomic():
        crossing, created = BudgetCrossing.objects.get_or_create(
            budget=budget, period_start=period_start, threshold=threshold, defaults={"spent": spent})
    return crossing if created else None


def budget_hold_set(*, budget: Budget, period_start: datetime) -> bool:
    """Hold the scope's new preemptible work for the rest of the period (a conditional UPDATE: True only for the
    sweep that set it), audited, with a reconcile asked for in the same transaction."""
    with transaction.atomic():
        rows = Budget.objects.filter(pk=budget.pk, on_exceed=Budget.OnExceed.HOLD_PREEMPTIBLE).exclude(
            held_period_start=period_start)
        earlier = rows.select_for_update().order_by("pk").values_list("held_period_start", flat=True).first()
        if not rows.update(held_period_start=period_start):
            return False
        audit_record(actor=None, action="budget.hold", obj=budget,
                     before={"held_period_start": earlier.isoformat() if earlier else None},
                     after={"held_period_start": period_start.isoformat()}, department=budget.department,
                     project=budget.project)
        kueue_sync_request()
    return True


def budget_hold_release(*, budget: Budget) -> bool:
    """End a hold (the period rolled over, or the budget is no longer exceeded); True only for the sweep that did."""
    with transaction.atomic():
        held = Budget.objects.filter(pk=budget.pk, held_period_start__isnull=False).values_list(
            "held_period_start", flat=True).first()
        if held is None or not Budget.objects.filter(pk=budget.pk, held_period_start=held).update(
                held_period_start=None):
            return False
        audit_record(actor=None, action="budget.release", obj=budget, before={"held_period_start": held.isoformat()},
                     after={"held_period_start": None}, department=budget.department, project=budget.project)
        kueue_sync_request()
    return True
