"""One manifest, checked whole before anything is recorded: its kind and schema, its metadata, every pod template
(containers, resources, environment, pod security, service account, Secret references, namespaces) and its size.
Every problem is reported at once, each led by its field path. Pure: no ORM, no I/O (the caller passes what it knows
of the project, the pool and the submitter).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from apps.core.kueue_names import MANAGED_BY_LABEL
from apps.core.quantities import quantity
from apps.org.validators import validate_dns_label
from apps.workloads.models import Kind
from apps.workloads.validation import PORTAL_ENV_NAMES, RESERVED_ENV_PREFIX

from .podsecurity import pod_security_errors
from .schemas import MANIFEST_KINDS, ManifestKind, path_text, schema_errors

# What etcd keeps of one object (an API server refuses larger writes), counted as the client sends it.
MAX_OBJECT_BYTES = 1536 * 1024
MAX_ANNOTATION_BYTES = 256 * 1024  # all of an object's annotations together, as the API server allows
MAX_NAME = 40  # a workload's name (its row's), which the manifest's name becomes
RESERVED_LABEL_PREFIXES = ("portal.gpu/", "kueue.x-k8s.io/")
CLUSTER_SET_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "managedFields", "selfLink", "ownerReferences", "finalizers")
PROJECT_SERVICE_ACCOUNT = "default"
# No resource comes in 2**63 units or more (Kubernetes keeps a quantity's value in an int64); the sums and roundings
# of larger ones would overflow.
MAX_QUANTITY = Decimal(2**63)
CREDENTIAL_SECRET = re.compile(r"^portal-cred-\d+$")
NOTEBOOK_TOKEN_SECRET = re.compile(r"^wl-\d+-token$")


@dataclass(frozen=True)
class Target:
    """What the checks need to know of where the work goes and who sends it."""

    namespace: str
    project_name: str
    gpu_resource: str
    pool_name: str
    own_secrets: frozenset[str] = frozenset()  # the submitter's credential Secrets in the project
    profile: str = "baseline"
    served: frozenset[str] | None = None  # the workload kinds the cluster serves; None: not known yet


@dataclass
class PodTemplate:
    path: str  # of its pod spec
    spec: dict[str, Any]
    count: int
    name: str
    metadata: dict[str, Any] | None = None
    metadata_path: str = ""


@dataclass
class Checked:
    """A manifest that passed: its kind, its object and what it asks for, pod set by pod set."""

    entry: ManifestKind
    obj: dict[str, Any]
    name: str
    image: str
    pod_sets: list[dict[str, Any]] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)  # (field path, image) of every container

    @property
    def units(self) -> int:
        return sum(int(entry["gpus"]) * int(entry["count"]) for entry in self.pod_sets)

    @property
    def pods(self) -> int:
        return sum(int(entry["count"]) for entry in self.pod_sets)

    @property
    def gpus_per_pod(self) -> int:
        return max((int(entry["gpus"]) for entry in self.pod_sets), default=0)

    @property
    def cpu_total(self) -> Decimal:
        return sum((Decimal(entry["cpu"]) * entry["count"] for entry in self.pod_sets), Decimal(0))

    @property
    def memory_gib_total(self) -> Decimal:
        return sum((Decimal(entry["memory_gib"]) * entry["count"] for entry in self.pod_sets), Decimal(0))


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    """A list field as a list: a value of another type is the schema check's to report, not to iterate."""
    return value if isinstance(value, list) else []


def _job_pods(job_spec: dict[str, Any]) -> int:
    parallelism = _int(job_spec.get("parallelism"), 1)
    completions = job_spec.get("completions")
    return min(parallelism, completions) if isinstance(completions, int) and completions >= 0 else parallelism


def _template(template: Any, path: str, count: int, name: str) -> PodTemplate:
    template = _d(template)
    return PodTemplate(path=f"{path}.spec", spec=_d(template.get("spec")), count=count, name=name,
                       metadata=_d(template.get("metadata")), metadata_path=f"{path}.metadata")


