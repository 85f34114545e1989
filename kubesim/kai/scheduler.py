"""KAI Scheduler for the nodes of KAI pools: its pod-grouper (the PodGroup of each pod, from its top owner), and each
node pool's scheduling cycle: allocate pending PodGroups (gangs: at least minMember pods or none) queue by queue, the
queue furthest below its fair share first; reclaim GPUs held over their fair share by other queues' preemptible work
for a queue below its own; preempt lower-priority preemptible work in the same queue; share GPUs between fractional
pods; then write Queue and PodGroup status and the scheduling conditions of what stays pending."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from kubesim.kai import fairness
from kubesim.kai.names import (
    DEFAULT_NODE_POOL,
    DEFAULT_POD_GROUP_PRIORITY,
    DEFAULT_PRIORITY_CLASS,
    DEFAULT_QUEUE,
    GPU,
    GPU_FRACTION_ANNOTATION,
    GPU_GROUP_LABEL,
    GPU_SHARING_LABEL,
    NODE_POOL_LABEL,
    NON_PREEMPTIBLE,
    NON_PREEMPTIBLE_OVER_QUOTA,
    NON_PREEMPTIBLE_PRIORITY,
    OVER_LIMIT,
    POD_GROUP_ANNOTATION,
    PREEMPTIBILITY_LABEL,
    PREEMPTIBLE,
    PRIORITY_CLASS_LABEL,
    PRIORITY_CLASSES,
    QUEUE_DOES_NOT_EXIST,
    QUEUE_LABEL,
    SCHEDULER_NAME,
    UNSCHEDULABLE,
    UNSCHEDULABLE_ON_NODE_POOL,
)
from kubesim.kernel.clock import rfc3339
from kubesim.kernel.quantity import QuantityError, decimal_value
from kubesim.kernel.store import ChangeFeed, Store, clone

PODGROUP_API = "scheduling.run.ai/v2alpha2"
EPS = fairness.EPSILON


@dataclass
class Need:
    """What one pod asks of a node: whole GPUs or a fraction of one, CPU in millicores, memory in bytes."""

    gpus: float = 0.0
    fraction: float = 0.0
    cpu: float = 0.0
    memory: float = 0.0

    @property
    def gpu(self) -> float:
        return self.gpus + self.fraction


@dataclass
class Node:
    """A node of a pool and what its bound pods hold; `devices` maps a shared device to the fraction it has given."""

    name: str
    gpus: int
    cpu: float
    memory: float
    pods: int
    sharing: bool
    whole: float = 0.0
    used_cpu: float = 0.0
    used_memory: float = 0.0
    used_pods: int = 0
    devices: dict[str, float] = field(default_factory=dict)

    @property
    def free_gpus(self) -> float:
        return self.gpus - self.whole - len(self.devices)

    def copy(self) -> Node:
        return Node(self.name, self.gpus, self.cpu, self.memory, self.pods, self.sharing, self.whole, self.used_cpu,
                    self.used_memory, self.used_pods, dict(self.devices))

    def hold(self, need: Need, device: str | None, sign: int = 1) -> None:
        self.whole += sign * need.gpus
        self.used_cpu += sign * need.cpu
        self.used_memory += sign * need.memory
        self.used_pods += sign
        if device:
            self.devices[device] = self.devices.get(device, 0.0) + sign * need.fraction
            if self.devices[device] <= EPS:
                del self.devices[device]

    def place(self, need: Need) -> tuple[str | None, str]:
        """(device or None, "") where the pod fits, else (None, the resource it lacks)."""
        if need.cpu > self.cpu - self.used_cpu + EPS:
            return None, "CPU cores"
        if need.memory > self.memory - self.used_memory + EPS:
            return None, "memory"
        if self.used_pods + 1 > self.pods:
            return None, "pods"
        if need.fraction:
            if not self.sharing:
                return None, "GPU sharing"
            fitting = [(used, d) for d, used in self.devices.items() if used + need.fraction <= 1 + EPS]
            if fitting:
                return max(fitting)[1], ""  # the fullest device it fits on: pack
            if self.free_gpus >= 1:
                index = next(i for i in range(self.gpus) if f"{self.name}-gpu{i}" not in self.devices)
                return f"{self.name}-gpu{index}", ""
            return None, "GPUs"
        if need.gpus > self.free_gpus + EPS:
            return None, "GPUs"
        return "", ""


@dataclass
class Group:
    """A PodGroup and its pods in the cycle."""

    obj: dict
    pods: list[dict]
    queue: str
    pool: str
    priority: int
    preemptible: bool
    min_member: int

    @property
    def key(self) -> tuple[str, str]:
        return self.obj["metadata"]["namespace"], self.obj["metadata"]["name"]

    @property
    def bound(self) -> list[dict]:
        return [p for p in self.pods if p["spec"].get("nodeName")]

    @property
    def pending(self) -> list[dict]:
        return [p for p in self.pods if not p["spec"].get("nodeName")]

    def held(self) -> float:
        return sum(need(p).gpu for p in self.bound)

    def asked(self) -> float:
        return sum(need(p).gpu for p in self.pending)


def need(pod: dict) -> Need:
    """A pod's requests (its containers' requests, or limits where it gives none) and its GPU fraction."""
    out = Need()
    for c in pod["spec"].get("containers") or []:
        res = c.get("resources") or {}
        amounts = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        out.gpus += _number(amounts.get(GPU))
        out.cpu += _number(amounts.get("cpu")) * 1000
        out.memory += _number(amounts.get("memory"))
    fraction = _number((pod["metadata"].get("annotations") or {}).get(GPU_FRACTION_ANNOTATION))
    if 0 < fraction < 1 and not out.gpus:
        out.fraction = fraction
    return out


def _newest_first(groups: list[Group]) -> list[Group]:
    """The groups, the last created first."""
    return sorted(groups, key=lambda g: (g.obj["metadata"].get("creationTimestamp", ""), g.key), reverse=True)


def _number(value: object) -> float:
    if value is None:
        return 0.0
    try:
        return float(decimal_value(value))
    except QuantityError:
        return 0.0


def _active(pod: dict) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in (
        "Succeeded", "Failed")


def _labels(obj: dict) -> dict:
    return obj["metadata"].get("labels") or {}


def gpus_text(value: float) -> str:
    """A GPU amount as KAI prints it (`1`, `0.5`)."""
    return f"{value:g}"


def quantity(value: float) -> str:
    """A resource amount as a Kubernetes quantity (`2`, `500m`)."""
    milli = round(value * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def resource_list(gpus: float, cpu_milli: float, memory: float) -> dict:
    return {"cpu": quantity(cpu_milli / 1000), "memory": str(round(memory)), GPU: quantity(gpus)}


POD_GROUPER = "pod-grouper"
GROUPER_WARNING = "PodGrouperWarning"  # the reason of the Event KAI's grouper records when it cannot group a pod


def _top_owner(store: Store, pod: dict) -> tuple[dict | None, str]:
    """(the object at the top of the pod's owner chain, ""), the pod itself when it has no owner; (None, why) when
    an owner is gone (or replaced by another of the same name) or an owner has several owners of its own. KAI
    follows each object's first ownerReference."""
    current = pod
    while refs := current["metadata"].get("ownerReferences") or []:
        if current is not pod and len(refs) > 1:
            return None, f"{current['kind']} {current['metadata']['name']} has several owners"
        ref = refs[0]
        found = store.by_uid(str(ref.get("uid", "")))
        owner = store.get(found[0], found[1], found[2], copy=False) if found else None
        if owner is None or owner.get("kind") != ref.get("kind") or owner["metadata"]["name"] != ref.get("name"):
            return None, (f"failed to find {ref.get('kind')}: <{pod['metadata']['namespace']}/{ref.get('name')}>, "
                          f"uid: <{ref.get('uid')}>: not found")
        current = owner
    return current, ""


def _pod_group_name(top: dict, pod: dict) -> str:
    """KAI's name for the PodGroup of a pod: one per pod of a batch/v1 Job (KAI's Job grouper: a Job's pods are never
    a gang), else one per top owner (the default grouper, for a pod of its own too)."""
    per_pod = top.get("apiVersion") == "batch/v1" and top.get("kind") == "Job"
    return f"pg-{pod['metadata']['name'] if per_pod else top['metadata']['name']}-{top['metadata']['uid']}"[:253]


def _pod_group(store: Store, top: dict, pod: dict, name: str) -> dict:
    """The PodGroup KAI's default grouper writes: the top owner's labels (and the pod's node pool when the owner
    names none), owned by the top owner, minMember 1; queue, priority class and preemptibility from the top
    owner's labels, else the pod's (a priority class that does not exist falls back to KAI's `train`)."""
    owner_labels, pod_labels = _labels(top), _labels(pod)
    labels = dict(owner_labels)
    if NODE_POOL_LABEL not in labels and NODE_POOL_LABEL in pod_labels:
        labels[NODE_POOL_LABEL] = pod_labels[NODE_POOL_LABEL]
    class_name = (owner_labels.get(PRIORITY_CLASS_LABEL) or pod_labels.get(PRIORITY_CLASS_LABEL)
                  or pod["spec"].get("priorityClassName") or "")
    if class_name not in PRIORITY_CLASSES and store.get("priorityclasses", None, class_name, copy=False) is None:
        class_name = DEFAULT_PRIORITY_CLASS
    spec: dict = {"minMember": 1, "queue": owner_labels.get(QUEUE_LABEL) or pod_labels.get(QUEUE_LABEL)
                  or DEFAULT_QUEUE, "priorityClassName": class_name}
    said = owner_labels[PREEMPTIBILITY_LABEL] if PREEMPTIBILITY_LABEL in owner_labels else pod_labels.get(
        PREEMPTIBILITY_LABEL)
    if said in (PREEMPTIBLE, NON_PREEMPTIBLE):
        spec["preemptibility"] = said
    md = top["metadata"]
    return {
        "apiVersion": PODGROUP_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": pod["metadata"]["namespace"], "labels": labels,
                     "annotations": dict(md.get("annotations") or {}),
                     "ownerReferences": [{"apiVersion": top["apiVersion"], "kind": top["kind"], "name": md["name"],
                                          "uid": md["uid"]}]},
        "spec": spec,
    }


