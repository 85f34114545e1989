"""Why work waits on a KAI pool, from KAI Scheduler's own words: the PodGroup's scheduling condition the watcher
mirrors (`Workload.kueue_conditions` holds it for KAI work, worker/kai_status.py), in the same plain language and
reason codes as Kueue's waits. The numbers come from the condition's `details.queueDetails` where KAI gives them (its
own count of the queue's allocation, limit and deserved quota), else from the organisation's quotas.

KAI keeps no queue positions (it picks the queue furthest below its fair share at each cycle), so none is shown and
every sentence says so rather than inventing one.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from apps.core import kai_conditions as kai
from apps.core.kueue_names import names

from .facts import Explanation
from .reasons import (
    ADMITTING,
    DEPARTMENT_LIMIT,
    GANG,
    MISCONFIGURED,
    NEVER_FITS,
    NO_QUOTA,
    POOL_FULL,
    PROJECT_DESERVED,
    PROJECT_LIMIT,
)
from .wording import _gang, _join, _n, _num, _over_a_cap

if TYPE_CHECKING:
    from .explainer import _Explainer

NO_PLACE = " KAI Scheduler keeps no place in line, so none is shown."


def _amount(x: _Explainer) -> Decimal:
    """What the workload asks for in GPUs: its fraction of a card, or its whole units."""
    w = x.w
    return w.gpu_fraction if w.gpu_fraction is not None else Decimal(x.units)


def kai_gang_starting(x: _Explainer) -> Explanation:
    per_pod, pods = x.w.gang_shape
    return x.done(GANG, f"Placed as a gang: KAI Scheduler bound all {pods} pods ({per_pod} x {x.pool} each) to "
                          "nodes together; waiting for them to start.", f"Placed: waiting for all {pods} pods to start")


def kai_wait(x: _Explainer) -> Explanation:
    """The first cause that applies, as KAI's condition names it."""
    w, f = x.w, x.f
    amount = _amount(x)
    per_pod, pods = w.gang_shape
    ask = f"{_n(amount)} x {x.pool}{_gang(pods, per_pod, None, None)}"
    condition = kai.scheduling_condition(w.kueue_conditions)
    first = kai.first_reason(condition)
    reason = kai.reason_of(condition)
    message = str(first.get("message") or condition.get("message") or "")
    details: dict[str, Any] = (first.get("details") or {}).get("queueDetails") or {}
    queue = w.cluster_queue or names().kai_project_queue(w.project.slug, w.node_pool.slug)
    x.numbers.update(requested=_num(amount), position=None, ahead=None, kai_reason=reason, kai_message=message or None,
                     kai_queue=queue)

    if not f.has_quota:
        return x.done(NO_QUOTA, f"Waiting for {ask}: {x.project} has no quota on {x.pool}, so KAI Scheduler has no "
                                f"queue for it there. Ask your department admin for quota on {x.pool}, or submit it "
                                f"again on a pool {x.project} has quota on.", f"No quota on {x.pool}", change="quota")
    never = _never(x, ask, amount)
    if never is not None:
        return never
    if reason == kai.QUEUE_DOES_NOT_EXIST:
        return x.done(MISCONFIGURED, f"Waiting for {ask}: KAI Scheduler has no queue {queue} for {x.project} on "
                                     f"{x.pool} ({message or 'it does not exist'}). This is for an admin to fix: the "
                                     f"organisation's queues for {x.pool} are not in the cluster as they should be. It "
                                     "stays pending until they are." + NO_PLACE,
                      f"The {queue} queue is missing on {x.pool}: ask an admin")
    if reason == kai.OVER_LIMIT:
        return _over_limit(x, ask, amount, details, queue)
    if reason == kai.NON_PREEMPTIBLE_OVER_QUOTA:
        return _over_deserved(x, ask, amount, details)
    if condition:
        lacking = kai.lacking(message)
        what = _join(lacking) or "room for it"
        return x.done(POOL_FULL, f"Waiting for {ask}: it is within {x.project}'s quota and limits, but no node of "
                                 f"{x.pool} has room for it now (KAI Scheduler: {message or reason}). The nodes lack "
                                 f"{what}; it starts when work there finishes, or when KAI takes back cards others "
                                 "use beyond their fair share." + NO_PLACE,
                      f"No room on {x.pool}: the nodes lack {what}", lacking=lacking)
    # KAI has said nothing yet (it was just submitted, or it is the submit form's probe): the same checks on the
    # mirror of what KAI's queues hold.
    if f.limit is not None and (f.project_used or 0) + amount > f.limit:
        return _over_limit(x, ask, amount, {}, queue)
    if f.department_limit is not None and (f.department_used or 0) + amount > f.department_limit:
        department = names().kai_department_queue(w.project.department.slug, w.node_pool.slug)
        return _over_limit(x, ask, amount, {"name": department}, queue)
    if not w.preemptible and f.deserved is not None and (f.queue_used or 0) + amount > f.deserved:
        return _over_deserved(x, ask, amount, {})
    pool_used = f.pool_used or Decimal(0)
    if f.pool_capacity is not None and pool_used + amount > f.pool_capacity:
        more = pool_used + amount - f.pool_capacity
        return x.done(POOL_FULL, f"Waiting for {ask}: {_n(pool_used)} of the pool's {f.pool_capacity} are in use, "
                                 f"so {_n(more)} more are needed; it starts when work there finishes, or when KAI "
                                 "takes back cards others use beyond their fair share." + NO_PLACE,
                      f"{_n(more)} more {x.pool} needed: the pool is full ({_n(pool_used)} of {f.pool_capacity} in "
                      "use)", more_needed=_num(more))
    return x.done(ADMITTING, f"Waiting for {ask}: KAI Scheduler has not placed it yet; it does at its next "
                             "scheduling cycle when there is room." + NO_PLACE, "Waiting for KAI Scheduler")


