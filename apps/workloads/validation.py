"""What can never run, refused before anything is saved, with a message that says why and what to change.

Every check reports every problem it finds (field -> messages), so a form or an API answer shows them all at once.
"""

from __future__ import annotations

import re
from decimal import Decimal
from math import ceil
from typing import Any

from django.core.exceptions import ValidationError

from apps.core.actors import Actor
from apps.org.models import DataSource, NodePool, Project, Quota
from apps.org.validators import mount_collisions, validate_dns_label, validate_label_value

from . import notebooks
from .capacity import DepartmentQuota, PoolTree, ProjectQuota
from .models import (
    HOLDING_STATUSES,
    LIVE_STATUSES,
    MAX_GPU_FRACTION,
    MAX_PODS,
    MIN_GPU_FRACTION,
    Credential,
    Framework,
    Kind,
    Workload,
)

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
# The variables the portal sets itself in every pod that needs them (worker/manifests.py): a distributed training's
# launcher wiring and a notebook's token. A user's value would silently break that wiring, so they are refused.
PORTAL_ENV_NAMES = frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NNODES", "NPROC_PER_NODE", "RANK",
                              "NODE_RANK", notebooks.TOKEN_ENV})
MAX_ARGUMENTS = 256
MAX_ARGUMENT_LENGTH = 4096
MAX_ENV = 128
# The Job carries every value: an API server refuses objects over about 1.5 MiB (etcd's request limit), so a value
# is at most 256 KiB and all of them together at most 1 MiB (UTF-8 bytes, names included).
MAX_ENV_VALUE_BYTES = 256 * 1024
MAX_ENV_TOTAL_BYTES = 1024 * 1024


Errors = dict[str, list[str]]


def _add(errors: Errors, field: str, messages: list[str]) -> None:
    if messages:
        errors.setdefault(field, []).extend(messages)


def image_errors(image: Any) -> list[str]:
    if not isinstance(image, str) or not image or len(image) > 255 or not IMAGE_REFERENCE.match(image):
        return [f"{image!r} is not a valid image reference; use e.g. nvcr.io/nvidia/pytorch:24.05-py3."]
    return []


def _string_list_errors(values: Any) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return ["Give a list of strings."]
    errors = []
    if len(values) > MAX_ARGUMENTS:
        errors.append(f"At most {MAX_ARGUMENTS} entries.")
    if any(len(v) > MAX_ARGUMENT_LENGTH or "\x00" in v for v in values):
        errors.append(f"Each entry must be under {MAX_ARGUMENT_LENGTH} characters, without NUL.")
    return errors


def env_errors(env: Any) -> list[str]:
    """Every problem of the variables, one message each."""
    if not isinstance(env, list) or len(env) > MAX_ENV:
        return [f"Give at most {MAX_ENV} variables as a list of name/value pairs."]
    errors = []
    seen = set()
    total = 0
    for item in env:
        if not isinstance(item, dict) or set(item) != {"name", "value"} or not all(
                isinstance(item[key], str) for key in ("name", "value")):
            errors.append("Each variable needs a name and a string value.")
            continue
        name, size = item["name"], len(item["value"].encode(errors="surrogatepass"))
        if not ENV_NAME.match(name) or len(name) > 253:
            errors.append(f"{name!r} is not a valid environment variable name (letters, digits, '_', '-', '.', not "
                          "starting with a digit).")
        elif name.startswith(RESERVED_ENV_PREFIX):
            errors.append(f"Names starting with {RESERVED_ENV_PREFIX} are set by the portal.")
        elif name in PORTAL_ENV_NAMES:
            errors.append(f"{name} is set by the portal (the wiring of distributed training and notebooks); choose "
                          "another name.")
        elif name in seen:
            errors.append(f"{name} is set twice.")
        elif "\x00" in item["value"]:
            errors.append(f"The value of {name} contains a NUL character; remove it.")
        elif size > MAX_ENV_VALUE_BYTES:
            errors.append(f"The value of {name} is {_kib(size)}; at most {_kib(MAX_ENV_VALUE_BYTES)} per value. Pass "
                          "large data as a file in a data source instead.")
        seen.add(name)
        total += len(name) + size
    if total > MAX_ENV_TOTAL_BYTES:
        errors.append(f"The variables come to {_kib(total)}; at most {_kib(MAX_ENV_TOTAL_BYTES)} in all (the Job "
                      "must stay under what the API server takes). Pass large data as a file in a data source.")
    return errors


