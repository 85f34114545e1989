"""Plain-data view of Kueue's objects that the scheduler works on, built from the API objects (dicts).

`Snapshot.from_objects(...)` is the entry point: it needs no store and no HTTP, so the portal can build one from its
mirrored state and run `Scheduler.cycle` on it to forecast admissions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kubesim.kernel.quantity import decimal_value, format_amount, to_amount
from kubesim.kernel.selectors import selector_matches
from kubesim.kueue import constants as C
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler import afs
from kubesim.kueue.scheduler.quota import (
    CohortNode,
    FlavorResource,
    Quota,
    QuotaNode,
    add_usage,
    remove_usage,
    update_tree,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NO_QUOTA = Quota(0)


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def find_condition(obj: dict, ctype: str) -> dict | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def condition_true(obj: dict, ctype: str) -> bool:
    c = find_condition(obj, ctype)
    return c is not None and c.get("status") == "True"


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True)
class Preemption:
    within_cluster_queue: str = C.NEVER
    reclaim_within_cohort: str = C.NEVER
    borrow_within_cohort: str = C.NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class FlavorFungibility:
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str = "BorrowingOverPreemption"


@dataclass(eq=False)
class ClusterQueueNode(QuotaNode):
    """A ClusterQueue: its quota node plus queueing and preemption policy and its admitted workloads."""

    resource_groups: list[ResourceGroup] = field(default_factory=list)
    preemption: Preemption = field(default_factory=Preemption)
    fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    queueing_strategy: str = C.BEST_EFFORT_FIFO
    namespace_selector: dict | None = None
    stop_policy: str = "None"
    inactive_reason: str = ""  # empty when active
    inactive_message: str = ""
    workloads: dict[str, WorkloadInfo] = field(default_factory=dict)  # reserving quota, by key
    # Bumped (by whoever changes them: touched()) whenever `workloads` or a field of theirs that orders preemption
    # candidates changes: what is derived from them (the preemptor's ordered candidates) is kept while it stays.
    workloads_version: int = field(default=0, init=False, repr=False)
    cohort_name: str = ""
    admission_checks: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (name, onFlavors) from admissionChecksStrategy
    admission_fair_sharing: bool = False  # admissionScope UsageBasedAdmissionFairSharing, with the config's AFS on

    in_cohort_cycle: bool = False  # Kueue keeps such a queue out of scheduling without changing its status

    @property
    def active(self) -> bool:
        return not self.inactive_reason

    def touched(self) -> None:
        """Its workloads changed (one added, removed, or marked evicted): see workloads_version."""
        self.workloads_version += 1

    @property
    def schedulable(self) -> bool:
        return self.active and not self.in_cohort_cycle

    def rg_for(self, resource: str) -> ResourceGroup | None:
        for rg in self.resource_groups:
            if resource in rg.covered:
                return rg
        return None

    def checks_for(self, podset_assignments: list[dict]) -> list[str]:
        """The admission checks a reservation with these assignments must pass: those without onFlavors, and those
        naming one of the flavors assigned."""
        flavors = {f for psa in podset_assignments for f in (psa.get("flavors") or {}).values()}
        return [name for name, on in self.admission_checks if not on or flavors & set(on)]

    def covered_resources(self) -> set[str]:
        return {r for rg in self.resource_groups for r in rg.covered}

    def quota_for(self, fr: FlavorResource) -> Quota:
        return self.quotas.get(fr, NO_QUOTA)

    def borrowing_with(self, fr: FlavorResource, val: int) -> bool:
        return self.quota_for(fr).nominal < self.usage.get(fr, 0) + val

    def borrowing(self, fr: FlavorResource) -> bool:
        return self.borrowing_with(fr, 0)


@dataclass(eq=False)
class PodSetInfo:
    name: str
    count: int
    min_count: int | None
    requests: dict[str, int]  # per pod
    node_selector: dict[str, str]
    tolerations: list[dict]
    affinity_terms: list[list[dict]] | None  # required node affinity terms (ORed), each a list of expressions


@dataclass(eq=False)
class WorkloadInfo:
    """One Workload as the scheduler sees it."""

    key: str  # namespace/name
    name: str
    namespace: str
    uid: str
    job_uid: str
    queue_name: str
    priority: int
    creation: datetime
    podsets: list[PodSetInfo]
    obj: dict
    cluster_queue: str = ""
    usage: dict[FlavorResource, int] = field(default_factory=dict)  # while reserving quota
    reserved_at: datetime | None = None
    evicted: bool = False
    order_time: datetime = EPOCH
    generation: int = 0
    shape: str = ""  # scheduling equivalence: workloads of one shape fit (or not) alike
    admissible: bool = False
    requeue_at: datetime | None = None

    @property
    def has_reservation(self) -> bool:
        return self.reserved_at is not None

    def resource_requests(self) -> list[dict]:
        """status.resourceRequests: each PodSet's total requests, as Kueue reports them for pending workloads."""
        return [
            {"name": ps.name, "resources": {r: format_amount(r, v * ps.count) for r, v in sorted(ps.requests.items())}}
            for ps in self.podsets
        ]


