"""Submission and template forms: shape only (parsing text into lists, choices the user may pick).

Every rule about what may run lives in `services.workload_check` / `workload_submit`; their refusals land on the
fields here through `apps.core.forms.apply_service_errors`, beside the fields' own errors (all in one answer).
One form class serves the three kinds: fields that do not apply to a kind are dropped in `__init__` (see
KIND_FIELDS), so a template for a kind may only name those fields.
"""

from __future__ import annotations

import json
import shlex
from decimal import Decimal
from typing import Any, cast

import yaml
from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, BadRequest, ValidationError
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from apps.core.actors import Actor
from apps.core.forms import StyledForm, VersionedForm
from apps.core.http import holds_nul, parse_id, reference_lookup
from apps.org.models import DataSource, NodePool, PriorityClass, Project, Quota
from apps.org.validators import validate_dns_label

from . import selectors
from .frameworks import DEFAULT_RAY_VERSION, MAX_ENTRYPOINT, MAX_WORKING_DIR, framework_errors
from .manifests import MAX_MANIFEST_BYTES, submitted_manifest
from .models import (
    MAX_CPU_PER_POD,
    MAX_GPU_FRACTION,
    MAX_GPUS_PER_POD,
    MAX_IDLE_WARNING_MINUTES,
    MAX_MEMORY_GIB_PER_POD,
    MAX_PODS,
    MAX_RUNTIME_SECONDS,
    MIN_GPU_FRACTION,
    PORTAL_KIND_CHOICES,
    Credential,
    Framework,
    Kind,
    Workload,
    WorkloadTemplate,
)
from .validation import template_shape_errors

COMMON_FIELDS = ("project", "name", "image")
SIZE_FIELDS = ("node_pool", "gpus", "gpu_fraction", "cpu", "memory_gib")
POLICY_FIELDS = ("priority_class", "preemptible")
LABEL_FIELDS = ("model_label", "data_class")
ATTACHMENT_FIELDS = ("shm_gib", "data_sources", "credentials")
FRAMEWORK_FIELDS = ("framework", "ray_version", "ray_entrypoint", "ray_working_dir")
# The values the framework's rules read (frameworks.framework_errors).
FRAMEWORK_VALUES = ("command", "args", "env", "ray_version", "ray_entrypoint", "ray_working_dir")
# Chosen by name in templates (a template serves every project: the names are looked up in the submitter's).
NAMED_FIELDS = ("data_sources", "credentials")
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    Kind.TRAINING: (*COMMON_FIELDS, *FRAMEWORK_FIELDS, "command", "args", "env", *SIZE_FIELDS, "pods",
                    *ATTACHMENT_FIELDS,
                    *POLICY_FIELDS, "max_runtime_minutes", *LABEL_FIELDS),
    Kind.BATCH: (*COMMON_FIELDS, "command", "args", "env", *SIZE_FIELDS, "completions", "parallelism",
                 *ATTACHMENT_FIELDS, *POLICY_FIELDS, "max_runtime_minutes", *LABEL_FIELDS),
    Kind.NOTEBOOK: (*COMMON_FIELDS, *SIZE_FIELDS, "notebook_idle_timeout_minutes", "notebook_port",
                    *ATTACHMENT_FIELDS, *POLICY_FIELDS, *LABEL_FIELDS),
}
# Fields a template may not preset: the project is the submitter's choice.
NOT_IN_TEMPLATES = frozenset({"project"})
# Service/model field -> the form field that edits it.
ALIASES = {"max_runtime_seconds": "max_runtime_minutes"}
MAX_RUNTIME_MINUTES = MAX_RUNTIME_SECONDS // 60
# Ray's settings, and what a RayJob has no use for (KubeRay starts Ray in the containers): marked for the form's script.
RAY_ONLY = forms.TextInput(attrs={"data-framework-only": Framework.RAY.value})
NOT_RAY = forms.TextInput(attrs={"data-framework-not": Framework.RAY.value})


def _audit_labels() -> tuple[forms.CharField, forms.CharField]:
    """The two audit labels every submission carries (model and data class), as each submit form asks for them."""
    return (forms.CharField(max_length=63, label="Model (audit label)",
                            help_text="The model this work trains or serves, e.g. resnet50."),
            forms.CharField(max_length=63, label="Data class (audit label)",
                            help_text="The class of data it reads, e.g. public, internal, pii."))


def _size(label: str, *, maximum: int, minimum: int = 1, unit: str = "", **kwargs: Any) -> forms.IntegerField:
    return forms.IntegerField(
        label=label, min_value=minimum, max_value=maximum,
        error_messages={"max_value": f"At most %(limit_value)s{unit}; nothing larger could ever be scheduled.",
                        "min_value": f"At least %(limit_value)s{unit}."},
        **kwargs,
    )