def _kib(size: int) -> str:
    return f"{-(-size // 1024)} KiB"


def _label_errors(value: str, what: str) -> list[str]:
    if not value:
        return [f"The {what} audit label is required."]
    try:
        validate_label_value(value)
    except ValidationError as exc:
        return list(exc.messages)
    return []


def shape_errors(values: dict[str, Any]) -> Errors:
    """Checks that need no database (names, image, command, env, labels, CPU and memory, sizes per kind), every one
    of them: a field missing from `values` is not checked (its value is not known)."""
    errors: Errors = {}
    if "name" in values:
        try:
            validate_dns_label(values["name"])
        except ValidationError as exc:
            _add(errors, "name", list(exc.messages))
    if "image" in values:
        _add(errors, "image", image_errors(values["image"]))
    for field in ("command", "args"):
        if field in values:
            _add(errors, field, _string_list_errors(values[field]))
    command = values.get("command")
    if isinstance(command, list) and command and isinstance(command[0], str) and not command[0].strip():
        _add(errors, "command", ["The command's first entry is the program to run; it cannot be empty. Leave the "
                                 "whole command empty to keep the image's own."])
    if values.get("cpu") == 0:  # -0 too; a negative number meets the model's bound
        _add(errors, "cpu", ['Give a positive number of CPU cores, e.g. 4 or "500m".'])
    if values.get("memory_gib") == 0:
        _add(errors, "memory_gib", ['Give a positive amount of memory, e.g. "16Gi" or "512Mi".'])
    if "env" in values:
        _add(errors, "env", env_errors(values["env"]))
    if "model_label" in values:
        _add(errors, "model_label", _label_errors(values["model_label"], "model"))
    if "data_class" in values:
        _add(errors, "data_class", _label_errors(values["data_class"], "data class"))
    kind, pods = values["kind"], values.get("pods")
    if kind == Kind.NOTEBOOK and pods not in (None, 1):
        _add(errors, "pods", ["A notebook runs in exactly one pod."])
    elif kind != Kind.TRAINING and pods not in (None, 1):
        _add(errors, "pods", ["Only training runs several pods as one gang; use completions for batch."])
    elif kind == Kind.TRAINING and pods is not None and pods > MAX_PODS:
        _add(errors, "pods", [f"At most {MAX_PODS} pods."])
    parallelism, completions = values.get("parallelism"), values.get("completions")
    if kind == Kind.BATCH and parallelism is not None and completions is not None and parallelism > completions:
        _add(errors, "parallelism", ["Parallelism cannot exceed the number of completions."])
    return errors


def template_shape_errors(kind: str, values: dict[str, Any]) -> Errors:
    """Every shape error a submission with these template values would meet, by field (what the template leaves
    out is the submitter's to fill in, so it is not checked). Empty when a submission would pass."""
    return shape_errors({**values, "kind": kind})