def _pod_requests(spec: dict) -> dict[str, int]:
    """Per-pod requests as Kubernetes' PodRequests computes them (Kueue counts quota with it): the containers' sum,
    sidecars (init containers with restartPolicy Always) added to it, at least each other init container on top of
    the sidecars started before it; pod-level requests (cpu, memory, hugepages) replace the containers' total; plus
    overhead. A missing request defaults to the limit, as Kueue's AdjustResources does."""

    def requests_of(resources: dict | None) -> dict[str, int]:
        res = resources or {}
        merged = dict(res.get("limits") or {})
        merged.update(res.get("requests") or {})
        return {k: to_amount(k, v) for k, v in merged.items()}

    def add(into: dict[str, int], more: dict[str, int]) -> None:
        for k, v in more.items():
            into[k] = into.get(k, 0) + v

    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        add(total, requests_of(c.get("resources")))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        need = requests_of(c.get("resources"))
        if c.get("restartPolicy") == "Always":
            add(total, need)
            add(sidecars, need)
            need = dict(sidecars)
        else:
            add(need, sidecars)
        for k, v in need.items():
            init_peak[k] = max(init_peak.get(k, 0), v)
    for k, v in init_peak.items():
        total[k] = max(total.get(k, 0), v)
    for k, v in requests_of(spec.get("resources")).items():
        if k in ("cpu", "memory") or k.startswith("hugepages-"):
            total[k] = v
    add(total, {k: to_amount(k, v) for k, v in (spec.get("overhead") or {}).items()})
    return total


def _affinity_terms(spec: dict) -> list[list[dict]] | None:
    na = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not na:
        return None
    return [list(t.get("matchExpressions") or []) for t in na.get("nodeSelectorTerms") or []]


class ParseCache:
    """Memoised Workload parses per (uid, resourceVersion): snapshots are rebuilt often from mostly unchanged
    workloads. Owned by whoever builds the snapshots (the emulator's KueueState); bounded."""

    MAX_ENTRIES = 100000

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, str, str], WorkloadInfo] = {}

    def workload(self, obj: dict, config: KueueConfig) -> WorkloadInfo:
        md = obj.get("metadata") or {}
        key = (md.get("uid", ""), md.get("resourceVersion", ""), config.wait_for_pods_ready.requeuing_timestamp)
        if not key[1]:
            return _parse_workload(obj, config)
        cached = self._parsed.get(key)
        if cached is None:
            cached = _parse_workload(obj, config)
            if len(self._parsed) >= self.MAX_ENTRIES:
                self._parsed.clear()
            self._parsed[key] = cached
        wl = WorkloadInfo.__new__(WorkloadInfo)  # a shallow copy, faster than copy.copy
        wl.__dict__.update(cached.__dict__)
        wl.usage = dict(cached.usage)
        wl.obj = obj
        return wl