def parse_words(text: str) -> list[str]:
    """A command line as a shell would split it: `python train.py --lr "1e-3"` -> 4 words."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ValidationError(f"Could not split this into words ({exc}); check the quotes.") from exc


def parse_env(text: str) -> list[dict[str, str]]:
    """`NAME=value` lines -> [{"name": NAME, "value": value}]; the service checks the names."""
    env = []
    errors = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            errors.append(f"Line {number}: write NAME=value, e.g. WANDB_MODE=offline.")
            continue
        env.append({"name": name.strip(), "value": value})
    if errors:
        raise ValidationError(errors)
    return env


def env_text(env: list[dict[str, str]]) -> str:
    return "\n".join(f"{item.get('name', '')}={item.get('value', '')}" if isinstance(item, dict) else str(item)
                     for item in env or [])


class PriorityClassChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: PriorityClass) -> str:
        return f"{obj.name} ({obj.value}, {'preemptible' if obj.preemptible else 'non-preemptible'})"


class PoolChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: NodePool) -> str:
        return f"{obj.name} ({obj.slug})"


class ProjectChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: Project) -> str:
        return f"{obj.name} ({obj.department.name})"


class DataSourceChoice(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: DataSource) -> str:
        access = "read-only" if obj.read_only else "read-write"
        return f"{obj.name} ({obj.project.slug}): {obj.target} at {obj.mount_path}, {access}"


class CredentialChoice(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Credential) -> str:
        return f"{obj.name} ({obj.project.slug}): {', '.join(obj.keys)}"


class WorkloadForm(StyledForm):
    """The submission form of one kind; `service_kwargs()` is what `workload_submit` takes (minus the actor)."""

    project = ProjectChoice(queryset=Project.objects.none(), empty_label=None)
    name = forms.CharField(max_length=63, help_text="A short name you will recognise, e.g. resnet-sweep-3 "
                                                    "(lower-case letters, digits and '-').")
    image = forms.CharField(max_length=255, help_text="Container image, e.g. nvcr.io/nvidia/pytorch:24.05-py3.")
    framework = forms.ChoiceField(
        choices=Framework.choices, initial=Framework.NONE, required=False, label="Framework",
        help_text="No framework: an Indexed Job the portal wires for torchrun (MASTER_ADDR, RANK...). PyTorch: a "
                  "Kubeflow Trainer TrainJob (a JobSet where the cluster has no Trainer), torchrun's PET_* variables "
                  "set, one process per GPU. Ray: a RayJob, a head and the pods as GPU workers, running the "
                  "entrypoint.")
    # The framework's own fields say whose they are (static/js/framework-fields.js shows them only for it).
    ray_version = forms.CharField(required=False, max_length=20, label="Ray version", widget=RAY_ONLY,
                                  help_text=f"Ray: the version in the image; empty: {DEFAULT_RAY_VERSION}.")
    ray_entrypoint = forms.CharField(required=False, max_length=MAX_ENTRYPOINT, label="Ray entrypoint",
                                     widget=RAY_ONLY,
                                     help_text="Ray: the job's command, run against the cluster, e.g. python "
                                               "train.py --epochs 3.")
    ray_working_dir = forms.CharField(required=False, max_length=MAX_WORKING_DIR, label="Ray working directory",
                                      widget=RAY_ONLY,
                                      help_text="Ray: the runtime environment's working_dir: a path in the image or "
                                                "a zip's URI (s3://..., https://...); empty: none.")
    command = forms.CharField(required=False, max_length=20_000, widget=NOT_RAY,
                              help_text="Overrides the image's entrypoint, split like a shell would: "
                                        "python train.py. Empty keeps the image's own.")
    args = forms.CharField(required=False, max_length=20_000, label="Arguments", widget=NOT_RAY,
                           help_text="Arguments after the command, e.g. --epochs 10 --lr 3e-4.")
    env = forms.CharField(required=False, max_length=50_000, label="Environment",
                          widget=forms.Textarea(attrs={"rows": 3}),
                          help_text="One NAME=value per line.")
    # Serving pools run inference services only (docs/architecture.md, Inference services): never offered here.
    node_pool = PoolChoice(queryset=NodePool.objects.filter(serving=False), empty_label=None, label="Node pool",
                           help_text="The GPU type and cut this work runs on; see what your project has there.")
    gpus = _size("GPUs per pod", minimum=0, maximum=MAX_GPUS_PER_POD, initial=1, unit=" GPU units per pod",
                 help_text="GPU units of the pool per pod (cards, MIG slices or shared replicas); 0 with a GPU "
                           "fraction.")
    gpu_fraction = forms.DecimalField(
        label="GPU fraction", required=False, max_digits=3, decimal_places=2, min_value=MIN_GPU_FRACTION,
        max_value=MAX_GPU_FRACTION,
        error_messages={"min_value": "Give a share of one GPU above 0, e.g. 0.25.",
                        "max_value": "Give a share of one GPU below 1, e.g. 0.75; ask for whole GPUs otherwise.",
                        "max_decimal_places": "Give the share in hundredths, e.g. 0.25, 0.5 or 0.75."},
        help_text="KAI pools with GPU fractions only, one pod: a share of one card (e.g. 0.5), with GPUs per pod 0. "
                  "Empty: whole GPUs.")
    pods = _size("Pods (gang size)", maximum=MAX_PODS, initial=1, unit=" pods",
                 help_text="Pods started together as one gang; all or none are admitted.")
    completions = _size("Completions", maximum=MAX_PODS * 100, initial=1, unit=" completions",
                        help_text="How many pods must finish successfully.")
    parallelism = _size("Parallelism", maximum=MAX_PODS, initial=1, unit=" pods at once",
                        help_text="How many pods run at the same time.")
    cpu = forms.DecimalField(label="CPU cores per pod", max_digits=7, decimal_places=3, initial=Decimal(1),
                             min_value=Decimal("0.001"), max_value=MAX_CPU_PER_POD,
                             error_messages={"max_value": "At most %(limit_value)s cores per pod."})
    memory_gib = forms.DecimalField(label="Memory per pod (GiB)", max_digits=8, decimal_places=2, initial=Decimal(8),
                                    min_value=Decimal("0.01"), max_value=MAX_MEMORY_GIB_PER_POD,
                                    error_messages={"max_value": "At most %(limit_value)s GiB per pod."})
    notebook_idle_timeout_minutes = _size("Idle timeout (minutes)", minimum=5, maximum=7 * 24 * 60, initial=120,
                                          unit=" minutes",
                                          help_text="The notebook is stopped after this long without activity.")
    notebook_port = _size("Port", maximum=65535, initial=8888, help_text="The port Jupyter listens on.")
    shm_gib = forms.DecimalField(
        label="Shared memory (GiB)", required=False, max_digits=8, decimal_places=2, min_value=Decimal("0.01"),
        max_value=MAX_MEMORY_GIB_PER_POD,
        help_text="Shared memory in RAM, counted in the pod's memory; PyTorch data loaders with workers need it. "
                  "Empty: the container default (64 MiB).")
    data_sources = DataSourceChoice(
        queryset=DataSource.objects.none(), required=False, widget=forms.CheckboxSelectMultiple,
        label="Data sources", help_text="Volumes your project's admins set up, mounted at their paths.")
    credentials = CredentialChoice(
        queryset=Credential.objects.none(), required=False, widget=forms.CheckboxSelectMultiple,
        label="Credentials", help_text="Your stored secrets in this project, passed as environment variables "
                                       "(by reference: their values never enter the portal's pages or the Job).")
    priority_class = PriorityClassChoice(queryset=PriorityClass.objects.all(), empty_label=None,
                                         label="Priority class",
                                         help_text="Orders work within your project; choosing one sets the "
                                                   "preemptible default.")
    preemptible = forms.BooleanField(
        required=False, label="Preemptible: may exceed the project's deserved quota",
        help_text="Preemptible work may use idle capacity beyond the deserved quota and may be stopped to give it "
                  "back. Non-preemptible work must fit in the deserved quota and is never preempted.")
    max_runtime_minutes = _size("Max runtime (minutes)", maximum=MAX_RUNTIME_MINUTES, unit=" minutes",
                                required=False, help_text="The job is stopped after this long (by Kueue, or by "
                                                          "Kubernetes' activeDeadlineSeconds on a KAI pool); "
                                                          "empty: no limit.")
    model_label, data_class = _audit_labels()

    ALIASES = ALIASES

    def __init__(self, *args: Any, kind: str, projects: Any, owner: Actor | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind
        keep = KIND_FIELDS[kind]
        for name in list(self.fields):
            if name not in keep:
                del self.fields[name]
        self.order_fields(keep)
        cast(forms.ModelChoiceField, self.fields["project"]).queryset = projects
        # Offered across the user's projects; the service refuses those of another project than the one chosen.
        cast(forms.ModelMultipleChoiceField, self.fields["data_sources"]).queryset = DataSource.objects.filter(
            project__in=projects).select_related("project")
        cast(forms.ModelMultipleChoiceField, self.fields["credentials"]).queryset = (
            selectors.credentials_of(owner=owner).filter(project__in=projects) if owner is not None
            else Credential.objects.none())

    # --- parsing ---

    def clean_framework(self) -> str:
        return self.cleaned_data["framework"] or Framework.NONE

    def clean_command(self) -> list[str]:
        return parse_words(self.cleaned_data["command"])

    def clean_args(self) -> list[str]:
        return parse_words(self.cleaned_data["args"])

    def clean_env(self) -> list[dict[str, str]]:
        return parse_env(self.cleaned_data["env"])

    def service_kwargs(self) -> dict[str, Any]:
        """The cleaned fields under the service's names (on an invalid form: those that passed their checks)."""
        data = dict(self.cleaned_data)
        if "max_runtime_minutes" in data:
            minutes = data.pop("max_runtime_minutes")
            data["max_runtime_seconds"] = minutes * 60 if minutes else None
        data["kind"] = self.kind
        for name in NAMED_FIELDS:
            if name in data:
                data[name] = list(data[name] or [])
        return data

    def failed_fields(self) -> set[str]:
        """The service's names of the fields that failed their own checks (`services.workload_check`'s unknown)."""
        service_names = {form_name: name for name, form_name in self.ALIASES.items()}
        return {service_names.get(name, name) for name in self.errors if name != NON_FIELD_ERRORS}