def _over_deserved(x: _Explainer, ask: str, amount: Decimal, details: dict[str, Any]) -> Explanation:
    """Non-preemptible work beyond the project's deserved quota (KAI's numbers, else the mirror's)."""
    f = x.f
    held = kai.gpus(details.get("queueAllocatedNonPreemptibleResources"))
    held = held if held is not None else f.queue_used
    deserved = kai.gpus(details.get("queueDeservedResources"))
    deserved = deserved if deserved is not None else (Decimal(f.deserved) if f.deserved is not None else None)
    asked = kai.gpus(details.get("podGroupRequestedResources")) or amount
    more = None if held is None or deserved is None else max(Decimal(0), held + asked - deserved)
    return x.done(PROJECT_DESERVED, f"Waiting for {ask}: non-preemptible work runs only inside {x.project}'s "
                                    f"deserved quota on {x.pool}, and its non-preemptible work holds {_n(held)} of "
                                    f"the {_n(deserved)} deserved, so {_n(more)} more are needed. Mark it "
                                    "preemptible to use idle capacity beyond it." + NO_PLACE,
                  f"{_n(more)} more {x.pool} needed: non-preemptible work holds {_n(held)} of {x.project}'s "
                  f"deserved {_n(deserved)}", queue_used=_num(held), deserved=_num(deserved), more_needed=_num(more))


def _over_limit(x: _Explainer, ask: str, amount: Decimal, details: dict[str, Any], queue: str) -> Explanation:
    """The project's limit on the pool, or its department's (KAI names the queue whose limit is in the way)."""
    f = x.f
    name = str(details.get("name") or queue)
    own = name == queue
    limit = kai.gpus(details.get("queueResourceLimits"))
    if limit is None:
        known = f.limit if own else f.department_limit
        limit = Decimal(known) if known is not None else None
    used = kai.gpus(details.get("queueAllocatedResources"))
    if used is None:
        used = f.project_used if own else f.department_used
    asked = kai.gpus(details.get("podGroupRequestedResources")) or amount
    more = None if limit is None or used is None else max(Decimal(0), used + asked - limit)
    who = x.project if own else (f.department or "The department")
    if used is not None and limit is not None and used >= limit:
        said, short = f"{who} is at its limit on {x.pool}, {_n(used)} of {_n(limit)} in use", \
            f"{who} is at its limit ({_n(used)} of {_n(limit)})"
    else:
        said = f"{who} has {_n(used)} of its limit of {_n(limit)} in use on {x.pool}; these {_n(asked)} would take " \
               "it over"
        short = f"{who} would go over its limit ({_n(used)} of {_n(limit)} in use, asks {_n(asked)})"
    frees = f"{x.project}'s own work" if own else f"work of {who}"
    numbers = {"limit": _num(limit), "project_used": _num(used)} if own else {
        "department_limit": _num(limit), "department_used": _num(used)}
    return x.done(PROJECT_LIMIT if own else DEPARTMENT_LIMIT,
                  f"Waiting for {ask}: {said}, so {_n(more)} more are needed. It starts when {frees} "
                  "frees them, or when an admin raises the limit." + NO_PLACE,
                  f"{_n(more)} more {x.pool} needed: {short}", more_needed=_num(more), **numbers)


def _never(x: _Explainer, ask: str, amount: Decimal) -> Explanation | None:
    """Work KAI can never schedule as submitted: more than a limit, non-preemptible beyond deserved, or than the
    pool."""
    cap = _over_a_cap(x.f, amount=amount, preemptible=x.w.preemptible, project=x.project)
    if cap is None:
        return None
    what, change = cap
    return x.done(NEVER_FITS, f"This can never start as submitted: it asks for {ask} but {what}. Ask for fewer GPUs "
                              "or pods, or ask your admin for more quota.", f"Can never start: {what}", change=change)
