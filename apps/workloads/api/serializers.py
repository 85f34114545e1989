"""Shapes of the workloads API. Shape only: every rule (names, image, env, labels, sizes, quota fit, who may submit)
is checked by `apps.workloads.services.workload_submit`, whose messages reach the client through the handler.

Input names differ from the model where the API is friendlier: `labels` {model, data_class} are `model_label` and
`data_class`; `memory` (a Kubernetes quantity or GiB) is `memory_gib`; notebook `idle_timeout_minutes` and `port`
are `notebook_idle_timeout_minutes` and `notebook_port`. `API_FIELD_NAMES` maps service error keys back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.http import QueryDict
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import SkipField

from apps.accounts import access
from apps.core.api import AsciiIntegerField, ScopedPrimaryKeyRelatedField, StrictCharField, nul_errors
from apps.core.kueue_names import KAI_POD_GROUP_API_VERSION
from apps.org.models import DataSource, NodePool, PriorityClass, Project
from apps.workloads.explain import REASONS
from apps.workloads.frameworks import DEFAULT_RAY_VERSION, MAX_ENTRYPOINT, MAX_WORKING_DIR, framework_entry
from apps.workloads.manifests import MANIFEST_KINDS, MAX_MANIFEST_BYTES
from apps.workloads.models import (
    PORTAL_KIND_CHOICES,
    QUEUED_STATUSES,
    Credential,
    ForecastBasis,
    Framework,
    Kind,
    Origin,
    Status,
    Workload,
    WorkloadUtilisation,
)
from apps.workloads.selectors import cluster_events_of, workloads_for

from .fields import (
    CpuField,
    EnvField,
    GpuFractionField,
    GpusField,
    LabelsSerializer,
    MemoryField,
    ProjectReferenceField,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# service / model field -> API field; labels are nested: (parent, child)
API_FIELD_NAMES: dict[str, str | tuple[str, str]] = {
    "memory_gib": "memory",
    "notebook_idle_timeout_minutes": "idle_timeout_minutes",
    "notebook_port": "port",
    "shm_gib": "shm",
    "model_label": ("labels", "model"),
    "data_class": ("labels", "data_class"),
}

def _strings(help_text: str) -> serializers.ListField:
    return serializers.ListField(child=StrictCharField(allow_blank=True, trim_whitespace=False),
                                 required=False, help_text=help_text)


class WorkloadSubmitSerializer(serializers.Serializer):
    """A submission. Only shape is checked here; `workload_submit` refuses what could never run and says why."""

    project = ProjectReferenceField()
    kind = serializers.ChoiceField(choices=PORTAL_KIND_CHOICES)
    name = StrictCharField(help_text="A DNS label you will recognise, e.g. resnet-sweep-3.")
    image = StrictCharField(help_text="Container image, e.g. nvcr.io/nvidia/pytorch:24.05-py3.")
    framework = serializers.ChoiceField(
        choices=Framework.choices, required=False,
        help_text="Training: none (default; an Indexed Job the portal wires for torchrun with MASTER_ADDR, RANK...), "
                  "pytorch (a Kubeflow Trainer TrainJob on the torch runtime, or a JobSet where the cluster has no "
                  "Trainer; torchrun's PET_* variables set, one process per GPU, `pods` nodes) or ray (a RayJob: a "
                  "head and `pods` workers with `gpus` each, running `ray_entrypoint`).")
    ray_version = StrictCharField(required=False, allow_blank=True, max_length=20,
                                  help_text=f"Ray: the Ray version in the image, e.g. {DEFAULT_RAY_VERSION} (the "
                                            "default).")
    ray_entrypoint = StrictCharField(required=False, allow_blank=True, max_length=MAX_ENTRYPOINT,
                                     help_text="Ray (required): the job's command, e.g. python train.py --epochs 3.")
    ray_working_dir = StrictCharField(required=False, allow_blank=True, max_length=MAX_WORKING_DIR,
                                      help_text="Ray: the runtime environment's working_dir, a path in the image or a "
                                                "zip's URI; default: none.")
    command = _strings("Entrypoint, e.g. [\"python\", \"train.py\"]; empty keeps the image's.")
    args = _strings("Arguments to the command.")
    env = EnvField(required=False)
    node_pool = serializers.SlugRelatedField(slug_field="slug", queryset=NodePool.objects.all(),
                                             help_text="Node pool slug, e.g. h100.")
    gpus = GpusField(help_text="GPU units per pod; 0 with a `gpu_fraction` (and then it may be left out).")
    gpu_fraction = GpuFractionField(required=False, allow_null=True)
    cpu = CpuField(required=False)
    memory = MemoryField(required=False, source="memory_gib")
    pods = AsciiIntegerField(required=False, help_text="Training: pods started together as one gang.")
    completions = AsciiIntegerField(required=False, help_text="Batch: pods that must succeed.")
    parallelism = AsciiIntegerField(required=False, help_text="Batch: pods running at once.")
    priority_class = serializers.SlugRelatedField(
        slug_field="name", queryset=PriorityClass.objects.all(), required=False, allow_null=True,
        help_text="Priority class name; default: the project's default for the preemptibility asked.")
    preemptible = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="Preemptible work may borrow idle quota; non-preemptible work must fit the deserved quota. "
                  "Default: that of the priority class, else true.")
    max_runtime_seconds = AsciiIntegerField(required=False, allow_null=True)
    labels = LabelsSerializer(source="*")
    idle_timeout_minutes = AsciiIntegerField(source="notebook_idle_timeout_minutes", required=False,
                                                    allow_null=True, help_text="Notebook: stop after this idle time.")
    port = AsciiIntegerField(source="notebook_port", required=False, allow_null=True,
                                    help_text="Notebook: the port Jupyter listens on (default 8888).")
    shm = MemoryField(required=False, allow_null=True, source="shm_gib",
                      help_text='Shared memory (/dev/shm, in RAM, counted in the memory), e.g. "8Gi"; default: the '
                                "container's 64 MiB.")
    data_sources = serializers.ListField(
        child=StrictCharField(max_length=40), required=False, max_length=32,
        help_text="Names of the project's data sources to mount (GET /api/v1/data-sources/ is not needed: the "
                  "project's admins tell you their names; the submit page lists them).")
    credentials = serializers.ListField(
        child=StrictCharField(max_length=40), required=False, max_length=32,
        help_text="Names of your credentials in the project, passed as environment variables by reference.")
    resubmitted_from = ScopedPrimaryKeyRelatedField(
        scope=workloads_for, queryset=Workload.objects.all(), required=False, allow_null=True,
        help_text="The id of an earlier workload this one submits again (recorded for its history).")

    NAMED = ("data_sources", "credentials")

    def resolve_named(self, values: dict[str, Any]) -> dict[str, list[str]]:
        """Data sources and credentials by name, looked up in the project given (credentials: the caller's own);
        replaces the names in `values` with the rows, returns a message per name not found."""
        errors: dict[str, list[str]] = {}
        project = values.get("project")
        user = self.context["request"].user
        for key in self.NAMED:
            names = values.get(key)
            if names is None:
                continue
            if project is None:
                values.pop(key)
                continue
            rows: dict[str, Any] = {
                row.name: row for row in (DataSource.objects.filter(project=project, name__in=names)
                                          if key == "data_sources" else
                                          Credential.objects.filter(project=project, owner=user, name__in=names,
                                                                    deleted_at=None).defer("sealed"))}
            missing = [name for name in names if name not in rows]
            if missing:
                what = "data source" if key == "data_sources" else "credential of yours"
                errors[key] = [f"No {what} called {name!r} in {project.slug}." for name in missing]
                values.pop(key)
            else:
                values[key] = [rows[name] for name in dict.fromkeys(names)]
        return errors

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if errors := self.resolve_named(attrs):
            raise serializers.ValidationError(errors)
        return attrs

    def known_values(self) -> tuple[dict[str, Any], set[str]]:
        """After a failed `is_valid()`: the validated values of the fields that passed their own checks (as
        `validated_data` would hold them) and the service's names of those that did not, for
        `services.workload_check`, so one 400 carries every field's messages."""
        known: dict[str, Any] = {}
        unknown: set[str] = set()
        data = self.initial_data if isinstance(self.initial_data, Mapping) else {}
        for field in self._writable_fields:
            children = field.fields.values() if isinstance(field, serializers.Serializer) else [field]
            sources = {child.source for child in children if child.source}
            try:
                if field.field_name in self.errors:
                    raise serializers.ValidationError("failed")
                self.set_value(known, field.source_attrs, field.run_validation(field.get_value(data)))
            except serializers.ValidationError:
                unknown.update(sources)
            except SkipField:
                pass
        self.named_errors = self.resolve_named(known)
        unknown.update(self.named_errors)
        return known, unknown

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        # A misspelt optional field ("preemtible") must not be silently dropped: it would change what runs.
        # Form posts (browsable API) carry extra keys such as the CSRF token and are not checked.
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, Mapping) and not isinstance(
            data, QueryDict) else []
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        if errors := nul_errors(data, self.fields):
            raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


