"""The organisation: node pools, departments, projects, their per-pool quotas, priority classes and the audit log.

Quota semantics follow Run:ai (docs/architecture.md, The organisation in Kueue): deserved units are guaranteed, the
limit caps deserved plus over-quota use, and the over-quota weight splits idle capacity. Rules that span rows live in
services.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from typing import ClassVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.core.models import SealedSecretModel, VersionedModel
from apps.core.scopes import AccessPaths

from .policies import policy_field_errors
from .validators import (
    node_labels_errors,
    node_taints_errors,
    validate_dns_label,
    validate_extended_resource_name,
    validate_slug,
)

MAX_OVER_QUOTA_WEIGHT = 1000
MAX_POOL_CAPACITY = 100_000
# NVIDIA's MIG profiles: 3g.40gb, 1g.10gb+me, and compute-instance ones such as 1c.3g.40gb.
MIG_PROFILE = re.compile(r"^(?:\d+c\.)?\d+g\.\d+gb(?:\+me)?$")
# When a pool's first price takes effect if it was given with the pool (or before prices had a history): all of the
# pool's use is priced, including work the cluster's clock dates a moment before the pool's row.
PRICED_FROM_THE_START = datetime(1970, 1, 1, tzinfo=UTC)


def price_text(price: Decimal | None) -> str:
    """A price as entered, without the column's trailing zeros (2.5, not 2.5000); empty for none."""
    return "" if price is None else format(price.normalize(), "f")


