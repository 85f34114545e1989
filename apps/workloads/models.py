"""Submissions (training, notebook, batch), their mirrored cluster state and their history.

A workload is a row first (status `submitting`); the worker turns it into a Kueue-labelled batch/v1 Job whose name
derives from the row's id, so retries never duplicate it. Status follows docs/architecture.md, The life of a submission.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Value
from django.db.models.functions import Coalesce, NullIf
from django.utils import timezone

from apps.core import kueue_names
from apps.core.models import SealedSecretModel, VersionedModel
from apps.core.scopes import AccessPaths
from apps.org.models import DataSource, NodePool, PriorityClass, Project
from apps.org.validators import validate_dns_label

if TYPE_CHECKING:
    from .explain import Explanation

MAX_GPUS_PER_POD = 64
MAX_PODS = 512
MAX_CPU_PER_POD = 512
MAX_MEMORY_GIB_PER_POD = 4096
MAX_RUNTIME_SECONDS = 30 * 24 * 3600
# What a status's and an event's reason keep of the cluster's (a condition reason may run to 1,024 characters; the
# portal's and Kueue's are short words).
REASON_LENGTH = 100
# A share of one GPU (KAI Scheduler's gpu-fraction annotation): above 0, below 1, in hundredths.
MIN_GPU_FRACTION = Decimal("0.01")
MAX_GPU_FRACTION = Decimal("0.99")


class Kind(models.TextChoices):
    """The portal's three forms, then the kinds of work submitted outside it, named as Kubernetes names them
    (apps/workloads/cluster_kinds.py maps each owner kind of a Kueue Workload to one)."""

    TRAINING = "training", "Training"
    NOTEBOOK = "notebook", "Notebook"
    BATCH = "batch", "Batch"
    INFERENCE = "inference", "Inference service"
    JOB = "job", "Job"
    JOBSET = "jobset", "JobSet"
    TRAINJOB = "trainjob", "TrainJob"
    PYTORCHJOB = "pytorchjob", "PyTorchJob"
    RAYJOB = "rayjob", "RayJob"
    RAYCLUSTER = "raycluster", "RayCluster"
    LEADERWORKERSET = "leaderworkerset", "LeaderWorkerSet"
    POD = "pod", "Pod"
    POD_GROUP = "podgroup", "Pod group"
    OTHER = "other", "Other"


class Framework(models.TextChoices):
    """How a training workload runs (docs/frameworks.md): an Indexed Job the portal wires itself, or the object the
    framework's own operator runs: PyTorch as a Kubeflow Trainer TrainJob (a JobSet where the cluster has no Trainer),
    Ray as a KubeRay RayJob."""

    NONE = "none", "No framework (an Indexed Job)"
    PYTORCH = "pytorch", "PyTorch"
    RAY = "ray", "Ray"


PORTAL_KINDS = (Kind.TRAINING, Kind.NOTEBOOK, Kind.BATCH)
PORTAL_KIND_CHOICES = [(kind.value, kind.label) for kind in PORTAL_KINDS]  # what the forms and templates submit
PORTAL_KIND_VALUES = [kind.value for kind in PORTAL_KINDS]


class Origin(models.TextChoices):
    PORTAL = "portal", "Submitted in the portal"
    OUTSIDE = "outside", "Submitted outside the portal"


OUTSIDE_THE_PORTAL = "outside the portal"


def submitter_text(username: str | None, submitted_by: str) -> str:
    """Who submitted a workload, for a person: the portal user, else who the cluster says, else "outside the
    portal" (`Workload.submitter_label`, and the rows that keep a workload's user and submitter as values)."""
    if username is not None:
        return username
    return f"{OUTSIDE_THE_PORTAL} ({submitted_by})" if submitted_by else OUTSIDE_THE_PORTAL


class Status(models.TextChoices):
    SUBMITTING = "submitting", "Submitting"
    QUEUED = "queued", "Queued"
    ADMITTED = "admitted", "Admitted"
    RUNNING = "running", "Running"
    PREEMPTED = "preempted", "Preempted"
    REQUEUED = "requeued", "Preempted · requeued"
    STOPPING = "stopping", "Stopping"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    STOPPED = "stopped", "Stopped"
    REJECTED = "rejected", "Rejected"
    SUBMIT_FAILED = "submit_failed", "Submit failed"


LIVE_STATUSES = frozenset({Status.SUBMITTING, Status.QUEUED, Status.ADMITTED, Status.RUNNING, Status.PREEMPTED,
                           Status.REQUEUED, Status.STOPPING})