class ManifestForm(StyledForm):
    """The manifest page's form: where and how a Kubernetes manifest runs, and its text. `service_kwargs()` is what
    `services.workload_manifest_validate` / `workload_submit_manifest_once` take (minus the actor); the manifest
    itself is checked there, whole."""

    project = ProjectChoice(queryset=Project.objects.none(), empty_label=None)
    node_pool = PoolChoice(queryset=NodePool.objects.filter(serving=False), empty_label=None, label="Node pool",
                           help_text="The GPU type and cut it runs on: its containers ask for this pool's GPU "
                                     "resource.")
    manifest = forms.CharField(
        strip=False, max_length=MAX_MANIFEST_BYTES, label="Manifest (YAML or JSON)",
        widget=forms.Textarea(attrs={"rows": 28, "class": "code-input", "spellcheck": "false", "wrap": "off",
                                     "autocomplete": "off", "autocapitalize": "off", "data-code-editor": ""}),
        help_text="One object: a Job, Pod, JobSet, TrainJob, PyTorchJob, RayJob, RayCluster or LeaderWorkerSet. Leave "
                  "the namespace and the queue and priority labels out: the portal sets them. Tab indents; Escape "
                  "then Tab leaves the editor.")
    priority_class = PriorityClassChoice(queryset=PriorityClass.objects.all(), required=False,
                                         empty_label="The project's default", label="Priority class",
                                         help_text="Orders work within your project.")
    preemptible = forms.BooleanField(required=False, initial=True, label=WorkloadForm.base_fields[
        "preemptible"].label, help_text=WorkloadForm.base_fields["preemptible"].help_text)
    max_runtime_minutes = _size("Max runtime (minutes)", maximum=MAX_RUNTIME_MINUTES, unit=" minutes",
                                required=False, help_text="Kueue stops it after this long; empty: no limit.")
    model_label, data_class = _audit_labels()

    ALIASES = ALIASES

    def __init__(self, *args: Any, projects: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["project"]).queryset = projects

    def service_kwargs(self) -> dict[str, Any]:
        """The cleaned fields under the service's names (on an invalid form: those that passed their checks)."""
        data = dict(self.cleaned_data)
        if "max_runtime_minutes" in data:
            minutes = data.pop("max_runtime_minutes")
            data["max_runtime_seconds"] = minutes * 60 if minutes else None
        return data


