"""KAI Scheduler's vocabulary as the portal reads it, each spelled once: a PodGroup's scheduling conditions and their
reasons, and the pod condition and Event KAI leaves on what it evicts. Pure constants and parsers.

KAI writes a PodGroup's `status.schedulingConditions` (type UnschedulableOnNodePool, with `reasons[]` saying why and,
for a queue's quota or limit, `details.queueDetails` with the numbers), and puts a `DisruptionTarget` condition with
reason `PreemptionByScheduler` on each pod it evicts, just before deleting it (KAI's pkg/apis/scheduling/v2alpha2,
podgroup_types.go), having recorded an `Evict` Event with the same message on the pod's PodGroup. The watcher turns
them into the portal's statuses (`worker/kai_status.py`), the mirror keeps the conditions
(`Workload.kueue_conditions` holds a KAI workload's), and "why am I waiting" reads them back
(`apps/workloads/explain`). kubesim has its own copy (`kubesim/kai/names.py`): it knows nothing of the portal.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

SCHEDULER_NAME = "kai-scheduler"
POD_GROUP_API = "scheduling.run.ai/v2alpha2"

# --- a PodGroup's scheduling condition -------------------------------------------------------------------------
UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"  # the condition's type (one per node pool tried)
UNSCHEDULABLE = "Unschedulable"  # the condition's reason, and a reason of its own: no node has room
# reasons[].reason
OVER_LIMIT = "OverLimit"  # the queue (or a parent) would go over its limit
NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"  # non-preemptible work beyond the queue's deserved quota
QUEUE_DOES_NOT_EXIST = "QueueDoesNotExist"  # the queue named is missing, or is not a leaf
PENDING = "Pending"  # what the portal records while KAI has said nothing yet

# --- eviction ------------------------------------------------------------------------------------------------------
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
EVICT = "Evict"  # the reason of the Event KAI records on the evicted PodGroup, one per pod, with the same message
# "... was preempted by workload <ns>/<name>." (reclaim) or "... by higher priority workload <ns>/<name>"
PREEMPTOR = re.compile(r"preempted by (?P<priority>higher priority )?workload (?P<namespace>[^/\s]+)/(?P<name>[^\s.]+)")
# what a node lacked: "0/4 nodes are available, 4 node(s) didn't have enough resources: GPUs."
LACKING = re.compile(r"didn't have enough resources: (?P<what>[^,.]+)")


def scheduling_condition(conditions: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The PodGroup's current scheduling condition (the last one written), {} without one."""
    found = [c for c in conditions or [] if c.get("type") == UNSCHEDULABLE_ON_NODE_POOL and c.get("status") != "False"]
    return found[-1] if found else {}


def first_reason(condition: dict[str, Any]) -> dict[str, Any]:
    """The condition's first explanation (`reasons[0]`), {} when it gives none (no node has room)."""
    return next(iter(condition.get("reasons") or []), {})


def reason_of(condition: dict[str, Any]) -> str:
    """The one word the portal records for a pending PodGroup: its first reason, else the condition's own."""
    if not condition:
        return PENDING
    return str(first_reason(condition).get("reason") or condition.get("reason") or UNSCHEDULABLE)


def gpus(resources: dict[str, Any] | None) -> Decimal | None:
    """The GPU amount of a resource list in queueDetails (`{"nvidia.com/gpu": "1500m"}`); None without one."""
    value = (resources or {}).get("nvidia.com/gpu")
    if value is None:
        return None
    text = str(value)
    try:
        return Decimal(text[:-1]) / 1000 if text.endswith("m") else Decimal(text)
    except InvalidOperation:
        return None


def lacking(message: str) -> list[str]:
    """What the nodes lacked, as KAI's message says it ("GPUs", "CPU cores", "memory"), in its order."""
    return [match.group("what").strip() for match in LACKING.finditer(message or "")]