def workload_info(obj: dict, config: KueueConfig, cache: ParseCache | None = None) -> WorkloadInfo:
    """Parse a Workload (through cache when given: parses are then memoised per uid and resourceVersion)."""
    return _parse_workload(obj, config) if cache is None else cache.workload(obj, config)


def _parse_workload(obj: dict, config: KueueConfig) -> WorkloadInfo:
    md = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    # status.reclaimablePods (Kueue's ReclaimablePods, beta and on): the pods a PodSet no longer needs count neither in
    # its request nor in its admitted usage.
    reclaim = {r.get("name", ""): int(r.get("count") or 0) for r in status.get("reclaimablePods") or []}
    spec_counts = {ps.get("name", "main"): int(ps.get("count", 1)) for ps in spec.get("podSets") or []}
    podsets = []
    for ps in spec.get("podSets") or []:
        pspec = (ps.get("template") or {}).get("spec") or {}
        name = ps.get("name", "main")
        podsets.append(
            PodSetInfo(
                name=name,
                count=spec_counts[name] - min(reclaim.get(name, 0), spec_counts[name]),
                min_count=ps.get("minCount"),
                requests=_pod_requests(pspec),
                node_selector=dict(pspec.get("nodeSelector") or {}),
                tolerations=list(pspec.get("tolerations") or []),
                affinity_terms=_affinity_terms(pspec),
            )
        )
    creation = parse_time(md.get("creationTimestamp")) or EPOCH
    wl = WorkloadInfo(
        key=f"{md.get('namespace', '')}/{md.get('name', '')}",
        name=md.get("name", ""),
        namespace=md.get("namespace", ""),
        uid=md.get("uid", ""),
        job_uid=(md.get("labels") or {}).get(C.JOB_UID_LABEL, ""),
        queue_name=spec.get("queueName", ""),
        priority=int(spec.get("priority") or 0),
        creation=creation,
        podsets=podsets,
        obj=obj,
        generation=int(md.get("generation") or 0),
    )
    qr = find_condition(obj, C.QUOTA_RESERVED)
    admission = status.get("admission")
    if qr is not None and qr.get("status") == "True" and admission and not is_finished(obj):
        wl.reserved_at = parse_time(qr.get("lastTransitionTime")) or creation
        wl.cluster_queue = admission.get("clusterQueue", "")
        for psa in admission.get("podSetAssignments") or []:
            flavors = psa.get("flavors") or {}
            name = psa.get("name", "main")
            admitted_count = int(psa["count"]) if psa.get("count") is not None else spec_counts.get(name, 0)
            left = spec_counts.get(name, 0) - min(reclaim.get(name, 0), spec_counts.get(name, 0))
            for res, qty in (psa.get("resourceUsage") or {}).items():
                if res in flavors:
                    fr = (flavors[res], res)
                    amount = to_amount(res, qty)
                    if left < admitted_count:  # reclaimable pods release their share of the admitted usage
                        amount = amount // admitted_count * left
                    wl.usage[fr] = wl.usage.get(fr, 0) + amount
    wl.evicted = condition_true(obj, C.EVICTED)
    wl.order_time = queue_order_time(obj, creation, config)
    wl.shape = _shape(wl, spec)
    wl.admissible = is_admissible(obj)
    wl.requeue_at = parse_time((status.get("requeueState") or {}).get("requeueAt"))
    return wl


