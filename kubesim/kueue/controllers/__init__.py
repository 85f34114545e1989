"""Kueue's controllers on kubesim's store, one per module; they share one KueueState (per simulator), passed in.

| module | controller |
|---|---|
| `kubesim.kueue.integrations` | `JobReconciler` per enabled job kind (Workload, start, stop), `OrphanedWorkloads` |
| `workload.py` | `WorkloadController`: deactivation, backoff, waitForPodsReady, maximum execution time, HoldAndDrain |
| `scheduler.py` | `SchedulerController`: scheduling cycles and their writes |
| `admission_checks.py` | `AdmissionChecksController`: check states -> Admitted, eviction, deactivation |
| `provisioning.py` | `Provisioning` (run by the above): the ProvisioningRequest check, the autoscaler stand-in |
| `queue_status.py` | `StatusController`: ClusterQueue / LocalQueue / Cohort status |
| `in_use.py` | `InUseFinalizers`: resource-in-use finalizers |
| `priority_classes.py` | `PriorityClassController`: a WorkloadPriorityClass's value carried to its Workloads |
| `live_snapshot.py` | `LiveSnapshot`, the incrementally patched snapshot the scheduler and status controllers keep |
"""

from __future__ import annotations

from kubesim.kernel.protocols import Controller
from kubesim.kueue.controllers.admission_checks import AdmissionChecksController
from kubesim.kueue.controllers.in_use import InUseFinalizers
from kubesim.kueue.controllers.live_snapshot import LiveSnapshot
from kubesim.kueue.controllers.priority_classes import PriorityClassController
from kubesim.kueue.controllers.queue_status import StatusController
from kubesim.kueue.controllers.scheduler import SchedulerController
from kubesim.kueue.controllers.workload import WorkloadController, pods_ready_deadline
from kubesim.kueue.integrations import integration_controllers
from kubesim.kueue.state import KueueState


def kueue_controllers(state: KueueState) -> list[Controller]:
    """In Kueue's order: the job integrations, priority classes, Workload lifecycle, scheduler, admission checks, queue
    status, finalizers."""
    return [
        *integration_controllers(state),
        PriorityClassController(state),
        WorkloadController(state),
        SchedulerController(state),
        AdmissionChecksController(state),
        StatusController(state),
        InUseFinalizers(state),
    ]


__all__ = [
    "AdmissionChecksController",
    "InUseFinalizers",
    "LiveSnapshot",
    "PriorityClassController",
    "SchedulerController",
    "StatusController",
    "WorkloadController",
    "kueue_controllers",
    "pods_ready_deadline",
]
