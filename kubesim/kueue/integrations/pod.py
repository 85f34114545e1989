"""Kueue's Pod integration (upstream pkg/controller/jobs/pod, framework `pod`): plain pods and pod groups, held by
the `kueue.x-k8s.io/admission` scheduling gate the pod webhook adds (kubesim.kueue.webhooks.pod) until their Workload
is admitted. See docs/research/job-integrations/kueue-integrations.md, section 8.

- A single pod gets a Workload `pod-<name>-<hash>` controlled by the pod: one pod set `main` of one pod.
- A pod group (`kueue.x-k8s.io/pod-group-name`, annotation or label, and the `kueue.x-k8s.io/pod-group-total-count`
  annotation on every member) gets one Workload named after the group (or its prebuilt Workload), annotated
  `kueue.x-k8s.io/is-group-workload`, every member a non-controller owner; it is made once the group has as many
  runnable pods as its total count (or at once with `kueue.x-k8s.io/pod-group-fast-admission`), one pod set per role
  hash, named by it. Pods beyond the total count are deleted.
- On admission each gated pod gets its pod set's share of the admission (node selector and tolerations of the
  flavors, Kueue's labels and annotation) and loses the admission gate; event `Started`.
- On eviction every running pod gets condition TerminationTarget (reason `WorkloadEvictedDueTo<reason>`) and is
  deleted; Kueue never recreates pods. Once none runs, the quota is released; a pod-owned Workload is not requeued
  (SkipReassignmentForPodOwnedWorkloads), a group's is (its owner recreates the pods), and a group shows
  WaitingForReplacementPods until it is whole again.
- A single pod finishes with its phase; a group when all N pods succeeded, or when all its pods ended and one was not
  retriable (`kueue.x-k8s.io/retriable-in-group: "false"`); a serving group (LeaderWorkerSet) never. Then the
  `kueue.x-k8s.io/managed` finalizer leaves every member; a deleted pod loses it once Kueue has let it go.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

from kubesim.kernel.store import ChangeFeed, clone
from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.integrations import podsets
from kubesim.kueue.integrations.jobframework import remove_in_use_finalizer
from kubesim.kueue.integrations.podsets import PodSetConflict
from kubesim.kueue.scheduler.model import condition_true, find_condition
from kubesim.kueue.state import KueueState

FRAMEWORK = "pod"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
POD_FINALIZER = MANAGED_LABEL
ADMISSION_GATE = "kueue.x-k8s.io/admission"
GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
FAST_ADMISSION = "kueue.x-k8s.io/pod-group-fast-admission"
SERVING = "kueue.x-k8s.io/pod-group-serving"
SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
RETRIABLE_IN_GROUP = "kueue.x-k8s.io/retriable-in-group"
PREBUILT_WORKLOAD = "kueue.x-k8s.io/prebuilt-workload-name"
IS_GROUP_WORKLOAD = "kueue.x-k8s.io/is-group-workload"
WAITING_FOR_REPLACEMENT = "WaitingForReplacementPods"
TERMINATION_TARGET = "TerminationTarget"
MAX_POD_SETS = 18
# What decides a pod's role in its group (getRoleHash): the parts of its spec that change what it needs of a node.
_SHAPE_KEYS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "runtimeClassName",
    "priority",
    "topologySpreadConstraints",
    "overhead",
    "resourceClaims",
    "resources",
)


def _md(obj: dict, key: str) -> dict:
    return (obj.get("metadata") or {}).get(key) or {}


def group_name(pod: dict) -> str:
    """GroupNameAnnotation first (WorkloadIdentifierAnnotations, on in v0.20), then the label."""
    return _md(pod, "annotations").get(GROUP_NAME) or _md(pod, "labels").get(GROUP_NAME) or ""


def prebuilt_name(pod: dict) -> str:
    return _md(pod, "annotations").get(PREBUILT_WORKLOAD) or _md(pod, "labels").get(PREBUILT_WORKLOAD) or ""


def total_count(pod: dict) -> int | None:
    raw = _md(pod, "annotations").get(GROUP_TOTAL_COUNT, "")
    return int(raw) if raw.lstrip("+-").isdigit() and raw.isascii() else None


def unretriable(pod: dict) -> bool:
    return _md(pod, "annotations").get(RETRIABLE_IN_GROUP) == "false"


def gated(pod: dict) -> bool:
    return any(g.get("name") == ADMISSION_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def role_hash(spec: dict) -> str:
    """getRoleHash: 8 hex digits of the SHA-256 of the pod's shape (containers' requests and ports and the spec's
    scheduling-relevant fields)."""
    shape: dict = {k: spec.get(k) for k in _SHAPE_KEYS}
    for key in ("initContainers", "containers"):
        shape[key] = [
            {"resources": (c.get("resources") or {}).get("requests"), "ports": c.get("ports")}
            for c in spec.get(key) or []
        ]
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:8]


def terminated(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def deleting(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def active(pod: dict) -> bool:
    """A pod that still holds its node: Running and not being deleted."""
    return (pod.get("status") or {}).get("phase") == "Running" and not deleting(pod)


def pod_set_template(pod: dict) -> dict:
    """The pod as its pod set records it: its spec without Kueue's gate or a node name."""
    spec = clone(pod.get("spec") or {})
    spec.pop("nodeName", None)
    gates = [g for g in spec.pop("schedulingGates", None) or [] if g.get("name") != ADMISSION_GATE]
    if gates:
        spec["schedulingGates"] = gates
    return {"spec": spec}