class NodePool(VersionedModel):
    """A slice of the cluster handed out as one unit: one GPU model cut one way; one Kueue ResourceFlavor, or one
    set of KAI Scheduler queues when KAI schedules its nodes (README, Kueue and KAI in one cluster)."""

    class Cut(models.TextChoices):
        FULL = "full", "Full GPU"
        MIG = "mig", "MIG slice"
        TIME_SLICED = "time-sliced", "Time-sliced replicas"

    class Scheduler(models.TextChoices):
        KUEUE = "kueue", "Kueue"
        KAI = "kai", "KAI Scheduler"

    slug = models.CharField(max_length=40, unique=True, validators=[validate_slug])
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    gpu_resource = models.CharField(
        max_length=100, validators=[validate_extended_resource_name],
        help_text="Extended resource name, e.g. nvidia.com/gpu or nvidia.com/mig-3g.40gb.",
    )
    gpu_product = models.CharField(max_length=100, blank=True, help_text="nvidia.com/gpu.product of its nodes.")
    cut = models.CharField(max_length=20, choices=Cut.choices, default=Cut.FULL)
    mig_profile = models.CharField(max_length=30, blank=True, help_text="For MIG pools, e.g. 3g.40gb.")
    replicas_per_card = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(64)], help_text="For time-sliced pools."
    )
    node_labels = models.JSONField(default=dict, blank=True, help_text="Labels that select this pool's nodes.")
    node_taints = models.JSONField(default=list, blank=True, help_text="Taints on this pool's nodes.")
    capacity = models.PositiveIntegerField(
        validators=[MaxValueValidator(MAX_POOL_CAPACITY)], help_text="GPU units (cards, slices or replicas)."
    )
    card_fraction_numerator = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    card_fraction_denominator = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    over_subscribable = models.BooleanField(
        default=False, help_text="Allow department quotas to add up to more than the pool's capacity."
    )
    serving = models.BooleanField(
        default=False, help_text="Reserved for inference services: no Kueue queues and no batch work; projects get a "
                                 "fixed number of its cards (serving reservations) instead of quotas.",
    )
    price_per_card_hour = models.DecimalField(
        max_digits=12, decimal_places=4, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="Optional price of one physical card for one hour, in force from when it is saved (earlier hours "
                  "keep the price they had); turns the usage showback into chargeback.",
    )
    scheduler = models.CharField(
        max_length=10, choices=Scheduler.choices, default=Scheduler.KUEUE,
        help_text="What queues and admits the pool's work: Kueue, or KAI Scheduler (its own queues, GPU fractions).",
    )
    gpu_fractions = models.BooleanField(
        default=False, help_text="KAI pools only: work may ask for a fraction of one card, so notebooks share cards.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(card_fraction_numerator__lte=models.F("card_fraction_denominator")),
                name="nodepool_card_fraction_at_most_one",
                violation_error_message="A unit cannot be more than one physical card.",
            ),
            models.CheckConstraint(
                condition=Q(gpu_fractions=False) | Q(scheduler="kai"),
                name="nodepool_gpu_fractions_need_kai",
                violation_error_message="GPU fractions need KAI Scheduler: Kueue counts whole units.",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    def access_scope(self) -> None:
        """Installation-wide (apps.core.scopes): everyone signed in views a pool, admins change it."""
        return None

    def clean(self) -> None:
        """The cut decides the profile and the replicas: a MIG pool names its profile, a time-sliced one shares each
        card between at least 2 replicas, and the others have neither (the API would otherwise store them unused).
        The node labels and taints must be what Kueue takes on the pool's ResourceFlavor (apps.org.validators)."""
        errors: dict[str, str | list[str]] = {}
        if self.cut == self.Cut.MIG:
            if not self.mig_profile:
                errors["mig_profile"] = "A MIG pool needs its profile, e.g. 3g.40gb."
            elif not MIG_PROFILE.match(self.mig_profile):
                errors["mig_profile"] = "Write a MIG profile such as 3g.40gb or 1g.10gb+me."
        elif self.mig_profile:
            errors["mig_profile"] = "Only a MIG pool has a MIG profile; leave it empty."
        replicas = self.replicas_per_card
        if isinstance(replicas, int):
            if self.cut == self.Cut.TIME_SLICED and replicas < 2:
                errors["replicas_per_card"] = "A time-sliced pool shares each card between at least 2 replicas."
            elif self.cut != self.Cut.TIME_SLICED and replicas != 1:
                errors["replicas_per_card"] = "Only a time-sliced pool shares its cards; leave it at 1."
        if label_errors := node_labels_errors(self.node_labels):
            errors["node_labels"] = label_errors
        if taint_errors := node_taints_errors(self.node_taints):
            errors["node_taints"] = taint_errors
        errors.update(self.scheduler_errors())
        if errors:
            raise ValidationError(errors)

    def scheduler_errors(self) -> dict[str, str]:
        """Fractions are KAI's (Kueue counts whole units), and a serving pool has no queues of either."""
        errors: dict[str, str] = {}
        if self.gpu_fractions and self.scheduler != self.Scheduler.KAI:
            errors["gpu_fractions"] = ("GPU fractions need KAI Scheduler: Kueue counts whole units. Choose the KAI "
                                       "scheduler for this pool, or turn fractions off.")
        if self.serving and self.scheduler == self.Scheduler.KAI:
            errors["scheduler"] = ("A serving pool has no queues (its inference services are not queued), so it "
                                   "stays on Kueue; turn serving off to hand the pool to KAI Scheduler.")
        return errors

    @property
    def kai(self) -> bool:
        return self.scheduler == self.Scheduler.KAI

    @property
    def card_fraction(self) -> Fraction:
        """What one unit is of a physical card: 1 for full cards, 3/7 for a 3g.40gb slice, 1/N for N replicas."""
        return Fraction(self.card_fraction_numerator, self.card_fraction_denominator)

    @property
    def card_fraction_display(self) -> str:
        fraction = self.card_fraction
        return "1" if fraction == 1 else f"{fraction.numerator}/{fraction.denominator}"

    @property
    def price_display(self) -> str:
        return price_text(self.price_per_card_hour)


class NodePoolPrice(models.Model):
    """The price of one physical card-hour on a pool from `valid_from` until the pool's next row (an empty price:
    unpriced from then on). NodePool.price_per_card_hour is the price in force now; this is its history. Cost prices
    each moment of use at the price in force then (apps/usage/reports), so a new price never re-prices past hours."""

    node_pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="prices")
    price_per_card_hour = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True,
                                              validators=[MinValueValidator(0)])
    valid_from = models.DateTimeField()
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["node_pool_id", "valid_from"]
        constraints = [models.UniqueConstraint(fields=["node_pool", "valid_from"], name="nodepoolprice_one_per_moment")]

    def __str__(self) -> str:
        return f"{self.node_pool_id}: {self.price_per_card_hour} from {self.valid_from}"

    @property
    def from_the_start(self) -> bool:
        return self.valid_from == PRICED_FROM_THE_START

    @property
    def price_display(self) -> str:
        return price_text(self.price_per_card_hour)


