"""The fixture's control endpoint: create or change a user and their groups at the provider (loopback only,
behind a per-run token)."""

from __future__ import annotations

import json
import secrets

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from oauth2_provider.models import Application


def _allowed(request: HttpRequest) -> bool:
    return secrets.compare_digest(request.headers.get("X-Control-Token", ""), settings.CONTROL_TOKEN)


@csrf_exempt
@require_POST
def control_redirect(request: HttpRequest) -> HttpResponse:
    """Register one more redirect URI for the portal's client (a live server's callback, say)."""
    if not _allowed(request):
        return HttpResponse(status=403)
    uri = json.loads(request.body)["uri"]
    application = Application.objects.get(client_id=settings.CLIENT_ID)
    if uri not in application.redirect_uris.split():
        application.redirect_uris = f"{application.redirect_uris} {uri}".strip()
        application.save(update_fields=["redirect_uris"])
    return JsonResponse({"redirect_uris": application.redirect_uris.split()})


@csrf_exempt
@require_POST
def control_user(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return HttpResponse(status=403)
    body = json.loads(request.body)
    user, _ = User.objects.get_or_create(username=body["username"])
    user.email = body.get("email", "")
    user.first_name = body.get("first_name", "")
    user.last_name = body.get("last_name", "")
    user.set_password(body["password"])
    user.save()
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in body.get("groups", [])])
    return JsonResponse({"id": user.pk, "groups": sorted(user.groups.values_list("name", flat=True))})