class KaiScheduler:
    """Controller: the pod-grouper, then one scheduling cycle per node pool whenever pods, nodes, Queues or PodGroups
    changed. kubesim's default scheduler leaves the pods that name kai-scheduler alone; the kubelet starts what this
    binds."""

    name = "kai-scheduler"

    def __init__(self) -> None:
        self._feed = ChangeFeed("pods", "nodes", "queues", "podgroups")
        self._kai_nodes: set[str] = set()  # the nodes of KAI pools at the last cycle

    def next_deadline(self, store: Store) -> datetime | None:
        return None

    def reconcile(self, store: Store) -> bool:
        """Nothing to do unless a change concerns KAI: its objects, a node, a KAI pod, or a pod on a KAI node (so a
        cluster without KAI pools pays one look at each changed pod)."""
        events = self._feed.changed(store)
        if events is None:
            pods = store.list("pods", copy=False)
        elif any(self._concerns(e.resource, e.obj) for e in events):
            pods = [e.obj for e in events if e.resource == "pods" and e.type != "DELETED"]
        else:
            return False
        if self._group_pods(store, pods):
            return True  # the cycle runs on the next pass, which sees the PodGroups
        return self._cycle(store)

    def _concerns(self, resource: str, obj: dict) -> bool:
        return resource != "pods" or obj["spec"].get("schedulerName") == SCHEDULER_NAME or (
            obj["spec"].get("nodeName") in self._kai_nodes)

    # ---- pod-grouper -----------------------------------------------------------------------------------------
    def _group_pods(self, store: Store, pods: list[dict]) -> bool:
        """KAI's pod-grouper: an ownerless pod that names its PodGroup keeps it (whoever made that PodGroup makes the
        gang); any other KAI pod belongs to the PodGroup the grouper derives from its top owner, created when
        missing, and the pod's `pod-group-name` is set to it (overwriting what the pod said). A pod whose owner chain
        cannot be read is left ungrouped, so KAI never schedules it (KAI records a warning and retries)."""
        wrote = False
        for seen in pods:
            stored = store.get("pods", seen["metadata"]["namespace"], seen["metadata"]["name"], copy=False)
            if stored is None or stored["spec"].get("schedulerName") != SCHEDULER_NAME or not _active(stored):
                continue
            md = stored["metadata"]
            annotations = md.get("annotations") or {}
            if not md.get("ownerReferences") and annotations.get(POD_GROUP_ANNOTATION):
                continue
            top, problem = _top_owner(store, stored)
            if top is None:
                store.record_event(stored, "Warning", GROUPER_WARNING, problem, POD_GROUPER)
                continue
            name = _pod_group_name(top, stored)
            if store.get("podgroups", md["namespace"], name, copy=False) is None:
                store.create("podgroups", _pod_group(store, top, stored, name))
                wrote = True
            if annotations.get(POD_GROUP_ANNOTATION) != name:
                pod = clone(stored)
                pod["metadata"].setdefault("annotations", {})[POD_GROUP_ANNOTATION] = name
                store.update("pods", pod)
                wrote = True
        return wrote

    # ---- the scheduling cycle --------------------------------------------------------------------------------
    def _cycle(self, store: Store) -> bool:
        nodes_by_pool: dict[str, dict[str, Node]] = {}
        for n in store.list("nodes", copy=False):
            pool = _labels(n).get(NODE_POOL_LABEL)
            if pool is None:
                continue
            alloc = (n.get("status") or {}).get("allocatable") or {}
            nodes_by_pool.setdefault(pool, {})[n["metadata"]["name"]] = Node(
                name=n["metadata"]["name"], gpus=int(_number(alloc.get(GPU))), cpu=_number(alloc.get("cpu")) * 1000,
                memory=_number(alloc.get("memory")), pods=int(_number(alloc.get("pods")) or 110),
                sharing=_labels(n).get(GPU_SHARING_LABEL) == "true")
        node_pool = {name: pool for pool, nodes in nodes_by_pool.items() for name in nodes}
        self._kai_nodes = set(node_pool)
        groups: dict[tuple[str, str], Group] = {}
        podgroups = {(g["metadata"]["namespace"], g["metadata"]["name"]): g
                     for g in store.list("podgroups", copy=False)}
        for pod in store.list("pods", copy=False):
            if not _active(pod):
                continue
            node_name = pod["spec"].get("nodeName")
            if node_name in node_pool:
                pool_node = nodes_by_pool[node_pool[node_name]][node_name]
                kai = pod["spec"].get("schedulerName") == SCHEDULER_NAME
                pool_node.hold(need(pod), _labels(pod).get(GPU_GROUP_LABEL) if kai and need(pod).fraction else None)
            if pod["spec"].get("schedulerName") != SCHEDULER_NAME:
                continue
            pg_name = (pod["metadata"].get("annotations") or {}).get(POD_GROUP_ANNOTATION)
            pg = podgroups.get((pod["metadata"]["namespace"], pg_name or ""))
            if pg is None:
                continue  # its PodGroup is not there (yet): KAI does not schedule it
            group = groups.get((pod["metadata"]["namespace"], pg_name or ""))
            if group is None:
                group = groups[(pod["metadata"]["namespace"], pg_name or "")] = self._group(pg, pod)
            group.pods.append(pod)
        queues = store.list("queues", copy=False)
        wrote = False
        for pool in sorted({*nodes_by_pool, *(g.pool for g in groups.values())}):
            pool_queues = [q for q in queues if _labels(q).get(NODE_POOL_LABEL, DEFAULT_NODE_POOL) == pool]
            pool_groups = [g for g in groups.values() if g.pool == pool]
            wrote |= Cycle(store, pool, nodes_by_pool.get(pool, {}), pool_queues, pool_groups).run()
        return wrote

    @staticmethod
    def _group(pg: dict, pod: dict) -> Group:
        spec = pg.get("spec") or {}
        labels = {**_labels(pod), **_labels(pg)}
        class_name = spec.get("priorityClassName") or pod["spec"].get("priorityClassName") or labels.get(
            "priorityClassName")
        if class_name in PRIORITY_CLASSES:
            priority = PRIORITY_CLASSES[class_name]
        elif pod["spec"].get("priority") is not None and class_name:
            priority = int(pod["spec"]["priority"])
        else:
            priority = DEFAULT_POD_GROUP_PRIORITY
        said = spec.get("preemptibility") or labels.get(PREEMPTIBILITY_LABEL)
        preemptible = said == PREEMPTIBLE if said in (PREEMPTIBLE, NON_PREEMPTIBLE) else (
            priority < NON_PREEMPTIBLE_PRIORITY)
        return Group(obj=pg, pods=[], queue=spec.get("queue") or _labels(pod).get(QUEUE_LABEL, ""),
                     pool=labels.get(NODE_POOL_LABEL, DEFAULT_NODE_POOL), priority=priority, preemptible=preemptible,
                     min_member=int(spec.get("minMember") or 1))


