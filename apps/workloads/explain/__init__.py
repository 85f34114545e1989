""""Why am I waiting": the cause of every kind of wait, with its numbers, for one viewer.

One model serves every place that says why a workload waits: the list, the detail page (its status line and its
queue panel), a project's queue, the API (`waiting`: a `reason` code, the sentence, the status line and the
numbers) and the e-mails. Each cause is a `reason` code (`REASONS`); the sentence and the status line (`headline`)
are built from the same `numbers`, so they can never disagree with each other.

The numbers come from the same sources as the quota pages (the organisation's quotas and the watcher's mirror of
each ClusterQueue's usage, as in `apps.usage.selectors.quota_dashboard`), and the free capacity is Kueue's own
arithmetic over the cohort tree (`capacity.PoolTree`), so "N more needed" is the number Kueue writes in its message.
Which level is short decides the reason, lowest first: the queue (non-preemptible work inside the deserved quota),
the project's limit, the department's limit, then the pool (full, or idle cards a non-lending project keeps).

Other projects are named only when the viewer may see them (`apps.accounts.access`): holders a viewer may not see
are summed as "others", and cards kept by a project the viewer may not see are "held back by a project you cannot
see". An explanation therefore depends on the viewer: callers pass it, and pages that cache key by its scope.

`explain` is pure; `explain_workloads` gathers the facts for many workloads in a fixed number of queries. Callers
import from here; the modules are:

- `reasons`: the reason codes, what each means, their coarse kinds, Kueue's preemption reasons in words;
- `facts`: what `explain` takes (`WaitFacts`, with its `Share`s and `Peer`s) and gives (`Explanation`);
- `wording`: numbers, names and shares in words;
- `explainer`: `explain`, the first cause that applies;
- `gather`: `explain_workloads`, the facts of many workloads in a fixed number of queries;
- `probe`: the submit form's forecast, on a workload not submitted yet.
"""

from .explainer import explain, waits
from .facts import Explanation, Peer, PreemptionNote, Share, WaitFacts
from .gather import explain_workloads
from .probe import Forecast, explain_probe, forecast
from .reasons import (
    ADMISSION_CHECKS,
    ADMITTING,
    BEHIND,
    DEPARTMENT_LIMIT,
    GANG,
    HUMAN_PREEMPTION,
    INACTIVE,
    KINDS,
    MISCONFIGURED,
    NEVER_FITS,
    NO_QUOTA,
    NOT_LENDABLE,
    PENDING,
    POOL_FULL,
    PREEMPTED,
    PREEMPTING,
    PROJECT_DESERVED,
    PROJECT_LIMIT,
    QUEUE_STOPPED,
    QUOTA,
    REASONS,
    STOPPED_QUEUE,
    UNKNOWN,
    kueue_more_needed,
)

__all__ = [
    "ADMISSION_CHECKS",
    "ADMITTING",
    "BEHIND",
    "DEPARTMENT_LIMIT",
    "GANG",
    "HUMAN_PREEMPTION",
    "INACTIVE",
    "KINDS",
    "MISCONFIGURED",
    "NEVER_FITS",
    "NOT_LENDABLE",
    "NO_QUOTA",
    "PENDING",
    "POOL_FULL",
    "PREEMPTED",
    "PREEMPTING",
    "PROJECT_DESERVED",
    "PROJECT_LIMIT",
    "QUEUE_STOPPED",
    "QUOTA",
    "REASONS",
    "STOPPED_QUEUE",
    "UNKNOWN",
    "Explanation",
    "Forecast",
    "Peer",
    "PreemptionNote",
    "Share",
    "WaitFacts",
    "explain",
    "explain_probe",
    "explain_workloads",
    "forecast",
    "kueue_more_needed",
    "waits",
]
