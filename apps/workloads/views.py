"""Workload pages: submit forms per kind, the list, the detail page, stop / keep alive, admin templates.

Views stay thin (the org pages' conventions): access via apps.accounts.access, reads via selectors, writes via
services. A workload the user may not see answers 404; one they see but may not act on, 403. One view serves its page
and its htmx partial.

Submit page protocol (htmx):
- `GET ?panel=1` (htmx) returns only the side panel for the project/pool/size in the query string.
- `POST` with `_validate=1` (htmx) is the live check: every refusal comes back next to its field and nothing is
  saved (the form's own field errors and the service's refusals of the other fields, `services.workload_check`).
  The answer never replaces an input (the user may be typing in another one): it targets the status line and swaps
  each field's error block and the pool and policy panels out of band. Empty required text fields are stood in for
  by placeholders during the check, so quota refusals show before the whole form is filled in. When the change came
  from the priority class select (`_changed=priority_class`, set by the form's hx-vals from the change event), the
  preemptible box is reset to that class's default first.
- A plain `POST` submits through `services.workload_submit_once` and redirects to the detail page; when anything is
  wrong it shows the page with every error at once, as the live check does. The form carries a one-time
  `submission_token` (made when the page is rendered): posting the same form again (a double click, the back
  button) leads to the workload it made instead of making another.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

from csp.decorators import csp_exempt
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotModified, QueryDict, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.csv_export import csv_response
from apps.core.filters import filter_page
from apps.core.forms import apply_service_errors
from apps.core.http import (
    AuthenticatedRequest,
    conditional,
    conditional_poll,
    not_modified,
    parse_id,
    poll_etag,
    reference_lookup,
)
from apps.core.views import confirm_delete_page
from apps.org.models import Project
from apps.org.selectors import projects_for

from . import kubectl, logs, notebooks, selectors, services, table
from .filters import WorkloadFilterSet
from .forms import (
    ALIASES,
    KIND_FIELDS,
    CredentialForm,
    CredentialValuesForm,
    IdlePolicyForm,
    InferenceServiceForm,
    InferenceUpdateForm,
    ManifestForm,
    WorkloadForm,
    WorkloadTemplateForm,
    manifest_initial_from_workload,
    manifest_source,
    submit_initial,
    template_initial_from_workload,
)
from .frameworks import framework_entry
from .manifests import (
    EXAMPLE_KINDS,
    MANIFEST_KIND_VALUES,
    ManifestErrors,
    example_manifest,
    locate_errors,
    parse_manifest,
)
from .models import (
    HOLDING_STATUSES,
    PORTAL_KIND_CHOICES,
    PORTAL_KIND_VALUES,
    IdlePolicy,
    Kind,
    Status,
    Workload,
    WorkloadTemplate,
)

PAGE_SIZE = 25
SUBMISSION_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")
UNGUARDED_FORM = ("This form has no valid submission token, so a second post of it could submit twice. "
                            "Nothing was submitted; reload the page and submit again.")
# Stand-ins for empty required text fields during the live check (never saved).
# What a stop does, said before it is done (the confirmation page and the dialog).
STOP_CONSEQUENCES = ("Its Job and pods are deleted and its GPUs go back to the queue; what it has not saved is lost. "
                     "Submit it again to start over.")
DRAFT_VALUES = {"name": "draft", "image": "busybox", "model_label": "draft", "data_class": "draft"}


# --- submit ------------------------------------------------------------------------------------------------------


def _kind(kind: str) -> str:
    if kind not in PORTAL_KIND_VALUES:
        raise Http404("No such kind of workload.")
    return kind


def _live_check_data(request: AuthenticatedRequest) -> tuple[QueryDict, set[str]]:
    """The posted data for a live check: priority class default applied, drafts for empty required text."""
    data = request.POST.copy()
    if "priority_class" in (data.get("_changed"), request.htmx.trigger_name):
        preemptible = selectors.priority_class_preemptible(pk=parse_id(data.get("priority_class")))
        if preemptible is not None:
            if preemptible:
                data["preemptible"] = "on"
            else:
                data.pop("preemptible", None)
    drafted = set()
    for key, value in DRAFT_VALUES.items():
        if not data.get(key, "").strip():
            data[key] = value
            drafted.add(key)
    return data, drafted


def _submitted(request: AuthenticatedRequest, workload: Workload, *, created: bool) -> HttpResponse:
    """After a submit form: to the workload's page, saying whether this post made it or an earlier one had."""
    if created:
        messages.success(request, f"Submitted {workload.name}: it is queued for the cluster.")
    else:
        messages.info(request, f"This form was submitted already: here is {workload.name}, the workload it made. "
                               "Nothing else was submitted.")
    return redirect("workloads:detail", pk=workload.pk)


