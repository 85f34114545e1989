"""Shapes of the organisation API. Shape only: the rules (bounds, sums, names, uniqueness) live in the services."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.api import (
    AsciiDecimalField,
    AsciiIntegerField,
    ScopedPrimaryKeyRelatedField,
    ShapeOnlyModelSerializer,
    StrictCharField,
    VersionField,
)
from apps.core.http import parse_id
from apps.core.models import AuditEvent
from apps.org.models import (
    MAX_BUDGET_THRESHOLDS,
    Budget,
    DataSource,
    Department,
    ImagePullSecret,
    NodePool,
    NodePoolPrice,
    NotificationChannel,
    NotificationDelivery,
    NotificationEvent,
    Policy,
    PriorityClass,
    Project,
    ProjectNamespace,
    Quota,
    ServingReservation,
)
from apps.org.policies import LABEL_FIELDS, MAX_IMAGE_PATTERNS, MAX_PRIORITY_CLASSES
from apps.org.selectors import departments_for, projects_for
from apps.org.validators import (
    DNS1123_LABEL,
    SLUG_MAX_LENGTH,
    TAINT_EFFECTS,
    node_labels_errors,
    node_taints_bound_errors,
    validate_label_key,
    validate_label_value,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

def _django_errors(check: Any, value: str) -> list[str]:
    try:
        check(value)
    except DjangoValidationError as exc:
        return list(exc.messages)
    return []


class NodeTaintSerializer(serializers.Serializer):
    key = StrictCharField()
    value = StrictCharField(required=False, allow_blank=True)
    effect = serializers.ChoiceField(choices=TAINT_EFFECTS)

    def validate_key(self, value: str) -> str:
        if errors := _django_errors(validate_label_key, value):
            raise serializers.ValidationError(errors)
        return value

    def validate_value(self, value: str) -> str:
        if value and (errors := _django_errors(validate_label_value, value)):
            raise serializers.ValidationError(errors)
        return value


class NodePoolPriceSerializer(serializers.ModelSerializer):
    """One price of the pool's card-hour and when it took effect; in force until the next one."""

    price_per_card_hour = serializers.DecimalField(max_digits=12, decimal_places=4, allow_null=True, read_only=True,
                                                   help_text="Null: use from then on is not charged.")
    from_the_start = serializers.BooleanField(
        read_only=True, help_text="The pool's first price, given with it (or before prices had a history): it prices "
                                  "all of the pool's use; valid_from is then 1970-01-01T00:00:00Z.")

    class Meta:
        model = NodePoolPrice
        fields = ["price_per_card_hour", "valid_from", "from_the_start"]
        read_only_fields = fields


