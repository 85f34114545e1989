"""Use over time: the organisation's or a department's allocated, deserved and busy cards per pool, by day or hour,
with the top consumers, the held-but-idle hours and each project's share of the last weeks beside its weight. Thin:
the form picks the window and scope (choices limited to what the viewer may see), apps.usage.reports reads."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.core.csv_export import csv_response
from apps.core.http import AuthenticatedRequest

from .. import reports
from ..forms.reports import UseOverTimeForm
from .reports import form_errors


@login_required
@require_GET
def use_over_time(request: AuthenticatedRequest) -> HttpResponse:
    """The dashboard; a bad window or scope is the form with its messages and status 400."""
    form = UseOverTimeForm(request.GET, viewer=request.user)
    result = fairness = None
    if form.is_valid():
        filters = form.filters()
        result = reports.use_over_time(user=request.user, window=form.cleaned_data["window"],
                                       granularity=form.cleaned_data["granularity"], filters=filters)
        fairness = reports.fairness(user=request.user, department_id=filters.department_id,
                                    node_pool_id=filters.node_pool_id)
    return render(request, "usage/reports/over_time.html", {
        "form": form, "result": result, "fairness": fairness, "query": request.GET.urlencode(),
        "chart": result.chart_data() if result else None,
    }, status=200 if result else 400)


@login_required
@require_GET
def use_over_time_csv(request: AuthenticatedRequest) -> HttpResponse | StreamingHttpResponse:
    form = UseOverTimeForm(request.GET, viewer=request.user)
    if not form.is_valid():
        return form_errors(form)
    result = reports.use_over_time(user=request.user, window=form.cleaned_data["window"],
                                   granularity=form.cleaned_data["granularity"], filters=form.filters())
    return csv_response(reports.series_table(result),
                        f"use-over-time-by-{result.granularity.value}-{reports.window_slug(result.window)}.csv")
