"""Server-side printing (meta.k8s.io/v1 Table) for `kubectl get`: Kueue's printer columns for its CRDs and
kubectl's familiar columns for the core kinds. Ages are measured on the emulated clock."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
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


Column = tuple[str, str, int, Callable[[dict, datetime], Any]]  # name, type, priority, cell


def _age(obj: dict, now: datetime) -> str:
    ts = obj["metadata"].get("creationTimestamp")
    return human_duration((now - parse_rfc3339(ts)).total_seconds()) if ts else "<unknown>"


def _pod_ready(pod: dict, now: datetime) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return f"{sum(1 for s in statuses if s.get('ready'))}/{len(pod['spec'].get('containers') or [])}"


def _pod_status(pod: dict, now: datetime) -> str:
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term and status.get("phase") in ("Succeeded", "Failed"):
            return term.get("reason", status.get("phase"))
    # printPod: a pod the scheduler holds back for its scheduling gates shows that reason
    if any(
        c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in status.get("conditions") or []
    ):
        return "SchedulingGated"
    return status.get("phase", "Pending")


def _job_status(job: dict, now: datetime) -> str:
    conds = {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}
    for name in ("Complete", "Failed", "Suspended"):
        if conds.get(name) == "True":
            return name
    return "Running"


def _job_duration(job: dict, now: datetime) -> str:
    status = job.get("status") or {}
    if not status.get("startTime"):
        return ""
    end = parse_rfc3339(status["completionTime"]) if status.get("completionTime") else now
    return human_duration((end - parse_rfc3339(status["startTime"])).total_seconds())


def _field(path: str) -> Callable[[dict, datetime], Any]:
    return lambda obj, now: json_path(obj, path)


def _node_status(node: dict, now: datetime) -> str:
    """kubectl's STATUS of a node: kubesim's nodes are always Ready; a cordoned one also says SchedulingDisabled."""
    return "Ready,SchedulingDisabled" if (node.get("spec") or {}).get("unschedulable") else "Ready"


_ACCESS_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}
CORE_COLUMNS: dict[str, list[Column]] = {
    "pods": [
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        (
            "Restarts",
            "string",
            0,
            lambda p, n: str(
                sum(s.get("restartCount", 0) for s in (p.get("status") or {}).get("containerStatuses") or [])
            ),
        ),
        ("Age", "string", 0, _age),
        ("IP", "string", 1, _field(".status.podIP")),
        ("Node", "string", 1, _field(".spec.nodeName")),
    ],
    "jobs": [
        ("Status", "string", 0, _job_status),
        (
            "Completions",
            "string",
            0,
            lambda j, n: (
                f"{(j.get('status') or {}).get('succeeded', 0)}/"
                f"{j['spec'].get('completions', 1) if j['spec'].get('completions') is not None else 1}"
            ),
        ),
        ("Duration", "string", 0, _job_duration),
        ("Age", "string", 0, _age),
    ],
    "nodes": [
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, lambda n, now: "<none>"),
        ("Age", "string", 0, _age),
        ("Version", "string", 0, _field(".status.nodeInfo.kubeletVersion")),
    ],
    "namespaces": [("Status", "string", 0, _field(".status.phase")), ("Age", "string", 0, _age)],
    "leases": [("Holder", "string", 0, _field(".spec.holderIdentity")), ("Age", "string", 0, _age)],
    "persistentvolumeclaims": [
        ("Status", "string", 0, lambda c, n: (c.get("status") or {}).get("phase", "Pending")),
        ("Volume", "string", 0, _field(".spec.volumeName")),
        ("Capacity", "string", 0, lambda c, n: ((c.get("status") or {}).get("capacity") or {}).get("storage", "")),
        (
            "Access Modes",
            "string",
            0,
            lambda c, n: ",".join(_ACCESS_MODES.get(m, m) for m in c["spec"].get("accessModes") or []),
        ),
        ("StorageClass", "string", 0, _field(".spec.storageClassName")),
        ("VolumeAttributesClass", "string", 0, lambda c, n: c["spec"].get("volumeAttributesClassName") or "<unset>"),
        ("Age", "string", 0, _age),
    ],
    "services": [
        ("Type", "string", 0, _field(".spec.type")),
        ("Cluster-IP", "string", 0, lambda s, n: (s.get("spec") or {}).get("clusterIP", "<none>")),
        (
            "Port(s)",
            "string",
            0,
            lambda s, n: ",".join(
                f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in (s.get("spec") or {}).get("ports") or []
            ),
        ),
        ("Age", "string", 0, _age),
    ],
    "events": [
        (
            "Last Seen",
            "string",
            0,
            lambda e, n: (
                human_duration((n - parse_rfc3339(e["lastTimestamp"])).total_seconds())
                if e.get("lastTimestamp")
                else ""
            ),
        ),
        ("Type", "string", 0, _field(".type")),
        ("Reason", "string", 0, _field(".reason")),
        (
            "Object",
            "string",
            0,
            lambda e, n: (
                f"{(e.get('involvedObject') or {}).get('kind', '').lower()}/"
                f"{(e.get('involvedObject') or {}).get('name', '')}"
            ),
        ),
        ("Message", "string", 0, _field(".message")),
    ],
}


@cache
def _crd_columns(plural: str, version: str | None = None) -> list[Column]:
    """A CRD's printer columns: a served deprecated version's own where its vendored file has them (a KubeRay
    v1alpha1 RayJob has none), else the stored version's."""
    old = CRD_DIR / f"{plural}.{version}.json"
    data = json.loads(old.read_text()) if version is not None and old.exists() else {}
    if "printerColumns" not in data:
        data = json.loads((CRD_DIR / f"{plural}.json").read_text())
    defs = data.get("printerColumns") or []
    if not defs:
        return [("Age", "date", 0, _age)]
    out: list[Column] = []
    for d in defs:
        if d["type"] == "date":
            path = d["jsonPath"]
            cell = (
                lambda p: (
                    lambda obj, now: (
                        human_duration((now - parse_rfc3339(v)).total_seconds()) if (v := json_path(obj, p)) else None
                    )
                )
            )(path)
        else:
            cell = _field(d["jsonPath"])
        out.append((d["name"], d["type"], d.get("priority", 0), cell))
    return out


def table(
    res: Resource, items: list[dict], now: datetime, meta: dict, include: str, version: str | None = None
) -> dict:
    """A meta.k8s.io/v1 Table of the items; include is None, Metadata (default) or Object; version: the deprecated
    version the request named, if any."""
    columns = _crd_columns(res.plural, version) if res.crd else CORE_COLUMNS.get(res.plural, [("Age", "date", 0, _age)])
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}] + [
        {"name": name, "type": typ if typ != "date" else "string", "format": "", "description": "", "priority": prio}
        for name, typ, prio, _ in columns
    ]
    rows = []
    for obj in items:
        row: dict[str, Any] = {"cells": [obj["metadata"]["name"]] + [cell(obj, now) for _, _, _, cell in columns]}
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
