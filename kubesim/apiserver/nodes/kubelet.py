"""The kubelet (and a trivial scheduler): binds pending pods to a node whose labels match the nodeSelector,
runs them for the time their command says, and finishes them with the exit code their command says. A Ray node
(`ray start ... --block`, the command KubeRay gives a RayCluster's pods) runs until it is stopped, as a server does.

A pod with spec.schedulingGates is not scheduled: it stays Pending with PodScheduled False, reason SchedulingGated,
as kube-scheduler leaves it (PodSchedulingReadiness, GA since Kubernetes 1.30), until every gate is removed."""

from __future__ import annotations

import contextlib
import heapq
import math
import re
import shlex
from datetime import datetime, timedelta

from kubesim.apiserver.nodes.servers import is_server
from kubesim.kernel.clock import parse_rfc3339, rfc3339
from kubesim.kernel.store import ChangeFeed, Store, clone

RUN_SECONDS_ANNOTATION = "kubesim.io/run-seconds"
_SLEEP = re.compile(r"\bsleep\s+(\d+(?:\.\d+)?)")
_EXIT = re.compile(r"\bexit\s+(\d+)")
_RAY_NODE = re.compile(r"\bray start\b.*--block\b")
LOG_STEP_SECONDS = 10
SCHEDULING_GATED = "SchedulingGated"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def command_line(container: dict) -> str:
    return shlex.join([str(p) for p in (container.get("command") or []) + (container.get("args") or [])])


