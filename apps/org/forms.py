"""Forms for the organisation pages: shape only. Rules live in services; their refusals land on the fields here."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, cast

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator

from apps.core.forms import StyledForm, VersionedForm

from .models import (
    MAX_BUDGET_AMOUNT,
    MAX_OVER_QUOTA_WEIGHT,
    MAX_POOL_CAPACITY,
    Budget,
    DataSource,
    Department,
    NodePool,
    NotificationChannel,
    NotificationEvent,
    Policy,
    PriorityClass,
    Project,
    budget_threshold_errors,
)
from .policies import LABEL_FIELDS
from .validators import (
    SLUG_MAX_LENGTH,
    TAINT_EFFECTS,
    node_taints_bound_errors,
    too_many_node_labels,
    validate_dns_label,
    validate_label_key,
    validate_label_value,
    validate_slug,
)

# --- node pools ------------------------------------------------------------------------------------------------


def parse_labels(text: str) -> dict[str, str]:
    """`key=value` lines -> {key: value}; Kubernetes label rules on both sides."""
    labels: dict[str, str] = {}
    errors = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            errors.append(f"Line {number}: write key=value, e.g. portal.gpu/pool=h100.")
            continue
        try:
            validate_label_key(key)
            validate_label_value(value)
        except ValidationError as exc:
            errors.append(f"Line {number}: {exc.messages[0]}")
            continue
        if key in labels:
            errors.append(f"Line {number}: {key} appears twice.")
        labels[key] = value
    if too_many := too_many_node_labels(len(labels)):
        errors.append(too_many)
    if errors:
        raise ValidationError(errors)
    return labels


def parse_taints(text: str) -> list[dict[str, str]]:
    """`key=value:Effect` lines (value optional: `key:Effect`) -> Kubernetes taints."""
    taints: list[dict[str, str]] = []
    errors = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        head, sep, effect = line.rpartition(":")
        if not sep or effect not in TAINT_EFFECTS:
            errors.append(f"Line {number}: write key=value:Effect with Effect one of {', '.join(TAINT_EFFECTS)}.")
            continue
        key, _, value = head.partition("=")
        key, value = key.strip(), value.strip()
        try:
            validate_label_key(key)
            if value:
                validate_label_value(value)
        except ValidationError as exc:
            errors.append(f"Line {number}: {exc.messages[0]}")
            continue
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        taints.append(taint)
    errors += node_taints_bound_errors(taints)
    if errors:
        raise ValidationError(errors)
    return taints


def labels_text(labels: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in (labels or {}).items())


def taints_text(taints: list[dict[str, str]]) -> str:
    lines = []
    for taint in taints or []:
        value = f"={taint['value']}" if taint.get("value") else ""
        lines.append(f"{taint.get('key', '')}{value}:{taint.get('effect', '')}")
    return "\n".join(lines)


CARD_FRACTION = re.compile(r"^\s*(\d+)\s*(?:/\s*(\d+)\s*)?$")


class NodePoolForm(VersionedForm):
    slug = forms.CharField(max_length=SLUG_MAX_LENGTH, validators=[validate_slug],
                           help_text="Kubernetes name of the pool's ResourceFlavor and cohort tree; fixed once in use.")
    name = forms.CharField(max_length=100)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    gpu_resource = forms.CharField(max_length=100, initial="nvidia.com/gpu", label="GPU resource",
                                   help_text="Extended resource name, e.g. nvidia.com/gpu or nvidia.com/mig-3g.40gb.")
    gpu_product = forms.CharField(max_length=100, required=False, label="GPU product",
                                  help_text="nvidia.com/gpu.product of its nodes, e.g. NVIDIA-H100-80GB-HBM3.")
    cut = forms.ChoiceField(choices=NodePool.Cut.choices, initial=NodePool.Cut.FULL)
    mig_profile = forms.CharField(max_length=30, required=False, label="MIG profile",
                                  help_text="For MIG pools, e.g. 3g.40gb.")
    replicas_per_card = forms.IntegerField(min_value=1, max_value=64, initial=1,
                                           help_text="For time-sliced pools: how many replicas share one card.")
    node_labels = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False,
                                  help_text="One key=value per line; the labels that select this pool's nodes.")
    node_taints = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False,
                                  help_text="One key=value:Effect per line (NoSchedule, PreferNoSchedule, NoExecute).")
    capacity = forms.IntegerField(min_value=0, max_value=MAX_POOL_CAPACITY,
                                  help_text="GPU units in the pool: cards, MIG slices or time-sliced replicas.")
    card_fraction = forms.CharField(max_length=12, initial="1",
                                    help_text="What one unit is of a physical card: 1 for full cards, 3/7 for an "
                                              "A100 3g.40gb slice, 1/8 for eight time-sliced replicas.")
    over_subscribable = forms.BooleanField(
        required=False, label="Allow over-subscription",
        help_text="When on, departments' deserved quotas on this pool may add up to more than its capacity: the "
                  "guarantee then becomes a promise the cluster cannot always keep, and non-preemptible work may "
                  "wait even inside its quota. Leave off unless you mean it.",
    )
    serving = forms.BooleanField(
        required=False, label="Serving pool",
        help_text="For inference services only: no Kueue queues and no batch work; admins reserve a fixed number of "
                  "its units per project instead of quotas.",
    )
    scheduler = forms.ChoiceField(
        choices=NodePool.Scheduler.choices, initial=NodePool.Scheduler.KUEUE,
        help_text="What queues and admits the pool's work: Kueue, or KAI Scheduler (the organisation becomes KAI "
                  "queues; GPU fractions possible). Changes only while no work is live on the pool.",
    )
    gpu_fractions = forms.BooleanField(
        required=False, label="GPU fractions",
        help_text="KAI pools only: work may ask for a fraction of one card, so notebooks share cards.",
    )

    price_per_card_hour = forms.DecimalField(
        required=False, min_value=0, max_digits=12, decimal_places=4, label="Price per card-hour",
        help_text="Optional: what one physical card costs per hour. Usage reports then show a cost (chargeback). A "
                  "change applies from the moment you save it: hours used before keep the price they had (the pool's "
                  "page shows its price history).",
    )

    ALIASES = {"card_fraction_numerator": "card_fraction", "card_fraction_denominator": "card_fraction"}

    def __init__(self, *args: Any, instance: NodePool | None = None, **kwargs: Any) -> None:
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                "slug": instance.slug, "name": instance.name, "description": instance.description,
                "gpu_resource": instance.gpu_resource, "gpu_product": instance.gpu_product, "cut": instance.cut,
                "mig_profile": instance.mig_profile, "replicas_per_card": instance.replicas_per_card,
                "node_labels": labels_text(instance.node_labels), "node_taints": taints_text(instance.node_taints),
                "capacity": instance.capacity, "card_fraction": instance.card_fraction_display,
                "over_subscribable": instance.over_subscribable, "serving": instance.serving,
                "price_per_card_hour": instance.price_per_card_hour, "scheduler": instance.scheduler,
                "gpu_fractions": instance.gpu_fractions,
            }
        super().__init__(*args, **kwargs)
        if instance is not None:
            self.carry_version(instance)

    def clean_node_labels(self) -> dict[str, str]:
        return parse_labels(self.cleaned_data["node_labels"])

    def clean_node_taints(self) -> list[dict[str, str]]:
        return parse_taints(self.cleaned_data["node_taints"])

    def clean_card_fraction(self) -> Fraction:
        match = CARD_FRACTION.match(self.cleaned_data["card_fraction"])
        if not match:
            raise ValidationError("Write a fraction such as 1, 3/7 or 1/8.")
        numerator, denominator = int(match[1]), int(match[2] or 1)
        if numerator < 1 or denominator < 1 or numerator > denominator:
            raise ValidationError("A unit is a part of one card: between 1/N and 1.")
        if denominator > 1000:
            raise ValidationError("The denominator can be at most 1000.")
        return Fraction(numerator, denominator)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("cut") == NodePool.Cut.MIG and not data.get("mig_profile"):
            self.add_error("mig_profile", "A MIG pool needs its profile, e.g. 3g.40gb.")
        if data.get("cut") == NodePool.Cut.TIME_SLICED and (data.get("replicas_per_card") or 1) < 2:
            self.add_error("replicas_per_card", "A time-sliced pool shares each card between at least 2 replicas.")
        proposed = NodePool(scheduler=data.get("scheduler") or NodePool.Scheduler.KUEUE,
                            gpu_fractions=bool(data.get("gpu_fractions")), serving=bool(data.get("serving")))
        for name, message in proposed.scheduler_errors().items():
            self.add_error(name, message)
        return data

    def service_fields(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        fraction: Fraction = data.pop("card_fraction")
        if data["cut"] != NodePool.Cut.MIG:
            data["mig_profile"] = ""
        if data["cut"] != NodePool.Cut.TIME_SLICED:
            data["replicas_per_card"] = 1
        data["card_fraction_numerator"] = fraction.numerator
        data["card_fraction_denominator"] = fraction.denominator
        return data


# --- departments, projects, priority classes --------------------------------------------------------------------

WEIGHT_BOUNDS = [MinValueValidator(0), MaxValueValidator(MAX_OVER_QUOTA_WEIGHT)]


class DepartmentForm(VersionedForm):
    slug = forms.CharField(max_length=SLUG_MAX_LENGTH, validators=[validate_slug],
                           help_text="Kubernetes name (dept-<slug>-<pool> cohorts); cannot change later.")
    name = forms.CharField(max_length=100)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    min_project_weight = forms.DecimalField(
        max_digits=8, decimal_places=2, initial=0, validators=WEIGHT_BOUNDS, label="Lowest project weight",
        help_text="The lowest over-quota weight a team lead may give one of this department's projects.")
    max_project_weight = forms.DecimalField(
        max_digits=8, decimal_places=2, initial=10, validators=WEIGHT_BOUNDS, label="Highest project weight",
        help_text="The highest over-quota weight a team lead may give one of this department's projects.")

    def __init__(self, *args: Any, instance: Department | None = None, **kwargs: Any) -> None:
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {name: getattr(instance, name) for name in
                                 ("slug", "name", "description", "min_project_weight", "max_project_weight")}
        super().__init__(*args, **kwargs)
        if instance is not None:
            self.fields["slug"].disabled = True
            self.carry_version(instance)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        low, high = data.get("min_project_weight"), data.get("max_project_weight")
        if low is not None and high is not None and low > high:
            self.add_error("max_project_weight", "The highest weight cannot be below the lowest.")
        return data


class ProjectForm(VersionedForm):
    slug = forms.CharField(max_length=SLUG_MAX_LENGTH, validators=[validate_slug],
                           help_text="Kubernetes name (proj-<slug>-<pool> queues); cannot change later.")
    name = forms.CharField(max_length=100)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    namespace = forms.CharField(max_length=63, required=False, validators=[validate_dns_label],
                                help_text="Kubernetes namespace; empty means proj-<slug>. Cannot change later.")
    does_not_lend = forms.BooleanField(
        required=False, label="Does not lend",
        help_text="Keep this project's idle deserved quota for itself instead of lending it to others (e.g. serving).")
    default_priority_class = forms.ModelChoiceField(queryset=PriorityClass.objects.all(), required=False,
                                                    empty_label="(none)")
    notebooks_shared = forms.BooleanField(
        required=False, label="Members may open each other's notebooks",
        help_text="Off: only a notebook's owner can connect to it.")

    def __init__(self, *args: Any, instance: Any = None, **kwargs: Any) -> None:
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {name: getattr(instance, name) for name in
                                 ("slug", "name", "description", "namespace", "does_not_lend", "notebooks_shared")}
            kwargs["initial"]["default_priority_class"] = instance.default_priority_class_id
        super().__init__(*args, **kwargs)
        prefix = settings.KUEUE_PROJECT_PREFIX
        self.fields["namespace"].help_text = (
            f"Kubernetes namespace; empty means {prefix}<slug>. Others must start with '{prefix}' or be on the "
            "admins' approved list. Cannot change later.")
        if instance is not None:
            self.fields["slug"].disabled = True
            self.fields["namespace"].disabled = True
            self.carry_version(instance)


class PriorityClassForm(VersionedForm):
    name = forms.CharField(max_length=63, validators=[validate_dns_label],
                           help_text="Name of the Kueue WorkloadPriorityClass; cannot change later.")
    value = forms.IntegerField(min_value=-1_000_000_000, max_value=1_000_000_000,
                               help_text="Higher values are admitted first and preempt lower ones.")
    preemptible = forms.BooleanField(required=False, initial=True,
                                     help_text="Work of this class is preemptible unless its submitter says otherwise.")
    description = forms.CharField(max_length=250, required=False)

    def __init__(self, *args: Any, instance: PriorityClass | None = None, **kwargs: Any) -> None:
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {name: getattr(instance, name) for name in
                                 ("name", "value", "preemptible", "description")}
        super().__init__(*args, **kwargs)
        if instance is not None:
            self.fields["name"].disabled = True
            self.carry_version(instance)


# --- weights ---------------------------------------------------------------------------------------------------


class WeightForm(VersionedForm):
    """One quota's weight on the weights page; `version` is the quota's as the row was rendered."""

    quota = forms.IntegerField()
    over_quota_weight = forms.DecimalField(max_digits=8, decimal_places=2, validators=WEIGHT_BOUNDS,
                                           label="Over-quota weight")
    version = forms.CharField(widget=forms.HiddenInput, required=False)


class ProjectDefaultsForm(VersionedForm):
    """One project's default priority class on the weights page; `version` is the project's as rendered."""

    project = forms.IntegerField()
    default_priority_class = forms.ModelChoiceField(queryset=PriorityClass.objects.all(), required=False)
    version = forms.CharField(widget=forms.HiddenInput, required=False)



# --- budgets ---------------------------------------------------------------------------------------------------

BOTH_OWNERS = "Choose a department or a project, not both."
NO_OWNER = "Choose a department or a project."


def parse_thresholds(text: str) -> list[int]:
    """"50, 80, 100" -> [50, 80, 100], every rule broken named at once: words that are no whole percent, then the
    model's range and order rules (budget_threshold_errors)."""
    words = text.replace(",", " ").split()
    wrong = [word for word in words if not (word.isascii() and word.isdigit())]
    if wrong:
        raise ValidationError(f"Give the thresholds as whole percents separated by commas, e.g. 50, 80, 100; "
                              f"{', '.join(wrong)} is not one.")
    values = [int(word) for word in words]
    errors = budget_threshold_errors(values)
    if errors:
        raise ValidationError(errors)
    return values