def pod_owner_reference(pod: dict, *, controller: bool) -> dict:
    md = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": md["name"],
        "uid": md["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


Key = tuple[str, str, str]  # ("pod" | "group", namespace, pod or group name)


class PodReconciler:
    """Controller for the pod integration (kubesim.kernel.protocols.Controller). With only the LeaderWorkerSet
    integration enabled it is implicitly enabled and handles only pods a parent suspends."""

    name = "kueue-pod-controller"

    def __init__(self, state: KueueState, *, parent_suspended_only: bool = False) -> None:
        self.state = state
        self.parent_suspended_only = parent_suspended_only
        self._feed = ChangeFeed("pods", "workloads")
        self._warned: set[tuple[str, str, int]] = set()
        # The pods that name a prebuilt Workload, by (namespace, its name), kept from the change feed: a Workload's
        # write looks its pods up here instead of reading every pod of its namespace.
        self._prebuilt: dict[tuple[str, str], set[str]] = {}
        self._names: dict[tuple[str, str], str] = {}  # (namespace, pod) -> the prebuilt Workload it names

    def next_deadline(self, store) -> datetime | None:
        return None

    def reconcile(self, store) -> bool:
        events = self._feed.changed(store)
        keys: set[Key] = set()
        if events is None:
            self._prebuilt, self._names = {}, {}
            for pod in store.list("pods", copy=False):
                self._index(pod, gone=False)
                keys |= self._keys_of_pod(pod)
            for wl in self.state.listed(store, "workloads"):
                keys |= self._keys_of_workload(store, wl)
        else:
            for e in events:  # first the index as the store is now, then what each change touches
                if e.resource == "pods":
                    self._index(e.obj, gone=e.type == "DELETED")
            for e in events:
                keys |= self._keys_of_pod(e.obj) if e.resource == "pods" else self._keys_of_workload(store, e.obj)
        wrote = False
        now = store.clock.now()
        for key in sorted(keys):
            wrote = (
                self._single(store, key[1], key[2], now) if key[0] == "pod" else self._group(store, key[1], key[2], now)
            ) or wrote
        return wrote

    # -- what a change touches ---------------------------------------------------------------------------------

    def _handles(self, pod: dict) -> bool:
        if _md(pod, "labels").get(MANAGED_LABEL) != "true" and SUSPENDING_PARENT not in _md(pod, "annotations"):
            return False
        return not self.parent_suspended_only or SUSPENDING_PARENT in _md(pod, "annotations")

    def _keys_of_pod(self, pod: dict) -> set[Key]:
        if not self._handles(pod):
            return set()
        ns = pod["metadata"]["namespace"]
        group = group_name(pod)
        return {("group", ns, group)} if group else {("pod", ns, pod["metadata"]["name"])}

    def _keys_of_workload(self, store, wl: dict) -> set[Key]:
        md = wl["metadata"]
        if _md(wl, "annotations").get(IS_GROUP_WORKLOAD) == "true":
            return {("group", md["namespace"], md["name"])}
        owners = {
            ("pod", md["namespace"], ref.get("name", ""))
            for ref in md.get("ownerReferences") or []
            if ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1"
        }
        if owners:
            return owners
        # a prebuilt Workload no pod has adopted yet: the pods that name it
        return {
            key
            for name in self._prebuilt.get((md["namespace"], md["name"]), ())
            if (pod := store.get("pods", md["namespace"], name, copy=False)) is not None
            for key in self._keys_of_pod(pod)
        }

    def _index(self, pod: dict, *, gone: bool) -> None:
        """Follow a pod's write in the prebuilt-name index (gone: it was deleted)."""
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        before = self._names.pop((ns, name), "")
        if before:
            named = self._prebuilt[(ns, before)]
            named.discard(name)
            if not named:
                del self._prebuilt[(ns, before)]
        after = "" if gone else prebuilt_name(pod)
        if after:
            self._names[(ns, name)] = after
            self._prebuilt.setdefault((ns, after), set()).add(name)

    # -- a single pod ------------------------------------------------------------------------------------------

    def _single(self, store, ns: str, name: str, now: datetime) -> bool:
        pod = store.get("pods", ns, name, copy=False)
        if pod is None or not self._handles(pod) or group_name(pod):
            return self._release_orphans(store, ns, name)
        wl = self._single_workload(store, pod)
        if wl is None:
            if terminated(pod) or deleting(pod):
                return self._finalize(store, [pod])
            return False if prebuilt_name(pod) else self._create_single(store, pod)
        if not wl["metadata"].get("ownerReferences") and not deleting(wl):
            adopted = clone(wl)
            adopted["metadata"]["ownerReferences"] = [pod_owner_reference(pod, controller=True)]
            store.update("workloads", adopted)
            return True
        if condition_true(wl, C.FINISHED):
            return self._finalize(store, [pod]) or (deleting(wl) and remove_in_use_finalizer(store, wl))
        if terminated(pod):
            succeeded = pod["status"]["phase"] == "Succeeded"
            message = (pod.get("status") or {}).get("message", "")
            return self._finish(store, wl, pod, succeeded, message, now)
        if condition_true(wl, C.EVICTED):
            return self._evict(store, wl, [pod], now, requeue=False)
        if deleting(pod):
            return self._finalize(store, [pod])
        if condition_true(wl, C.ADMITTED) and gated(pod):
            return self._ungate(store, wl, [pod], now)
        return False

    def _single_workload(self, store, pod: dict) -> dict | None:
        md = pod["metadata"]
        prebuilt = prebuilt_name(pod)
        if prebuilt:
            return store.get("workloads", md["namespace"], prebuilt, copy=False)
        for _, wl in store.dependents(md["uid"], "workloads"):
            if any(
                r.get("controller") and r.get("uid") == md["uid"] for r in wl["metadata"].get("ownerReferences") or []
            ):
                return wl
        return None

    def _create_single(self, store, pod: dict) -> bool:
        if not gated(pod):
            return False
        md = pod["metadata"]
        name = podsets.workload_name(md["name"], md["uid"], "Pod", "")
        pod_sets = [{"name": "main", "count": 1, "template": pod_set_template(pod)}]
        return self._create(store, pod, name, pod_sets, [pod_owner_reference(pod, controller=True)], {})

    def _release_orphans(self, store, ns: str, name: str) -> bool:
        """A deleted pod's Workload goes with it (garbage collection): Kueue's in-use finalizer must not hold it."""
        wrote = False
        for wl in store.list("workloads", ns, copy=False):
            refs = wl["metadata"].get("ownerReferences") or []
            if deleting(wl) and any(r.get("kind") == "Pod" and r.get("name") == name for r in refs):
                wrote = remove_in_use_finalizer(store, wl) or wrote
        return wrote

    # -- a pod group -------------------------------------------------------------------------------------------

    def _group(self, store, ns: str, name: str, now: datetime) -> bool:
        pods = sorted(
            (p for p in store.list("pods", ns, copy=False) if self._handles(p) and group_name(p) == name),
            key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]),
        )
        wl_name = next((prebuilt_name(p) for p in pods if prebuilt_name(p)), name)
        wl = store.get("workloads", ns, wl_name, copy=False)
        if wl is not None and _md(wl, "annotations").get(IS_GROUP_WORKLOAD) != "true" and wl_name == name:
            return self._name_conflict(store, pods, wl)
        if wl is None:
            return False if wl_name != name else self._create_group(store, ns, name, pods)
        if deleting(wl) and not pods:
            return remove_in_use_finalizer(store, wl)
        wrote = self._adopt(store, wl, pods)
        if condition_true(wl, C.FINISHED):
            return self._finalize(store, pods) or wrote
        serving = any(_md(p, "annotations").get(SERVING) == "true" for p in pods)
        total = total_count(pods[0]) if pods else None
        if total is not None and not serving:
            done = self._group_finished(pods, total)
            if done is not None:
                return self._finish(store, wl, pods[0], done[0], done[1], now) or wrote
        if self._drop_excess(store, pods, total):
            wrote = True
            pods = [p for p in pods if store.get("pods", ns, p["metadata"]["name"], copy=False) is not None]
        wl = store.get("workloads", ns, wl_name, copy=False) or wl
        if condition_true(wl, C.EVICTED):
            return self._evict(store, wl, pods, now, requeue=True) or wrote
        wrote = self._replacement_condition(store, wl, pods, total, now) or wrote
        replaced = total is not None and self._live(pods) >= total
        if serving or replaced:  # deleted members are let go once the group is whole again (or never counted)
            wrote = self._finalize(store, [p for p in pods if deleting(p) and not terminated(p)]) or wrote
        if condition_true(wl, C.ADMITTED):
            wrote = self._ungate(store, wl, [p for p in pods if gated(p) and not deleting(p)], now) or wrote
        return wrote

    @staticmethod
    def _group_finished(pods: list[dict], total: int) -> tuple[bool, str] | None:
        succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
        if succeeded >= total:
            return True, f"Pods succeeded: {succeeded}/{total}."
        if pods and all(terminated(p) for p in pods) and any(unretriable(p) for p in pods):
            return False, f"Pods succeeded: {succeeded}/{total}. Last pod failed and the group is not retriable."
        return None

    def _create_group(self, store, ns: str, name: str, pods: list[dict]) -> bool:
        runnable = [p for p in pods if not deleting(p) and (p.get("status") or {}).get("phase") != "Failed"]
        if not runnable:
            return False
        first = runnable[0]
        total = total_count(first) or 0
        fast = _md(first, "annotations").get(FAST_ADMISSION) == "true"
        if len(runnable) < total and not fast:
            if (ns, name, len(runnable)) in self._warned:
                return False
            self._warned.add((ns, name, len(runnable)))
            message = f"'{name}' group has fewer runnable pods than expected"
            store.record_event(first, "Warning", "ErrWorkloadCompose", message, C.CONTROLLER_NAME)
            return True
        if fast:
            pod_sets = [{"name": role_of(first), "count": total, "template": pod_set_template(first)}]
        else:
            roles: dict[str, list[dict]] = {}
            for pod in sorted(runnable[:total], key=lambda p: p["metadata"]["name"]):
                roles.setdefault(role_of(pod), []).append(pod)
            pod_sets = [
                {"name": role, "count": len(members), "template": pod_set_template(members[0])}
                for role, members in list(roles.items())[:MAX_POD_SETS]
            ]
        owners = [pod_owner_reference(p, controller=False) for p in runnable]
        return self._create(store, first, name, pod_sets, owners, {IS_GROUP_WORKLOAD: "true"})

    def _adopt(self, store, wl: dict, pods: list[dict]) -> bool:
        """Every member (a replacement too) owns the group's Workload."""
        refs = wl["metadata"].get("ownerReferences") or []
        have = {r.get("uid") for r in refs}
        new = [pod_owner_reference(p, controller=False) for p in pods if p["metadata"]["uid"] not in have]
        if not new or deleting(wl):
            return False
        wl = fresh(store, "workloads", wl) or clone(wl)
        wl["metadata"]["ownerReferences"] = [*refs, *new]
        store.update("workloads", wl)
        return True

    def _drop_excess(self, store, pods: list[dict], total: int | None) -> bool:
        """Members beyond the total count (the newest) are let go and deleted."""
        live = [p for p in pods if not deleting(p) and not terminated(p)]
        if total is None or len(live) <= total:
            return False
        for pod in live[total:]:
            self._finalize(store, [pod])
            store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        return True

    def _replacement_condition(self, store, wl: dict, pods: list[dict], total: int | None, now: datetime) -> bool:
        """WaitingForReplacementPods: True after an eviction or failures until the group is whole again."""
        cur = find_condition(wl, WAITING_FOR_REPLACEMENT)
        live = self._live(pods)
        failed = any((p.get("status") or {}).get("phase") == "Failed" for p in pods)
        waiting = cur is not None and cur.get("status") == "True"
        short = total is not None and live < total
        if short and failed and not waiting:
            new = ("True", "PodsFailed", "Some Failed pods need replacement")
        elif waiting and not short:
            new = ("False", "PodsReady", "No pods need replacement")
        else:
            return False
        wl = fresh(store, "workloads", wl) or clone(wl)
        ws.set_condition(wl, WAITING_FOR_REPLACEMENT, *new, now)
        store.update_status("workloads", wl)
        return True

    @staticmethod
    def _live(pods: list[dict]) -> int:
        return sum(1 for p in pods if not deleting(p) and (p.get("status") or {}).get("phase") != "Failed")

    def _name_conflict(self, store, pods: list[dict], wl: dict) -> bool:
        md = wl["metadata"]
        key = (md["namespace"], md["name"], -1)
        if not pods or key in self._warned:
            return False
        self._warned.add(key)
        message = f"Workload {md['namespace']}/{md['name']} exists and is not a pod group Workload"
        store.record_event(pods[0], "Warning", "WorkloadNameConflict", message, C.CONTROLLER_NAME)
        return True

    # -- shared steps ------------------------------------------------------------------------------------------

    def _create(self, store, pod: dict, name: str, pod_sets: list[dict], owners: list[dict], notes: dict) -> bool:
        md = pod["metadata"]
        labels = md.get("labels") or {}
        spec: dict = {"active": True, "queueName": labels.get(C.QUEUE_NAME_LABEL, ""), "priority": 0}
        pc_name = labels.get(C.PRIORITY_CLASS_LABEL)
        if pc_name:
            pc = store.get("workloadpriorityclasses", None, pc_name)
            if pc is None:
                message = f'WorkloadPriorityClass "{pc_name}" not found'
                store.record_event(pod, "Warning", "WorkloadPriorityClassNotFound", message, C.CONTROLLER_NAME)
                return True
            spec["priorityClassRef"] = {"group": C.KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": pc_name}
            spec["priority"] = int(pc.get("value", 0))
        spec["podSets"] = pod_sets
        provreq = {k: v for k, v in (md.get("annotations") or {}).items() if k.startswith("provreq.kueue.x-k8s.io/")}
        wl_md: dict = {
            "name": name,
            "namespace": md["namespace"],
            "labels": {C.JOB_UID_LABEL: md["uid"]} if not notes else {},
            "annotations": {**provreq, **notes},
            "finalizers": [C.RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": owners,
        }
        store.create("workloads", {"apiVersion": C.KUEUE_API, "kind": "Workload", "metadata": wl_md, "spec": spec})
        store.record_event(
            pod, "Normal", "CreatedWorkload", f"Created Workload: {md['namespace']}/{name}", C.CONTROLLER_NAME
        )
        return True

    def _finish(self, store, wl: dict, pod: dict, succeeded: bool, message: str, now: datetime) -> bool:
        wl = fresh(store, "workloads", wl) or clone(wl)
        ws.set_condition(wl, C.FINISHED, "True", "Succeeded" if succeeded else "Failed", message, now)
        store.update_status("workloads", wl)
        md = wl["metadata"]
        note = f"Workload '{md['namespace']}/{md['name']}' is declared finished"
        store.record_event(pod, "Normal", "FinishedWorkload", note, C.CONTROLLER_NAME)
        return True

    def _ungate(self, store, wl: dict, pods: list[dict], now: datetime) -> bool:
        """Each gated pod gets its pod set's share of the admission and loses the admission gate."""
        if not pods:
            return False
        try:
            infos = {info.name: info for info in podsets.from_admission(store, wl)}
        except PodSetConflict as exc:
            wl = clone(wl)
            ws.set_condition(wl, C.FINISHED, "True", "FailedToStart", str(exc), now)
            store.update_status("workloads", wl)
            return True
        cq = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        single = len(infos) == 1 and _md(wl, "annotations").get(IS_GROUP_WORKLOAD) != "true"
        for member in pods:
            info = next(iter(infos.values())) if single else infos.get(role_of(member))
            pod = fresh(store, "pods", member)
            if info is None or pod is None:
                continue
            try:
                podsets.merge_into(pod, info)
            except PodSetConflict as exc:
                wl = clone(wl)
                ws.set_condition(wl, C.FINISHED, "True", "FailedToStart", str(exc), now)
                store.update_status("workloads", wl)
                return True
            gates = [g for g in pod["spec"].get("schedulingGates") or [] if g.get("name") != ADMISSION_GATE]
            if gates:
                pod["spec"]["schedulingGates"] = gates
            else:
                pod["spec"].pop("schedulingGates", None)
            store.update("pods", pod)
            store.record_event(pod, "Normal", "Started", f"Admitted by clusterQueue {cq}", C.CONTROLLER_NAME)
        return True

    def _evict(self, store, wl: dict, pods: list[dict], now: datetime, *, requeue: bool) -> bool:
        """Stop: TerminationTarget on each ungated pod, then delete it; once none runs, release the quota."""
        ev = find_condition(wl, C.EVICTED) or {}
        wrote = False
        for member in pods:
            if deleting(member) or terminated(member) or gated(member):
                continue  # a gated pod is already stopped (a recreated member waits for the next admission)
            pod = fresh(store, "pods", member)
            if pod is None:
                continue
            ws.set_condition(
                pod,
                TERMINATION_TARGET,
                "True",
                f"WorkloadEvictedDueTo{ev.get('reason', '')}",
                ev.get("message", ""),
                now,
            )
            for c in pod["status"]["conditions"]:
                c.pop("observedGeneration", None)
            store.update_status("pods", pod)
            store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
            store.record_event(pod, "Normal", "Stopped", ev.get("message", ""), C.CONTROLLER_NAME)
            wrote = True
        pods = [
            p
            for p in (store.get("pods", p["metadata"]["namespace"], p["metadata"]["name"], copy=False) for p in pods)
            if p is not None
        ]
        if any(active(p) for p in pods) or not condition_true(wl, C.QUOTA_RESERVED):
            return wrote
        wl = fresh(store, "workloads", wl) or clone(wl)
        ws.release_after_eviction(wl, now)
        if not requeue:  # SkipReassignmentForPodOwnedWorkloads: a pod is not recreated, its Workload is parked
            ws.set_condition(wl, C.REQUEUED, "False", ev.get("reason", ""), ev.get("message", ""), now)
        elif _md(wl, "annotations").get(IS_GROUP_WORKLOAD) == "true":
            ws.set_condition(wl, WAITING_FOR_REPLACEMENT, "True", ev.get("reason", ""), ev.get("message", ""), now)
        store.update_status("workloads", wl)
        if not requeue:
            self._finalize(store, [p for p in pods if deleting(p)])
        return True

    @staticmethod
    def _finalize(store, pods: list[dict]) -> bool:
        wrote = False
        for pod in pods:
            if POD_FINALIZER in (pod["metadata"].get("finalizers") or []):
                store.remove_finalizer("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], POD_FINALIZER)
                wrote = True
        return wrote


def fresh(store, resource: str, obj: dict) -> dict | None:
    """The stored object now, as a copy to change (an earlier step of the same pass may have written it)."""
    md = obj["metadata"]
    return store.get(resource, md.get("namespace"), md["name"])


def role_of(pod: dict) -> str:
    return _md(pod, "annotations").get(ROLE_HASH) or role_hash(pod.get("spec") or {})
