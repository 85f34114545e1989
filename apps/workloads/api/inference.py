"""/api/v1/inference-services/: submit an inference service on a serving pool, read the ones you may see, and
scale or roll one to a new image (PATCH `replicas`, `image`). The rules are the service's
(apps.workloads.services.inference); a refusal is a 400 naming each field."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api import AuthenticatedAPIRequest, StrictCharField, StrictIdLookupMixin
from apps.org.models import NodePool, Project
from apps.org.selectors import projects_for
from apps.workloads import services
from apps.workloads.models import Kind, Workload
from apps.workloads.selectors import workloads_for

from .views import IDEMPOTENCY_KEY_PARAMETER, IdempotencyKeyReused, idempotency_key, request_digest


class InferenceServiceSerializer(serializers.ModelSerializer):
    """An inference service: its Deployment's shape, status and ready replicas (as the cluster last said)."""

    project = serializers.SlugRelatedField(slug_field="slug", queryset=Project.objects.all())
    node_pool = serializers.SlugRelatedField(slug_field="slug", queryset=NodePool.objects.all())
    command = serializers.ListField(child=StrictCharField(allow_blank=True), required=False)
    args = serializers.ListField(child=StrictCharField(allow_blank=True), required=False)

    class Meta:
        model = Workload
        fields = ["id", "project", "node_pool", "name", "image", "command", "args", "gpus", "replicas",
                  "serving_port", "cpu", "memory_gib", "model_label", "data_class", "status", "status_message",
                  "ready_replicas", "job_name", "created_at"]
        read_only_fields = ["id", "status", "status_message", "ready_replicas", "job_name", "created_at"]

    def validate_project(self, project: Project) -> Project:
        if not projects_for(self.context["request"].user).filter(pk=project.pk).exists():
            raise serializers.ValidationError("No such project.")
        return project


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
        """Submit a service, once per Idempotency-Key (a repeat answers the first one: 201, Idempotent-Replayed);
        the service's refusals are a 400 through the API's exception handler."""
        key = idempotency_key(request)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
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
