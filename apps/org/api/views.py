"""The organisation API: thin viewsets over access-scoped querysets, every write through a service."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.access import Action, can, can_anywhere
from apps.core.api import ServiceViewSet
from apps.core.models import AuditEvent
from apps.org import services
from apps.org.filters import AuditEventFilterSet, ProjectFilterSet, QuotaFilterSet
from apps.org.models import NodePool, PriorityClass, Quota
from apps.org.selectors import audit_events_for, departments_for, projects_for, quotas_for

from .serializers import (
    AuditEventSerializer,
    DepartmentSerializer,
    NodePoolSerializer,
    PriorityClassSerializer,
    ProjectSerializer,
    QuotaSerializer,
    QuotaUpdateSerializer,
)

if TYPE_CHECKING:
    from rest_framework.serializers import BaseSerializer

    from apps.org.models import Department, Project


def _owned_quotas() -> Prefetch:
    return Prefetch("quotas", queryset=Quota.objects.select_related("node_pool"))


class NodePoolViewSet(ServiceViewSet):
    """GPU node pools. Everyone signed in reads them; admins change them."""

    serializer_class = NodePoolSerializer
    queryset = NodePool.objects.all()

    def may_create(self) -> bool:
        return can(self.request.user, Action.MANAGE)

    def may_change(self, obj: NodePool) -> bool:
        return can(self.request.user, Action.MANAGE, obj)

    def perform_create(self, serializer: BaseSerializer[NodePool]) -> None:
        serializer.instance = services.node_pool_create(actor=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[NodePool]) -> None:
        assert serializer.instance is not None  # update() built the serializer on get_object()
        serializer.instance = services.node_pool_update(
            actor=self.request.user, node_pool=serializer.instance, **serializer.validated_data
        )

    def perform_destroy(self, instance: NodePool) -> None:
        services.node_pool_delete(actor=self.request.user, node_pool=instance)


class DepartmentViewSet(ServiceViewSet):
    """Departments the user may see, with their own quota per pool. Admins create, change and delete them."""

    serializer_class = DepartmentSerializer

    def get_queryset(self) -> QuerySet:
        return departments_for(self.request.user).prefetch_related(_owned_quotas())

    def may_create(self) -> bool:
        return can(self.request.user, Action.MANAGE)

    def may_change(self, obj: Any) -> bool:
        return can(self.request.user, Action.MANAGE, obj)

    def perform_create(self, serializer: BaseSerializer[Department]) -> None:
        serializer.instance = services.department_create(actor=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[Department]) -> None:
        assert serializer.instance is not None  # update() built the serializer on get_object()
        serializer.instance = services.department_update(
            actor=self.request.user, department=serializer.instance, **serializer.validated_data
        )

    def perform_destroy(self, instance: Any) -> None:
        services.department_delete(actor=self.request.user, department=instance)


@extend_schema_view(
    partial_update=extend_schema(description=(
        "Change a project. A PATCH naming only `default_priority_class` is the team lead's change "
        "(project_defaults_set); anything else needs the right to manage the department's projects."
    )),
)
class ProjectViewSet(ServiceViewSet):
    """Projects the user may see, with their quotas. Department admins manage those of their department."""

    serializer_class = ProjectSerializer
    filterset_class = ProjectFilterSet

    def get_queryset(self) -> QuerySet:
        queryset = projects_for(self.request.user).select_related("department", "default_priority_class")
        return queryset.prefetch_related(_owned_quotas())

    def may_create(self) -> bool:
        return can_anywhere(self.request.user, Action.MANAGE_PROJECTS)

    def may_change(self, obj: Any) -> bool:
        action = Action.EDIT_WEIGHT if self.action == "partial_update" else Action.MANAGE_PROJECTS
        return can(self.request.user, action, obj)

    def perform_create(self, serializer: BaseSerializer[Project]) -> None:
        fields = dict(serializer.validated_data)
        serializer.instance = services.project_create(
            actor=self.request.user, department=fields.pop("department"), **fields
        )

    def perform_update(self, serializer: BaseSerializer[Project]) -> None:
        assert serializer.instance is not None  # update() built the serializer on get_object()
        changes = serializer.validated_data
        if set(changes) == {"default_priority_class"}:
            serializer.instance = services.project_defaults_set(
                actor=self.request.user, project=serializer.instance,
                default_priority_class=changes["default_priority_class"],
            )
        else:
            serializer.instance = services.project_update(
                actor=self.request.user, project=serializer.instance, **changes
            )

    def perform_destroy(self, instance: Any) -> None:
        services.project_delete(actor=self.request.user, project=instance)


@extend_schema_view(
    partial_update=extend_schema(
        request=QuotaUpdateSerializer,
        responses=QuotaSerializer,
        description=(
            "A PATCH that changes only `over_quota_weight` is a weight change (team leads, within the department's "
            "bounds); a change of deserved, limit, CPU or memory needs the right to manage the quota's projects "
            "(department admins) or department (admins)."
        ),
    ),
)
class QuotaViewSet(ServiceViewSet):
    """Per-pool quotas of the departments and projects the user may see: one row per owner and pool."""

    serializer_class = QuotaSerializer
    filterset_class = QuotaFilterSet

    def get_queryset(self) -> QuerySet:
        return quotas_for(self.request.user).select_related("node_pool", "department", "project")

    def may_create(self) -> bool:
        return can_anywhere(self.request.user, Action.MANAGE_PROJECTS)

    def may_change(self, obj: Quota) -> bool:
        if obj.project_id is None:
            return can(self.request.user, Action.MANAGE, obj.department)
        action = Action.EDIT_WEIGHT if self.action == "partial_update" else Action.MANAGE_PROJECTS
        return can(self.request.user, action, obj.project)

    def perform_create(self, serializer: BaseSerializer[Quota]) -> None:
        serializer.instance = services.quota_create(actor=self.request.user, **serializer.validated_data)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        quota: Quota = self.get_object()
        serializer = QuotaUpdateSerializer(quota, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        current = {name: getattr(quota, name) for name in QuotaUpdateSerializer.Meta.fields}
        wanted = {**current, **serializer.validated_data}
        changed = {name for name, value in wanted.items() if value != current[name]}
        if changed <= {"over_quota_weight"}:
            quota = services.quota_weight_set(
                actor=request.user, quota=quota, over_quota_weight=wanted["over_quota_weight"]
            )
        else:
            quota = services.quota_set(
                actor=request.user, node_pool=quota.node_pool, department=quota.department, project=quota.project,
                **wanted,
            )
        return Response(QuotaSerializer(quota, context=self.get_serializer_context()).data)

    def perform_destroy(self, instance: Quota) -> None:
        services.quota_delete(actor=self.request.user, quota=instance)


class PriorityClassViewSet(ServiceViewSet):
    """Priority classes (Kueue WorkloadPriorityClasses). Everyone signed in reads them; admins change them."""

    serializer_class = PriorityClassSerializer
    queryset = PriorityClass.objects.all()

    def may_create(self) -> bool:
        return can(self.request.user, Action.MANAGE)

    def may_change(self, obj: PriorityClass) -> bool:
        return can(self.request.user, Action.MANAGE, obj)

    def perform_create(self, serializer: BaseSerializer[PriorityClass]) -> None:
        serializer.instance = services.priority_class_create(actor=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[PriorityClass]) -> None:
        assert serializer.instance is not None  # update() built the serializer on get_object()
        serializer.instance = services.priority_class_update(
            actor=self.request.user, priority_class=serializer.instance, **serializer.validated_data
        )

    def perform_destroy(self, instance: PriorityClass) -> None:
        services.priority_class_delete(actor=self.request.user, priority_class=instance)


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """The audit log, scoped: admins see everything, department admins their departments. Newest first.

    Filters and ordering: `AuditEventFilterSet` (the audit page's too)."""

    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilterSet

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return audit_events_for(self.request.user).select_related("actor")

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not can_anywhere(request.user, Action.VIEW_AUDIT):
            self.permission_denied(request, message="You may not read the audit log.")