class InferenceServiceForm(StyledForm):
    """The inference service page's form: a model server on a serving pool. `service_kwargs()` is what
    `services.inference_submit` takes (minus the actor). The pools offered are the chosen project's serving
    reservations (the first project's until one is chosen); the reservation's room is the service's to check."""

    project = ProjectChoice(queryset=Project.objects.none(), empty_label=None)
    name = forms.CharField(max_length=40, help_text="A short name you will recognise, e.g. llama-chat "
                                                    "(lower-case letters, digits and '-').")
    image = forms.CharField(max_length=255, help_text="The model server's image, e.g. vllm/vllm-openai:v0.6.3.")
    command = forms.CharField(required=False, max_length=20_000,
                              help_text="Overrides the image's entrypoint, split like a shell would. Empty keeps "
                                        "the image's own.")
    args = forms.CharField(required=False, max_length=20_000, label="Arguments",
                           help_text="e.g. --model meta-llama/Llama-3.1-8B --port 8000.")
    node_pool = PoolChoice(queryset=NodePool.objects.none(), empty_label=None, label="Serving pool",
                           error_messages={"invalid_choice": "This project has no serving reservation on that pool; "
                                                             "ask an admin for one."},
                           help_text="Only the pools where the project holds a serving reservation.")
    serving_port = _size("Port", maximum=65535, initial=8000,
                         help_text="The port the model server listens on; the endpoint reaches it there.")
    gpus = _size("GPUs per replica", maximum=MAX_GPUS_PER_POD, initial=1, unit=" GPU units per replica")
    replicas = _size("Replicas", maximum=MAX_PODS, initial=1, unit=" replicas",
                     help_text="Copies of the model server behind one endpoint; all of them must fit the "
                               "reservation.")
    pods = _size("Pods per replica", maximum=MAX_PODS, initial=1, unit=" pods per replica",
                 help_text="More than 1 for a model too large for one node: each replica is then a group of this "
                           "many pods (a LeaderWorkerSet), its leader serving the endpoint.")
    model_label, data_class = _audit_labels()

    def __init__(self, *args: Any, projects: QuerySet[Project], project: Project | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["project"]).queryset = projects
        chosen = projects.filter(pk=project.pk) if project is not None else projects.none()
        cast(forms.ModelChoiceField, self.fields["node_pool"]).queryset = selectors.serving_pools(projects=chosen)

    def clean_command(self) -> list[str]:
        return parse_words(self.cleaned_data["command"])

    def clean_args(self) -> list[str]:
        return parse_words(self.cleaned_data["args"])

    def service_kwargs(self) -> dict[str, Any]:
        """The cleaned fields (on an invalid form: those that passed their checks), named as the service names them."""
        return dict(self.cleaned_data)

    def failed_fields(self) -> set[str]:
        """The fields that failed their own checks (`services.inference_check`'s unknown)."""
        return {name for name in self.errors if name != NON_FIELD_ERRORS}