class Cycle:
    """One node pool's scheduling cycle."""

    def __init__(self, store: Store, pool: str, nodes: dict[str, Node], queues: list[dict],
                 groups: list[Group]) -> None:
        self.store, self.pool, self.nodes, self.groups = store, pool, nodes, groups
        self.queue_objs = {q["metadata"]["name"]: q for q in queues}
        self.tree = {n.name: n for n in (fairness.queue_node(q) for q in queues)}
        self.roots = fairness.forest(list(self.tree.values()))
        leaves = {name for name, q in self.tree.items() if not q.children}
        self.leaves = leaves
        self.held: dict[str, float] = {}  # queue -> GPUs its bound pods hold (parents: their children's)
        self.held_np: dict[str, float] = {}  # the non-preemptible part
        for g in groups:
            for q in self._chain(g.queue):
                self.held[q] = self.held.get(q, 0.0) + g.held()
                if not g.preemptible:
                    self.held_np[q] = self.held_np.get(q, 0.0) + g.held()
        leaf_requests: dict[str, float] = {}
        for g in groups:
            leaf_requests[g.queue] = leaf_requests.get(g.queue, 0.0) + g.held() + g.asked()
        capacity = float(sum(n.gpus for n in nodes.values()))
        self.shares = fairness.fair_shares(self.roots, fairness.requests(self.roots, leaf_requests), capacity)
        self.conditions: dict[tuple[str, str], tuple[str, list[dict]]] = {}  # group -> (message, reasons)

    def _chain(self, queue: str) -> list[str]:
        """The queue and its ancestors."""
        out: list[str] = []
        while queue in self.tree and queue not in out:
            out.append(queue)
            queue = self.tree[queue].parent
        return out

    def _ratio(self, queue: str) -> float:
        share = self.shares.get(queue, 0.0)
        return self.held.get(queue, 0.0) / share if share > EPS else math.inf

    def run(self) -> bool:
        """Allocate until an eviction: the cycle then ends, and the next one (the evicted pods' deletion is a change)
        starts from the freed nodes."""
        wrote = False
        waiting = [g for g in self.groups if g.pending]
        while waiting:
            g = min(waiting, key=lambda g: (self._ratio(g.queue), -g.priority,
                                            g.obj["metadata"].get("creationTimestamp", ""), g.key))
            waiting.remove(g)
            result = self._allocate(g)
            if result == "evicted":
                return True
            wrote |= result == "bound"
        return self._write_status() or wrote

    # ---- allocate, reclaim, preempt ----------------------------------------------------------------------------
    def _allocate(self, g: Group) -> str:
        queue = self.tree.get(g.queue)
        if queue is None or queue.children:
            message = f"Queue '{g.queue}' does not exist" if queue is None else (
                f"Queue '{g.queue}' is not a leaf queue")
            self.conditions[g.key] = (message, [{"reason": QUEUE_DOES_NOT_EXIST, "message": message}])
            return ""
        asked = g.asked()
        refusal = self._quota_refusal(g, asked)
        if refusal:
            self.conditions[g.key] = refusal
            return ""
        placement, lack = self._place(g, self.nodes)
        if placement is not None:
            self._bind(g, placement)
            return "bound"
        victims = self._reclaim_victims(g, asked) if g.preemptible else None
        if victims is None:
            victims = self._preempt_victims(g)
        if victims:
            self._evict(g, victims)
            return "evicted"
        self.conditions[g.key] = (lack, [])
        return ""

    def _quota_refusal(self, g: Group, asked: float) -> tuple[str, list[dict]] | None:
        for name in self._chain(g.queue):
            q = self.tree[name]
            if self.held.get(name, 0.0) + asked > q.cap + EPS:
                message = (f"{name} quota has reached the allowable limit of GPUs. Limit is {gpus_text(q.cap)} GPUs, "
                           f"currently {gpus_text(self.held.get(name, 0.0))} GPUs allocated and workload requested "
                           f"{gpus_text(asked)} GPUs")
                return message, [{"reason": OVER_LIMIT, "message": message, "details": self._details(name, g, asked)}]
        if not g.preemptible:
            q = self.tree[g.queue]
            if q.quota != fairness.UNLIMITED and self.held_np.get(g.queue, 0.0) + asked > q.quota + EPS:
                message = (f"Non-preemptible workload is over quota. Workload requested {gpus_text(asked)} GPUs, but "
                           f"{g.queue} quota is {gpus_text(q.quota)} GPUs, while "
                           f"{gpus_text(self.held_np.get(g.queue, 0.0))} GPUs are already allocated for "
                           "non-preemptible pods. Use a preemptible workload to go over quota.")
                return message, [{"reason": NON_PREEMPTIBLE_OVER_QUOTA, "message": message,
                                  "details": self._details(g.queue, g, asked)}]
        return None

    def _details(self, name: str, g: Group, asked: float) -> dict:
        q = self.tree[name]
        requested = sum(x.held() + x.asked() for x in self.groups if name in self._chain(x.queue))
        return {"queueDetails": {
            "name": name,
            "queueRequestedResources": {GPU: quantity(requested)},
            "queueDeservedResources": {GPU: quantity(q.quota)},
            "queueAllocatedResources": {GPU: quantity(self.held.get(name, 0.0))},
            "queueAllocatedNonPreemptibleResources": {GPU: quantity(self.held_np.get(name, 0.0))},
            "queueResourceLimits": {GPU: quantity(-1 if math.isinf(q.cap) else q.cap)},
            "podGroupRequestedResources": {GPU: quantity(asked)},
            "podGroupRequestedNonPreemptibleResources": {GPU: quantity(0 if g.preemptible else asked)},
        }}

    def _place(self, g: Group, nodes: dict[str, Node]) -> tuple[list[tuple[dict, str, str | None]] | None, str]:
        """Where the group's pending pods go (pod, node, device), enough for minMember, or None and why not."""
        trial = {name: n.copy() for name, n in nodes.items()}
        placed: list[tuple[dict, str, str | None]] = []
        lack = ""
        for pod in sorted(g.pending, key=lambda p: p["metadata"]["name"]):
            want = need(pod)
            found = None
            short: dict[str, int] = {}
            for node in sorted(trial.values(), key=lambda n: (-(n.whole + len(n.devices)), n.name)):  # bin pack
                device, missing = node.place(want)
                if device is not None:
                    found = (node, device or None)
                    break
                short[missing] = short.get(missing, 0) + 1
            if found is None:
                if not lack:
                    lack = f"0/{len(trial)} nodes are available" + "".join(
                        f", {count} node(s) didn't have enough resources: {what}"
                        for what, count in sorted(short.items())) + "."
                continue
            found[0].hold(want, found[1])
            placed.append((pod, found[0].name, found[1]))
        if len(placed) + len(g.bound) < g.min_member or not placed:
            return None, lack or "0/0 nodes are available."
        return placed, ""

    def _bind(self, g: Group, placement: list[tuple[dict, str, str | None]]) -> None:
        for stored, node_name, device in placement:
            pod = clone(stored)
            pod["spec"]["nodeName"] = node_name
            if device:
                pod["metadata"].setdefault("labels", {})[GPU_GROUP_LABEL] = device
            self.store.update("pods", pod)
            self.nodes[node_name].hold(need(stored), device)
            md = pod["metadata"]
            self.store.record_event(pod, "Normal", "Scheduled",
                                    f"Successfully assigned {md['namespace']}/{md['name']} to {node_name}",
                                    SCHEDULER_NAME)
            for q in self._chain(g.queue):
                self.held[q] = self.held.get(q, 0.0) + need(stored).gpu
                if not g.preemptible:
                    self.held_np[q] = self.held_np.get(q, 0.0) + need(stored).gpu

    def _running(self) -> list[Group]:
        return [g for g in self.groups if g.bound]

    def _fits_without(self, g: Group, victims: list[Group]) -> bool:
        trial = {name: n.copy() for name, n in self.nodes.items()}
        for v in victims:
            for pod in v.bound:
                trial[pod["spec"]["nodeName"]].hold(need(pod), _labels(pod).get(GPU_GROUP_LABEL) if need(pod).fraction
                                                    else None, -1)
        return self._place(g, trial)[0] is not None

    def _reclaim_victims(self, g: Group, asked: float) -> list[Group] | None:
        """Preemptible work of other queues, taken only while each stays at or above its fair share (so never below
        its quota); only for a queue that stays within its own fair share."""
        if self.held.get(g.queue, 0.0) + asked > self.shares.get(g.queue, 0.0) + EPS:
            return None
        held = dict(self.held)
        chosen: list[Group] = []
        mine = set(self._chain(g.queue))
        candidates = sorted((v for v in _newest_first(self._running()) if v.preemptible and v.queue != g.queue),
                            key=lambda v: (-self._ratio(v.queue), v.priority))
        for v in candidates:
            chain = [q for q in self._chain(v.queue) if q not in mine]
            if any(held.get(q, 0.0) - v.held() < self.shares.get(q, 0.0) - EPS for q in chain):
                continue
            for q in chain:
                held[q] = held.get(q, 0.0) - v.held()
            chosen.append(v)
            if self._fits_without(g, chosen):
                return chosen
        return None

    def _preempt_victims(self, g: Group) -> list[Group] | None:
        """Lower-priority preemptible work of the same queue, lowest priority first, then the newest."""
        candidates = sorted(
            (v for v in _newest_first(self._running())
             if v.queue == g.queue and v.preemptible and v.priority < g.priority),
            key=lambda v: v.priority)
        chosen: list[Group] = []
        for v in candidates:
            chosen.append(v)
            if self._fits_without(g, chosen):
                return chosen
        return None

    def _evict(self, g: Group, victims: list[Group]) -> None:
        """Evict the victims' pods (the preemptor binds in a later cycle, once they are gone)."""
        ns, name = g.key
        for v in victims:
            same = v.queue == g.queue
            for stored in v.bound:
                pod = clone(stored)
                md = pod["metadata"]
                message = (f"Pod {md['namespace']}/{md['name']} was preempted by higher priority workload {ns}/{name}"
                           if same else f"Pod {md['namespace']}/{md['name']} was preempted by workload {ns}/{name}.")
                status = pod.setdefault("status", {})
                conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
                status["conditions"] = [*conditions, {
                    "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": message,
                    "lastProbeTime": None, "lastTransitionTime": rfc3339(self.store.now())}]
                self.store.update_status("pods", pod)
                # KAI records the eviction on the victim's PodGroup (one Event per pod), then evicts the pod
                self.store.record_event(v.obj, "Normal", "Evict", message, SCHEDULER_NAME)
                self.store.delete("pods", md["namespace"], md["name"])

    # ---- status ------------------------------------------------------------------------------------------------
    def _write_status(self) -> bool:
        wrote = False
        now = rfc3339(self.store.now())
        for g in self.groups:
            wrote |= self._podgroup_status(g, now)
        totals: dict[str, list[float]] = {}  # queue -> [gpu, cpu, memory] x allocated, requested, non-preemptible
        for g in self.groups:
            held = [sum(need(p).gpu for p in g.bound), sum(need(p).cpu for p in g.bound),
                    sum(need(p).memory for p in g.bound)]
            asked = [sum(need(p).gpu for p in g.pods), sum(need(p).cpu for p in g.pods),
                     sum(need(p).memory for p in g.pods)]
            for q in self._chain(g.queue):
                row = totals.setdefault(q, [0.0] * 9)
                for i in range(3):
                    row[i] += held[i]
                    row[3 + i] += asked[i]
                    row[6 + i] += 0.0 if g.preemptible else held[i]
        for name, stored in self.queue_objs.items():
            row = totals.get(name, [0.0] * 9)
            status = dict(stored.get("status") or {})
            status["allocated"] = resource_list(*row[0:3])
            status["requested"] = resource_list(*row[3:6])
            status["allocatedNonPreemptible"] = resource_list(*row[6:9])
            children = sorted(c.name for c in self.tree[name].children)
            if children:
                status["childQueues"] = children
            else:
                status.pop("childQueues", None)
            if status != (stored.get("status") or {}):
                queue = clone(stored)
                queue["status"] = status
                self.store.update_status("queues", queue)
                wrote = True
        return wrote

    def _podgroup_status(self, g: Group, now: str) -> bool:
        stored = self.store.get("podgroups", *g.key, copy=False)
        if stored is None:
            return False
        old = stored.get("status") or {}
        status = dict(old)
        bound = g.bound
        running = [p for p in bound if (p.get("status") or {}).get("phase") == "Running"]
        status["phase"] = "Running" if len(bound) >= g.min_member else "Pending"
        status["running"] = len(running)
        status["pending"] = len(g.pending)
        status["resourcesStatus"] = {
            "allocated": resource_list(sum(need(p).gpu for p in bound), sum(need(p).cpu for p in bound),
                                       sum(need(p).memory for p in bound)),
            "requested": resource_list(sum(need(p).gpu for p in g.pods), sum(need(p).cpu for p in g.pods),
                                       sum(need(p).memory for p in g.pods)),
            "allocatedNonPreemptible": resource_list(*(
                (0.0, 0.0, 0.0) if g.preemptible else (sum(need(p).gpu for p in bound), sum(need(p).cpu for p in bound),
                                                       sum(need(p).memory for p in bound)))),
        }
        condition = self.conditions.get(g.key)
        if condition is None:
            status.pop("schedulingConditions", None)
        else:
            message, reasons = condition
            previous: dict = next(iter(old.get("schedulingConditions") or []), {})
            same = previous.get("message") == message and previous.get("reasons", []) == reasons
            status["schedulingConditions"] = [{
                "type": UNSCHEDULABLE_ON_NODE_POOL,
                "nodePool": self.pool,
                "reason": UNSCHEDULABLE,
                "message": message,
                "reasons": reasons,
                "status": "True",
                "transitionID": previous.get("transitionID", "0") if same else str(
                    int(previous.get("transitionID", "-1")) + 1),
                "lastTransitionTime": previous.get("lastTransitionTime", now) if same else now,
            }]
        wrote = False
        if status != old:
            pg = clone(stored)
            pg["status"] = status
            self.store.update_status("podgroups", pg)
            wrote = True
        if condition is not None:
            for pod in g.pending:
                wrote |= self._pod_unschedulable(pod, condition[0], now)
        return wrote

    def _pod_unschedulable(self, stored: dict, message: str, now: str) -> bool:
        conds = (stored.get("status") or {}).get("conditions") or []
        current = next((c for c in conds if c.get("type") == "PodScheduled"), None)
        if current is not None and current.get("reason") == UNSCHEDULABLE and current.get("message") == message:
            return False
        pod = clone(stored)
        pod.setdefault("status", {})["conditions"] = [c for c in conds if c.get("type") != "PodScheduled"] + [{
            "type": "PodScheduled", "status": "False", "reason": UNSCHEDULABLE, "message": message,
            "lastProbeTime": None, "lastTransitionTime": now}]
        pod["status"].setdefault("phase", "Pending")
        self.store.update_status("pods", pod)
        self.store.record_event(pod, "Warning", "Unschedulable", message, SCHEDULER_NAME)
        return True