class _ProjectInDepartment(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.department.name} / {obj.name}"


class BudgetForm(VersionedForm):
    """A budget of one department or project (docs/architecture.md, Budgets). The owner choices are those whose
    budgets the user sets; the owner is fixed once the budget exists. Every field's rules are checked here so the
    page names every mistake at once; the service adds what needs the other budgets (the department's cap, one
    budget of a kind per scope and period)."""

    department = forms.ModelChoiceField(queryset=Department.objects.none(), required=False, empty_label="(none)",
                                        help_text="A department's budget caps the sum of its projects' budgets.")
    project = _ProjectInDepartment(queryset=Project.objects.none(), required=False, empty_label="(none)")
    period = forms.ChoiceField(choices=Budget.Period.choices, initial=Budget.Period.MONTH,
                               help_text="Calendar months or quarters; the budget starts afresh with each.")
    metric = forms.ChoiceField(choices=Budget.Metric.choices, initial=Budget.Metric.GPU_HOURS, label="Counts",
                               help_text="GPU-hours are physical card hours, as the GPU-hours report counts them; "
                                         "cost is those hours at each pool's price in force when they were used.")
    amount = forms.DecimalField(max_digits=14, decimal_places=2, min_value=0, max_value=MAX_BUDGET_AMOUNT,
                                help_text="GPU-hours or money per period.")
    thresholds = forms.CharField(
        required=False, initial="50, 80, 100", label="Thresholds (%)",
        help_text="Percents of the amount, from 1 to 100 in rising order; crossing each notifies the scope's leads "
                  "and admins once per period.")
    on_exceed = forms.ChoiceField(choices=Budget.OnExceed.choices, initial=Budget.OnExceed.NOTIFY,
                                  label="When exceeded",
                                  help_text="Holding stops Kueue admitting the scope's new preemptible work until "
                                            "the period ends or the budget is raised; running and non-preemptible "
                                            "work is never held.")

    def __init__(self, *args: Any, departments: Any, projects: Any, instance: Budget | None = None,
                 **kwargs: Any) -> None:
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {"department": instance.department_id, "project": instance.project_id,
                                 "period": instance.period, "metric": instance.metric, "amount": instance.amount,
                                 "thresholds": ", ".join(map(str, instance.thresholds)),
                                 "on_exceed": instance.on_exceed}
        super().__init__(*args, **kwargs)
        fields = cast(dict[str, forms.ModelChoiceField], self.fields)
        fields["department"].queryset = departments
        fields["project"].queryset = projects.select_related("department")
        if instance is not None:
            fields["department"].disabled = fields["project"].disabled = True
            fields["department"].help_text = fields["project"].help_text = (
                "Fixed: delete the budget and create another for another scope.")
            self.carry_version(instance)

    def clean_thresholds(self) -> list[int]:
        return parse_thresholds(self.cleaned_data["thresholds"])

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        department, project = data.get("department"), data.get("project")
        # Only when both choices were read: a choice outside the list already has its error.
        if "department" not in self.errors and "project" not in self.errors:
            if department is not None and project is not None:
                self.add_error("project", BOTH_OWNERS)
            elif department is None and project is None:
                self.add_error("department", NO_OWNER)
                self.add_error("project", NO_OWNER)
        return data


