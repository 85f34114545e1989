""""Why am I waiting": one plain sentence and the numbers behind it, for a queued workload.

Built from Kueue's reason and message on the workload plus the quota tree the watcher mirrors (the queue's
usage, the project's and department's quotas). `explain` is pure; `explain_workloads` gathers the facts for many
workloads in a fixed number of queries.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from apps.cluster.models import ClusterQueueState, LocalQueueState
from apps.org.models import Quota

from .models import Status, Workload

QUOTA = "quota"
PREEMPTING = "preempting"
NEVER_FITS = "never_fits"
MISCONFIGURED = "misconfigured"
STOPPED_QUEUE = "stopped_queue"
PENDING = "pending"


@dataclass(frozen=True)
class QuotaFacts:
    """The numbers the sentence may use; None where the mirror has not seen them yet."""

    deserved: int | None = None
    limit: int | None = None
    queue_used: Decimal | None = None
    queue_nominal: Decimal | None = None
    project_used: Decimal | None = None
    department_deserved: int | None = None
    department_limit: int | None = None
    department_used: Decimal | None = None
    queue_active: bool = True
    queue_reason: str = ""
    queue_message: str = ""


@dataclass(frozen=True)
class Explanation:
    kind: str
    sentence: str
    numbers: dict[str, Any] = field(default_factory=dict)


def _n(value: Decimal | int | None) -> str:
    if value is None:
        return "?"
    value = Decimal(value)
    return format(value.normalize(), "f") if value != value.to_integral() else str(int(value))


def _ahead(position: int | None) -> str:
    if position is None:
        return ""
    if position == 0:
        return " You are next in line."
    return f" {position} workload{'s are' if position != 1 else ' is'} ahead of you."


def explain(workload: Workload, facts: QuotaFacts) -> Explanation | None:
    """The sentence for a queued (or never-admittable) workload; None for every other status."""
    if workload.status not in (Status.QUEUED, Status.REJECTED):
        return None
    units, pool = workload.gpu_units, workload.node_pool
    ask = f"{units} x {pool.name}"
    reason, message = workload.status_reason, workload.status_message
    numbers: dict[str, Any] = {"requested": units, "pool": pool.slug, "position": workload.queue_position_local,
                               "reason": reason, "deserved": facts.deserved, "limit": facts.limit,
                               "queue_used": facts.queue_used, "project_used": facts.project_used,
                               "department_used": facts.department_used}
    if not facts.queue_active and facts.queue_reason in ("Stopped", "LocalQueueStopped", "ClusterQueueStopped"):
        return Explanation(STOPPED_QUEUE, f"Waiting for {ask}: the {workload.queue_name} queue is on hold by an "
                                          "admin; nothing new starts there until it is released.", numbers)
    if reason == "Misconfigured" or not facts.queue_active:
        detail = message or facts.queue_message or facts.queue_reason
        return Explanation(MISCONFIGURED, f"Waiting for {ask}: the {workload.queue_name} queue is not usable right "
                                          f"now ({detail}). Ask an admin to check the queue; your place is kept.",
                           numbers)
    if reason in ("ExceedsMaxQuota", "NoMatchingFlavor") or workload.status == Status.REJECTED:
        if facts.limit is not None and units > facts.limit:
            what = f"{workload.project.name} may use at most {facts.limit} there"
        elif not workload.preemptible and facts.deserved is not None and units > facts.deserved:
            what = f"non-preemptible work must fit in {workload.project.name}'s deserved {facts.deserved}"
        else:
            what = message or "no quota can ever hold it"
        return Explanation(NEVER_FITS, f"This can never start as submitted: it asks for {ask} but {what}. Ask for "
                                       "fewer GPUs or pods, or ask your admin for more quota.", numbers)
    if reason == "WaitingForPreemptedWorkloads":
        return Explanation(PREEMPTING, f"Starting soon: Kueue is making room for {ask} and waits for the "
                                       "workloads it preempted to release their GPUs." + _ahead(
                                           workload.queue_position_local), numbers)
    if workload.preemptible:
        parts = [f"your project uses {_n(facts.project_used)} of its limit "
                 f"{'(unlimited)' if facts.limit is None else facts.limit}"]
        if facts.department_used is not None and facts.department_deserved is not None:
            parts.append(f"the department uses {_n(facts.department_used)} of its deserved "
                         f"{facts.department_deserved}")
        sentence = f"Waiting for {ask} of idle capacity: {', '.join(parts)}, and no other team has idle GPUs " \
                   "to lend right now."
    else:
        sentence = f"Waiting for {ask}: your project's guaranteed queue has {_n(facts.queue_used)} of " \
                   f"{_n(facts.queue_nominal if facts.queue_nominal is not None else facts.deserved)} in use."
    return Explanation(QUOTA, sentence + _ahead(workload.queue_position_local), numbers)


def explain_workloads(workloads: list[Workload]) -> dict[int, Explanation | None]:
    """Explanations for many workloads; three queries whatever their number."""
    waiting = [w for w in workloads if w.status in (Status.QUEUED, Status.REJECTED)]
    if not waiting:
        return {w.pk: None for w in workloads}
    project_ids = {w.project_id for w in waiting}
    department_ids = {w.project.department_id for w in waiting}
    pool_ids = {w.node_pool_id for w in waiting}
    quotas = Quota.objects.filter(node_pool_id__in=pool_ids).filter(
        project_id__in=project_ids) | Quota.objects.filter(node_pool_id__in=pool_ids, department_id__in=department_ids)
    project_quota, department_quota = {}, {}
    for row in quotas:
        if row.project_id:
            project_quota[(row.project_id, row.node_pool_id)] = row
        else:
            department_quota[(row.department_id, row.node_pool_id)] = row
    queue_state: dict[str, ClusterQueueState] = {}
    project_used: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    department_used: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    for mirrored in ClusterQueueState.objects.filter(node_pool_id__in=pool_ids,
                                                     project__department_id__in=department_ids).select_related(
            "project"):
        # Both set: the filter above goes through project and node_pool.
        assert mirrored.project is not None and mirrored.node_pool_id is not None
        queue_state[mirrored.name] = mirrored
        project_used[(mirrored.project.pk, mirrored.node_pool_id)] += mirrored.used
        department_used[(mirrored.project.department_id, mirrored.node_pool_id)] += mirrored.used
    stopped_local = {(q.namespace, q.name): q for q in LocalQueueState.objects.filter(
        project_id__in=project_ids, active=False)}
    result: dict[int, Explanation | None] = {}
    for workload in workloads:
        if workload not in waiting:
            result[workload.pk] = None
            continue
        key = (workload.project_id, workload.node_pool_id)
        dept_key = (workload.project.department_id, workload.node_pool_id)
        quota, dept = project_quota.get(key), department_quota.get(dept_key)
        state = queue_state.get(workload.cluster_queue_name)
        local = stopped_local.get((workload.project.namespace, workload.queue_name))
        inactive = local or (state if state and not state.active else None)
        facts = QuotaFacts(
            deserved=quota.deserved if quota else None, limit=quota.limit if quota else None,
            queue_used=state.used if state else None, queue_nominal=state.nominal if state else None,
            project_used=project_used.get(key, Decimal(0)), department_deserved=dept.deserved if dept else None,
            department_limit=dept.limit if dept else None, department_used=department_used.get(dept_key, Decimal(0)),
            queue_active=inactive is None, queue_reason=inactive.active_reason if inactive else "",
            queue_message=inactive.active_message if inactive else "",
        )
        result[workload.pk] = explain(workload, facts)
    return result