def fits_errors(*, project: Project, pool: NodePool, units: int | None, gpus: int | None, preemptible: bool,
                cpu: Decimal | None, memory_gib: Decimal | None, pod_count: int | None,
                gpu_fraction: Decimal | None = None) -> Errors:
    """Everything this project could never run on this pool, whatever else is running: every refusal (None: that
    size is not known, so the checks that need it are left out). A KAI pool is judged as KAI Scheduler judges its
    queues (`_kai_fits_errors`); `gpu_fraction`, a share of one card, counts as that much of a unit there."""
    if pool.serving:  # no queue there: a serving pool holds inference services only
        return {"node_pool": [f"{pool.name} is a serving pool: only inference services run there. Choose another "
                              "pool, or submit an inference service."]}
    pool_quotas = list(Quota.objects.filter(node_pool=pool).select_related("project"))
    quota = next((q for q in pool_quotas if q.project_id == project.pk), None)
    if quota is None:
        return {"node_pool": [f"{project.name} has no quota on {pool.name}; choose a pool listed for the project or "
                              "ask your department admin for quota there."]}
    if pool.kai:
        amount = gpu_fraction if gpu_fraction is not None else units
        return _kai_fits_errors(project=project, pool=pool, quota=quota, pool_quotas=pool_quotas, amount=amount,
                                gpus=gpus, preemptible=preemptible, cpu=cpu, memory_gib=memory_gib,
                                pod_count=pod_count)
    errors: Errors = {}
    if gpus is not None and gpus > pool.capacity:
        _add(errors, "gpus", [f"{pool.name} has {pool.capacity} units in all; one pod cannot ask for {gpus}."])
    if units is not None:
        if quota.limit is not None and units > quota.limit:
            _add(errors, "gpus", [f"This asks for {units} {pool.name} units but {project.name} may use at most "
                                  f"{quota.limit} there (its limit); ask for fewer GPUs or pods."])
        if units > pool.capacity and not pool.over_subscribable:
            _add(errors, "gpus", [f"This asks for {units} units but {pool.name} only has {pool.capacity}."])
        if not preemptible and units > quota.deserved:
            _add(errors, "preemptible", [
                f"Non-preemptible work must fit in {project.name}'s deserved quota on {pool.name} ({quota.deserved} "
                f"units) and this asks for {units}. Mark it preemptible to use idle capacity, or ask for fewer GPUs."])
        if preemptible and "gpus" not in errors and units > (most := preemptible_most(project, pool, pool_quotas)):
            why = (f" ({project.name} does not lend its deserved quota, even to its own preemptible work, and its "
                   "limit leaves no over-quota)" if project.does_not_lend and most == 0 else "")
            change = (f"Mark it non-preemptible to run inside the deserved quota ({quota.deserved} units), or ask for "
                      "fewer GPUs." if units <= quota.deserved else "Ask for fewer GPUs.")
            _add(errors, "preemptible", [f"Preemptible work of {project.name} can hold at most {most} {pool.name} "
                                         f"units, even with the pool idle{why}; this asks for {units}. {change}"])
    if pod_count is not None and cpu is not None and quota.cpu_cores is not None and cpu * pod_count > quota.cpu_cores:
        _add(errors, "cpu", [f"{project.name} has {quota.cpu_cores} CPU cores on {pool.name}; this asks for "
                             f"{cpu * pod_count}."])
    if pod_count is not None and memory_gib is not None and quota.memory_gib is not None and \
            memory_gib * pod_count > quota.memory_gib:
        _add(errors, "memory_gib", [f"{project.name} has {quota.memory_gib} GiB of memory on {pool.name}; this asks "
                                    f"for {memory_gib * pod_count}."])
    return errors


def _units_text(amount: Decimal | int) -> str:
    return format(Decimal(amount).normalize(), "f")