# Waiting in Kueue's queue for admission: queued, or back there after a preemption (`requeued`, its own status until
# Kueue admits it again, so lists and filters can tell it from work that never ran).
QUEUED_STATUSES = frozenset({Status.QUEUED, Status.REQUEUED})
# What Kueue holds waiting (the dashboard's pending demand): queued, requeued, or preempted with its pods stopping.
WAITING_STATUSES = frozenset({*QUEUED_STATUSES, Status.PREEMPTED})
# Preempted and not admitted again yet: its pods going away, or back in the queue.
PREEMPTED_STATUSES = frozenset({Status.PREEMPTED, Status.REQUEUED})
# Workloads holding quota in the cluster right now.
HOLDING_STATUSES = frozenset({Status.ADMITTED, Status.RUNNING})
# Waiting for quota, so given a start forecast (worker/forecast.py): not in Kueue yet, queued, or preempted.
FORECAST_STATUSES = frozenset({Status.SUBMITTING, *WAITING_STATUSES})
FINAL_STATUSES = frozenset({Status.SUCCEEDED, Status.FAILED, Status.STOPPED, Status.REJECTED, Status.SUBMIT_FAILED})


# `Workload.cluster_namespace` in a query: the mapped namespace outside work runs in, else its project's.
CLUSTER_NAMESPACE = Coalesce(NullIf(F("namespace"), Value("")), F("project__namespace"))


