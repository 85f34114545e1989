"""The worker's only door to the Kubernetes API (kubesim or a real cluster, through the official client).

Objects travel as plain JSON dicts. Every write sends fieldValidation=Strict, so a typo in a manifest is an error
from the API server instead of a silently dropped field. API errors are sorted into transient (retry with backoff)
and permanent (the request itself is wrong) here, once.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import urllib3
from django.conf import settings
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

STRICT = "Strict"
LIST_PAGE = 500  # items per list request: a list of 10,000 comes in pages a caller may handle as they come
TRANSIENT_STATUS = {0, 408, 429, 500, 502, 503, 504}
UNREACHABLE = "Unreachable"  # a ClusterError's reason when the API server never answered


@dataclass(frozen=True)
class Kind:
    group: str  # "" for core
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


KINDS: dict[str, Kind] = {
    "Namespace": Kind("", "v1", "namespaces", False),
    "Service": Kind("", "v1", "services", True),
    "Pod": Kind("", "v1", "pods", True),
    "Secret": Kind("", "v1", "secrets", True),
    "Endpoints": Kind("", "v1", "endpoints", True),
    "PersistentVolumeClaim": Kind("", "v1", "persistentvolumeclaims", True),
    "Job": Kind("batch", "v1", "jobs", True),
    "Deployment": Kind("apps", "v1", "deployments", True),  # inference services (docs/architecture.md)
    "LeaderWorkerSet": Kind("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", True),  # multi-node ones
    "Ingress": Kind("networking.k8s.io", "v1", "ingresses", True),
    "HTTPRoute": Kind("gateway.networking.k8s.io", "v1", "httproutes", True),
    "ResourceFlavor": Kind("kueue.x-k8s.io", "v1beta2", "resourceflavors", False),
    "Cohort": Kind("kueue.x-k8s.io", "v1beta2", "cohorts", False),
    "ClusterQueue": Kind("kueue.x-k8s.io", "v1beta2", "clusterqueues", False),
    "LocalQueue": Kind("kueue.x-k8s.io", "v1beta2", "localqueues", True),
    "WorkloadPriorityClass": Kind("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", False),
    "Workload": Kind("kueue.x-k8s.io", "v1beta2", "workloads", True),
    "Queue": Kind("scheduling.run.ai", "v2", "queues", False),  # KAI Scheduler's, for KAI pools (kai_objects.py)
    "PodGroup": Kind("scheduling.run.ai", "v2alpha2", "podgroups", True),  # KAI pools (manifests.py, kai_status.py)
    # KAI Scheduler reads a pod's priorityClassName: the organisation's classes, for KAI pools (kai_objects.py)
    "PriorityClass": Kind("scheduling.k8s.io", "v1", "priorityclasses", False),
    "Lease": Kind("coordination.k8s.io", "v1", "leases", True),  # leader election (worker/leader.py)
}


class ClusterError(Exception):
    """An API call failed; `transient` says whether trying again later can help."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def transient(self) -> bool:
        return self.status in TRANSIENT_STATUS

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def conflict(self) -> bool:
        """A write based on a stale resourceVersion: another writer changed the object since it was read."""
        return self.status == 409 and self.reason == "Conflict"

    @property
    def denied_by_webhook(self) -> bool:
        """A validating admission webhook refused this object (Kueue's answer 403 Forbidden `admission webhook
        "vclusterqueue.kb.io" denied the request: <field errors>`): about the object, not this account's rights."""
        return self.status == 403 and self.message.startswith("admission webhook ")

    @property
    def unreachable(self) -> bool:
        """No answer at all (connection refused, reset, timed out): never a refusal by the API server."""
        return self.reason == UNREACHABLE

    def describe(self) -> str:
        """One line for a run's or an intent's error: the API's status and reason when it answered."""
        return self.message if self.unreachable else f"{self.status} {self.reason}: {self.message}"