@extend_schema_field({
    "oneOf": [
        {"type": "string", "minLength": 1, "maxLength": MAX_MANIFEST_BYTES,
         "description": f"YAML or JSON text, at most {MAX_MANIFEST_BYTES // 1024} KiB in UTF-8."},
        {"type": "object", "additionalProperties": True, "description": "The object itself (JSON)."},
    ],
    "example": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: resnet-sweep-3\nspec:\n  template:\n    spec:\n"
               "      restartPolicy: Never\n      containers:\n      - name: main\n        image: "
               "pytorch/pytorch:2.4.0\n        resources:\n          limits: {nvidia.com/gpu: 1}\n"
               "          requests: {nvidia.com/gpu: 1}\n",
})
class ManifestTextField(serializers.Field):
    """A manifest's YAML or JSON text; a JSON object is taken as the object itself (sent back as its JSON text)."""

    default_error_messages = {"invalid": "Give the manifest's YAML or JSON text (or the object itself)."}

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, Mapping):
            return json.dumps(data)
        if not isinstance(data, str):
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class ManifestSubmitSerializer(serializers.Serializer):
    """A Kubernetes manifest of any kind the portal observes, with where and how it runs. Only shape is checked
    here; `services.workload_manifest_validate` checks the manifest itself and the quota and says why."""

    project = ProjectReferenceField()
    kind = serializers.ChoiceField(choices=["manifest"])
    manifest = ManifestTextField(help_text=(
        "The Kubernetes object to submit: its YAML or JSON text (one document, no anchors or aliases), or the object "
        "itself. Its apiVersion and kind are one of those the portal submits ("
        + ", ".join(f"{entry.api_version} {name}" for name, entry in sorted(MANIFEST_KINDS.items()))
        + "); leave out its namespace, queue and the portal's labels: the portal sets them."))
    node_pool = serializers.SlugRelatedField(slug_field="slug", queryset=NodePool.objects.all(),
                                             help_text="Node pool slug, e.g. h100.")
    priority_class = serializers.SlugRelatedField(
        slug_field="name", queryset=PriorityClass.objects.all(), required=False, allow_null=True,
        help_text="Priority class name; default: the project's default for the preemptibility asked.")
    preemptible = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="Preemptible work may borrow idle quota; non-preemptible work must fit the deserved quota. "
                  "Default: that of the priority class, else true.")
    max_runtime_seconds = AsciiIntegerField(required=False, allow_null=True,
                                            help_text="Seconds before Kueue stops it (on a KAI pool, Kubernetes' "
                                                      "activeDeadlineSeconds).")
    resubmitted_from = ScopedPrimaryKeyRelatedField(
        scope=workloads_for, queryset=Workload.objects.all(), required=False, allow_null=True,
        help_text="The id of an earlier workload this one submits again (recorded for its history).")
    labels = LabelsSerializer(source="*")

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, Mapping) and not isinstance(
            data, QueryDict) else []
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        if errors := nul_errors(data, self.fields):
            raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class WorkloadDryRunSerializer(serializers.Serializer):
    """What a submission would be (`?dry_run=true`): checked as a submission is, nothing recorded or created."""

    dry_run = serializers.SerializerMethodField(help_text="Always true: nothing was submitted.")
    kind = serializers.CharField(read_only=True, help_text="training, notebook, batch, or a manifest's kind (jobset, "
                                                           "pytorchjob, ...).")
    api_version = serializers.CharField(source="object_api_version", read_only=True,
                                        help_text="A manifest's apiVersion; empty for the other kinds.")
    name = serializers.CharField(read_only=True)
    project = serializers.CharField(source="project.slug", read_only=True)
    node_pool = serializers.CharField(source="node_pool.slug", read_only=True)
    queue = serializers.CharField(source="queue_name", read_only=True,
                                  help_text="The project's local queue it would wait in.")
    priority_class = serializers.CharField(source="priority_class.name", read_only=True)
    preemptible = serializers.BooleanField(read_only=True)
    gpu_units = serializers.IntegerField(read_only=True, help_text="GPU units of the pool it would hold, all pods "
                                                                   "(whole GPUs: 0 for a fraction of one).")
    gpu_fraction = serializers.FloatField(read_only=True, allow_null=True, help_text=(
        "The share of one GPU its single pod would hold on a KAI pool (e.g. 0.5); null: whole GPUs."))
    pods = serializers.IntegerField(source="pod_count", read_only=True, help_text="Pods that would run at once.")
    image = serializers.CharField(read_only=True)

    def get_dry_run(self, workload: Any) -> bool:
        return True