def _kai_fits_errors(*, project: Project, pool: NodePool, quota: Quota, pool_quotas: list[Quota],
                     amount: Decimal | int | None, gpus: int | None, preemptible: bool, cpu: Decimal | None,
                     memory_gib: Decimal | None, pod_count: int | None) -> Errors:
    """What KAI Scheduler would never schedule for this project on a KAI pool, whatever else runs (README, Kueue and
    KAI in one cluster): the project's quota row is its leaf Queue (worker/kai_objects.py), whose limit, and its
    department's, cap everything it holds (KAI's OverLimit; a limit of 0 allows nothing); non-preemptible work must
    fit the deserved quota (KAI's NonPreemptibleOverQuota), for GPUs, CPU and memory alike, while preemptible work may
    go over it up to the limits, where KAI's reclaim takes it back. KAI lends every idle deserved GPU, so Kueue's "does
    not lend" has no part here."""
    errors: Errors = {}
    if gpus is not None and gpus > pool.capacity:
        _add(errors, "gpus", [f"{pool.name} has {pool.capacity} units in all; one pod cannot ask for {gpus}."])
    if amount is not None:
        asked = _units_text(amount)
        department = next((q for q in pool_quotas if q.department_id is not None
                           and q.department_id == project.department_id), None)
        for owner, row in ((project.name, quota), (project.department.name, department)):
            if row is not None and row.limit is not None and amount > row.limit:
                most = "no units" if row.limit == 0 else f"at most {row.limit} units"
                _add(errors, "gpus", [f"This asks for {asked} {pool.name} units but {owner} may hold {most} there (its "
                                      "limit, which KAI Scheduler enforces); ask for fewer GPUs or pods."])
        if amount > pool.capacity and not pool.over_subscribable:
            _add(errors, "gpus", [f"This asks for {asked} units but {pool.name} only has {pool.capacity}."])
        if not preemptible and amount > quota.deserved:
            _add(errors, "preemptible", [
                f"Non-preemptible work must fit in {project.name}'s deserved quota on {pool.name} ({quota.deserved} "
                f"units) and this asks for {asked}. Mark it preemptible to use idle capacity, or ask for fewer GPUs."])
    if not preemptible and pod_count is not None:  # KAI's quota for CPU and memory is deserved, not a cap
        if cpu is not None and quota.cpu_cores is not None and cpu * pod_count > quota.cpu_cores:
            _add(errors, "cpu", [f"Non-preemptible work must fit in {project.name}'s {quota.cpu_cores} CPU cores on "
                                 f"{pool.name}; this asks for {cpu * pod_count}. Mark it preemptible, or ask for "
                                 "fewer cores."])
        if memory_gib is not None and quota.memory_gib is not None and memory_gib * pod_count > quota.memory_gib:
            _add(errors, "memory_gib", [f"Non-preemptible work must fit in {project.name}'s {quota.memory_gib} GiB of "
                                        f"memory on {pool.name}; this asks for {memory_gib * pod_count}. Mark it "
                                        "preemptible, or ask for less memory."])
    return errors


def gpu_fraction_errors(*, pool: NodePool | None, kind: str, gpus: int | None, gpu_fraction: Decimal | None,
                        pod_count: int | None, framework: str = "") -> Errors:
    """Whether a share of one GPU may be asked for here, every reason it may not (README, Kueue and KAI in one
    cluster): only KAI Scheduler places fractions, only on pools that share cards, only for one pod (a notebook, a
    one-pod training, a batch run one pod at a time), and instead of whole GPUs. Without a fraction, whole GPUs
    (at least one) are asked for. None: that value is not known, so the checks that need it are left out."""
    errors: Errors = {}
    if gpu_fraction is None:
        if gpus == 0:
            _add(errors, "gpus", ["Ask for at least 1 GPU, or for a fraction of one (gpu_fraction) on a KAI pool "
                                  "that shares GPUs."])
        return errors
    if not MIN_GPU_FRACTION <= gpu_fraction <= MAX_GPU_FRACTION or gpu_fraction != round(gpu_fraction, 2):
        _add(errors, "gpu_fraction", ["Give a share of one GPU above 0 and below 1, in hundredths, e.g. 0.25, 0.5 or "
                                      "0.75."])
    if pool is not None and not (pool.kai and pool.gpu_fractions):
        why = ("is scheduled by Kueue, which counts whole GPUs" if not pool.kai else
               "is scheduled by KAI Scheduler without GPU sharing")
        _add(errors, "gpu_fraction", [f"{pool.name} {why}: a fraction of a GPU runs only on a KAI pool with GPU "
                                      "fractions on. Choose such a pool, or ask for whole GPUs."])
    if pod_count is not None and pod_count != 1:
        what = "training runs" if kind == Kind.TRAINING else "batch run runs"
        _add(errors, "gpu_fraction", [f"This {what} {pod_count} pods at once; a fraction of a GPU is for a single pod "
                                      "(a notebook, a one-pod training, a batch run with parallelism 1). Ask for "
                                      "whole GPUs, or run one pod."])
    if framework and framework != Framework.NONE:
        _add(errors, "gpu_fraction", ["A framework's operator starts its own pods, which take whole GPUs; leave the "
                                      "framework out to run on a fraction."])
    if gpus:
        _add(errors, "gpus", [f"With a fraction of a GPU the pod asks for no whole GPUs: set GPUs to 0 (this asks for "
                              f"{gpus} and {_units_text(gpu_fraction)})."])
    return errors