def _error(exc: ApiException) -> ClusterError:
    reason, message = exc.reason or "", str(exc.reason or exc)
    try:
        status = json.loads(exc.body or "{}")
        reason, message = status.get("reason", reason), status.get("message", message)
    except (TypeError, ValueError):
        pass
    return ClusterError(int(exc.status or 0), reason, message)


def _cause(exc: Exception) -> str:
    """The reason of a connection failure ("Failed to establish a new connection: ... refused"), without urllib3's
    retry wrapper and its repeat of the host."""
    reason = getattr(exc, "reason", None) or exc
    text = str(reason)
    return text.split(": ", 1)[-1] if isinstance(reason, urllib3.exceptions.NewConnectionError) else text


def _path(kind: Kind, name: str | None = None, namespace: str | None = None, subresource: str | None = None) -> str:
    base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    if kind.namespaced and namespace:
        base += f"/namespaces/{namespace}"
    path = f"{base}/{kind.plural}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


class Gateway:
    """Thin JSON access to any kind in KINDS; one ApiClient, reused."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    def _call(self, method: str, path: str, *, body: Any = None, query: list[tuple[str, Any]] | None = None,
              content_type: str = "application/json", timeout: float = 30.0) -> Any:
        method_, url, headers, serialized, post_params = self.api_client.param_serialize(
            method, path, query_params=query or [], body=body,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api_client.call_api(method_, url, header_params=headers, body=serialized,
                                                post_params=post_params, _request_timeout=timeout)
            data = response.read()
        except ApiException as exc:
            raise _error(exc) from exc
        except (OSError, urllib3.exceptions.HTTPError) as exc:  # refused, reset, timed out: the API is away for now
            raise ClusterError(0, UNREACHABLE, f"cannot reach the cluster at {self.host}: {_cause(exc)}") from exc
        if not 200 <= response.status < 300:
            raise _error(ApiException(status=response.status, reason=response.reason, body=data))
        if not data:
            return None
        if "json" not in (response.getheader("Content-Type") or "application/json"):
            return data.decode(errors="replace")
        return json.loads(data)

    def list(self, kind_name: str, *, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        kind = KINDS[kind_name]
        query = [("labelSelector", label_selector)] if label_selector else []
        items: list[dict] = []
        continue_token = None
        while True:
            paging = [("limit", LIST_PAGE), *([("continue", continue_token)] if continue_token else [])]
            page = self._call("GET", _path(kind, namespace=namespace), query=[*query, *paging])
            for item in page.get("items", []):
                item.setdefault("apiVersion", kind.api_version)
                item.setdefault("kind", kind_name)
            items.extend(page.get("items", []))
            continue_token = (page.get("metadata") or {}).get("continue")
            if not continue_token:
                return items

    def get(self, kind_name: str, name: str, *, namespace: str | None = None, timeout: float = 30.0) -> dict:
        return self._call("GET", _path(KINDS[kind_name], name, namespace), timeout=timeout)

    def create(self, obj: dict, *, timeout: float = 30.0) -> dict:
        kind = KINDS[obj["kind"]]
        return self._call("POST", _path(kind, namespace=obj["metadata"].get("namespace")), body=obj,
                          query=[("fieldValidation", STRICT)], timeout=timeout)

    def create_in(self, collection_path: str, obj: dict, *, timeout: float = 30.0) -> dict:
        """Create obj in the collection an API path names (any kind: a submitted manifest's)."""
        return self._call("POST", collection_path, body=obj, query=[("fieldValidation", STRICT)], timeout=timeout)

    def replace(self, obj: dict, *, timeout: float = 30.0) -> dict:
        """PUT the whole object; obj.metadata.resourceVersion makes a stale write a 409 Conflict."""
        kind = KINDS[obj["kind"]]
        metadata = obj["metadata"]
        return self._call("PUT", _path(kind, metadata["name"], metadata.get("namespace")), body=obj,
                          query=[("fieldValidation", STRICT)], timeout=timeout)

    def patch(self, kind_name: str, name: str, patch: dict, *, namespace: str | None = None,
              subresource: str | None = None) -> dict:
        return self._call("PATCH", _path(KINDS[kind_name], name, namespace, subresource), body=patch,
                          query=[("fieldValidation", STRICT)], content_type="application/merge-patch+json")

    def raw_patch(self, path: str, patch: dict) -> dict:
        """A JSON merge patch of the object an API path names (any kind), strictly validated."""
        return self._call("PATCH", path, body=patch, query=[("fieldValidation", STRICT)],
                          content_type="application/merge-patch+json")

    def delete(self, kind_name: str, name: str, *, namespace: str | None = None,
               propagation: str = "Background") -> dict | None:
        """Delete; what the API answers (the object, marked with the cluster's deletionTimestamp when it waits for
        finalizers such as Foreground's), or None when it was gone already: deleting twice is success."""
        return self.delete_path(_path(KINDS[kind_name], name, namespace), propagation=propagation)

    def delete_path(self, path: str, *, propagation: str = "Background",
                    label_selector: str | None = None) -> dict | None:
        """Delete what an API path names (an object of any kind; with `label_selector`, a collection), as `delete`."""
        try:
            return self._call("DELETE", path, query=[("labelSelector", label_selector)] if label_selector else [],
                              body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation})
        except ClusterError as error:
            if not error.not_found:
                raise
        return None

    def raw_list(self, path: str, query: builtins.list[tuple[str, Any]] | None = None) -> builtins.list[dict]:
        """Every item of a list path (any kind), a page of LIST_PAGE at a time."""
        return self.raw_list_at(path, query)[0]

    def raw_list_at(self, path: str, query: builtins.list[tuple[str, Any]] | None = None,
                    ) -> tuple[builtins.list[dict], str]:
        """Every item of a list path and the list's resourceVersion (where a watch of it starts)."""
        items: builtins.list[dict] = []
        version = ""
        for page, listed in self.raw_pages(path, query):
            items.extend(page)
            version = listed
        return items, version

    def raw_pages(self, path: str, query: builtins.list[tuple[str, Any]] | None = None,
                  ) -> Iterator[tuple[builtins.list[dict], str]]:
        """A list path a page of LIST_PAGE at a time, each with the list's resourceVersion ("" until the last page): a
        caller that handles each page as it comes holds one page, not the whole list."""
        continue_token = None
        while True:
            page = self._call("GET", path, query=[*(query or []), ("limit", LIST_PAGE),
                                                  *([("continue", continue_token)] if continue_token else [])])
            continue_token = (page.get("metadata") or {}).get("continue")
            if not continue_token:
                yield page.get("items", []), str((page.get("metadata") or {}).get("resourceVersion", ""))
                return
            yield page.get("items", []), ""

    def raw_get(self, path: str, query: builtins.list[tuple[str, Any]] | None = None) -> Any:
        """GET any API path (the visibility API, pod logs) as JSON or text."""
        return self._call("GET", path, query=query)


def api_client_from_settings() -> client.ApiClient:
    """The kubeconfig named by settings.KUBECONFIG, else in-cluster service-account credentials."""
    configuration = client.Configuration()
    if settings.KUBECONFIG:
        config.load_kube_config(config_file=str(settings.KUBECONFIG), client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration=configuration)


_gateway: Gateway | None = None


def gateway() -> Gateway:
    """The process-wide gateway (one connection pool per worker process)."""
    global _gateway
    if _gateway is None:
        try:
            _gateway = Gateway(api_client_from_settings())
        except (config.ConfigException, OSError) as exc:  # kubeconfig not written yet, or no credentials mounted
            raise ClusterError(0, "Unavailable", f"No cluster credentials yet: {exc}") from exc
    return _gateway


def reset_gateway(new: Gateway | None = None) -> None:
    """Point the process at another cluster (tests start a kubesim per module)."""
    global _gateway
    _gateway = new