class Department(VersionedModel):
    """A group of projects with its own deserved quota per pool, and bounds for its team leads' weights."""

    slug = models.CharField(max_length=40, unique=True, validators=[validate_slug])
    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    min_project_weight = models.DecimalField(
        max_digits=8, decimal_places=2, default=0,
        validators=[MinValueValidator(0), MaxValueValidator(MAX_OVER_QUOTA_WEIGHT)],
        help_text="Lowest over-quota weight a team lead may give a project.",
    )
    max_project_weight = models.DecimalField(
        max_digits=8, decimal_places=2, default=10,
        validators=[MinValueValidator(0), MaxValueValidator(MAX_OVER_QUOTA_WEIGHT)],
        help_text="Highest over-quota weight a team lead may give a project.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Scope paths for apps.accounts.access.restrict.
    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("pk",), member_department="pk")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(min_project_weight__lte=models.F("max_project_weight")),
                name="department_weight_bounds_ordered",
                violation_error_message="The lowest weight cannot be above the highest.",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def access_scope(self) -> tuple[int, int | None]:
        return self.pk, None


class PriorityClass(VersionedModel):
    """An admin-managed priority, mirrored to a Kueue WorkloadPriorityClass of the same name."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_dns_label])
    value = models.IntegerField(validators=[MinValueValidator(-1_000_000_000), MaxValueValidator(1_000_000_000)])
    preemptible = models.BooleanField(default=True, help_text="Whether work of this class is preemptible by default.")
    description = models.CharField(max_length=250, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["value", "name"]
        verbose_name_plural = "priority classes"

    def __str__(self) -> str:
        return self.name

    def access_scope(self) -> None:
        """Installation-wide (apps.core.scopes): everyone signed in views a priority class, admins change it."""
        return None


class Project(VersionedModel):
    """A team's space: one Kubernetes namespace, per-pool quotas inside its department's."""

    slug = models.CharField(max_length=40, unique=True, validators=[validate_slug])
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="projects")
    namespace = models.CharField(max_length=63, unique=True, validators=[validate_dns_label])
    does_not_lend = models.BooleanField(
        default=False, help_text="Idle deserved quota stays with this project instead of being lent (e.g. serving)."
    )
    default_priority_class = models.ForeignKey(
        PriorityClass, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    notebooks_shared = models.BooleanField(
        default=False, help_text="Members of the project may open each other's notebooks (else only the owner)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("department_id",), project="pk")

    class Meta:
        ordering = ["department__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["department", "name"],
                name="project_name_unique_in_department",
                violation_error_message="This department already has a project with that name.",
            )
        ]

    def __str__(self) -> str:
        return self.slug

    def access_scope(self) -> tuple[int, int | None]:
        return self.department_id, self.pk


class ProjectNamespace(models.Model):
    """An existing namespace an admin maps to a project: the Kueue work in it counts as that project's
    (docs/architecture.md, Namespaces mapped to a project). The portal never creates or deletes it; the Kueue sync
    puts the project's LocalQueues in it, and the watcher mirrors its Workloads as the project's work."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="mapped_namespaces")
    namespace = models.CharField(max_length=63, unique=True, validators=[validate_dns_label],
                                 error_messages={"unique": "This namespace is mapped to a project already."})
    created_at = models.DateTimeField(auto_now_add=True)

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("project__department_id",), project="project_id")

    class Meta:
        ordering = ["namespace"]

    def __str__(self) -> str:
        return self.namespace


