"""Who acts: the types of the user that services, selectors, access checks and tasks are handed.

The portal uses Django's own `auth.User`. Two names, so mypy can tell them apart:
- `Actor`, the signed-in user. Services, selectors, forms, view helpers and tasks take an Actor (or None where the
  portal itself acts). Views serve signed-in users only (`login_required`, DRF's `IsAuthenticated`) and say so with
  their request type (`apps.core.http.AuthenticatedRequest`, `apps.core.api.AuthenticatedAPIRequest`), so no
  service is ever handed an AnonymousUser.
- `Visitor`, whoever a request comes from, before sign-in too: `request.user` as Django and DRF type it. Only what
  answers "no" or "nothing" for the anonymous visitor takes one: the access module's questions (`can`, `restrict`,
  ...), the `*_for(user)` querysets over `restrict` (which API serializers ask with the request's user as it comes)
  and the navigation.
Where neither request type can be declared (django-admin's hooks, whose signatures Django fixes), `signed_in` turns
the request's user into an Actor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from django.core.exceptions import PermissionDenied

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

Actor: TypeAlias = "User"
Visitor: TypeAlias = "User | AnonymousUser"


def signed_in(user: Visitor) -> Actor:
    """The user of a request that only signed-in users reach (django-admin admits active staff only), as an Actor;
    an anonymous one is refused (403), never handed on."""
    if not user.is_authenticated:
        raise PermissionDenied("Sign in first.")
    return user
