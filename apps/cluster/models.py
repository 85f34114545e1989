"""The cluster's quota state as Kueue reports it, mirrored by the watcher so pages never ask the cluster.

One row per portal-owned ClusterQueue, LocalQueue and Cohort, and per Node; the org rows they belong to come from
the portal's labels on the objects, a Node's pool from the pool's node labels (string references: this app sits below
org and imports no app but core).
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models

from apps.core.scopes import AccessPaths


class ClusterQueueState(models.Model):
    """A project's guaranteed or elastic queue on one pool: counts, usage and borrowing in GPU units."""

    name = models.CharField(max_length=253, unique=True)
    project = models.ForeignKey("org.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    node_pool = models.ForeignKey("org.NodePool", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    guaranteed = models.BooleanField(default=False)
    cohort = models.CharField(max_length=253, blank=True)
    nominal = models.DecimalField(max_digits=12, decimal_places=3, default=0)
    pending_workloads = models.PositiveIntegerField(default=0)
    reserving_workloads = models.PositiveIntegerField(default=0)
    admitted_workloads = models.PositiveIntegerField(default=0)
    reserved = models.DecimalField(max_digits=12, decimal_places=3, default=0)
    reserved_borrowed = models.DecimalField(max_digits=12, decimal_places=3, default=0)
    used = models.DecimalField(max_digits=12, decimal_places=3, default=0)
    used_borrowed = models.DecimalField(max_digits=12, decimal_places=3, default=0)
    weighted_share = models.BigIntegerField(null=True, blank=True)
    active = models.BooleanField(default=True)
    active_reason = models.CharField(max_length=100, blank=True)
    active_message = models.TextField(blank=True)
    observed_at = models.DateTimeField()

    # Scope paths for apps.accounts.access.restrict (the queues pages): the project's viewers.
    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("project__department_id",), project="project_id")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def names_kai_queue(name: str) -> bool:
        """Whether a row of this name mirrors one kind of work of a KAI leaf Queue (services.kai_row_name:
        "<queue>/<kind>", with a "/" no Kubernetes name has) rather than a Kueue ClusterQueue."""
        return "/" in name


