"""Quota usage dashboards. Thin: the selector scopes through the access module and computes the figures."""

from __future__ import annotations

import hashlib

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.utils.http import parse_etags, quote_etag
from django.views.decorators.http import require_GET

from apps.accounts import access
from apps.accounts.access import Action

from . import selectors


@login_required
@require_GET
def quota(request: HttpRequest) -> HttpResponse:
    """Per pool: bars, the cohort tree (cluster -> departments -> projects) and the table. Polls every 15 s while the
    tab is visible; each poll is a conditional GET answered 304 from four aggregates when nothing changed (full
    page loads skip those aggregates)."""
    if not access.can_anywhere(request.user, Action.VIEW):
        raise PermissionDenied("You may not see quotas anywhere.")
    user = request.user
    if not request.htmx:  # a full page load renders; only the polls need the fingerprint
        return render(request, "usage/quota.html", {"pools": selectors.quota_dashboard(user=user)})
    grants = access.grants_for(user)
    scope = f"{user.pk}|{sorted(grants.everywhere)}|{sorted(grants.departments.items())}|" \
            f"{sorted(grants.projects.items())}"
    etag = quote_etag(hashlib.sha256(f"{scope}|{selectors.quota_dashboard_marker()}".encode()).hexdigest()[:32])
    if etag in parse_etags(request.headers.get("If-None-Match", "")):
        response: HttpResponse = HttpResponseNotModified()
    else:
        response = render(request, "usage/partials/_quota_live.html", {"pools": selectors.quota_dashboard(user=user)})
    response["ETag"] = etag
    response["Cache-Control"] = "private, no-cache"
    patch_vary_headers(response, ["HX-Request", "Cookie"])
    return response
