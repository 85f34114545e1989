"""What kube-apiserver's built-in registry strategies add for core and batch kinds: defaults and the
cross-field rules a schema cannot express (Job selector and labels, restartPolicy, template immutability)."""

from __future__ import annotations

import base64
import contextlib
from decimal import Decimal
from typing import Any

from kubesim.apiserver import admission_policies
from kubesim.apiserver.validation import cel, core
from kubesim.kernel.metadata import Cause
from kubesim.kernel.quantity import QuantityError, decimal_value

JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
CONTROLLER_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")


def default_pod_spec(spec: dict) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for c in [c for key in ("containers", "initContainers") if isinstance(spec.get(key), list) for c in spec[key]]:
        if isinstance(c, dict):
            image = str(c.get("image", ""))
            tag_latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
            c.setdefault("imagePullPolicy", "Always" if tag_latest else "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})


def apply_defaults(resource: str, obj: dict, old: dict | None) -> None:
    """Defaults applied on create/update before webhooks, as the registry strategies do."""
    spec = obj.get("spec")
    if resource == "pods" and isinstance(spec, dict):
        default_pod_spec(spec)
        _default_requests_from_limits(spec)
        if old is None:
            obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
    elif resource == "jobs" and isinstance(spec, dict):
        _default_job(spec)
    elif resource == "deployments" and isinstance(spec, dict):
        _default_deployment(spec)
    elif resource == "secrets":
        if isinstance(obj.get("stringData"), dict):
            _merge_string_data(obj)
        if not obj.get("type"):
            obj["type"] = "Opaque"  # SetDefaults_Secret
    elif resource == "namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        if old is None:
            obj["status"] = {"phase": "Active"}
        labels = obj.setdefault("metadata", {}).setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"].get("name", "")


def resolve_priority(store: Any, pod: dict) -> None:
    """The Priority admission plugin at a pod's creation (through the API or by a controller): the value and
    preemption policy of the PriorityClass its spec.priorityClassName names. kubesim leaves a pod naming a class that
    does not exist as it is (Kubernetes refuses it; kubesim/README.md, KAI Scheduler)."""
    spec = pod.get("spec")
    name = spec.get("priorityClassName") if isinstance(spec, dict) else None
    priority_class = store.get("priorityclasses", None, name, copy=False) if isinstance(name, str) and name else None
    if priority_class is None or not isinstance(spec, dict):
        return
    spec["priority"] = int(priority_class.get("value") or 0)
    spec["preemptionPolicy"] = priority_class.get("preemptionPolicy") or "PreemptLowerPriority"


QOS_RESOURCES = ("cpu", "memory")


def qos_class(spec: dict) -> str:
    """The pod's QoS class as kube-apiserver computes it at creation (ComputePodQOS, over cpu and memory only):
    BestEffort without any positive request or limit; Guaranteed when every container (init containers included)
    limits both and the summed requests equal the summed limits; Burstable otherwise. Pod-level resources, when
    set, decide alone."""
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True

    def positive(resources: object) -> dict[str, Decimal]:
        out = {}
        for name, value in (resources or {}).items() if isinstance(resources, dict) else ():
            if name in QOS_RESOURCES:
                with contextlib.suppress(QuantityError):
                    if (amount := decimal_value(value)) > 0:
                        out[name] = amount
        return out

    pod_level = spec.get("resources")
    containers = [c for key in ("containers", "initContainers") if isinstance(spec.get(key), list) for c in spec[key]]
    owners = [pod_level] if isinstance(pod_level, dict) and pod_level else [
        c.get("resources") or {} for c in containers if isinstance(c, dict)
    ]
    for resources in owners:
        for name, amount in positive(resources.get("requests")).items():
            requests[name] = requests.get(name, Decimal(0)) + amount
        found = positive(resources.get("limits"))
        for name, amount in found.items():
            limits[name] = limits.get(name, Decimal(0)) + amount
        if set(found) != set(QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def _merge_string_data(secret: dict) -> None:
    """The Secret strategy: stringData is write-only, merged into data (base64) and never stored or returned."""
    data: dict = secret["data"] if isinstance(secret.get("data"), dict) else {}
    for key, value in secret.pop("stringData").items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    secret["data"] = data


def _default_requests_from_limits(spec: dict) -> None:
    """SetDefaults_Pod: a Pod's (not a pod template's) containers request what they limit unless told otherwise."""
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        for c in containers if isinstance(containers, list) else []:
            resources = c.get("resources") if isinstance(c, dict) else None
            if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
                requests = resources.setdefault("requests", {})
                if isinstance(requests, dict):
                    for name, value in resources["limits"].items():
                        requests.setdefault(name, value)


def _default_deployment(spec: dict) -> None:
    """apps/v1 SetDefaults_Deployment: one replica, a RollingUpdate of 25% surge and 25% unavailable, ten old
    ReplicaSets kept, a 600 s progress deadline."""
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", "25%")
                rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)


def _default_job(spec: dict) -> None:
    """completions defaults to 1 only when parallelism is unset too (a work-queue Job keeps it nil)."""
    if spec.get("parallelism") is None and spec.get("completions") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"])


def label_job(job: dict) -> None:
    """Selector and template labels the Job strategy sets from the new Job's uid."""
    md = job["metadata"]
    spec = job["spec"]
    if spec.get("manualSelector"):
        return
    labels = {
        CONTROLLER_UID_LABELS[0]: md["uid"],
        JOB_NAME_LABELS[0]: md["name"],
        CONTROLLER_UID_LABELS[1]: md["uid"],
        JOB_NAME_LABELS[1]: md["name"],
    }
    spec["selector"] = {"matchLabels": {CONTROLLER_UID_LABELS[0]: md["uid"]}}
    tmd = spec["template"].setdefault("metadata", {})
    tmd["labels"] = {**(tmd.get("labels") or {}), **labels}


def validate(resource: str, obj: dict, old: dict | None) -> list[Cause]:
    causes = core.validate(resource, obj, old)
    if resource == "jobs":
        causes += _validate_job(obj, old)
    elif resource == "pods" and old is not None:
        causes += _immutable_pod(obj, old)
    elif resource == "mutatingadmissionpolicies":
        causes += _policy_expressions(obj)
    return causes


def _policy_expressions(policy: dict) -> list[Cause]:
    """Every CEL expression of a MutatingAdmissionPolicy compiles (kube refuses one that does not; kubesim's CEL
    subset is what it can compile)."""
    causes = []
    for path, source in admission_policies.expressions(policy):
        try:
            cel.compile_rule(source)
        except cel.CELError as error:
            causes.append(Cause(path, "FieldValueInvalid", f"Invalid value: {source!r}: compilation failed: {error}"))
    return causes


def _validate_job(obj: dict, old: dict | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = obj.get("spec") or {}
    tspec = (spec.get("template") or {}).get("spec") or {}
    policy = tspec.get("restartPolicy")
    if policy not in ("OnFailure", "Never"):
        causes.append(
            Cause(
                "spec.template.spec.restartPolicy",
                "FieldValueNotSupported",
                f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"',
            )
        )
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        causes.append(
            Cause("spec.completions", "FieldValueRequired", "Required value: when completion mode is Indexed")
        )
    if old is None:
        return causes
    old_spec = old.get("spec") or {}
    for field in ("completionMode", "selector", "podFailurePolicy", "backoffLimitPerIndex"):
        if spec.get(field) != old_spec.get(field):
            causes.append(
                Cause(
                    f"spec.{field}",
                    "FieldValueInvalid",
                    f"Invalid value: {_short(spec.get(field))}: field is immutable",
                )
            )
    if spec.get("template") != old_spec.get("template") and not _template_mutable(spec, old_spec, old):
        causes.append(Cause("spec.template", "FieldValueInvalid", 'Invalid value: "object": field is immutable'))
    if spec.get("completions") != old_spec.get("completions") and spec.get("completionMode") != "Indexed":
        causes.append(
            Cause(
                "spec.completions",
                "FieldValueInvalid",
                f"Invalid value: {_short(spec.get('completions'))}: field is immutable",
            )
        )
    return causes


def _template_mutable(spec: dict, old_spec: dict, old: dict) -> bool:
    """The pod template may change only while the Job is suspended and has never started (status.startTime nil)."""
    return bool(old_spec.get("suspend")) and not (old.get("status") or {}).get("startTime")


def _scheduling_gates_update(spec: dict, old_spec: dict) -> list[Cause]:
    """ValidatePodUpdate for gated pods: gates may only be removed (validateOnlyDeletedSchedulingGates), and while the
    old pod is gated its nodeSelector may gain keys but not change or lose any (validateNodeSelectorMutation)."""
    causes = core.scheduling_gates(spec.get("schedulingGates"), "spec.schedulingGates")
    old_names = {_dict(g).get("name") for g in old_spec.get("schedulingGates") or []}
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        name = _dict(gate).get("name")
        if name not in old_names:
            causes.append(
                Cause(
                    f"spec.schedulingGates[{i}].name",
                    "FieldValueForbidden",
                    f"Forbidden: only deletion is allowed, but found new scheduling gate '{name}'",
                )
            )
    if old_spec.get("schedulingGates"):
        new_selector, old_selector = _dict(spec.get("nodeSelector")), _dict(old_spec.get("nodeSelector"))
        for key, value in old_selector.items():
            if new_selector.get(key) != value:
                causes.append(
                    Cause(
                        f"spec.nodeSelector[{key}]",
                        "FieldValueForbidden",
                        "Forbidden: only additions to spec.nodeSelector are allowed (no mutations or deletions)",
                    )
                )
    return causes


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _immutable_pod(obj: dict, old: dict) -> list[Cause]:
    spec, old_spec = dict(obj.get("spec") or {}), dict(old.get("spec") or {})
    gate_causes = _scheduling_gates_update(spec, old_spec)
    if old_spec.get("schedulingGates") and not gate_causes:
        spec.pop("nodeSelector", None)  # checked above: a gated pod's node selector may grow
        old_spec.pop("nodeSelector", None)
    # image, activeDeadlineSeconds, tolerations additions and scheduling gates removal are the mutable bits.
    for s in (spec, old_spec):
        for key in ("activeDeadlineSeconds", "tolerations", "schedulingGates", "nodeName"):
            s.pop(key, None)
        s["containers"] = [{k: v for k, v in c.items() if k != "image"} for c in s.get("containers") or []]
    if spec != old_spec:
        return [
            *gate_causes,
            Cause(
                "spec",
                "FieldValueForbidden",
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations) "
                "or `spec.schedulingGates`",
            ),
        ]
    return gate_causes


def _short(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict | list):
        return '"object"'
    return "null" if value is None else str(value)