def pod_templates(entry: ManifestKind, obj: dict[str, Any]) -> tuple[list[PodTemplate], list[str]]:
    """Every pod template of the object with how many pods run from it, and what is missing for it to have any."""
    spec = _d(obj.get("spec"))
    found: list[PodTemplate] = []
    missing: list[str] = []
    if entry.kind == Kind.JOB:
        found.append(_template(spec.get("template"), "spec.template", _job_pods(spec), "main"))
    elif entry.kind == Kind.POD:
        found.append(PodTemplate(path="spec", spec=spec, count=1, name="main", metadata=_d(obj.get("metadata")),
                                 metadata_path="metadata"))
    elif entry.kind == Kind.JOBSET:
        jobs = _l(spec.get("replicatedJobs"))
        if not jobs:
            missing.append("spec.replicatedJobs: give at least one replicated job.")
        for index, job in enumerate(jobs):
            job = _d(job)
            job_spec = _d(_d(job.get("template")).get("spec"))
            found.append(_template(job_spec.get("template"), f"spec.replicatedJobs[{index}].template.spec.template",
                                   _int(job.get("replicas"), 1) * _job_pods(job_spec), str(job.get("name", index))))
    elif entry.kind == Kind.PYTORCHJOB:
        roles = _d(spec.get("pytorchReplicaSpecs"))
        if not roles:
            missing.append("spec.pytorchReplicaSpecs: give the Master and Worker replicas.")
        for role, replica in roles.items():
            replica = _d(replica)
            found.append(_template(replica.get("template"), f"spec.pytorchReplicaSpecs.{role}.template",
                                   _int(replica.get("replicas"), 1), role.lower()))
    elif entry.kind in (Kind.RAYCLUSTER, Kind.RAYJOB):
        prefix, cluster = ("spec.rayClusterSpec", _d(spec.get("rayClusterSpec"))) if entry.kind == Kind.RAYJOB else (
            "spec", spec)
        if not cluster.get("headGroupSpec"):
            missing.append(f"{prefix}.headGroupSpec: a Ray cluster needs its head group.")
        else:
            found.append(_template(_d(cluster["headGroupSpec"]).get("template"), f"{prefix}.headGroupSpec.template", 1,
                                   "head"))
        for index, raw_group in enumerate(_l(cluster.get("workerGroupSpecs"))):
            group = _d(raw_group)
            workers = _int(group.get("replicas"), _int(group.get("minReplicas"), 1))
            found.append(_template(group.get("template"), f"{prefix}.workerGroupSpecs[{index}].template",
                                   workers * _int(group.get("numOfHosts"), 1), str(group.get("groupName", index))))
        if entry.kind == Kind.RAYJOB and spec.get("submitterPodTemplate"):
            found.append(_template(spec["submitterPodTemplate"], "spec.submitterPodTemplate", 1, "submitter"))
    elif entry.kind == Kind.LEADERWORKERSET:
        template = _d(spec.get("leaderWorkerTemplate"))
        replicas, size = _int(spec.get("replicas"), 1), _int(template.get("size"), 1)
        if template.get("leaderTemplate"):
            found.append(_template(template["leaderTemplate"], "spec.leaderWorkerTemplate.leaderTemplate", replicas,
                                   "leader"))
            size -= 1
        found.append(_template(template.get("workerTemplate"), "spec.leaderWorkerTemplate.workerTemplate",
                               replicas * max(size, 0), "worker"))
    elif entry.kind == Kind.TRAINJOB:
        trainer = _d(spec.get("trainer"))
        # The runtime supplies the pods; the trainer's node is the one container the manifest describes.
        container = {"name": "node", "image": trainer.get("image", ""), "env": _l(trainer.get("env")),
                     "resources": _d(trainer.get("resourcesPerNode"))}
        found.append(PodTemplate(path="spec.trainer", spec={"containers": [container]},
                                 count=_int(trainer.get("numNodes"), 1), name="node"))
    return found, missing