class NodePoolSerializer(ShapeOnlyModelSerializer):
    """A node pool. `node_labels` select its nodes ({key: value}); `node_taints` are tolerated by its workloads.
    `price_per_card_hour` is the price in force now; changing it prices use from that moment on (past hours keep
    their price), and `price_history` lists every price with the moment it took effect, oldest first. `scheduler`
    (`kueue` or `kai`) says what queues its work, and changes only while no work is live on it; `gpu_fractions`
    (KAI pools only) lets work ask for a fraction of one card."""

    card_fraction = serializers.CharField(source="card_fraction_display", read_only=True)
    price_history = NodePoolPriceSerializer(source="prices", many=True, read_only=True)
    node_labels = serializers.DictField(child=StrictCharField(allow_blank=True), required=False)
    node_taints = NodeTaintSerializer(many=True, required=False)
    version = VersionField()

    # Prices are not scheduled: a price takes effect when it is saved (README, Cost and chargeback).
    UNSCHEDULED = ("A price takes effect when it is saved; one cannot be set for another moment (a future price is "
                   "not supported). Send price_per_card_hour alone when it should apply.")

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping) and (when := sorted({"valid_from", "price_valid_from", "price_history"} & set(
                data))):
            raise serializers.ValidationError({key: [self.UNSCHEDULED] for key in when})
        return super().to_internal_value(data)

    def validate_node_labels(self, labels: dict[str, str]) -> dict[str, str]:
        # What Kueue takes on the pool's ResourceFlavor: the same rules as the pages (apps.org.validators).
        if errors := node_labels_errors(labels):
            raise serializers.ValidationError(errors)
        return labels

    def validate_node_taints(self, taints: list[dict[str, str]]) -> list[dict[str, str]]:
        if errors := node_taints_bound_errors(taints):
            raise serializers.ValidationError(errors)
        return [{name: value for name, value in taint.items() if name != "value" or value} for taint in taints]

    class Meta:
        model = NodePool
        fields = [
            "id", "slug", "name", "description", "gpu_resource", "gpu_product", "cut", "mig_profile",
            "replicas_per_card", "node_labels", "node_taints", "capacity", "card_fraction_numerator",
            "card_fraction_denominator", "card_fraction", "over_subscribable", "serving", "scheduler",
            "gpu_fractions", "price_per_card_hour", "price_history", "version", "created_at", "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]


class OwnedQuotaSerializer(ShapeOnlyModelSerializer):
    """A quota as listed under its department or project."""

    node_pool: serializers.SlugRelatedField[NodePool] = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Quota
        fields = ["id", "node_pool", "deserved", "limit", "over_quota_weight", "cpu_cores", "memory_gib", "version"]
        read_only_fields = fields


class DepartmentSerializer(ShapeOnlyModelSerializer):
    quotas = OwnedQuotaSerializer(many=True, read_only=True)
    version = VersionField()

    class Meta:
        model = Department
        fields = [
            "id", "slug", "name", "description", "min_project_weight", "max_project_weight", "quotas", "version",
            "created_at", "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]


class ProjectSerializer(ShapeOnlyModelSerializer):
    department = ScopedPrimaryKeyRelatedField(scope=departments_for, queryset=Department.objects.all())
    default_priority_class = serializers.SlugRelatedField(
        slug_field="name", queryset=PriorityClass.objects.all(), allow_null=True, required=False
    )
    quotas = OwnedQuotaSerializer(many=True, read_only=True)
    version = VersionField()

    class Meta:
        model = Project
        fields = [
            "id", "slug", "name", "description", "department", "namespace", "does_not_lend", "notebooks_shared",
            "default_priority_class", "quotas", "version", "created_at", "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {"namespace": {"required": False, "allow_blank": True,
                                      "help_text": "Kubernetes namespace; defaults to proj-<slug> (the installation's "
                                                   "KUEUE_PROJECT_PREFIX). Others must start with that prefix or be on "
                                                   "the approved list (PORTAL_EXTRA_PROJECT_NAMESPACES); never kube-*, "
                                                   "default or the portal's own. Cannot change later."}}


class QuotaSerializer(ShapeOnlyModelSerializer):
    """One department's or project's share of one pool: exactly one of `department` and `project` is set."""

    node_pool = serializers.SlugRelatedField(slug_field="slug", queryset=NodePool.objects.all())
    department = ScopedPrimaryKeyRelatedField(
        scope=departments_for, queryset=Department.objects.all(), allow_null=True, required=False
    )
    project = ScopedPrimaryKeyRelatedField(
        scope=projects_for, queryset=Project.objects.all(), allow_null=True, required=False
    )
    version = VersionField()

    class Meta:
        model = Quota
        fields = [
            "id", "node_pool", "department", "project", "deserved", "limit", "over_quota_weight", "cpu_cores",
            "memory_gib", "version", "updated_at",
        ]
        read_only_fields = ["updated_at"]
        extra_kwargs = {"deserved": {"required": True}, "limit": {"default": None}}


class BudgetSerializer(ShapeOnlyModelSerializer):
    """A GPU-hour or cost budget of exactly one of `department` and `project`, per calendar month or quarter."""

    department = ScopedPrimaryKeyRelatedField(
        scope=departments_for, queryset=Department.objects.all(), allow_null=True, required=False
    )
    project = ScopedPrimaryKeyRelatedField(
        scope=projects_for, queryset=Project.objects.all(), allow_null=True, required=False
    )
    thresholds = serializers.ListField(
        child=AsciiIntegerField(), max_length=MAX_BUDGET_THRESHOLDS, required=False,
        help_text="Percents of the amount that notify when crossed, whole numbers from 1 to 100 in rising order "
                  "(default [50, 80, 100]).")
    held = serializers.SerializerMethodField(help_text="Whether the budget holds new preemptible work now.")
    version = VersionField()

    class Meta:
        model = Budget
        fields = ["id", "department", "project", "period", "metric", "amount", "thresholds", "on_exceed", "held",
                  "version", "updated_at"]
        read_only_fields = ["updated_at"]
        extra_kwargs = {"amount": {"required": True}}

    def get_held(self, budget: Budget) -> bool:
        return budget.held_period_start is not None and budget.on_exceed == Budget.OnExceed.HOLD_PREEMPTIBLE


class BudgetUpdateSerializer(BudgetSerializer):
    """What a PATCH may change; the owner of a budget is fixed (delete and create instead)."""

    class Meta(BudgetSerializer.Meta):
        fields = ["period", "metric", "amount", "thresholds", "on_exceed", "version"]


class PolicySerializer(ShapeOnlyModelSerializer):
    """What work in a scope may ask for: of a `department`, of a `project` (ids), or of the whole organisation
    (neither). A null field inherits the scope above's; the nearest scope that sets a field wins."""

    department = ScopedPrimaryKeyRelatedField(
        scope=departments_for, queryset=Department.objects.all(), allow_null=True, required=False
    )
    project = ScopedPrimaryKeyRelatedField(
        scope=projects_for, queryset=Project.objects.all(), allow_null=True, required=False
    )
    required_labels = serializers.ListField(
        child=serializers.ChoiceField(choices=sorted(LABEL_FIELDS)), allow_null=True, required=False,
        max_length=len(LABEL_FIELDS), help_text="Audit labels every workload must carry (model, data_class).")
    allowed_images = serializers.ListField(
        child=StrictCharField(), allow_null=True, required=False, max_length=MAX_IMAGE_PATTERNS,
        help_text="Glob patterns (* and ? only, at most 200 characters each) one of which every container image "
                  "must match, e.g. nvcr.io/nvidia/*.")
    allowed_priority_classes = serializers.ListField(
        child=StrictCharField(), allow_null=True, required=False, max_length=MAX_PRIORITY_CLASSES,
        help_text="Names of the priority classes work may use.")
    default_priority_class = serializers.SlugRelatedField(
        slug_field="name", queryset=PriorityClass.objects.all(), allow_null=True, required=False,
        help_text="Name of the class of work that names none.")
    version = VersionField()

    class Meta:
        model = Policy
        fields = ["id", "department", "project", "required_labels", "max_gpus_per_workload", "max_runtime_seconds",
                  "default_runtime_seconds", "allowed_images", "allowed_priority_classes", "default_priority_class",
                  "max_notebook_idle_minutes", "pod_security", "version", "updated_at"]
        read_only_fields = ["updated_at"]


class PolicyUpdateSerializer(PolicySerializer):
    """What a PATCH may change; a policy's scope is fixed (delete and create instead)."""

    class Meta(PolicySerializer.Meta):
        fields = [name for name in PolicySerializer.Meta.fields if name not in {"id", "department", "project",
                                                                                 "updated_at"}]


class ServingReservationSerializer(ShapeOnlyModelSerializer):
    """A project's reservation of a serving pool's units for its inference services (admins set it). A PATCH
    changes only `cards`; the project and the pool are fixed."""

    node_pool = serializers.SlugRelatedField(slug_field="slug", queryset=NodePool.objects.all())
    project = ScopedPrimaryKeyRelatedField(scope=projects_for, queryset=Project.objects.all())
    version = VersionField()

    class Meta:
        model = ServingReservation
        fields = ["id", "project", "node_pool", "cards", "version", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {"cards": {"required": True}}


class QuotaUpdateSerializer(ShapeOnlyModelSerializer):
    """What a PATCH may change; the pool and the owner of a quota are fixed (delete and create instead)."""

    version = VersionField()

    class Meta:
        model = Quota
        fields = ["deserved", "limit", "over_quota_weight", "cpu_cores", "memory_gib", "version"]


class ProjectNamespaceSerializer(ShapeOnlyModelSerializer):
    """An existing namespace mapped to a project: the Kueue work in it counts as the project's."""

    project = ScopedPrimaryKeyRelatedField(scope=projects_for, queryset=Project.objects.all())
    namespace = StrictCharField(max_length=63, help_text=(
        "An existing namespace of the cluster (a DNS-1123 label); never a system namespace, Kueue's, the "
        "portal's own, a project's own namespace, or one mapped already."))

    class Meta:
        model = ProjectNamespace
        fields = ["id", "project", "namespace", "created_at"]
        read_only_fields = ["created_at"]


class ProjectUpdateSerializer(ProjectSerializer):
    """What a PATCH of a project changes: its fields, and its over-quota weight per pool in the same request."""

    over_quota_weights = serializers.DictField(
        child=AsciiDecimalField(max_digits=8, decimal_places=2), required=False, write_only=True,
        help_text="The project's over-quota weight per pool, by pool slug: {\"h100\": \"3.5\"}.",
    )

    class Meta(ProjectSerializer.Meta):
        fields = [*ProjectSerializer.Meta.fields, "over_quota_weights"]


@extend_schema_field({"oneOf": [{"type": "integer", "minimum": 1}, {"type": "string"}]})
class IdOrSlugField(serializers.Field):
    """A row named by its id (a positive whole number, or its digits as a string) or by its slug."""

    default_error_messages = {"invalid": "Give an id (a positive whole number) or a slug."}

    def to_internal_value(self, data: Any) -> int | str:
        if isinstance(data, int | str) and not isinstance(data, bool):
            if number := parse_id(data):
                return number
            if isinstance(data, str) and len(data) <= SLUG_MAX_LENGTH and DNS1123_LABEL.fullmatch(data):
                return data
        self.fail("invalid")

    def to_representation(self, value: Any) -> Any:
        return value


class QuotaTableRowSerializer(ShapeOnlyModelSerializer):
    """One cell of a department's quota table: the pool and the project (none: the department's own quota), and
    the fields to change. Fields left out keep their value; a cell without a quota gets one (deserved required)."""

    node_pool = StrictCharField(max_length=SLUG_MAX_LENGTH, help_text="The pool's slug.")
    project = IdOrSlugField(required=False, allow_null=True, default=None,
                            help_text="A project of the department, by id or slug; null for the department's own.")
    version = VersionField(min_value=0, help_text=(
        "The version of the cell's quota you read (0: read without a quota). A cell changed since is refused "
        "like any other refusal of the row (400, keyed by row index, field `version`) and nothing is saved."))

    class Meta:
        model = Quota
        fields = ["node_pool", "project", "deserved", "limit", "over_quota_weight", "cpu_cores", "memory_gib",
                  "version"]
        extra_kwargs = {name: {"required": False} for name in
                        ("deserved", "limit", "over_quota_weight", "cpu_cores", "memory_gib")}

    def to_internal_value(self, data: Any) -> Any:
        unknown = ({str(name): ["No such field of a quota table row."] for name in data if name not in self.fields}
                   if isinstance(data, Mapping) else {})
        try:
            values = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                errors: dict[Any, Any] = {**exc.detail, **unknown}
                raise serializers.ValidationError(errors) from exc
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return values


class PriorityClassSerializer(ShapeOnlyModelSerializer):
    version = VersionField()

    class Meta:
        model = PriorityClass
        fields = ["id", "name", "value", "preemptible", "description", "version", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]


class AuditEventSerializer(serializers.ModelSerializer):
    actor: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = AuditEvent
        fields = [
            "id", "at", "actor", "action", "object_type", "object_id", "object_repr", "department", "project",
            "before", "after",
        ]
        read_only_fields = fields


class DataSourceSerializer(serializers.ModelSerializer):
    """A volume a project's workloads may mount (`data_sources: [name]` in a submission): an existing
    PersistentVolumeClaim in the project's namespace, or an NFS export."""

    project_slug: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        source="project", slug_field="slug", read_only=True)
    # A declared field named as Field's own `source` attribute: DRF takes declared fields off the class.
    source = serializers.CharField(source="target", read_only=True, help_text=(  # type: ignore[assignment]
        "Where the data comes from, as the Data page shows it: pvc/<claim> or <server>:<path>."))

    class Meta:
        model = DataSource
        fields = ["id", "project", "project_slug", "name", "kind", "source", "claim_name", "nfs_server", "nfs_path",
                  "mount_path", "read_only", "description", "created_at"]
        read_only_fields = fields


class PullSecretSerializer(serializers.ModelSerializer):
    """A project's registry credentials: registry and user name only; the password is never served (it is not kept
    once the worker has written the Secret)."""

    project_slug: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        source="project", slug_field="slug", read_only=True)
    secret_name = serializers.CharField(read_only=True, help_text="The kubernetes.io/dockerconfigjson Secret every pod "
                                                                  "of the project names in imagePullSecrets.")
    applied_at = serializers.DateTimeField(read_only=True, allow_null=True, help_text=(
        "When the worker wrote the Secret; null while it is being written."))
    apply_error = serializers.CharField(read_only=True, help_text="Why the Secret is not written yet; empty when it "
                                                                  "is, or while it is being written.")

    class Meta:
        model = ImagePullSecret
        fields = ["id", "project", "project_slug", "name", "registry", "username", "secret_name", "applied_at",
                  "apply_error", "created_at"]
        read_only_fields = fields


