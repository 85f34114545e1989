"""The accounts API: who am I, and role bindings (read scoped, written through the services)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth import authenticate
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts import services
from apps.accounts.access import Action, bindings_for, can_anywhere, role_bindings_for, tokens_for
from apps.accounts.backends import refusal
from apps.accounts.lockout import lockout_message
from apps.accounts.models import PersonalAccessToken, RoleBinding
from apps.core.api import AuthenticatedAPIRequest, ServiceViewSet, StrictIdLookupMixin

from .serializers import (
    MeSerializer,
    NewPersonalTokenSerializer,
    PasswordSignInSerializer,
    PersonalTokenSerializer,
    RoleBindingSerializer,
    SignInTokenSerializer,
)

if TYPE_CHECKING:
    from rest_framework.serializers import BaseSerializer

_BINDING_RELATIONS = ("user", "group", "department", "project")


class MeView(APIView):
    """The signed-in user and the role bindings that apply to them."""

    request: AuthenticatedAPIRequest

    @extend_schema(responses=MeSerializer)
    def get(self, request: AuthenticatedAPIRequest) -> Response:
        user = request.user
        bindings = bindings_for(user).select_related(*_BINDING_RELATIONS)
        return Response(MeSerializer({
            "id": user.pk, "username": user.get_username(), "first_name": user.first_name,
            "last_name": user.last_name, "email": user.email, "role_bindings": bindings,
        }).data)


class RoleBindingViewSet(ServiceViewSet):
    """Role bindings at the scopes the user may see (always their own). Member managers create and remove them."""

    serializer_class = RoleBindingSerializer
    http_method_names = ["get", "post", "delete", "head", "options"]
    denied_message = "You may not change role bindings here."

    def get_queryset(self) -> QuerySet[RoleBinding]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no signed-in user
            return RoleBinding.objects.none()
        return role_bindings_for(self.request.user).select_related(*_BINDING_RELATIONS)

    def may_create(self) -> bool:
        return can_anywhere(self.request.user, Action.MANAGE_MEMBERS)

    def may_change(self, obj: RoleBinding) -> bool:
        return can_anywhere(self.request.user, Action.MANAGE_MEMBERS)

    def perform_create(self, serializer: BaseSerializer[RoleBinding]) -> None:
        serializer.instance = services.role_binding_create(actor=self.request.user, **serializer.validated_data)

    def perform_destroy(self, instance: RoleBinding) -> None:
        services.role_binding_delete(actor=self.request.user, binding=instance)


class PasswordTokenView(APIView):
    """Username and password -> a new personal access token with the default name and lifetime (for scripts that
    predate personal tokens). Throttled like the login form; refused while passwords are off and for demo accounts
    in production mode. Create named tokens on "My tokens" or at /api/v1/tokens/."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(request=PasswordSignInSerializer, responses={200: SignInTokenSerializer})
    def post(self, request: Request) -> Response:
        serializer = PasswordSignInSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        username = serializer.validated_data["username"]
        django_request = request._request  # axes marks lockouts on the request its middleware sees
        user = authenticate(django_request, username=username, password=serializer.validated_data["password"])
        if getattr(django_request, "axes_locked_out", False):
            return Response({"detail": lockout_message(username)}, status=status.HTTP_429_TOO_MANY_REQUESTS)
        if user is None:
            reason = refusal(django_request)
            if reason:
                return Response({"detail": reason}, status=status.HTTP_403_FORBIDDEN)
            return Response({"non_field_errors": ["Unable to log in with provided credentials."]},
                            status=status.HTTP_400_BAD_REQUEST)
        _, secret = services.personal_token_create(user=user,
                                                   name=f"API sign-in {timezone.now():%Y-%m-%d %H:%M} UTC")
        return Response({"token": secret})


class PersonalTokenViewSet(StrictIdLookupMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                           mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Your personal access tokens. POST creates one and answers its secret once; DELETE revokes one (it stays
    listed as revoked). Creating needs a signed-in session or your password (/api/v1/auth/token/): a token cannot
    mint tokens."""

    request: AuthenticatedAPIRequest
    serializer_class = PersonalTokenSerializer

    def get_queryset(self) -> QuerySet[PersonalAccessToken]:
        if getattr(self, "swagger_fake_view", False):
            return PersonalAccessToken.objects.none()
        return tokens_for(self.request.user)

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "now": timezone.now()}

    @extend_schema(request=PersonalTokenSerializer, responses={201: NewPersonalTokenSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if isinstance(request.auth, PersonalAccessToken):
            raise PermissionDenied("A token cannot create tokens: sign in, or use /api/v1/auth/token/.")
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token, secret = services.personal_token_create(user=self.request.user, name=serializer.validated_data["name"],
                                                       expires_at=serializer.validated_data.get("expires_at"))
        token.token = secret  # type: ignore[attr-defined]
        body = NewPersonalTokenSerializer(token, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})

    def perform_destroy(self, instance: PersonalAccessToken) -> None:
        services.personal_token_revoke(actor=self.request.user, token=instance)