@login_required
@require_http_methods(["GET", "POST"])
def submit(request: AuthenticatedRequest, kind: str) -> HttpResponse:
    user = request.user
    if request.method == "GET" and kind in MANIFEST_KIND_VALUES and request.GET.get("from"):
        # "Submit again" of a manifest submission (the list links every row by its kind): the manifest page's.
        return redirect(f"{reverse('workloads:submit_manifest')}?{request.GET.urlencode()}")
    kind = _kind(kind)
    if not access.can_anywhere(user, Action.SUBMIT):
        raise PermissionDenied("You may not submit work in any project.")
    projects = selectors.submit_projects(user=user)
    validate_only = request.method == "POST" and bool(request.htmx) and (
        "_validate" in request.POST or request.headers.get("X-Validate-Only") == "1")

    if request.method == "GET":
        if request.htmx and "panel" in request.GET:
            _require_offered(projects, request.GET.get("project", ""))
            return render(request, "workloads/partials/_pool_panel.html",
                          {"panel": selectors.submit_panel(kind=kind, projects=projects, source=request.GET,
                                                           viewer=user)})
        initial, source, template = submit_initial(user=user, projects=projects, query=request.GET)
        if source is not None and source.kind != kind:
            return redirect(f"{reverse('workloads:submit', args=[source.kind])}?{request.GET.urlencode()}")
        if template is not None and template.kind != kind:
            return redirect(f"{reverse('workloads:submit', args=[template.kind])}?{request.GET.urlencode()}")
        form = WorkloadForm(initial=initial, kind=kind, projects=projects, owner=user)
        return _submit_page(request, kind, form, projects, initial, source=source, template=template)

    _require_offered(projects, request.POST.get("project", ""))
    source = _resubmitted_from(request)
    data, drafted = _live_check_data(request) if validate_only else (request.POST, set())
    form = WorkloadForm(data, kind=kind, projects=projects, owner=user)
    token = request.POST.get("submission_token", "")
    if not validate_only and not SUBMISSION_TOKEN.fullmatch(token):
        form.add_error(None, UNGUARDED_FORM)
    try:
        if form.is_valid() and not validate_only:
            workload, created = services.workload_submit_once(
                actor=user, submission_key=f"form:{token}", resubmitted_from=source, **form.service_kwargs())
            return _submitted(request, workload, created=created)
        # Every refusal of the fields that passed their own checks, next to those fields' own errors.
        services.workload_check(actor=user, unknown=form.failed_fields(), resubmitted_from=source,
                                **form.service_kwargs())
    except ValidationError as exc:
        apply_service_errors(form, exc, ALIASES)
    if validate_only:
        for key in drafted:
            form.errors.pop(key, None)
        return render(request, "workloads/partials/_submit_response.html", {
            "form": form, "kind": kind, "source": source,
            "panel": selectors.submit_panel(kind=kind, projects=projects, source=data, viewer=user),
            "policy_panel": selectors.policy_panel(projects=projects, source=data,
                                                   project=form.cleaned_data.get("project")),
            "checked": not form.errors, "drafted": drafted,
            "reset_preemptible": "priority_class" in (data.get("_changed"), request.htmx.trigger_name),
        })
    if form.errors:
        messages.error(request, "Nothing was submitted: fix the fields marked below.")
    return _submit_page(request, kind, form, projects, request.POST, source=source,
                        token=token if SUBMISSION_TOKEN.fullmatch(token) else None)


def _resubmitted_from(request: AuthenticatedRequest) -> Workload | None:
    """The workload a posted "Submit again" form names (`resubmitted_from`): 404 for one the user may not see."""
    if not request.POST.get("resubmitted_from"):
        return None
    source = selectors.workload_for_page(user=request.user, pk=parse_id(request.POST["resubmitted_from"]) or 0)
    if source is None:
        raise Http404("No such workload.")
    return source


def _require_offered(projects: Any, raw: str) -> None:
    """A project named on the submit page must be one it offers: 404 otherwise, as for any row one may not see."""
    if raw and not selectors.submit_project_known(projects=projects, raw=raw):
        raise Http404("No such project.")


def _submit_page(request: AuthenticatedRequest, kind: str, form: WorkloadForm, projects: Any, values: Any, *,
                 source: Workload | None = None, template: WorkloadTemplate | None = None,
                 token: str | None = None) -> HttpResponse:
    """The submit page; `token` is the form's submission token (a new one unless a refused post brought one)."""
    return render(request, "workloads/submit.html", {
        "form": form, "kind": kind, "kinds": PORTAL_KIND_CHOICES, "kind_label": Kind(kind).label,
        "submission_token": token or secrets.token_urlsafe(24),
        "panel": selectors.submit_panel(kind=kind, projects=projects, source=values, viewer=request.user),
        "policy_panel": selectors.policy_panel(projects=projects, source=values),
        "source": source, "template": template,
        "templates": selectors.templates(kind=kind),
        "preemptible_by_class": selectors.preemptible_by_class(),
    })


# --- submit an inference service -------------------------------------------------------------------------------
# A model server on a serving pool (docs/architecture.md, Inference services). `GET ?project=<id>` offers that
# project's serving pools (the project select reloads the form with htmx); a `POST` submits through
# `services.inference_submit` and redirects to the workload's page, or answers 400 with every refusal at once.