class Quota(VersionedModel):
    """A department's or a project's share of one node pool (exactly one owner)."""

    node_pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="quotas")
    department = models.ForeignKey(Department, on_delete=models.CASCADE, null=True, blank=True, related_name="quotas")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="quotas")
    deserved = models.PositiveIntegerField(
        default=0, validators=[MaxValueValidator(MAX_POOL_CAPACITY)], help_text="Guaranteed GPU units."
    )
    limit = models.PositiveIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(MAX_POOL_CAPACITY)],
        help_text="Most units including over-quota use; empty means unlimited.",
    )
    over_quota_weight = models.DecimalField(
        max_digits=8, decimal_places=2, default=1,
        validators=[MinValueValidator(0), MaxValueValidator(MAX_OVER_QUOTA_WEIGHT)],
    )
    cpu_cores = models.DecimalField(max_digits=10, decimal_places=2, null=True, blank=True,
                                    validators=[MinValueValidator(0)])
    memory_gib = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    # A department's quota belongs to it; a project's to the project (and its department's admins).
    access_paths: ClassVar[AccessPaths] = AccessPaths(
        departments=("department_id", "project__department_id"), project="project_id", member_department="department_id"
    )

    class Meta:
        ordering = ["node_pool__slug", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(department__isnull=False) & Q(project__isnull=True))
                | (Q(department__isnull=True) & Q(project__isnull=False)),
                name="quota_exactly_one_owner",
                violation_error_message="A quota belongs to exactly one department or project.",
            ),
            models.UniqueConstraint(
                fields=["department", "node_pool"], condition=Q(department__isnull=False),
                name="quota_unique_department_pool",
                violation_error_message="This department already has a quota on that pool.",
            ),
            models.UniqueConstraint(
                fields=["project", "node_pool"], condition=Q(project__isnull=False),
                name="quota_unique_project_pool",
                violation_error_message="This project already has a quota on that pool.",
            ),
            models.CheckConstraint(
                condition=Q(limit__isnull=True) | Q(limit__gte=models.F("deserved")),
                name="quota_limit_at_least_deserved",
                violation_error_message="The limit cannot be below the deserved quota.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.owner}/{self.node_pool_id and self.node_pool.slug}"

    @property
    def owner(self) -> Department | Project:
        return self.project if self.project_id else self.department  # type: ignore[return-value]

    @property
    def over_quota_units(self) -> int | None:
        """How far above deserved the owner may go; None when unlimited."""
        return None if self.limit is None else self.limit - self.deserved


MAX_BUDGET_AMOUNT = Decimal("1000000000")
MAX_BUDGET_THRESHOLDS = 10
QUARTER_MONTHS = 3


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=timezone.get_current_timezone())


