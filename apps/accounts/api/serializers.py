"""Shapes of the accounts API: the signed-in user and role bindings."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework import serializers

from apps.accounts import access
from apps.accounts.models import RoleBinding, scope_models
from apps.core.api import ScopedPrimaryKeyRelatedField, ShapeOnlyModelSerializer

Department, Project = scope_models()


class RoleBindingSerializer(ShapeOnlyModelSerializer):
    """(user or group, role, scope). Give `department` or `project` for a scoped binding, neither for everything."""

    user = serializers.SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.filter(is_active=True), allow_null=True,
        required=False,
    )
    group = serializers.SlugRelatedField(slug_field="name", queryset=Group.objects.all(), allow_null=True,
                                         required=False)
    department = ScopedPrimaryKeyRelatedField(
        scope=lambda user: access.restrict(Department.objects.all(), user), queryset=Department.objects.all(),
        allow_null=True, required=False,
    )
    project = ScopedPrimaryKeyRelatedField(
        scope=lambda user: access.restrict(Project.objects.all(), user), queryset=Project.objects.all(),
        allow_null=True, required=False,
    )

    class Meta:
        model = RoleBinding
        fields = ["id", "user", "group", "role", "scope", "department", "project", "created_at"]
        read_only_fields = ["scope", "created_at"]


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    first_name = serializers.CharField()
    last_name = serializers.CharField()
    email = serializers.EmailField()
    role_bindings = RoleBindingSerializer(many=True, help_text="Bindings held directly or through a group.")
