"""The policies page (docs/architecture.md, Policies): every policy the user may see, field by field, and for admins
and department admins the forms that set them, with a preview of the live work a proposed policy would refuse. It
lives in apps.workloads, not apps.org, because the preview reads workloads (the stack puts workloads above org);
writes go through apps.org.services, which check every rule and write the audit rows.

Who: everyone signed in reads the policies of what they see and the organisation's; admins set every policy,
department admins their departments' and their projects'. A policy the user may not see answers 404; one they see
but may not change, 403.

Form protocol: a POST with `_preview` (htmx or not) saves nothing and answers the preview
(`selectors.workloads_breaking`) for the form's values, to the page's `#breaking` block under htmx; a plain POST
saves and redirects to the list, or shows the page with every refusal at once.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.forms import apply_service_errors
from apps.core.http import AuthenticatedRequest
from apps.core.views import confirm_delete_page
from apps.org import selectors as org_selectors
from apps.org import services as org_services
from apps.org.forms import PolicyForm
from apps.org.models import Policy
from apps.org.policies import POLICY_FIELDS, policy_field_errors

from . import selectors

NOT_A_POLICY_SETTER = "Only admins and department admins set policies."
SCOPE_FIELDS = ("department", "project")


def _changeable(request: AuthenticatedRequest, pk: int) -> Policy:
    policy = get_object_or_404(org_selectors.policies_for(request.user), pk=pk)
    if not access.can_manage_policy(request.user, policy):
        raise PermissionDenied("You may read this policy but not change it.")
    return policy


def _choices(request: AuthenticatedRequest) -> dict[str, Any]:
    user = request.user
    return {"departments": org_selectors.departments_for(user, Action.MANAGE_PROJECTS),
            "projects": org_selectors.projects_for(user, Action.MANAGE_PROJECTS)}


@login_required
@require_GET
def policies(request: AuthenticatedRequest) -> HttpResponse:
    """The list: each policy's fields (empty: inherited from the scope above), and Edit / Delete where the user may."""
    user = request.user
    rows = [{"policy": policy, "can_change": access.can_manage_policy(user, policy),
             "fields": [(name, getattr(policy, name)) for name in POLICY_FIELDS]}
            for policy in org_selectors.policies_for(user)]
    return render(request, "workloads/policies.html", {
        "rows": rows, "can_create": access.can_manage_policies_somewhere(user)})


def _proposed(form: PolicyForm, instance: Policy | None) -> Policy:
    """The policy as the form would make it, unsaved."""
    data = {name: value for name, value in form.cleaned_data.items() if name not in SCOPE_FIELDS}
    if instance is not None:
        proposed = Policy.objects.select_related("department", "project__department").get(pk=instance.pk)
    else:
        proposed = Policy(department=form.cleaned_data.get("department"), project=form.cleaned_data.get("project"))
    for name, value in data.items():
        setattr(proposed, name, value)
    return proposed


def _form_page(request: AuthenticatedRequest, form: PolicyForm, instance: Policy | None, *, title: str,
               success: str, submit_label: str) -> HttpResponse:
    preview = None
    if request.method == "POST" and form.is_valid():
        if "_preview" in request.POST:
            proposed = _proposed(form, instance)
            if not access.can_manage_policy(request.user, proposed):
                raise PermissionDenied(NOT_A_POLICY_SETTER)
            refused = policy_field_errors(proposed)
            if refused:  # a policy that could not be saved previews nothing; its own mistakes say why
                apply_service_errors(form, ValidationError(refused))
            else:
                preview = selectors.workloads_breaking(policy=proposed)
            if request.htmx:
                return render(request, "workloads/partials/_policy_breaking.html", {
                    "preview": preview, "form_invalid": bool(refused), "refused": refused})
        else:
            try:
                _save(request, form, instance)
            except ValidationError as exc:
                apply_service_errors(form, exc)
            except PermissionDenied as exc:
                form.add_error(None, str(exc) or NOT_A_POLICY_SETTER)
            else:
                messages.success(request, success)
                return redirect("workloads:policies")
    elif request.method == "POST" and request.htmx:
        return render(request, "workloads/partials/_policy_breaking.html", {
            "form_invalid": True, "refused": form.errors})
    return render(request, "workloads/policy_form.html", {
        "form": form, "title": title, "cancel": "workloads:policies", "submit_label": submit_label,
        "preview": preview})


def _save(request: AuthenticatedRequest, form: PolicyForm, instance: Policy | None) -> Policy:
    if instance is None:
        return org_services.policy_create(actor=request.user, **form.cleaned_data)
    changes = {name: value for name, value in form.cleaned_data.items() if name not in SCOPE_FIELDS}
    return org_services.policy_update(actor=request.user, policy=instance, expected_version=form.expected_version,
                                      **changes)


@login_required
@require_http_methods(["GET", "POST"])
def policy_create(request: AuthenticatedRequest) -> HttpResponse:
    if not access.can_manage_policies_somewhere(request.user):
        raise PermissionDenied(NOT_A_POLICY_SETTER)
    form = PolicyForm(request.POST or None, **_choices(request))
    return _form_page(request, form, None, title="New policy", success="Policy created.", submit_label="Create")


@login_required
@require_http_methods(["GET", "POST"])
def policy_edit(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    policy = _changeable(request, pk)
    form = PolicyForm(request.POST or None, instance=policy, **_choices(request))
    return _form_page(request, form, policy, title=f"Edit {policy.scope_text()}", success="Policy saved.",
                      submit_label="Save")


@login_required
@require_http_methods(["GET", "POST"])
def policy_delete(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    policy = _changeable(request, pk)
    return confirm_delete_page(
        request, obj=policy, kind="policy", cancel="workloads:policies", redirect_to="workloads:policies",
        delete=lambda: org_services.policy_delete(actor=request.user, policy=policy),
        success="Policy deleted.", consequences="Its scope inherits every field from the scope above.")