class InferenceUpdateForm(StyledForm):
    """Scale an inference service or roll it to a new image (`services.inference_update`), from its page."""

    replicas = _size("Replicas", maximum=MAX_PODS, unit=" replicas")
    image = forms.CharField(max_length=255)

    def changes(self, workload: Workload) -> dict[str, Any]:
        """Only what differs from the service as it is, so an unchanged scale-down never rechecks the image."""
        return {key: value for key, value in self.cleaned_data.items() if value != getattr(workload, key)}


def initial_from_values(values: dict[str, Any]) -> dict[str, Any]:
    """Template or old-workload values (lists for command/args/env) -> form initial data (text)."""
    initial = dict(values)
    for key in ("command", "args"):
        if isinstance(initial.get(key), list):
            initial[key] = shlex.join(initial[key])
    if isinstance(initial.get("env"), list):
        initial["env"] = env_text(initial["env"])
    return initial


def initial_from_workload(workload: Workload) -> dict[str, Any]:
    """What "Submit again" prefills: every field of the old workload's kind."""
    values: dict[str, Any] = {
        "name": workload.name, "image": workload.image, "command": workload.command, "args": workload.args,
        "env": workload.env, "node_pool": workload.node_pool_id, "gpus": workload.gpus,
        "gpu_fraction": workload.gpu_fraction, "cpu": workload.cpu,
        "memory_gib": workload.memory_gib, "pods": workload.pods, "completions": workload.completions,
        "parallelism": workload.parallelism, "priority_class": workload.priority_class_id,
        "preemptible": workload.preemptible, "model_label": workload.model_label, "data_class": workload.data_class,
        "notebook_idle_timeout_minutes": workload.notebook_idle_timeout_minutes,
        "notebook_port": workload.notebook_port, "shm_gib": workload.shm_gib,
        "data_sources": [source.pk for source in workload.data_sources.all()],
        "credentials": [credential.pk for credential in workload.credentials.filter(deleted_at=None)],
        "max_runtime_minutes": workload.max_runtime_seconds // 60 if workload.max_runtime_seconds else None,
        "framework": workload.framework, **workload.framework_settings,
    }
    keep = KIND_FIELDS[workload.kind]
    return initial_from_values({key: value for key, value in values.items() if key in keep})


def manifest_source(*, user: Actor, query: Any) -> Workload | None:
    """The workload `?from=` names for "Submit again" on the manifest page: 404 for one the user may not see, 400 for
    work from outside the portal (nothing of it was submitted here); None when none is named."""
    if not query.get("from"):
        return None
    source = selectors.workload_for_page(user=user, pk=parse_id(query["from"]) or 0)
    if source is None:
        raise Http404("No such workload.")
    if source.from_outside:
        raise BadRequest("This workload was submitted outside the portal: there is no submission of it to repeat.")
    return source