def _shape(wl: WorkloadInfo, spec: dict) -> str:
    """computeSchedulingHash: priority plus each PodSet's name, count, minCount, requests and scheduling fields."""
    podsets = []
    for ps, raw in zip(wl.podsets, spec.get("podSets") or [], strict=False):
        pod_spec = (raw.get("template") or {}).get("spec") or {}
        podsets.append(
            {
                "name": ps.name,
                "count": ps.count,
                "minCount": ps.min_count,
                "requests": ps.requests,
                "spec": {k: pod_spec.get(k) for k in ("nodeSelector", "tolerations", "affinity", "priorityClassName")},
            }
        )
    return json.dumps({"priority": wl.priority, "podSets": podsets}, sort_keys=True)


def queue_order_time(obj: dict, creation: datetime, config: KueueConfig) -> datetime:
    """GetQueueOrderTimestamp: creation, or the eviction time after a PodsReady-timeout / admission-check eviction."""
    ev = find_condition(obj, C.EVICTED)
    if ev is not None and ev.get("status") == "True":
        reason = ev.get("reason")
        by_timeout = reason == C.EVICTED_PODS_READY_TIMEOUT
        if (by_timeout and config.wait_for_pods_ready.requeuing_timestamp == "Eviction") or reason == "AdmissionCheck":
            return parse_time(ev.get("lastTransitionTime")) or creation
    return creation


def is_finished(obj: dict) -> bool:
    return condition_true(obj, C.FINISHED)


def is_active(obj: dict) -> bool:
    return (obj.get("spec") or {}).get("active", True) is not False


def is_admissible(obj: dict) -> bool:
    """Kueue's IsAdmissible: active, not finished and holding no quota reservation."""
    return is_active(obj) and not is_finished(obj) and not condition_true(obj, C.QUOTA_RESERVED)


