"""What the workloads app announces to the apps above it (the usage ledger listens).

The same mechanism as apps.org.signals (whose docstring explains it): declared here with its keyword arguments,
sent explicitly by the workloads services inside the transaction of the status change that caused it (so a
receiver's rows commit or roll back with it), connected only in the higher app's `AppConfig.ready()` with a
`dispatch_uid`. Receivers return nothing.
"""

from django.dispatch import Signal

quota_held = Signal()
"""A workload began holding quota at `at` (Kueue's admission time, on the cluster's clock), sent by the watcher's
observations. kwargs: `workload` (the Workload), `at` (datetime), `ended_at` (datetime or None: set when the
workload is already over, a stretch the watcher learnt of only after it ended), and `reason` (str, why it
ended). An inference service's stretches follow its ready replicas instead (quota_units_changed)."""

quotas_held = Signal()
"""Many workloads seen for the first time already holding (or having held) quota: the watcher's first sync of work
from outside the portal. kwargs: `stretches`, a list of (Workload, at, ended_at or None, reason), as quota_held's
per workload; the receiver writes them at once, one ledger recompute per project and pool."""

quota_units_changed = Signal()
"""A workload holds other units from `at` on, sent by the watcher as an inference service's ready replicas change
(docs/architecture.md, Inference services): one change, not a release and a hold, so that changes at one instant or
out of order count right. kwargs: `workload` (the Workload), `at` (datetime, on the cluster's clock), `units` (int:
the units now held, 0 for none), `reason` (str, why the stretch before ended)."""

quota_released = Signal()
"""A workload stopped holding quota: evicted, preempted, finished, stopped or its Job deleted, sent by the watcher
and by the recorded stop. kwargs: `workload_id` (int), `at` (datetime, on the cluster's clock when known), `reason`
(str)."""
