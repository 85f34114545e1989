"""Organisation pages. Views stay thin: access via apps.accounts.access, reads via selectors, writes via services.

Conventions: rows the user may not see answer 404 (looked up through the access querysets); rows they may see but
not change answer 403 (a PermissionDenied from the access check or the service). Forms post back to their own page
and redirect on success (POST-redirect-GET) with a message; htmx requests get the page's partial instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render, resolve_url
from django.views.decorators.http import require_http_methods

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.filters import filter_page
from apps.core.forms import apply_service_errors
from apps.core.http import AuthenticatedRequest, parse_id
from apps.core.views import confirm_delete_page

from . import selectors, services
from .filters import AuditEventFilterSet
from .forms import (
    DataSourceForm,
    DepartmentForm,
    NodePoolForm,
    PriorityClassForm,
    ProjectDefaultsForm,
    ProjectForm,
    ProjectNamespaceForm,
    PullSecretForm,
    WeightForm,
)
from .models import Department, Project
from .quota_table import QuotaTable


def _form_page(
    request: HttpRequest,
    *,
    form: Any,
    save: Callable[[Any], Any],
    success: str,
    redirect_to: str,
    title: str,
    aliases: dict[str, str] | None = None,
) -> HttpResponse:
    """The POST half of every create/edit page: shape check, service call, errors onto fields or redirect."""
    if request.method == "POST" and form.is_valid():
        try:
            save(form)
        except ValidationError as exc:
            apply_service_errors(form, exc, aliases)
        else:
            messages.success(request, success)
            return redirect(redirect_to)
    return render(request, "core/form_page.html", {"form": form, "title": title, "cancel": redirect_to})


# --- overview --------------------------------------------------------------------------------------------------


@login_required
def overview(request: AuthenticatedRequest) -> HttpResponse:
    pools, departments = selectors.org_tree(user=request.user)
    user = request.user
    # The grants are cached on the user, so these checks cost no queries however many rows there are.
    manage_projects = {row.department.pk for row in departments if access.can(user, Action.MANAGE_PROJECTS,
                                                                               row.department)}
    return render(request, "org/overview.html", {
        "pools": pools, "departments": departments, "manage_projects": manage_projects,
        "manage_installation": access.can(user, Action.MANAGE),
    })


# --- node pools ------------------------------------------------------------------------------------------------


@login_required
def pools(request: AuthenticatedRequest) -> HttpResponse:
    return render(request, "org/pools.html", {
        "pools": selectors.node_pools(), "can_manage": access.can(request.user, Action.MANAGE),
    })


@login_required
def pool(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    """One pool: what it is, and its price per card-hour over time (the price each hour of use is charged at)."""
    found = get_object_or_404(selectors.node_pools_with_prices(), slug=slug)
    prices = list(found.prices.all())
    return render(request, "org/pool.html", {
        "pool": found, "prices": [(price, prices[index + 1].valid_from if index + 1 < len(prices) else None)
                                  for index, price in enumerate(prices)],
        "can_manage": access.can(request.user, Action.MANAGE, found), "currency": settings.USAGE_CURRENCY,
    })


@login_required
@require_http_methods(["GET", "POST"])
def pool_create(request: AuthenticatedRequest) -> HttpResponse:
    access.require(request.user, Action.MANAGE)
    form = NodePoolForm(request.POST or None)
    return _form_page(
        request, form=form, aliases=NodePoolForm.ALIASES,
        save=lambda f: services.node_pool_create(actor=request.user, **f.service_fields()),
        success="Node pool created.", redirect_to="org:pools", title="New node pool",
    )


@login_required
@require_http_methods(["GET", "POST"])
def pool_edit(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    pool = get_object_or_404(selectors.node_pools(), slug=slug)
    access.require(request.user, Action.MANAGE, pool)
    form = NodePoolForm(request.POST or None, instance=pool)
    return _form_page(
        request, form=form, aliases=NodePoolForm.ALIASES,
        save=lambda f: services.node_pool_update(actor=request.user, node_pool=pool,
                                                 expected_version=f.expected_version, **f.service_fields()),
        success=f"Node pool {pool.slug} saved.", redirect_to="org:pools", title=f"Edit node pool {pool.slug}",
    )


@login_required
@require_http_methods(["GET", "POST"])
def pool_delete(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    pool = get_object_or_404(selectors.node_pools(), slug=slug)
    access.require(request.user, Action.MANAGE, pool)
    return confirm_delete_page(
        request, obj=pool, kind="node pool", cancel="org:pools", redirect_to="org:pools",
        delete=lambda: services.node_pool_delete(actor=request.user, node_pool=pool),
        success=f"Node pool {pool.slug} deleted.",
        consequences="A pool that any quota still uses cannot be deleted.",
    )


# --- departments -----------------------------------------------------------------------------------------------


@login_required
def departments(request: AuthenticatedRequest) -> HttpResponse:
    user = request.user
    rows = selectors.departments_with_projects(user)
    return render(request, "org/departments.html", {
        "departments": [
            {"department": department, "can_manage": access.can(user, Action.MANAGE, department),
             "can_manage_projects": access.can(user, Action.MANAGE_PROJECTS, department),
             "projects": [{"project": project,
                           "can_manage": access.can(user, Action.MANAGE_PROJECTS, project)}
                          for project in projects]}
            for department, projects in rows
        ],
        "can_create": access.can(user, Action.MANAGE),
        "can_map_namespaces": access.can_map_namespaces(user),
    })


@login_required
@require_http_methods(["GET", "POST"])
def department_create(request: AuthenticatedRequest) -> HttpResponse:
    access.require(request.user, Action.MANAGE)
    form = DepartmentForm(request.POST or None)
    return _form_page(
        request, form=form,
        save=lambda f: services.department_create(actor=request.user, **f.cleaned_data),
        success="Department created. Give it quotas on the quota table.", redirect_to="org:departments",
        title="New department",
    )


def _visible_department(request: AuthenticatedRequest, slug: str) -> Department:
    return get_object_or_404(selectors.departments_for(request.user), slug=slug)


@login_required
@require_http_methods(["GET", "POST"])
def department_edit(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    department = _visible_department(request, slug)
    access.require(request.user, Action.MANAGE, department)
    form = DepartmentForm(request.POST or None, instance=department)

    def save(f: DepartmentForm) -> Any:
        changes = {k: v for k, v in f.cleaned_data.items() if k != "slug"}
        return services.department_update(actor=request.user, department=department,
                                          expected_version=f.expected_version, **changes)

    return _form_page(request, form=form, save=save, success=f"Department {department.name} saved.",
                      redirect_to="org:departments", title=f"Edit department {department.name}")


@login_required
@require_http_methods(["GET", "POST"])
def department_delete(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    department = _visible_department(request, slug)
    access.require(request.user, Action.MANAGE, department)
    return confirm_delete_page(
        request, obj=department, kind="department", cancel="org:departments", redirect_to="org:departments",
        delete=lambda: services.department_delete(actor=request.user, department=department),
        success=f"Department {department.name} deleted.",
        consequences="Its quotas go with it. A department that still has projects cannot be deleted.",
    )


@login_required
@require_http_methods(["GET", "POST"])
def department_quotas(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    """The editable quota table; htmx posts re-check the proposal, a plain post saves it."""
    department = _visible_department(request, slug)
    access.require(request.user, Action.MANAGE_PROJECTS, department)
    table = QuotaTable(department=department, user=request.user,
                       data=request.POST if request.method == "POST" else None)
    if request.method == "POST":
        if request.htmx:
            table.check()
            return render(request, "org/partials/_quota_totals.html", {"table": table})
        count = table.save()
        if not table.error_count:
            if count:
                messages.success(request, f"Saved {count} quota cell{'s' if count != 1 else ''} of {department.name}.")
            else:
                messages.info(request, "Nothing changed.")
            return redirect("org:department_quotas", slug=department.slug)
        messages.error(request, "Someone changed this table since you opened it, so nothing was saved: reload to see "
                                "their changes (the cells marked below say what), then make yours again."
                       if table.stale else "Nothing was saved: fix the cells marked below.")
    return render(request, "org/department_quotas.html", {"table": table, "department": department})


# --- projects --------------------------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def project_create(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    department = _visible_department(request, slug)
    access.require(request.user, Action.MANAGE_PROJECTS, department)
    form = ProjectForm(request.POST or None)
    return _form_page(
        request, form=form,
        save=lambda f: services.project_create(actor=request.user, department=department, **f.cleaned_data),
        success="Project created. Give it quotas on the department's quota table.",
        redirect_to="org:departments", title=f"New project in {department.name}",
    )


def _visible_project(request: AuthenticatedRequest, slug: str) -> Project:
    return get_object_or_404(selectors.projects_for(request.user).select_related("department"), slug=slug)


@login_required
@require_http_methods(["GET", "POST"])
def project_edit(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    project = _visible_project(request, slug)
    access.require(request.user, Action.MANAGE_PROJECTS, project)
    form = ProjectForm(request.POST or None, instance=project)

    def save(f: ProjectForm) -> Any:
        changes = {k: v for k, v in f.cleaned_data.items() if k not in {"slug", "namespace"}}
        return services.project_update(actor=request.user, project=project, expected_version=f.expected_version,
                                       **changes)

    return _form_page(request, form=form, save=save, success=f"Project {project.name} saved.",
                      redirect_to="org:departments", title=f"Edit project {project.name}")


@login_required
@require_http_methods(["GET", "POST"])
def project_delete(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    project = _visible_project(request, slug)
    access.require(request.user, Action.MANAGE_PROJECTS, project)
    return confirm_delete_page(
        request, obj=project, kind="project", cancel="org:departments", redirect_to="org:departments",
        delete=lambda: services.project_delete(actor=request.user, project=project),
        success=f"Project {project.name} deleted.",
        consequences=f"Its quotas go with it; its namespace {project.namespace} is no longer managed.",
    )


@login_required
@require_http_methods(["GET", "POST"])
def project_namespaces(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    """The existing namespaces whose Kueue work counts as the project's (docs/architecture.md, Namespaces mapped to
    a project): listed, mapped and unmapped by admins."""
    project = _visible_project(request, slug)
    if not access.can_map_namespaces(request.user):
        raise PermissionDenied(services.DENIED_MAPPING)
    form = ProjectNamespaceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.project_namespace_map(actor=request.user, project=project, **form.cleaned_data)
        except ValidationError as exc:
            apply_service_errors(form, exc)
        else:
            messages.success(request, f"Namespace {form.cleaned_data['namespace']} mapped to {project.name}; its "
                                      "queues appear there with the next Kueue sync.")
            return redirect("org:project_namespaces", slug=project.slug)
    return render(request, "org/project_namespaces.html",
                  {"project": project, "form": form, "mapped": project.mapped_namespaces.all()},
                  status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def project_namespace_unmap(request: AuthenticatedRequest, slug: str, pk: int) -> HttpResponse:
    project = _visible_project(request, slug)
    mapping = get_object_or_404(project.mapped_namespaces.all(), pk=pk)
    if not access.can_map_namespaces(request.user):
        raise PermissionDenied(services.DENIED_MAPPING)
    back = resolve_url("org:project_namespaces", slug=project.slug)
    return confirm_delete_page(
        request, obj=mapping.namespace, kind="mapped namespace", cancel=back, redirect_to=back, verb="Unmap",
        delete=lambda: services.project_namespace_unmap(actor=request.user, project_namespace=mapping),
        success=f"Namespace {mapping.namespace} unmapped from {project.name}.",
        consequences="The project's queues leave it with the next Kueue sync; the namespace itself stays. Work "
                     "already mirrored from it keeps its history; new work there is shown to admins as unmapped.")


# --- priority classes ------------------------------------------------------------------------------------------


@login_required
def priority_classes(request: AuthenticatedRequest) -> HttpResponse:
    return render(request, "org/priority_classes.html", {
        "priority_classes": selectors.priority_classes(), "can_manage": access.can(request.user, Action.MANAGE),
    })


@login_required
@require_http_methods(["GET", "POST"])
def priority_class_create(request: AuthenticatedRequest) -> HttpResponse:
    access.require(request.user, Action.MANAGE)
    form = PriorityClassForm(request.POST or None)
    return _form_page(
        request, form=form,
        save=lambda f: services.priority_class_create(actor=request.user, **f.cleaned_data),
        success="Priority class created.", redirect_to="org:priority_classes",
        title="New priority class",
    )


@login_required
@require_http_methods(["GET", "POST"])
def priority_class_edit(request: AuthenticatedRequest, name: str) -> HttpResponse:
    priority_class = get_object_or_404(selectors.priority_classes(), name=name)
    access.require(request.user, Action.MANAGE, priority_class)
    form = PriorityClassForm(request.POST or None, instance=priority_class)

    def save(f: PriorityClassForm) -> Any:
        changes = {k: v for k, v in f.cleaned_data.items() if k != "name"}
        return services.priority_class_update(actor=request.user, priority_class=priority_class,
                                              expected_version=f.expected_version, **changes)

    return _form_page(request, form=form, save=save, success=f"Priority class {priority_class.name} saved.",
                      redirect_to="org:priority_classes", title=f"Edit priority class {priority_class.name}")


@login_required
@require_http_methods(["GET", "POST"])
def priority_class_delete(request: AuthenticatedRequest, name: str) -> HttpResponse:
    priority_class = get_object_or_404(selectors.priority_classes(), name=name)
    access.require(request.user, Action.MANAGE, priority_class)
    return confirm_delete_page(
        request, obj=priority_class, kind="priority class", cancel="org:priority_classes",
        redirect_to="org:priority_classes",
        delete=lambda: services.priority_class_delete(actor=request.user, priority_class=priority_class),
        success=f"Priority class {priority_class.name} deleted.",
        consequences="Projects that default to it fall back to no default.",
    )


# --- team-lead weights -----------------------------------------------------------------------------------------


def _weight_rows(user: Actor, projects: Iterable[Project], *,
                 observed_weights: dict[int, Any] | None = None) -> list[dict[str, Any]]:
    """Rows of the weights page. `observed_weights` (pool id -> weight): the weight Kueue last computed the share
    with, when it is not the saved one (the row answering a weight change, before the cluster has the new weight)."""
    pools = list(selectors.node_pools())
    projects = list(projects)
    shares = selectors.project_weighted_shares(project_ids=[project.pk for project in projects])
    observed_weights = observed_weights or {}
    rows = []
    for project in projects:
        quotas = {q.node_pool_id: q for q in project.quotas.all()}
        rows.append({
            "project": project, "cells": [{"pool": pool, "quota": quotas.get(pool.pk)} for pool in pools],
            "shares": [selectors.WeightedShare(
                pool=pool, share=shares[(project.pk, pool.pk)], weight=quotas[pool.pk].over_quota_weight,
                observed_weight=observed_weights.get(pool.pk, quotas[pool.pk].over_quota_weight),
            ) for pool in pools if (project.pk, pool.pk) in shares and pool.pk in quotas],
        })
    return rows


@login_required
@require_http_methods(["GET", "POST"])
def weights(request: AuthenticatedRequest) -> HttpResponse:
    """Over-quota weights and default priority class of the projects in the user's EDIT_WEIGHT scope."""
    user = request.user
    if not access.can_anywhere(user, Action.EDIT_WEIGHT):
        raise PermissionDenied("You may not change weights anywhere.")
    if request.method == "POST":
        return _weights_post(request)
    return render(request, "org/weights.html", {
        "pools": list(selectors.node_pools()),
        "rows": _weight_rows(user, selectors.weight_projects(user)),
        "priority_classes": list(selectors.priority_classes()),
    })


