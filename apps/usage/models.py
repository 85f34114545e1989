"""The GPU-hour ledger: one row per stretch a workload held quota."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.org.models import Department, NodePool, Project


class UsageInterval(models.Model):
    """One stretch during which a workload held quota: from admission to eviction, finish or stop.

    Written by the watcher's transitions, with the cluster's own timestamps where it gives them. At most one open
    interval per workload (a database constraint), so a replayed observation can neither open a second one nor
    count a stretch twice; reopening after a requeue is a new row.
    """

    class Queue(models.TextChoices):
        GUARANTEED = "guaranteed", "Within deserved quota"
        ELASTIC = "elastic", "Over quota (borrowed)"

    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE, related_name="usage_intervals")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="+")
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
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

    access_department_paths = ("project__department_id",)
    access_project_path = "project_id"

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