class WorkloadEventSerializer(serializers.Serializer):
    """One status transition: {at, from, to, reason, message, actor}."""

    def get_fields(self) -> dict[str, serializers.Field]:
        return {
            "at": serializers.DateTimeField(read_only=True),
            "from": serializers.CharField(source="from_status", read_only=True),
            "to": serializers.CharField(source="to_status", read_only=True),
            "reason": serializers.CharField(read_only=True),
            "message": serializers.CharField(read_only=True),
            "actor": serializers.CharField(source="actor.username", read_only=True, allow_null=True,
                                           help_text="Who caused it; null for the cluster or the portal itself."),
        }


class WorkloadLabelsSerializer(serializers.Serializer):
    model = StrictCharField(source="model_label", read_only=True)
    data_class = serializers.CharField(read_only=True)


class ShareSerializer(serializers.Serializer):
    project = serializers.CharField(allow_null=True, help_text="The project's name; null for projects you may not "
                                                               "see (summed into one row, \"others\").")
    units = serializers.FloatField(help_text="GPU units of the pool.")


class PeerSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="Null (with name and project) when you may not see it.")
    name = serializers.CharField(allow_null=True)
    project = serializers.CharField(allow_null=True)


def _units(help_text: str) -> serializers.FloatField:
    return serializers.FloatField(allow_null=True, help_text=f"{help_text} (GPU units; null when unknown).")


