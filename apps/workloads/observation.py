"""What the watcher saw of one workload in the cluster, as the workloads state machine takes it.

The watcher builds an `Observation` from the Job and Kueue's Workload (`worker/status_map.py`: Kueue's conditions ->
the portal's status), or on a KAI pool from the Job, its PodGroup and its pods (`worker/kai_status.py`);
`services.workload_observe` records it. `OutsideWork` is a Kueue Workload submitted outside
the portal (`services.workload_mirror_outside`), `Unmapped` one it cannot mirror. They live here, below the worker,
because apps never import the worker. Plain values, no ORM: every time is the cluster's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .models import REASON_LENGTH, Status


@dataclass(frozen=True)
class Preemption:
    """The workload's latest preemption as Kueue's Preempted condition tells it, with its preemptor's identities."""

    at: datetime
    reason: str  # Kueue's preemption reason (apps.core.kueue_conditions: IN_CLUSTER_QUEUE, ...)
    message: str
    preemptor_workload_uid: str  # the preemptor's Kueue Workload
    preemptor_job_uid: str  # the preemptor's Job: how the portal finds which of its workloads it is


@dataclass(frozen=True)
class Observation:
    """The status the portal should record now, with what Kueue says about the workload beside it."""

    status: Status
    reason: str = ""
    message: str = ""
    at: datetime | None = None  # when the cluster says the current state began
    cluster_queue: str = ""
    admission: dict[str, Any] = field(default_factory=dict)  # pod sets' flavors and usage; admission checks
    admitted_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    preemption: Preemption | None = None
    conditions: list[dict[str, Any]] = field(default_factory=list)  # Kueue's Workload conditions, as the API has them
    kueue_name: str = ""  # Kueue's Workload; empty when it is gone
    deleted_at: datetime | None = None  # the Job is being deleted (its deletionTimestamp: the cluster's time)
    job_uid: str = ""
    # Work on a KAI pool: its leaf Queue (the PodGroup's spec.queue); `conditions` then hold the PodGroup's scheduling
    # conditions, and `kueue_name` stays empty (worker/kai_status.py).
    kai_queue: str = ""

    def __post_init__(self) -> None:
        # What the portal keeps of the cluster's reason (a condition reason may run to 1,024 characters), cut once here
        # so every record of it and every comparison with a recorded one agree.
        object.__setattr__(self, "reason", self.reason[:REASON_LENGTH])


@dataclass(frozen=True)
class PodSet:
    """One pod set of a Kueue Workload: its pods and what each asks for (resource name -> quantity as written)."""

    name: str
    count: int
    requests: dict[str, str] = field(default_factory=dict)
    image: str = ""


@dataclass(frozen=True)
class OutsideWork:
    """A Kueue Workload the portal did not submit, as the watcher read it with the object it belongs to: what the
    portal needs to mirror it as a workload of a project (services.workload_mirror_outside)."""

    kueue_uid: str
    kueue_name: str
    namespace: str
    queue_name: str  # the LocalQueue (spec.queueName); empty when it has none
    kind: str  # a models.Kind value
    object_api_version: str
    object_name: str
    pod_sets: tuple[PodSet, ...]
    priority_class: str = ""  # a WorkloadPriorityClass name, when Kueue's priority comes from one
    priority: int | None = None  # spec.priority, as Kueue set it
    max_runtime_seconds: int | None = None  # spec.maximumExecutionTimeSeconds (the kueue max-exec-time label)
    object_uid: str = ""  # the owner object's uid (what Kueue's preemption messages name as the JobUID)
    created_at: datetime | None = None
    portal_user: str = ""  # the portal username the object names (label), if any
    cluster_user: str = ""  # the Kubernetes user the cluster stamped at admission (annotation), if any
    manager: str = ""  # the field manager that created the object (kubectl-create, a controller...)


@dataclass(frozen=True)
class Unmapped:
    """A Kueue Workload (or GPU pods) the portal cannot mirror, and why: shown to admins, never half-written."""

    uid: str
    namespace: str
    name: str
    reason: str  # apps.cluster.models.UnmappedWork.Reason value
    detail: str = ""
    object_kind: str = ""
    gpus: int = 0


@dataclass(frozen=True)
class ClusterEvent:
    """A Kubernetes Event about an object of a project namespace (a pod, a Job or another owner, Kueue's Workload),
    as `services.workload_cluster_events_record` takes it: the Event's own uid and counts, the cluster's times."""

    uid: str
    namespace: str
    object_kind: str
    object_name: str
    type: str  # Normal or Warning
    reason: str
    message: str
    source: str  # the reporting component
    count: int
    first_seen: datetime
    last_seen: datetime
