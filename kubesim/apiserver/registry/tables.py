"""Server-side printing (meta.k8s.io/v1 Table) for `kubectl get`: the CRDs' printer columns, and for the built-in
kinds the columns kube-apiserver's table convertor prints (kubernetes/pkg/printers/internalversion/printers.go: the
same columns, the same wide ones at priority 1, the same cell rules). Ages are measured on the emulated clock."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from kubesim.apiserver.registry.resources import CRD_DIR, Resource
from kubesim.kernel.clock import parse_rfc3339

_LAST = "[-1:]"
_FILTER = re.compile(r"^\[\?\(@\.(\w+)==['\"]([^'\"]*)['\"]\)\]")


def wants_table(accept: str) -> bool:
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def human_duration(seconds: float) -> str:
    """Kubernetes' compact age format: 45s, 5m30s, 95m, 3h20m, 30h, 5d4h, 120d, 2y30d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def json_path(obj: Any, path: str) -> Any:
    """The JSONPath subset CRD printer columns use: .a.b, [?(@.key=='value')] filters and [-1:] (the last item,
    as Kubeflow's STATE column takes the latest condition)."""
    cur: list[Any] = [obj]
    rest = path
    while rest:
        if rest.startswith("."):
            m = re.match(r"^\.([\w-]+)", rest)
            if not m:
                return None
            cur = [c[m.group(1)] for c in cur if isinstance(c, dict) and m.group(1) in c]
            rest = rest[m.end() :]
        elif (m := _FILTER.match(rest)) is not None:
            cur = [
                i
                for c in cur
                if isinstance(c, list)
                for i in c
                if isinstance(i, dict) and str(i.get(m.group(1))) == m.group(2)
            ]
            rest = rest[m.end() :]
        elif rest.startswith(_LAST):
            cur = [c[-1] for c in cur if isinstance(c, list) and c]
            rest = rest[len(_LAST) :]
        else:
            return None
    return cur[0] if cur else None


Cell = Callable[[dict, datetime], Any]


@dataclass(frozen=True)
class Column:
    """One column of a Table: its definition (name, type, priority: 1 for what only `-o wide` shows) and its cell."""

    name: str
    cell: Cell
    type: str = "string"
    priority: int = 0
    format: str = ""


def _ago(ts: str | None, now: datetime) -> str:
    """How long ago an RFC 3339 time was; "<unknown>" for none (the printers' translateTimestampSince)."""
    return human_duration((now - parse_rfc3339(ts)).total_seconds()) if ts else "<unknown>"


def _age(obj: dict, now: datetime) -> str:
    return _ago(obj["metadata"].get("creationTimestamp"), now)


def _name(obj: dict, now: datetime) -> str:
    return obj["metadata"]["name"]


NAME = Column("Name", _name, format="name")
AGE = Column("Age", _age)


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def _status(obj: dict) -> dict:
    return obj.get("status") or {}


def _field(path: str) -> Cell:
    return lambda obj, now: json_path(obj, path)


def _or(value: Any, fallback: str) -> Any:
    return fallback if value in (None, "") else value


def format_labels(labels: dict | None) -> str:
    """labels.FormatLabels: k=v pairs sorted by key, "<none>" for none."""
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or "<none>"


def label_selector(selector: dict | None) -> str:
    """A metav1.LabelSelector as a selector string (its requirements sorted by key): "a=b,c in (d,e),!f"."""
    if not isinstance(selector, dict):
        return ""
    parts: list[tuple[str, str]] = [(k, f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), ",".join(sorted(expr.get("values") or []))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key}.get(op, f"!{key}")
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts, key=lambda p: p[0]))


def _containers(template_path: tuple[str, ...]) -> tuple[Column, Column]:
    """CONTAINERS and IMAGES (wide) of a workload's pod template: names and images, comma separated."""

    def containers(obj: dict) -> list[dict]:
        cur: Any = obj
        for key in template_path:
            cur = (cur or {}).get(key) if isinstance(cur, dict) else None
        return [c for c in (cur or []) if isinstance(c, dict)]

    return (
        Column("Containers", lambda o, n: ",".join(c.get("name", "") for c in containers(o)), priority=1),
        Column("Images", lambda o, n: ",".join(c.get("image", "") for c in containers(o)), priority=1),
    )