CHANNEL_EVENTS = [event for event in NotificationEvent.values if event != NotificationEvent.TEST]


class NotificationDeliverySerializer(serializers.ModelSerializer):
    """One entry of a channel's delivery log."""

    class Meta:
        model = NotificationDelivery
        fields = ["id", "event", "status", "attempts", "status_code", "last_error", "created_at", "attempted_at",
                  "delivered_at"]
        read_only_fields = fields


class NotificationChannelSerializer(ShapeOnlyModelSerializer):
    """A notification channel of the caller's own (no `project`) or of a project (its leads and admins). `url` and
    `secret` are write-only: stored sealed, never read back (`url_host` shows where it sends)."""

    project = ScopedPrimaryKeyRelatedField(scope=projects_for, queryset=Project.objects.all(), allow_null=True,
                                           required=False)
    owner = serializers.SerializerMethodField(help_text="The username of a personal channel's owner.")
    url = StrictCharField(write_only=True, required=False, allow_blank=True, max_length=2000, help_text=(
        "slack, teams, webhook: the receiver's http(s) URL (no credentials in it; public addresses only unless the "
        "installation allows private ones). Never shown back."))
    secret = StrictCharField(write_only=True, required=False, allow_blank=True, max_length=256, help_text=(
        "webhook: the key of the HMAC-SHA256 in X-Portal-Signature (16 to 256 characters). Never shown back."))
    events = serializers.ListField(child=StrictCharField(max_length=40), max_length=len(CHANNEL_EVENTS),
                                   help_text=f"Any of: {', '.join(CHANNEL_EVENTS)}.")
    last_delivery = serializers.SerializerMethodField(help_text="The newest entry of the delivery log, if any.")
    version = VersionField()

    class Meta:
        model = NotificationChannel
        fields = ["id", "project", "owner", "name", "kind", "email", "url", "secret", "url_host", "events",
                  "enabled", "last_delivery", "version", "created_at", "updated_at"]
        read_only_fields = ["url_host", "created_at", "updated_at"]

    def get_owner(self, channel: NotificationChannel) -> str | None:
        return channel.user.get_username() if channel.user is not None else None

    @extend_schema_field(NotificationDeliverySerializer(allow_null=True))
    def get_last_delivery(self, channel: NotificationChannel) -> dict[str, Any] | None:
        last = channel.deliveries.order_by("-created_at", "-id").first()
        return NotificationDeliverySerializer(last).data if last is not None else None


class NotificationChannelUpdateSerializer(NotificationChannelSerializer):
    """What a PATCH may change; a channel's kind and owner are fixed. `url` and `secret` replace the stored ones
    when given."""

    class Meta(NotificationChannelSerializer.Meta):
        fields = ["name", "email", "url", "secret", "events", "enabled", "version"]
