"""Shapes of the queue and node API: the figures the queue and node pages show, in GPU units."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.cluster.models import ClusterQueueState, LocalQueueState, NodeState
from apps.org.models import NodePool, Project

from .. import queues as reads


def _units(help_text: str, **kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=12, decimal_places=3, coerce_to_string=False, read_only=True,
                                    help_text=help_text, **kwargs)


class ClusterQueueSerializer(serializers.ModelSerializer):
    """A project's guaranteed or elastic ClusterQueue on one pool, as the watcher last mirrored it."""

    node_pool: serializers.SlugRelatedField[NodePool] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True,
        help_text="The pool (its ResourceFlavor); null when unknown.")
    project_slug: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        source="project", slug_field="slug", read_only=True, allow_null=True)
    kind = serializers.SerializerMethodField(help_text="guaranteed (nominal = deserved, never borrows) or elastic "
                                                       "(nominal 0, borrows up to the project's limit).")
    nominal = _units("Nominal quota.")
    used = _units("In use (Kueue's flavorsUsage).")
    borrowed = _units("Kueue's own per-queue borrowed (flavorsUsage borrowed): use beyond this queue's nominal quota.",
                      source="used_borrowed")
    lending = serializers.SerializerMethodField(help_text=(
        "Nominal quota left idle for the cohort to borrow; 0 for a project that does not lend."))
    reserved = _units("Quota reserved (Kueue's flavorsReservation).")

    class Meta:
        model = ClusterQueueState
        fields = ["id", "name", "node_pool", "project", "project_slug", "kind", "guaranteed", "cohort", "nominal",
                  "used", "borrowed", "lending", "reserved", "pending_workloads", "reserving_workloads",
                  "admitted_workloads", "weighted_share", "active", "active_reason", "active_message", "observed_at"]
        read_only_fields = fields
        extra_kwargs = {"pending_workloads": {"help_text": (
            "Kueue's pendingWorkloads; on a KAI queue's row, the portal's waiting work of that kind there (KAI's "
            "Queue status counts no workloads).")}}

    @extend_schema_field(serializers.ChoiceField(choices=["guaranteed", "elastic"]))
    def get_kind(self, queue: ClusterQueueState) -> str:
        return "guaranteed" if queue.guaranteed else "elastic"

    @extend_schema_field(serializers.DecimalField(max_digits=12, decimal_places=3, coerce_to_string=False))
    def get_lending(self, queue: ClusterQueueState) -> Decimal:
        return reads.lending(queue)


class LocalQueueSerializer(serializers.ModelSerializer):
    """A project's LocalQueue in one of its namespaces, as the watcher last mirrored it."""

    project_slug: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        source="project", slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = LocalQueueState
        fields = ["id", "namespace", "name", "project", "project_slug", "cluster_queue", "pending_workloads",
                  "reserving_workloads", "admitted_workloads", "active", "active_reason", "active_message",
                  "observed_at"]
        read_only_fields = fields


class CohortSerializer(serializers.Serializer):
    """A root, department or project Cohort of one pool, with the sums over the cluster queues of its whole subtree."""

    name = serializers.CharField(source="cohort.name")
    level = serializers.ChoiceField(choices=["root", "department", "project"])
    # A declared field named as Field's own `parent` attribute: DRF takes declared fields off the class.
    parent = serializers.CharField(  # type: ignore[assignment]
        source="cohort.parent", help_text="The parent cohort's name; empty for a pool's root.")
    depth = serializers.IntegerField(help_text="0 for a pool's root, 1 for a department, 2 for a project.")
    node_pool = serializers.CharField(source="cohort.node_pool.slug", allow_null=True,
                                      help_text="The pool whose tree it is; null when unknown.")
    department = serializers.CharField(source="cohort.department.slug", allow_null=True,
                                       help_text="Department and project cohorts: the department's slug.")
    project = serializers.CharField(source="cohort.project.slug", allow_null=True,
                                    help_text="Project cohorts: the project's slug.")
    queues = serializers.IntegerField(help_text="Cluster queues in its subtree.")
    nominal = _units("The nominal quota of its subtree's queues.")
    used = _units("In use by its subtree's queues.")
    borrowed = _units("Kueue's per-queue borrowed, summed over its subtree's queues.")
    pending = serializers.IntegerField(help_text="Pending workloads of its subtree's queues.")
    admitted = serializers.IntegerField(help_text="Admitted workloads of its subtree's queues.")
    weighted_share = serializers.IntegerField(source="cohort.weighted_share", allow_null=True,
                                              help_text="Kueue's fair-sharing weighted share; null when not reported.")
    observed_at = serializers.DateTimeField(source="cohort.observed_at")


