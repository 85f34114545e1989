"""/api/v1/inference-services/: submit an inference service on a serving pool, read the ones you may see, and
scale or roll one to a new image (PATCH `replicas`, `image`). The rules are the service's
(apps.workloads.services.inference); a refusal is a 400 naming each field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.fields import SkipField
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api import AuthenticatedAPIRequest, StrictCharField, StrictIdLookupMixin, validation_error_detail
from apps.org.models import NodePool, Project
from apps.org.selectors import projects_for
from apps.workloads import services
from apps.workloads.models import Kind, Workload
from apps.workloads.selectors import workloads_for

from .views import IDEMPOTENCY_KEY_PARAMETER, IdempotencyKeyReused, idempotency_key, request_digest


class InferenceServiceSerializer(serializers.ModelSerializer):
    """An inference service: its Deployment's (LeaderWorkerSet's, with `pods` > 1 per replica) shape, status and
    ready replicas (as the cluster last said)."""

    project = serializers.SlugRelatedField(slug_field="slug", queryset=Project.objects.all())
    node_pool = serializers.SlugRelatedField(slug_field="slug", queryset=NodePool.objects.all())
    command = serializers.ListField(child=StrictCharField(allow_blank=True), required=False)
    args = serializers.ListField(child=StrictCharField(allow_blank=True), required=False)

    class Meta:
        model = Workload
        fields = ["id", "project", "node_pool", "name", "image", "command", "args", "gpus", "replicas", "pods",
                  "serving_port", "cpu", "memory_gib", "model_label", "data_class", "status", "status_message",
                  "ready_replicas", "job_name", "created_at"]
        read_only_fields = ["id", "status", "status_message", "ready_replicas", "job_name", "created_at"]

    def validate_project(self, project: Project) -> Project:
        if not projects_for(self.context["request"].user).filter(pk=project.pk).exists():
            raise serializers.ValidationError("No such project.")
        return project

    def known_values(self) -> tuple[dict[str, Any], set[str]]:
        """After a failed `is_valid()`: the values of the fields that passed their own checks and the names of those
        that did not, for `services.inference_check`, so one 400 carries every field's messages."""
        known: dict[str, Any] = {}
        unknown: set[str] = set()
        data = self.initial_data if isinstance(self.initial_data, Mapping) else {}
        for field in self._writable_fields:
            try:
                if field.field_name in self.errors:
                    raise serializers.ValidationError("failed")
                value = field.run_validation(field.get_value(data))
                check = getattr(self, f"validate_{field.field_name}", None)
                known[str(field.source)] = check(value) if check else value
            except serializers.ValidationError:
                unknown.add(str(field.source))
            except SkipField:
                pass
        return known, unknown


class InferenceUpdateSerializer(serializers.Serializer):
    replicas = serializers.IntegerField(required=False)
    image = StrictCharField(required=False)


class InferenceServiceViewSet(StrictIdLookupMixin, mixins.CreateModelMixin, mixins.UpdateModelMixin,
                              viewsets.ReadOnlyModelViewSet):
    """Inference services of the projects you see; writes through apps.workloads.services.inference."""

    request: AuthenticatedAPIRequest
    serializer_class = InferenceServiceSerializer
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_queryset(self) -> QuerySet[Workload]:
        if getattr(self, "swagger_fake_view", False):
            return Workload.objects.none()
        return (workloads_for(self.request.user).filter(kind=Kind.INFERENCE)
                .select_related("project", "node_pool").order_by("-pk"))

    @extend_schema(parameters=[IDEMPOTENCY_KEY_PARAMETER],
                   responses={201: InferenceServiceSerializer,
                              422: OpenApiResponse(description="The Idempotency-Key was used for another request.")})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Submit a service (every refusal at once), once per Idempotency-Key (a repeat answers the first one: 201,
        Idempotent-Replayed); the service's refusals are a 400 through the API's exception handler."""
        key = idempotency_key(request)
        serializer = InferenceServiceSerializer(data=request.data, context=self.get_serializer_context())
        if not serializer.is_valid():
            # The fields' own errors, then the service's refusals of the fields that passed: every one in one 400.
            errors = {name: list(messages) for name, messages in cast(dict[str, Any], serializer.errors).items()}
            known, unknown = serializer.known_values()
            try:
                services.inference_check(actor=self.request.user, unknown=unknown, **known)
            except DjangoValidationError as error:
                for name, messages in validation_error_detail(error).items():
                    errors.setdefault(name, []).extend(messages)
            raise serializers.ValidationError(errors)
        try:
            workload, created = services.inference_submit_once(
                actor=self.request.user, submission_key=f"api:{key}" if key else None,
                submission_digest=request_digest(request.data) if key else "", **serializer.validated_data)
        except services.SubmissionKeyReused as error:
            raise IdempotencyKeyReused(error.messages[0]) from error
        headers = {} if created else {"Idempotent-Replayed": "true"}
        return Response(self.get_serializer(workload).data, status=status.HTTP_201_CREATED, headers=headers)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        workload = self.get_object()
        changes = InferenceUpdateSerializer(data=request.data)
        changes.is_valid(raise_exception=True)
        extra = sorted(set(request.data) - set(InferenceUpdateSerializer().fields)) if isinstance(
            request.data, dict) else []
        if extra:
            raise serializers.ValidationError({name: ["Only replicas and image change here."] for name in extra})
        workload = services.inference_update(actor=self.request.user, workload=workload, **changes.validated_data)
        return Response(self.get_serializer(workload).data, status=status.HTTP_200_OK)