class LocalQueueState(models.Model):
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    project = models.ForeignKey("org.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    cluster_queue = models.CharField(max_length=253, blank=True)
    pending_workloads = models.PositiveIntegerField(default=0)
    reserving_workloads = models.PositiveIntegerField(default=0)
    admitted_workloads = models.PositiveIntegerField(default=0)
    active = models.BooleanField(default=True)
    active_reason = models.CharField(max_length=100, blank=True)
    active_message = models.TextField(blank=True)
    # Admission Fair Sharing (Kueue's status.fairSharing.admissionFairSharingStatus): the decayed usage Kueue orders
    # the LocalQueues of an AFS ClusterQueue by, as Kueue reports it (resource -> quantity), and when it was sampled.
    afs_consumed = models.JSONField(default=dict, blank=True)
    afs_updated_at = models.DateTimeField(null=True, blank=True)
    observed_at = models.DateTimeField()

    access_paths: ClassVar[AccessPaths] = AccessPaths(departments=("project__department_id",), project="project_id")

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="localqueuestate_unique")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class CohortState(models.Model):
    """A root, department or project Cohort of one pool and its fair-sharing weighted share."""

    name = models.CharField(max_length=253, unique=True)
    node_pool = models.ForeignKey("org.NodePool", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    department = models.ForeignKey("org.Department", on_delete=models.CASCADE, null=True, blank=True,
                                   related_name="+")
    project = models.ForeignKey("org.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    parent = models.CharField(max_length=253, blank=True)
    weighted_share = models.BigIntegerField(null=True, blank=True)
    observed_at = models.DateTimeField()

    # A project's cohort for the project's viewers, a department's for the department's; the pool's root only for
    # those who see everything (apps/cluster/pages/queues.py adds the department cohorts of a member's projects).
    access_paths: ClassVar[AccessPaths] = AccessPaths(
        departments=("department_id", "project__department_id"), project="project_id"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


# Labels NVIDIA's GPU feature discovery puts on GPU nodes (what the Nodes page shows of each node's cards).
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB per card
GPU_COUNT_LABEL = "nvidia.com/gpu.count"  # physical cards
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"  # time-slicing: schedulable replicas per card
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


class NodeState(models.Model):
    """One cluster node: the pool its labels select and its allocatable units of the pool's GPU resource, so a gang's
    explanation can say on how many nodes its pods fit; its labels, taints and allocatable resources as the cluster
    reports them, for the Nodes page (GPU product, memory, count, MIG slices or time-slice replicas)."""

    name = models.CharField(max_length=253, unique=True)
    node_pool = models.ForeignKey("org.NodePool", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    allocatable_gpus = models.PositiveIntegerField(default=0)
    ready = models.BooleanField(default=False)
    unschedulable = models.BooleanField(default=False)
    labels = models.JSONField(default=dict, blank=True)
    taints = models.JSONField(default=list, blank=True, help_text="[{key, value, effect}] from the node's spec.")
    allocatable = models.JSONField(default=dict, blank=True, help_text="Resource name -> quantity, as reported.")
    observed_at = models.DateTimeField()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def gpu_product(self) -> str:
        return self.labels.get(GPU_PRODUCT_LABEL, "")

    @property
    def gpu_memory_gib(self) -> float | None:
        """Memory per card, from the MiB label."""
        raw = self.labels.get(GPU_MEMORY_LABEL, "")
        return round(int(raw) / 1024, 1) if raw.isascii() and raw.isdigit() else None

    @property
    def gpu_count(self) -> int | None:
        """Physical cards, from the feature-discovery label (None without it)."""
        raw = self.labels.get(GPU_COUNT_LABEL, "")
        return int(raw) if raw.isascii() and raw.isdigit() else None

    @property
    def mig_slices(self) -> dict[str, str]:
        """MIG profile -> allocatable slices (`{"3g.40gb": "2"}`); empty on a node without MIG."""
        return {name.removeprefix(MIG_RESOURCE_PREFIX): quantity for name, quantity in sorted(self.allocatable.items())
                if name.startswith(MIG_RESOURCE_PREFIX)}

    @property
    def replicas_per_card(self) -> int | None:
        """Time-slice replicas per card, when the node's cards are shared that way."""
        raw = self.labels.get(GPU_REPLICAS_LABEL, "")
        return int(raw) if raw.isascii() and raw.isdigit() and int(raw) > 1 else None

    @property
    def schedulable(self) -> bool:
        """Whether new pods may land here: ready and not cordoned."""
        return self.ready and not self.unschedulable


class WatcherHeartbeat(models.Model):
    """One row: when the watcher last tried the API server and last got an answer (/readyz, the metrics)."""

    beat_at = models.DateTimeField()
    cluster_seen_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="Why the last try failed; empty when it answered.")
    served_kinds = models.JSONField(null=True, blank=True, help_text=(
        "The kinds of work the cluster serves (workload kind values) as the watcher last listed them; null until "
        "it has (a manifest's kind is then not refused for it)."))
    torch_runtime = models.CharField(max_length=253, blank=True, help_text=(
        "The ClusterTrainingRuntime for PyTorch (label trainer.kubeflow.org/framework=torch) the watcher last found; "
        "empty when there is none, and PyTorch then runs as a JobSet (docs/frameworks.md)."))

    def __str__(self) -> str:
        return f"watcher heartbeat at {self.beat_at:%Y-%m-%d %H:%M:%S}"


class UnmappedWork(models.Model):
    """Work in the cluster the portal cannot count as a project's: a Kueue Workload it cannot map, or GPU pods in a
    project namespace that run outside Kueue's queues. The watcher keeps one row per object while it exists; admins
    see them (docs/architecture.md, Work submitted outside the portal)."""

    class Reason(models.TextChoices):
        NO_PROJECT = "no_project", "Its namespace belongs to no project"
        NO_OWNER = "no_owner", "It has no owner object"
        NO_QUEUE = "no_queue", "Its queue is none of the portal's"
        MALFORMED = "malformed", "Its pod sets cannot be read"
        OUTSIDE_QUEUE = "outside_queue", "Runs outside the queue"

    uid = models.CharField(max_length=64, unique=True)
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    object_kind = models.CharField(max_length=63, blank=True, help_text="Workload, or the kind of the pods' owner.")
    reason = models.CharField(max_length=20, choices=Reason.choices)
    detail = models.CharField(max_length=500, blank=True)
    gpus = models.PositiveIntegerField(default=0, help_text="GPUs its pods ask for, where they ask.")
    project = models.ForeignKey("org.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    first_seen_at = models.DateTimeField()
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["namespace", "name"]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}: {self.reason}"