class _ProjectChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.name} ({obj.namespace})"


class ProjectNamespaceForm(StyledForm):
    """An existing namespace to map to the project; services.project_namespace_map checks every rule."""

    namespace = forms.CharField(max_length=63, help_text="An existing namespace of the cluster whose Kueue work "
                                                         "counts as this project's, e.g. vision-pipelines.")


class DataSourceForm(StyledForm):
    """A PVC in the project's namespace or an NFS export; services.data_source_create checks every rule."""

    project = _ProjectChoice(queryset=Project.objects.none(), empty_label=None)
    name = forms.CharField(max_length=40, help_text="What users pick in the form, e.g. imagenet.")
    kind = forms.ChoiceField(choices=DataSource.Kind.choices, initial=DataSource.Kind.PVC)
    claim_name = forms.CharField(max_length=253, required=False, label="PVC name",
                                 help_text="For a PVC: the claim in the project's namespace (it must exist there).")
    nfs_server = forms.CharField(max_length=253, required=False, label="NFS server")
    nfs_path = forms.CharField(max_length=255, required=False, label="NFS path", help_text="e.g. /exports/imagenet")
    mount_path = forms.CharField(max_length=255, help_text="Where it appears in the container, e.g. /data/imagenet.")
    read_only = forms.BooleanField(required=False, initial=True, label="Read-only")
    description = forms.CharField(max_length=250, required=False)

    def __init__(self, *args: Any, projects: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["project"]).queryset = projects


