"""Page helpers every app's views share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render


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
