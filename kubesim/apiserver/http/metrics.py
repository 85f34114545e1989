"""`/metrics`: Kueue's Prometheus metrics (names, labels and meaning from Kueue's metrics reference) computed from what
kubesim stores, in Prometheus' text exposition format.

Gauges are read at scrape time: pending workloads per ClusterQueue and LocalQueue split into `active` and
`inadmissible` by queue membership, as the Kueue half's queue state holds them (kubesim.kueue.membership: the
scheduler's heap or its inadmissible set and backoff; an inactive ClusterQueue's all inadmissible); from the
objects: unadmitted workloads by their QuotaReserved reason, reserving and admitted active workloads, ClusterQueue
status, nominal quota, usage and reservation per flavor and resource. Counters follow Workload condition
transitions as the store commits them: quota reservations, admissions, evictions by reason, preemptions by reason.
Deleting a ClusterQueue clears its series, counters included, as Kueue's ClearClusterQueueMetrics does (a reset,
which deletes every queue, clears them all); a LocalQueue's and a stopped LocalQueue's pending series go with it.
Kueue's Cohort-labelled series are not exported here, so a deleted Cohort has nothing to clear.

Every series carries `replica_role`, last as Kueue declares it: Kueue (main since December 2025, pkg/util/roletracker)
labels each metric but build_info with the role of the replica exporting it, `leader` or `follower` under leader
election and `standalone` without it. kubesim is one replica without leader election, so always `standalone`.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from kubesim.apiserver.http.backend import Backend
from kubesim.kernel.protocols import PendingCounts
from kubesim.kernel.quantity import QuantityError, decimal_value

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_QUEUE_LABELS = ("cluster_queue", "preempting_cluster_queue")
_PENDING_EVALUATION = "PendingEvaluation"
_REPLICA_ROLE = "standalone"
_HELP = {
    "kueue_pending_workloads": (
        "gauge",
        "The number of pending workloads, per 'cluster_queue' and 'status' (active: in the admission queue; "
        "inadmissible: tried and set aside, or in backoff, or its ClusterQueue is inactive)",
    ),
    "kueue_local_queue_pending_workloads": ("gauge", "The number of pending workloads, per local queue and status"),
    "kueue_unadmitted_workloads": ("gauge", "The number of pending workloads per 'cluster_queue' and 'reason'"),
    "kueue_reserving_active_workloads": ("gauge", "The number of workloads reserving quota, per 'cluster_queue'"),
    "kueue_admitted_active_workloads": (
        "gauge",
        "The number of admitted workloads that are active, per 'cluster_queue'",
    ),
    "kueue_local_queue_admitted_active_workloads": ("gauge", "The number of admitted active workloads per local queue"),
    "kueue_cluster_queue_status": ("gauge", "The status of the ClusterQueue: pending, active or terminating"),
    "kueue_cluster_queue_nominal_quota": ("gauge", "The nominal quota, per 'cluster_queue', 'flavor' and 'resource'"),
    "kueue_cluster_queue_resource_usage": (
        "gauge",
        "The resource usage of admitted workloads, per flavor and resource",
    ),
    "kueue_cluster_queue_resource_reservation": (
        "gauge",
        "The resources reserved by workloads, per flavor and resource",
    ),
    "kueue_quota_reserved_workloads_total": (
        "counter",
        "The total number of quota reserved workloads per 'cluster_queue'",
    ),
    "kueue_admitted_workloads_total": ("counter", "The total number of admitted workloads per 'cluster_queue'"),
    "kueue_evicted_workloads_total": ("counter", "The number of evicted workloads per 'cluster_queue', 'reason', "
                                                 "'underlying_cause' and 'priority_class'"),
    "kueue_preempted_workloads_total": (
        "counter",
        "The number of preempted workloads per 'preempting_cluster_queue' and 'reason'",
    ),
}


class Metrics:
    """Counts Workload transitions from the store's commits; renders every metric on a scrape."""

    def __init__(self, sim: Backend) -> None:
        self.sim = sim
        self.store = sim.store
        self._lock = threading.Lock()
        self.counters: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
        self.store.observers.append(self._observe)

    def _observe(self, resource: str, type_: str, obj: dict, prev: dict | None) -> None:
        if resource == "clusterqueues" and type_ == "DELETED":
            self._clear_cluster_queue(obj["metadata"]["name"])
            return
        if resource != "workloads" or type_ == "DELETED":
            return
        now, before = _conditions(obj), _conditions(prev)
        queue = _cluster_queue(obj) or _cluster_queue(prev)
        with self._lock:
            for kind, metric in (("QuotaReserved", "kueue_quota_reserved_workloads_total"), ("Admitted", None)):
                if _became_true(now, before, kind):
                    self._count(metric or "kueue_admitted_workloads_total", cluster_queue=queue)
            if _became_true(now, before, "Evicted"):
                evicted_for, cause = eviction_labels(now["Evicted"].get("reason") or "")
                priority_class = ((obj.get("spec") or {}).get("priorityClassRef") or {}).get("name")
                self._count("kueue_evicted_workloads_total", cluster_queue=queue, reason=evicted_for,
                            underlying_cause=cause, priority_class=priority_class)
            if _became_true(now, before, "Preempted"):
                preemptor = self._preemptor_queue(now["Preempted"].get("message") or "") or queue
                reason = now["Preempted"].get("reason")
                self._count("kueue_preempted_workloads_total", preempting_cluster_queue=preemptor, reason=reason)

    def _clear_cluster_queue(self, name: str) -> None:
        """Kueue's ClearClusterQueueMetrics: every counter labelled with the queue (as cluster_queue, or as the
        preempting_cluster_queue of kueue_preempted_workloads_total) goes."""
        with self._lock:
            for key in [k for k in self.counters if any(label in _QUEUE_LABELS and v == name for label, v in k[1])]:
                del self.counters[key]

    def _count(self, metric: str, **labels: str | None) -> None:
        self.counters[(metric, tuple((k, v or "") for k, v in labels.items()))] += 1

    def _preemptor_queue(self, message: str) -> str | None:
        """Kueue's Preempted message names the preemptor's UID: its ClusterQueue when kubesim still has it."""
        marker = "(UID: "
        if marker not in message:
            return None
        uid = message.split(marker, 1)[1].split(",", 1)[0].split(")", 1)[0]
        found = self.store.by_uid(uid)
        if found is None or found[0] != "workloads":
            return None
        preemptor = self.store.get("workloads", found[1] or None, found[2], copy=False)
        return _cluster_queue(preemptor)

    def render(self) -> str:
        samples: list[tuple[str, dict[str, str], float]] = []
        with self.store.lock:
            workloads = self.store.list("workloads", None, copy=False)
            local_queues = self.store.list("localqueues", None, copy=False)
            cluster_queues = self.store.list("clusterqueues", None, copy=False)
            kueue = self.sim.kueue
            pending = kueue.pending_counts(self.store) if kueue is not None else PendingCounts()
        lq_target = {
            (lq["metadata"]["namespace"], lq["metadata"]["name"]): (lq.get("spec") or {}).get("clusterQueue", "")
            for lq in local_queues
        }
        cq_names = {cq["metadata"]["name"] for cq in cluster_queues}
        unadmitted: Counter[tuple[str, str]] = Counter()
        reserving: Counter[str] = Counter()
        admitted: Counter[str] = Counter()
        lq_admitted: Counter[tuple[str, str]] = Counter()
        for wl in workloads:
            conds = _conditions(wl)
            if _true(conds, "Finished"):
                continue
            ns, lq = wl["metadata"].get("namespace", ""), (wl.get("spec") or {}).get("queueName", "")
            if _true(conds, "QuotaReserved"):
                queue = _cluster_queue(wl) or ""
                reserving[queue] += 1
                if _true(conds, "Admitted"):
                    admitted[queue] += 1
                    lq_admitted[(ns, lq)] += 1
                continue
            if (wl.get("spec") or {}).get("active") is False:
                continue
            queue = lq_target.get((ns, lq), "")
            if queue in cq_names:  # a deleted ClusterQueue's series went with it
                reason = (conds.get("QuotaReserved") or {}).get("reason") or _PENDING_EVALUATION
                unadmitted[(queue, reason)] += 1
        for cq in cluster_queues:
            name = cq["metadata"]["name"]
            cohort = (cq.get("spec") or {}).get("cohortName", "")
            split = pending.cluster_queues.get(name, (0, 0))
            for status, count in zip(("active", "inadmissible"), split, strict=True):
                samples.append(("kueue_pending_workloads", {"cluster_queue": name, "status": status}, count))
            samples.append(("kueue_reserving_active_workloads", {"cluster_queue": name}, reserving[name]))
            samples.append(("kueue_admitted_active_workloads", {"cluster_queue": name}, admitted[name]))
            state = _cq_status(cq)
            for status in ("pending", "active", "terminating"):
                samples.append(
                    ("kueue_cluster_queue_status", {"cluster_queue": name, "status": status}, state == status)
                )
            for group in (cq.get("spec") or {}).get("resourceGroups") or []:
                for flavor in group.get("flavors") or []:
                    for res in flavor.get("resources") or []:
                        labels = {
                            "cohort": cohort,
                            "cluster_queue": name,
                            "flavor": flavor["name"],
                            "resource": res["name"],
                        }
                        samples.append(("kueue_cluster_queue_nominal_quota", labels, _number(res.get("nominalQuota"))))
            for field, metric in (
                ("flavorsUsage", "kueue_cluster_queue_resource_usage"),
                ("flavorsReservation", "kueue_cluster_queue_resource_reservation"),
            ):
                for flavor in (cq.get("status") or {}).get(field) or []:
                    for res in flavor.get("resources") or []:
                        labels = {
                            "cohort": cohort,
                            "cluster_queue": name,
                            "flavor": flavor["name"],
                            "resource": res["name"],
                        }
                        samples.append((metric, labels, _number(res.get("total"))))
        for (queue, reason), count in sorted(unadmitted.items()):
            samples.append(("kueue_unadmitted_workloads", {"cluster_queue": queue, "reason": reason}, count))
        for ns, lq in sorted(lq_target):
            if (ns, lq) in pending.local_queues:  # a stopped LocalQueue is out of Kueue's manager: no pending series
                split = pending.local_queues[(ns, lq)]
                for status, count in zip(("active", "inadmissible"), split, strict=True):
                    labels = {"name": lq, "namespace": ns, "status": status}
                    samples.append(("kueue_local_queue_pending_workloads", labels, count))
            labels = {"name": lq, "namespace": ns}
            samples.append(("kueue_local_queue_admitted_active_workloads", labels, lq_admitted[(ns, lq)]))
        with self._lock:
            samples.extend((metric, dict(labels), count) for (metric, labels), count in sorted(self.counters.items()))
        return _exposition(samples)


