"""The kubelet and kube-scheduler: binds pending pods to nodes as kube-scheduler does
(kubesim.apiserver.nodes.scheduler), runs them for the time their command says, and finishes them with the exit code
their command says; a pod past its spec.activeDeadlineSeconds is killed and failed (DeadlineExceeded), as the kubelet
does. A Ray node (`ray start ... --block`, the command KubeRay gives a RayCluster's pods) runs until it
is stopped, as a server does.

A pod with spec.schedulingGates is not scheduled: it stays Pending with PodScheduled False, reason SchedulingGated,
as kube-scheduler leaves it (PodSchedulingReadiness, GA since Kubernetes 1.30), until every gate is removed."""

from __future__ import annotations

import contextlib
import heapq
import math
import re
import shlex
from datetime import datetime, timedelta

from kubesim.apiserver.nodes.scheduler import SchedulerCache, Verdict
from kubesim.apiserver.nodes.servers import is_model_server, is_server
from kubesim.kernel.clock import parse_rfc3339, rfc3339
from kubesim.kernel.store import ChangeFeed, Store, clone

RUN_SECONDS_ANNOTATION = "kubesim.io/run-seconds"
# Graceful termination: an emulated container stops on SIGTERM after this long (default 0: at once, at the kubelet's
# next pass), never later than the pod's grace period, when the kubelet sends the delete that ends it.
STOP_SECONDS_ANNOTATION = "kubesim.io/stop-seconds"
DEFAULT_STOP_SECONDS = 0.0
_SLEEP = re.compile(r"\bsleep\s+(\d+(?:\.\d+)?)")
_EXIT = re.compile(r"\bexit\s+(\d+)")
_RAY_NODE = re.compile(r"\bray start\b.*--block\b")
LOG_STEP_SECONDS = 10
SCHEDULING_GATED = "SchedulingGated"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_LEASE_SECONDS = 40  # the kubelet's default nodeLeaseDurationSeconds
DEFAULT_SCHEDULER = "default-scheduler"
# A pod past its activeDeadlineSeconds: the kubelet kills its containers (SIGKILL's exit code) and fails it.
DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
DEADLINE_EXIT_CODE = 137


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
            serves = is_server(c) or is_model_server(pod, c) or _RAY_NODE.search(cmd)
            seconds = max(seconds, math.inf if serves else default_seconds)
        if exit_ and code == 0:
            code = int(exit_.group(1))
    if annotation is not None:
        with contextlib.suppress(ValueError):
            seconds = float(annotation)
    return seconds, code


