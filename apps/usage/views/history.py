"""The quota history page: one project's deserved quota, units in use and units borrowed on one pool over time.
Thin: the form limits the choices to what the viewer may see, apps.usage.history reads the ledger."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.http import AuthenticatedRequest

from ..forms.history import QuotaHistoryForm
from ..history import SPANS, quota_history


@login_required
@require_GET
def quota_history_page(request: AuthenticatedRequest) -> HttpResponse:
    """One project's deserved, in use and borrowed units on one pool over the last day, week or month (the ledger);
    a bad choice is a form error with status 400."""
    if not access.can_anywhere(request.user, Action.VIEW):
        raise PermissionDenied("You may not see quotas anywhere.")
    form = QuotaHistoryForm(request.GET, viewer=request.user)
    history = None
    if form.is_valid():
        history = quota_history(project=form.cleaned_data["project"], pool=form.cleaned_data["pool"],
                                span=form.cleaned_data["span"])
    return render(request, "usage/quota_history.html", {
        "form": form, "history": history, "spans": SPANS, "projects": form.projects,
        "pools": form.pool_choices(), "chart": history.chart_data() if history else None,
        "rows": list(zip(history.times, history.deserved, history.used, history.borrowed, strict=True)) if history
        else [],
    }, status=200 if history else 400)