def _exposition(samples: list[tuple[str, dict[str, str], Any]]) -> str:
    by_metric: dict[str, list[str]] = {name: [] for name in _HELP}
    for metric, labels, value in samples:
        rendered = ",".join(f'{k}="{_escape(str(v))}"' for k, v in {**labels, "replica_role": _REPLICA_ROLE}.items())
        by_metric[metric].append(f"{metric}{{{rendered}}} {float(value):g}")
    lines: list[str] = []
    for metric, (kind, text) in _HELP.items():
        lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}", *by_metric[metric]]
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _conditions(obj: dict | None) -> dict[str, dict]:
    return {c.get("type"): c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def _true(conds: dict[str, dict], kind: str) -> bool:
    return (conds.get(kind) or {}).get("status") == "True"


def _became_true(now: dict[str, dict], before: dict[str, dict], kind: str) -> bool:
    if not _true(now, kind):
        return False
    if not _true(before, kind):
        return True
    return now[kind].get("lastTransitionTime") != before[kind].get("lastTransitionTime")


def _cluster_queue(wl: dict | None) -> str | None:
    return (((wl or {}).get("status") or {}).get("admission") or {}).get("clusterQueue")


def _cq_status(cq: dict) -> str:
    if cq["metadata"].get("deletionTimestamp"):
        return "terminating"
    active = next((c for c in (cq.get("status") or {}).get("conditions") or [] if c.get("type") == "Active"), None)
    return "active" if active and active.get("status") == "True" else "pending"


def _number(value: object) -> float:
    try:
        return float(decimal_value(value))
    except QuantityError:
        return 0.0


def eviction_labels(condition_reason: str) -> tuple[str, str]:
    """The metric's (reason, underlying_cause) from the Evicted condition's reason: Kueue writes a deactivation with
    its cause as "Deactivated" + "DueTo" + cause (e.g. DeactivatedDueToAdmissionCheck) in the condition but counts it
    as reason Deactivated, underlying_cause AdmissionCheck; every other reason is its own root cause ("")."""
    head, found, cause = condition_reason.partition("DueTo")
    if found and head == "Deactivated":
        return head, cause
    return condition_reason, ""
