"""The budgets page (docs/architecture.md, Budgets): every budget the user may see with its figures, and the forms of
those who set them. It lives in apps.usage, not apps.org, because the figures are reads over the GPU-hour ledger.

Who: the page is for those who set budgets somewhere (admins, department admins, team leads); everyone else reads
the budgets of their scopes on the quota and GPU-hours pages. A budget the user may not see answers 404; one they see
but may not change, 403. Writes go through apps.org.services, which check the rules and write the audit rows.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.forms import apply_service_errors
from apps.core.http import AuthenticatedRequest
from apps.core.views import confirm_delete_page
from apps.org import selectors as org_selectors
from apps.org import services as org_services
from apps.org.forms import BudgetForm
from apps.org.models import Budget

from ..budgets import budget_statuses

NOT_A_BUDGET_SETTER = "Only admins, department admins and team leads set budgets."


def _require_setter(request: AuthenticatedRequest) -> None:
    if not access.can_manage_budgets_somewhere(request.user):
        raise PermissionDenied(NOT_A_BUDGET_SETTER)


def _changeable(request: AuthenticatedRequest, pk: int) -> Budget:
    budget = get_object_or_404(org_selectors.budgets_for(request.user), pk=pk)
    owner = budget.owner
    if owner is None or not access.can_manage_budgets_of(request.user, owner):
        raise PermissionDenied("You may read this budget but not change it.")
    return budget


@login_required
@require_GET
def budgets(request: AuthenticatedRequest) -> HttpResponse:
    """The list: per budget spent of the amount (a bar), the burn rate per day, the projected end of period, the
    thresholds with those crossed this period, and whether it holds new preemptible work. Fixed queries however many
    budgets (budget_statuses, one for the crossings)."""
    _require_setter(request)
    user, now = request.user, timezone.now()
    statuses = budget_statuses(list(org_selectors.budgets_for(user)), now=now)
    crossings = org_selectors.budget_crossings([status.budget.pk for status in statuses])
    rows = []
    for status in statuses:
        budget = status.budget
        crossed = set(crossings.get(budget.pk, {}).get(status.period.start, []))
        owner = budget.owner
        rows.append({
            "status": status, "period_text": budget.period_text(now),
            "thresholds": [{"percent": threshold, "crossed": threshold in crossed} for threshold in budget.thresholds],
            "can_change": owner is not None and access.can_manage_budgets_of(user, owner),
        })
    context: dict[str, Any] = {"rows": rows}
    template = "usage/partials/_budget_rows.html" if request.htmx else "usage/budgets.html"
    return render(request, template, context)


def _form_page(request: AuthenticatedRequest, form: BudgetForm, save: Any, *, title: str, success: str,
               submit_label: str) -> HttpResponse:
    if request.method == "POST" and form.is_valid():
        try:
            save(form)
        except ValidationError as exc:
            apply_service_errors(form, exc)
        else:
            messages.success(request, success)
            return redirect("usage:budgets")
    return render(request, "usage/budget_form.html", {
        "form": form, "title": title, "cancel": "usage:budgets", "submit_label": submit_label})


def _choices(request: AuthenticatedRequest) -> dict[str, Any]:
    user = request.user
    return {"departments": org_selectors.departments_for(user, Action.MANAGE_PROJECTS),
            "projects": org_selectors.projects_for(user, Action.EDIT_WEIGHT)}


@login_required
@require_http_methods(["GET", "POST"])
def budget_create(request: AuthenticatedRequest) -> HttpResponse:
    _require_setter(request)
    form = BudgetForm(request.POST or None, **_choices(request))

    def save(f: BudgetForm) -> Budget:
        return org_services.budget_create(actor=request.user, **f.cleaned_data)

    return _form_page(request, form, save, title="New budget", success="Budget created.", submit_label="Create")


@login_required
@require_http_methods(["GET", "POST"])
def budget_edit(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    budget = _changeable(request, pk)
    form = BudgetForm(request.POST or None, instance=budget, **_choices(request))

    def save(f: BudgetForm) -> Budget:
        changes = {k: v for k, v in f.cleaned_data.items() if k not in {"department", "project"}}
        return org_services.budget_update(actor=request.user, budget=budget, expected_version=f.expected_version,
                                          **changes)

    return _form_page(request, form, save, title=f"Edit the budget of {budget.owner}", success="Budget saved.",
                      submit_label="Save")


@login_required
@require_http_methods(["GET", "POST"])
def budget_delete(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    budget = _changeable(request, pk)
    return confirm_delete_page(
        request, obj=budget, kind="budget", cancel="usage:budgets", redirect_to="usage:budgets",
        delete=lambda: org_services.budget_delete(actor=request.user, budget=budget),
        success="Budget deleted.", consequences="A hold it put on new preemptible work ends.")