def kai_pool_errors(*, project: Project, pool: NodePool, preemptible: bool, framework: str = "",
                    held_projects: set[int] | None = None, held_departments: set[int] | None = None) -> Errors:
    """What the portal offers only through Kueue's queues, refused on a KAI pool with the field it concerns (README,
    Kueue and KAI in one cluster): a framework's object (its operator's Kueue integration queues it), and
    preemptible work while a budget holds the project's (Kueue holds it in its LocalQueue; KAI has no hold, so it
    would start at once)."""
    errors: Errors = {}
    if framework and framework != Framework.NONE:
        _add(errors, "framework", [f"{pool.name} is scheduled by KAI Scheduler, where the portal runs its own Jobs "
                                   "only; leave the framework out, or choose a Kueue pool."])
    held = project.pk in (held_projects or set()) or project.department_id in (held_departments or set())
    if preemptible and held:
        _add(errors, "preemptible", [f"{project.name}'s budget is spent, so its new preemptible work is held; "
                                     f"{pool.name} is scheduled by KAI Scheduler, which cannot hold work, so it is "
                                     "refused there. Mark it non-preemptible (within the deserved quota), or wait "
                                     "until the budget is raised or the period rolls over."])
    return errors


def preemptible_most(project: Project, pool: NodePool, pool_quotas: list[Quota]) -> int:
    """The most units the project's preemptible work (its elastic queue) could ever hold on the pool: Kueue's
    potential available capacity on the pool's cohort tree with every queue idle (from the pool's quotas, each with
    its project)."""
    tree = PoolTree.build(
        capacity=pool.capacity,
        departments=[DepartmentQuota(q.department_id, q.deserved, q.limit) for q in pool_quotas
                     if q.department_id is not None],
        projects=[ProjectQuota(q.project.pk, q.project.department_id, q.deserved, q.limit,
                               lends=not q.project.does_not_lend) for q in pool_quotas if q.project is not None])
    assessment = tree.assess(project_id=project.pk, guaranteed=False, units=0)
    return 0 if assessment is None else int(max(assessment.potential, Decimal(0)))


def non_preemptible_amount_held(*, project_id: int, pool_id: int) -> Decimal:
    """GPUs held right now by the project's admitted or running non-preemptible work on the pool, a share of a card on
    a KAI pool (`gpu_fraction`) as that share: what KAI Scheduler adds up in a queue's non-preemptible allocation."""
    rows = Workload.objects.filter(project_id=project_id, node_pool_id=pool_id, preemptible=False,
                                   status__in=HOLDING_STATUSES).only(
        "kind", "origin", "gpus", "gpu_fraction", "pods", "parallelism", "completions", "replicas", "pod_sets",
        "pod_set_units")
    return sum((workload.gpu_amount for workload in rows), Decimal(0))