def _weights_post(request: AuthenticatedRequest) -> HttpResponse:
    """One change (a weight or the default priority class) of one project; the row re-renders with the outcome."""
    user = request.user
    status: dict[str, Any] = {}
    observed_weights: dict[int, Any] = {}
    if "quota" in request.POST:
        form: Any = WeightForm(request.POST)
        quota_id = request.POST.get("quota", "")
        quota = get_object_or_404(selectors.quotas_for(user).filter(project__isnull=False), pk=parse_id(quota_id))
        project_id = quota.project_id
        status["pool"] = quota.node_pool_id
        observed_weights[quota.node_pool_id] = quota.over_quota_weight  # Kueue's share was computed with it
        if form.is_valid():
            try:
                services.quota_update(actor=user, quota=quota, expected_version=form.expected_version,
                                      over_quota_weight=form.cleaned_data["over_quota_weight"])
            except ValidationError as exc:
                apply_service_errors(form, exc)
    else:
        form = ProjectDefaultsForm(request.POST)
        project = get_object_or_404(selectors.projects_for(user), pk=parse_id(request.POST.get("project", "")))
        project_id = project.pk
        status["pool"] = "priority"
        if form.is_valid():
            try:
                services.project_update(actor=user, project=project, expected_version=form.expected_version,
                                        default_priority_class=form.cleaned_data["default_priority_class"])
            except ValidationError as exc:
                apply_service_errors(form, exc)
    errors = [message for messages_ in form.errors.values() for message in messages_]
    if not request.htmx:
        if errors:
            for message in errors:
                messages.error(request, message)
        else:
            messages.success(request, "Saved.")
        return redirect("org:weights")
    project = get_object_or_404(selectors.weight_projects(user), pk=project_id)
    status.update({"errors": errors, "saved": not errors, "value": request.POST.get("over_quota_weight")})
    return render(request, "org/partials/_weight_row.html", {
        "row": _weight_rows(user, [project], observed_weights=observed_weights)[0], "status": status,
        "priority_classes": list(selectors.priority_classes()),
    })