def budget_period(period: str, now: datetime) -> tuple[datetime, datetime]:
    """The calendar month or quarter holding `now`, [start, end) in the portal's time zone: budgets roll over with
    the calendar, so everyone reads the same period."""
    local = timezone.localtime(now)
    months = QUARTER_MONTHS if period == Budget.Period.QUARTER else 1
    first = local.month - (local.month - 1) % months
    start = _month_start(local.year, first)
    after = first + months
    end = _month_start(local.year + (after - 1) // 12, (after - 1) % 12 + 1)
    return start, end


def budget_threshold_errors(thresholds: object) -> list[str]:
    """Thresholds are whole percents from 1 to 100, each once, in rising order (the order they are crossed)."""
    if not isinstance(thresholds, list) or not all(type(value) is int for value in thresholds):
        return ["Give the thresholds as a list of whole percents, e.g. [50, 80, 100]."]
    if len(thresholds) > MAX_BUDGET_THRESHOLDS:
        return [f"Give at most {MAX_BUDGET_THRESHOLDS} thresholds."]
    errors = []
    outside = [value for value in thresholds if not 1 <= value <= 100]
    if outside:
        errors.append(f"Thresholds are percents from 1 to 100; {', '.join(map(str, outside))} is outside.")
    if any(later <= earlier for earlier, later in itertools.pairwise(thresholds)):
        errors.append("List the thresholds in rising order, each once (e.g. [50, 80, 100]).")
    return errors


def _default_thresholds() -> list[int]:
    return [50, 80, 100]


class Budget(VersionedModel):
    """How many GPU-hours (or how much money) a department or a project may spend per calendar month or quarter
    (docs/architecture.md, Budgets). Kueue governs how many cards a team holds at once; a budget governs how many
    card-hours it burns. Crossing a threshold notifies once per period; an exceeded `hold_preemptible` budget holds
    the scope's elastic LocalQueues until the period rolls over or the budget is raised."""

    class Period(models.TextChoices):
        MONTH = "month", "Month"
        QUARTER = "quarter", "Quarter"

    class Metric(models.TextChoices):
        GPU_HOURS = "gpu_hours", "GPU-hours"
        COST = "cost", "Cost"

    class OnExceed(models.TextChoices):
        NOTIFY = "notify", "Notify only"
        HOLD_PREEMPTIBLE = "hold_preemptible", "Hold new preemptible work"

    department = models.ForeignKey(Department, on_delete=models.CASCADE, null=True, blank=True,
                                   related_name="budgets")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="budgets")
    period = models.CharField(max_length=10, choices=Period.choices, default=Period.MONTH)
    metric = models.CharField(max_length=10, choices=Metric.choices, default=Metric.GPU_HOURS)
    amount = models.DecimalField(max_digits=14, decimal_places=2,
                                 validators=[MinValueValidator(0), MaxValueValidator(MAX_BUDGET_AMOUNT)],
                                 help_text="GPU-hours (physical card hours) or money per period.")
    thresholds = models.JSONField(default=_default_thresholds, blank=True,
                                  help_text="Percents of the amount that notify when crossed, in rising order.")
    on_exceed = models.CharField(max_length=20, choices=OnExceed.choices, default=OnExceed.NOTIFY)
    held_period_start = models.DateTimeField(
        null=True, blank=True, editable=False,
        help_text="Start of the period in which the budget was found exceeded and holds preemptible work (set and "
                  "cleared by the budget sweep; cleared when the budget is raised).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    access_paths: ClassVar[AccessPaths] = AccessPaths(
        departments=("department_id", "project__department_id"), project="project_id", member_department="department_id"
    )

    class Meta:
        ordering = ["department__name", "project__slug", "period", "metric", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(department__isnull=False) & Q(project__isnull=True))
                | (Q(department__isnull=True) & Q(project__isnull=False)),
                name="budget_exactly_one_owner",
                violation_error_message="A budget belongs to exactly one department or project.",
            ),
            models.UniqueConstraint(
                fields=["department", "period", "metric"], condition=Q(department__isnull=False),
                name="budget_unique_department_period_metric",
                violation_error_message="This department already has a budget of that kind for that period.",
            ),
            models.UniqueConstraint(
                fields=["project", "period", "metric"], condition=Q(project__isnull=False),
                name="budget_unique_project_period_metric",
                violation_error_message="This project already has a budget of that kind for that period.",
            ),
            models.CheckConstraint(condition=Q(amount__gte=0), name="budget_amount_not_negative",
                                   violation_error_message="A budget cannot be below zero."),
        ]

    def __str__(self) -> str:
        owner = self.owner
        return f"{owner} {self.get_metric_display()} per {self.period}" if owner else f"budget {self.pk}"

    @property
    def owner(self) -> Department | Project | None:
        return self.project if self.project_id else self.department

    def clean(self) -> None:
        errors = budget_threshold_errors(self.thresholds)
        if errors:
            raise ValidationError({"thresholds": errors})

    def current_period(self, now: datetime) -> tuple[datetime, datetime]:
        return budget_period(self.period, now)

    @property
    def unit(self) -> str:
        return "GPU-hours" if self.metric == Budget.Metric.GPU_HOURS else (settings.USAGE_CURRENCY or "")

    def amount_text(self) -> str:
        amount = format(self.amount.normalize(), "f")
        return f"{amount} GPU-hours" if self.metric == Budget.Metric.GPU_HOURS else \
            f"{amount} {settings.USAGE_CURRENCY}".strip()

    def period_text(self, now: datetime) -> str:
        start = timezone.localtime(self.current_period(now)[0])
        if self.period == Budget.Period.QUARTER:
            return f"Q{(start.month - 1) // QUARTER_MONTHS + 1} {start.year}"
        return f"{start:%B %Y}"


