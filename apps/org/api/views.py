"""The organisation API: thin viewsets over access-scoped querysets, every write through a service."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import Prefetch, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts import access
from apps.accounts.access import Action, can, can_anywhere
from apps.core.api import AuthenticatedAPIRequest, ServiceViewSet, StrictIdLookupMixin
from apps.core.api_lists import StrictJSONParser
from apps.core.http import reference_lookup
from apps.core.models import AuditEvent
from apps.org import services
from apps.org.filters import (
    AuditEventFilterSet,
    BudgetFilterSet,
    NotificationChannelFilterSet,
    PolicyFilterSet,
    ProjectFilterSet,
    QuotaFilterSet,
)
from apps.org.models import (
    Budget,
    DataSource,
    Department,
    ImagePullSecret,
    NodePool,
    NotificationChannel,
    Policy,
    PriorityClass,
    ProjectNamespace,
    Quota,
    ServingReservation,
)
from apps.org.selectors import (
    audit_events_for,
    budgets_for,
    data_sources_visible,
    department_quotas,
    departments_for,
    node_pools_with_prices,
    notification_channels_for,
    notification_deliveries,
    policies_for,
    project_namespaces_for,
    projects_for,
    pull_secrets_for,
    quotas_for,
    serving_reservations_for,
)
from apps.org.validators import DNS1123_LABEL, SLUG_MAX_LENGTH

from .serializers import (
    AuditEventSerializer,
    BudgetSerializer,
    BudgetUpdateSerializer,
    DataSourceSerializer,
    DepartmentSerializer,
    NodePoolSerializer,
    NotificationChannelSerializer,
    NotificationChannelUpdateSerializer,
    NotificationDeliverySerializer,
    PolicySerializer,
    PolicyUpdateSerializer,
    PriorityClassSerializer,
    ProjectNamespaceSerializer,
    ProjectSerializer,
    ProjectUpdateSerializer,
    PullSecretSerializer,
    QuotaSerializer,
    QuotaTableRowSerializer,
    QuotaUpdateSerializer,
    ServingReservationSerializer,
)

if TYPE_CHECKING:
    from rest_framework.serializers import BaseSerializer

    from apps.org.models import Department, Project

QUOTA_TABLE_MAX_ROWS = 5000


def _owned_quotas() -> Prefetch:
    return Prefetch("quotas", queryset=Quota.objects.select_related("node_pool"))


class NodePoolViewSet(ServiceViewSet):
    """GPU node pools. Everyone signed in reads them; admins change them."""

    serializer_class = NodePoolSerializer

    def get_queryset(self) -> QuerySet:
        return node_pools_with_prices()

    def may_create(self) -> bool:
        return can(self.request.user, Action.MANAGE)

    def may_change(self, obj: NodePool) -> bool:
        return can(self.request.user, Action.MANAGE, obj)

    def perform_create(self, serializer: BaseSerializer[NodePool]) -> None:
        serializer.instance = services.node_pool_create(actor=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[NodePool]) -> None:
        assert serializer.instance is not None  # update() built the serializer on get_object()
        serializer.instance = services.node_pool_update(
            actor=self.request.user, node_pool=serializer.instance, expected_version=self.expected_version(serializer),
            **serializer.validated_data
        )

    def perform_destroy(self, instance: NodePool) -> None:
        services.node_pool_delete(actor=self.request.user, node_pool=instance, expected_version=self.delete_version)


class DepartmentViewSet(ServiceViewSet):
    """Departments the user may see, with their own quota per pool. Admins create, change and delete them."""

    serializer_class = DepartmentSerializer

    def get_queryset(self) -> QuerySet:
        return departments_for(self.request.user).prefetch_related(_owned_quotas())

    def may_create(self) -> bool:
        return can(self.request.user, Action.MANAGE)

    def may_change(self, obj: Department) -> bool:
        return can(self.request.user, Action.MANAGE, obj)

    def perform_create(self, serializer: BaseSerializer[Department]) -> None:
        serializer.instance = services.department_create(actor=self.request.user, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[Department]) -> None:
        assert serializer.instance is not None  # update() built the serializer on get_object()
        serializer.instance = services.department_update(
            actor=self.request.user, department=serializer.instance,
            expected_version=self.expected_version(serializer), **serializer.validated_data
        )

    def perform_destroy(self, instance: Department) -> None:
        services.department_delete(actor=self.request.user, department=instance,
                                    expected_version=self.delete_version)


@extend_schema_view(
    partial_update=extend_schema(
        request=ProjectUpdateSerializer,
        responses=ProjectSerializer,
        description=(
            "Change a project. Team leads change its `default_priority_class` and, in the same request, its "
            "`over_quota_weights` (pool slug -> weight, within the department's bounds); every other field needs "
            "the right to manage the department's projects. All or nothing."
        ),
    ),
)
class ProjectViewSet(ServiceViewSet):
    """Projects the user may see, with their quotas. Department admins manage those of their department."""

    serializer_class = ProjectSerializer
    filterset_class = ProjectFilterSet

    def get_queryset(self) -> QuerySet:
        queryset = projects_for(self.request.user).select_related("department", "default_priority_class")
        return queryset.prefetch_related(_owned_quotas())

    def get_serializer_class(self) -> type[ProjectSerializer]:
        return ProjectUpdateSerializer if self.action == "partial_update" else ProjectSerializer

    def may_create(self) -> bool:
        return can_anywhere(self.request.user, Action.MANAGE_PROJECTS)

    def may_change(self, obj: Project) -> bool:
        if self.action == "partial_update":
            return bool(access.project_fields_editable(self.request.user, obj))
        return can(self.request.user, Action.MANAGE_PROJECTS, obj)

    def perform_create(self, serializer: BaseSerializer[Project]) -> None:
        fields = dict(serializer.validated_data)
        serializer.instance = services.project_create(
            actor=self.request.user, department=fields.pop("department"), **fields
        )

    def perform_update(self, serializer: BaseSerializer[Project]) -> None:
        assert serializer.instance is not None  # update() built the serializer on get_object()
        serializer.instance = services.project_update(
            actor=self.request.user, project=serializer.instance, expected_version=self.expected_version(serializer),
            **serializer.validated_data
        )

    def perform_destroy(self, instance: Project) -> None:
        services.project_delete(actor=self.request.user, project=instance, expected_version=self.delete_version)


@extend_schema_view(
    create=extend_schema(description=(
        "Map an existing namespace to a project: the Kueue work in it counts as the project's, and the Kueue sync "
        "puts the project's LocalQueues there (the portal never creates or deletes the namespace). Admins only; "
        "every refusal is reported at once (400) and nothing changes.")),
    destroy=extend_schema(description=(
        "Unmap it: the project's LocalQueues leave the namespace; work mirrored from it keeps its history. Admins "
        "only.")),
)
class ProjectNamespaceViewSet(ServiceViewSet):
    """Namespaces admins mapped to the projects the user may see (docs/architecture.md, Namespaces mapped to a
    project). Listed like projects; only admins map and unmap."""

    serializer_class = ProjectNamespaceSerializer
    http_method_names = ["get", "post", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[ProjectNamespace]:
        return project_namespaces_for(self.request.user)

    def may_create(self) -> bool:
        return access.can_map_namespaces(self.request.user)

    def may_change(self, obj: ProjectNamespace) -> bool:
        return access.can_map_namespaces(self.request.user)

    def perform_create(self, serializer: BaseSerializer[ProjectNamespace]) -> None:
        serializer.instance = services.project_namespace_map(actor=self.request.user, **serializer.validated_data)

    def perform_destroy(self, instance: ProjectNamespace) -> None:
        services.project_namespace_unmap(actor=self.request.user, project_namespace=instance)


@extend_schema_view(
    partial_update=extend_schema(
        request=QuotaUpdateSerializer,
        responses=QuotaSerializer,
        description=(
            "Change the fields it names. Team leads change only `over_quota_weight` (within the department's "
            "bounds); deserved, limit, CPU and memory need the right to manage the quota's projects (department "
            "admins) or department (admins). Resending a field's current value is no change."
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
        if self.action == "partial_update":
            return bool(access.quota_fields_editable(self.request.user, obj))
        return access.can_manage_quotas_of(self.request.user, obj.owner)

    def perform_create(self, serializer: BaseSerializer[Quota]) -> None:
        serializer.instance = services.quota_create(actor=self.request.user, **serializer.validated_data)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        quota: Quota = self.get_object()
        serializer = QuotaUpdateSerializer(quota, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        quota = services.quota_update(actor=self.request.user, quota=quota,
                                      expected_version=self.expected_version(serializer), **serializer.validated_data)
        return Response(QuotaSerializer(quota, context=self.get_serializer_context()).data)

    def perform_destroy(self, instance: Quota) -> None:
        services.quota_delete(actor=self.request.user, quota=instance, expected_version=self.delete_version)


@extend_schema_view(
    create=extend_schema(description=(
        "Set a budget for a department or a project (exactly one of `department` and `project`, ids): `amount` "
        "GPU-hours (`metric` gpu_hours: physical card hours, as showback counts them) or money (`metric` cost: "
        "GPU-hours at each pool's price in force) per calendar `period` (month or quarter). Crossing each of "
        "`thresholds` (percents, 1-100, rising) notifies the scope's leads and admins once per period; `on_exceed` "
        "hold_preemptible also stops admitting new preemptible work of the scope until the period rolls over or "
        "the budget is raised. A department's budget caps the sum of its projects' of the same period and metric. "
        "Department budgets: admins and the department's admins; project budgets: also its team leads. Every "
        "refusal is reported at once (400), naming the field.")),
    partial_update=extend_schema(
        request=BudgetUpdateSerializer, responses=BudgetSerializer,
        description=("Change the fields it names; the department or project is fixed. Raising the amount, or no "
                     "longer holding, ends a hold at once (the next sweep holds again if it is still exceeded).")),
    destroy=extend_schema(description="Delete the budget; a hold it put in place ends."),
)
class BudgetViewSet(ServiceViewSet):
    """GPU-hour and cost budgets of the departments and projects the user may see (docs/architecture.md, Budgets)."""

    serializer_class = BudgetSerializer
    filterset_class = BudgetFilterSet

    def get_queryset(self) -> QuerySet[Budget]:
        return budgets_for(self.request.user)

    def may_create(self) -> bool:
        return access.can_manage_budgets_somewhere(self.request.user)

    def may_change(self, obj: Budget) -> bool:
        owner = obj.owner
        return owner is not None and access.can_manage_budgets_of(self.request.user, owner)

    def perform_create(self, serializer: BaseSerializer[Budget]) -> None:
        serializer.instance = services.budget_create(actor=self.request.user, **serializer.validated_data)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        budget: Budget = self.get_object()
        serializer = BudgetUpdateSerializer(budget, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        budget = services.budget_update(actor=self.request.user, budget=budget,
                                        expected_version=self.expected_version(serializer),
                                        **serializer.validated_data)
        return Response(BudgetSerializer(budget, context=self.get_serializer_context()).data)

    def perform_destroy(self, instance: Budget) -> None:
        services.budget_delete(actor=self.request.user, budget=instance, expected_version=self.delete_version)


@extend_schema_view(
    create=extend_schema(description=(
        "Set the policy of a department or a project (`department` or `project`, an id), or of the whole "
        "organisation (neither): `required_labels`, `max_gpus_per_workload` (GPU units of all its pods together), "
        "`max_runtime_seconds` and `default_runtime_seconds`, `allowed_images` (glob patterns with * and ? only), "
        "`allowed_priority_classes` and `default_priority_class` (names), `max_notebook_idle_minutes` and "
        "`pod_security` (baseline or restricted, for manifests). A null field inherits the scope above's; the "
        "nearest scope that sets a field wins for it. A policy may only narrow what the scope above allows. One "
        "policy per scope. The organisation's: admins; a department's or a project's: also the department's admins. "
        "Every refusal is reported at once (400), naming the field.")),
    partial_update=extend_schema(
        request=PolicyUpdateSerializer, responses=PolicySerializer,
        description="Change the fields it names (null: inherit again); the scope is fixed."),
    destroy=extend_schema(description="Delete the policy: its scope inherits every field from the scope above."),
)
class PolicyViewSet(ServiceViewSet):
    """Policies of the departments and projects the user may see, and the organisation's (docs/architecture.md,
    Policies)."""

    serializer_class = PolicySerializer
    filterset_class = PolicyFilterSet

    def get_queryset(self) -> QuerySet[Policy]:
        return policies_for(self.request.user)

    def may_create(self) -> bool:
        return access.can_manage_policies_somewhere(self.request.user)

    def may_change(self, obj: Policy) -> bool:
        return access.can_manage_policy(self.request.user, obj)

    def perform_create(self, serializer: BaseSerializer[Policy]) -> None:
        serializer.instance = services.policy_create(actor=self.request.user, **serializer.validated_data)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        policy: Policy = self.get_object()
        serializer = PolicyUpdateSerializer(policy, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        policy = services.policy_update(actor=self.request.user, policy=policy,
                                        expected_version=self.expected_version(serializer),
                                        **serializer.validated_data)
        return Response(PolicySerializer(policy, context=self.get_serializer_context()).data)

    def perform_destroy(self, instance: Policy) -> None:
        services.policy_delete(actor=self.request.user, policy=instance, expected_version=self.delete_version)


@extend_schema(parameters=[
    OpenApiParameter("department", OpenApiTypes.STR, OpenApiParameter.PATH, description="Department id or slug."),
])
class DepartmentQuotaTableView(GenericAPIView):
    """The quota table of one department: its own quota and its projects' on every pool, read and changed as one."""

    request: AuthenticatedAPIRequest
    serializer_class = QuotaTableRowSerializer
    queryset = Quota.objects.none()  # for the schema only; rows come from the department's quota table
    filter_backends: list[type] = []  # the whole table, never filtered
    pagination_class = None  # one department's pools x (projects + 1): the whole table, always
    parser_classes = [StrictJSONParser]

    def get_department(self) -> Department:
        """The department in the URL (id or slug) among those the user may see; 404 for any other."""
        lookup = reference_lookup(self.kwargs["department"], name_field="slug")
        if lookup is None or ("slug" in lookup and not (
                len(lookup["slug"]) <= SLUG_MAX_LENGTH and DNS1123_LABEL.fullmatch(lookup["slug"]))):
            raise NotFound()  # not an id or a slug
        department = departments_for(self.request.user).filter(**lookup).first()
        if department is None:
            raise NotFound()
        return department

    def table(self, department: Department) -> Response:
        quotas = department_quotas(user=self.request.user, department=department)
        return Response(QuotaSerializer(quotas, many=True, context=self.get_serializer_context()).data)

    @extend_schema(responses=QuotaSerializer(many=True), description=(
        "The department's own quota and its projects' quotas on every pool (the rows the user may see)."
    ))
    def get(self, request: Request, department: str) -> Response:
        return self.table(self.get_department())

    @extend_schema(
        request=QuotaTableRowSerializer(many=True),
        responses={200: QuotaSerializer(many=True), 400: OpenApiTypes.OBJECT},
        description=(
            "Change many cells of the department's quota table at once, as the quota table page does: all or "
            "nothing. Each row names a cell by `node_pool` (slug) and `project` (id or slug; omitted or null for "
            "the department's own quota) and gives any of deserved, limit, over_quota_weight, cpu_cores and "
            "memory_gib; fields it leaves out keep their value, and a cell without a quota gets one (deserved "
            "required). Every row is checked against the access rules and the quota rules on the proposed table "
            "as a whole. A refusal answers 400 with every error keyed by row index, then field, e.g. "
            '`{"1": {"deserved": ["..."]}}`, and changes nothing. Department admins change their projects\' '
            "cells, admins every cell; others get 403, and departments the user may not see 404. Answers the "
            "table after the change."
        ),
    )
    def patch(self, request: AuthenticatedAPIRequest, department: str) -> Response:
        table_department = self.get_department()
        access.require(request.user, Action.MANAGE_PROJECTS, table_department, services.DENIED)
        rows: serializers.ListSerializer[Any] = serializers.ListSerializer(
            child=QuotaTableRowSerializer(), data=request.data,
            max_length=QUOTA_TABLE_MAX_ROWS, context=self.get_serializer_context())
        rows.is_valid(raise_exception=True)
        try:
            services.quota_table_save(actor=request.user, department=table_department, rows=rows.validated_data)
        except services.QuotaTableError as exc:
            raise ValidationError({str(index): fields for index, fields in exc.rows.items()}) from exc
        return self.table(table_department)