def manifest_initial_from_workload(workload: Workload) -> dict[str, Any]:
    """What "Submit again" of a manifest submission prefills: the manifest as it was given (the portal's additions
    taken out: the service adds them again for the new workload) and the same pool, priority, preemptibility, runtime
    limit and audit labels."""
    obj = submitted_manifest(workload)
    # In the order people write a manifest (the stored object's keys come back in the database's order).
    ordered = {key: obj[key] for key in ("apiVersion", "kind", "metadata", "spec") if key in obj} | obj
    return {
        "project": workload.project_id, "node_pool": workload.node_pool_id,
        "manifest": yaml.safe_dump(ordered, sort_keys=False, allow_unicode=True),
        "priority_class": workload.priority_class_id, "preemptible": workload.preemptible,
        "max_runtime_minutes": workload.max_runtime_seconds // 60 if workload.max_runtime_seconds else None,
        "model_label": workload.model_label, "data_class": workload.data_class,
    }


def template_field_names(kind: str) -> tuple[str, ...]:
    return tuple(name for name in KIND_FIELDS[kind] if name not in NOT_IN_TEMPLATES)


def _json_number(value: Decimal | None) -> int | float | None:
    """A size as a template writes it: 4, not "4.000"."""
    if value is None:
        return None
    return int(value) if value == value.to_integral_value() else float(value)


def template_values_from_workload(workload: Workload) -> dict[str, Any]:
    """What "Save as template" of a form submission starts from: every field of its kind as a template names it
    (pool by slug, priority class by name, data sources by name), the framework with its settings and the command
    and arguments that launch it. Credentials stay out: they are their owner's, and everyone reads templates."""
    values: dict[str, Any] = {
        "name": workload.name, "image": workload.image, "command": workload.command, "args": workload.args,
        "env": workload.env, "node_pool": workload.node_pool.slug, "gpus": workload.gpus,
        "gpu_fraction": _json_number(workload.gpu_fraction),
        "cpu": _json_number(workload.cpu), "memory_gib": _json_number(workload.memory_gib), "pods": workload.pods,
        "completions": workload.completions, "parallelism": workload.parallelism,
        "priority_class": workload.priority_class.name if workload.priority_class else None,
        "preemptible": workload.preemptible, "model_label": workload.model_label, "data_class": workload.data_class,
        "notebook_idle_timeout_minutes": workload.notebook_idle_timeout_minutes,
        "notebook_port": workload.notebook_port, "shm_gib": _json_number(workload.shm_gib),
        "data_sources": [source.name for source in workload.data_sources.all()],
        "max_runtime_minutes": workload.max_runtime_seconds // 60 if workload.max_runtime_seconds else None,
        "framework": workload.framework, **workload.framework_settings,
    }
    keep = set(template_field_names(workload.kind)) - {"credentials"}
    return {key: value for key, value in values.items() if key in keep and value not in (None, "", [])}


def template_initial_from_workload(workload: Workload) -> dict[str, Any]:
    """The template editor's start for "Save as template" of `workload` (a form submission)."""
    return {"name": workload.name, "kind": workload.kind,
            "description": f"From {workload.project.slug}/{workload.name} (#{workload.pk})",
            "values": json.dumps(template_values_from_workload(workload), indent=2)}


def _named(model: Any, names: Any, **scope: Any) -> list[int]:
    """The ids of the rows called `names` within `scope` (a template names data sources and credentials)."""
    if not isinstance(names, list):
        return []
    return list(model.objects.filter(name__in=[n for n in names if isinstance(n, str)], **scope)
                .values_list("pk", flat=True))


def initial_from_template(template: WorkloadTemplate, *, project: Project | None = None,
                          owner: Actor | None = None) -> dict[str, Any]:
    """A template's values with pool and priority class given by slug/name, as admins write them; data sources and
    credentials by name, looked up in `project` (and among `owner`'s credentials)."""
    values = {key: value for key, value in (template.values or {}).items() if key in template_field_names(
        template.kind)}
    if "data_sources" in values:
        values["data_sources"] = _named(DataSource, values["data_sources"], project=project) if project else []
    if "credentials" in values:
        values["credentials"] = _named(Credential, values["credentials"], project=project, owner=owner,
                                       deleted_at=None) if project and owner else []
    if isinstance(values.get("node_pool"), str):
        pool = NodePool.objects.filter(slug=values["node_pool"]).first()
        values["node_pool"] = pool.pk if pool else None
    if isinstance(values.get("priority_class"), str):
        priority_class = PriorityClass.objects.filter(name=values["priority_class"]).first()
        values["priority_class"] = priority_class.pk if priority_class else None
    return initial_from_values({key: value for key, value in values.items() if value is not None})