class BudgetCrossing(models.Model):
    """One threshold of one budget crossed in one period: written once (the unique constraint), so the sweep
    notifies once per threshold and period however often it runs."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="crossings")
    period_start = models.DateTimeField()
    threshold = models.PositiveSmallIntegerField()
    spent = models.DecimalField(max_digits=16, decimal_places=3)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["budget_id", "period_start", "threshold"]
        constraints = [models.UniqueConstraint(fields=["budget", "period_start", "threshold"],
                                               name="budgetcrossing_once_per_period")]

    def __str__(self) -> str:
        return f"{self.budget_id} {self.threshold}% from {self.period_start:%Y-%m-%d}"


MAX_POLICY_RUNTIME_SECONDS = 30 * 24 * 3600  # the longest runtime a workload may ask for (apps.workloads.models)
MAX_POLICY_IDLE_MINUTES = 7 * 24 * 60  # the longest idle timeout a notebook may ask for


class Policy(VersionedModel):
    """What work in a scope may ask for (docs/architecture.md, Policies): one row for the whole organisation (neither
    department nor project), one per department, one per project. Every limit is nullable: empty inherits the scope
    above, and the nearest scope that sets a field wins for that field (apps.org.policies merges them). A scope may
    only narrow what the scope above allows (apps.org.services.policies refuses the rest)."""

    class PodSecurity(models.TextChoices):
        BASELINE = "baseline", "Baseline"
        RESTRICTED = "restricted", "Restricted"

    department = models.ForeignKey(Department, on_delete=models.CASCADE, null=True, blank=True,
                                   related_name="policies")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="policies")
    required_labels = models.JSONField(
        null=True, blank=True, help_text="Audit labels every workload must carry, of: model, data_class.")
    max_gpus_per_workload = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(MAX_POOL_CAPACITY)],
        help_text="GPU units one workload may hold in all its pods together.")
    max_runtime_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(60), MaxValueValidator(MAX_POLICY_RUNTIME_SECONDS)],
        help_text="The longest maximum runtime a workload may ask for.")
    default_runtime_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(60), MaxValueValidator(MAX_POLICY_RUNTIME_SECONDS)],
        help_text="The maximum runtime of a workload that gives none.")
    allowed_images = models.JSONField(
        null=True, blank=True,
        help_text="Glob patterns (* and ? only) an image reference must match one of, e.g. nvcr.io/nvidia/*.")
    allowed_priority_classes = models.JSONField(
        null=True, blank=True, help_text="Names of the priority classes work may use.")
    default_priority_class = models.ForeignKey(
        PriorityClass, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        help_text="The class of work that names none.")
    max_notebook_idle_minutes = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(5), MaxValueValidator(MAX_POLICY_IDLE_MINUTES)],
        help_text="The longest idle timeout a notebook may ask for (also its default).")
    pod_security = models.CharField(
        max_length=10, blank=True, choices=PodSecurity.choices,
        help_text="The Pod Security Standards profile every pod template of a submitted manifest must meet.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    access_paths: ClassVar[AccessPaths] = AccessPaths(
        departments=("department_id", "project__department_id"), project="project_id", member_department="department_id"
    )

    class Meta:
        ordering = ["department__name", "project__slug", "id"]
        verbose_name_plural = "policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(department__isnull=True) | Q(project__isnull=True),
                name="policy_at_most_one_scope",
                violation_error_message="A policy belongs to a department, a project or the whole organisation, "
                                        "not to both a department and a project.",
            ),
            # One policy per scope, the organisation's (both empty) included: NULLs are distinct in a plain unique
            # constraint, their coalesced ids are not.
            models.UniqueConstraint(
                Coalesce("department", Value(0)), Coalesce("project", Value(0)), name="policy_one_per_scope",
                violation_error_message="This scope already has a policy; change that one.",
            ),
        ]

    def __str__(self) -> str:
        return self.scope_text()

    def scope_text(self) -> str:
        """Whose policy this is, as messages name it ("the Research department's policy")."""
        if self.project is not None:
            return f"the {self.project.name} project's policy"
        if self.department is not None:
            return f"the {self.department.name} department's policy"
        return "the organisation's policy"

    @property
    def owner(self) -> Department | Project | None:
        return self.project if self.project_id else self.department

    @property
    def department_under(self) -> int | None:
        """The id of the department the policy falls under (its own or its project's); None for the organisation's."""
        return self.project.department_id if self.project is not None else self.department_id

    def access_scope(self) -> tuple[int, int | None] | None:
        """Its department or project; None for the organisation's (everyone signed in reads it, admins change it)."""
        owner = self.owner
        return owner.access_scope() if owner is not None else None

    def clean(self) -> None:
        errors = policy_field_errors(self)
        if errors:
            raise ValidationError(errors)


class ServingReservation(VersionedModel):
    """A fixed number of a serving pool's units set aside for one project's inference services: checked when a
    service is submitted or scaled up, never queued and never preempted (docs/architecture.md, Inference
    services). The reservations on a pool add up to at most its capacity (apps.org.services.serving)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="serving_reservations")
    node_pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="serving_reservations")
    cards = models.PositiveIntegerField(validators=[MaxValueValidator(MAX_POOL_CAPACITY)],
                                        help_text="GPU units of the pool the project's services may hold at once.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("project__department_id",), project="project_id")

    class Meta:
        ordering = ["node_pool__slug", "project__slug"]
        constraints = [
            models.UniqueConstraint(fields=["project", "node_pool"], name="servingreservation_one_per_project_pool",
                                    violation_error_message="This project already has a reservation on that pool.")
        ]

    def __str__(self) -> str:
        return f"{self.project_id and self.project.slug}/{self.node_pool_id and self.node_pool.slug}"

    def access_scope(self) -> tuple[int, int | None]:
        return self.project.department_id, self.project_id


class KueueSyncState(models.Model):
    """One row: whether an org -> Kueue reconcile is wanted and who is running it (a claim by conditional UPDATE)."""

    requested_at = models.DateTimeField(null=True, blank=True)
    running_since = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"kueue sync requested {self.requested_at}, running since {self.running_since}"


class KueueSyncRun(models.Model):
    """The outcome of one reconcile, shown to admins: what changed in the cluster, or why it failed."""

    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    ok = models.BooleanField(null=True)
    changes = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    # Projects this run left out (namespace not the portal's, or a write refused), one line each; the run itself
    # still completed for everyone else.
    project_errors = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"kueue sync {self.started_at:%Y-%m-%d %H:%M:%S} ok={self.ok} changes={len(self.changes)}"


class DataSource(models.Model):
    """Data a project's workloads may mount: an existing PersistentVolumeClaim, or an NFS export."""

    class Kind(models.TextChoices):
        PVC = "pvc", "PersistentVolumeClaim"
        NFS = "nfs", "NFS export"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="data_sources")
    name = models.CharField(max_length=40, validators=[validate_dns_label],
                            help_text="What users pick in the form, e.g. imagenet.")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.PVC)
    claim_name = models.CharField(max_length=253, blank=True, help_text="The PersistentVolumeClaim in the project's "
                                                                        "namespace.")
    nfs_server = models.CharField(max_length=253, blank=True)
    nfs_path = models.CharField(max_length=255, blank=True)
    mount_path = models.CharField(max_length=255, help_text="Where it appears in the container, e.g. /data/imagenet.")
    read_only = models.BooleanField(default=True)
    description = models.CharField(max_length=250, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("project__department_id",), project="project_id")

    class Meta:
        ordering = ["project__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="datasource_unique_name_in_project",
                                               violation_error_message="This project has a data source by that "
                                                                       "name already.")]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.name}" if self.project_id else self.name

    @property
    def target(self) -> str:
        """Where the data comes from, for pages."""
        return f"pvc/{self.claim_name}" if self.kind == self.Kind.PVC else f"{self.nfs_server}:{self.nfs_path}"