def non_preemptible_units_held(*, project_id: int, pool_id: int) -> int:
    """Whole units held right now by the project's admitted or running non-preemptible work on the pool: the least
    deserved quota that work still fits in.

    The sum of `non_preemptible_amount_held` rounded up to whole units: KAI Scheduler keeps a queue's
    non-preemptible allocation within the deserved quota, which the portal gives in whole units, so a deserved quota
    at or above the rounded-up sum holds all of it and one below does not. Adding before rounding keeps two halves
    on one deserved card, as KAI packs them."""
    return ceil(non_preemptible_amount_held(project_id=project_id, pool_id=pool_id))


def running_non_preemptible_quota_errors(*, quota: Quota, **_: Any) -> Errors:
    """Refuse lowering a project's deserved quota below what its running non-preemptible work holds: the guarantee
    that work relies on. A receiver of apps.org.signals.quota_size_proposed (connected in WorkloadsConfig.ready)."""
    if not quota.project_id:
        return {}
    held = non_preemptible_units_held(project_id=quota.project_id, pool_id=quota.node_pool_id)
    if quota.deserved < held:
        return {"deserved": [
            f"Running non-preemptible work in this project holds {held} {quota.node_pool.slug} units; the deserved "
            "quota cannot go below that until it finishes or is stopped."]}
    return {}


def live_work_scheduler_errors(*, node_pool: NodePool, **_: Any) -> Errors:
    """Refuse moving a pool to another scheduler while work is live on it: that work sits in the queues of the one it
    has, which the other would neither see nor keep. A receiver of apps.org.signals.node_pool_scheduler_change_proposed
    (connected in WorkloadsConfig.ready)."""
    live = Workload.objects.filter(node_pool_id=node_pool.pk, status__in=LIVE_STATUSES).count()
    if not live:
        return {}
    return {"scheduler": [
        f"{live} workload{'s are' if live != 1 else ' is'} live on {node_pool.slug} (queued, admitted, running or "
        "stopping); its scheduler cannot change until they finish or are stopped: that work sits in the queues of "
        "the scheduler the pool has now."]}


SHM_PATH = "/dev/shm"  # noqa: S108 - the container's shared memory, not a temporary file


def attachments_errors(*, project: Project | None, owner: Actor, data_sources: list[DataSource],
                       credentials: list[Credential], shm_gib: Decimal | None,
                       memory_gib: Decimal | None) -> Errors:
    """What the chosen data sources, credentials and shared memory could never do in this project: sources and
    credentials of another project (or another user), mounts over each other, keys set twice, shm beyond memory."""
    errors: Errors = {}
    if project is not None:
        foreign = [source.name for source in data_sources if source.project_id != project.pk]
        if foreign:
            _add(errors, "data_sources", [f"Not a data source of {project.name}: {', '.join(foreign)}."])
        not_yours = [c.name for c in credentials if c.project_id != project.pk or c.owner_id != getattr(
            owner, "pk", None) or c.deleted_at is not None]
        if not_yours:
            _add(errors, "credentials", [f"Not one of your credentials in {project.name}: {', '.join(not_yours)}."])
    _add(errors, "data_sources", mount_collisions([(f"data source {s.name}", s.mount_path) for s in data_sources]))
    seen: dict[str, str] = {}
    for credential in credentials:
        for key in credential.keys:
            if key in seen and seen[key] != credential.name:
                _add(errors, "credentials", [f"{key} is set by both {seen[key]} and {credential.name}; pick one."])
            seen.setdefault(key, credential.name)
    if shm_gib is not None:
        if shm_gib <= 0:
            _add(errors, "shm_gib", ["Give a positive size, or leave it empty for the container default (64 MiB)."])
        elif memory_gib is not None and shm_gib > memory_gib:
            _add(errors, "shm_gib", [f"Shared memory counts in the pod's memory: at most {memory_gib} GiB here "
                                     "(raise the memory or lower this)."])
    return errors