# --- audit -----------------------------------------------------------------------------------------------------


@login_required
def audit(request: AuthenticatedRequest) -> HttpResponse:
    user = request.user
    if not access.can_anywhere(user, Action.VIEW_AUDIT):
        raise PermissionDenied("You may not read the audit log.")
    events = selectors.audit_events_for(user).select_related("actor", "department", "project__department")
    filterset = AuditEventFilterSet(request.GET, queryset=events, request=request)
    page = filter_page(filterset, per_page=50, number=request.GET.get("page"))
    page.object_list = selectors.audit_changes(list(page.object_list))
    query = request.GET.copy()
    query.pop("page", None)
    template = "org/partials/_audit_table.html" if request.htmx else "org/audit.html"
    return render(request, template, {"form": filterset.form, "page": page, "query": query.urlencode()})


@login_required
@require_http_methods(["GET", "POST"])
def cluster_sync(request: AuthenticatedRequest) -> HttpResponse:
    """Admins see what the last reconciles changed in Kueue, or why they failed, and can ask for one now."""
    access.require(request.user, Action.MANAGE)
    if request.method == "POST":
        services.kueue_sync_request_by(actor=request.user)
        messages.success(request, "A reconcile with the cluster has been requested; results appear below.")
        return redirect("org:cluster_sync")
    context = selectors.kueue_sync_status()
    template = "org/partials/_sync_runs.html" if request.htmx else "org/cluster_sync.html"
    return render(request, template, context)


