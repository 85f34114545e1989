"""What the workloads app announces to the apps above it (the usage ledger listens), sent inside the transition's
own transaction so a listener's rows commit or roll back with it."""

from django.dispatch import Signal

# A workload began holding quota at `at` (Kueue's admission time); `ended_at` when it is already over.
# kwargs: workload, at, ended_at=None, reason=""
quota_held = Signal()
# A workload stopped holding quota. kwargs: workload_id, at, reason
quota_released = Signal()
