"""The notification channel pages (docs/architecture.md, Notification channels): the list of the channels one sets up,
the forms, a channel's page with its delivery log and the "send test" button.

Who: anyone signed in sets up their own channels; team leads, department admins and admins also those of the
projects in their scope. The channels come from selectors.notification_channels_for, so one the user may not set up
(another person's own, another department's project's) answers 404, on every page. Writes go through the services
the API calls (apps.org.services.notifications), which check every rule and audit the projects' channels.

htmx: the list's filter form gets the rows back (the page's partial); the test button gets the delivery log back,
which polls while a delivery is pending. Without JavaScript the test button posts and comes back to the channel's
page.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.filters import filter_page
from apps.core.forms import apply_service_errors
from apps.core.http import AuthenticatedRequest
from apps.core.views import confirm_delete_page

from . import selectors, services
from .filters import NotificationChannelFilterSet
from .forms import NotificationChannelForm
from .models import NotificationChannel, NotificationDelivery

FIXED_FIELDS = ("project", "kind")


def _channel(request: AuthenticatedRequest, pk: int) -> NotificationChannel:
    """Every channel the user may see is theirs to change (the selector returns only those)."""
    return get_object_or_404(selectors.notification_channels_for(request.user), pk=pk)


def _projects(request: AuthenticatedRequest) -> Any:
    return selectors.projects_for(request.user, Action.EDIT_WEIGHT)


@login_required
@require_GET
def notification_channels(request: AuthenticatedRequest) -> HttpResponse:
    """The list through the API's FilterSet, each channel with its newest delivery (three queries however many)."""
    user = request.user
    filterset = NotificationChannelFilterSet(request.GET, queryset=selectors.notification_channels_for(user),
                                             request=request)
    page = filter_page(filterset, per_page=50, number=request.GET.get("page"))
    channels = list(page.object_list)
    last = selectors.notification_last_deliveries([channel.pk for channel in channels])
    page.object_list = [{"channel": channel, "last": last.get(channel.pk)} for channel in channels]
    query = request.GET.copy()
    query.pop("page", None)
    template = "org/partials/_channel_rows.html" if request.htmx else "org/notification_channels.html"
    return render(request, template, {
        "form": filterset.form, "page": page, "query": query.urlencode(),
        "project_channels": access.can_manage_notifications_somewhere(user)})


def _log_context(channel: NotificationChannel) -> dict[str, Any]:
    deliveries = selectors.notification_deliveries(channel)
    return {"channel": channel, "deliveries": deliveries,
            "pending": any(d.status == NotificationDelivery.Status.PENDING for d in deliveries)}


@login_required
@require_GET
def notification_channel(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """A channel and its delivery log (the last 50, each with its last error); htmx polls the log alone."""
    channel = _channel(request, pk)
    template = "org/partials/_channel_deliveries.html" if request.htmx else "org/notification_channel.html"
    return render(request, template, _log_context(channel))


@login_required
@require_POST
def notification_channel_test(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Send a test event now: a pending delivery the worker sends after commit."""
    channel = _channel(request, pk)
    link = f"{settings.PORTAL_BASE_URL}{reverse('org:notification_channel', args=[channel.pk])}"
    services.notification_channel_test(actor=request.user, channel=channel, link=link)
    if request.htmx:
        return render(request, "org/partials/_channel_deliveries.html", _log_context(channel))
    messages.success(request, "Test sent: its delivery is in the log below.")
    return redirect("org:notification_channel", pk=channel.pk)


def _form_page(request: AuthenticatedRequest, form: NotificationChannelForm, save: Any, *, title: str,
               success: str, submit_label: str, cancel: str) -> HttpResponse:
    if request.method == "POST" and form.is_valid():
        try:
            channel = save(form)
        except ValidationError as exc:
            apply_service_errors(form, exc)
        except PermissionDenied as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, success)
            return redirect("org:notification_channel", pk=channel.pk)
    return render(request, "org/notification_channel_form.html", {
        "form": form, "title": title, "cancel": cancel, "submit_label": submit_label})


@login_required
@require_http_methods(["GET", "POST"])
def notification_channel_create(request: AuthenticatedRequest) -> HttpResponse:
    form = NotificationChannelForm(request.POST or None, projects=_projects(request))

    def save(f: NotificationChannelForm) -> NotificationChannel:
        return services.notification_channel_create(actor=request.user, **f.cleaned_data)

    return _form_page(request, form, save, title="New notification channel", success="Channel created.",
                      submit_label="Create", cancel=reverse("org:notification_channels"))


@login_required
@require_http_methods(["GET", "POST"])
def notification_channel_edit(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    channel = _channel(request, pk)
    form = NotificationChannelForm(request.POST or None, instance=channel, projects=_projects(request))

    def save(f: NotificationChannelForm) -> NotificationChannel:
        changes = {name: value for name, value in f.cleaned_data.items() if name not in FIXED_FIELDS}
        for sealed_field in ("url", "secret"):  # empty: keep the stored one
            changes[sealed_field] = changes[sealed_field] or None
        return services.notification_channel_update(actor=request.user, channel=channel,
                                                    expected_version=f.expected_version, **changes)

    return _form_page(request, form, save, title=f"Edit {channel}", success="Channel saved.", submit_label="Save",
                      cancel=reverse("org:notification_channel", args=[channel.pk]))


@login_required
@require_http_methods(["GET", "POST"])
def notification_channel_delete(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    channel = _channel(request, pk)
    return confirm_delete_page(
        request, obj=channel, kind="notification channel", cancel=reverse("org:notification_channel", args=[pk]),
        redirect_to="org:notification_channels", audited=channel.project_id is not None,
        delete=lambda: services.notification_channel_delete(actor=request.user, channel=channel),
        success="Channel deleted.", consequences="Its delivery log goes with it; nothing more is sent to it.")
