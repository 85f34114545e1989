"""Discovery documents: /version, /api, /apis and the per group-version resource lists."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver.registry.conversion import old_versions
from kubesim.apiserver.registry.resources import (
    AUTHENTICATION_GROUP,
    AUTHORIZATION_GROUP,
    RESOURCES,
    STREAMS,
    VISIBILITY_GROUP,
    VISIBILITY_VERSIONS,
    Resource,
    by_group_version,
)

VERSION = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0-kubesim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
SERVED = list(dict.fromkeys((r.group, r.version) for r in RESOURCES.values() if r.group))
"""The (group, version) pairs of the served resources, in order: a group may serve kinds at several versions (KAI's
Queue at scheduling.run.ai/v2, its PodGroup at v2alpha2), the first listed being its preferred one."""
GROUPS = [
    *[(g, v) for i, (g, v) in enumerate(SERVED) if all(g != other for other, _ in SERVED[:i])],
    (VISIBILITY_GROUP, VISIBILITY_VERSIONS[0]),
    (AUTHORIZATION_GROUP, "v1"),
    (AUTHENTICATION_GROUP, "v1"),
]
JSON = "application/json"


def _group(name: str, version: str) -> dict:
    """A group with its preferred version first, then the deprecated versions kubesim converts."""
    if name == VISIBILITY_GROUP:
        versions = list(VISIBILITY_VERSIONS)
    else:
        served = dict.fromkeys(v for g, v in SERVED if g == name and v != version)
        versions = [version, *served, *[r.version for r in old_versions() if r.group == name][:1]]
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def _resource_entries(r: Resource) -> list[dict]:
    main = {
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": list(r.verbs),
        "storageVersionHash": "",
    }
    if r.short_names:
        main["shortNames"] = list(r.short_names)
    if r.categories:
        main["categories"] = list(r.categories)
    elif r.group in ("", "batch") and r.plural in ("pods", "services", "jobs"):
        main["categories"] = ["all"]
    out = [main]
    for sub in r.subresources:
        verbs = ["create", "get"] if sub in STREAMS else {"log": ["get"], "token": ["create"]}.get(
            sub, ["get", "patch", "update"]
        )
        kind = {
            "log": "Pod",
            "token": "TokenRequest",
            "scale": "Scale",
            "exec": "PodExecOptions",
            "attach": "PodAttachOptions",
            "portforward": "PodPortForwardOptions",
        }.get(sub, r.kind)
        entry = {
            "name": f"{r.plural}/{sub}",
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": kind,
            "verbs": verbs,
        }
        if sub == "scale":
            entry.update(group="autoscaling", version="v1")
        out.append(entry)
    return out


def _visibility_resources() -> list[dict]:
    return [
        {
            "name": "clusterqueues",
            "singularName": "clusterqueue",
            "namespaced": False,
            "kind": "ClusterQueue",
            "verbs": ["get"],
        },
        {
            "name": "clusterqueues/pendingworkloads",
            "singularName": "",
            "namespaced": False,
            "kind": "PendingWorkloadsSummary",
            "verbs": ["get"],
        },
        {
            "name": "localqueues",
            "singularName": "localqueue",
            "namespaced": True,
            "kind": "LocalQueue",
            "verbs": ["get"],
        },
        {
            "name": "localqueues/pendingworkloads",
            "singularName": "",
            "namespaced": True,
            "kind": "PendingWorkloadsSummary",
            "verbs": ["get"],
        },
    ]


def static(path: str) -> tuple[str, Any] | None:
    """(content type, body) for a discovery or health path, else None."""
    if path == "/version":
        return JSON, VERSION
    if path in ("/healthz", "/readyz", "/livez"):
        return "text/plain", "ok"
    if path == "/api":
        return JSON, {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
        }
    if path == "/api/v1":
        return JSON, {
            "kind": "APIResourceList",
            "groupVersion": "v1",
            "resources": [e for r in by_group_version("", "v1") for e in _resource_entries(r)],
        }
    if path == "/apis":
        return JSON, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g, v) for g, v in GROUPS]}
    parts = [p for p in path.split("/") if p]
    if len(parts) == 2 and parts[0] == "apis":
        match = next(((g, v) for g, v in GROUPS if g == parts[1]), None)
        if match:
            return JSON, {"kind": "APIGroup", "apiVersion": "v1", **_group(*match)}
    old = [r for r in old_versions() if (r.group, r.version) == tuple(parts[1:])]
    if len(parts) == 3 and parts[0] == "apis" and old:
        return JSON, {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{parts[1]}/{parts[2]}",
            "resources": [e for r in old for e in _resource_entries(r)],
        }
    visibility = len(parts) == 3 and parts[1] == VISIBILITY_GROUP and parts[2] in VISIBILITY_VERSIONS
    served = tuple(parts[1:]) in SERVED or tuple(parts[1:]) in GROUPS
    if len(parts) == 3 and parts[0] == "apis" and (served or visibility):
        if parts[1] == VISIBILITY_GROUP:
            resources = _visibility_resources()
        elif parts[1] == AUTHORIZATION_GROUP:
            resources = [
                {
                    "name": "selfsubjectaccessreviews",
                    "singularName": "selfsubjectaccessreview",
                    "namespaced": False,
                    "kind": "SelfSubjectAccessReview",
                    "verbs": ["create"],
                },
                {
                    "name": "selfsubjectrulesreviews",
                    "singularName": "selfsubjectrulesreview",
                    "namespaced": False,
                    "kind": "SelfSubjectRulesReview",
                    "verbs": ["create"],
                },
            ]
        elif parts[1] == AUTHENTICATION_GROUP:
            resources = [
                {
                    "name": "selfsubjectreviews",
                    "singularName": "selfsubjectreview",
                    "namespaced": False,
                    "kind": "SelfSubjectReview",
                    "verbs": ["create"],
                }
            ]
        else:
            resources = [e for r in by_group_version(parts[1], parts[2]) for e in _resource_entries(r)]
        return JSON, {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{parts[1]}/{parts[2]}",
            "resources": resources,
        }
    return None
