"""What can never run, refused before anything is saved, with a message that says why and what to change."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError

from apps.org.models import NodePool, Project, Quota
from apps.org.validators import validate_dns_label, validate_label_value

from .models import HOLDING_STATUSES, MAX_PODS, Kind, Workload

# A container image reference as the container runtime parses it: [registry[:port]/]path[:tag][@digest]. The first
# component is a registry only when it has a dot or a port or is localhost; otherwise it is part of the path.
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:localhost(?::[0-9]+)?|{_DOMAIN_PART}(?:\.{_DOMAIN_PART})+(?::[0-9]+)?|{_DOMAIN_PART}:[0-9]+)"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
RESERVED_ENV_PREFIX = "PORTAL_"
MAX_ARGUMENTS = 256
MAX_ARGUMENT_LENGTH = 4096
MAX_ENV = 128


def validate_image(image: str) -> None:
    if not image or len(image) > 255 or not IMAGE_REFERENCE.match(image):
        raise ValidationError(
            {"image": f"{image!r} is not a valid image reference; use e.g. nvcr.io/nvidia/pytorch:24.05-py3."})


def _validate_strings(field: str, values: Any) -> None:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValidationError({field: "Give a list of strings."})
    if len(values) > MAX_ARGUMENTS:
        raise ValidationError({field: f"At most {MAX_ARGUMENTS} entries."})
    if any(len(v) > MAX_ARGUMENT_LENGTH or "\x00" in v for v in values):
        raise ValidationError({field: f"Each entry must be under {MAX_ARGUMENT_LENGTH} characters, without NUL."})


def validate_env(env: Any) -> None:
    if not isinstance(env, list) or len(env) > MAX_ENV:
        raise ValidationError({"env": f"Give at most {MAX_ENV} variables as a list of name/value pairs."})
    seen = set()
    for item in env:
        if not isinstance(item, dict) or set(item) != {"name", "value"} or not all(
                isinstance(item[key], str) for key in ("name", "value")):
            raise ValidationError({"env": "Each variable needs a name and a string value."})
        name = item["name"]
        if not ENV_NAME.match(name) or len(name) > 253:
            raise ValidationError({"env": f"{name!r} is not a valid environment variable name (letters, digits, "
                                          "'_', '-', '.', not starting with a digit)."})
        if name.startswith(RESERVED_ENV_PREFIX):
            raise ValidationError({"env": f"Names starting with {RESERVED_ENV_PREFIX} are set by the portal."})
        if name in seen:
            raise ValidationError({"env": f"{name} is set twice."})
        if "\x00" in item["value"]:
            raise ValidationError({"env": f"The value of {name} contains a NUL character; remove it."})
        seen.add(name)


def _label(field: str, value: str, what: str) -> None:
    if not value:
        raise ValidationError({field: f"The {what} audit label is required."})
    try:
        validate_label_value(value)
    except ValidationError as exc:
        raise ValidationError({field: exc.messages}) from exc


def validate_shape(values: dict[str, Any]) -> None:
    """Checks that need no database: names, image, command, env, labels, sizes per kind."""
    try:
        validate_dns_label(values["name"])
    except ValidationError as exc:
        raise ValidationError({"name": exc.messages}) from exc
    validate_image(values["image"])
    _validate_strings("command", values.get("command", []))
    _validate_strings("args", values.get("args", []))
    validate_env(values.get("env", []))
    _label("model_label", values.get("model_label", ""), "model")
    _label("data_class", values.get("data_class", ""), "data class")
    kind = values["kind"]
    if kind == Kind.NOTEBOOK and values.get("pods", 1) != 1:
        raise ValidationError({"pods": "A notebook runs in exactly one pod."})
    if kind == Kind.BATCH and values.get("parallelism", 1) > values.get("completions", 1):
        raise ValidationError({"parallelism": "Parallelism cannot exceed the number of completions."})
    if kind != Kind.TRAINING and values.get("pods", 1) != 1:
        raise ValidationError({"pods": "Only training runs several pods as one gang; use completions for batch."})
    if kind == Kind.TRAINING and values.get("pods", 1) > MAX_PODS:
        raise ValidationError({"pods": f"At most {MAX_PODS} pods."})


# What a template leaves out is checked as if a submission filled it with these (valid) values.
_SUBMISSION_FILLERS: dict[str, Any] = {"name": "template", "image": "busybox", "command": [], "args": [], "env": [],
                                       "model_label": "template", "data_class": "template", "pods": 1,
                                       "completions": 1, "parallelism": 1}


def template_shape_errors(kind: str, values: dict[str, Any]) -> dict[str, list[str]]:
    """Every shape error (validate_shape) a submission with these template values would meet, by field: each value
    checked on its own, then all together for the rules across fields. Empty when a submission would pass."""
    errors: dict[str, list[str]] = {}
    for key in values:
        try:
            validate_shape({**_SUBMISSION_FILLERS, key: values[key], "kind": kind})
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                errors.setdefault(field, []).extend(m for m in messages if m not in errors.get(field, []))
    if not errors:
        try:
            validate_shape({**_SUBMISSION_FILLERS, **values, "kind": kind})
        except ValidationError as exc:
            errors.update(exc.message_dict)
    return errors


def project_quota(project: Project, pool: NodePool) -> Quota | None:
    return Quota.objects.filter(project=project, node_pool=pool).first()


def validate_fits(*, project: Project, pool: NodePool, units: int, gpus: int, preemptible: bool, cpu: Decimal,
                  memory_gib: Decimal, pod_count: int) -> None:
    """Refuse what this project could never run on this pool, whatever else is running."""
    quota = project_quota(project, pool)
    if quota is None:
        raise ValidationError({"node_pool": f"{project.name} has no quota on {pool.name}; choose a pool listed for "
                                            "the project or ask your department admin for quota there."})
    if gpus > pool.capacity:
        raise ValidationError({"gpus": f"{pool.name} has {pool.capacity} units in all; one pod cannot ask for "
                                       f"{gpus}."})
    if quota.limit is not None and units > quota.limit:
        raise ValidationError({"gpus": f"This asks for {units} {pool.name} units but {project.name} may use at most "
                                       f"{quota.limit} there (its limit); ask for fewer GPUs or pods."})
    if units > pool.capacity and not pool.over_subscribable:
        raise ValidationError({"gpus": f"This asks for {units} units but {pool.name} only has {pool.capacity}."})
    if not preemptible and units > quota.deserved:
        raise ValidationError({"preemptible": (
            f"Non-preemptible work must fit in {project.name}'s deserved quota on {pool.name} ({quota.deserved} "
            f"units) and this asks for {units}. Mark it preemptible to use idle capacity, or ask for fewer GPUs.")})
    if quota.cpu_cores is not None and cpu * pod_count > quota.cpu_cores:
        raise ValidationError({"cpu": f"{project.name} has {quota.cpu_cores} CPU cores on {pool.name}; this asks "
                                      f"for {cpu * pod_count}."})
    if quota.memory_gib is not None and memory_gib * pod_count > quota.memory_gib:
        raise ValidationError({"memory_gib": f"{project.name} has {quota.memory_gib} GiB of memory on {pool.name}; "
                                             f"this asks for {memory_gib * pod_count}."})


def non_preemptible_units_held(*, project_id: int, pool_id: int) -> int:
    """Units held right now by the project's admitted or running non-preemptible work on the pool."""

    rows = Workload.objects.filter(project_id=project_id, node_pool_id=pool_id, preemptible=False,
                                   status__in=HOLDING_STATUSES).only("kind", "gpus", "pods", "parallelism",
                                                                     "completions")
    return sum(workload.gpu_units for workload in rows)