class WaitingNumbersSerializer(serializers.Serializer):
    """The numbers behind the sentence; the keys a reason does not use are absent or null."""

    requested = serializers.FloatField(help_text="GPU units it needs at once (pods x GPUs per pod; a share of one "
                                                 "card on a KAI pool as that share, 0.5).")
    pool = serializers.CharField(help_text="The node pool's slug.")
    pool_name = serializers.CharField()
    pods = serializers.IntegerField(help_text="Pods admitted together (a gang for multi-pod training).")
    gpus_per_pod = serializers.IntegerField()
    preemptible = serializers.BooleanField()
    position = serializers.IntegerField(allow_null=True, help_text="0-based position in its LocalQueue, as Kueue's "
                                                                   "visibility API counts (0 = next in line; pages, "
                                                                   "the CLI and e-mails show it plus one: #1).")
    ahead = serializers.IntegerField(allow_null=True, help_text="Workloads ahead of it in its queue.")
    available = _units("Free to its queue now, by Kueue's cohort arithmetic")
    more_needed = _units("Units that must free up before it fits (Kueue's \"N more needed\")")
    deserved = serializers.IntegerField(allow_null=True, help_text="The project's deserved quota on the pool.")
    limit = serializers.IntegerField(allow_null=True, help_text="The project's limit on the pool; null: unlimited.")
    project_used = _units("In use by the project on the pool")
    queue_used = _units("In use in its own ClusterQueue (guaranteed for non-preemptible work)")
    department = serializers.CharField(allow_null=True)
    department_deserved = serializers.IntegerField(allow_null=True)
    department_limit = serializers.IntegerField(allow_null=True, help_text="Null: unlimited.")
    department_used = _units("In use by the department's projects on the pool")
    pool_capacity = serializers.IntegerField(allow_null=True)
    pool_used = _units("In use on the whole pool")
    pool_idle = _units("Idle on the whole pool")
    kueue_reason = serializers.CharField(help_text="Kueue's, KAI Scheduler's on a KAI pool (or the portal's) "
                                                   "reason on the workload.")
    pool_nodes = serializers.IntegerField(allow_null=True, help_text="A gang waiting for admission: the pool's "
                                                                     "ready, schedulable nodes (null: unknown).")
    nodes_hosting_a_pod = serializers.IntegerField(allow_null=True, help_text="A gang waiting for admission: how "
                                                   "many of them have allocatable units for one of its pods (what "
                                                   "they hold now is not counted).")
    holders = ShareSerializer(many=True, required=False, help_text="pool_full: who holds the pool; "
                                                                   "department_limit: the department's projects.")
    held_back = serializers.FloatField(allow_null=True, required=False, help_text=(
        "not_lendable: idle units kept by projects that do not lend (GPU units; absent for other reasons)."))
    held_back_by = ShareSerializer(many=True, required=False)
    held_back_at = serializers.ChoiceField(choices=["project", "department", "pool"], required=False,
                                           help_text="The level of the cohort tree where the lending limit bites.")
    victims = PeerSerializer(many=True, required=False, help_text="preempting: the workloads being preempted that "
                                                                   "you may see.")
    hidden_victims = serializers.IntegerField(required=False, help_text="preempting: those you may not see.")
    preemptor = PeerSerializer(allow_null=True, required=False, help_text="Preempted or requeued: who took the GPUs "
                                                                          "(null: a workload the portal does not "
                                                                          "know).")
    preemption_reason = serializers.CharField(required=False, help_text="Preempted or requeued: Kueue's reason for "
                                              "its last preemption (InClusterQueue, InCohortReclamation, "
                                              "InCohortFairSharing, InCohortReclaimWhileBorrowing), or KAI "
                                              "Scheduler's on a KAI pool (PreemptionByScheduler).")
    preempted_at = serializers.DateTimeField(required=False, allow_null=True,
                                             help_text="Preempted or requeued: when (the cluster's clock).")
    admission_checks = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField(allow_blank=True)), required=False,
        help_text="admission_checks: the Workload's admission checks not Ready yet (name, state: Pending, Retry or "
                  "Rejected, and the check controller's message).")
    change = serializers.CharField(required=False, help_text="never_fits / no_quota: what to change (request, "
                                                             "preemptible, project_limit, department_limit, "
                                                             "not_lendable, quota).")


class WaitingSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(
        choices=list(REASONS), help_text="Why it waits:\n" + "\n".join(f"- `{code}`: {text}"
                                                                         for code, text in REASONS.items()))
    sentence = serializers.CharField(help_text="The cause in one or two sentences, with the numbers.")
    headline = serializers.CharField(help_text="The short form the status line shows (same numbers).")
    numbers = WaitingNumbersSerializer()
    preemption = serializers.CharField(allow_null=True, help_text="Preempted or requeued: its last preemption in one "
                                                                  "plain sentence (when, by which workload as far as "
                                                                  "you may see it, why); null otherwise.")


class ForecastSerializer(serializers.Serializer):
    earliest = serializers.DateTimeField(allow_null=True, help_text="Earliest start the replay gives (all ends early).")
    likely = serializers.DateTimeField(allow_null=True, help_text="Likely start (every end at its likely time).")
    latest = serializers.DateTimeField(allow_null=True, help_text="Latest start (all ends late).")
    basis = serializers.ChoiceField(choices=ForecastBasis.choices, help_text=(
        "Where the ends it waits for come from: starts_now, max_runtime, history (similar runs), mixed; none when "
        "it cannot estimate."))
    reason = serializers.CharField(allow_null=True, help_text=(
        "Why it cannot estimate (no_runtime, never_fits, queue_stopped, no_queue, beyond_horizon); null otherwise."))
    message = serializers.CharField(allow_null=True, help_text="The reason in plain words; null otherwise.")
    computed_at = serializers.DateTimeField()
    summary = serializers.CharField(help_text='As the pages say it: "likely in 30 min (25-40 min)".')


