"""Access pages: who holds which role where. Thin: the access module scopes and decides, services write."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from apps.core.forms import apply_service_errors
from apps.core.http import AuthenticatedRequest

from . import access, services
from .access import Action
from .forms import NotificationPreferenceForm, RoleBindingForm
from .models import NotificationPreference


@login_required
def role_bindings(request: AuthenticatedRequest) -> HttpResponse:
    user = request.user
    bindings = access.role_bindings_for(user).select_related("user", "group", "department", "project__department")
    return render(request, "accounts/role_bindings.html", {
        "rows": [{"binding": b, "can_delete": access.may_grant(user, b.role, b.scope_object)} for b in bindings],
        "can_create": access.can_anywhere(user, Action.MANAGE_MEMBERS),
    })


@login_required
@require_http_methods(["GET", "POST"])
def role_binding_create(request: AuthenticatedRequest) -> HttpResponse:
    if not access.can_anywhere(request.user, Action.MANAGE_MEMBERS):
        raise PermissionDenied("You may not manage role bindings.")
    form = RoleBindingForm(request.POST or None, actor=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            binding = services.role_binding_create(actor=request.user, **form.service_fields())
        except ValidationError as exc:
            apply_service_errors(form, exc)
        except PermissionDenied as exc:  # e.g. an admin role at a department scope: say why on the form
            form.add_error("role", str(exc) + " Admins are granted over everything, by admins only.")
        else:
            messages.success(request, f"Granted {binding.get_role_display()} to {binding.subject_display} at "
                                      f"{binding.scope_display}.")
            return redirect("accounts:role_bindings")
    return render(request, "core/form_page.html", {"form": form, "title": "Grant a role", "submit_label": "Grant",
                                                   "cancel": "accounts:role_bindings"})


@login_required
@require_http_methods(["GET", "POST"])
def role_binding_delete(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    binding = get_object_or_404(
        access.role_bindings_for(request.user).select_related("user", "group", "department", "project"), pk=pk
    )
    if not access.may_grant(request.user, binding.role, binding.scope_object):
        raise PermissionDenied("You may not remove this binding.")
    if request.method == "POST":
        try:
            services.role_binding_delete(actor=request.user, binding=binding)
        except ValidationError as exc:
            for message in exc.messages:
                messages.error(request, message)
        else:
            messages.success(request, f"Removed {binding}.")
        return redirect("accounts:role_bindings")
    return render(request, "core/confirm_delete.html", {
        "object": binding, "kind": "role binding", "cancel": "accounts:role_bindings",
        "consequences": "The subject loses this role at this scope and below.",
    })


@login_required
@require_http_methods(["GET", "POST"])
def my_settings(request: AuthenticatedRequest) -> HttpResponse:
    """The signed-in user's own settings: which workload events reach them by e-mail (opt-in)."""
    user = request.user
    preference = NotificationPreference.objects.filter(user=user).first()
    fields = ("on_admitted", "on_preempted", "on_finished", "on_failed")
    initial = {name: getattr(preference, name) for name in fields} if preference else {}
    form = NotificationPreferenceForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        services.notification_preference_set(user=user, **{name: form.cleaned_data[name] for name in fields})
        messages.success(request, "Saved: you get e-mail for the events ticked below." if any(
            form.cleaned_data.values()) else "Saved: you get no workload e-mail.")
        return redirect("accounts:settings")
    return render(request, "accounts/settings.html", {"form": form, "email": user.email})
