"""Page helpers every app's views share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render, resolve_url


def confirm_delete_page(
    request: HttpRequest, *, obj: Any, delete: Callable[[], Any], kind: str, cancel: str, success: str,
    redirect_to: str, consequences: str = "", verb: str = "Delete", audited: bool = True,
) -> HttpResponse:
    """GET asks "delete this?" (or `verb` it: remove, stop); POST deletes through the service, or shows its refusal
    back on the cancel page. `cancel` and `redirect_to` are URL names or paths. The GET page is the confirmation
    without JavaScript; portal.js asks the same question in a dialog before posting (links marked data-confirm)."""
    if request.method == "POST":
        try:
            delete()
        except ValidationError as exc:
            for message in exc.messages:
                messages.error(request, message)
            return redirect(cancel)
        messages.success(request, success)
        return redirect(redirect_to)
    return render(request, "core/confirm_delete.html", {
        "object": obj, "kind": kind, "cancel_url": resolve_url(cancel), "consequences": consequences,
        "verb": verb, "audited": audited,
    })