class PullSecretForm(StyledForm):
    """Registry credentials; the password goes sealed to the worker and is never shown again."""

    project = _ProjectChoice(queryset=Project.objects.none(), empty_label=None)
    name = forms.CharField(max_length=40, help_text="e.g. nvcr")
    registry = forms.CharField(max_length=253, help_text="e.g. nvcr.io or registry.example.org:5000")
    username = forms.CharField(max_length=253)
    password = forms.CharField(max_length=4096, strip=False, widget=forms.PasswordInput(render_value=False),
                               label="Password or token")

    def __init__(self, *args: Any, projects: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["project"]).queryset = projects


# --- policies --------------------------------------------------------------------------------------------------


class PolicyForm(VersionedForm):
    """A policy of the organisation (neither scope chosen), a department or a project (docs/architecture.md,
    Policies). Shape only: an empty field inherits, and every rule (patterns, the scope above and below, who may set
    it) is the service's, so the page shows all its refusals at once. The scope is fixed once the policy exists."""

    department = forms.ModelChoiceField(queryset=Department.objects.none(), required=False,
                                        empty_label="(none)")
    project = forms.ModelChoiceField(queryset=Project.objects.none(), required=False, empty_label="(none)",
                                     help_text="Choose neither for the whole organisation's policy (admins).")
    max_gpus_per_workload = forms.IntegerField(required=False, label="Max GPUs per workload",
                                               help_text="GPU units one workload may hold in all its pods.")
    max_runtime_seconds = forms.IntegerField(required=False, label="Max runtime (seconds)")
    default_runtime_seconds = forms.IntegerField(
        required=False, label="Default runtime (seconds)",
        help_text="For work that gives none; the maximum serves when only that is set.")
    allowed_images = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3}), label="Allowed images",
        help_text="One pattern a line, * and ? as wildcards (no regular expressions), e.g. nvcr.io/nvidia/*.")
    allowed_priority_classes = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Allowed priority classes",
        help_text="Leave all unticked to inherit.")
    default_priority_class = forms.ModelChoiceField(queryset=PriorityClass.objects.all(), required=False,
                                                    empty_label="(inherited)", to_field_name="name")
    max_notebook_idle_minutes = forms.IntegerField(required=False, label="Notebook idle limit (minutes)",
                                                   help_text="The longest idle timeout, also the default.")
    required_labels = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, choices=[(name, name) for name in LABEL_FIELDS],
        label="Required audit labels", help_text="Leave all unticked to inherit.")
    pod_security = forms.ChoiceField(required=False, choices=[("", "(inherited)"), *Policy.PodSecurity.choices],
                                     label="Pod security (manifests)")

    def __init__(self, *args: Any, departments: Any, projects: Any, instance: Policy | None = None,
                 **kwargs: Any) -> None:
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                "department": instance.department_id, "project": instance.project_id,
                **{name: getattr(instance, name) for name in ("max_gpus_per_workload", "max_runtime_seconds",
                                                              "default_runtime_seconds", "max_notebook_idle_minutes",
                                                              "pod_security")},
                "allowed_images": "\n".join(instance.allowed_images or []),
                "allowed_priority_classes": instance.allowed_priority_classes or [],
                "default_priority_class": instance.default_priority_class.name
                if instance.default_priority_class else None,
                "required_labels": instance.required_labels or [],
            }
        super().__init__(*args, **kwargs)
        fields = cast(dict[str, forms.ModelChoiceField], self.fields)
        fields["department"].queryset = departments
        fields["project"].queryset = projects.select_related("department")
        cast(forms.MultipleChoiceField, self.fields["allowed_priority_classes"]).choices = [
            (name, name) for name in PriorityClass.objects.order_by("value").values_list("name", flat=True)]
        if instance is not None:
            fields["department"].disabled = fields["project"].disabled = True
            fields["department"].help_text = fields["project"].help_text = (
                "Fixed: delete the policy and create another for another scope.")
            self.carry_version(instance)

    def clean_allowed_images(self) -> list[str] | None:
        patterns = [line.strip() for line in self.cleaned_data["allowed_images"].splitlines() if line.strip()]
        return patterns or None

    def clean_allowed_priority_classes(self) -> list[str] | None:
        return self.cleaned_data["allowed_priority_classes"] or None

    def clean_required_labels(self) -> list[str] | None:
        return self.cleaned_data["required_labels"] or None

    def clean(self) -> dict[str, Any]:
        super().clean()
        if self.cleaned_data.get("department") is not None and self.cleaned_data.get("project") is not None:
            self.add_error("project", "Choose a department or a project, not both.")
        return self.cleaned_data


