"""Portal work on a KAI pool as the shared contract shapes it (a Job KAI schedules and its PodGroup), for the watcher's
tests: built here from the Kueue Job of worker/manifests.py until the submission side builds them itself."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from apps.core.kueue_names import KAI_NODE_POOL_LABEL, KAI_QUEUE_LABEL, names
from apps.org.models import NodePool, PriorityClass, Project
from apps.workloads.models import Kind, Status, Workload
from apps.workloads.services.claims import workload_mark_submitted
from tests.factories import WorkloadFactory
from worker.gateway import Gateway
from worker.manifests import job_manifest, job_name

KUEUE_PREFIX = "kueue.x-k8s.io/"


def kai_labels(workload: Workload) -> dict[str, str]:
    return {KAI_QUEUE_LABEL: names().kai_project_queue(workload.project.slug, workload.node_pool.slug),
            KAI_NODE_POOL_LABEL: workload.node_pool.slug}


def kai_job(workload: Workload) -> dict[str, Any]:
    """The Job: not suspended, no Kueue label, KAI's queue and pool labels; pods for kai-scheduler in the PodGroup,
    a fraction as KAI's annotation instead of a GPU request."""
    job = copy.deepcopy(job_manifest(workload))
    labels = {key: value for key, value in job["metadata"]["labels"].items() if not key.startswith(KUEUE_PREFIX)}
    job["metadata"]["labels"] = {**labels, **kai_labels(workload)}
    job["spec"]["suspend"] = False
    template = job["spec"]["template"]
    template["metadata"]["labels"] = {**template["metadata"]["labels"], **kai_labels(workload),
                                      "kai.scheduler/preemptibility": "preemptible" if workload.preemptible
                                      else "non-preemptible"}
    annotations = {"pod-group-name": job_name(workload)}
    template["spec"]["schedulerName"] = "kai-scheduler"
    template["spec"]["priorityClassName"] = workload.priority_class.name
    if workload.gpu_fraction is not None:
        annotations["gpu-fraction"] = str(workload.gpu_fraction.normalize())
        for container in template["spec"]["containers"]:
            for part in ("requests", "limits"):
                (container.get("resources") or {}).get(part, {}).pop(workload.node_pool.gpu_resource, None)
    template["metadata"]["annotations"] = annotations
    return job


def kai_pod_group(workload: Workload, job_uid: str) -> dict[str, Any]:
    """The PodGroup: the gang's size (a training's pods, else 1), queue, priority and preemptibility; owned by the
    Job."""
    labels = dict(kai_job(workload)["metadata"]["labels"])
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
        "metadata": {"name": job_name(workload), "namespace": workload.project.namespace, "labels": labels,
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name(workload),
                                          "uid": job_uid, "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"minMember": workload.pods if workload.kind == Kind.TRAINING else 1,
                 "queue": kai_labels(workload)[KAI_QUEUE_LABEL], "priorityClassName": workload.priority_class.name,
                 "preemptibility": "preemptible" if workload.preemptible else "non-preemptible"},
    }


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
    job = gateway.create(kai_job(workload))
    gateway.create(kai_pod_group(workload, job["metadata"]["uid"]))
    assert workload_mark_submitted(workload=workload, uid=job["metadata"]["uid"], manifest=job)
    return Workload.objects.get(pk=workload.pk)