class ServingReservationViewSet(ServiceViewSet):
    """Reservations of serving pools' units for projects' inference services. Members of a project and those who
    administer it read its reservations; admins change them."""

    serializer_class = ServingReservationSerializer

    def get_queryset(self) -> QuerySet[ServingReservation]:
        return serving_reservations_for(self.request.user).select_related("project", "node_pool")

    def may_create(self) -> bool:
        return can(self.request.user, Action.MANAGE)

    def may_change(self, obj: ServingReservation) -> bool:
        return can(self.request.user, Action.MANAGE)

    def perform_create(self, serializer: BaseSerializer[ServingReservation]) -> None:
        serializer.instance = services.serving_reservation_create(actor=self.request.user,
                                                                  **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[ServingReservation]) -> None:
        assert serializer.instance is not None  # update() built the serializer on get_object()
        serializer.instance = services.serving_reservation_update(
            actor=self.request.user, serving_reservation=serializer.instance,
            expected_version=self.expected_version(serializer), **serializer.validated_data
        )

    def perform_destroy(self, instance: ServingReservation) -> None:
        services.serving_reservation_delete(actor=self.request.user, serving_reservation=instance,
                                            expected_version=self.delete_version)


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
            actor=self.request.user, priority_class=serializer.instance,
            expected_version=self.expected_version(serializer), **serializer.validated_data
        )

    def perform_destroy(self, instance: PriorityClass) -> None:
        services.priority_class_delete(actor=self.request.user, priority_class=instance,
                                        expected_version=self.delete_version)


