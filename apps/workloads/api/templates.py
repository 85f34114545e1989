"""GET/POST /api/v1/templates/: the admins' workload presets, readable by everyone who signs in, created by admins.

A template stores the submit form's field names (`values`, as the Templates page edits them: pools by slug,
priority classes by name, `max_runtime_minutes`, ...). The API also answers `submission`: the same values in the
shape `POST /api/v1/workloads/` takes, so a client (the `gpu` CLI) starts a submission from it, adds the project and
what it changes, and posts it.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.access import Action, can
from apps.core.api import AuthenticatedAPIRequest, StrictIdLookupMixin, VersionETagMixin, VersionField
from apps.core.api_lists import form_error_detail
from apps.org.models import NodePool, PriorityClass
from apps.workloads import selectors, services
from apps.workloads.forms import WorkloadTemplateForm, parse_env, template_field_names
from apps.workloads.models import WorkloadTemplate

# template (form) field -> submission (API) field; the labels nest
_RENAMED = {"memory_gib": "memory", "notebook_idle_timeout_minutes": "idle_timeout_minutes",
            "notebook_port": "port"}


def template_submission(template: WorkloadTemplate) -> dict[str, Any]:
    """The template's values as a `POST /api/v1/workloads/` body without the project."""
    values = {key: value for key, value in (template.values or {}).items()
              if key in template_field_names(template.kind) and value is not None}
    body: dict[str, Any] = {"kind": template.kind}
    labels = {}
    for key, value in values.items():
        if key in ("command", "args") and isinstance(value, str):
            body[key] = shlex.split(value)
        elif key == "env" and isinstance(value, str):
            body[key] = parse_env(value)
        elif key == "node_pool" and isinstance(value, int):
            body[key] = NodePool.objects.filter(pk=value).values_list("slug", flat=True).first()
        elif key == "priority_class" and isinstance(value, int):
            body[key] = PriorityClass.objects.filter(pk=value).values_list("name", flat=True).first()
        elif key == "max_runtime_minutes":
            body["max_runtime_seconds"] = int(value) * 60
        elif key in ("model_label", "data_class"):
            labels["model" if key == "model_label" else key] = value
        else:
            body[_RENAMED.get(key, key)] = value
    if labels:
        body["labels"] = labels
    return body


class WorkloadTemplateSerializer(serializers.ModelSerializer):
    values = serializers.DictField(help_text="Submit form field -> value, as the Templates page edits them (pools by "
                                             "slug, priority classes by name). Checked like the page does.")
    submission = serializers.SerializerMethodField(help_text="The values as a POST /api/v1/workloads/ body (add the "
                                                             "project).")
    version = VersionField(read_only=True)

    class Meta:
        model = WorkloadTemplate
        fields = ["id", "name", "description", "kind", "values", "submission", "version", "created_at",
                  "updated_at"]
        read_only_fields = ["id", "submission", "version", "created_at", "updated_at"]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_submission(self, template: WorkloadTemplate) -> dict[str, Any]:
        return template_submission(template)


class WorkloadTemplateViewSet(VersionETagMixin, StrictIdLookupMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                              mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Workload templates (presets for the submit forms), ordered by kind and name. Admins create them."""

    request: AuthenticatedAPIRequest
    serializer_class = WorkloadTemplateSerializer

    def get_queryset(self) -> QuerySet[WorkloadTemplate]:
        return selectors.templates()

    def check_permissions(self, request: Request) -> None:
        super().check_permissions(request)
        if request.method == "POST" and not can(request.user, Action.MANAGE):
            self.permission_denied(request, message="Only admins manage workload templates.")

    @extend_schema(responses={201: WorkloadTemplateSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = request.data
        if not isinstance(data, dict):
            raise ValidationError({"non_field_errors": ["Send a JSON object: {name, kind, values, description}."]})
        unknown = sorted(set(data) - {"name", "description", "kind", "values"})
        if unknown:
            raise ValidationError({name: ["Unknown field."] for name in unknown})
        wrong_type: dict[str, Any] = {name: ["Not a valid string."] for name in ("name", "description", "kind")
                      if name in data and not isinstance(data[name], str)}
        if wrong_type:  # the form would read ["a"] or 5 as the text "['a']" or "5"
            raise ValidationError(wrong_type)
        values = data.get("values", {})
        if not isinstance(values, dict):
            raise ValidationError({"values": ['Send a JSON object: {"field": value, ...}.']})
        form = WorkloadTemplateForm({"name": data.get("name", ""), "description": data.get("description", ""),
                                     "kind": data.get("kind", ""), "values": json.dumps(values)})
        if not form.is_valid():
            raise ValidationError(form_error_detail(form.errors))
        template = services.workload_template_create(actor=self.request.user, **form.cleaned_data)
        return Response(self.get_serializer(template).data, status=status.HTTP_201_CREATED)

