"""kubesim's control endpoints under /kubesim/v1/ (health, clock, settle, faults, reset, config, stats, rbac), and
each node's emulated DCGM exporter (`dcgm/<node>/metrics`, for a Prometheus to scrape)."""

from __future__ import annotations

from kubesim.apiserver.errors import APIError, bad_request, number_param
from kubesim.apiserver.http.backend import Backend
from kubesim.apiserver.http.common import Response, read_json
from kubesim.apiserver.http.proxy import ServiceProxy
from kubesim.apiserver.nodes import dcgm
from kubesim.apiserver.registry.resources import RESOURCES

CONTROL_PREFIX = "/kubesim/v1/"
EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Control:
    def __init__(self, sim: Backend) -> None:
        self.sim = sim
        self.store = sim.store

    def handle(self, method: str, path: str, body: bytes, host: str = "") -> Response:
        """path: what follows /kubesim/v1/; host: the Host the request came to (for the exporters' targets)."""
        data = read_json(body) if body else {}
        data = data if isinstance(data, dict) else {}
        sim = self.sim
        server = path.split("/")
        if len(server) == 4 and server[0] == "servers" and server[3] == "activity" and method == "POST":
            return ServiceProxy(self.store, sim.server_activity).report_activity(server[1], server[2], data)
        if path == "dcgm/targets" and method == "GET":
            return Response(200, self._dcgm_targets(host))
        if path.startswith("dcgm/") and path.endswith("/metrics") and method == "GET":
            return self._dcgm(path.removeprefix("dcgm/").removesuffix("/metrics"))
        if path == "healthz" and method == "GET":
            return Response(200, self._health())
        if path == "stats" and method == "GET":
            return Response(200, {"controllers": sim.stats_report(), "objects": self._counts()})
        if path == "clock" and method == "GET":
            return Response(200, {"time": sim.clock.now().isoformat(), "mode": sim.clock.mode})
        if path == "clock/advance" and method == "POST":
            try:
                now = sim.advance(number_param("seconds", data.get("seconds", 0)))
            except (TypeError, ValueError) as exc:
                raise bad_request(str(exc)) from exc
            return Response(200, {"time": now.isoformat(), "resourceVersion": str(self.store.resource_version)})
        if path == "faults" and method == "POST":
            try:
                cfg = sim.faults.set(data)
            except (TypeError, ValueError) as exc:
                raise bad_request(str(exc)) from exc
            sim.settle()
            return Response(200, cfg.as_dict())
        if path == "faults" and method == "DELETE":
            sim.faults.clear()
            sim.settle()
            return Response(200, sim.faults.config.as_dict())
        if path == "settle" and method == "POST":
            sim.settle()
            return Response(200, self._health())
        if path == "reset" and method == "POST":
            sim.reset()
            return Response(200, self._health())
        if path == "rbac" and method == "GET":
            return Response(200, sim.rbac.report())
        if path == "rbac" and method == "DELETE":
            sim.rbac.clear_records()
            return Response(200, sim.rbac.report())
        if path == "config" and method == "POST":
            # Both checked before either is applied: a bad config is a 400 that changes nothing.
            history = (
                number_param("watch_history", data["watch_history"], minimum=1, integer=True)
                if "watch_history" in data
                else None
            )
            bookmark = (
                number_param("bookmark_interval", data["bookmark_interval"], minimum=0.001)
                if "bookmark_interval" in data
                else None
            )
            if history is not None:
                self.store.set_history_size(int(history))
            if bookmark is not None:
                sim.bookmark_interval = bookmark
            sim.settle()
            return Response(200, {"watch_history": self.store.history_size, "bookmark_interval": sim.bookmark_interval})
        raise APIError(404, f"unknown kubesim control endpoint {method} /kubesim/v1/{path}", "NotFound")

    def _dcgm_targets(self, host: str) -> list[dict]:
        """Prometheus HTTP service discovery: one target per node, its exporter's path as `__metrics_path__`."""
        with self.store.lock:
            names = sorted(n["metadata"]["name"] for n in self.store.list("nodes", copy=False))
        return [
            {"targets": [host], "labels": {"__metrics_path__": f"{CONTROL_PREFIX}dcgm/{name}/metrics", "node": name}}
            for name in names
        ]

    def _dcgm(self, node_name: str) -> Response:
        with self.store.lock:
            node = self.store.get("nodes", None, node_name, copy=False)
            if node is None:
                raise APIError(404, f'node "{node_name}" not found', "NotFound")
            text = dcgm.exposition(node, self.store.list("pods", copy=False), self.store.now())
        return Response(200, text, content_type=EXPOSITION_TYPE)

    def _counts(self) -> dict[str, int]:
        with self.store.lock:
            return {r: len(self.store.list(r, copy=False)) for r in RESOURCES}

    def _health(self) -> dict:
        with self.store.lock:
            return {
                "ok": True,
                "time": self.sim.clock.now().isoformat(),
                "clock": self.sim.clock.mode,
                "resourceVersion": str(self.store.resource_version),
                "kueue": self.sim.kueue is not None,
            }