@login_required
@require_http_methods(["GET", "POST"])
def submit_inference(request: AuthenticatedRequest) -> HttpResponse:
    user = request.user
    if not access.can_anywhere(user, Action.SUBMIT):
        raise PermissionDenied("You may not submit work in any project.")
    projects = selectors.submit_projects(user=user)
    raw = (request.POST if request.method == "POST" else request.GET).get("project", "")
    _require_offered(projects, raw)
    project = selectors.submit_project(projects=projects, raw=raw) if raw else projects.first()
    if request.method == "GET":
        form = InferenceServiceForm(initial={"project": project}, projects=projects, project=project)
        return _inference_page(request, form)
    form = InferenceServiceForm(request.POST, projects=projects, project=project)
    token = request.POST.get("submission_token", "")
    if not SUBMISSION_TOKEN.fullmatch(token):
        form.add_error(None, UNGUARDED_FORM)
    try:
        if form.is_valid():
            workload, created = services.inference_submit_once(actor=user, submission_key=f"form:{token}",
                                                               **form.service_kwargs())
            if not created:
                return _submitted(request, workload, created=False)
            messages.success(request, f"Submitted {workload.name}: its Deployment is being created on "
                                      f"{workload.node_pool.name}.")
            return redirect("workloads:detail", pk=workload.pk)
        # Every refusal of the fields that passed their own checks, next to those fields' own errors.
        services.inference_check(actor=user, unknown=form.failed_fields(), **form.service_kwargs())
    except ValidationError as exc:
        apply_service_errors(form, exc)
    messages.error(request, "Nothing was submitted: fix the fields marked below.")
    return _inference_page(request, form, token=token if SUBMISSION_TOKEN.fullmatch(token) else None, status=400)


def _inference_page(request: AuthenticatedRequest, form: InferenceServiceForm, *, token: str | None = None,
                    status: int = 200) -> HttpResponse:
    """The inference service page; `token` is the form's submission token (a new one unless a refused post brought
    one)."""
    return render(request, "workloads/submit_inference.html", {
        "form": form, "kinds": PORTAL_KIND_CHOICES, "submission_token": token or secrets.token_urlsafe(24)},
        status=status)


# --- submit a manifest ------------------------------------------------------------------------------------------
# The manifest page (`submit_manifest`) speaks the submit page's protocol with an explicit Check instead of a check
# on every change: `POST` with `_check` (htmx or not) checks without recording anything (the API's
# `?dry_run=true`: `services.workload_manifest_validate`); a plain `POST` submits through
# `services.workload_submit_manifest_once`, once per `submission_token`, and redirects to the workload's page;
# refused, it answers 400 with the page, every error at once and the text as it was typed. `GET ?example=<Kind>`
# (htmx) returns the editor holding that kind's example for the chosen pool.


def _manifest_project(user: Any, raw: str) -> Project | None:
    """The project a manifest page names: 404 when the user may not see it, 403 when they see it but may not submit
    to it; None when none is named."""
    if not raw:
        return None
    project = projects_for(user).filter(**(reference_lookup(raw, name_field="slug") or {"pk__in": []})).first()
    if project is None:
        raise Http404("No such project.")
    if not access.can(user, Action.SUBMIT, project):
        raise PermissionDenied("You may not submit work in this project.")
    return project


def _manifest_check(form: ManifestForm, user: Any) -> Workload | None:
    """Every refusal of the form's values onto the form (the form's own and the service's, the manifest's each at its
    field path), as the dry run gives them; the unsaved workload when there is none. Fields that failed their own
    checks are stood in for by drafts so the manifest is still checked whole."""
    form.is_valid()
    values = form.service_kwargs()
    if not {"project", "node_pool"} <= set(values) or "manifest" not in values:
        if isinstance(form.data.get("manifest"), str) and "manifest" not in form.errors:
            try:
                parse_manifest(form.data["manifest"])
            except ManifestErrors as error:
                apply_service_errors(form, ValidationError(error.errors), ALIASES)
        return None
    drafted = {name for name in ("model_label", "data_class") if name not in values}
    values.update({name: DRAFT_VALUES[name] for name in drafted})
    values.setdefault("max_runtime_seconds", None)
    try:
        workload, _ = services.workload_manifest_validate(actor=user, **values)
    except ValidationError as error:
        errors = {name: found for name, found in error.message_dict.items() if name not in drafted}
        apply_service_errors(form, ValidationError(errors), ALIASES)
        return None
    return None if form.errors else workload