def submit_initial(*, user: Actor, projects: QuerySet[Project], query: Any) -> tuple[
        dict[str, Any], Workload | None, WorkloadTemplate | None]:
    """What the submit form starts with: ?template=, ?from= and ?project=, then sensible defaults for the rest
    (404 for what the user may not see)."""
    initial: dict[str, Any] = {}
    template = source = None
    if query.get("template"):
        template = get_object_or_404(WorkloadTemplate, pk=parse_id(query["template"]))
        chosen = projects.filter(**(reference_lookup(query.get("project", ""), name_field="slug") or {})).first() \
            if query.get("project") else projects.first()
        initial.update(initial_from_template(template, project=chosen, owner=user))
    if query.get("from"):
        source = selectors.workload_for_page(user=user, pk=parse_id(query["from"]) or 0)
        if source is None:
            raise Http404("No such workload.")
        if source.from_outside:
            raise BadRequest("This workload was submitted outside the portal: there is no submission of it to repeat.")
        initial.update(initial_from_workload(source))
        if projects.filter(pk=source.project_id).exists():
            initial["project"] = source.project_id
    if query.get("project"):
        initial["project"] = get_object_or_404(
            projects, **(reference_lookup(query["project"], name_field="slug") or {"pk__in": []})).pk
    project_id = initial.get("project")
    project = projects.filter(pk=project_id).first() if project_id else projects.first()
    if project is not None:
        initial.setdefault("project", project.pk)
        if "node_pool" not in initial:
            quota = Quota.objects.filter(project=project).select_related("node_pool").order_by("node_pool__name")
            first = quota.first()
            if first is not None:
                initial["node_pool"] = first.node_pool_id
        if "priority_class" not in initial:
            default = project.default_priority_class if project.default_priority_class_id else \
                selectors.default_priority_class(project=project, preemptible=True)
            if default is not None:
                initial["priority_class"] = default.pk
    if "preemptible" not in initial:
        preemptible = selectors.priority_class_preemptible(pk=initial.get("priority_class"))
        initial["preemptible"] = True if preemptible is None else preemptible
    return initial, source, template


# --- templates ---------------------------------------------------------------------------------------------------