class Workload(models.Model):
    """One piece of work in a project and what the cluster did with it: a submission of the portal's, or a Kueue
    Workload that came from outside it (kubectl, a pipeline, an operator), mirrored by the watcher
    (docs/architecture.md, Work submitted outside the portal). Rows from outside have no owner unless the object
    names a portal user, no form fields (image aside), and their pod sets as Kueue declares them."""

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="workloads")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                              related_name="workloads", help_text="Empty for work from outside no user is named on.")
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.PORTAL, db_index=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=40, help_text="A short name you will recognise, e.g. resnet-sweep-3.")
    image = models.CharField(max_length=255)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=list, blank=True, help_text="[{'name': ..., 'value': ...}]")
    node_pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="workloads")
    gpus = models.PositiveSmallIntegerField(validators=[MinValueValidator(0), MaxValueValidator(MAX_GPUS_PER_POD)],
                                            help_text="GPU units per pod (0 with a GPU fraction).")
    gpu_fraction = models.DecimalField(
        max_digits=3, decimal_places=2, null=True, blank=True,
        validators=[MinValueValidator(MIN_GPU_FRACTION), MaxValueValidator(MAX_GPU_FRACTION)],
        help_text="A share of one GPU for a single pod on a KAI pool that shares GPUs (e.g. 0.5); empty: whole GPUs.")
    cpu = models.DecimalField(max_digits=7, decimal_places=3, default=1,
                              validators=[MinValueValidator(0), MaxValueValidator(MAX_CPU_PER_POD)],
                              help_text="CPU cores per pod.")
    memory_gib = models.DecimalField(max_digits=8, decimal_places=2, default=8,
                                     validators=[MinValueValidator(0), MaxValueValidator(MAX_MEMORY_GIB_PER_POD)],
                                     help_text="Memory per pod in GiB.")
    pods = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_PODS)],
                                       help_text="Training: pods started together as one gang.")
    completions = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1),
                                                                     MaxValueValidator(MAX_PODS * 100)])
    parallelism = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1),
                                                                     MaxValueValidator(MAX_PODS)])
    framework = models.CharField(max_length=10, choices=Framework.choices, default=Framework.NONE,
                                 help_text="Training: the framework whose operator runs it.")
    framework_settings = models.JSONField(default=dict, blank=True,
                                          help_text="The framework's own settings, e.g. Ray's version and entrypoint.")
    training_runtime = models.CharField(max_length=253, blank=True, help_text=(
        "PyTorch as a TrainJob: the ClusterTrainingRuntime it runs on, as the cluster had it at submission."))
    priority_class = models.ForeignKey(PriorityClass, on_delete=models.PROTECT, null=True, blank=True,
                                       related_name="workloads",
                                       help_text="Empty for work from outside that names no portal priority class.")
    preemptible = models.BooleanField(default=True)
    max_runtime_seconds = models.PositiveIntegerField(null=True, blank=True,
                                                      validators=[MinValueValidator(60),
                                                                  MaxValueValidator(MAX_RUNTIME_SECONDS)])
    model_label = models.CharField(max_length=63, help_text="Audit label: the model this work trains or serves.")
    data_class = models.CharField(max_length=63, help_text="Audit label: the class of data it reads.")
    notebook_idle_timeout_minutes = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(5), MaxValueValidator(7 * 24 * 60)])
    notebook_port = models.PositiveIntegerField(null=True, blank=True,
                                                validators=[MinValueValidator(1), MaxValueValidator(65535)])
    replicas = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_PODS)],
        help_text="Inference services: copies of the model server behind its Service (each `pods` pods).")
    serving_port = models.PositiveIntegerField(null=True, blank=True,
                                               validators=[MinValueValidator(1), MaxValueValidator(65535)],
                                               help_text="Inference services: the port the model server listens on.")
    ready_replicas = models.PositiveSmallIntegerField(null=True, blank=True,
                                                      help_text="Inference services: ready, as the cluster last said.")
    shm_gib = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True,
                                  validators=[MinValueValidator(0), MaxValueValidator(MAX_MEMORY_GIB_PER_POD)],
                                  help_text="Shared memory (/dev/shm) per pod in GiB, counted in its memory.")
    data_sources = models.ManyToManyField(DataSource, blank=True, related_name="workloads")
    credentials: models.ManyToManyField[Credential, Any] = models.ManyToManyField(
        "Credential", blank=True, related_name="workloads")
    # What the notebook server itself last reported as activity (its /api/status), read by the culler.
    server_activity_at = models.DateTimeField(null=True, blank=True, help_text="On the portal's clock.")
    server_activity_mark = models.CharField(max_length=64, blank=True, help_text="The server's own last_activity, "
                                                                                 "as it last reported it.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.SUBMITTING, db_index=True)
    status_reason = models.CharField(max_length=REASON_LENGTH, blank=True)
    status_message = models.TextField(blank=True)
    job_name = models.CharField(max_length=63, blank=True)
    k8s_uid = models.CharField(max_length=64, blank=True)
    manifest = models.JSONField(null=True, blank=True, help_text="The Job as submitted.")
    submit_claimed_at = models.DateTimeField(null=True, blank=True)
    submit_attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_activity_at = models.DateTimeField(null=True, blank=True)
    # The cluster's view, mirrored by the watcher.
    kueue_name = models.CharField(max_length=253, blank=True, help_text="Kueue's Workload object for the Job.")
    cluster_queue = models.CharField(max_length=253, blank=True)
    admission = models.JSONField(default=dict, blank=True, help_text="Flavors and resource usage per pod set.")
    kueue_conditions = models.JSONField(default=list, blank=True)
    queue_position_local = models.PositiveIntegerField(null=True, blank=True)
    queue_position_cluster = models.PositiveIntegerField(null=True, blank=True)
    positions_at = models.DateTimeField(null=True, blank=True)
    last_preempted_at = models.DateTimeField(null=True, blank=True)
    stop_requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                          blank=True, related_name="+")
    resubmitted_from = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    # A repeat of one submission (a submit form posted twice, an API call retried with its Idempotency-Key) finds
    # the first workload by this key, unique per owner; the digest of the API request tells a retry from a misuse.
    submission_key = models.CharField(max_length=120, blank=True, default="", editable=False)
    submission_digest = models.CharField(max_length=64, blank=True, editable=False)
    # Work from outside the portal: the object Kueue's Workload belongs to, who submitted it as far as the cluster
    # says, and its pod sets (name, count, GPUs, CPU cores and memory GiB per pod) with their GPU units summed.
    kueue_uid = models.CharField(max_length=64, blank=True, help_text="Kueue's Workload uid (outside work's key).")
    object_api_version = models.CharField(max_length=253, blank=True)
    object_name = models.CharField(max_length=253, blank=True)
    submitted_by = models.CharField(max_length=253, blank=True,
                                    help_text="The Kubernetes user or field manager that created it, when known.")
    pod_sets = models.JSONField(default=list, blank=True)
    pod_set_units = models.PositiveIntegerField(null=True, blank=True)
    kueue_priority = models.IntegerField(null=True, blank=True, help_text="The priority Kueue gave it (outside work).")
    namespace = models.CharField(max_length=63, blank=True,
                                 help_text="Where outside work runs when not in its project's own namespace (a "
                                           "namespace mapped to the project); blank: the project's namespace.")

    # Scope paths for apps.accounts.access.restrict: the project's viewers, and always the owner.
    access_paths: ClassVar[AccessPaths] = AccessPaths(
        departments=("project__department_id",), project="project_id", owner="owner"
    )

    # Not columns: set on the rows a page or the API shows (selectors.annotate_live sets the first three; the list
    # page sets may_stop; the API's detail sets preemption_list).
    explanation: Explanation | None
    position_label: str
    runtime: timedelta | None
    may_stop: bool
    preemption_list: list[dict[str, Any]]
    cluster_event_lines: list[Any]  # the API's answer to a new submission: none yet, not read
    # Not columns: what a draft (services._workload_draft) will attach once saved.
    chosen_data_sources: list[DataSource]
    chosen_credentials: list[Credential]
    idle_since: datetime  # selectors.notebooks_idle: the last sign of use

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "status"]),
            models.Index(fields=["owner", "status"]),
            models.Index(fields=["node_pool", "status"]),
            # The quota dashboard's pending demand sums the waiting rows of whole departments on every load: read
            # from this index alone, not from the table's pages.
            models.Index(fields=["project", "node_pool"], include=["kind", "gpus", "pods", "parallelism", "completions",
                                                                   "pod_set_units", "id"],
                         condition=models.Q(status__in=sorted(WAITING_STATUSES)), name="workload_waiting"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["owner", "submission_key"], condition=~models.Q(submission_key=""),
                                    name="workload_unique_submission_key"),
            models.UniqueConstraint(fields=["kueue_uid"], condition=~models.Q(kueue_uid=""),
                                    name="workload_unique_kueue_uid"),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.name}" if self.project_id else self.name

    @classmethod
    def reference_note(cls, rows: models.QuerySet[Workload]) -> str:
        """For a refused delete of what these rows use (apps.core.services.references_in_use)."""
        live = rows.filter(status__in=LIVE_STATUSES).count()
        return f"{live} not finished" if live else "all finished, kept for history"

    @property
    def cluster_namespace(self) -> str:
        """The namespace the work runs in: the project's own, or the mapped one outside work was found in."""
        return self.namespace or self.project.namespace

    @property
    def pod_count(self) -> int:
        """Pods that run at once: the whole gang, the batch parallelism, one notebook, every pod of an inference
        service's replicas, or every pod of the pod sets of work from outside."""
        if self.kind == Kind.INFERENCE and self.origin == Origin.PORTAL:
            return self.replicas * self.pods
        if self.origin == Origin.OUTSIDE or self.kind not in PORTAL_KINDS:  # outside, or a manifest's pod sets
            return sum(int(pod_set.get("count") or 0) for pod_set in self.pod_sets) or 1
        if self.kind == Kind.TRAINING:
            return self.pods
        if self.kind == Kind.BATCH:
            return min(self.parallelism, self.completions)
        return 1

    @property
    def pods_over_life(self) -> int:
        """Pods the workload runs from start to end: every completion of a batch run (one after another when its
        parallelism is lower), else the pods that run at once."""
        if self.origin != Origin.OUTSIDE and self.kind == Kind.BATCH:
            return max(self.completions, self.pod_count)
        return self.pod_count

    @property
    def gpu_units(self) -> int:
        """Quota units the workload holds while admitted."""
        if self.pod_set_units is not None:
            return self.pod_set_units
        return self.gpus * self.pod_count

    @property
    def gpu_amount(self) -> Decimal:
        """GPUs held while running, a fraction of one included: what the pages show (`gpus_text`)."""
        if self.gpu_fraction is not None:
            return self.gpu_fraction
        return Decimal(self.gpu_units)

    @property
    def gpu_amount_text(self) -> str:
        """`gpu_amount` as the pages print it: 0.5, 4."""
        return format(self.gpu_amount.normalize(), "f")

    @property
    def gpus_text(self) -> str:
        """The GPUs it asks for as the pages say it: "0.5 GPU" for a fraction, else whole units per pod."""
        if self.gpu_fraction is not None:
            return self.gpu_amount_words
        return f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}"

    @property
    def gpu_amount_words(self) -> str:
        """All it holds while running, in a sentence: "0.5 GPU" for a share of a card, "1 GPU", "4 GPUs"."""
        if self.gpu_fraction is not None:
            return f"{self.gpu_amount_text} GPU"
        return f"{self.gpu_units} GPU{'s' if self.gpu_units != 1 else ''}"

    @property
    def gang_shape(self) -> tuple[int, int]:
        """(GPU units per pod, pods that hold them), as the forecast's replay and the wait explanation place it: the
        form's numbers, or for work from outside its GPU pods with its units shared out (exact for the usual one
        GPU pod set; a mixed gang keeps its total)."""
        if self.origin != Origin.OUTSIDE and self.kind in PORTAL_KINDS:
            return self.gpus, self.pod_count
        pods = sum(int(pod_set.get("count") or 0) for pod_set in self.pod_sets if pod_set.get("gpus")) or 1
        return -(-self.gpu_units // pods), pods

    @property
    def priority_value(self) -> int:
        """Its priority in Kueue: its class's value, or what Kueue gave work from outside (0 when nothing set one)."""
        if self.priority_class is not None:
            return self.priority_class.value
        return self.kueue_priority or 0

    @property
    def runs_on_framework(self) -> bool:
        """A training run by its framework's operator (a TrainJob, JobSet or RayJob), not the portal's own Job."""
        return self.kind == Kind.TRAINING and self.framework != Framework.NONE

    @property
    def kai_gang(self) -> bool:
        """A multi-pod training on a KAI pool: the portal's PodGroup and ownerless pods, not a Job (KAI gangs no Job's
        pods; docs/architecture.md)."""
        return self.node_pool.kai and self.kind == Kind.TRAINING and self.pods > 1 and not self.runs_on_framework

    @property
    def from_outside(self) -> bool:
        return self.origin == Origin.OUTSIDE

    @property
    def submitter_label(self) -> str:
        """Who submitted it, for a person: the portal user, else who the cluster says, else "outside the portal"."""
        return submitter_text(self.owner.username if self.owner is not None else None, self.submitted_by)

    @property
    def is_live(self) -> bool:
        return self.status in LIVE_STATUSES

    @property
    def start_forecast(self) -> WorkloadForecast | None:
        """The worker's start forecast while it waits (join it with `select_related("forecast")`); else None."""
        if self.status not in FORECAST_STATUSES:
            return None
        try:
            return self.forecast
        except WorkloadForecast.DoesNotExist:
            return None

    @property
    def queue_name(self) -> str:
        return kueue_names.local_queue(self.node_pool.slug, guaranteed=not self.preemptible)

    @property
    def kai_queue_name(self) -> str:
        """KAI Scheduler's leaf Queue of the project on the pool (worker/kai_objects.py), for work on a KAI pool."""
        return kueue_names.names().kai_project_queue(self.project.slug, self.node_pool.slug)

    @property
    def cluster_queue_name(self) -> str:
        """The ClusterQueue its LocalQueue points at (docs/architecture.md, The organisation in Kueue), admitted or
        not."""
        return self.cluster_queue or kueue_names.names().cluster_queue(
            self.project.slug, self.node_pool.slug, guaranteed=not self.preemptible)


class WorkloadTally(models.Model):
    """How many of a project's workloads on a pool are in one status, and the GPUs they ask for in hundredths of a
    unit (as `selectors.requested_hundredths` counts them: a share of a card on a KAI pool is its share, and whole
    units are exact integers on SQLite too): the figures pages would otherwise count from every row (a department's
    waiting demand, a project's queue length), kept up to date by the database (docs/architecture.md, Figures kept
    rather than counted).

    Nothing in Python writes a workload's tally: triggers on the workload table append every change of a row's
    status, project, pool or size to `WorkloadTallyChange` in the writer's own transaction, whoever writes (a
    transition, the bulk mirror of outside work, a data migration, a test), and `workload_tallies_fold` adds
    those changes up into these rows. A tally is the row here plus its changes not folded yet."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    node_pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=20, choices=Status.choices)
    workloads = models.BigIntegerField(default=0)
    unit_hundredths = models.BigIntegerField(default=0)
    # How many changes have been folded in: with those not folded yet, a count that grows with every change and
    # never goes back, for the poll markers (a workload replaced by another of the same size changes it too).
    changes = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "node_pool", "status"], name="workload_tally_key")]

    def __str__(self) -> str:
        return (f"project {self.project_id} pool {self.node_pool_id} {self.status}: {self.workloads}"
                f" ({self.unit_hundredths / 100:g})")


class WorkloadTallyChange(models.Model):
    """One change to a tally not folded into it yet: +1 and a row's hundredths of a unit where it arrived, -1 and
    them where it left. Only inserted, by the triggers (the `workload_tallies` migrations), so writers of different
    workloads never wait for each other here; `workload_tallies_fold` deletes what it folds."""

    id = models.BigAutoField(primary_key=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    node_pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="+", db_index=False)
    status = models.CharField(max_length=20, choices=Status.choices)
    workloads = models.BigIntegerField()
    unit_hundredths = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["project", "node_pool"], name="workload_tally_change_key")]

    def __str__(self) -> str:
        return (f"project {self.project_id} pool {self.node_pool_id} {self.status}: {self.workloads:+}"
                f" ({self.unit_hundredths / 100:+g})")


class WorkloadEvent(models.Model):
    """One status transition or notable happening: the history users and auditors read."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(db_index=True)
    from_status = models.CharField(max_length=20, blank=True)
    to_status = models.CharField(max_length=20, blank=True)
    reason = models.CharField(max_length=REASON_LENGTH, blank=True)
    message = models.TextField(blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+")
    details = models.JSONField(default=dict, blank=True, help_text="e.g. the preemptor of a preemption.")
    cluster_at = models.DateTimeField(null=True, blank=True,
                                      help_text="When the cluster says it happened (its own clock).")

    # Not a column: selectors.workload_history sets it on preemption events (the preemption it records).
    preemption: dict[str, Any] | None

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.from_status}->{self.to_status} {self.reason}"


class WorkloadClusterEvent(models.Model):
    """A Kubernetes Event about one of the workload's objects (its pods, its Job or owner, Kueue's Workload) as the
    watcher mirrored it: image pulls that fail, back-offs, FailedScheduling, evictions. One row per Event object
    (its uid); the API server counts repeats of one (count, first and last seen), as kubectl describe shows them.
    At most CLUSTER_EVENTS_KEPT per workload are kept, the most recently seen (the cluster forgets them after an
    hour; the page keeps them with the workload)."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="cluster_events")
    uid = models.CharField(max_length=64, unique=True, help_text="The Event object's uid.")
    object_kind = models.CharField(max_length=63, help_text="The kind of the object it is about: Pod, Job, ...")
    object_name = models.CharField(max_length=253)
    type = models.CharField(max_length=16, help_text="Normal or Warning.")
    reason = models.CharField(max_length=128)
    message = models.TextField(blank=True)
    source = models.CharField(max_length=253, blank=True, help_text="The component that reported it.")
    count = models.PositiveIntegerField(default=1)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["-last_seen", "-id"]
        indexes = [models.Index(fields=["workload", "-last_seen"], name="workload_cluster_event_recent")]

    def __str__(self) -> str:
        return f"{self.object_kind}/{self.object_name} {self.type} {self.reason} x{self.count}"


CLUSTER_EVENTS_KEPT = 50  # per workload, the most recently seen


class WorkloadTemplate(VersionedModel):
    """An admin-authored preset that prefills a submission form."""

    name = models.CharField(max_length=80, unique=True)
    description = models.CharField(max_length=250, blank=True)
    kind = models.CharField(max_length=20, choices=PORTAL_KIND_CHOICES)
    values = models.JSONField(default=dict, help_text="Form field -> value, e.g. {'image': ..., 'gpus': 2}.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "name"]

    def __str__(self) -> str:
        return self.name


class Credential(SealedSecretModel):
    """A user's key/value secret (a W&B key, S3 keys) in one project: a Kubernetes Secret in its namespace that the
    user's workloads read as environment variables by reference (envFrom). The portal keeps its name and keys only;
    the values go to the cluster sealed (apps.core.sealed) and are cleared once the worker has written the Secret."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="credentials")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="credentials")
    name = models.CharField(max_length=40, validators=[validate_dns_label], help_text="e.g. wandb or s3-scratch.")
    keys = models.JSONField(default=list, help_text="The variable names it holds (never their values).")

    access_paths: ClassVar[AccessPaths] = AccessPaths(
        departments=("project__department_id",), project="project_id", owner="owner"
    )

    class Meta:
        ordering = ["project__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["owner", "project", "name"],
                                               name="credential_unique_name_per_owner_project",
                                               violation_error_message="You have a credential by that name in this "
                                                                       "project already.")]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.name}" if self.project_id else self.name

    @property
    def secret_name(self) -> str:
        return f"portal-cred-{self.pk}"


