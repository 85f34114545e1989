"""Page helpers every app's views share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views import defaults


def confirm_delete_page(
    request: HttpRequest, *, obj: Any, delete: Callable[[], Any], kind: str, cancel: str, success: str,
    redirect_to: str, consequences: str = "",
) -> HttpResponse:
    """GET asks "delete this?"; POST deletes through the service, or shows its refusal on this page (400)."""
    if request.method == "POST":
        try:
            delete()
        except ValidationError as exc:  # refused: the confirm page again, saying why, with nothing deleted
            return render(request, "core/confirm_delete.html",
                          {"object": obj, "kind": kind, "cancel": cancel, "consequences": consequences,
                           "refusals": exc.messages}, status=400)
        messages.success(request, success)
        return redirect(redirect_to)
    return render(request, "core/confirm_delete.html",
                  {"object": obj, "kind": kind, "cancel": cancel, "consequences": consequences})


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: under /api/ a path that names no endpoint answers in the API's error shape, not a page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)