def run_plan(pod: dict, default_seconds: float) -> tuple[float, int]:
    """(run seconds, exit code) of a pod: the longest container decides the time, the first non-zero exit wins."""
    annotation = (pod["metadata"].get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
    seconds, code = 0.0, 0
    for c in pod["spec"].get("containers") or []:
        cmd = command_line(c)
        sleep, exit_ = _SLEEP.search(cmd), _EXIT.search(cmd)
        if sleep:
            seconds = max(seconds, float(sleep.group(1)))
        elif not exit_:
            # A server (kubesim.apiserver.nodes.servers) serves until it is stopped; anything else runs the default
            # time.
            seconds = max(seconds, math.inf if is_server(c) or _RAY_NODE.search(cmd) else default_seconds)
        if exit_ and code == 0:
            code = int(exit_.group(1))
    if annotation is not None:
        with contextlib.suppress(ValueError):
            seconds = float(annotation)
    return seconds, code


def _tolerates(pod: dict, taint: dict) -> bool:
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    for t in pod["spec"].get("tolerations") or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def node_fits(pod: dict, node: dict) -> bool:
    labels = node["metadata"].get("labels") or {}
    selector = pod["spec"].get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    return all(_tolerates(pod, t) for t in (node.get("spec") or {}).get("taints") or [])


class Kubelet:
    """Controller: Pending -> Running at the next settle, Running -> Succeeded/Failed after the run time."""

    name = "kubelet"

    def __init__(self, default_run_seconds: float = 60.0) -> None:
        self.default_run_seconds = default_run_seconds
        self._spread = 0
        self._feed = ChangeFeed("pods", "nodes")
        self._now: datetime | None = None
        self._ends: dict[tuple[str, str], datetime] = {}  # (pod uid, startTime) -> end of the run
        # The running pods' run ends, soonest first, filled from the pods each pass sees (and the runs it starts):
        # next_deadline and the due pods cost what is due, not a scan of every pod. An entry is checked against
        # the stored pod when it comes up (the pod may have been deleted or restarted since).
        self._runs: list[tuple[datetime, tuple[str, str]]] = []

    def reconcile(self, store: Store) -> bool:
        """Look at the pods written since the last pass, plus those whose run ended when time moved; at every pod
        after a history gap or a node change."""
        now = store.now()
        events = self._feed.changed(store)
        if events is None or any(e.resource == "nodes" for e in events):
            pods = store.list("pods", copy=False)
            self._runs = []
            for pod in pods:
                self._track(pod)
        else:
            keys = {(e.obj["metadata"]["namespace"], e.obj["metadata"]["name"]) for e in events}
            pods = [p for ns, name in sorted(keys) if (p := store.get("pods", ns, name, copy=False)) is not None]
            for pod in pods:
                self._track(pod)
            if now != self._now:
                keys |= self._due(store, now)
                pods = [p for ns, name in sorted(keys) if (p := store.get("pods", ns, name, copy=False)) is not None]
        self._now = now
        wrote = False
        nodes = None
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            phase = (pod.get("status") or {}).get("phase", "Pending")
            if phase == "Pending":
                if nodes is None:
                    nodes = store.list("nodes", copy=False)
                wrote |= self._start(store, clone(pod), nodes, now)
            elif self._finished_by(pod, now):
                wrote |= self._maybe_finish(store, clone(pod), now)
        return wrote

    def _track(self, pod: dict) -> None:
        """Note when a running pod's run ends."""
        if (pod.get("status") or {}).get("phase") == "Running" and (end := self._end_time(pod)) is not None:
            heapq.heappush(self._runs, (end, _key(pod)))

    def _current_end(self, store: Store, key: tuple[str, str], end: datetime) -> bool:
        """Whether a noted run end is still the stored pod's."""
        pod = store.get("pods", key[0], key[1], copy=False)
        return pod is not None and (pod.get("status") or {}).get("phase") == "Running" and self._end_time(pod) == end

    def _due(self, store: Store, now: datetime) -> set[tuple[str, str]]:
        """The running pods whose run has ended by now (taken off the run ends)."""
        due = set()
        while self._runs and self._runs[0][0] <= now:
            end, key = heapq.heappop(self._runs)
            if self._current_end(store, key, end):
                due.add(key)
        return due

    def _finished_by(self, pod: dict, now: datetime) -> bool:
        return (
            (pod.get("status") or {}).get("phase") == "Running"
            and (end := self._end_time(pod)) is not None
            and (end <= now)
        )

    def next_deadline(self, store: Store) -> datetime | None:
        """The soonest end of a running pod's run."""
        while self._runs:
            end, key = self._runs[0]
            if self._current_end(store, key, end):
                return end
            heapq.heappop(self._runs)
        return None

    def _end_time(self, pod: dict) -> datetime | None:
        started = (pod.get("status") or {}).get("startTime")
        if not started:
            return None
        key = (pod["metadata"]["uid"], started)
        end = self._ends.get(key)
        if end is None:
            seconds, _ = run_plan(pod, self.default_run_seconds)
            if math.isinf(seconds):
                return None  # runs until deleted
            end = self._ends[key] = parse_rfc3339(started) + timedelta(seconds=seconds)
        return end

    def _start(self, store: Store, pod: dict, nodes: list[dict], now: datetime) -> bool:
        md = pod["metadata"]
        node_name = pod["spec"].get("nodeName")
        if pod["spec"].get("schedulingGates") and not node_name:
            return self._gated(store, pod)
        if not node_name:
            fits = [n for n in nodes if node_fits(pod, n)]
            if not fits:
                return self._unschedulable(store, pod, len(nodes))
            self._spread += 1
            node_name = fits[self._spread % len(fits)]["metadata"]["name"]
            pod["spec"]["nodeName"] = node_name
            pod = store.update("pods", pod)
            store.record_event(
                pod,
                "Normal",
                "Scheduled",
                f"Successfully assigned {md['namespace']}/{md['name']} to {node_name}",
                "default-scheduler",
            )
        ts = rfc3339(now)
        containers = pod["spec"].get("containers") or []
        for c in containers:
            store.record_event(
                pod, "Normal", "Pulled", f'Container image "{c.get("image")}" already present on machine', "kubelet"
            )
            store.record_event(pod, "Normal", "Created", f"Created container: {c['name']}", "kubelet")
            store.record_event(pod, "Normal", "Started", f"Started container {c['name']}", "kubelet")
        status = pod.get("status") or {}
        status.update(
            {
                "phase": "Running",
                "hostIP": "10.0.0.1",
                "podIP": f"10.244.{len(md['name']) % 250}.{int(md['resourceVersion']) % 250 + 2}",
                "startTime": ts,
                "conditions": [
                    _cond("PodScheduled", "True", ts),
                    _cond("Initialized", "True", ts),
                    _cond("ContainersReady", "True", ts),
                    _cond("Ready", "True", ts),
                ],
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c.get("image", ""),
                        "imageID": f"{c.get('image', '')}@sha256:{'0' * 64}",
                        "containerID": f"containerd://{md['uid'].replace('-', '')}{i}",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": ts}},
                    }
                    for i, c in enumerate(containers)
                ],
            }
        )
        pod["status"] = status
        store.update_status("pods", pod)
        return True

    def _gated(self, store: Store, pod: dict) -> bool:
        """PodScheduled False, reason SchedulingGated, written once (no event: the scheduler does not try)."""
        conds = (pod.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "PodScheduled" and c.get("reason") == SCHEDULING_GATED for c in conds):
            return False
        pod.setdefault("status", {})["conditions"] = [
            {
                **_cond("PodScheduled", "False", rfc3339(store.now())),
                "reason": SCHEDULING_GATED,
                "message": GATED_MESSAGE,
            }
        ]
        store.update_status("pods", pod)
        return True

    def _unschedulable(self, store: Store, pod: dict, node_count: int) -> bool:
        message = f"0/{node_count} nodes are available: {node_count} node(s) didn't match Pod's node affinity/selector."
        conds = (pod.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "PodScheduled" and c.get("message") == message for c in conds):
            return False
        pod.setdefault("status", {})["conditions"] = [
            {**_cond("PodScheduled", "False", rfc3339(store.now())), "reason": "Unschedulable", "message": message}
        ]
        store.update_status("pods", pod)
        store.record_event(pod, "Warning", "FailedScheduling", message, "default-scheduler")
        return True

    def _maybe_finish(self, store: Store, pod: dict, now: datetime) -> bool:
        end = self._end_time(pod)
        if end is None or end > now:
            return False
        _, code = run_plan(pod, self.default_run_seconds)
        status = pod["status"]
        self._ends.pop((pod["metadata"]["uid"], status.get("startTime", "")), None)
        ts = rfc3339(end)
        restart = pod["spec"].get("restartPolicy", "Always")
        if (code != 0 and restart in ("OnFailure", "Always")) or (code == 0 and restart == "Always"):
            # The container restarts in place: same pod, a new run starting now.
            status["startTime"] = rfc3339(now)
            for cs in status.get("containerStatuses") or []:
                cs["restartCount"] = cs.get("restartCount", 0) + 1
                cs["lastState"] = {
                    "terminated": {"exitCode": code, "reason": "Error" if code else "Completed", "finishedAt": ts}
                }
                cs["state"] = {"running": {"startedAt": rfc3339(now)}}
            store.update_status("pods", pod)
            if code:
                store.record_event(pod, "Warning", "BackOff", "Back-off restarting failed container", "kubelet")
            return True
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        reason = "PodCompleted"
        status["conditions"] = [
            _cond("PodScheduled", "True", status.get("startTime", ts)),
            {**_cond("Initialized", "True", status.get("startTime", ts)), "reason": reason},
            {**_cond("ContainersReady", "False", ts), "reason": reason},
            {**_cond("Ready", "False", ts), "reason": reason},
        ]
        for cs in status.get("containerStatuses") or []:
            started = (cs.get("state") or {}).get("running", {}).get("startedAt", status.get("startTime"))
            cs["ready"] = False
            cs["started"] = False
            cs["state"] = {
                "terminated": {
                    "exitCode": code,
                    "reason": "Completed" if code == 0 else "Error",
                    "startedAt": started,
                    "finishedAt": ts,
                    "containerID": cs.get("containerID", ""),
                }
            }
        store.update_status("pods", pod)
        return True