def _quantities(resources: dict[str, Any], where: str) -> tuple[dict[str, dict[str, Decimal]], list[str]]:
    errors: list[str] = []
    parsed: dict[str, dict[str, Decimal]] = {"requests": {}, "limits": {}}
    for kind in ("requests", "limits"):
        for name, value in _d(resources.get(kind)).items():
            try:
                amount = quantity(value) if not isinstance(value, bool) else None
            except ValueError:
                amount = None
            if amount is None:
                errors.append(f"{where}.{kind}.{name}: {value!r} is not a positive quantity.")
                continue
            if amount >= MAX_QUANTITY:
                errors.append(f"{where}.{kind}.{name}: {str(value)[:40]} is more than any node has.")
                continue
            if name in ("cpu", "memory") and amount <= 0:
                errors.append(f"{where}.{kind}.{name}: must be more than 0.")
                continue
            parsed[kind][name] = amount
    return parsed, errors


def _is_gpu(name: str) -> bool:
    return name.startswith(("nvidia.com/", "amd.com/", "gpu.intel.com/")) or name.endswith("/gpu")


def _container_checks(container: dict[str, Any], where: str, target: Target) -> tuple[dict[str, Decimal], list[str]]:
    """A container's requests (GPU units of the pool, cpu, memory) and every refusal of its resources and env."""
    resources, errors = _quantities(_d(container.get("resources")), f"{where}.resources")
    requests, limits = resources["requests"], resources["limits"]
    for name in sorted({*requests, *limits}):
        if not _is_gpu(name):
            continue
        at = f"{where}.resources"
        if name != target.gpu_resource:
            errors.append(f"{at}.limits.{name}: {target.pool_name} offers {target.gpu_resource}; ask for that.")
        elif name not in requests:
            errors.append(f"{at}.requests.{name}: GPU limits need the same requests (requests must equal limits).")
        elif name not in limits:
            errors.append(f"{at}.limits.{name}: GPU requests need the same limits (requests must equal limits).")
        elif requests[name] != limits[name]:
            errors.append(f"{at}.requests.{name}: GPU requests ({requests[name]}) must equal limits "
                          f"({limits[name]}).")
        elif requests[name] != requests[name].to_integral_value():
            errors.append(f"{at}.requests.{name}: GPUs come in whole units.")
    for group in ("cpu", "memory"):  # a limit alone is the request
        if group not in requests and group in limits:
            requests[group] = limits[group]
    for index, variable in enumerate(_l(container.get("env"))):
        env_name = _d(variable).get("name")
        if not isinstance(env_name, str):
            continue
        if env_name.startswith(RESERVED_ENV_PREFIX):
            errors.append(f"{where}.env[{index}].name: names starting with {RESERVED_ENV_PREFIX} are the portal's.")
        elif env_name in PORTAL_ENV_NAMES:
            errors.append(f"{where}.env[{index}].name: {env_name} is set by the portal (the wiring of distributed "
                          "training and notebooks); choose another name.")
    return requests, errors


def _secret_reference_errors(spec: dict[str, Any], path: str, target: Target) -> list[str]:
    """References to Secrets that are not the submitter's to read: another user's credential, a notebook's token."""
    names: list[tuple[str, Any]] = []
    for index, volume in enumerate(_l(spec.get("volumes"))):
        volume = _d(volume)
        names.append((f"{path}.volumes[{index}].secret.secretName", _d(volume.get("secret")).get("secretName")))
        for source_index, source in enumerate(_l(_d(volume.get("projected")).get("sources"))):
            names.append((f"{path}.volumes[{index}].projected.sources[{source_index}].secret.name",
                          _d(_d(source).get("secret")).get("name")))
    for group in ("containers", "initContainers", "ephemeralContainers"):
        for index, container in enumerate(_l(spec.get(group))):
            container = _d(container)
            for env_index, variable in enumerate(_l(container.get("env"))):
                reference = _d(_d(_d(variable).get("valueFrom")).get("secretKeyRef")).get("name")
                names.append((f"{path}.{group}[{index}].env[{env_index}].valueFrom.secretKeyRef.name", reference))
            for env_index, source in enumerate(_l(container.get("envFrom"))):
                names.append((f"{path}.{group}[{index}].envFrom[{env_index}].secretRef.name",
                              _d(_d(source).get("secretRef")).get("name")))
    errors = []
    for where, name in names:
        if not isinstance(name, str):
            continue
        if CREDENTIAL_SECRET.match(name) and name not in target.own_secrets:
            errors.append(f"{where}: {name} is another user's credential; use one of your own.")
        elif NOTEBOOK_TOKEN_SECRET.match(name):
            errors.append(f"{where}: {name} is a notebook's token, not for other work to read.")
    return errors


