"""The GPU-hour ledger: one row per stretch a workload held quota, its within-deserved / over-quota slices, and the
deserved quota in force at each moment (apps/usage/split.py has the attribution rule)."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models

from apps.core.scopes import AccessPaths
from apps.org.models import Department, NodePool, Project


class UsageInterval(models.Model):
    """One stretch during which a workload held quota: from admission to eviction, finish or stop.

    Written by the watcher's transitions, with the cluster's own timestamps where it gives them. At most one open
    interval per workload (a database constraint), so a replayed observation can neither open a second one nor
    count a stretch twice; reopening after a requeue is a new row.
    """

    class Queue(models.TextChoices):
        # The queue the workload ran in. Not the within/over split: preemptible work inside the project's deserved
        # quota is within deserved (UsageSlice holds the split).
        GUARANTEED = "guaranteed", "Guaranteed (non-preemptible)"
        ELASTIC = "elastic", "Elastic (preemptible)"

    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE, related_name="usage_intervals")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="+")
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                             related_name="+", help_text="Empty for work from outside no user is named on.")
    node_pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="+")
    units = models.PositiveIntegerField()
    card_fraction_numerator = models.PositiveSmallIntegerField()
    card_fraction_denominator = models.PositiveSmallIntegerField()
    queue = models.CharField(max_length=20, choices=Queue.choices)
    model_label = models.CharField(max_length=63)
    data_class = models.CharField(max_length=63)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=100, blank=True)

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("project__department_id",), project="project_id")
    reference_noun = ("GPU-hour record", "GPU-hour records")  # what a refused delete says (core.services)

    class Meta:
        ordering = ["started_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["workload"], condition=models.Q(ended_at__isnull=True),
                                    name="usageinterval_one_open_per_workload"),
            models.UniqueConstraint(fields=["workload", "started_at"], name="usageinterval_one_per_admission"),
            models.CheckConstraint(condition=models.Q(ended_at__isnull=True) | models.Q(ended_at__gte=models.F(
                "started_at")), name="usageinterval_ends_after_start"),
        ]
        indexes = [
            models.Index(fields=["started_at", "ended_at"]),
            models.Index(fields=["node_pool", "started_at"]),
            models.Index(fields=["department", "started_at"]),
            models.Index(fields=["project", "started_at"]),
            # Reports select intervals with ended_at IS NULL OR ended_at > the window's start (bench/README.md).
            models.Index(fields=["ended_at"], name="usageinterval_ended_at"),
        ]

    def __str__(self) -> str:
        return f"{self.workload_id} {self.units}x{self.node_pool_id} {self.started_at}..{self.ended_at or 'now'}"


class DeservedPeriod(models.Model):
    """A project's deserved units on a pool from `started_at` until `ended_at` (None: still in force).

    Written inside the quota change's transaction (a receiver of the quota services' signal), so the split of
    GPU-hours uses the quota in force at each moment and a quota change never rewrites closed months. The first
    period of a project and pool starts at split.BEGINNING for the split: the first quota known absorbs work the
    cluster's clock dates a little before the quota. `in_force_from` is when the quota really came into force (the
    same as `started_at` for every later period): deserved GPU-hours count from there, so a quota set today deserves
    nothing for the earlier days of the month, and a pool never deserves more than its cards can give.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    department = models.ForeignKey(Department, on_delete=models.CASCADE, related_name="+")
    node_pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="+")
    deserved = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    in_force_from = models.DateTimeField(help_text="When the quota came into force: deserved GPU-hours count from "
                                                   "here (started_at is split.BEGINNING for a first period).")

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("project__department_id",), project="project_id")

    class Meta:
        ordering = ["project_id", "node_pool_id", "started_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "node_pool"], condition=models.Q(ended_at__isnull=True),
                                    name="deservedperiod_one_current"),
            models.UniqueConstraint(fields=["project", "node_pool", "started_at"], name="deservedperiod_one_start"),
            models.CheckConstraint(condition=models.Q(ended_at__isnull=True) | models.Q(ended_at__gt=models.F(
                "started_at")), name="deservedperiod_ends_after_start"),
            models.CheckConstraint(condition=models.Q(in_force_from__gte=models.F("started_at")),
                                   name="deservedperiod_in_force_after_start"),
        ]

    def __str__(self) -> str:
        return f"{self.project_id}x{self.node_pool_id}: {self.deserved} from {self.started_at}"


