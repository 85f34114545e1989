"""GPU-hour pages: the monthly showback/chargeback report and "who held the cards". Thin: forms pick the period and
scope (choices limited to what the viewer may see), apps.usage.reports reads, these render or stream CSV.

htmx: a filter change re-renders only the report (or the holders table) partial; every filter is in the query string,
so the page, its CSV link and a bookmark all show the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from apps.core.csv_export import csv_response
from apps.core.http import AuthenticatedRequest

from .. import reports
from ..budgets import budget_statuses_for
from ..forms.reports import HolderFilterForm, ReportFilterForm

HOLDERS_PER_PAGE = 200


@login_required
@require_GET
def usage_reports(request: AuthenticatedRequest) -> HttpResponse:
    form = ReportFilterForm(request.GET, viewer=request.user)
    report = None
    if form.is_valid():
        report = reports.usage_report(user=request.user, group=form.cleaned_data["group"],
                                      window=form.cleaned_data["window"], filters=form.filters())
    context: dict[str, Any] = {"form": form, "report": report, "query": request.GET.urlencode(),
               "table": list(reports.report_table(report)) if report else [],
               "total_cells": reports.report_cells(report, report.total) if report else [],
               "total_ratio": reports.ratio_text(report.total.ratio) if report else "",
               "bars": reports.chart(report) if report else [],
               "text_columns": 3 if report and report.group == reports.Group.PROJECT else 2,
               "currency": settings.USAGE_CURRENCY}
    if request.htmx:  # a filter change: the report alone
        return render(request, "usage/reports/partials/_report.html", context)
    context["budgets"] = budget_statuses_for(request.user)  # this period's, whatever window the report shows
    return render(request, "usage/reports/showback.html", context)


def form_errors(form: Any) -> HttpResponse:
    """A CSV download with bad filters: 400 and the same messages the page shows, as plain text."""
    return HttpResponse("\n".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items()),
                        status=400, content_type="text/plain; charset=utf-8")


@login_required
@require_GET
def usage_reports_csv(request: AuthenticatedRequest) -> HttpResponse | StreamingHttpResponse:
    form = ReportFilterForm(request.GET, viewer=request.user)
    if not form.is_valid():
        return form_errors(form)
    report = reports.usage_report(user=request.user, group=form.cleaned_data["group"],
                                  window=form.cleaned_data["window"], filters=form.filters())
    return csv_response(reports.report_table(report),
                        f"gpu-hours-by-{report.group.value}-{reports.window_slug(report.window)}.csv")


@login_required
@require_GET
def usage_holders(request: AuthenticatedRequest) -> HttpResponse:
    form = HolderFilterForm(request.GET, viewer=request.user)
    params = request.GET.copy()
    params.pop("page", None)
    context: dict[str, Any] = {"form": form, "query": params.urlencode()}
    if form.is_valid():
        now = timezone.now()
        window = form.cleaned_data["window"]
        queryset = reports.holders(user=request.user, window=window, filters=form.filters(), now=now)
        page = Paginator(queryset.select_related("workload__owner", "project", "user"), HOLDERS_PER_PAGE).get_page(
            request.GET.get("page"))
        context.update({"window": window, "until": window.until(now), "page": page,
                        "pool": form.cleaned_data["node_pool"],
                        "bars": reports.timeline(list(page.object_list), window, now)})
    template = "usage/reports/partials/_holders.html" if request.htmx else "usage/reports/holders.html"
    return render(request, template, context)


@login_required
@require_GET
def usage_holders_csv(request: AuthenticatedRequest) -> HttpResponse | StreamingHttpResponse:
    form = HolderFilterForm(request.GET, viewer=request.user)
    if not form.is_valid():
        return form_errors(form)
    window = form.cleaned_data["window"]
    queryset = reports.holders(user=request.user, window=window, filters=form.filters())

    def rows() -> Iterator[list[str]]:
        yield reports.HOLDER_COLUMNS
        yield from reports.holder_rows(queryset)

    pool = form.cleaned_data["node_pool"]
    return csv_response(rows(), f"card-holders-{pool.slug if pool else 'all'}-{reports.window_slug(window)}.csv")