def _namespace_errors(value: Any, parts: list[Any], namespace: str) -> list[str]:
    """Every explicit namespace in the object other than the project's (a cross-namespace reference)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "namespace" and isinstance(item, str) and item not in ("", namespace) and parts != ["metadata"]:
                found.append(f"{path_text([*parts, key])}: names namespace {item!r}; a manifest may only refer to its "
                             f"project's namespace ({namespace}).")
            else:
                found += _namespace_errors(item, [*parts, key], namespace)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _namespace_errors(item, [*parts, index], namespace)
    return found


def reserved_key(key: Any) -> bool:
    """A label or annotation the portal or Kueue sets: a submitter may not."""
    return str(key).startswith(RESERVED_LABEL_PREFIXES) or key == MANAGED_BY_LABEL


def _reserved_keys(mapping: Any, where: str, what: str) -> list[str]:
    return [f"{where}.{key}: the {what} {key} is the portal's or Kueue's to set; leave it out."
            for key in _d(mapping) if reserved_key(key)]


def metadata_errors(obj: dict[str, Any], target: Target) -> list[str]:
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return ["metadata: give the object's metadata with at least its name."]
    errors = []
    name = metadata.get("name")
    if "generateName" in metadata:
        errors.append("metadata.generateName: give a name instead; the portal names the object itself.")
    if not isinstance(name, str) or not name:
        errors.append("metadata.name: required: a DNS label you will recognise, e.g. resnet-sweep-3.")
    else:
        try:
            validate_dns_label(name)
        except Exception as error:
            errors += [f"metadata.name: {message}" for message in getattr(error, "messages", [str(error)])]
        if len(name) > MAX_NAME:
            errors.append(f"metadata.name: at most {MAX_NAME} characters.")
    namespace = metadata.get("namespace")
    if namespace not in (None, "", target.namespace):
        errors.append(f"metadata.namespace: {namespace!r} is not {target.project_name}'s namespace; its work runs in "
                      f"{target.namespace} (leave the namespace out). Nothing was moved.")
    for key in CLUSTER_SET_METADATA:
        if key in metadata:
            errors.append(f"metadata.{key}: set by the cluster or the portal; leave it out.")
    for key in metadata:
        if key not in ("name", "namespace", "labels", "annotations", "generateName", *CLUSTER_SET_METADATA):
            errors.append(f"metadata.{key}: unknown field.")
    for what in ("labels", "annotations"):
        values = metadata.get(what)
        if values is None:
            continue
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            errors.append(f"metadata.{what}: give a mapping of strings.")
            continue
        errors += _reserved_keys(values, f"metadata.{what}", what[:-1])
    annotations = _d(metadata.get("annotations"))
    size = sum(len(str(k)) + len(str(v).encode()) for k, v in annotations.items())
    if size > MAX_ANNOTATION_BYTES:
        errors.append(f"metadata.annotations: {-(-size // 1024)} KiB; at most {MAX_ANNOTATION_BYTES // 1024} KiB "
                      "together.")
    if "status" in obj:
        errors.append("status: set by the cluster; leave it out.")
    return errors


def check_manifest(obj: dict[str, Any], target: Target) -> tuple[Checked | None, list[str]]:
    """The checked manifest, or every refusal (field path first)."""
    api_version, kind_name = obj.get("apiVersion"), obj.get("kind")
    entry = MANIFEST_KINDS.get(kind_name) if isinstance(kind_name, str) else None
    if entry is None:
        known = ", ".join(sorted(MANIFEST_KINDS))
        return None, [f"kind: {kind_name!r} is not a kind the portal submits; one of {known}."]
    if api_version != entry.api_version:
        return None, [f"apiVersion: {kind_name} is submitted as {entry.api_version}, not {api_version!r}."]
    if target.served is not None and entry.kind not in target.served:
        return None, [f"kind: this cluster does not serve {entry.name} ({entry.api_version}); ask an admin to install "
                      "it, or submit another kind."]
    errors = metadata_errors(obj, target)
    errors += schema_errors(entry, obj)
    errors += _namespace_errors({k: v for k, v in obj.items() if k != "metadata"}, [], target.namespace)
    templates, missing = pod_templates(entry, obj)
    errors += missing
    pod_sets = []
    image = ""
    images: list[tuple[str, str]] = []
    for template in templates:
        spec = template.spec
        containers = spec.get("containers")
        if not isinstance(containers, list) or not containers:
            errors.append(f"{template.path}.containers: at least one container is required.")
            continue
        if template.metadata:
            errors += _reserved_keys(template.metadata.get("labels"), f"{template.metadata_path}.labels", "label")
        totals: dict[str, Decimal] = {}
        for index, container in enumerate(containers):
            if not isinstance(container, dict):
                continue
            image = image or str(container.get("image") or "")
            images.append((f"{template.path}.containers[{index}].image", str(container.get("image") or "")))
            if entry.kind != Kind.TRAINJOB and not container.get("image"):
                errors.append(f"{template.path}.containers[{index}].image: required.")
            requests, problems = _container_checks(container, f"{template.path}.containers[{index}]", target)
            errors += problems
            for name, amount in requests.items():
                totals[name] = totals.get(name, Decimal(0)) + amount
        for index, container in enumerate(_l(spec.get("initContainers"))):
            if isinstance(container, dict):
                images.append((f"{template.path}.initContainers[{index}].image", str(container.get("image") or "")))
                requests, problems = _container_checks(container, f"{template.path}.initContainers[{index}]", target)
                errors += problems
                for name, amount in requests.items():
                    totals[name] = max(totals.get(name, Decimal(0)), amount)
        if entry.kind != Kind.TRAINJOB:
            errors += pod_security_errors(spec, template.path, profile=target.profile,
                                          annotations=_d((template.metadata or {}).get("annotations")),
                                          annotations_path=f"{template.metadata_path}.annotations")
            account = spec.get("serviceAccountName") or spec.get("serviceAccount")
            if account not in (None, "", PROJECT_SERVICE_ACCOUNT):
                errors.append(f"{template.path}.serviceAccountName: {account!r} is not the project's service account "
                              f"({PROJECT_SERVICE_ACCOUNT}); leave it out.")
            errors += _secret_reference_errors(spec, template.path, target)
        gpus = totals.get(target.gpu_resource, Decimal(0))
        pod_sets.append({"name": template.name, "count": template.count, "gpus": int(gpus),
                         "cpu": str(totals.get("cpu", Decimal(0)).quantize(Decimal("0.001"))),
                         "memory_gib": str((totals.get("memory", Decimal(0)) / 2**30).quantize(Decimal("0.01")))})
    size = len(json.dumps(obj).encode())
    if size > MAX_OBJECT_BYTES:
        errors.append(f"manifest: the object comes to {-(-size // 1024)} KiB as sent to the API server; at most "
                      f"{MAX_OBJECT_BYTES // 1024} KiB.")
    if errors:
        return None, list(dict.fromkeys(errors))
    name = str(obj["metadata"]["name"])
    return Checked(entry=entry, obj=obj, name=name, image=image[:255], pod_sets=pod_sets, images=images), []