def label_selector_matches(selector: dict | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector semantics: None selects nothing, {} selects everything."""
    return selector is not None and selector_matches(selector, labels)


def _quota_of(flavor: str, r: dict) -> tuple[FlavorResource, Quota]:
    name = r["name"]

    def amount(key: str) -> int | None:
        return None if r.get(key) is None else to_amount(name, r[key])

    return (flavor, name), Quota(amount("nominalQuota") or 0, amount("borrowingLimit"), amount("lendingLimit"))


def _quotas(spec: dict) -> dict[FlavorResource, Quota]:
    quotas: dict[FlavorResource, Quota] = {}
    for rg in spec.get("resourceGroups") or []:
        for fq in rg.get("flavors") or []:
            for r in fq.get("resources") or []:
                fr, q = _quota_of(fq["name"], r)
                quotas[fr] = q
    return quotas


def _weight(spec: dict) -> float:
    w = (spec.get("fairSharing") or {}).get("weight")
    if w is None:
        return 1.0
    return float(decimal_value(w))


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


@dataclass(eq=False)
class Snapshot:
    """Everything one scheduling pass needs: flavors, the quota trees, queues, and workloads."""

    config: KueueConfig
    flavors: dict[str, dict] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueueNode] = field(default_factory=dict)
    cohorts: dict[str, CohortNode] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], dict] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    workloads: dict[str, WorkloadInfo] = field(default_factory=dict)
    pending: dict[str, list[WorkloadInfo]] = field(default_factory=dict)  # by ClusterQueue, queue order
    orphans: list[tuple[WorkloadInfo, str, str]] = field(default_factory=list)  # (workload, reason, message)
    admission_checks: dict[str, dict] = field(default_factory=dict)  # AdmissionCheck objects by name
    # Admission Fair Sharing: each LocalQueue's weighted, decayed usage (plus entry penalties), lower goes first.
    lq_usage: dict[tuple[str, str], float] = field(default_factory=dict)

    @classmethod
    def from_objects(
        cls,
        *,
        resource_flavors: Iterable[dict] = (),
        cohorts: Iterable[dict] = (),
        cluster_queues: Iterable[dict] = (),
        local_queues: Iterable[dict] = (),
        workloads: Iterable[dict] = (),
        namespaces: Iterable[dict] | None = None,
        config: KueueConfig | None = None,
        now: datetime | None = None,
        parse_cache: ParseCache | None = None,
        admission_checks: Iterable[dict] = (),
        afs_penalties: dict[tuple[str, str], afs.Usage] | None = None,
    ) -> Snapshot:
        """Build from API objects. namespaces=None means every namespace is known but unlabelled.

        Workloads in backoff (status.requeueState.requeueAt after now) are left out of the pending queues.
        parse_cache memoises workload parses across builds (the emulator keeps one per simulator).
        """
        config = config or KueueConfig.default()
        snap = cls(config=config)
        snap.flavors = {_name(f): f for f in resource_flavors}
        snap.admission_checks = {_name(a): a for a in admission_checks}
        if namespaces is not None:
            snap.namespaces = {_name(n): dict((n.get("metadata") or {}).get("labels") or {}) for n in namespaces}
        cohort_objs = {_name(c): c for c in cohorts}
        for name, obj in cohort_objs.items():
            spec = obj.get("spec") or {}
            snap.cohorts[name] = CohortNode(name=name, quotas=_quotas(spec), weight=_weight(spec))

        def cohort(name: str) -> CohortNode:
            if name not in snap.cohorts:
                snap.cohorts[name] = CohortNode(name=name, exists=False)
            return snap.cohorts[name]

        for name, obj in cohort_objs.items():
            parent = (obj.get("spec") or {}).get("parentName")
            if parent and not snap._would_cycle(name, parent, cohort_objs):
                node, pnode = snap.cohorts[name], cohort(parent)
                node.parent = pnode
                pnode.child_cohorts.append(node)
        for obj in cluster_queues:
            cq = snap._cluster_queue(obj)
            snap.cluster_queues[cq.name] = cq
            if cq.cohort_name:
                cq.in_cohort_cycle = snap._chain_has_cycle(cq.cohort_name, cohort_objs)
                parent = cohort(cq.cohort_name)
                cq.parent = parent
                parent.child_cqs.append(cq)
        for lq in local_queues:
            md = lq.get("metadata") or {}
            key = (md.get("namespace", ""), md.get("name", ""))
            snap.local_queues[key] = lq
            if config.admission_fair_sharing is not None:
                snap.lq_usage[key] = local_queue_usage(lq, config, (afs_penalties or {}).get(key))
        for obj in workloads:
            wl = workload_info(obj, config, parse_cache)
            snap.workloads[wl.key] = wl
            holder = snap.cluster_queues.get(wl.cluster_queue) if wl.has_reservation else None
            if holder is not None:
                holder.workloads[wl.key] = wl
                for fr, v in wl.usage.items():
                    holder.usage[fr] = holder.usage.get(fr, 0) + v
        for c in snap.cohorts.values():
            if c.parent is None:
                update_tree(c)
        for cq in snap.cluster_queues.values():
            if cq.parent is None:
                cq.subtree_quota = {fr: q.nominal for fr, q in cq.quotas.items()}
        snap._collect_pending(now)
        return snap

    @staticmethod
    def _chain_has_cycle(name: str, cohort_objs: dict[str, dict]) -> bool:
        """Whether following parentName from this cohort loops (Kueue then disables the queues under it)."""
        seen: set[str] = set()
        cur: str | None = name
        while cur:
            if cur in seen:
                return True
            seen.add(cur)
            cur = ((cohort_objs.get(cur) or {}).get("spec") or {}).get("parentName")
        return False

    @staticmethod
    def _would_cycle(name: str, parent: str, cohort_objs: dict[str, dict]) -> bool:
        seen = {name}
        cur: str | None = parent
        while cur:
            if cur in seen:
                return True
            seen.add(cur)
            cur = ((cohort_objs.get(cur) or {}).get("spec") or {}).get("parentName")
        return False

    def _cluster_queue(self, obj: dict) -> ClusterQueueNode:
        spec = obj.get("spec") or {}
        # Kueue reads the ClusterQueue's Go struct: an absent preemption or flavorFungibility takes Kueue's defaults,
        # but a field left out of one that is given is the empty string (`unset`), which is neither Never nor
        # TryNextFlavor (an unset reclaimWithinCohort still lets Fair Sharing preempt while borrowing; an unset
        # whenCanPreempt stops at a flavor that needs preemption). The API server's schema defaults fill every such
        # field, so only objects that skipped it (Kueue's own unit-test fixtures, plain-data snapshots) tell.
        pre = spec.get("preemption")
        pre_default = C.NEVER if pre is None else ""
        pre = pre or {}
        bwc = pre.get("borrowWithinCohort")
        bwc_default = C.NEVER if bwc is None else ""
        bwc = bwc or {}
        fung = spec.get("flavorFungibility")
        borrow_default, preempt_default = ("MayStopSearch", "TryNextFlavor") if fung is None else ("", "")
        fung = fung or {}
        rgs = [
            ResourceGroup(tuple(rg.get("coveredResources") or []), tuple(f["name"] for f in rg.get("flavors") or []))
            for rg in spec.get("resourceGroups") or []
        ]
        cq = ClusterQueueNode(
            name=_name(obj),
            quotas=_quotas(spec),
            weight=_weight(spec),
            resource_groups=rgs,
            preemption=Preemption(
                within_cluster_queue=pre.get("withinClusterQueue") or pre_default,
                reclaim_within_cohort=pre.get("reclaimWithinCohort") or pre_default,
                borrow_within_cohort=bwc.get("policy") or bwc_default,
                max_priority_threshold=bwc.get("maxPriorityThreshold"),
            ),
            fungibility=FlavorFungibility(
                when_can_borrow=fung.get("whenCanBorrow") or borrow_default,
                when_can_preempt=fung.get("whenCanPreempt") or preempt_default,
                preference=fung.get("preference") or "BorrowingOverPreemption",
            ),
            queueing_strategy=spec.get("queueingStrategy") or C.BEST_EFFORT_FIFO,
            namespace_selector=spec.get("namespaceSelector"),
            stop_policy=spec.get("stopPolicy") or "None",
            cohort_name=spec.get("cohortName") or "",
            admission_fair_sharing=self.config.admission_fair_sharing is not None
            and (spec.get("admissionScope") or {}).get("admissionMode") == "UsageBasedAdmissionFairSharing",
            admission_checks=tuple(
                (c.get("name", ""), tuple(c.get("onFlavors") or []))
                for c in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
            ),
        )
        reasons, messages = [], []
        if cq.stop_policy != "None":
            reasons.append(C.CQ_REASON_STOPPED)
            messages.append("is stopped")
        missing = [f for rg in rgs for f in rg.flavors if f not in self.flavors]
        if missing:
            reasons.append(C.CQ_REASON_FLAVOR_NOT_FOUND)
            messages.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
        checks = [name for name, _ in cq.admission_checks]
        absent = [c for c in checks if c not in self.admission_checks]
        if absent:
            reasons.append(C.CQ_REASON_CHECK_NOT_FOUND)
            messages.append(f"references missing AdmissionCheck(s): {','.join(absent)}")
        inactive = [
            c for c in checks if c in self.admission_checks and not condition_true(self.admission_checks[c], "Active")
        ]
        if inactive:
            reasons.append(C.CQ_REASON_CHECK_INACTIVE)
            messages.append(f"references inactive AdmissionCheck(s): {','.join(inactive)}")
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            cq.inactive_reason = "Terminating"
            cq.inactive_message = "Can't admit new workloads; clusterQueue is terminating"
        elif reasons:
            cq.inactive_reason = reasons[0]
            cq.inactive_message = f"Can't admit new workloads: {', '.join(messages)}."
        return cq

    def queue_blocker(self, wl: WorkloadInfo) -> tuple[str, str]:
        """Why a pending workload cannot be queued at all (missing/stopped LocalQueue, missing ClusterQueue)."""
        lq = self.local_queues.get((wl.namespace, wl.queue_name))
        if lq is None:
            return C.REASON_MISCONFIGURED, f"LocalQueue {wl.queue_name} doesn't exist"
        if ((lq.get("spec") or {}).get("stopPolicy") or "None") != "None":
            return C.REASON_SUSPENDED, f"LocalQueue {wl.queue_name} is inactive"
        cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
        if cq_name not in self.cluster_queues:
            return C.REASON_MISCONFIGURED, f"ClusterQueue {cq_name} doesn't exist"
        return "", ""

    def cluster_queue_for(self, wl: WorkloadInfo) -> str:
        lq = self.local_queues.get((wl.namespace, wl.queue_name))
        return ((lq or {}).get("spec") or {}).get("clusterQueue", "")

    def _collect_pending(self, now: datetime | None) -> None:
        for wl in self.workloads.values():
            if not wl.admissible:
                continue
            reason, message = self.queue_blocker(wl)
            if reason:
                self.orphans.append((wl, reason, message))
                continue
            wl.cluster_queue = self.cluster_queue_for(wl)
            if now is not None and wl.requeue_at is not None and wl.requeue_at > now:
                continue
            self.pending.setdefault(wl.cluster_queue, []).append(wl)
        for lst in self.pending.values():
            lst.sort(key=order_key)

    def remove_workload(self, wl: WorkloadInfo) -> None:
        """Take an admitted workload's usage out of the tree (preemption simulation)."""
        cq = self.cluster_queues[wl.cluster_queue]
        cq.workloads.pop(wl.key, None)
        cq.touched()
        for fr, v in wl.usage.items():
            remove_usage(cq, fr, v)

    def add_workload(self, wl: WorkloadInfo) -> None:
        cq = self.cluster_queues[wl.cluster_queue]
        cq.workloads[wl.key] = wl
        cq.touched()
        for fr, v in wl.usage.items():
            add_usage(cq, fr, v)

    def namespace_matches(self, cq: ClusterQueueNode, namespace: str) -> bool:
        labels = self.namespaces.get(namespace, {})
        labels = {**labels, "kubernetes.io/metadata.name": namespace}
        return label_selector_matches(cq.namespace_selector, labels)


def consumed_resources(lq: dict) -> afs.Usage:
    """A LocalQueue's decayed usage per resource (status.fairSharing.admissionFairSharingStatus), as values."""
    status = ((lq.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus") or {}
    return afs.parse_usage(status.get("consumedResources") or {})


def requested(wl: WorkloadInfo) -> afs.Usage:
    """What a workload's admission uses per resource, as values (the flavors summed)."""
    out: dict[str, int] = {}
    for (_, r), v in wl.usage.items():
        out[r] = out.get(r, 0) + v
    return {r: afs.value_of_amount(r, v) for r, v in out.items()}


def entry_penalty(wl: WorkloadInfo, config: KueueConfig) -> afs.Usage:
    """What admitting wl adds to its LocalQueue's usage at once: its requests x alpha(sampling interval)."""
    cfg = config.admission_fair_sharing
    if cfg is None:
        return {}
    return afs.entry_penalty(requested(wl), cfg.usage_sampling_interval_seconds, cfg.usage_half_life_seconds)


def local_queue_usage(lq: dict, config: KueueConfig, penalty: afs.Usage | None = None) -> float:
    """Weight x (consumed + entry penalty) summed over resources, over the LocalQueue's fair-sharing weight."""
    cfg = config.admission_fair_sharing
    weights = cfg.resource_weights if cfg is not None else {}
    return afs.weighted_usage(consumed_resources(lq), penalty, _weight(lq.get("spec") or {}), weights)


def order_key(wl: WorkloadInfo) -> tuple:
    """Kueue's heap order: higher priority first, then earlier queue-order timestamp, then UID."""
    return (-wl.priority, wl.order_time, wl.uid)