@login_required
@require_http_methods(["GET", "POST"])
def submit_manifest(request: AuthenticatedRequest) -> HttpResponse:
    user = request.user
    if not access.can_anywhere(user, Action.SUBMIT):
        raise PermissionDenied("You may not submit work in any project.")
    projects = selectors.submit_projects(user=user)
    if request.method == "GET":
        chosen = _manifest_project(user, request.GET.get("project", ""))
        source = manifest_source(user=user, query=request.GET)
        if source is not None:
            if source.kind in PORTAL_KIND_VALUES:  # submitted from a form: submitted again from it
                return redirect(f"{reverse('workloads:submit', args=[source.kind])}?from={source.pk}")
            initial = manifest_initial_from_workload(source)
            if chosen is not None or not projects.filter(pk=source.project_id).exists():
                initial["project"] = chosen or projects.first()
            form = ManifestForm(initial=initial, projects=projects)
            return _manifest_page(request, form, source=source)
        project = chosen or projects.first()
        pool = selectors.submit_pool(project=project, raw=request.GET.get("node_pool"))
        example = request.GET.get("example", "")
        if example and example not in EXAMPLE_KINDS:
            raise Http404("No example of that kind.")
        initial = {"project": project, "node_pool": pool,
                   "manifest": example_manifest(example, gpu_resource=pool.gpu_resource) if example and pool else ""}
        form = ManifestForm(initial=initial, projects=projects)
        if request.htmx and example:
            return render(request, "workloads/partials/_manifest_editor.html", {"field": form["manifest"]})
        return _manifest_page(request, form, example=example)
    _manifest_project(user, request.POST.get("project", ""))
    source = _resubmitted_from(request)
    form = ManifestForm(request.POST, projects=projects)
    token = request.POST.get("submission_token", "")
    checking = "_check" in request.POST
    if not checking and not SUBMISSION_TOKEN.fullmatch(token):
        form.add_error(None, UNGUARDED_FORM)
    checked = None
    if not checking and form.is_valid():
        # The service checks it all again (and answers a repeated form with the workload it made, whatever changed).
        try:
            workload, created = services.workload_submit_manifest_once(
                actor=user, submission_key=f"form:{token}", resubmitted_from=source, **form.service_kwargs())
        except ValidationError as error:
            apply_service_errors(form, error, ALIASES)
        else:
            return _submitted(request, workload, created=created)
    else:
        checked = _manifest_check(form, user)
    found = [str(message) for message in form.errors.get("manifest", [])]
    result: dict[str, Any] = {"checked": checked,
                              "manifest_errors": locate_errors(form.data.get("manifest", ""), found)}
    if checking and request.htmx:
        return render(request, "workloads/partials/_manifest_check.html", {"form": form, **result})
    if not checking:
        messages.error(request, "Nothing was submitted: fix what is marked below.")
    return _manifest_page(request, form, token=token if SUBMISSION_TOKEN.fullmatch(token) else None,
                          status=200 if checking else 400, result=result, source=source)


def _manifest_page(request: AuthenticatedRequest, form: ManifestForm, *, token: str | None = None,
                   example: str = "", status: int = 200, result: dict[str, Any] | None = None,
                   source: Workload | None = None) -> HttpResponse:
    """The manifest page; `result` is what a check or a refused submission found, `source` what it submits again."""
    return render(request, "workloads/submit_manifest.html", {
        "form": form, "kinds": PORTAL_KIND_CHOICES, "examples": EXAMPLE_KINDS, "example": example, "source": source,
        "submission_token": token or secrets.token_urlsafe(24), **(result or {})}, status=status)


# --- list and detail ---------------------------------------------------------------------------------------------


@login_required
@require_GET
def workload_list(request: AuthenticatedRequest) -> HttpResponse:
    user = request.user
    filterset = _list_filterset(request)
    etag = None
    if request.htmx and filterset.is_valid():
        # The table's polls are conditional: 304 from two queries of aggregates while nothing listed changed.
        etag = poll_etag(access.grants_fingerprint(user), request.get_full_path(),
                         selectors.workload_list_marker(queryset=filterset.qs))
        if not_modified(request, etag):
            return conditional(HttpResponseNotModified(), etag)
    page = filter_page(filterset, per_page=PAGE_SIZE, number=request.GET.get("page"))
    page.object_list = selectors.annotate_live(list(page.object_list), viewer=user)  # position, why waiting, runtime
    may_submit = access.can_anywhere(user, Action.SUBMIT)
    for workload in page:
        # The grants are cached on the user: these checks cost no queries however many rows there are.
        workload.may_stop = workload.is_live and workload.status != Status.STOPPING and access.can_stop_workload(
            user, workload)
    query = request.GET.copy()
    query.pop("page", None)
    context = {"form": filterset.form, "page": page, "query": query.urlencode(), "scope": filterset.effective_scope,
               "may_submit": may_submit, "live": any(workload.is_live for workload in page),
               "may_stop_any": any(workload.may_stop for workload in page),
               "columns": table.header_links(request.GET, request.GET.get("ordering", "")),
               "stop_consequences": STOP_CONSEQUENCES,
               "poll_url": f"{reverse('workloads:list')}?{request.GET.urlencode()}"}
    if request.htmx:
        return conditional(render(request, "workloads/partials/_list_table.html", context), etag)
    return render(request, "workloads/list.html", context)


def _list_filterset(request: AuthenticatedRequest) -> WorkloadFilterSet:
    user = request.user
    if not access.can_anywhere(user, Action.VIEW):
        raise PermissionDenied("You may not see workloads anywhere.")
    return WorkloadFilterSet(request.GET, queryset=selectors.workload_rows(user=user), request=request,
                             offer_scope=selectors.offers_scope_filter(user=user),
                             default_scope=selectors.default_scope(user=user))


@login_required
@require_GET
def workload_export(request: AuthenticatedRequest) -> HttpResponse | StreamingHttpResponse:
    """The list's filtered rows as CSV, every column (the same FilterSet and scope as the page)."""
    filterset = _list_filterset(request)
    if not filterset.valid_unpaginated():
        errors = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in filterset.errors.items())
        return HttpResponse(f"Nothing exported: {errors}", status=400, content_type="text/plain; charset=utf-8")
    return csv_response(table.export_rows(filterset.qs, viewer=request.user),
                        f"workloads-{timezone.now():%Y%m%d-%H%M}.csv")