class WorkloadUtilisationSerializer(serializers.ModelSerializer):
    idle = serializers.SerializerMethodField(help_text="Flagged as holding GPUs it does not use (the admin's policy).")

    class Meta:
        model = WorkloadUtilisation
        fields = ["mean_percent", "last_percent", "peak_memory_mib", "samples", "idle", "idle_since",
                  "idle_flagged_at", "updated_at"]
        read_only_fields = fields

    def get_idle(self, measured: WorkloadUtilisation) -> bool:
        return measured.idle_flagged_at is not None


class ReplicaUtilisationSerializer(serializers.Serializer):
    pod = serializers.CharField(help_text="The pod's name.")
    mean_percent = serializers.FloatField(help_text="Its mean GPU utilisation over its samples, 0-100.")
    last_percent = serializers.FloatField(help_text="Its last sample's GPU utilisation, 0-100.")
    samples = serializers.IntegerField()
    last_at = serializers.SerializerMethodField(help_text="When it was last measured.")

    def get_last_at(self, replica: dict[str, Any]) -> datetime:
        return datetime.fromtimestamp(replica["last_at"], tz=UTC)


class WorkloadUtilisationDetailSerializer(WorkloadUtilisationSerializer):
    replicas = ReplicaUtilisationSerializer(many=True, read_only=True, help_text=(
        "An inference service's figures per replica (each pod; a multi-node replica's pods each), beside the mean "
        "over them, for the pods measured within the last hour of its measurements; empty for other work."))

    class Meta(WorkloadUtilisationSerializer.Meta):
        fields = [*WorkloadUtilisationSerializer.Meta.fields, "replicas"]
        read_only_fields = fields


# The Kubernetes kind of the object behind each kind of workload (a pod group's Workload stands for its pods; the
# kind of an object of no integration the portal knows is not recorded).
OBJECT_KINDS = {Kind.TRAINING: "Job", Kind.NOTEBOOK: "Job", Kind.BATCH: "Job", Kind.JOB: "Job", Kind.JOBSET: "JobSet",
                Kind.TRAINJOB: "TrainJob", Kind.PYTORCHJOB: "PyTorchJob", Kind.RAYJOB: "RayJob",
                Kind.RAYCLUSTER: "RayCluster", Kind.LEADERWORKERSET: "LeaderWorkerSet", Kind.POD: "Pod",
                Kind.POD_GROUP: "Pod"}
PORTAL_JOB_API_VERSION = "batch/v1"


class ObjectReferenceSerializer(serializers.Serializer):
    apiVersion = serializers.CharField(help_text="e.g. batch/v1, jobset.x-k8s.io/v1alpha2.")
    kind = serializers.CharField(allow_null=True, help_text="Job, JobSet, TrainJob, PyTorchJob, RayJob, RayCluster, "
                                                            "LeaderWorkerSet, Pod (a pod group: its pods) or PodGroup "
                                                            "(a KAI gang); null for a kind the portal does not know.")
    name = serializers.CharField(help_text="Its name in the project's namespace (a pod group: the group's name).")


class PodSetSerializer(serializers.Serializer):
    name = serializers.CharField()
    count = serializers.IntegerField(help_text="Pods of this set.")
    gpus = serializers.IntegerField(help_text="GPU units per pod.")
    cpu = serializers.CharField(help_text="CPU cores per pod, as a decimal string.")
    memory_gib = serializers.CharField(help_text="Memory per pod in GiB, as a decimal string.")


def pod_sets_of(workload: Workload) -> list[dict[str, Any]]:
    """Its pod sets as Kueue declares them: those the watcher read for work from outside, the Job's one set
    (Kueue names it `main`) for the portal's own."""
    if workload.pod_sets:
        return list(workload.pod_sets)
    return [{"name": "main", "count": workload.pod_count, "gpus": workload.gpus, "cpu": str(workload.cpu),
             "memory_gib": str(workload.memory_gib)}]


