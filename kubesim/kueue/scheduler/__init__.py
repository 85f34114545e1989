"""Kueue's scheduler as an importable library: no HTTP, no store, plain data in and decisions out.

snapshot = Snapshot.from_objects(resource_flavors=..., cohorts=..., cluster_queues=..., local_queues=...,
                                 workloads=..., config=KueueConfig.default(), now=now)
scheduler = Scheduler(config)                 # keeps the queue state (inadmissible sets) between cycles
result = scheduler.cycle(snapshot, now)       # one cycle: result.admitted / .preempted / .pending
results = scheduler.run(snapshot, now)        # cycles until nothing changes (what the emulator does)
starts = forecast(snapshot, runtime=lambda wl: 3600, now=now)   # estimated start per pending workload
"""

from kubesim.kueue.scheduler.forecast import forecast
from kubesim.kueue.scheduler.model import ClusterQueueNode, Snapshot, WorkloadInfo
from kubesim.kueue.scheduler.quota import DRS, CohortNode, dominant_resource_share
from kubesim.kueue.scheduler.scheduler import Admission, CycleResult, Pending, Preemption, Queues, Scheduler

__all__ = [
    "DRS",
    "Admission",
    "ClusterQueueNode",
    "CohortNode",
    "CycleResult",
    "Pending",
    "Preemption",
    "Queues",
    "Scheduler",
    "Snapshot",
    "WorkloadInfo",
    "dominant_resource_share",
    "forecast",
]