class UsageSlice(models.Model):
    """A stretch of one interval during which its within-deserved share stayed the same.

    share = share_numerator / share_denominator of the interval's card hours in the stretch are within the
    project's deserved quota, the rest over quota. Maintained by apps.usage.services in the ledger writer's
    transaction (a pure function of the project's intervals and deserved periods on the pool: apps/usage/split.py);
    the grouping columns are copied from the interval so reports aggregate slices without joins.
    """

    interval = models.ForeignKey(UsageInterval, on_delete=models.CASCADE, related_name="slices")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="+")
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                             related_name="+", help_text="Empty for work from outside no user is named on.")
    node_pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="+")
    units = models.PositiveIntegerField()
    card_fraction_numerator = models.PositiveSmallIntegerField()
    card_fraction_denominator = models.PositiveSmallIntegerField()
    share_numerator = models.PositiveIntegerField()
    share_denominator = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    # The department is a copied column: no join for scoped reports.
    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("department_id",), project="project_id")
    reference_noun = None  # counted with their intervals when a delete is refused

    class Meta:
        ordering = ["interval_id", "started_at"]
        constraints = [
            models.UniqueConstraint(fields=["interval"], condition=models.Q(ended_at__isnull=True),
                                    name="usageslice_one_open_per_interval"),
            models.UniqueConstraint(fields=["interval", "started_at"], name="usageslice_one_start"),
            models.CheckConstraint(condition=models.Q(share_denominator__gt=0) & models.Q(
                share_numerator__lte=models.F("share_denominator")), name="usageslice_share_at_most_one"),
            models.CheckConstraint(condition=models.Q(ended_at__isnull=True) | models.Q(ended_at__gt=models.F(
                "started_at")), name="usageslice_ends_after_start"),
        ]
        indexes = [
            models.Index(fields=["node_pool", "started_at"]),
            models.Index(fields=["department", "started_at"]),
            models.Index(fields=["project", "node_pool", "started_at"]),
            models.Index(fields=["user", "started_at"]),
            models.Index(fields=["ended_at"], name="usageslice_ended_at"),
        ]

    def __str__(self) -> str:
        return f"{self.interval_id} {self.started_at}..{self.ended_at or 'now'} {self.share_numerator}/" \
               f"{self.share_denominator}"


class UtilisationHour(models.Model):
    """One workload's measured GPU use in one clock hour (UTC), added up by the worker from Prometheus' samples.

    `observed_card_hours` are the physical card hours sampled (units x card fraction x sampled time),
    `used_card_hours` the same weighted by each sample's utilisation (so used / observed is the mean utilisation of
    the allocated GPU-hours) and `idle_card_hours` those sampled below the idle policy's threshold ("allocated but
    idle"). Additive, so showback sums them per group with one aggregate query."""

    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="+")
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                             related_name="+", help_text="Empty for work from outside no user is named on.")
    node_pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="+")
    hour = models.DateTimeField()
    observed_card_hours = models.FloatField(default=0.0)
    used_card_hours = models.FloatField(default=0.0)
    idle_card_hours = models.FloatField(default=0.0)

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("department_id",), project="project_id")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workload", "hour"], name="utilisationhour_one_per_hour")]
        # Covering: showback reads a month of rows by index alone (bench/README.md, utilisation).
        indexes = [models.Index(fields=["hour", "project", "department", "user", "node_pool", "observed_card_hours",
                                        "used_card_hours", "idle_card_hours"], name="utilisationhour_report")]

    def __str__(self) -> str:
        return f"{self.workload_id} {self.hour:%Y-%m-%d %H}h {self.used_card_hours:.3f}/{self.observed_card_hours:.3f}"


class UsageDay(models.Model):
    """A project's closed card-seconds and measured use on a pool in one local day, so the use-over-time dashboard by
    day sums a row per project, pool and day instead of a year of slices (bench/README.md, Use over time).

    `card_seconds` and `within_seconds` are the physical card-seconds (units x card fraction) of the project's closed
    slices inside [day, day_end), and of those within its deserved quota; rewritten from the recompute's day on by
    the ledger's slice recompute (apps.usage.services), in its transaction. Open slices are not here: readers add
    them live. The three utilisation figures are the sums of the day's UtilisationHour rows (an hour counts in the
    day it starts in), added by the worker's write. `day_end` says which days the rows were cut for: a reader uses
    them only where they match its own local days (after a change of TIME_ZONE they do not until rebuilt, see
    usage_days_rebuild)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    department = models.ForeignKey(Department, on_delete=models.CASCADE, related_name="+")
    node_pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="+")
    day = models.DateTimeField()
    day_end = models.DateTimeField()
    card_seconds = models.FloatField(default=0.0)
    within_seconds = models.FloatField(default=0.0)
    observed_card_hours = models.FloatField(default=0.0)
    used_card_hours = models.FloatField(default=0.0)
    idle_card_hours = models.FloatField(default=0.0)

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("department_id",), project="project_id")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "node_pool", "department", "day"],
                                               name="usageday_one_per_day")]
        # Covering: the dashboard reads a year of rows by index alone.
        indexes = [models.Index(fields=["day", "node_pool", "department", "project", "day_end", "card_seconds",
                                        "within_seconds", "observed_card_hours", "used_card_hours",
                                        "idle_card_hours"], name="usageday_report")]

    def __str__(self) -> str:
        return f"{self.project_id}x{self.node_pool_id} {self.day:%Y-%m-%d} {self.card_seconds:.0f} card-s"


class PendingRecompute(models.Model):
    """A project's timeline on a pool whose slices are due to be recomputed from `since` on.

    Written in the transaction that changed the timeline's intervals when the writer defers the recompute (the
    watcher: apps.usage.services.ledger_deferred), so the change and the promise to recompute it commit together;
    `usage_timelines_settle` recomputes each timeline once for all its marks and deletes them. Slices of a timeline
    with marks are at most one settle pass behind its intervals."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    node_pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="+")
    since = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["project", "node_pool"])]

    def __str__(self) -> str:
        return f"{self.project_id}x{self.node_pool_id} from {self.since}"