class WorkloadSerializer(serializers.ModelSerializer):
    """A workload as listed: what was asked and where it stands, and why it waits (the view attaches `explanation`
    to the page's rows in a fixed number of queries, `selectors.annotate_live`)."""

    project: serializers.PrimaryKeyRelatedField[Project] = serializers.PrimaryKeyRelatedField(read_only=True)
    project_slug: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        source="project", slug_field="slug", read_only=True)
    namespace = serializers.CharField(source="cluster_namespace", read_only=True, help_text=(
        "The namespace it runs in: its project's, or for work from outside a namespace admins mapped to the project."))
    owner: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True,
        help_text="The portal user it belongs to; null for work from outside the portal that names no portal user.")
    owner_id = serializers.IntegerField(read_only=True, allow_null=True)
    origin = serializers.ChoiceField(choices=Origin.choices, read_only=True, help_text=(
        "`portal`: submitted in the portal; `outside`: a Kueue workload of the project's namespace submitted some "
        "other way (kubectl, a pipeline, an operator), mirrored by the portal."))
    kind = serializers.ChoiceField(choices=Kind.choices, read_only=True, help_text=(
        "training, notebook or batch for the portal's own forms; for work from outside, the kind of the object Kueue "
        "admits (job, jobset, trainjob, pytorchjob, rayjob, raycluster, leaderworkerset, pod, podgroup, other)."))
    object = serializers.SerializerMethodField(help_text=(
        "The Kubernetes object the workload is: the portal's Job (a multi-pod training on a KAI pool: its PodGroup, "
        "whose pods are <name>-<rank>), or the object from outside; null before the portal has submitted it."))
    submitted_by = serializers.CharField(read_only=True, help_text=(
        "Work from outside: the Kubernetes user (or field manager) that created it, when the cluster says; empty "
        "otherwise."))
    submitter = serializers.SerializerMethodField(help_text="The portal user it is attributed to (username); null "
                                                            "when none is.")
    submitter_label = serializers.CharField(read_only=True, help_text=(
        'Who submitted it, as the pages say it: the username, else "outside the portal (<Kubernetes user>)".'))
    pod_sets = serializers.SerializerMethodField(help_text="Its pod sets as Kueue counts them (the portal's own "
                                                           "work: one set, `main`).")
    node_pool: serializers.SlugRelatedField[NodePool] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    priority_class: serializers.SlugRelatedField[PriorityClass] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True,
        help_text="Null for work from outside that names no portal priority class (`priority` says where it stands).")
    priority = serializers.IntegerField(source="priority_value", read_only=True, help_text=(
        "Its priority in Kueue: its class's value, or what Kueue gave work from outside (0 when nothing set one)."))
    env = serializers.ListField(child=serializers.DictField(child=serializers.CharField()), read_only=True)
    command = serializers.ListField(child=serializers.CharField(), read_only=True)
    args = serializers.ListField(child=serializers.CharField(), read_only=True)
    labels = WorkloadLabelsSerializer(source="*", read_only=True)
    idle_timeout_minutes = serializers.IntegerField(source="notebook_idle_timeout_minutes", read_only=True,
                                                    allow_null=True)
    port = serializers.IntegerField(source="notebook_port", read_only=True, allow_null=True)
    shm = serializers.DecimalField(source="shm_gib", max_digits=8, decimal_places=2, read_only=True, allow_null=True,
                                   help_text="Shared memory in GiB (/dev/shm), null for the container default.")
    data_sources: serializers.SlugRelatedField[DataSource] = serializers.SlugRelatedField(
        slug_field="name", many=True, read_only=True, help_text="Names of the mounted data sources.")
    credentials: serializers.SlugRelatedField[Credential] = serializers.SlugRelatedField(
        slug_field="name", many=True, read_only=True, help_text="Names of the credentials it reads (never values).")
    pod_count = serializers.IntegerField(read_only=True)
    gpu_units = serializers.IntegerField(read_only=True, help_text="Quota units held while admitted (whole GPUs: 0 "
                                                                   "for a fraction of one).")
    gpu_fraction = serializers.FloatField(read_only=True, allow_null=True, help_text=(
        "The share of one GPU its single pod holds on a KAI pool (e.g. 0.5; `gpus` is then 0); null: whole GPUs."))
    queue_name = serializers.SerializerMethodField(help_text=(
        "The project's Kueue LocalQueue, or on a KAI pool the project's KAI Scheduler leaf Queue."))
    stop_requested_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True)
    resubmitted_from: serializers.PrimaryKeyRelatedField[Workload] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True)
    status = serializers.ChoiceField(choices=Status.choices, read_only=True, help_text=(
        "The portal's status. `requeued`: preempted and back in its queue (Kueue's, or KAI Scheduler's on a KAI "
        "pool), until admitted again (`preempted`: its pods are still stopping)."))
    status_reason = serializers.CharField(read_only=True, help_text="Kueue's, KAI Scheduler's on a KAI pool (or the "
                                                                    "portal's) own reason for the status, e.g. "
                                                                    "Pending, InCohortReclamation.")
    explanation = serializers.SerializerMethodField(help_text="Why it waits, in one sentence (`waiting.sentence`); "
                                                              "null unless it waits.")
    explanation_kind = serializers.SerializerMethodField(
        help_text="The coarse kind: quota, pending, preempting, never_fits, misconfigured, stopped_queue; null "
                  "without an explanation. `waiting.reason` is the precise cause.")
    waiting = serializers.SerializerMethodField(
        help_text="Why it waits, for you: the machine-readable `reason` code, the sentence, the status line and the "
                  "numbers (other projects named only where you may see them); null unless it waits. The same in "
                  "the list and the detail.")

    utilisation = serializers.SerializerMethodField(
        help_text="What DCGM measured on its GPUs (the worker reads Prometheus; percentages 0-100): mean and last "
                  "utilisation, peak framebuffer memory, how many samples, and the held-but-idle flag; null until "
                  "something was measured.")
    forecast = serializers.SerializerMethodField(
        help_text="When it is likely to start, from the worker's replay of Kueue's decisions (refreshed when a queue "
                  "changes and every minute); null unless it waits.")

    class Meta:
        model = Workload
        fields = [
            "id", "project", "project_slug", "namespace", "owner", "owner_id", "origin", "kind", "framework", "object",
            "submitted_by", "submitter", "submitter_label", "name", "image", "command", "args", "env", "node_pool",
            "gpus", "gpu_fraction", "cpu", "memory_gib", "pods", "completions", "parallelism", "pod_sets", "pod_count",
            "gpu_units",
            "priority_class", "priority", "preemptible", "queue_name", "max_runtime_seconds", "labels",
            "idle_timeout_minutes", "port", "shm", "data_sources", "credentials", "status", "status_reason",
            "status_message", "job_name", "k8s_uid",
            "created_at", "submitted_at", "admitted_at", "started_at", "finished_at", "last_activity_at",
            "stop_requested_by", "resubmitted_from", "explanation", "explanation_kind", "waiting", "forecast",
            "utilisation",
        ]
        read_only_fields = fields

    @extend_schema_field(ObjectReferenceSerializer(allow_null=True))
    def get_object(self, workload: Workload) -> dict[str, Any] | None:
        if workload.from_outside:
            return {"apiVersion": workload.object_api_version, "kind": OBJECT_KINDS.get(Kind(workload.kind)),
                    "name": workload.object_name}
        if not workload.job_name:
            return None
        if workload.runs_on_framework:
            entry = framework_entry(workload)
            return {"apiVersion": entry.api_version, "kind": entry.name, "name": workload.job_name}
        if workload.kai_gang:
            return {"apiVersion": KAI_POD_GROUP_API_VERSION, "kind": "PodGroup", "name": workload.job_name}
        return {"apiVersion": PORTAL_JOB_API_VERSION, "kind": "Job", "name": workload.job_name}

    def get_queue_name(self, workload: Workload) -> str:
        return workload.kai_queue_name if workload.node_pool.kai else workload.queue_name

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_submitter(self, workload: Workload) -> str | None:
        return workload.owner.username if workload.owner is not None else None

    @extend_schema_field(PodSetSerializer(many=True))
    def get_pod_sets(self, workload: Workload) -> list[dict[str, Any]]:
        return pod_sets_of(workload)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_explanation(self, workload: Workload) -> str | None:
        explanation = getattr(workload, "explanation", None)
        return explanation.sentence if explanation else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_explanation_kind(self, workload: Workload) -> str | None:
        explanation = getattr(workload, "explanation", None)
        return explanation.kind if explanation else None

    @extend_schema_field(WaitingSerializer(allow_null=True))
    def get_waiting(self, workload: Workload) -> dict[str, Any] | None:
        explanation = getattr(workload, "explanation", None)
        if explanation is None:
            return None
        return {"reason": explanation.reason, "sentence": explanation.sentence, "headline": explanation.headline,
                "numbers": explanation.numbers,
                "preemption": explanation.preemption.sentence if explanation.preemption else None}


    @extend_schema_field(WorkloadUtilisationSerializer(allow_null=True))
    def get_utilisation(self, workload: Workload) -> dict[str, Any] | None:
        try:
            measured = workload.utilisation
        except WorkloadUtilisation.DoesNotExist:
            return None
        return WorkloadUtilisationSerializer(measured).data

    @extend_schema_field(ForecastSerializer(allow_null=True))
    def get_forecast(self, workload: Workload) -> dict[str, Any] | None:
        found = workload.start_forecast
        if found is None:
            return None
        return {"earliest": found.earliest, "likely": found.likely, "latest": found.latest, "basis": found.basis,
                "reason": found.reason or None, "message": found.message or None, "computed_at": found.computed_at,
                "summary": found.phrase()}


