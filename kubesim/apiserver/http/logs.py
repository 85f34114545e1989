"""Pod logs (GET .../pods/NAME/log): the kubelet's generated log text, tailLines, timestamps and follow."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

from kubesim.apiserver.errors import bad_request
from kubesim.apiserver.http.backend import Backend
from kubesim.apiserver.http.common import DEFAULT_WATCH_TIMEOUT, Query, Response, Target, existing, q, truthy
from kubesim.apiserver.nodes.kubelet import pod_log


class PodLogs:
    def __init__(self, sim: Backend) -> None:
        self.sim = sim
        self.store = sim.store

    def get(self, t: Target, query: Query) -> Response:
        pod = existing(self.store, t)
        container = q(query, "container")
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        if container and container not in names:
            raise bad_request(f"container {container} is not valid for pod {t.name}")
        if not container and len(names) > 1:
            raise bad_request(
                f"a container name must be specified for pod {t.name}, choose one of: [{' '.join(names)}]"
            )
        if not (pod.get("status") or {}).get("startTime"):
            raise bad_request(
                f'container "{container or names[0]}" in pod "{t.name}" is waiting to start: ContainerCreating'
            )
        tail = q(query, "tailLines")
        timestamps = truthy(q(query, "timestamps"))
        now = self.sim.clock.now()
        text = pod_log(pod, now, self.sim.default_run_seconds, container, int(tail) if tail else None, timestamps)
        if truthy(q(query, "follow")):
            sent = pod_log(pod, now, self.sim.default_run_seconds, container, None, timestamps).count("\n")
            follow = self._follow(t, container, timestamps, sent)
            return Response(200, content_type="text/plain", stream=itertools.chain([text], follow))
        return Response(200, text, content_type="text/plain")

    def _follow(self, t: Target, container: str | None, timestamps: bool, sent: int) -> Iterator[str]:
        """follow=true: new log lines as emulated time passes, until the container ends or the pod goes."""
        store, stop_at = self.store, time.monotonic() + DEFAULT_WATCH_TIMEOUT
        epoch = self.sim.faults.watch_epoch
        while time.monotonic() < stop_at and self.sim.faults.watch_epoch == epoch:
            with store.lock:
                store.changed.wait(timeout=0.25)
                pod = store.get("pods", t.namespace, t.name or "", copy=False)
                now = self.sim.clock.now()
            if pod is None:
                return
            lines = pod_log(pod, now, self.sim.default_run_seconds, container, None, timestamps).splitlines(True)
            if len(lines) > sent:
                yield "".join(lines[sent:])
                sent = len(lines)
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return