@login_required
@require_POST
def bulk_stop(request: AuthenticatedRequest) -> HttpResponse:
    """Stop the workloads ticked on the list: the first post asks to confirm (naming each), the confirmed post stops
    them all or none (`services.workloads_stop`). A workload the user may not see answers 404, one they may not stop
    403, as for a single stop."""
    user = request.user
    raw = request.POST.getlist("ids")
    parsed = [parse_id(value) for value in raw]
    ids = [pk for pk in parsed if pk is not None]
    if not raw or len(ids) != len(raw) or len(raw) > services.BULK_STOP_LIMIT:
        messages.error(request, "Tick the workloads to stop first (ids of up to "
                                f"{services.BULK_STOP_LIMIT}); nothing was stopped.")
        return redirect(_list_url(request))
    workloads = list(selectors.workload_list(user=user).filter(pk__in=ids))
    if len(workloads) != len(set(ids)):
        raise Http404("No such workload.")
    back = _list_url(request)
    if request.POST.get("confirmed") != "1":
        forbidden = [w for w in workloads if not access.can_stop_workload(user, w)]
        if forbidden:
            raise PermissionDenied(f"You may not stop {', '.join(w.name for w in forbidden)}.")
        return render(request, "workloads/bulk_stop.html", {"workloads": workloads, "back": back,
                                                            "stop_consequences": STOP_CONSEQUENCES})
    try:
        services.workloads_stop(actor=user, workloads=workloads)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, f"Stopping {len(workloads)} workload{'s' if len(workloads) != 1 else ''}: "
                                  f"{', '.join(w.name for w in workloads)}.")
    return redirect(back)