class QueuePositionSerializer(serializers.Serializer):
    """Kueue's positions, 0-based as its visibility API gives them; what a person reads counts from 1 (README)."""

    local_queue = serializers.IntegerField(help_text="0-based position in the project's LocalQueue (0 = next in "
                                                     "line; pages, the CLI and e-mails show it plus one: #1).")
    cluster_queue = serializers.IntegerField(help_text="0-based position in the ClusterQueue (0 = next in line).")


class AdmissionSerializer(serializers.Serializer):
    cluster_queue = serializers.CharField()
    flavors = serializers.ListField(child=serializers.CharField(), help_text="ResourceFlavors (node pools) assigned.")
    pod_sets = serializers.ListField(child=serializers.DictField(), help_text="Kueue's podSetAssignments.")


class PreemptorSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    project = serializers.CharField()


class PreemptionSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="When the cluster preempted it (its own clock).")
    reason = serializers.CharField(help_text="InClusterQueue, InCohortReclamation, InCohortFairSharing, ...")
    message = serializers.CharField(help_text="Kueue's own message (its UIDs and cohort paths included, the "
                                              "preemptor's only when you may see it).")
    sentence = serializers.CharField(source="note.sentence", help_text="The preemption in one plain sentence: when, "
                                                                      "by which workload (as far as you may see it) "
                                                                      "and why.")
    preemptor = PreemptorSerializer(allow_null=True, help_text="The portal workload that took the GPUs; null when "
                                                               "unknown or not visible to you.")