# --- notification channels ------------------------------------------------------------------------------------


CHANNEL_EVENT_CHOICES = [(value, label) for value, label in NotificationEvent.choices
                         if value != NotificationEvent.TEST]


class NotificationChannelForm(VersionedForm):
    """A channel of one's own (no project) or of a project whose channels the user manages (docs/architecture.md,
    Notification channels). Shape only, and no field refuses emptiness here: services.notification_channel_create
    and _update check every rule (the name, what the kind needs, the URL's guard, the secret's length), so the page
    names every mistake at once. Kind and owner are fixed once the channel exists; a URL or secret left empty on edit
    keeps the stored one (they are sealed and never shown back)."""

    project = _ProjectInDepartment(queryset=Project.objects.none(), required=False,
                                   empty_label="(none: my own channel)",
                                   help_text="A project's channel tells its leads; leave empty for your own.")
    name = forms.CharField(max_length=100, required=False, help_text="e.g. ml-alerts")
    kind = forms.ChoiceField(choices=NotificationChannel.Kind.choices, initial=NotificationChannel.Kind.WEBHOOK)
    email = forms.CharField(max_length=254, required=False, label="E-mail address",
                            help_text="E-mail channels: where to send (your own channel: your account's if empty).")
    url = forms.CharField(max_length=2000, required=False, label="URL", strip=True,
                          help_text="Slack, Teams and webhooks: the receiver's http(s) URL, without credentials in "
                                    "it. Stored sealed and never shown back.")
    secret = forms.CharField(max_length=256, required=False, strip=False,
                             widget=forms.PasswordInput(render_value=False),
                             help_text="Webhooks: 16 to 256 characters; each request carries X-Portal-Signature, "
                                       "the HMAC-SHA256 of its body with this secret. Never shown back.")
    events = forms.MultipleChoiceField(required=False, choices=CHANNEL_EVENT_CHOICES,
                                       widget=forms.CheckboxSelectMultiple)
    enabled = forms.BooleanField(required=False, initial=True, label="On")

    def __init__(self, *args: Any, projects: Any, instance: NotificationChannel | None = None,
                 **kwargs: Any) -> None:
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {"project": instance.project_id, "name": instance.name, "kind": instance.kind,
                                 "email": instance.email, "events": instance.events, "enabled": instance.enabled}
        super().__init__(*args, **kwargs)
        project = cast(forms.ModelChoiceField, self.fields["project"])
        project.queryset = projects.select_related("department")
        if instance is not None:
            project.disabled = self.fields["kind"].disabled = True
            project.help_text = "Fixed: delete the channel and create another for another owner or kind."
            self.fields["url"].help_text = (f"Now {instance.url_host or 'none'}; leave empty to keep the stored URL.")
            self.fields["secret"].help_text = "Leave empty to keep the stored secret."
            self.carry_version(instance)
