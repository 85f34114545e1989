"""The workloads API: submit, list, read and stop. Reads come from `workloads_for` (unseen rows: 404); submit and
stop go through the services, which check everything again and decide the rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.access import Action, can, can_anywhere
from apps.core.api import StrictIdLookupMixin, validation_error_detail
from apps.workloads import services
from apps.workloads.filters import WorkloadFilterSet
from apps.workloads.models import Status, Workload, WorkloadEvent
from apps.workloads.selectors import annotate_live, preemptions_seen_by, workload_list

from .serializers import API_FIELD_NAMES, WorkloadDetailSerializer, WorkloadSerializer, WorkloadSubmitSerializer


def api_errors(error: DjangoValidationError) -> dict[str, Any]:
    """A service ValidationError keyed by the API's field names (labels nested, memory for memory_gib, ...)."""
    detail = validation_error_detail(error)
    errors: dict[str, Any] = {}
    for field, messages in detail.items():
        name = API_FIELD_NAMES.get(field, field)
        if isinstance(name, tuple):
            parent, child = name
            errors.setdefault(parent, {}).setdefault(child, []).extend(messages)
        else:
            errors.setdefault(name, []).extend(messages)
    return errors


@extend_schema_view(
    create=extend_schema(
        request=WorkloadSubmitSerializer,
        responses={201: WorkloadDetailSerializer},
        description=(
            "Submit a training job, notebook or batch job. The row is saved as `submitting` and the worker creates "
            "the Kueue-labelled Job after commit. Refusals say why, keyed by field. A project you may not see reads "
            "as not existing (400); one you see but may not submit to answers 403."
        ),
    ),
)
class WorkloadViewSet(StrictIdLookupMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                      viewsets.GenericViewSet):
    """Your own workloads and every workload in the projects you may see, newest first.

    Filters and ordering: `WorkloadFilterSet` (the list page's too); without `scope` the API lists everything."""

    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilterSet

    def get_serializer_class(self) -> type:
        if self.action in ("create", "metadata"):  # OPTIONS describes the submission form
            return WorkloadSubmitSerializer
        if self.action == "list":
            return WorkloadSerializer
        return WorkloadDetailSerializer

    def get_queryset(self) -> QuerySet[Workload]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no signed-in user
            return Workload.objects.none()
        queryset = workload_list(user=self.request.user)
        if self.action == "list":
            return queryset
        return queryset.prefetch_related(Prefetch("events", queryset=WorkloadEvent.objects.select_related("actor")))

    def _detail(self, workload: Workload) -> dict[str, Any]:
        fresh = workload_list(user=self.request.user).prefetch_related(
            Prefetch("events", queryset=WorkloadEvent.objects.select_related("actor"))).get(pk=workload.pk)
        return WorkloadDetailSerializer(self._with_live_state(fresh), context=self.get_serializer_context()).data

    def _with_live_state(self, workload: Workload) -> Workload:
        """Attach the "why am I waiting" explanation and the preemptions (preemptors the user may not see: null)."""
        annotate_live([workload], viewer=self.request.user)
        # The events are prefetched: ask for the preemptors only when there was a preemption.
        found = preemptions_seen_by(workload=workload, user=self.request.user) if any(
            e.to_status == Status.PREEMPTED for e in workload.events.all()) else []
        for preemption in found:
            if not (preemption["preemptor"] or {}).get("visible"):
                preemption["preemptor"] = None
        workload.preemption_list = found
        return workload

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        workload = self._with_live_state(self.get_object())
        return Response(self.get_serializer(workload).data)

    def check_permissions(self, request: Request) -> None:
        super().check_permissions(request)
        # Also asked by OPTIONS (DRF's metadata), which then offers the submission form only to those who may submit.
        if request.method == "POST" and not self.detail and not can_anywhere(request.user, Action.SUBMIT):
            self.permission_denied(request, message="You may not submit work in any project.")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        user = request.user
        serializer = self.get_serializer(data=request.data)
        assert isinstance(serializer, WorkloadSubmitSerializer)  # get_serializer_class() for "create"
        # The project first: a project the user sees but may not submit to is a 403 whatever else is wrong.
        if isinstance(request.data, Mapping) and "project" in request.data:
            try:
                project = serializer.fields["project"].run_validation(request.data["project"])
            except exceptions.ValidationError:
                project = None  # reported with the other field errors below
            if project is not None and not can(user, Action.SUBMIT, project):
                self.permission_denied(request, message="You may not submit work in this project.")
        serializer.is_valid(raise_exception=True)
        try:
            workload = services.workload_submit(actor=user, **serializer.validated_data)
        except DjangoValidationError as error:
            raise exceptions.ValidationError(api_errors(error)) from error
        return Response(self._detail(workload), status=status.HTTP_201_CREATED)

    @extend_schema(
        request=None,
        responses={202: WorkloadDetailSerializer, 400: OpenApiResponse(description="Nothing to stop."),
                   403: OpenApiResponse(description="You see the workload but may not stop it.")},
        description=(
            "Ask for a workload to stop: it becomes `stopping` and the worker deletes its Job. Owners stop their "
            "own work; team leads and admins anything in their scope."
        ),
    )
    @action(detail=True, methods=["post"])
    def stop(self, request: Request, pk: str | None = None) -> Response:
        workload = self.get_object()
        services.workload_stop(actor=request.user, workload=workload)
        return Response(self._detail(workload), status=status.HTTP_202_ACCEPTED)
