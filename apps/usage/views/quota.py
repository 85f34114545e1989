"""The quota dashboard. Thin: the selector scopes through the access module and computes the figures."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.http import AuthenticatedRequest, conditional_poll, poll_etag

from .. import selectors


@login_required
@require_GET
def quota(request: AuthenticatedRequest) -> HttpResponse:
    """Per pool: bars, the cohort tree (cluster -> departments -> projects) and the table, under the budgets the
    viewer may see (full page only). Polls every 15 s while the tab is visible; each poll is a conditional GET
    answered 304 from five small reads in one round trip when nothing changed (full page loads skip those
    aggregates)."""
    if not access.can_anywhere(request.user, Action.VIEW):
        raise PermissionDenied("You may not see quotas anywhere.")
    user = request.user
    if not request.htmx:  # a full page load renders; only the polls need the fingerprint
        # The budgets change by the hour, not by the poll: the full page shows them, the polls leave them be.
        pools, budgets = selectors.quota_page(user=user)
        return render(request, "usage/quota.html", {"pools": pools, "budgets": budgets})
    etag = poll_etag(access.grants_fingerprint(user), selectors.quota_dashboard_marker())
    return conditional_poll(request, etag, lambda: render(request, "usage/partials/_quota_live.html",
                                                          {"pools": selectors.quota_dashboard(user=user)}))
