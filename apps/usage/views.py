"""Quota usage dashboards. Thin: the selector scopes through the access module and computes the figures."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.accounts import access
from apps.accounts.access import Action

from . import selectors


@login_required
@require_GET
def quota(request: HttpRequest) -> HttpResponse:
    """Per pool: bars, the cohort tree (cluster -> departments -> projects) and the table. Polls every 15 s."""
    if not access.can_anywhere(request.user, Action.VIEW):
        raise PermissionDenied("You may not see quotas anywhere.")
    pools = selectors.quota_dashboard(user=request.user)
    template = "usage/partials/_quota_live.html" if request.htmx else "usage/quota.html"
    return render(request, template, {"pools": pools})
