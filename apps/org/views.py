"""Organisation pages. Views stay thin: access via apps.accounts.access, reads via selectors, writes via services."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from . import selectors


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    pools, departments = selectors.org_tree(user=request.user)
    return render(request, "org/overview.html", {"pools": pools, "departments": departments})