def _list_url(request: HttpRequest) -> str:
    """A local `next` posted with the form, else the list."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return reverse("workloads:list")


def _visible(request: AuthenticatedRequest, pk: int) -> Workload:
    workload = selectors.workload_for_page(user=request.user, pk=pk)
    if workload is None:
        raise Http404("No such workload.")
    return workload


@login_required
@require_GET
def detail(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    user = request.user
    workload = _visible(request, pk)
    etag = None
    if request.htmx:
        # The live part's polls are conditional: 304 from the row and one query of aggregates when nothing changed.
        marker = selectors.workload_live_marker(workload=workload)
        logs.workload_logs_refresh_request(workload=workload, last_fetch=marker.last_log_fetch)
        # Explanations depend on the viewer's scope; whether the final log read is still awaited, on the clock.
        etag = poll_etag(access.grants_fingerprint(user), marker.key,
                         logs.final_read_pending(workload=workload, last_fetch=marker.last_log_fetch))
        if not_modified(request, etag):
            return conditional(HttpResponseNotModified(), etag)
    history = selectors.workload_history(workload=workload, user=user)
    selectors.annotate_live([workload], viewer=user)
    last_fetch = max((tail.fetched_at for tail in history["log_tails"]), default=None)
    if not request.htmx:
        logs.workload_logs_refresh_request(workload=workload, last_fetch=last_fetch)
    context = {
        "workload": workload,
        **history,
        "logs_pending": workload.status in HOLDING_STATUSES and not history["log_tails"] and not workload.from_outside,
        # The live part keeps polling a moment after the finish, for the last lines and the exit codes.
        "final_logs_pending": logs.final_read_pending(workload=workload, last_fetch=last_fetch),
        "failed_exits": logs.failed_exits(history["log_tails"]),
        "outside_logs": kubectl.logs_command(workload) if workload.from_outside else "",
        "outside_get": kubectl.get_command(workload) if workload.from_outside else "",
        "may_stop": workload.is_live and workload.status != Status.STOPPING and access.can_stop_workload(
            user, workload),
        "inference_form": InferenceUpdateForm(initial={"replicas": workload.replicas, "image": workload.image})
        if not request.htmx and _may_change_service(user, workload) else None,
        "may_keep_alive": workload.kind == Kind.NOTEBOOK and workload.status in HOLDING_STATUSES
        and access.can_keep_alive(user, workload),
        "may_connect": workload.kind == Kind.NOTEBOOK and workload.status == Status.RUNNING
        and access.can_connect_notebook(user, workload),
        "endpoint_url": _endpoint_url(request, workload),
        "endpoint_relayed": settings.INFERENCE_EXPOSE == "proxy",
        "data_sources": list(workload.data_sources.all()),
        "credentials": list(workload.credentials.all().only("name", "keys")),
        "may_submit_again": not workload.from_outside and access.can_anywhere(user, Action.SUBMIT),
        "may_save_template": not workload.from_outside and workload.kind in PORTAL_KIND_VALUES
        and access.can(user, Action.MANAGE),
        # A form's workload goes back to its form; a manifest's to the manifest page (both prefill from ?from=).
        "submit_again_url": reverse("workloads:submit", args=[workload.kind]) if workload.kind in PORTAL_KIND_VALUES
        else reverse("workloads:submit_manifest"),
        "stop_consequences": STOP_CONSEQUENCES,
        "manifest": json.dumps(workload.manifest, indent=2, sort_keys=True) if workload.manifest else "",
        "env": workload.env,
        # A training on a framework: the operator's object it runs as (decided at submission).
        "runs_as": framework_entry(workload) if workload.runs_on_framework else None,
    }
    if not request.htmx:
        context.update({"utilisation_available": selectors.utilisation_available(),
                        "utilisation": selectors.workload_utilisation_chart(workload=workload),
                        "idle_policy": IdlePolicy.current()})
    if request.htmx:
        return conditional(render(request, "workloads/partials/_detail_live.html", context), etag)
    return render(request, "workloads/detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def held_idle(request: AuthenticatedRequest) -> HttpResponse:
    """Admins: workloads holding GPUs they do not use (the idle policy flagged them), and the policy itself."""
    if not access.can_manage_idle_policy(request.user):
        raise Http404("No such page.")
    policy = IdlePolicy.current()
    initial = {"threshold_percent": policy.threshold_percent, "idle_minutes": max(1, round(policy.idle_minutes)),
               "cull_notebooks": policy.cull_notebooks, "warning_minutes": policy.warning_minutes}
    form = IdlePolicyForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            services.idle_policy_update(actor=request.user, threshold_percent=data["threshold_percent"],
                                        idle_seconds=data["idle_minutes"] * 60, cull_notebooks=data["cull_notebooks"],
                                        warning_minutes=data["warning_minutes"])
        except ValidationError as exc:
            apply_service_errors(form, exc)
        else:
            messages.success(request, "Idle rule saved.")
            return redirect("workloads:held_idle")
    status = 400 if request.method == "POST" else 200
    return render(request, "workloads/held_idle.html", {
        "form": form, "policy": policy, "utilisation_available": selectors.utilisation_available(),
        "workloads": selectors.workloads_held_idle(user=request.user)}, status=status)


@login_required
@require_GET
def project_queue(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    """A project's pending work in queue order, its admitted and running work, and its quota per pool.

    Anyone who may view the project sees every row (the access module lets project members see the project's
    workloads); the page shows what orders the queue (owner, size, priority, position, why it waits) and leaves
    image, command and environment to the detail page. Polls while anything is pending or running; each poll is a
    conditional GET answered 304 from a few aggregates when nothing changed.
    """
    user = request.user
    project = projects_for(user).select_related("department").filter(slug=slug).first()
    if project is None:
        raise Http404("No such project.")
    marker = selectors.project_queue_marker(project=project)
    template = "workloads/partials/_project_queue_live.html" if request.htmx else "workloads/project_queue.html"
    # Explanations name other projects only as far as the viewer may see them: the tag carries the viewer's scope.
    etag = poll_etag(access.grants_fingerprint(user), bool(request.htmx), marker)
    return conditional_poll(request, etag, lambda: render(
        request, template, {"queue": selectors.project_queue(project=project, viewer=user),
                            "project": project, "may_submit": access.can(user, Action.SUBMIT, project)}))


def _back_url(request: HttpRequest, workload: Workload) -> str:
    """Where a stop or keep-alive returns: a local `next` (posted, or in the confirmation page's query string), else
    the workload's page."""
    target = request.POST.get("next", "") or request.GET.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return reverse("workloads:detail", args=[workload.pk])


@login_required
@require_http_methods(["GET", "POST"])
def stop(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """GET asks "stop this?" (the confirmation without JavaScript; portal.js asks in a dialog and posts); POST stops."""
    user = request.user
    workload = _visible(request, pk)
    if not access.can_stop_workload(user, workload):
        raise PermissionDenied("You may not stop this workload.")
    back = _back_url(request, workload)
    return confirm_delete_page(
        request, obj=workload.name, kind=workload.get_kind_display().lower(), verb="Stop", cancel=back,
        redirect_to=back, success=f"Stopping {workload.name}; its Job is being deleted.",
        delete=lambda: services.workload_stop(actor=user, workload=workload),
        consequences=STOP_CONSEQUENCES, audited=True)


@login_required
@require_POST
def keep_alive(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    workload = _visible(request, pk)
    if workload.kind != Kind.NOTEBOOK:
        raise Http404("Only notebooks have an idle timeout.")
    services.workload_touch(actor=request.user, workload=workload)
    messages.success(request, f"{workload.name} stays up: its idle timeout of "
                              f"{workload.notebook_idle_timeout_minutes} minutes starts again now.")
    return redirect(_back_url(request, workload))


def _may_change_service(user: Any, workload: Workload) -> bool:
    """Whether the page offers to scale this inference service or change its image: a live one of the portal's,
    for those the service lets change it (who may stop it, as the API's PATCH)."""
    return (workload.kind == Kind.INFERENCE and not workload.from_outside and workload.is_live
            and workload.status != Status.STOPPING and access.can_stop_workload(user, workload))


@login_required
@require_http_methods(["GET", "POST"])
def inference_update(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Scale an inference service or roll it to a new image (`services.inference_update`); the detail page posts
    here, and a refusal comes back on this page with every error."""
    user = request.user
    workload = _visible(request, pk)
    if workload.kind != Kind.INFERENCE or workload.from_outside:
        raise Http404("Only the portal's inference services are scaled here.")
    if not access.can_stop_workload(user, workload):
        raise PermissionDenied("You may not change this inference service.")
    if request.method == "GET":
        form = InferenceUpdateForm(initial={"replicas": workload.replicas, "image": workload.image})
        return render(request, "workloads/inference_update.html", {"workload": workload, "form": form})
    form = InferenceUpdateForm(request.POST)
    if form.is_valid():
        changes = form.changes(workload)
        try:
            services.inference_update(actor=user, workload=workload, **changes)
        except ValidationError as exc:
            apply_service_errors(form, exc)
        else:
            if changes:
                messages.success(request, f"Changing {workload.name}: its Deployment is rolled to "
                                          f"{', '.join(f'{key} {value}' for key, value in sorted(changes.items()))}.")
            else:
                messages.info(request, "Nothing changed: the replicas and the image are as they were.")
            return redirect("workloads:detail", pk=workload.pk)
    return render(request, "workloads/inference_update.html", {"workload": workload, "form": form}, status=400)


# --- notebooks: connect ------------------------------------------------------------------------------------------


def _connectable(request: AuthenticatedRequest, pk: int) -> Workload:
    """The notebook, for its owner (or a member where the project shares notebooks): 404 for anyone else."""
    workload = selectors.notebook_to_connect(user=request.user, pk=pk)
    if workload is None:
        raise Http404("No such notebook.")
    return workload


@login_required
@require_GET
def connect(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Open the notebook: through the portal's relay (proxy mode) or at its own address with its token."""
    workload = _connectable(request, pk)
    if workload.status != Status.RUNNING:
        messages.info(request, f"{workload.name} is {workload.get_status_display().lower()}: it can be opened once "
                               "it runs.")
        return redirect("workloads:detail", pk=workload.pk)
    if settings.NOTEBOOK_EXPOSE == "proxy":
        return redirect("workloads:notebook", pk=workload.pk, path="lab")
    return redirect(notebooks.external_url(workload.pk))


# The relayed pages are the notebook's, not the portal's: no script of theirs may run with the portal's origin.
NOTEBOOK_SANDBOX = "sandbox allow-forms allow-scripts allow-downloads allow-popups; default-src 'self' data: blob: " \
                   "'unsafe-inline' 'unsafe-eval'"


@csp_exempt()  # type: ignore[arg-type]  # django-csp's decorator is typed for one-argument views
@login_required
@require_http_methods(["GET", "POST", "PUT", "PATCH", "DELETE"])
def notebook(request: AuthenticatedRequest, pk: int, path: str = "") -> HttpResponse:
    """The owner's requests relayed to the running notebook through the API server's service proxy (proxy mode)."""
    workload = _connectable(request, pk)
    if settings.NOTEBOOK_EXPOSE != "proxy" or workload.status != Status.RUNNING:
        raise Http404("This notebook is not served through the portal.")
    try:
        relayed = notebooks.relay(namespace=workload.project.namespace, workload_id=workload.pk,
                                  method=request.method or "GET", path=path, query=[
                                      (key, value) for key in request.GET for value in request.GET.getlist(key)],
                                  headers=dict(request.headers), body=request.body)
    except notebooks.NotANotebookPath as exc:
        raise Http404("No such page in this notebook.") from exc
    except notebooks.NotebookUnreachable:
        return HttpResponse("The notebook did not answer; try again in a moment.", status=502,
                            content_type="text/plain")
    response = HttpResponse(relayed.body, status=relayed.status)
    for name, value in relayed.headers.items():
        response[name] = value
    response["Content-Security-Policy"] = NOTEBOOK_SANDBOX
    response["Cache-Control"] = "private, no-store"
    return response


@csp_exempt()  # type: ignore[arg-type]  # django-csp's decorator is typed for one-argument views
@login_required
@require_http_methods(["GET", "POST"])
def endpoint(request: AuthenticatedRequest, pk: int, path: str = "") -> HttpResponse:
    """A project member's requests relayed to a running inference service's model server (its Service) through the
    API server's service proxy, as for notebooks (proxy mode)."""
    workload = selectors.inference_to_reach(user=request.user, pk=pk)
    if workload is None or workload.from_outside:
        raise Http404("No such inference service.")
    if settings.INFERENCE_EXPOSE != "proxy" or workload.status != Status.RUNNING:
        raise Http404("This inference service is not served through the portal now.")
    try:
        relayed = notebooks.relay(namespace=workload.project.namespace, workload_id=workload.pk,
                                  method=request.method or "GET", path=path, query=[
                                      (key, value) for key in request.GET for value in request.GET.getlist(key)],
                                  headers=dict(request.headers), body=request.body, with_token=False)
    except notebooks.NotANotebookPath as exc:
        raise Http404("No such path in this inference service.") from exc
    except notebooks.NotebookUnreachable:
        return HttpResponse("The inference service did not answer; try again in a moment.", status=502,
                            content_type="text/plain")
    response = HttpResponse(relayed.body, status=relayed.status)
    for name, value in relayed.headers.items():
        response[name] = value
    response["Content-Security-Policy"] = NOTEBOOK_SANDBOX
    response["Cache-Control"] = "private, no-store"
    return response


def _endpoint_url(request: AuthenticatedRequest, workload: Workload) -> str:
    """Where the detail page sends a member to reach an inference service: the portal's relay (proxy mode) or the
    address its Ingress or HTTPRoute publishes; empty for anyone else and for anything else."""
    if workload.kind != Kind.INFERENCE or workload.from_outside or not access.can_reach_inference(
            request.user, workload):
        return ""
    if settings.INFERENCE_EXPOSE == "proxy":
        return request.build_absolute_uri(reverse("workloads:endpoint_root", args=[workload.pk]))
    return f"https://{notebooks.inference_host(workload.pk)}/"


# --- credentials (each user's own) --------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def credentials(request: AuthenticatedRequest) -> HttpResponse:
    """The user's credentials: names and keys only (values are never shown back), and a form to add one."""
    user = request.user
    projects = selectors.submit_projects(user=user)
    form = CredentialForm(request.POST or None, projects=projects)
    if request.method == "POST" and form.is_valid():
        try:
            credential = services.credential_create(actor=user, **form.cleaned_data)
        except ValidationError as exc:
            apply_service_errors(form, exc)
        else:
            messages.success(request, f"Credential {credential.name} saved; it is being written to "
                                      f"{credential.project.namespace}. Its values will not be shown again.")
            return redirect("workloads:credentials")
    return render(request, "workloads/credentials.html", {
        "form": form, "credentials": selectors.credentials_of(owner=user).order_by("project__slug", "name")})


@login_required
@require_http_methods(["GET", "POST"])
def credential_values(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Replace a credential's values (rotation): the old ones are never shown, the new ones replace them all."""
    credential = get_object_or_404(selectors.credentials_of(owner=request.user).select_related("project"), pk=pk)
    form = CredentialValuesForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.credential_values_replace(actor=request.user, credential=credential,
                                               values=form.cleaned_data["values"])
        except ValidationError as exc:
            apply_service_errors(form, exc)
        else:
            messages.success(request, f"New values for {credential.name} saved; the Secret in "
                                      f"{credential.project.namespace} is being rewritten. Workloads already running "
                                      f"keep the values they started with.")
            return redirect("workloads:credentials")
    return render(request, "workloads/credential_values.html", {"form": form, "credential": credential})


@login_required
@require_http_methods(["GET", "POST"])
def credential_delete(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    credential = get_object_or_404(selectors.credentials_of(owner=request.user), pk=pk)
    return confirm_delete_page(
        request, obj=credential.name, kind="credential", cancel="workloads:credentials",
        redirect_to="workloads:credentials", success=f"Credential {credential.name} deleted.",
        delete=lambda: services.credential_delete(actor=request.user, credential=credential),
        consequences="Its Kubernetes Secret is removed; running workloads keep what they read at start.")


# --- templates (everyone reads them, admins write them) -----------------------------------------------------------


@login_required
@require_GET
def templates(request: AuthenticatedRequest) -> HttpResponse:
    return render(request, "workloads/templates.html", {"templates": selectors.templates(), "fields": KIND_FIELDS,
                                                        "may_manage": access.can(request.user, Action.MANAGE)})


def _template_form(request: AuthenticatedRequest, *, form: WorkloadTemplateForm, save: Any, success: str,
                   template: WorkloadTemplate | None = None) -> HttpResponse:
    if request.method == "POST" and form.is_valid():
        try:
            save(form.cleaned_data)
        except ValidationError as exc:
            apply_service_errors(form, exc)
        else:
            messages.success(request, success)
            return redirect("workloads:templates")
    title = f"Edit template {template.name}" if template else "New workload template"
    return render(request, "workloads/template_form.html", {"form": form, "title": title, "fields": KIND_FIELDS,
                                                            "cancel": "workloads:templates"})


@login_required
@require_http_methods(["GET", "POST"])
def template_create(request: AuthenticatedRequest) -> HttpResponse:
    """A new template; `GET ?from=<id>` starts it from a form submission the admin sees ("Save as template")."""
    access.require(request.user, Action.MANAGE)
    initial = None
    if request.method == "GET" and request.GET.get("from"):
        source = selectors.workload_for_page(user=request.user, pk=parse_id(request.GET["from"]) or 0)
        if source is None:
            raise Http404("No such workload.")
        if source.from_outside or source.kind not in PORTAL_KIND_VALUES:
            raise BadRequest("Only what the submit forms submitted makes a template; this workload came another way.")
        initial = template_initial_from_workload(source)
    form = WorkloadTemplateForm(request.POST or None, initial=initial)
    return _template_form(request, form=form, success="Template created.",
                          save=lambda data: services.workload_template_create(actor=request.user, **data))


@login_required
@require_http_methods(["GET", "POST"])
def template_edit(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    access.require(request.user, Action.MANAGE)
    template = get_object_or_404(selectors.templates(), pk=pk)
    form = WorkloadTemplateForm(request.POST or None, instance=template)
    return _template_form(request, form=form, template=template, success=f"Template {template.name} saved.",
                          save=lambda data: services.workload_template_update(
                              actor=request.user, template=template, expected_version=form.expected_version, **data))


@login_required
@require_http_methods(["GET", "POST"])
def template_delete(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    access.require(request.user, Action.MANAGE)
    template = get_object_or_404(selectors.templates(), pk=pk)
    return confirm_delete_page(
        request, obj=template, kind="template", cancel="workloads:templates", redirect_to="workloads:templates",
        delete=lambda: services.workload_template_delete(actor=request.user, template=template),
        success=f"Template {template.name} deleted.", consequences="Workloads submitted from it are not affected.")
