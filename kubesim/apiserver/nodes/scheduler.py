"""kube-scheduler's placement, as its default profile decides it (Kubernetes v1.34).

Filters, in the profile's order, the first failing one giving a node's reasons: NodeUnschedulable (a cordoned node,
unless the pod tolerates `node.kubernetes.io/unschedulable:NoSchedule`), TaintToleration (the first NoSchedule or
NoExecute taint the pod does not tolerate; PreferNoSchedule only scores), NodeAffinity (nodeSelector and the required
node affinity: terms ORed, a term's matchExpressions and matchFields ANDed), NodeResourcesFit (pod count, then every
resource the pod requests against the node's allocatable minus what the bound, not terminated pods there request).
A pod's request is what kube's resource helper computes: the larger of the app containers' sum (restartable init
containers, i.e. sidecars, included) and each init container's request plus the sidecars started before it, then the
pod-level cpu/memory requests when set, plus the RuntimeClass overhead.

Scoring among the nodes that pass: LeastAllocated and BalancedAllocation over cpu and memory (containers without a
request count 100m and 200Mi, as the scheduler's non-zero requests do), fewer untolerated PreferNoSchedule taints and
the preferred node affinity terms' weights, weighted as the default profile weighs them; ties go round-robin
(kube-scheduler draws among them at random). Not scored: topology spread, inter-pod affinity, image locality.

A pod that fits nowhere gets kube-scheduler's FitError message, "0/N nodes are available: <count> <reason>, ..."
(the per-reason counts sorted as strings), followed by DefaultPreemption's verdict: "preemption: 0/N nodes are
available: ..." where a node failing an unresolvable filter counts as "Preemption is not helpful for scheduling", a
node short of resources with no lower-priority pod as "No preemption victims found for incoming pod", and a node that
lower-priority pods fill but whose removal still leaves it short by its resource reasons again; a pod with
preemptionPolicy Never gets "preemption: not eligible due to preemptionPolicy=Never.". When evicting lower-priority
pods lets the pod fit, the scheduler preempts: it picks the node as kube's pickOneNodeForPreemption does (lowest
highest-victim priority, then lowest priority sum, then fewest victims), keeps as many victims as still fit (highest
priority first), and the caller deletes the rest; the pod is nominated to that node and retried once they are gone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubesim.kernel.quantity import QuantityError, to_amount

CPU, MEMORY, PODS = "cpu", "memory", "pods"
DEFAULT_MILLI_CPU = 100  # the scheduler's non-zero request for a container that names no cpu request
DEFAULT_MEMORY = 200 * 1024 * 1024  # ... and no memory request
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
POD_LEVEL_RESOURCES = (CPU, MEMORY)  # what spec.resources may set for the whole pod (PodLevelResources, beta)

NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NO_NODES = "no nodes available to schedule pods"
NEVER_PREEMPTS = "preemption: not eligible due to preemptionPolicy=Never."


def _amounts(resources: object) -> dict[str, int]:
    """A ResourceList in the scheduler's integer view (cpu in millicores); malformed entries count as zero (the API
    refuses them; internal writes are not checked)."""
    out: dict[str, int] = {}
    for name, value in (resources or {}).items() if isinstance(resources, dict) else ():
        try:
            out[name] = to_amount(name, value)
        except QuantityError:
            continue
    return out


def _container_requests(container: dict) -> tuple[dict[str, int], dict[str, int]]:
    """A container's requests, and the same with the scheduler's non-zero cpu/memory for those it does not name."""
    requests = _amounts((container.get("resources") or {}).get("requests"))
    non_zero = dict(requests)
    non_zero.setdefault(CPU, DEFAULT_MILLI_CPU)
    non_zero.setdefault(MEMORY, DEFAULT_MEMORY)
    return requests, non_zero


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def _raise_to(into: dict[str, int], more: dict[str, int]) -> None:
    for name, amount in more.items():
        if amount > into.get(name, 0):
            into[name] = amount


def pod_requests(spec: dict) -> tuple[dict[str, int], dict[str, int]]:
    """What the scheduler counts a pod as requesting (kube's resourcehelper.PodRequests), and its non-zero requests
    (the same with 100m cpu and 200Mi memory for each container that names none), which scoring uses."""
    both: tuple[dict[str, int], dict[str, int]] = ({}, {})
    sidecars: tuple[dict[str, int], dict[str, int]] = ({}, {})
    init_peak: tuple[dict[str, int], dict[str, int]] = ({}, {})
    for c in spec.get("containers") or []:
        for total, own in zip(both, _container_requests(c), strict=True):
            _add(total, own)
    for c in spec.get("initContainers") or []:
        sidecar = c.get("restartPolicy") == "Always"  # a sidecar runs beside the app containers
        for total, running, peak, own in zip(both, sidecars, init_peak, _container_requests(c), strict=True):
            if sidecar:
                _add(total, own)
                _add(running, own)
                _raise_to(peak, running)
            else:
                during = dict(running)
                _add(during, own)
                _raise_to(peak, during)
    pod_level = _amounts((spec.get("resources") or {}).get("requests"))
    overhead = _amounts(spec.get("overhead"))
    for total, peak in zip(both, init_peak, strict=True):
        _raise_to(total, peak)
        for name in POD_LEVEL_RESOURCES:
            if name in pod_level:
                total[name] = pod_level[name]
        _add(total, overhead)
    return {name: amount for name, amount in both[0].items() if amount}, both[1]


def tolerates(tolerations: Iterable[dict], taint: dict) -> bool:
    """v1.Toleration.ToleratesTaint for any of the tolerations."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("key") and t["key"] != taint.get("key"):
            continue
        operator = t.get("operator") or "Equal"
        if operator == "Exists" or (operator == "Equal" and (t.get("value") or "") == (taint.get("value") or "")):
            return True
    return False


def _requirement_holds(expr: dict, value: str | None) -> bool:
    """One NodeSelectorRequirement against a label (or field) value, None when the node has no such label."""
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _term_matches(term: dict, node: dict) -> bool:
    """A NodeSelectorTerm: its expressions and fields ANDed; a term with neither matches no node."""
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False
    labels = node["metadata"].get("labels") or {}
    if not all(_requirement_holds(e, labels.get(e.get("key", ""))) for e in exprs):
        return False
    # metadata.name is the only field a node selector may name (API validation refuses others).
    name = node["metadata"]["name"]
    return all(e.get("key") == "metadata.name" and _requirement_holds(e, name) for e in fields)


def matches_node_affinity(spec: dict, node: dict) -> bool:
    """The NodeAffinity filter: every nodeSelector label and, when set, one of the required node affinity terms."""
    labels = node["metadata"].get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return True
    return any(_term_matches(t, node) for t in required.get("nodeSelectorTerms") or [])


def _preferred_score(spec: dict, node: dict) -> int:
    """Sum of the weights of the preferred node affinity terms this node matches (the NodeAffinity score)."""
    preferred = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or []
    return sum(int(p.get("weight") or 0) for p in preferred if _term_matches(p.get("preference") or {}, node))


@dataclass
class Demand:
    """What placing one pod takes: requests, the non-zero cpu/memory requests scoring uses, priority, and a key
    shared by pods that schedule alike."""

    requests: dict[str, int]
    non_zero: tuple[int, int]
    priority: int
    never_preempts: bool
    shape: str

    @classmethod
    def of(cls, pod: dict) -> Demand:
        spec = pod["spec"]
        requests, non_zero = pod_requests(spec)
        priority = int(spec.get("priority") or 0)
        never = spec.get("preemptionPolicy") == "Never"
        shape = repr((sorted(requests.items()), spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations"),
                      priority, never))
        return cls(requests, (non_zero.get(CPU, 0), non_zero.get(MEMORY, 0)), priority, never, shape)


@dataclass
class NodeInfo:
    """One node as the scheduler's cache holds it: the node, its allocatable and what its bound pods request."""

    node: dict
    allocatable: dict[str, int]
    cordoned: bool = False
    hard_taints: list[dict] = field(default_factory=list)  # NoSchedule and NoExecute: the filter's
    soft_taints: list[dict] = field(default_factory=list)  # PreferNoSchedule: the score's
    requested: dict[str, int] = field(default_factory=dict)
    non_zero: list[int] = field(default_factory=lambda: [0, 0])
    pods: dict[str, Demand] = field(default_factory=dict)  # uid -> demand of each bound, not terminated pod

    @property
    def name(self) -> str:
        return str(self.node["metadata"]["name"])

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.requested.get(resource, 0)

    def add(self, uid: str, demand: Demand) -> None:
        self.pods[uid] = demand
        _add(self.requested, demand.requests)
        self.non_zero[0] += demand.non_zero[0]
        self.non_zero[1] += demand.non_zero[1]

    def remove(self, uid: str) -> None:
        demand = self.pods.pop(uid)
        for name, amount in demand.requests.items():
            self.requested[name] -= amount
        self.non_zero[0] -= demand.non_zero[0]
        self.non_zero[1] -= demand.non_zero[1]


def insufficient(demand: Demand, allocatable: dict[str, int], requested: dict[str, int], pod_count: int) -> list[str]:
    """NodeResourcesFit's reasons: the pod count first, then each requested resource the node cannot give."""
    reasons = [TOO_MANY_PODS] if pod_count + 1 > allocatable.get(PODS, 0) else []
    for name, amount in demand.requests.items():
        if amount > allocatable.get(name, 0) - requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


@dataclass
class Verdict:
    """One scheduling attempt: the node to bind to, or the FitError message; victims to evict when preempting (the
    pod then waits, nominated to `nominated`)."""

    node: str | None = None
    message: str = ""
    victims: list[str] = field(default_factory=list)
    nominated: str | None = None


class SchedulerCache:
    """The nodes and the pods bound to them, kept current from the pods' and nodes' changes (bound_pod/forget and
    set_nodes), and the scheduling algorithm over them."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.bound: dict[str, str] = {}  # pod uid -> node name, for the bound, not terminated pods
        self._demands: dict[str, tuple[object, Demand]] = {}  # uid -> (generation, its demand then)
        self._rotation = 0

    def demand(self, pod: dict) -> Demand:
        """The pod's demand, computed again when a waiting pod's spec changed (a new generation: tolerations added,
        ...); a bound pod's stays (binding moves the generation, not what the pod asks for)."""
        md = pod["metadata"]
        found = self._demands.get(md["uid"])
        if found is None or (found[0] != md.get("generation") and not pod["spec"].get("nodeName")):
            found = self._demands[md["uid"]] = (md.get("generation"), Demand.of(pod))
        return found[1]

    def set_nodes(self, nodes: Iterable[dict]) -> None:
        """The nodes as stored now; the pods bound to each are kept (a deleted node's pods stop counting)."""
        old, self.nodes = self.nodes, {}
        for node in nodes:
            name = node["metadata"]["name"]
            taints = (node.get("spec") or {}).get("taints") or []
            info = NodeInfo(
                node,
                _amounts((node.get("status") or {}).get("allocatable")),
                cordoned=bool((node.get("spec") or {}).get("unschedulable")),
                hard_taints=[t for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")],
                soft_taints=[t for t in taints if t.get("effect") == "PreferNoSchedule"],
            )
            if name in old:
                info.requested, info.non_zero, info.pods = old[name].requested, old[name].non_zero, old[name].pods
            self.nodes[name] = info
        for uid, name in list(self.bound.items()):
            if name not in self.nodes:
                del self.bound[uid]

    def track(self, pod: dict, gone: bool = False) -> bool:
        """Account for a pod as it is now (gone: deleted). True when this freed capacity on a node."""
        uid = pod["metadata"]["uid"]
        node_name = pod["spec"].get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        holds = not gone and bool(node_name) and phase not in ("Succeeded", "Failed")
        was = self.bound.get(uid)
        if was is not None and (not holds or was != node_name):
            del self.bound[uid]
            if was in self.nodes:
                self.nodes[was].remove(uid)
        if gone:
            self._demands.pop(uid, None)
        if holds and was != node_name and node_name in self.nodes:
            self.bound[uid] = node_name
            self.nodes[node_name].add(uid, self.demand(pod))
        return was is not None and (not holds or was != node_name)

    # ---- the scheduling cycle ----------------------------------------------------------------------------------
    def _filter(self, pod: dict, demand: Demand, info: NodeInfo) -> tuple[list[str], bool]:
        """The first failing filter's reasons on this node, and whether preemption could resolve them."""
        spec = pod["spec"]
        if info.cordoned and not tolerates(spec.get("tolerations") or [], UNSCHEDULABLE_TAINT):
            return [NODE_UNSCHEDULABLE], False
        for taint in info.hard_taints:
            if not tolerates(spec.get("tolerations") or [], taint):
                return [f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"], False
        if not matches_node_affinity(spec, info.node):
            return [NODE_AFFINITY], False
        allocatable, requested = info.allocatable, info.requested
        if len(info.pods) < allocatable.get(PODS, 0) and all(
            amount <= allocatable.get(name, 0) - requested.get(name, 0) for name, amount in demand.requests.items()
        ):
            return [], True
        return insufficient(demand, allocatable, requested, len(info.pods)), True

    def schedule(self, pod: dict) -> Verdict:
        if not self.nodes:
            return Verdict(message=NO_NODES)
        demand = self.demand(pod)
        feasible: list[NodeInfo] = []
        reasons: dict[str, int] = {}
        resolvable: list[NodeInfo] = []
        for info in self.nodes.values():
            failed, can_resolve = self._filter(pod, demand, info)
            if not failed:
                feasible.append(info)
                continue
            for reason in failed:
                reasons[reason] = reasons.get(reason, 0) + 1
            if can_resolve:
                resolvable.append(info)
        if feasible:
            return Verdict(node=self._pick(pod, demand, feasible))
        message = _fit_error(len(self.nodes), reasons)
        if demand.never_preempts:
            return Verdict(message=f"{message} {NEVER_PREEMPTS}")
        verdict = self._preempt(pod, demand, resolvable)
        if verdict.nominated is None:
            verdict.message = f"{message} {verdict.message}"
        else:
            verdict.message = message
        return verdict

    def _pick(self, pod: dict, demand: Demand, feasible: list[NodeInfo]) -> str:
        """The feasible node with the highest weighted score (NodeResourcesFit and NodeResourcesBalancedAllocation
        x1, TaintToleration x3, NodeAffinity x2, each normalised to 0-100 as kube does); ties in turn."""
        spec = pod["spec"]
        cpu, memory = demand.non_zero
        soft = [t for t in spec.get("tolerations") or [] if t.get("effect") in (None, "", "PreferNoSchedule")]
        scores = []
        for info in feasible:
            cpu_cap, mem_cap = info.allocatable.get(CPU, 0), info.allocatable.get(MEMORY, 0)
            cpu_used, mem_used = info.non_zero[0] + cpu, info.non_zero[1] + memory
            least = ((cpu_cap - cpu_used) * 100 // cpu_cap if cpu_cap and cpu_used <= cpu_cap else 0) + (
                (mem_cap - mem_used) * 100 // mem_cap if mem_cap and mem_used <= mem_cap else 0
            )
            cpu_share = min(cpu_used / cpu_cap, 1.0) if cpu_cap else 0.0
            mem_share = min(mem_used / mem_cap, 1.0) if mem_cap else 0.0
            scores.append(least // 2 + int((1 - abs(cpu_share - mem_share) / 2) * 100))
        if any(info.soft_taints for info in feasible):
            untolerated = [sum(1 for t in info.soft_taints if not tolerates(soft, t)) for info in feasible]
            most = max(untolerated) or 1
            scores = [s + 3 * (100 - 100 * u // most) for s, u in zip(scores, untolerated, strict=True)]
        node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        if node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"):
            preferred = [_preferred_score(spec, info.node) for info in feasible]
            most = max(preferred)
            scores = [s + 2 * (100 * p // most if most else 0) for s, p in zip(scores, preferred, strict=True)]
        best = max(scores)
        ties = [info.name for info, score in zip(feasible, scores, strict=True) if score == best]
        self._rotation += 1
        return ties[self._rotation % len(ties)]

    def _preempt(self, pod: dict, demand: Demand, resolvable: list[NodeInfo]) -> Verdict:
        """DefaultPreemption: the victims on the best candidate node, or why there is none."""
        statuses: dict[str, int] = {}
        candidates: list[tuple[tuple[int, int, int], str, list[str]]] = []
        for info in resolvable:
            lower = sorted(
                ((uid, d) for uid, d in info.pods.items() if d.priority < demand.priority),
                key=lambda item: -item[1].priority,
            )
            if not lower:
                statuses[NO_VICTIMS] = statuses.get(NO_VICTIMS, 0) + 1
                continue
            requested = dict(info.requested)
            for _, d in lower:
                for name, amount in d.requests.items():
                    requested[name] -= amount
            count = len(info.pods) - len(lower)
            still = insufficient(demand, info.allocatable, requested, count)
            if still:
                for reason in still:
                    statuses[reason] = statuses.get(reason, 0) + 1
                continue
            victims: list[tuple[str, Demand]] = []
            for uid, d in lower:  # reprieve the most important pods that still leave room
                trial = dict(requested)
                _add(trial, d.requests)
                if insufficient(demand, info.allocatable, trial, count + 1):
                    victims.append((uid, d))
                else:
                    requested, count = trial, count + 1
            key = (max(d.priority for _, d in victims), sum(d.priority for _, d in victims), len(victims))
            candidates.append((key, info.name, [uid for uid, _ in victims]))
        if candidates:
            _, node, victims_uids = min(candidates)
            return Verdict(victims=victims_uids, nominated=node)
        unhelpful = len(self.nodes) - len(resolvable)
        if unhelpful:
            statuses[NOT_HELPFUL] = unhelpful
        return Verdict(message=f"preemption: {_fit_error(len(self.nodes), statuses)}")


def _fit_error(node_count: int, reasons: dict[str, int]) -> str:
    """FitError.Error(): the node count, then "<count> <reason>" per reason, sorted as strings."""
    message = f"0/{node_count} nodes are available:"
    if reasons:
        message += " " + ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items())) + "."
    return message
