"""The reason codes of "why am I waiting", what each means, their coarse kinds, and Kueue's (and KAI Scheduler's) own
reasons and numbers in plain words."""

from __future__ import annotations

from decimal import Decimal

from apps.core import kai_conditions as kai
from apps.core import kueue_conditions as kueue

PROJECT_LIMIT = "project_limit"
PROJECT_DESERVED = "project_deserved"
DEPARTMENT_LIMIT = "department_limit"
POOL_FULL = "pool_full"
NOT_LENDABLE = "not_lendable"
BEHIND = "behind"
ADMITTING = "admitting"
GANG = "gang"
PREEMPTING = "preempting"
PREEMPTED = "preempted"
ADMISSION_CHECKS = "admission_checks"
QUEUE_STOPPED = "queue_stopped"
BUDGET_HOLD = "budget_hold"
MISCONFIGURED = "misconfigured"
NO_QUOTA = "no_quota"
INACTIVE = "inactive"
NEVER_FITS = "never_fits"
UNKNOWN = "unknown"

REASONS: dict[str, str] = {
    PROJECT_LIMIT: "The project uses its whole limit on the pool (project_used / limit), whatever is idle.",
    PROJECT_DESERVED: "Non-preemptible work runs only inside the project's deserved quota, and its non-preemptible "
                      "work holds it (queue_used / deserved).",
    DEPARTMENT_LIMIT: "The department uses its whole limit on the pool (department_used / department_limit); "
                      "holders lists its projects the viewer may see, the rest as others.",
    POOL_FULL: "Within its limits, but the pool is physically full (pool_used / pool_capacity); holders lists who "
               "holds it, by project the viewer may see, the rest as others.",
    NOT_LENDABLE: "Cards are idle but a project that does not lend (lendingLimit 0) keeps them (held_back, "
                  "held_back_by; a project the viewer may not see is unnamed).",
    BEHIND: "There is room for it (available), but `ahead` earlier or higher-priority workloads go first.",
    ADMITTING: "There is room for it (available): Kueue admits it at its next pass.",
    GANG: "A gang of `pods` pods admitted together: waiting until every pod is ready (waitForPodsReady), or "
          "requeued after its pods were not all ready in time.",
    PREEMPTING: "Kueue preempts other work to make room for it (victims, as far as the viewer may see them; "
                "hidden_victims counts the others), or reclaims the project's lent deserved quota.",
    PREEMPTED: "It was preempted (preemptor, when the viewer may see it; preemption_reason; preempted_at) and goes "
               "back into the queue once its pods have stopped.",
    ADMISSION_CHECKS: "Quota is reserved; Kueue admits it once its admission checks are Ready (admission_checks: "
                      "name, state, message each; a provisioning check waits for capacity to be brought up).",
    QUEUE_STOPPED: "Its LocalQueue or ClusterQueue is held or stopped by an admin.",
    BUDGET_HOLD: "Preemptible work whose project or department has spent its `hold_preemptible` budget for the period "
                 "(budget_scope, budget, budget_period): its elastic queue holds new work until the period rolls over "
                 "or the budget is raised.",
    MISCONFIGURED: "Its queue is not usable (Kueue's message says why).",
    NO_QUOTA: "The project has no quota on this pool, so there is no queue for it there.",
    INACTIVE: "Kueue deactivated it (spec.active false): it will not start again.",
    NEVER_FITS: "It can never be admitted as submitted (limit, deserved quota, department limit, pool capacity or "
                "cards held back); `change` says what to change.",
    UNKNOWN: "The portal has no numbers for its queue yet.",
}

# The coarse kinds of the first version (API `explanation_kind`, `data-explanation` in pages).
QUOTA = "quota"
STOPPED_QUEUE = "stopped_queue"
PENDING = "pending"
KINDS = {PROJECT_LIMIT: QUOTA, PROJECT_DESERVED: QUOTA, DEPARTMENT_LIMIT: QUOTA, POOL_FULL: QUOTA,
         NOT_LENDABLE: QUOTA, BEHIND: QUOTA, ADMITTING: PENDING, GANG: PENDING, PREEMPTING: PREEMPTING,
         PREEMPTED: PREEMPTING, QUEUE_STOPPED: STOPPED_QUEUE, MISCONFIGURED: MISCONFIGURED, NO_QUOTA: NEVER_FITS,
         INACTIVE: MISCONFIGURED, NEVER_FITS: NEVER_FITS, UNKNOWN: PENDING,
         ADMISSION_CHECKS: PENDING, BUDGET_HOLD: STOPPED_QUEUE}

# Kueue's preemption reasons in plain words (after "Preempted ... by <preemptor>, ").
HUMAN_PREEMPTION = {
    kueue.IN_CLUSTER_QUEUE: "to make room for higher-priority work in the same queue",
    kueue.IN_COHORT_RECLAMATION: "to give back borrowed quota to the project that deserves it",
    kueue.IN_COHORT_FAIR_SHARING: "to share the pool fairly between projects (fair sharing)",
    kueue.IN_COHORT_RECLAIM_WHILE_BORROWING: "to make room for higher-priority work of another project",
    kai.PREEMPTION_BY_SCHEDULER: "as KAI Scheduler gives GPUs back to a queue below its fair share, or to "
                                 "higher-priority work of the same queue",
}


def kueue_more_needed(message: str) -> Decimal | None:
    """The "N more needed" of Kueue's message, if it says one (the largest, when several resources are short)."""
    found = [Decimal(m) for m in kueue.MORE_NEEDED.findall(message or "")]
    return max(found) if found else None