class ClusterEventSerializer(serializers.Serializer):
    """Kubernetes Events of the workload's objects that say the same thing, counted as one (kubectl describe's
    "x3 over 5m")."""

    type = serializers.CharField(help_text="Normal or Warning.")
    reason = serializers.CharField(help_text="e.g. FailedScheduling, Failed (an image pull), BackOff, Pulled.")
    message = serializers.CharField()
    reported_by = serializers.CharField(source="source", help_text="The component that reported it, e.g. "
                                                                     "default-scheduler, kubelet.")
    count = serializers.IntegerField(help_text="How often it was seen, over every object it was about.")
    first_seen = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()
    objects = serializers.ListField(child=serializers.CharField(), help_text="The objects it was about, as "
                                                                               "Kind/name: Pod/wl-12-x7k2p, ...")


class WorkloadDetailSerializer(WorkloadSerializer):
    """One workload with its history, the Job as submitted and its live queue state.

    The view attaches `explanation` and `preemption_list` (`_with_live_state`).
    """

    events = WorkloadEventSerializer(many=True, read_only=True)
    manifest = serializers.JSONField(read_only=True, allow_null=True)
    queue_position = serializers.SerializerMethodField(help_text="Null unless queued with a position from Kueue.")
    reason = serializers.CharField(source="status_reason", read_only=True, help_text=(
        "Kueue's, KAI Scheduler's on a KAI pool (or the portal's) own reason for the status: the same as "
        "`status_reason`. The portal's machine-readable cause of a wait is `waiting.reason`, with its "
        "`waiting.numbers` (list and detail alike)."))
    message = serializers.CharField(source="status_message", read_only=True, help_text=(
        "Kueue's own message, or KAI Scheduler's on a KAI pool (the same as `status_message`)."))
    admission = serializers.SerializerMethodField(help_text="Null until admitted.")
    preemptions = serializers.SerializerMethodField()
    cluster_events = serializers.SerializerMethodField(help_text=(
        "The Kubernetes events of its pods, its Job (or the object it is) and Kueue's Workload, newest first, the "
        "same event of several objects (or repeated) counted once; kept with the workload, at most 50."))
    connect_url = serializers.SerializerMethodField(help_text=(
        "A running notebook's Connect address (the portal's, as its page links it: open it in a browser signed in "
        "to the portal; it relays to the notebook or sends you on to it with its token). Only for those who may open "
        "it: its owner, or the project's members where the project shares notebooks; null otherwise and for every "
        "other kind or status."))

    class Meta(WorkloadSerializer.Meta):
        fields = [*WorkloadSerializer.Meta.fields, "queue_position", "reason", "message", "admission", "preemptions",
                  "connect_url", "events", "cluster_events", "manifest"]
        read_only_fields = fields

    @extend_schema_field(WorkloadUtilisationDetailSerializer(allow_null=True))
    def get_utilisation(self, workload: Workload) -> dict[str, Any] | None:
        try:
            measured = workload.utilisation
        except WorkloadUtilisation.DoesNotExist:
            return None
        return WorkloadUtilisationDetailSerializer(measured).data

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_connect_url(self, workload: Workload) -> str | None:
        request = self.context.get("request")
        if request is None or workload.kind != Kind.NOTEBOOK or workload.status != Status.RUNNING:
            return None
        if not access.can_connect_notebook(request.user, workload):
            return None
        return str(request.build_absolute_uri(reverse("workloads:connect", args=[workload.pk])))

    @extend_schema_field(QueuePositionSerializer(allow_null=True))
    def get_queue_position(self, workload: Workload) -> dict[str, int | None] | None:
        if workload.status not in QUEUED_STATUSES or workload.queue_position_local is None:
            return None
        return {"local_queue": workload.queue_position_local, "cluster_queue": workload.queue_position_cluster}

    @extend_schema_field(AdmissionSerializer(allow_null=True))
    def get_admission(self, workload: Workload) -> dict[str, Any] | None:
        if not workload.cluster_queue:
            return None
        pod_sets = (workload.admission or {}).get("pod_sets", [])
        flavors = sorted({f for pod_set in pod_sets for f in (pod_set.get("flavors") or {}).values()})
        return {"cluster_queue": workload.cluster_queue, "flavors": flavors, "pod_sets": pod_sets}

    @extend_schema_field(ClusterEventSerializer(many=True))
    def get_cluster_events(self, workload: Workload) -> list[dict[str, Any]]:
        # A workload just submitted has none yet: the view says so instead of asking the database.
        lines = getattr(workload, "cluster_event_lines", None)
        if lines is None:
            lines = cluster_events_of(workload=workload)
        return ClusterEventSerializer(lines, many=True).data  # type: ignore[return-value]

    @extend_schema_field(PreemptionSerializer(many=True))
    def get_preemptions(self, workload: Workload) -> list[dict[str, Any]]:
        # The stubs type Serializer(many=True) as the Serializer (data: ReturnDict); DRF returns a ListSerializer.
        return PreemptionSerializer(getattr(workload, "preemption_list", []), many=True).data  # type: ignore[return-value]
