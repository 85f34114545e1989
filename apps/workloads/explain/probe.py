"""The submit form's forecast: the same model on a workload not submitted yet, and its one line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.cluster.models import ClusterQueueState, LocalQueueState
from apps.core.actors import Actor
from apps.workloads.models import Status, Workload

from .explainer import explain
from .facts import Explanation
from .gather import _facts, _nodes, _pools, _quota_rows
from .reasons import (
    ADMITTING,
    BEHIND,
    DEPARTMENT_LIMIT,
    NEVER_FITS,
    NOT_LENDABLE,
    POOL_FULL,
    PROJECT_DESERVED,
    PROJECT_LIMIT,
)
from .wording import _n, _plural


def explain_probe(probe: Workload, *, viewer: Actor | None) -> Explanation | None:
    """What the explanation model says of an unsaved workload as if it were queued now, worded for `viewer`.

    The submit form's pool panel runs this on what is being filled in: the same facts as for waiting work (the
    pool's quotas and the mirror of its ClusterQueues; no cluster call), with its place in the queue the queued
    workloads of its ClusterQueue at its priority or higher. Four queries, five for a gang (its pool's nodes). The
    probe needs `project`, `node_pool`, its sizes and `preemptible`; `priority_class` when known.
    """
    probe.status, probe.status_reason, probe.status_message = Status.QUEUED, "", ""
    pool_ids = {probe.node_pool_id}
    quotas = _quota_rows(pool_ids, viewer)
    states: list[dict[str, Any]] = [dict(row) for row in ClusterQueueState.objects.filter(
        node_pool_id__in=pool_ids).values("name", "project_id", "node_pool_id", "guaranteed", "used", "active",
                                          "active_reason", "active_message")]
    local = LocalQueueState.objects.filter(namespace=probe.project.namespace, name=probe.queue_name,
                                           active=False).first()
    ahead = Workload.objects.filter(project_id=probe.project_id, node_pool_id=probe.node_pool_id,
                                    preemptible=probe.preemptible, status=Status.QUEUED)
    if probe.priority_class_id is not None:
        ahead = ahead.filter(priority_class__value__gte=probe.priority_value)
    probe.queue_position_local = ahead.count() or None
    pool = _pools([probe], quotas, states)[probe.node_pool_id]
    queue = next((state for state in states if state["name"] == probe.cluster_queue_name), None)
    return explain(probe, _facts(probe, pool, queue, local, (None, "", None, ()),
                                 _nodes([probe]).get(probe.node_pool_id)))


@dataclass(frozen=True)
class Forecast:
    """Whether a workload would start now or wait, in one line, and the explanation it comes from."""

    starts_now: bool
    sentence: str
    explanation: Explanation


def forecast(probe: Workload, explanation: Explanation) -> Forecast:
    """The submit form's one line: "Would start now (4 of 8 deserved H100 free)" or "Would wait: Vision is at its
    limit (8 of 8 H100)", from the numbers of the explanation `explain_probe` gave."""
    n, reason = explanation.numbers, explanation.reason
    pool, project = probe.node_pool.name, probe.project.name
    if reason == ADMITTING:
        deserved = n["deserved"] or 0
        used = n["queue_used"] if not probe.preemptible else n["project_used"]
        free_deserved = max(0, deserved - (used or 0))
        if free_deserved >= n["requested"]:
            why = f"{_n(free_deserved)} of {deserved} deserved {pool} free"
        else:
            why = f"{_n(n['available'])} {pool} free to {project}, beyond its deserved {deserved}: preemptible"
        return Forecast(True, f"Would start now ({why}).", explanation)
    more = n.get("more_needed")
    needed = f"; {_n(more)} more {pool} needed" if more else ""
    causes = {
        PROJECT_LIMIT: lambda: _limit_cause(project, n["project_used"], n["limit"], n["requested"], pool) + needed,
        DEPARTMENT_LIMIT: lambda: _limit_cause(n["department"] or "the department", n["department_used"],
                                               n["department_limit"], n["requested"], pool) + needed,
        POOL_FULL: lambda: f"the pool is full ({_n(n['pool_used'])} of {n['pool_capacity']} {pool} in use){needed}",
        PROJECT_DESERVED: lambda: f"non-preemptible work holds {_n(n['queue_used'])} of {project}'s deserved "
                                  f"{n['deserved']} {pool}{needed}",
        NOT_LENDABLE: lambda: f"{explanation.headline.partition(': ')[2]}{needed}",
        BEHIND: lambda: f"there is room, but {_plural(n['ahead'], 'earlier or higher-priority workload')} in "
                        f"{probe.queue_name} {'goes' if n['ahead'] == 1 else 'go'} first",
    }
    if reason == NEVER_FITS:
        return Forecast(False, f"Would never start: {explanation.headline.removeprefix('Can never start: ')}.",
                        explanation)
    cause = causes[reason]() if reason in causes else explanation.headline[:1].lower() + explanation.headline[1:]
    return Forecast(False, f"Would wait: {cause}.", explanation)


def _limit_cause(name: str, used: Any, limit: int, requested: int, pool: str) -> str:
    """"Vision is at its limit (8 of 8 H100)" when reached; below it, that this request would take it over."""
    if used >= limit:
        return f"{name} is at its limit ({_n(used)} of {limit} {pool})"
    return f"{name} would go over its limit ({_n(used)} of {limit} {pool} in use, asks {_n(requested)})"