class WorkloadTemplateForm(VersionedForm):
    name = forms.CharField(max_length=80)
    description = forms.CharField(max_length=250, required=False)
    kind = forms.ChoiceField(choices=PORTAL_KIND_CHOICES)
    values = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}),
        help_text="A JSON object of form field -> value, e.g. {\"image\": \"pytorch/pytorch:2.4.0\", \"gpus\": 2, "
                  "\"node_pool\": \"h100\", \"priority_class\": \"train\", \"command\": [\"python\", "
                  "\"train.py\"]}. Pools by slug, priority classes by name.")

    def __init__(self, *args: Any, instance: WorkloadTemplate | None = None, **kwargs: Any) -> None:
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {"name": instance.name, "description": instance.description, "kind": instance.kind,
                                 "values": json.dumps(instance.values, indent=2)}
        super().__init__(*args, **kwargs)
        self.instance = instance
        if instance is not None:
            self.carry_version(instance)

    def clean_name(self) -> str:
        """Checked here, beside the values, so one save reports every error (the model's unique check runs only
        once the form is valid)."""
        name = self.cleaned_data["name"]
        clashes = WorkloadTemplate.objects.filter(name=name)
        if self.instance is not None:
            clashes = clashes.exclude(pk=self.instance.pk)
        if clashes.exists():
            raise ValidationError(f"A workload template called {name!r} already exists.")
        return name

    def clean_values(self) -> dict[str, Any]:
        try:
            values = json.loads(self.cleaned_data["values"] or "{}")
        except json.JSONDecodeError as exc:
            raise ValidationError(f"Not valid JSON: {exc.msg} (line {exc.lineno}).") from exc
        except RecursionError as exc:
            raise ValidationError("Not valid JSON here: it is nested too deeply.") from exc
        if not isinstance(values, dict):
            raise ValidationError("Write a JSON object: {\"field\": value, ...}.")
        if holds_nul(values):  # a \u0000 escape, which PostgreSQL's jsonb refuses
            raise ValidationError("The values contain a NUL character (\\u0000); remove it.")
        return values

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        kind, values = data.get("kind"), data.get("values")
        if kind is None or values is None:
            return data
        known = template_field_names(kind)
        unknown = sorted(set(values) - set(known))
        if unknown:  # reported, and the known ones are still checked
            self.add_error("values", f"Not a field of the {Kind(kind).label.lower()} form: {', '.join(unknown)}. "
                                     f"Known fields: {', '.join(known)}.")
            values = {key: value for key, value in values.items() if key in known}
        # Each value must be something the submission form itself would accept in that field.
        probe = WorkloadForm(kind=kind, projects=Project.objects.none())
        prefilled = initial_from_template(WorkloadTemplate(kind=kind, values=values))
        shape: dict[str, Any] = {}
        for key in NAMED_FIELDS:
            if key in values:
                self._check_names(key, values[key])
        for key, value in values.items():
            if key in NAMED_FIELDS:
                continue
            if key in ("node_pool", "priority_class") and prefilled.get(key) is None:
                self.add_error("values", f"{key}: no {key.replace('_', ' ')} is called {value!r}.")
                continue
            field = probe.fields[key]
            try:
                cleaned = field.clean(prefilled.get(key))
                shape[key] = parse_env(cleaned) if key == "env" else parse_words(cleaned) if key in (
                    "command", "args") else cleaned
            except ValidationError as exc:
                self.add_error("values", f"{key}: {' '.join(exc.messages)}")
        if shape.get("shm_gib") is not None and values.get("memory_gib") is not None and \
                Decimal(str(shape["shm_gib"])) > Decimal(str(values["memory_gib"])):
            self.add_error("values", "shm_gib: shared memory counts in the pod's memory; at most memory_gib.")
        # ... and each value as a submission would meet it (an image reference, env names, audit labels, sizes).
        for name, messages in template_shape_errors(kind, shape).items():
            self.add_error("values", f"{name}: {' '.join(messages)}")
        # ... and the framework's rules (Ray takes an entrypoint, no command; names its runtime sets are taken): what
        # the template leaves out is the submitter's to fill in, so the checks needing it are left out.
        if "framework" in shape:
            given = {name: value for name, value in shape.items() if name in FRAMEWORK_VALUES}
            found = framework_errors(kind=kind, framework=shape["framework"] or Framework.NONE, values=given,
                                     unknown=set(FRAMEWORK_VALUES) - set(given))
            for name, messages in found.items():
                self.add_error("values", f"{name}: {' '.join(messages)}")
        return data

    def _check_names(self, key: str, names: Any) -> None:
        """Data sources and credentials are named in a template: a list of names as Kubernetes allows them."""
        what = key.replace("_", " ")
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            self.add_error("values", f"{key}: give a list of {what} names, e.g. [\"imagenet\"].")
            return
        for name in names:
            try:
                validate_dns_label(name)
            except ValidationError as exc:
                self.add_error("values", f"{key}: {' '.join(exc.messages)}")


class SecretTextarea(forms.Textarea):
    """A textarea that never renders what was typed into it (a refused form comes back with it empty)."""

    def format_value(self, value: Any) -> None:
        return None


class CredentialForm(StyledForm):
    """A credential's values arrive here once and go straight into the sealed intent (services.credential_create);
    the form never renders them back (the field is a password-style textarea that is always empty)."""

    project = ProjectChoice(queryset=Project.objects.none(), empty_label=None)
    name = forms.CharField(max_length=40, help_text="e.g. wandb or s3-scratch (lower-case letters, digits, '-').")
    values = forms.CharField(
        max_length=100_000, label="Values", strip=False,
        widget=SecretTextarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
        help_text="One NAME=value per line, e.g. WANDB_API_KEY=...; workloads read them as environment variables.")

    def __init__(self, *args: Any, projects: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["project"]).queryset = projects

    def clean_values(self) -> dict[str, str]:
        pairs = parse_env(self.cleaned_data["values"])
        names = [pair["name"] for pair in pairs]
        if len(set(names)) != len(names):
            raise ValidationError("A key is given twice.")
        return {pair["name"]: pair["value"] for pair in pairs}


class CredentialValuesForm(StyledForm):
    """New values for an existing credential (all of them: the old ones are never shown, so none are kept)."""

    values = CredentialForm.base_fields["values"]

    clean_values = CredentialForm.clean_values


class IdlePolicyForm(StyledForm):
    """The admin's "held but idle" rule: a threshold and how long GPUs must stay below it."""

    threshold_percent = forms.IntegerField(min_value=1, max_value=100, label="Idle below (% GPU utilisation)")
    idle_minutes = forms.IntegerField(min_value=1, max_value=7 * 24 * 60, label="for at least (minutes)")
    cull_notebooks = forms.BooleanField(required=False, label="Stop notebooks idle this long")
    warning_minutes = forms.IntegerField(min_value=0, max_value=MAX_IDLE_WARNING_MINUTES,
                                         label="after warning their owner (minutes)")