# --- data sources and image pull secrets -------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def data(request: AuthenticatedRequest) -> HttpResponse:
    """A project's data sources and registries, for admins and department admins; users pick data sources in the
    submit form, and every pod of the project names its pull secrets."""
    user = request.user
    projects = selectors.data_projects_for(user)
    if not projects.exists():
        raise PermissionDenied("Only admins and department admins manage data sources.")
    which = request.POST.get("form") if request.method == "POST" else None
    source_form = DataSourceForm(request.POST if which == "data_source" else None, projects=projects,
                                 prefix="source")
    secret_form = PullSecretForm(request.POST if which == "pull_secret" else None, projects=projects,
                                 prefix="registry")
    bound = source_form if which == "data_source" else secret_form if which == "pull_secret" else None
    if bound is not None and bound.is_valid():
        try:
            if bound is source_form:
                created: Any = services.data_source_create(actor=user, **source_form.cleaned_data)
            else:
                created = services.pull_secret_create(actor=user, **secret_form.cleaned_data)
        except ValidationError as exc:
            apply_service_errors(bound, exc)
        else:
            messages.success(request, f"{created.name} saved for {created.project.name}.")
            return redirect("org:data")
    return render(request, "org/data.html", {
        "data_sources": selectors.data_sources_for(user), "pull_secrets": selectors.pull_secrets_for(user),
        "source_form": source_form, "secret_form": secret_form,
    })


@login_required
@require_http_methods(["GET", "POST"])
def data_source_delete(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    source = get_object_or_404(selectors.data_sources_for(request.user), pk=pk)
    return confirm_delete_page(
        request, obj=source.name, kind="data source", cancel="org:data", redirect_to="org:data",
        delete=lambda: services.data_source_delete(actor=request.user, data_source=source),
        success=f"Data source {source.name} deleted.",
        consequences="Workloads already submitted keep their mount; new ones cannot pick it.")


@login_required
@require_http_methods(["GET", "POST"])
def pull_secret_delete(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    secret = get_object_or_404(selectors.pull_secrets_for(request.user), pk=pk)
    return confirm_delete_page(
        request, obj=secret.name, kind="image pull secret", cancel="org:data", redirect_to="org:data",
        delete=lambda: services.pull_secret_delete(actor=request.user, pull_secret=secret),
        success=f"Image pull secret {secret.name} deleted.",
        consequences="Its Kubernetes Secret is removed; new pods of the project no longer use it.")
