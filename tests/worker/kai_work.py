"""Portal work on a KAI pool for the watcher's tests: a row as a submission leaves it, and the Job KAI schedules and its
PodGroup created as the worker creates them (worker/manifests.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from apps.org.models import NodePool, PriorityClass, Project
from apps.workloads.models import Status, Workload
from apps.workloads.services.claims import workload_mark_submitted
from tests.factories import WorkloadFactory
from worker.gateway import Gateway
from worker.manifests import job_manifest, job_name, kai_pod_group


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
    """Create the Job and its PodGroup as the worker would, and record the submission."""
    job = gateway.create(job_manifest(workload))
    gateway.create(kai_pod_group(workload, job["metadata"]["uid"]))
    assert workload_mark_submitted(workload=workload, uid=job["metadata"]["uid"], manifest=job)
    return Workload.objects.get(pk=workload.pk)
