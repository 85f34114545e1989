"""The LeaderWorkerSet operator's controller (sigs.k8s.io/lws v0.10.0), as the cluster runs it beside Kubernetes' own
controllers (docs/research/job-integrations/status-and-tables.md, LeaderWorkerSet).

LWS runs a leader StatefulSet `<lws>` of `spec.replicas` leader pods `<lws>-<i>` and, per group, a worker StatefulSet
`<lws>-<i>` of `size - 1` pods `<lws>-<i>-<j>`. kubesim emulates no StatefulSets, so this controller keeps the pods
themselves, with the names, labels (`leaderworkerset.sigs.k8s.io/name`, `group-index`, `worker-index`, `group-key`,
`template-revision-hash`), annotations (`size`; workers' `leader-name`) and environment (`LWS_LEADER_ADDRESS`,
`LWS_GROUP_SIZE`, `LWS_WORKER_INDEX`) LWS gives them, each controlled by the LeaderWorkerSet. Pods go through the API
server's admission as a StatefulSet's would (defaults and mutating webhooks: Kueue gates them). A missing pod is
created again once its name is free; with restartPolicy RecreateGroupOnPodRestart (the default) a group with a failed
or missing pod is recreated whole. Workers are created once their leader exists (startupPolicy LeaderCreated) or
runs (LeaderReady). Scaling adds or removes whole groups; a template change replaces the groups of an older revision
whole, highest index first, while fewer than maxUnavailable groups are unready (no surge). status: replicas,
readyReplicas (groups whose pods all run), updatedReplicas (groups of the current revision), hpaPodSelector,
observedGeneration, conditions Available / Progressing."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime

from kubesim.kernel.clock import rfc3339
from kubesim.kernel.store import ChangeFeed, Store, clone, controller_reference

PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = PREFIX + "name"
GROUP_INDEX = PREFIX + "group-index"
WORKER_INDEX = PREFIX + "worker-index"
GROUP_KEY = PREFIX + "group-key"
REVISION = PREFIX + "template-revision-hash"
SIZE_ANNOTATION = PREFIX + "size"
LEADER_NAME = PREFIX + "leader-name"
COMPONENT = "lws-controller"
RECREATE_GROUP = "RecreateGroupOnPodRestart"

Admit = Callable[[dict], dict]


def _spec(lws: dict) -> dict:
    return lws.get("spec") or {}


def replicas(lws: dict) -> int:
    return int(_spec(lws).get("replicas", 1))


def size(lws: dict) -> int:
    return int((_spec(lws).get("leaderWorkerTemplate") or {}).get("size", 1))


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def _revision(lws: dict) -> str:
    template = _spec(lws).get("leaderWorkerTemplate") or {}
    return _sha1(repr(sorted((k, repr(v)) for k, v in template.items() if k != "size")))[:8]


def _max_unavailable(lws: dict) -> int:
    """rollingUpdateConfiguration.maxUnavailable in groups (an int, or a percentage of replicas rounded down), at
    least 1."""
    value = ((_spec(lws).get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}).get(
        "maxUnavailable", 1)
    if isinstance(value, str) and value.endswith("%"):
        value = replicas(lws) * int(value[:-1] or 0) // 100
    return max(1, int(value))


def _running(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


class LeaderWorkerSetController:
    """Controller protocol implementation for leaderworkerset.x-k8s.io/v1 LeaderWorkerSets; `admit` is what the API
    server does to a pod a controller creates (defaults and mutating admission webhooks)."""

    name = "lws-controller"

    def __init__(self, admit: Admit) -> None:
        self.admit = admit
        self._feed = ChangeFeed("leaderworkersets", "pods")

    def next_deadline(self, store: Store) -> datetime | None:
        return None

    def reconcile(self, store: Store) -> bool:
        events = self._feed.changed(store)
        if events is None:
            keys = {
                (o["metadata"]["namespace"], o["metadata"]["name"]) for o in store.list("leaderworkersets", copy=False)
            }
        else:
            keys = set()
            for ev in events:
                md = ev.obj["metadata"]
                if ev.resource == "leaderworkersets":
                    keys.add((md["namespace"], md["name"]))
                elif (md.get("labels") or {}).get(NAME_LABEL):
                    keys.add((md["namespace"], md["labels"][NAME_LABEL]))
        wrote = False
        for namespace, name in sorted(keys):
            lws = store.get("leaderworkersets", namespace, name, copy=False)
            if lws is not None and not lws["metadata"].get("deletionTimestamp"):
                wrote = self._sync(store, lws) or wrote
        return wrote

    def _sync(self, store: Store, lws: dict) -> bool:
        md = lws["metadata"]
        pods = [
            p
            for p in store.list("pods", md["namespace"], {NAME_LABEL: md["name"]}, copy=False)
            if any(r.get("uid") == md["uid"] for r in p["metadata"].get("ownerReferences") or [])
        ]
        by_name = {p["metadata"]["name"]: p for p in pods}
        wrote = False
        for pod in pods:  # scale down: whole groups beyond replicas go
            if int((pod["metadata"].get("labels") or {}).get(GROUP_INDEX, 0)) >= replicas(lws):
                wrote = self._delete(store, pod) or wrote
        wrote = self._roll(store, lws, by_name) or wrote
        for i in range(replicas(lws)):
            wrote = self._sync_group(store, lws, i, by_name) or wrote
        return self._status(store, lws) or wrote

    def _roll(self, store: Store, lws: dict, by_name: dict[str, dict]) -> bool:
        """A rolling update after a template change: groups of an older revision are deleted whole (and created
        again from the new template), the highest index first; a ready one only while fewer than maxUnavailable
        groups are unready (maxSurge is not emulated: no extra group is made)."""
        revision, name = _revision(lws), lws["metadata"]["name"]
        groups = [[by_name.get(n) for n in (f"{name}-{i}", *(f"{name}-{i}-{j}" for j in range(1, size(lws))))]
                  for i in range(replicas(lws))]
        ready = [all(p is not None and _running(p) for p in members) for members in groups]
        budget = _max_unavailable(lws) - ready.count(False)
        wrote = False
        for i in reversed(range(len(groups))):
            present = [p for p in groups[i] if p is not None]
            if not any((p["metadata"].get("labels") or {}).get(REVISION) != revision for p in present):
                continue
            if ready[i]:
                if budget <= 0:
                    break
                budget -= 1
            for pod in present:
                wrote = self._delete(store, pod) or wrote  # created again once gone (the pod events' next pass)
        return wrote

    def _sync_group(self, store: Store, lws: dict, i: int, by_name: dict[str, dict]) -> bool:
        name = lws["metadata"]["name"]
        names = [f"{name}-{i}", *(f"{name}-{i}-{j}" for j in range(1, size(lws)))]
        members = [by_name.get(n) for n in names]
        leader, workers = members[0], members[1:]
        present = [p for p in members if p is not None]
        started_workers = [w for w in workers if w is not None]
        broken = (
            any((p.get("status") or {}).get("phase") == "Failed" for p in present)
            or (leader is None and bool(present))
            or 0 < len(started_workers) < len(workers)
        )
        policy = (_spec(lws).get("leaderWorkerTemplate") or {}).get("restartPolicy", RECREATE_GROUP)
        if broken and policy == RECREATE_GROUP:
            wrote = False
            for pod in present:
                wrote = self._delete(store, pod) or wrote
            return wrote
        if leader is None:
            return self._create(store, lws, i, 0)
        wrote = False
        startup = _spec(lws).get("startupPolicy", "LeaderCreated")
        if startup == "LeaderReady" and not _running(leader):
            return False
        for j, worker in enumerate(workers, start=1):
            if worker is None:
                wrote = self._create(store, lws, i, j) or wrote
        return wrote

    @staticmethod
    def _delete(store: Store, pod: dict) -> bool:
        if pod["metadata"].get("deletionTimestamp"):
            return False
        store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        return True

    def _create(self, store: Store, lws: dict, i: int, j: int) -> bool:
        md = lws["metadata"]
        name, namespace = md["name"], md["namespace"]
        template_spec = _spec(lws).get("leaderWorkerTemplate") or {}
        leader = template_spec.get("leaderTemplate") if j == 0 else None
        template = clone(leader or template_spec.get("workerTemplate") or {})
        pod_name = f"{name}-{i}" if j == 0 else f"{name}-{i}-{j}"
        labels = {
            **((template.get("metadata") or {}).get("labels") or {}),
            NAME_LABEL: name,
            GROUP_INDEX: str(i),
            WORKER_INDEX: str(j),
            GROUP_KEY: _sha1(f"{namespace}/{name}-{i}"),
            REVISION: _revision(lws),
        }
        annotations = {**((template.get("metadata") or {}).get("annotations") or {}), SIZE_ANNOTATION: str(size(lws))}
        if j:
            annotations[LEADER_NAME] = f"{name}-{i}"
        spec = template.get("spec") or {}
        spec.setdefault("hostname", pod_name)
        spec.setdefault("subdomain", name)
        env = [
            {"name": "LWS_LEADER_ADDRESS", "value": f"{name}-{i}.{name}.{namespace}"},
            {"name": "LWS_GROUP_SIZE", "value": str(size(lws))},
            {"name": "LWS_WORKER_INDEX", "value": str(j)},
        ]
        for c in spec.get("containers") or []:
            c["env"] = [*env, *[e for e in c.get("env") or [] if e.get("name") not in {x["name"] for x in env}]]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": namespace,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [controller_reference(lws)],
            },
            "spec": spec,
        }
        store.create("pods", self.admit(pod))
        message = f"Created pod {pod_name}" if j == 0 else f"Created worker pod {pod_name}"
        store.record_event(lws, "Normal", "CreatingPod" if j == 0 else "CreatingWorkerPod", message, COMPONENT)
        return True

    def _status(self, store: Store, lws: dict) -> bool:
        md = lws["metadata"]
        pods = store.list("pods", md["namespace"], {NAME_LABEL: md["name"]}, copy=False)
        groups: dict[str, list[dict]] = {}
        for pod in pods:
            groups.setdefault(pod["metadata"]["labels"].get(GROUP_INDEX, ""), []).append(pod)
        leaders = sum(1 for p in pods if p["metadata"]["labels"].get(WORKER_INDEX) == "0")
        ready = sum(1 for members in groups.values() if len(members) == size(lws) and all(map(_running, members)))
        available = ready == replicas(lws)
        now = rfc3339(store.now())
        old = lws.get("status") or {}
        conditions = []
        for ctype, holds, reason, message in (
            ("Available", available, "AllGroupsReady", "All replicas are ready"),
            ("Progressing", not available, "GroupsProgressing", "Replicas are progressing"),
        ):
            value = "True" if holds else "False"
            prev = next((c for c in old.get("conditions") or [] if c.get("type") == ctype), None)
            since = prev["lastTransitionTime"] if prev and prev.get("status") == value else now
            conditions.append(
                {"type": ctype, "status": value, "reason": reason, "message": message, "lastTransitionTime": since}
            )
        status = {
            "replicas": leaders,
            "readyReplicas": ready,
            "updatedReplicas": sum(1 for p in pods if p["metadata"]["labels"].get(WORKER_INDEX) == "0"
                                   and p["metadata"]["labels"].get(REVISION) == _revision(lws)),
            "hpaPodSelector": f"{NAME_LABEL}={md['name']},{WORKER_INDEX}=0",
            "observedGeneration": md.get("generation", 1),
            "conditions": conditions,
        }
        if status == old:
            return False
        new = clone(lws)
        new["status"] = status
        store.update_status("leaderworkersets", new)
        return True