class AuditEventViewSet(StrictIdLookupMixin, viewsets.ReadOnlyModelViewSet):
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



class DataSourceViewSet(StrictIdLookupMixin, viewsets.ReadOnlyModelViewSet):
    """Data sources of the projects you manage (the Data page) or may submit to (the submit form), by project and
    name: what a submission's `data_sources` names. Read here; admins and department admins add and delete them on
    the Data page."""

    request: AuthenticatedAPIRequest
    serializer_class = DataSourceSerializer

    def get_queryset(self) -> QuerySet[DataSource]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no signed-in user
            return DataSource.objects.none()
        return data_sources_visible(self.request.user)


class PullSecretViewSet(StrictIdLookupMixin, viewsets.ReadOnlyModelViewSet):
    """Image pull secrets of the projects you manage (admins, department admins; others see none): registry, user
    name and whether the Secret is written, never the password."""

    request: AuthenticatedAPIRequest
    serializer_class = PullSecretSerializer

    def get_queryset(self) -> QuerySet[ImagePullSecret]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no signed-in user
            return ImagePullSecret.objects.none()
        return pull_secrets_for(self.request.user).order_by("project__slug", "name", "pk")


class NotificationChannelViewSet(ServiceViewSet):
    """Your notification channels and those of the projects whose channels you manage (docs/architecture.md,
    Notification channels). `POST .../test/` sends a test event now; `GET .../deliveries/` is the delivery log."""

    serializer_class = NotificationChannelSerializer
    filterset_class = NotificationChannelFilterSet

    def get_queryset(self) -> QuerySet[NotificationChannel]:
        return notification_channels_for(self.request.user)

    def may_change(self, obj: NotificationChannel) -> bool:
        if obj.project is not None:
            return access.can_manage_notifications_of(self.request.user, obj.project)
        return obj.user_id == self.request.user.pk

    def perform_create(self, serializer: BaseSerializer[NotificationChannel]) -> None:
        serializer.instance = services.notification_channel_create(actor=self.request.user,
                                                                   **serializer.validated_data)

    @extend_schema(request=NotificationChannelUpdateSerializer, responses=NotificationChannelSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        channel: NotificationChannel = self.get_object()
        serializer = NotificationChannelUpdateSerializer(channel, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        channel = services.notification_channel_update(actor=self.request.user, channel=channel,
                                                       expected_version=self.expected_version(serializer),
                                                       **serializer.validated_data)
        return Response(NotificationChannelSerializer(channel, context=self.get_serializer_context()).data)

    def perform_destroy(self, instance: NotificationChannel) -> None:
        services.notification_channel_delete(actor=self.request.user, channel=instance,
                                             expected_version=self.delete_version)

    @extend_schema(request=None, responses={202: NotificationDeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request: Request, pk: str | None = None) -> Response:
        """Send the channel a test event now (whatever events it listens to); the answer is its delivery, pending
        until the worker has sent it."""
        channel: NotificationChannel = self.get_object()
        if not self.may_change(channel):
            self.permission_denied(request, message=self.denied_message)
        delivery = services.notification_channel_test(actor=self.request.user, channel=channel,
                                                      link=f"{settings.PORTAL_BASE_URL}/")
        return Response(NotificationDeliverySerializer(delivery).data, status=202)

    @extend_schema(responses=NotificationDeliverySerializer(many=True))
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def deliveries(self, request: Request, pk: str | None = None) -> Response:
        """The channel's delivery log, newest first (the last 50)."""
        channel: NotificationChannel = self.get_object()
        return Response(NotificationDeliverySerializer(notification_deliveries(channel), many=True).data)