class WorkloadLogTail(models.Model):
    """The last lines of one pod's log, fetched by the worker (the web process never talks to Kubernetes)."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="log_tails")
    pod = models.CharField(max_length=253)
    text = models.TextField(blank=True)
    error = models.CharField(max_length=500, blank=True, help_text="Why the log could not be read, if it could not.")
    exit_code = models.IntegerField(null=True, blank=True,
                                    help_text="The pod's main container's exit code, once it has terminated.")
    exit_reason = models.CharField(max_length=100, blank=True,
                                   help_text="Kubernetes' word for that termination: Completed, Error, OOMKilled ...")
    fetched_at = models.DateTimeField()

    class Meta:
        ordering = ["pod"]
        constraints = [models.UniqueConstraint(fields=["workload", "pod"], name="workloadlogtail_unique_pod")]

    def __str__(self) -> str:
        return f"{self.workload_id}/{self.pod}"


class ForecastBasis(models.TextChoices):
    """Where the expected ends the replay used came from (the work ahead of it and, for those behind, its own)."""

    STARTS_NOW = "starts_now", "room for it now"
    MAX_RUNTIME = "max_runtime", "max runtimes"
    HISTORY = "history", "history of similar work"
    MIXED = "mixed", "max runtimes and history of similar work"
    NONE = "none", "cannot estimate"


class ForecastReason(models.TextChoices):
    """Why a waiting workload has no estimate."""

    NO_RUNTIME = "no_runtime", "work it waits for has no max runtime and no history of similar runs"
    NEVER_FITS = "never_fits", "it can never fit as submitted"
    QUEUE_STOPPED = "queue_stopped", "its queue is stopped"
    NO_QUEUE = "no_queue", "its queue does not exist"
    BEYOND_HORIZON = "beyond_horizon", "not within the next 7 days"
    KAI_POOL = "kai_pool", "no forecast on KAI pools"


class WorkloadForecast(models.Model):
    """The worker's latest start-time estimate for one waiting workload (worker/forecast.py writes every row).

    earliest / likely / latest bound when it gets quota, from replaying Kueue's admission decisions forward (the range
    follows the ends that made room for it, widened by the record of earlier estimates: ForecastRecord). When the
    replay cannot say, the three are empty, basis is `none` and reason says why. Rows exist only for waiting work;
    read them with `select_related("forecast")` or `selectors.forecasts_for`.
    """

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, primary_key=True, related_name="forecast")
    computed_at = models.DateTimeField()
    earliest = models.DateTimeField(null=True, blank=True)
    likely = models.DateTimeField(null=True, blank=True)
    latest = models.DateTimeField(null=True, blank=True)
    basis = models.CharField(max_length=20, choices=ForecastBasis.choices)
    reason = models.CharField(max_length=20, choices=ForecastReason.choices, blank=True)
    message = models.CharField(max_length=300, blank=True, help_text="The reason in plain words, with its numbers.")

    class Meta:
        ordering = ["workload_id"]

    def __str__(self) -> str:
        return f"{self.workload_id}: {self.phrase(now=self.computed_at)}"

    @property
    def estimated(self) -> bool:
        return self.likely is not None

    def phrase(self, *, now: datetime | None = None) -> str:
        """The line pages show, from `now`: "likely in 30 min (25-40 min)", "likely now", "cannot estimate: ...",
        "no forecast on KAI pools"."""
        if self.reason == ForecastReason.KAI_POOL:
            return self.get_reason_display()  # plainly: nothing was tried to estimate
        if self.likely is None or self.earliest is None or self.latest is None:
            return f"cannot estimate: {self.message or self.get_reason_display()}"
        now = now or timezone.now()
        likely = _minutes(self.likely - now)
        if likely <= 0 and _minutes(self.latest - now) <= 0:
            return "likely now"
        low, high = _minutes(self.earliest - now), _minutes(self.latest - now)
        return f"likely in {_duration(likely)} ({_duration(low)}-{_duration(high)})" if high > low else \
            f"likely in {_duration(likely)}"


FORECAST_RECORD_DAYS = 30  # first estimates and their starts older than this go


class ForecastRecord(models.Model):
    """The first estimate the replay made for a workload while it waited, and when it then got quota: the record
    the worker calibrates its ranges on (worker/forecast.py `widening_from`). It keeps the replay's own range, before
    any widening, so the calibration does not feed on itself, and it outlives the wait (WorkloadForecast does not)."""

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, primary_key=True, related_name="+")
    forecast_at = models.DateTimeField()
    earliest = models.DateTimeField()
    likely = models.DateTimeField()
    latest = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True, help_text="When it first got quota after the estimate.")

    class Meta:
        ordering = ["-forecast_at"]
        indexes = [models.Index(fields=["forecast_at"], name="forecastrecord_forecast_at")]

    def __str__(self) -> str:
        return f"{self.workload_id} at {self.forecast_at:%Y-%m-%d %H:%M}"


def _minutes(delta: timedelta) -> int:
    """Whole minutes, rounded up (a start 10 s away reads "1 min"), never negative."""
    return max(0, -int(-delta.total_seconds() // 60))


def _duration(minutes: int) -> str:
    if minutes < 90:
        return f"{minutes} min"
    if minutes < 48 * 60:
        return f"{minutes / 60:.1f} h".replace(".0 h", " h")
    return f"{minutes / 1440:.1f} days".replace(".0 days", " days")
MAX_IDLE_WARNING_MINUTES = 24 * 60


class IdlePolicy(models.Model):
    """The admin's rule for "held but idle": GPUs below `threshold_percent` for `idle_seconds` (one row, pk 1).

    Flagged workloads show it on their page and their owner gets an e-mail and the idle warning; a flagged notebook is
    culled `warning_minutes` later when `cull_notebooks` is on, unless its owner showed activity meanwhile (the
    warning's keep-alive link starts a new idle stretch)."""

    threshold_percent = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Mean GPU utilisation below this percent counts as idle.")
    idle_seconds = models.PositiveIntegerField(
        default=30 * 60, validators=[MinValueValidator(1), MaxValueValidator(7 * 24 * 3600)],
        help_text="How long a workload must stay below the threshold to be flagged.")
    cull_notebooks = models.BooleanField(default=True, help_text="Stop notebooks whose GPUs stay idle this long.")
    warning_minutes = models.PositiveSmallIntegerField(
        default=15, validators=[MaxValueValidator(MAX_IDLE_WARNING_MINUTES)],
        help_text="A flagged notebook's owner is warned this long before it is stopped (0: stopped once flagged).")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"below {self.threshold_percent}% for {self.idle_seconds} s"

    @classmethod
    def current(cls) -> IdlePolicy:
        """The rule in force: the admin's row, or the defaults until an admin saves one (reads never write)."""
        return cls.objects.filter(pk=1).first() or cls(pk=1)

    @property
    def idle_minutes(self) -> float:
        return self.idle_seconds / 60

    @property
    def warning(self) -> timedelta:
        return timedelta(minutes=self.warning_minutes)


class WorkloadUtilisation(models.Model):
    """GPU utilisation of one workload's pods as Prometheus reported it, stored by the worker once a minute.

    `series` is the detail page's chart: [[epoch seconds, mean GPU util %, framebuffer used MiB], ...] over the run,
    at most MAX_POINTS (older points merged pairwise when it grows). `idle_since` is the start of the current stretch
    below the idle policy's threshold; `idle_flagged_at` when that stretch reached the policy's duration.

    `replicas`, for an inference service, each of its pods' own figures beside the mean over them: replicas are
    interchangeable behind one Service, so a replica left idle (or one saturated) by the load balancing hides in the
    mean. [{"pod", "mean_percent", "last_percent", "samples", "last_at" (epoch seconds)}, ...] by pod name, the
    pods measured within REPLICAS_KEPT of its newest sample (a rollout's replaced pods drop out)."""

    MAX_POINTS = 240
    REPLICAS_KEPT = timedelta(hours=1)

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, primary_key=True, related_name="utilisation")
    series = models.JSONField(default=list, blank=True)
    replicas = models.JSONField(default=list, blank=True)
    sampled_until = models.DateTimeField(null=True, blank=True, help_text="The last sample already counted.")
    samples = models.PositiveIntegerField(default=0)
    mean_percent = models.FloatField(null=True, blank=True)
    peak_memory_mib = models.FloatField(null=True, blank=True)
    last_percent = models.FloatField(null=True, blank=True)
    idle_since = models.DateTimeField(null=True, blank=True)
    idle_flagged_at = models.DateTimeField(null=True, blank=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    access_paths: ClassVar[AccessPaths] = AccessPaths(
        departments=("workload__project__department_id",), project="workload__project_id", owner="workload__owner"
    )

    def __str__(self) -> str:
        return f"{self.workload_id}: {self.mean_percent}%"
