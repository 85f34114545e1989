"""GET /api/v1/credentials/: your own credentials, names and keys only (never a value: the portal keeps none once
the worker has written the Secret). Made, rotated and deleted on My credentials."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import serializers, viewsets

from apps.core.api import AuthenticatedAPIRequest, StrictIdLookupMixin
from apps.org.models import Project
from apps.workloads.models import Credential
from apps.workloads.selectors import credentials_of


class CredentialSerializer(serializers.ModelSerializer):
    """A credential: the environment variable names it sets in the workloads that pick it, never their values."""

    project_slug: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        source="project", slug_field="slug", read_only=True)
    keys = serializers.ListField(child=serializers.CharField(), read_only=True,
                                 help_text="The variable names it holds (never their values).")
    secret_name = serializers.CharField(read_only=True, help_text="The Opaque Secret in the project's namespace "
                                                                  "that workloads read through envFrom.")
    applied_at = serializers.DateTimeField(read_only=True, allow_null=True, help_text=(
        "When the worker last wrote the Secret; null while it is being written."))
    apply_error = serializers.CharField(read_only=True, help_text="Why the Secret is not written yet; empty when it "
                                                                  "is, or while it is being written.")

    class Meta:
        model = Credential
        fields = ["id", "project", "project_slug", "name", "keys", "secret_name", "applied_at", "apply_error",
                  "created_at"]
        read_only_fields = fields


class CredentialViewSet(StrictIdLookupMixin, viewsets.ReadOnlyModelViewSet):
    """Your credentials (everyone sees only their own; another's is a 404), by project and name: what a
    submission's `credentials` names."""

    request: AuthenticatedAPIRequest
    serializer_class = CredentialSerializer

    def get_queryset(self) -> QuerySet[Credential]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no signed-in user
            return Credential.objects.none()
        return credentials_of(owner=self.request.user).order_by("project__slug", "name", "pk")