class FlavorSerializer(serializers.Serializer):
    """A node pool as Kueue's ResourceFlavor, with its nodes' totals; its use only for those who see everything."""

    node_pool = serializers.CharField(source="pool.slug", help_text="The pool's slug: the ResourceFlavor's name.")
    name = serializers.CharField(source="pool.name")
    gpu_resource = serializers.CharField(source="pool.gpu_resource")
    cut = serializers.CharField(source="pool.cut", help_text="full, mig or timeslice.")
    mig_profile = serializers.CharField(source="pool.mig_profile")
    node_labels = serializers.DictField(source="pool.node_labels", child=serializers.CharField())
    node_taints = serializers.ListField(source="pool.node_taints", child=serializers.DictField())
    capacity = serializers.IntegerField(source="pool.capacity", help_text="The pool's capacity in GPU units.")
    nodes = serializers.IntegerField(help_text="Nodes the watcher saw in this pool.")
    schedulable_nodes = serializers.IntegerField(help_text="Of which ready and not cordoned.")
    allocatable = serializers.IntegerField(help_text="GPU units allocatable on all its nodes.")
    schedulable_allocatable = serializers.IntegerField(help_text="GPU units allocatable on its schedulable nodes.")
    used = _units("GPU units in use pool-wide; null unless you see everything.", allow_null=True)
    borrowed = _units("Kueue's per-queue borrowed pool-wide; null unless you see everything.", allow_null=True)
    pending = serializers.IntegerField(allow_null=True, help_text="Pending workloads; null unless you see everything.")
    admitted = serializers.IntegerField(allow_null=True,
                                        help_text="Admitted workloads; null unless you see everything.")


class NodeSerializer(serializers.ModelSerializer):
    """A node of a pool: its cards (NVIDIA GPU feature discovery's labels), their cut, allocatable units and state."""

    node_pool: serializers.SlugRelatedField[NodePool] = serializers.SlugRelatedField(slug_field="slug",
                                                                                      read_only=True)
    gpu_product = serializers.CharField(read_only=True, help_text="nvidia.com/gpu.product; empty when not labelled.")
    gpu_memory_gib = serializers.FloatField(read_only=True, allow_null=True, help_text="Memory per card.")
    gpu_count = serializers.IntegerField(read_only=True, allow_null=True, help_text="Physical cards.")
    mig_slices = serializers.DictField(child=serializers.CharField(), read_only=True,
                                       help_text="MIG profile -> allocatable slices; empty without MIG.")
    replicas_per_card = serializers.IntegerField(read_only=True, allow_null=True,
                                                 help_text="Time-slice replicas per card; null when not shared so.")
    state = serializers.SerializerMethodField(help_text="ready, cordoned or not_ready.")
    taints = serializers.ListField(child=serializers.DictField(), read_only=True,
                                   help_text="The node's taints: {key, value, effect}.")

    class Meta:
        model = NodeState
        fields = ["id", "name", "node_pool", "gpu_product", "gpu_memory_gib", "gpu_count", "mig_slices",
                  "replicas_per_card", "allocatable_gpus", "ready", "unschedulable", "state", "taints", "observed_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=["ready", "cordoned", "not_ready"]))
    def get_state(self, node: NodeState) -> str:
        if not node.ready:
            return "not_ready"
        return "cordoned" if node.unschedulable else "ready"
