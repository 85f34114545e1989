"""Access pages: who holds which role where. Thin: the access module scopes and decides, services write."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from apps.core.forms import apply_service_errors
from apps.core.http import AuthenticatedRequest
from apps.core.views import confirm_delete_page

from . import access, selectors, services
from .access import Action
from .forms import (
    GroupRoleRuleForm,
    NotificationPreferenceForm,
    PersonalTokenForm,
    PortalAuthenticationForm,
    RoleBindingForm,
)

REMOVE_BINDING_CONSEQUENCES = "The subject loses this role at this scope and below."


def login_context(request: HttpRequest, *, lockout: str | None = None) -> dict[str, Any]:
    """What the login page shows besides its form: single sign-on, whether passwords work, a lockout."""
    return {
        "oidc_enabled": settings.OIDC_ENABLED, "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
        "local_login": settings.LOCAL_LOGIN, "lockout": lockout,
        "next": request.GET.get("next", "") or request.POST.get("next", ""),
        "form": PortalAuthenticationForm(request) if lockout else None,
    }


class PortalLoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    authentication_form = PortalAuthenticationForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        extra = login_context(self.request)
        extra.pop("form")
        extra.pop("next")
        return {**context, **extra}


@login_required
def role_bindings(request: AuthenticatedRequest) -> HttpResponse:
    user = request.user
    bindings = access.role_bindings_for(user).select_related("user", "group", "department", "project__department")
    manual_admin_bindings = access.manual_admin_binding_count()
    return render(request, "accounts/role_bindings.html", {
        "rows": [{"binding": b, "can_delete": access.may_remove_binding(user, b,
                                                                        manual_admin_bindings=manual_admin_bindings)}
                 for b in bindings],
        "can_create": access.can_anywhere(user, Action.MANAGE_MEMBERS),
        "remove_consequences": REMOVE_BINDING_CONSEQUENCES,
        "can_manage_rules": access.can_manage_group_rules(user),
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
    return confirm_delete_page(
        request, obj=binding, kind="role binding", verb="Remove", cancel="accounts:role_bindings",
        redirect_to="accounts:role_bindings", success=f"Removed {binding}.",
        delete=lambda: services.role_binding_delete(actor=request.user, binding=binding),
        consequences=REMOVE_BINDING_CONSEQUENCES)


@login_required
@require_http_methods(["GET", "POST"])
def my_settings(request: AuthenticatedRequest) -> HttpResponse:
    """The signed-in user's own settings: which workload events reach them by e-mail (opt-in)."""
    user = request.user
    preference = selectors.notification_preference(user)
    fields = ("on_admitted", "on_preempted", "on_finished", "on_failed", "on_idle")
    initial = {name: getattr(preference, name) for name in fields} if preference else {}
    form = NotificationPreferenceForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        services.notification_preference_set(user=user, **{name: form.cleaned_data[name] for name in fields})
        messages.success(request, "Saved: you get e-mail for the events ticked below." if any(
            form.cleaned_data.values()) else "Saved: you get no workload e-mail.")
        return redirect("accounts:settings")
    return render(request, "accounts/settings.html", {"form": form, "email": user.email})


# --- IdP group rules (admins) ---------------------------------------------------------------------------------


@login_required
def group_rules(request: AuthenticatedRequest) -> HttpResponse:
    access.require_rule_manager(request.user)
    rules = selectors.group_rules()
    return render(request, "accounts/group_rules.html", {
        "rules": rules, "oidc_enabled": settings.OIDC_ENABLED, "groups_claim": settings.OIDC_GROUPS_CLAIM,
    })


def _rule_form_page(request: AuthenticatedRequest, form: GroupRoleRuleForm, save: Any, *, title: str,
                    success: str) -> HttpResponse:
    if request.method == "POST" and form.is_valid():
        try:
            save(form)
        except ValidationError as exc:
            apply_service_errors(form, exc, {"department": "scope", "project": "scope"})
        else:
            messages.success(request, success)
            return redirect("accounts:group_rules")
    return render(request, "core/form_page.html", {"form": form, "title": title, "cancel": "accounts:group_rules"})


@login_required
@require_http_methods(["GET", "POST"])
def group_rule_create(request: AuthenticatedRequest) -> HttpResponse:
    access.require_rule_manager(request.user)
    form = GroupRoleRuleForm(request.POST or None)
    return _rule_form_page(
        request, form, lambda f: services.group_role_rule_create(actor=request.user, **f.service_fields()),
        title="New IdP group rule", success="Rule created; single-sign-on users' bindings follow it now.",
    )


@login_required
@require_http_methods(["GET", "POST"])
def group_rule_edit(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    access.require_rule_manager(request.user)
    rule = get_object_or_404(selectors.group_rules(), pk=pk)
    form = GroupRoleRuleForm(request.POST or None, rule=rule)
    return _rule_form_page(
        request, form, lambda f: services.group_role_rule_update(actor=request.user, rule=rule,
                                                                 expected_version=f.expected_version,
                                                                 **f.service_fields()),
        title=f"Edit IdP group rule {rule.group_pattern}", success="Rule saved; the bindings it makes follow it now.",
    )


@login_required
@require_http_methods(["GET", "POST"])
def group_rule_delete(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    access.require_rule_manager(request.user)
    rule = get_object_or_404(selectors.group_rules(), pk=pk)
    return confirm_delete_page(
        request, obj=rule, kind="IdP group rule", cancel="accounts:group_rules", redirect_to="accounts:group_rules",
        success=f"Removed the rule for {rule.group_pattern}.",
        delete=lambda: services.group_role_rule_delete(actor=request.user, rule=rule),
        consequences="Role bindings that only this rule made are removed now (bindings granted by hand stay).")


# --- my API tokens ------------------------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def my_tokens(request: AuthenticatedRequest) -> HttpResponse:
    """The signed-in user's personal access tokens: create one (its secret shown once), see when each was used."""
    form = PersonalTokenForm(request.POST if request.method == "POST" else None)
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            token, secret = services.personal_token_create(user=request.user, name=form.cleaned_data["name"],
                                                           expires_at=form.expires_at())
        except ValidationError as exc:
            apply_service_errors(form, exc, {"expires_at": "expires_on"})
        else:
            created = {"token": token, "secret": secret}
            form = PersonalTokenForm()
    now = timezone.now()
    tokens = [{"token": t, "state": t.state(now)} for t in access.tokens_for(request.user)]
    response = render(request, "accounts/tokens.html", {"form": form, "tokens": tokens, "created": created,
                                                        "max_days": settings.API_TOKEN_MAX_DAYS})
    if created:
        response["Cache-Control"] = "no-store"  # the secret must not linger in caches
    return response


@login_required
@require_POST
def my_token_revoke(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(access.tokens_for(request.user), pk=pk)
    services.personal_token_revoke(actor=request.user, token=token)
    messages.success(request, f"Revoked the token {token.name}: it no longer works.")
    return redirect("accounts:tokens")