class ImagePullSecret(SealedSecretModel):
    """Registry credentials for a project's images: a kubernetes.io/dockerconfigjson Secret every pod of the project
    names in imagePullSecrets. Only the registry and user name are kept; the password goes to the cluster sealed
    (apps.core.sealed) and is cleared once the worker has written the Secret."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="pull_secrets")
    name = models.CharField(max_length=40, validators=[validate_dns_label])
    registry = models.CharField(max_length=253, help_text="e.g. nvcr.io or registry.example.org:5000")
    username = models.CharField(max_length=253)

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("project__department_id",), project="project_id")

    class Meta:
        ordering = ["project__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="pullsecret_unique_name_in_project",
                                               violation_error_message="This project has a pull secret by that "
                                                                       "name already.")]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.name}" if self.project_id else self.name

    @property
    def secret_name(self) -> str:
        return f"portal-pull-{self.pk}"


class NotificationEvent(models.TextChoices):
    """What a notification channel may ask to hear about (docs/architecture.md, Notification channels)."""

    WORKLOAD_SUBMITTED = "workload.submitted", "Workload submitted"
    WORKLOAD_ADMITTED = "workload.admitted", "Workload admitted"
    WORKLOAD_PREEMPTED = "workload.preempted", "Workload preempted"
    WORKLOAD_REQUEUED = "workload.requeued", "Workload requeued"
    WORKLOAD_FINISHED = "workload.finished", "Workload finished"
    WORKLOAD_FAILED = "workload.failed", "Workload failed"
    WORKLOAD_IDLE_WARNING = "workload.idle_warning", "Workload holds idle GPUs"
    WORKLOAD_RUNTIME_LIMIT = "workload.runtime_limit", "Workload reached its runtime limit"
    BUDGET_THRESHOLD = "budget.threshold", "Budget threshold crossed"
    QUOTA_CHANGED = "quota.changed", "Quota changed"
    TEST = "test", "Test"


class NotificationChannel(VersionedModel):
    """Where a user, or a project's leads, hear about events: an e-mail address, a Slack or Teams incoming webhook, or
    a signed webhook of their own (docs/architecture.md, Notification channels).

    The URL and the webhook's secret are stored sealed (apps.core.sealed): a Slack or Teams webhook URL is itself a
    credential. Only the URL's scheme and host are kept readable, for the pages."""

    class Kind(models.TextChoices):
        EMAIL = "email", "E-mail"
        SLACK = "slack", "Slack"
        TEAMS = "teams", "Microsoft Teams"
        WEBHOOK = "webhook", "Webhook"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True,
                             related_name="notification_channels")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True,
                                related_name="notification_channels")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    email = models.EmailField(blank=True, help_text="Where an e-mail channel sends; a user's own address if empty.")
    url_host = models.CharField(max_length=300, blank=True, editable=False,
                                help_text="The receiver's scheme and host, for the pages (the URL itself is sealed).")
    sealed = models.TextField(blank=True, editable=False, help_text="The URL and secret, encrypted.")
    events = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    unreachable_since = models.DateTimeField(
        null=True, blank=True, editable=False,
        help_text="When the receiver stopped answering (a timeout or no connection); cleared by its next answer.")
    paused_until = models.DateTimeField(
        null=True, blank=True, editable=False,
        help_text="Until when the channel's deliveries wait instead of trying a receiver that does not answer.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("project__department_id",), project="project_id")

    class Meta:
        ordering = ["project__slug", "name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(user__isnull=False) & Q(project__isnull=True))
                | (Q(user__isnull=True) & Q(project__isnull=False)),
                name="notificationchannel_exactly_one_owner",
                violation_error_message="A channel belongs to exactly one user or project.",
            ),
        ]
        indexes = [models.Index(fields=["project", "enabled"], name="org_channel_project_enabled"),
                   models.Index(fields=["user", "enabled"], name="org_channel_user_enabled")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} channel {self.name}"

    def clean(self) -> None:
        if not isinstance(self.events, list) or not all(isinstance(event, str) for event in self.events):
            raise ValidationError({"events": ["Give a list of event names."]})
        unknown = [event for event in self.events if event not in NotificationEvent.values
                   or event == NotificationEvent.TEST]
        if unknown:
            raise ValidationError({"events": [f"Unknown events: {', '.join(map(str, unknown))}."]})


class NotificationDelivery(models.Model):
    """One event sent (or being sent) to one channel: the channel's delivery log. Written once per (channel, event,
    key), the key naming the object and its transition, so an event seen twice is sent once."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    channel = models.ForeignKey(NotificationChannel, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40, choices=NotificationEvent.choices)
    key = models.CharField(max_length=200, help_text="The object and transition the event is about.")
    payload = models.JSONField(help_text="The event as sent: event, timestamp, object, link, summary.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True, help_text="The receiver's last answer.")
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    attempted_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["channel", "event", "key"], name="notificationdelivery_once")]

    def __str__(self) -> str:
        return f"{self.event} to channel {self.channel_id}: {self.status}"
