"""Kubernetes objects for a workload, as pure functions of the row (no I/O): what the submit task creates.

The Job is what Kueue's batch/job integration expects (DESIGN section 5): suspended, labelled with its LocalQueue
and WorkloadPriorityClass, GPU requests equal to limits in the pool's resource name. Its name derives from the
workload id, so a retried create answers 409 AlreadyExists instead of making a second Job.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from apps.core import kueue_names
from apps.core.kueue_names import (
    DATA_CLASS_LABEL,
    DEPARTMENT_LABEL,
    KIND_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MAX_EXEC_TIME_LABEL,
    MODEL_LABEL,
    NAME_ANNOTATION,
    OWNER_ANNOTATION,
    OWNER_ID_LABEL,
    POOL_LABEL,
    PRIORITY_CLASS_LABEL,
    PROJECT_LABEL,
    QUEUE_NAME_LABEL,
    REQUEST_ID_ANNOTATION,
    WORKLOAD_ID_LABEL,
)
from apps.workloads.models import Kind, Workload

CONTAINER_NAME = "main"
BATCH_BACKOFF_LIMIT = 2


def job_name(workload: Workload) -> str:
    return kueue_names.job_name(workload.pk)


def portal_labels(workload: Workload) -> dict[str, str]:
    """Who and what the work is: for selectors, audits and the GPU-hour ledger."""
    return {
        MANAGED_BY_LABEL: MANAGED_BY,
        WORKLOAD_ID_LABEL: str(workload.pk),
        PROJECT_LABEL: workload.project.slug,
        DEPARTMENT_LABEL: workload.project.department.slug,
        POOL_LABEL: workload.node_pool.slug,
        OWNER_ID_LABEL: str(workload.owner_id),
        KIND_LABEL: workload.kind,
        MODEL_LABEL: workload.model_label,
        DATA_CLASS_LABEL: workload.data_class,
    }


def _cpu(cores: Decimal) -> str:
    return f"{int(cores * 1000)}m"


def _memory(gib: Decimal) -> str:
    return f"{int(gib * 1024)}Mi"


def _container(workload: Workload) -> dict[str, Any]:
    gpu = {workload.node_pool.gpu_resource: str(workload.gpus)}
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": workload.image,
        "env": [
            {"name": "PORTAL_WORKLOAD_ID", "value": str(workload.pk)},
            {"name": "PORTAL_PROJECT", "value": workload.project.slug},
            *({"name": item["name"], "value": item["value"]} for item in workload.env),
        ],
        "resources": {
            "requests": {"cpu": _cpu(workload.cpu), "memory": _memory(workload.memory_gib), **gpu},
            "limits": {"memory": _memory(workload.memory_gib), **gpu},
        },
    }
    if workload.command:
        container["command"] = list(workload.command)
    if workload.args:
        container["args"] = list(workload.args)
    if workload.kind == Kind.NOTEBOOK:
        container["ports"] = [{"name": "http", "containerPort": workload.notebook_port or 8888, "protocol": "TCP"}]
    return container


def _counts(workload: Workload) -> dict[str, Any]:
    if workload.kind == Kind.TRAINING:
        spec: dict[str, Any] = {"parallelism": workload.pods, "completions": workload.pods, "backoffLimit": 0}
        if workload.pods > 1:
            spec["completionMode"] = "Indexed"  # one index per rank, admitted as one gang
        return spec
    if workload.kind == Kind.BATCH:
        return {"parallelism": workload.parallelism, "completions": workload.completions,
                "backoffLimit": BATCH_BACKOFF_LIMIT}
    return {"parallelism": 1, "completions": 1, "backoffLimit": 0}


def job_manifest(workload: Workload, *, request_id: str = "") -> dict[str, Any]:
    """The Job; `request_id`, when the submission came with one, is annotated so its log lines can be found."""
    labels = portal_labels(workload)
    job_labels = {
        **labels,
        QUEUE_NAME_LABEL: workload.queue_name,
        PRIORITY_CLASS_LABEL: workload.priority_class.name,
    }
    if workload.max_runtime_seconds:
        job_labels[MAX_EXEC_TIME_LABEL] = str(workload.max_runtime_seconds)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(workload),
            "namespace": workload.project.namespace,
            "labels": job_labels,
            "annotations": {OWNER_ANNOTATION: workload.owner.get_username(), NAME_ANNOTATION: workload.name,
                            **({REQUEST_ID_ANNOTATION: request_id} if request_id else {})},
        },
        "spec": {
            "suspend": True,  # Kueue starts it on admission
            **_counts(workload),
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 30,
                    "containers": [_container(workload)],
                },
            },
        },
    }


def notebook_service(workload: Workload, job_uid: str) -> dict[str, Any]:
    """A ClusterIP Service in front of the notebook pod, owned by the Job so it goes when the Job goes."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": job_name(workload),
            "namespace": workload.project.namespace,
            "labels": portal_labels(workload),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name(workload),
                                 "uid": job_uid, "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "type": "ClusterIP",
            "selector": {WORKLOAD_ID_LABEL: str(workload.pk)},
            "ports": [{"name": "http", "port": 80, "targetPort": workload.notebook_port or 8888, "protocol": "TCP"}],
        },
    }
