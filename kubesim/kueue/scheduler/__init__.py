"""Kueue's scheduler as an importable library: no HTTP, no store, plain data in and decisions out.

snapshot = Snapshot.from_objects(resource_flavors=..., cohorts=..., cluster_queues=..., local_queues=...,
                                 workloads=..., config=KueueConfig.default(), now=now)
results = Scheduler().run(snapshot, Queues(), now)   # or .cycle(...) for one scheduling cycle
"""

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
]
