"""Page helpers every app's views share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.shortcuts import redirect, render, resolve_url
from django.template import loader

API_PREFIX = "/api/"


def confirm_delete_page(
    request: HttpRequest, *, obj: Any, delete: Callable[[], Any], kind: str, cancel: str, success: str,
    redirect_to: str, consequences: str = "", verb: str = "Delete", audited: bool = True,
) -> HttpResponse:
    """GET asks "delete this?" (or `verb` it: remove, stop); POST deletes through the service, or shows its refusal
    on this page (400), nothing changed. `cancel` and `redirect_to` are URL names or paths. The GET page is the
    confirmation without JavaScript; portal.js asks the same question in a dialog before posting (links marked
    data-confirm)."""
    if request.method == "POST":
        try:
            delete()
        except ValidationError as exc:  # refused: the confirm page again, saying why, with nothing deleted
            return render(request, "core/confirm_delete.html", {
                "object": obj, "kind": kind, "cancel_url": resolve_url(cancel), "verb": verb,
                "refusals": exc.messages}, status=400)
        messages.success(request, success)
        return redirect(redirect_to)
    return render(request, "core/confirm_delete.html", {
        "object": obj, "kind": kind, "cancel_url": resolve_url(cancel), "consequences": consequences,
        "verb": verb, "audited": audited,
    })


# --- error pages (portal/urls.py names them as Django's handler400/403/404/500) ---------------------------------


def _message(exception: Exception | None, default: str) -> str:
    """The view's own words (PermissionDenied("..."), Http404("...")), or `default` when it gave none; the
    resolver's "no such URL" carries a dict, not words."""
    argument = exception.args[0] if exception is not None and exception.args else None
    return argument if isinstance(argument, str) and argument else default


def _error(request: HttpRequest, exception: Exception | None, *, status: int, title: str, default: str,
           api_detail: str) -> HttpResponse:
    """The API keeps answering its JSON shape ({"detail": ...}, as DRF does); pages get the styled layout."""
    if request.path_info.startswith(API_PREFIX):
        return JsonResponse({"detail": _message(exception, api_detail)}, status=status)
    return render(request, f"{status}.html", {"title": title, "message": _message(exception, default)},
                  status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _error(request, None, status=400, title="Bad request", api_detail="Bad request.",
                  default="The portal could not understand this request. Go back and try again.")


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _error(request, exception, status=403, title="Not allowed",
                  api_detail="You do not have permission to perform this action.",
                  default="Your roles do not allow this here. An admin of this department can grant you a role.")


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _error(request, exception, status=404, title="Not found", api_detail="Not found.",
                  default="There is nothing at this address, or nothing you may see.")


def server_error(request: HttpRequest) -> HttpResponse:
    """A minimal page: no database, no context processors (either may be what failed), and plain text if even
    the template fails."""
    if request.path_info.startswith(API_PREFIX):
        return JsonResponse({"detail": "A server error occurred."}, status=500)
    try:
        return HttpResponseServerError(loader.get_template("500.html").render())
    except Exception:  # the last resort must not fail itself
        return HttpResponseServerError("Server error (500). Try again in a minute.", content_type="text/plain")
