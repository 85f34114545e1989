"""Portal work on a KAI pool for the watcher's tests: a row as a submission leaves it, and what KAI schedules created as
the worker creates it (worker/manifests.py): a Job, or a gang's PodGroup and pods."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from apps.org.models import NodePool, PriorityClass, Project
from apps.workloads.models import Status, Workload
from apps.workloads.services.claims import workload_mark_submitted
from tests.factories import WorkloadFactory
from worker.gateway import Gateway
from worker.manifests import is_kai_gang, job_manifest, job_name, kai_gang_pod, kai_gang_pod_group


def kai_workload(owner: Any, *, project: str, pool: str = "rtx", gpus: int = 1, pods: int = 1, seconds: int = 600,
                 preemptible: bool = True, fraction: str | None = None, name: str = "run") -> Workload:
    """A portal training row on a KAI pool, as a submission leaves it (submitting, its job name set)."""
    workload = WorkloadFactory(
        project=Project.objects.get(slug=project), owner=owner, node_pool=NodePool.objects.get(slug=pool), name=name,
        gpus=gpus, pods=pods, command=["sleep", str(seconds)], preemptible=preemptible,
        priority_class=PriorityClass.objects.get(name="train" if preemptible else "build"),
        gpu_fraction=Decimal(fraction) if fraction else None, status=Status.SUBMITTING)
    workload.job_name = job_name(workload)
    workload.save(update_fields=["job_name"])
    return workload


def submit_kai(gateway: Gateway, workload: Workload) -> Workload:
    """Create the Job (or the gang's PodGroup and then its pods) as the worker would, and record the submission."""
    if is_kai_gang(workload):
        created = gateway.create(kai_gang_pod_group(workload))
        for index in range(workload.pods):
            gateway.create(kai_gang_pod(workload, index))
    else:
        created = gateway.create(job_manifest(workload))
    assert workload_mark_submitted(workload=workload, uid=created["metadata"]["uid"], manifest=created)
    return Workload.objects.get(pk=workload.pk)