class Kubelet:
    """Controller: kube-scheduler and the kubelets. Pending pods are placed (kubesim.apiserver.nodes.scheduler) and
    start at once; Running -> Succeeded/Failed after the run time. A pod that fits nowhere stays Pending (PodScheduled
    False, Unschedulable) and is tried again when capacity frees (a bound pod finished or deleted) or a node is
    added or changed, as kube-scheduler requeues it on those events."""

    name = "kubelet"

    def __init__(self, default_run_seconds: float = 60.0) -> None:
        self.default_run_seconds = default_run_seconds
        self._feed = ChangeFeed("pods", "nodes")
        self._now: datetime | None = None
        self._ends: dict[tuple[str, str], datetime] = {}  # (pod uid, startTime) -> end of the run
        # The running pods' run ends, soonest first, filled from the pods each pass sees (and the runs it starts):
        # next_deadline and the due pods cost what is due, not a scan of every pod. An entry is checked against
        # the stored pod when it comes up (the pod may have been deleted or restarted since).
        self._runs: list[tuple[datetime, tuple[str, str]]] = []
        self._stops: list[tuple[datetime, tuple[str, str]]] = []  # terminating pods' container stops, soonest first
        self._cache = SchedulerCache()
        self._unschedulable: set[tuple[str, str]] = set()  # pods the last attempt could not place

    def reconcile(self, store: Store) -> bool:
        """Look at the pods written since the last pass, plus those whose run ended when time moved; at every pod
        when the history was lost."""
        now = store.now()
        events = self._feed.changed(store)
        retry = False
        wrote = False
        if events is None:
            self._cache = SchedulerCache()
            self._cache.set_nodes(store.list("nodes", copy=False))
            wrote |= self._register_leases(store)
            pods = store.list("pods", copy=False)
            self._runs, self._stops = [], []
            for pod in pods:
                self._cache.track(pod)
                self._track(pod)
        else:
            keys: set[tuple[str, str]] = set()
            if any(e.resource == "nodes" for e in events):
                self._cache.set_nodes(store.list("nodes", copy=False))
                wrote |= self._register_leases(store)
                retry = True
            for e in events:
                if e.resource != "pods":
                    continue
                retry |= self._cache.track(e.obj, gone=e.type == "DELETED")
                if e.type == "DELETED":
                    self._unschedulable.discard(_key(e.obj))
                else:
                    keys.add(_key(e.obj))
            pods = [p for ns, name in sorted(keys) if (p := store.get("pods", ns, name, copy=False)) is not None]
            for pod in pods:
                self._track(pod)
            if now != self._now:
                keys |= self._due(store, now)
                pods = [p for ns, name in sorted(keys) if (p := store.get("pods", ns, name, copy=False)) is not None]
        self._now = now
        pending = []
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                wrote |= self._terminate(store, pod, now)
                continue
            phase = (pod.get("status") or {}).get("phase", "Pending")
            if phase == "Pending":
                pending.append(pod)
            elif self._finished_by(pod, now) and self._maybe_finish(store, clone(pod), now):
                wrote = True
                retry |= self._cache.track(store.get("pods", *_key(pod), copy=False) or pod, gone=False)
        if retry:
            seen = {_key(p) for p in pending}
            for key in sorted(self._unschedulable - seen):
                waiting = store.get("pods", *key, copy=False)
                if waiting is None or waiting["spec"].get("nodeName"):
                    self._unschedulable.discard(key)  # gone, or bound by someone else meanwhile
                else:
                    pending.append(waiting)
        # kube-scheduler's queue order: higher priority first, then the older pod.
        pending.sort(key=lambda p: (-int(p["spec"].get("priority") or 0), p["metadata"].get("creationTimestamp", ""),
                                    *_key(p)))
        failed: dict[str, Verdict] = {}  # pod shape -> its failure, while nothing was bound in this pass
        for pod in pending:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            wrote |= self._start(store, pod, now, failed)
        return wrote

    @staticmethod
    def _register_leases(store: Store) -> bool:
        """Each node's kubelet holds a Lease named after its node in kube-node-lease (owned by the Node, so it goes
        with it). kubesim's nodes never miss a heartbeat: renewTime is when the lease was taken."""
        wrote = False
        for node in store.list("nodes", copy=False):
            name = node["metadata"]["name"]
            if store.get("leases", NODE_LEASE_NAMESPACE, name, copy=False) is not None:
                continue
            taken = store.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # a MicroTime
            owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
            store.create(
                "leases",
                {
                    "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE, "ownerReferences": [owner]},
                    "spec": {"holderIdentity": name, "leaseDurationSeconds": NODE_LEASE_SECONDS, "renewTime": taken},
                },
            )
            wrote = True
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
        """The running pods whose run has ended by now (taken off the run ends), and the terminating pods whose
        containers have stopped by now."""
        due = set()
        while self._runs and self._runs[0][0] <= now:
            end, key = heapq.heappop(self._runs)
            if self._current_end(store, key, end):
                due.add(key)
        while self._stops and self._stops[0][0] <= now:
            due.add(heapq.heappop(self._stops)[1])
        return due

    @staticmethod
    def _stop_time(pod: dict) -> datetime | None:
        """When a terminating pod's containers have stopped: the emulated stop time after the deletion, within its
        grace period; None when the kubelet is done with it (grace period 0)."""
        md = pod["metadata"]
        grace = md.get("deletionGracePeriodSeconds") or 0
        if not grace:
            return None
        seconds = DEFAULT_STOP_SECONDS
        with contextlib.suppress(ValueError):
            seconds = float((md.get("annotations") or {}).get(STOP_SECONDS_ANNOTATION, seconds))
        deleted = parse_rfc3339(md["deletionTimestamp"]) - timedelta(seconds=grace)
        return deleted + timedelta(seconds=min(max(seconds, 0.0), grace))

    def _terminate(self, store: Store, pod: dict, now: datetime) -> bool:
        """A pod being deleted: once its containers have stopped, the kubelet ends its grace period (it goes, or
        waits for its finalizers); until then it is noted for when they will have."""
        stop = self._stop_time(pod)
        if stop is None:
            return False
        if stop > now:
            heapq.heappush(self._stops, (stop, _key(pod)))
            return False
        store.pod_terminated(*_key(pod))
        return True

    def _finished_by(self, pod: dict, now: datetime) -> bool:
        return (
            (pod.get("status") or {}).get("phase") == "Running"
            and (end := self._end_time(pod)) is not None
            and (end <= now)
        )

    def next_deadline(self, store: Store) -> datetime | None:
        """The soonest end of a running pod's run or of a terminating pod's containers."""
        while self._runs:
            end, key = self._runs[0]
            if self._current_end(store, key, end):
                break
            heapq.heappop(self._runs)
        while self._stops:
            stop, key = self._stops[0]
            pod = store.get("pods", key[0], key[1], copy=False)
            if pod is not None and self._stop_time(pod) == stop:
                break
            heapq.heappop(self._stops)
        return min([deadline for deadline, _ in (self._runs[:1] + self._stops[:1])], default=None)

    def _end_time(self, pod: dict) -> datetime | None:
        started = (pod.get("status") or {}).get("startTime")
        if not started:
            return None
        key = (pod["metadata"]["uid"], started)
        end = self._ends.get(key)
        if end is None:
            seconds, _ = run_plan(pod, self.default_run_seconds)
            seconds = min(seconds, _deadline(pod))
            if math.isinf(seconds):
                return None  # runs until deleted
            end = self._ends[key] = parse_rfc3339(started) + timedelta(seconds=seconds)
        return end

    def _start(self, store: Store, stored: dict, now: datetime, failed: dict[str, Verdict]) -> bool:
        """Bind (unless bound already) and start a pending pod; `stored` is the store's own dict, copied before any
        change."""
        pod = stored
        md = pod["metadata"]
        node_name = pod["spec"].get("nodeName")
        if not node_name and (pod["spec"].get("schedulerName") or DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER:
            return False  # another scheduler's pod (KAI's): kube-scheduler leaves it to that scheduler
        if pod["spec"].get("schedulingGates") and not node_name:
            return self._gated(store, pod)
        if not node_name:
            shape = self._cache.demand(pod).shape
            verdict = failed.get(shape) or self._cache.schedule(pod)
            if verdict.node is None:
                if verdict.victims:
                    self._preempt(store, pod, verdict)
                    failed.clear()
                else:
                    failed[shape] = verdict
                return self._unschedulable_now(store, pod, verdict)
            failed.clear()  # a bind takes capacity: later pods of a failed shape may fail otherwise
            self._unschedulable.discard(_key(pod))
            node_name = verdict.node
            pod = clone(stored)
            pod["spec"]["nodeName"] = node_name
            pod = store.update("pods", pod)
            self._cache.track(pod)
            store.record_event(
                pod,
                "Normal",
                "Scheduled",
                f"Successfully assigned {md['namespace']}/{md['name']} to {node_name}",
                "default-scheduler",
            )
        else:
            pod = clone(stored)
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
        pod = clone(pod)
        pod.setdefault("status", {})["conditions"] = [
            {
                **_cond("PodScheduled", "False", rfc3339(store.now())),
                "reason": SCHEDULING_GATED,
                "message": GATED_MESSAGE,
            }
        ]
        store.update_status("pods", pod)
        return True

    def _unschedulable_now(self, store: Store, pod: dict, verdict: Verdict) -> bool:
        """PodScheduled False, Unschedulable, with kube-scheduler's message, and a FailedScheduling event; an attempt
        that fails as the last one did writes nothing (kube-scheduler's repeat would only bump the event's count)."""
        self._unschedulable.add(_key(pod))
        status = pod.get("status") or {}
        conds = status.get("conditions") or []
        current = next((c for c in conds if c.get("type") == "PodScheduled"), None)
        nominated = verdict.nominated or status.get("nominatedNodeName")
        if (
            current is not None
            and current.get("reason") == "Unschedulable"
            and current.get("message") == verdict.message
            and status.get("nominatedNodeName") == nominated
        ):
            return False
        since = current["lastTransitionTime"] if current and current.get("status") == "False" else None
        pod = clone(pod)
        status = pod.setdefault("status", {})
        scheduled = {
            **_cond("PodScheduled", "False", since or rfc3339(store.now())),
            "reason": "Unschedulable",
            "message": verdict.message,
        }
        status["conditions"] = [c for c in conds if c.get("type") != "PodScheduled"] + [scheduled]
        if nominated:
            status["nominatedNodeName"] = nominated
        store.update_status("pods", pod)
        store.record_event(pod, "Warning", "FailedScheduling", verdict.message, "default-scheduler")
        return True

    def _preempt(self, store: Store, pod: dict, verdict: Verdict) -> None:
        """Evict the victims kube-scheduler chose: each gets DisruptionTarget (PreemptionByScheduler) and a Preempted
        event, then is deleted; the preemptor waits, nominated to the node, until its retry binds it there."""
        scheduler = pod["spec"].get("schedulerName") or "default-scheduler"
        for uid in verdict.victims:
            found = store.by_uid(uid)
            victim = store.get("pods", found[1], found[2]) if found is not None and found[0] == "pods" else None
            if found is None or victim is None:
                continue
            status = victim.setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
            status["conditions"].append(
                {
                    **_cond("DisruptionTarget", "True", rfc3339(store.now())),
                    "reason": "PreemptionByScheduler",
                    "message": f"{scheduler}: preempting to accommodate a higher priority pod",
                }
            )
            victim = store.update_status("pods", victim)
            store.record_event(
                victim,
                "Normal",
                "Preempted",
                f"Preempted by pod {pod['metadata']['uid']} on node {verdict.nominated}",
                "default-scheduler",
            )
            store.delete("pods", found[1], found[2])  # its DELETED event frees the node and retries the preemptor

    def _maybe_finish(self, store: Store, pod: dict, now: datetime) -> bool:
        end = self._end_time(pod)
        if end is None or end > now:
            return False
        seconds, code = run_plan(pod, self.default_run_seconds)
        exceeded = seconds > _deadline(pod)  # the kubelet kills it: Failed, never restarted
        if exceeded:
            code = DEADLINE_EXIT_CODE
        status = pod["status"]
        self._ends.pop((pod["metadata"]["uid"], status.get("startTime", "")), None)
        ts = rfc3339(end)
        restart = pod["spec"].get("restartPolicy", "Always")
        restarts = (code != 0 and restart in ("OnFailure", "Always")) or (code == 0 and restart == "Always")
        if restarts and not exceeded:
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
        if exceeded:
            status["reason"], status["message"] = DEADLINE_EXCEEDED, DEADLINE_MESSAGE
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


def _deadline(pod: dict) -> float:
    """The pod's spec.activeDeadlineSeconds, counted from its start (infinite without one)."""
    deadline = pod["spec"].get("activeDeadlineSeconds")
    return math.inf if deadline is None else float(deadline)


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
