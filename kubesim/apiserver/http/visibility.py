"""The visibility.kueue.x-k8s.io API (pendingworkloads of a ClusterQueue or a LocalQueue), served by the Kueue half."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver.errors import APIError, bad_request, not_found
from kubesim.apiserver.http.backend import Backend
from kubesim.apiserver.http.common import Query, Response, method_not_allowed, not_found_path, q
from kubesim.apiserver.registry.resources import RESOURCES, VISIBILITY_GROUP, VISIBILITY_VERSIONS


class Visibility:
    def __init__(self, sim: Backend) -> None:
        self.sim = sim
        self.store = sim.store

    def get(self, method: str, version: str, rest: list[str], query: Query) -> Response:
        """rest: the path after /apis/visibility.kueue.x-k8s.io/<version>/; the answer is in that version (v1beta1's
        PendingWorkloadsSummary has v1beta2's shape)."""
        if version not in VISIBILITY_VERSIONS:
            raise not_found_path()
        if method != "GET":
            raise method_not_allowed(method)
        kwargs: dict[str, Any]
        if len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
            kwargs = {"cluster_queue": rest[1]}
            if self.store.get("clusterqueues", None, rest[1]) is None:
                raise not_found(RESOURCES["clusterqueues"], rest[1])
        elif len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "localqueues" and rest[4] == "pendingworkloads":
            kwargs = {"namespace": rest[1], "local_queue": rest[3]}
            if self.store.get("localqueues", rest[1], rest[3]) is None:
                raise not_found(RESOURCES["localqueues"], rest[3])
        else:
            raise not_found_path()
        kueue = self.sim.kueue
        if kueue is None:
            raise APIError(503, "the visibility API needs kubesim.kueue", "ServiceUnavailable")
        try:
            limit = int(q(query, "limit", "1000") or 1000)
            offset = int(q(query, "offset", "0") or 0)
        except ValueError as exc:
            raise bad_request("limit and offset must be integers") from exc
        with self.store.lock:
            summary = kueue.visibility(self.store, limit=limit, offset=offset, **kwargs)
        return Response(200, {**summary, "apiVersion": f"{VISIBILITY_GROUP}/{version}"})