def _key(pod: dict) -> tuple[str, str]:
    return pod["metadata"]["namespace"], pod["metadata"]["name"]


def _cond(type_: str, status: str, ts: str) -> dict:
    return {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": ts}


def pod_log(
    pod: dict,
    now: datetime,
    default_seconds: float,
    container: str | None = None,
    tail_lines: int | None = None,
    timestamps: bool = False,
) -> str:
    """Generated log: a start line, a "step N" line every LOG_STEP_SECONDS of run time, and an exit line."""
    status = pod.get("status") or {}
    started = status.get("startTime")
    if not started:
        return ""
    start = parse_rfc3339(started)
    seconds, code = run_plan(pod, default_seconds)
    finished = status.get("phase") in ("Succeeded", "Failed")
    elapsed = min((now - start).total_seconds(), seconds) if not finished else seconds
    name = container or (pod["spec"].get("containers") or [{"name": ""}])[0]["name"]
    spec_c: dict = next((c for c in pod["spec"].get("containers") or [] if c["name"] == name), {})
    steps = int(elapsed // LOG_STEP_SECONDS)
    total = 2 + steps + (1 if finished else 0)
    first = 0 if tail_lines is None else max(0, total - tail_lines)

    def line(i: int) -> str:
        if i == 0:
            t, text = start, f"kubesim: container {name} started, image {spec_c.get('image', '')}"
        elif i == 1:
            t, text = start, f"kubesim: running {command_line(spec_c) or '<image entrypoint>'}"
        elif i < 2 + steps:
            n = i - 1
            t, text = start + timedelta(seconds=n * LOG_STEP_SECONDS), f"step {n}: elapsed {n * LOG_STEP_SECONDS}s"
        else:
            t, text = start + timedelta(seconds=seconds), f"kubesim: container {name} exited with code {code}"
        return f"{rfc3339(t)} {text}" if timestamps else text

    return "".join(line(i) + "\n" for i in range(first, total))