_TEMPLATE = ("spec", "template", "spec", "containers")


# ---- pods ------------------------------------------------------------------------------------------------------


def _pod_cells(pod: dict, now: datetime) -> tuple[str, str, str]:
    """READY, STATUS and RESTARTS as kubectl's pod printer derives them from the container statuses."""
    spec, status = _spec(pod), _status(pod)
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    if any(
        c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in status.get("conditions") or []
    ):
        reason = "SchedulingGated"
    sidecars = {c.get("name") for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"}
    total = len(spec.get("containers") or []) + len(sidecars)
    ready = restarts = sidecar_restarts = 0
    last_restart = sidecar_last = ""
    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += cs.get("restartCount", 0)
        finished = (((cs.get("lastState") or {}).get("terminated")) or {}).get("finishedAt") or ""
        last_restart = max(last_restart, finished)
        if cs.get("name") in sidecars:
            sidecar_restarts += cs.get("restartCount", 0)
            sidecar_last = max(sidecar_last, finished)
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated and terminated.get("exitCode", 0) == 0:
            continue
        if cs.get("name") in sidecars and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if terminated:
            if terminated.get("reason"):
                reason = "Init:" + terminated["reason"]
            elif terminated.get("signal"):
                reason = f"Init:Signal:{terminated['signal']}"
            else:
                reason = f"Init:ExitCode:{terminated.get('exitCode', 0)}"
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        initializing = True
        break
    initialized = any(
        c.get("type") == "Initialized" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    if not initializing or initialized:
        restarts, last_restart = sidecar_restarts, sidecar_last
        running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += cs.get("restartCount", 0)
            finished = (((cs.get("lastState") or {}).get("terminated")) or {}).get("finishedAt") or ""
            last_restart = max(last_restart, finished)
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting") or {}, state.get("terminated")
            if waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                reason = (
                    f"Signal:{terminated['signal']}"
                    if terminated.get("signal")
                    else f"ExitCode:{terminated.get('exitCode', 0)}"
                )
            elif cs.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            pod_ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
            )
            reason = "Running" if pod_ready else "NotReady"
    if pod["metadata"].get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    shown = str(restarts)
    if restarts and last_restart:
        shown = f"{restarts} ({_ago(last_restart, now)} ago)"
    return f"{ready}/{total}", reason, shown


def _pod_ip(pod: dict, now: datetime) -> str:
    status = _status(pod)
    ips = status.get("podIPs") or []
    return (ips[0].get("ip") if ips else status.get("podIP")) or "<none>"


def _readiness_gates(pod: dict, now: datetime) -> str:
    gates = _spec(pod).get("readinessGates") or []
    if not gates:
        return "<none>"
    conditions = {c.get("type"): c.get("status") for c in _status(pod).get("conditions") or []}
    return f"{sum(1 for g in gates if conditions.get(g.get('conditionType')) == 'True')}/{len(gates)}"


# ---- workloads ---------------------------------------------------------------------------------------------------


def _job_status(job: dict, now: datetime) -> str:
    conds = {c.get("type"): c.get("status") for c in _status(job).get("conditions") or []}
    if conds.get("Complete") == "True":
        return "Complete"
    if conds.get("Failed") == "True":
        return "Failed"
    if job["metadata"].get("deletionTimestamp"):
        return "Terminating"
    if conds.get("Suspended") == "True":
        return "Suspended"
    if conds.get("FailureTarget") == "True":
        return "FailureTarget"
    return "Running"


def _job_completions(job: dict, now: datetime) -> str:
    spec, succeeded = _spec(job), _status(job).get("succeeded", 0)
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = spec.get("parallelism") or 0
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(job: dict, now: datetime) -> str:
    status = _status(job)
    if not status.get("startTime"):
        return ""
    end = parse_rfc3339(status["completionTime"]) if status.get("completionTime") else now
    return human_duration((end - parse_rfc3339(status["startTime"])).total_seconds())


def _replicas(obj: dict) -> int:
    replicas = _spec(obj).get("replicas")
    return 1 if replicas is None else replicas


# ---- nodes -------------------------------------------------------------------------------------------------------


def _node_status(node: dict, now: datetime) -> str:
    ready = next((c for c in _status(node).get("conditions") or [] if c.get("type") == "Ready"), None)
    shown = ["Unknown" if ready is None else "Ready" if ready.get("status") == "True" else "NotReady"]
    if _spec(node).get("unschedulable"):
        shown.append("SchedulingDisabled")
    return ",".join(shown)


def _node_roles(node: dict, now: datetime) -> str:
    roles = set()
    for key, value in (node["metadata"].get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/") :]:
            roles.add(key[len("node-role.kubernetes.io/") :])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def _node_address(kind: str) -> Cell:
    return lambda node, now: next(
        (a.get("address") for a in _status(node).get("addresses") or [] if a.get("type") == kind), "<none>"
    )


def _node_info(key: str) -> Cell:
    return lambda node, now: (_status(node).get("nodeInfo") or {}).get(key) or "<unknown>"


# ---- services, events, storage, RBAC -----------------------------------------------------------------------------


def _service_external_ip(svc: dict, now: datetime) -> str:
    spec = _spec(svc)
    kind, external = spec.get("type") or "ClusterIP", spec.get("externalIPs") or []
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        ingress = (_status(svc).get("loadBalancer") or {}).get("ingress") or []
        balancers = sorted({i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")})
        return ",".join([*balancers, *external]) or "<pending>"
    if kind == "ExternalName":
        return spec.get("externalName", "")
    return "<unknown>"


def _service_ports(svc: dict, now: datetime) -> str:
    shown = [
        f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}"
        if p.get("nodePort")
        else f"{p.get('port')}/{p.get('protocol', 'TCP')}"
        for p in _spec(svc).get("ports") or []
    ]
    return ",".join(shown) or "<none>"


def _service_cluster_ip(svc: dict, now: datetime) -> str:
    spec = _spec(svc)
    ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    return ips[0] if ips else "<none>"


def _event_first(event: dict, now: datetime) -> str:
    return _ago(event.get("firstTimestamp") or event.get("eventTime"), now)


def _event_last(event: dict, now: datetime) -> str:
    if event.get("series"):
        return _ago((event["series"] or {}).get("lastObservedTime"), now)
    return _ago(event["lastTimestamp"], now) if event.get("lastTimestamp") else _event_first(event, now)


def _event_count(event: dict, now: datetime) -> int:
    if event.get("series"):
        return (event["series"] or {}).get("count", 0)
    return event.get("count") or 1


def _event_object(event: dict, now: datetime) -> str:
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    return f"{kind}/{involved['name']}" if involved.get("name") else kind


def _event_source(event: dict, now: datetime) -> str:
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingController") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {host}" if host else component


def _endpoints(ep: dict, now: datetime) -> str:
    subsets = ep.get("subsets") or []
    if not subsets:
        return "<none>"
    shown: list[str] = []
    count = 0
    for subset in subsets:
        addresses = [a.get("ip", "") for a in subset.get("addresses") or []]
        for port in subset.get("ports") or [None]:
            count += len(addresses)
            for ip in addresses:
                if len(shown) < 3:
                    shown.append(ip if port is None else f"{ip}:{port.get('port')}")
    more = f" + {count - 3} more..." if count > 3 else ""
    return ",".join(shown) + more


_ACCESS_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def _claim_bound(claim: dict) -> bool:
    return bool(_spec(claim).get("volumeName"))


def _claim_access_modes(claim: dict, now: datetime) -> str:
    if not _claim_bound(claim):
        return ""
    modes = _status(claim).get("accessModes") or []
    return ",".join(_ACCESS_MODES[m] for m in _ACCESS_MODES if m in modes)


def _claim_class(claim: dict, now: datetime) -> str:
    name = _spec(claim).get("storageClassName")
    if name is not None:
        return name
    return (claim["metadata"].get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class", "")


def _subjects(kind: str) -> Cell:
    def cell(binding: dict, now: datetime) -> str:
        names = []
        for s in binding.get("subjects") or []:
            if s.get("kind") != kind:
                continue
            names.append(
                f"{s['namespace']}/{s.get('name', '')}"
                if kind == "ServiceAccount" and s.get("namespace")
                else s.get("name", "")
            )
        return ", ".join(names)

    return cell


_BINDING_COLUMNS = [
    NAME,
    Column(
        "Role", lambda b, n: f"{(b.get('roleRef') or {}).get('kind', '')}/{(b.get('roleRef') or {}).get('name', '')}"
    ),
    AGE,
    Column("Users", _subjects("User"), priority=1),
    Column("Groups", _subjects("Group"), priority=1),
    Column("ServiceAccounts", _subjects("ServiceAccount"), priority=1),
]


def _param_ref(binding: dict, now: datetime) -> str:
    ref = _spec(binding).get("paramRef")
    if not isinstance(ref, dict):
        return "<unset>"
    if ref.get("name"):
        return f"{ref.get('namespace') or '*'}/{ref['name']}"
    return label_selector(ref.get("selector")) if ref.get("selector") is not None else "<unset>"


def _param_kind(policy: dict, now: datetime) -> str:
    kind = _spec(policy).get("paramKind")
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}" if isinstance(kind, dict) else "<unset>"


def _ingress_hosts(ing: dict, now: datetime) -> str:
    rules = _spec(ing).get("rules") or []
    hosts = [r["host"] for r in rules if r.get("host")][:3]
    if not hosts:
        return "*"
    return ",".join(hosts) + (f" + {len(rules) - 3} more..." if len(rules) > 3 else "")


def _ingress_address(ing: dict, now: datetime) -> str:
    ingress = (_status(ing).get("loadBalancer") or {}).get("ingress") or []
    return ",".join(sorted({i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")}))


def _ingress_class_parameters(cls: dict, now: datetime) -> str:
    params = _spec(cls).get("parameters")
    if not isinstance(params, dict):
        return "<none>"
    kind = params.get("kind", "") + (f".{params['apiGroup']}" if params.get("apiGroup") else "")
    return f"{kind}/{params.get('name', '')}"


# The table convertor of a kind without printers (roles, cluster roles, CRDs): the name and the creation time.
DEFAULT_COLUMNS = [NAME, Column("Created At", lambda o, n: o["metadata"].get("creationTimestamp"), type="date")]

CORE_COLUMNS: dict[str, list[Column]] = {
    "pods": [
        NAME,
        Column("Ready", lambda p, n: _pod_cells(p, n)[0]),
        Column("Status", lambda p, n: _pod_cells(p, n)[1]),
        Column("Restarts", lambda p, n: _pod_cells(p, n)[2]),
        AGE,
        Column("IP", _pod_ip, priority=1),
        Column("Node", lambda p, n: _spec(p).get("nodeName") or "<none>", priority=1),
        Column("Nominated Node", lambda p, n: _status(p).get("nominatedNodeName") or "<none>", priority=1),
        Column("Readiness Gates", _readiness_gates, priority=1),
    ],
    "jobs": [
        NAME,
        Column("Status", _job_status),
        Column("Completions", _job_completions),
        Column("Duration", _job_duration),
        AGE,
        *_containers(_TEMPLATE),
        Column("Selector", lambda j, n: label_selector(_spec(j).get("selector")) or "<none>", priority=1),
    ],
    "deployments": [
        NAME,
        Column("Ready", lambda d, n: f"{_status(d).get('readyReplicas', 0)}/{_replicas(d)}"),
        Column("Up-to-date", lambda d, n: _status(d).get("updatedReplicas", 0)),
        Column("Available", lambda d, n: _status(d).get("availableReplicas", 0)),
        AGE,
        *_containers(_TEMPLATE),
        Column("Selector", lambda d, n: label_selector(_spec(d).get("selector")), priority=1),
    ],
    "replicasets": [
        NAME,
        Column("Desired", lambda r, n: _replicas(r)),
        Column("Current", lambda r, n: _status(r).get("replicas", 0)),
        Column("Ready", lambda r, n: _status(r).get("readyReplicas", 0)),
        AGE,
        *_containers(_TEMPLATE),
        Column("Selector", lambda r, n: label_selector(_spec(r).get("selector")), priority=1),
    ],
    "nodes": [
        NAME,
        Column("Status", _node_status),
        Column("Roles", _node_roles),
        AGE,
        Column("Version", lambda n, now: (_status(n).get("nodeInfo") or {}).get("kubeletVersion", "")),
        Column("Internal-IP", _node_address("InternalIP"), priority=1),
        Column("External-IP", _node_address("ExternalIP"), priority=1),
        Column("OS-Image", _node_info("osImage"), priority=1),
        Column("Kernel-Version", _node_info("kernelVersion"), priority=1),
        Column("Container-Runtime", _node_info("containerRuntimeVersion"), priority=1),
    ],
    "namespaces": [NAME, Column("Status", lambda ns, n: _status(ns).get("phase", "")), AGE],
    "services": [
        NAME,
        Column("Type", lambda s, n: _spec(s).get("type") or "ClusterIP"),
        Column("Cluster-IP", _service_cluster_ip),
        Column("External-IP", _service_external_ip),
        Column("Port(s)", _service_ports),
        AGE,
        Column("Selector", lambda s, n: format_labels(_spec(s).get("selector")), priority=1),
    ],
    "endpoints": [NAME, Column("Endpoints", _endpoints), AGE],
    "configmaps": [
        NAME,
        Column("Data", lambda c, n: len(c.get("data") or {}) + len(c.get("binaryData") or {}), type="integer"),
        AGE,
    ],
    "secrets": [
        NAME,
        Column("Type", lambda s, n: s.get("type", "")),
        Column("Data", lambda s, n: len(s.get("data") or {}), type="integer"),
        AGE,
    ],
    "serviceaccounts": [NAME, Column("Secrets", lambda s, n: len(s.get("secrets") or []), type="integer"), AGE],
    "events": [
        Column("Last Seen", _event_last),
        Column("Type", lambda e, n: e.get("type", "")),
        Column("Reason", lambda e, n: e.get("reason", "")),
        Column("Object", _event_object),
        Column("Subobject", lambda e, n: (e.get("involvedObject") or {}).get("fieldPath", ""), priority=1),
        Column("Source", _event_source, priority=1),
        Column("Message", lambda e, n: str(e.get("message", "")).strip()),
        Column("First Seen", _event_first, priority=1),
        Column("Count", _event_count, priority=1),
        Column("Name", _name, priority=1, format="name"),
    ],
    "priorityclasses": [
        NAME,
        Column("Value", lambda pc, n: pc.get("value", 0), type="integer"),
        Column("Global-Default", lambda pc, n: bool(pc.get("globalDefault")), type="boolean"),
        AGE,
    ],
    "leases": [NAME, Column("Holder", lambda le, n: _spec(le).get("holderIdentity") or ""), AGE],
    "persistentvolumeclaims": [
        NAME,
        Column(
            "Status",
            # Pending until bound: the phase the volume binder gives a new claim (kubesim runs no binder)
            lambda c, n: (
                "Terminating" if c["metadata"].get("deletionTimestamp") else _status(c).get("phase", "Pending")
            ),
        ),
        Column("Volume", lambda c, n: _spec(c).get("volumeName", "")),
        Column(
            "Capacity", lambda c, n: (_status(c).get("capacity") or {}).get("storage", "") if _claim_bound(c) else ""
        ),
        Column("Access Modes", _claim_access_modes),
        Column("StorageClass", _claim_class),
        Column("VolumeAttributesClass", lambda c, n: _spec(c).get("volumeAttributesClassName") or "<unset>"),
        AGE,
        Column("VolumeMode", lambda c, n: _spec(c).get("volumeMode") or "<unset>", priority=1),
    ],
    "rolebindings": _BINDING_COLUMNS,
    "clusterrolebindings": _BINDING_COLUMNS,
    "ingresses": [
        NAME,
        Column("Class", lambda i, n: _spec(i).get("ingressClassName") or "<none>"),
        Column("Hosts", _ingress_hosts),
        Column("Address", _ingress_address),
        Column("Ports", lambda i, n: "80, 443" if _spec(i).get("tls") else "80"),
        AGE,
    ],
    "ingressclasses": [
        NAME,
        Column("Controller", lambda c, n: _spec(c).get("controller", "")),
        Column("Parameters", _ingress_class_parameters),
        AGE,
    ],
    "networkpolicies": [
        NAME,
        Column("Pod-Selector", lambda p, n: label_selector(_spec(p).get("podSelector")) or "<none>"),
        AGE,
    ],
    "mutatingadmissionpolicies": [
        NAME,
        Column("Mutations", lambda p, n: len(_spec(p).get("mutations") or []), type="integer"),
        Column("ParamKind", _param_kind),
        AGE,
    ],
    "mutatingadmissionpolicybindings": [
        NAME,
        Column("PolicyName", lambda b, n: _spec(b).get("policyName", "")),
        Column("ParamRef", _param_ref),
        AGE,
    ],
    # Gateway API's HTTPRoute is a CRD in a real cluster: its printer columns
    "httproutes": [NAME, Column("Hostnames", lambda r, n: _json_cell(_spec(r).get("hostnames"))), AGE],
}


def _json_cell(value: Any) -> Any:
    """A string printer column holding a list or object prints it as JSON (kube's JSONPath printer)."""
    return None if value is None else value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


@cache
def _crd_columns(plural: str, version: str | None = None) -> list[Column]:
    """A CRD's columns: the name, then the printer columns of a served deprecated version where its vendored file has
    them (a KubeRay v1alpha1 RayJob has none), else the stored version's; AGE when the CRD declares none, as the
    apiextensions server defaults them. A date cell is the time since; a string cell prints lists as JSON."""
    old = CRD_DIR / f"{plural}.{version}.json"
    data = json.loads(old.read_text()) if version is not None and old.exists() else {}
    if "printerColumns" not in data:
        data = json.loads((CRD_DIR / f"{plural}.json").read_text())
    defs = data.get("printerColumns") or []
    if not defs:
        return [NAME, Column("Age", _age, type="date")]
    out: list[Column] = [NAME]
    for d in defs:
        path = d["jsonPath"]
        if d["type"] == "date":
            cell = (lambda p: lambda obj, now: _ago(v, now) if (v := json_path(obj, p)) else None)(path)
        elif d["type"] == "string":
            cell = (lambda p: lambda obj, now: _json_cell(json_path(obj, p)))(path)
        else:
            cell = _field(path)
        out.append(Column(d["name"], cell, type=d["type"], priority=d.get("priority", 0), format=d.get("format", "")))
    return out


def columns(res: Resource, version: str | None = None) -> list[Column]:
    if res.crd:
        return _crd_columns(res.plural, version)
    return CORE_COLUMNS.get(res.plural, DEFAULT_COLUMNS)


def table(
    res: Resource, items: list[dict], now: datetime, meta: dict, include: str, version: str | None = None
) -> dict:
    """A meta.k8s.io/v1 Table of the items, every column (wide ones too: kubectl hides priority 1 without -o wide);
    include is None, Metadata (default) or Object; version: the deprecated version the request named, if any."""
    cols = columns(res, version)
    definitions = [
        {"name": c.name, "type": c.type, "format": c.format, "description": "", "priority": c.priority} for c in cols
    ]
    rows = []
    for obj in items:
        row: dict[str, Any] = {"cells": [c.cell(obj, now) for c in cols]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": definitions,
        "rows": rows,
    }
