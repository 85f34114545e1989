"""Shapes of the accounts API: the signed-in user and role bindings."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework import serializers

from apps.accounts import access
from apps.accounts.models import PersonalAccessToken, RoleBinding, scope_models
from apps.core.api import ScopedPrimaryKeyRelatedField, ShapeOnlyModelSerializer, StrictCharField

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
        fields = ["id", "user", "group", "role", "scope", "department", "project", "created_at", "source"]
        read_only_fields = ["scope", "created_at", "source"]


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    first_name = serializers.CharField()
    last_name = serializers.CharField()
    email = serializers.CharField(help_text="An e-mail address, or empty when none is known.")
    role_bindings = RoleBindingSerializer(many=True, help_text="Bindings held directly or through a group.")


class PersonalTokenSerializer(ShapeOnlyModelSerializer):
    """A personal access token. `token` (the secret) appears once, in the answer to the POST that created it."""

    state = serializers.SerializerMethodField(help_text="active, expired or revoked")
    expires_at = serializers.DateTimeField(required=False, allow_null=True,
                                           help_text="When it stops working; default and maximum from the settings.")

    class Meta:
        model = PersonalAccessToken
        fields = ["id", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at", "state"]
        read_only_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]

    def get_state(self, token: PersonalAccessToken) -> str:
        return token.state(self.context["now"])


class NewPersonalTokenSerializer(PersonalTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret: shown this once, never stored in clear.")

    class Meta(PersonalTokenSerializer.Meta):
        fields = [*PersonalTokenSerializer.Meta.fields, "token"]


class PasswordSignInSerializer(serializers.Serializer):
    username = StrictCharField(max_length=150)
    password = StrictCharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class SignInTokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="A new personal access token (the default lifetime); shown once.")
