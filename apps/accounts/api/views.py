"""The accounts API: who am I, and role bindings (read scoped, written through the services)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts import services
from apps.accounts.access import Action, bindings_for, can_anywhere, role_bindings_for
from apps.accounts.models import RoleBinding
from apps.core.api import ServiceViewSet

from .serializers import MeSerializer, RoleBindingSerializer

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from rest_framework.serializers import BaseSerializer

_BINDING_RELATIONS = ("user", "group", "department", "project")


class MeView(APIView):
    """The signed-in user and the role bindings that apply to them."""

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        user = cast("User", request.user)  # IsAuthenticated (the default permission) admits signed-in users only
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

    def may_change(self, obj: Any) -> bool:
        return can_anywhere(self.request.user, Action.MANAGE_MEMBERS)

    def perform_create(self, serializer: BaseSerializer[RoleBinding]) -> None:
        serializer.instance = services.role_binding_create(actor=self.request.user, **serializer.validated_data)

    def perform_destroy(self, instance: RoleBinding) -> None:
        services.role_binding_delete(actor=self.request.user, binding=instance)
