"""Kubernetes objects for a workload, as pure functions of the row (no I/O): what the submit task creates.

The Job is what Kueue's batch/job integration expects (docs/architecture.md, The life of a submission): suspended,
labelled with its LocalQueue and WorkloadPriorityClass, GPU requests equal to limits in the pool's resource name. Its
name derives from the workload id, so a retried create answers 409 AlreadyExists instead of making a second Job.

On a KAI pool (README, Kueue and KAI in one cluster) the Job is not suspended and names no Kueue queue: it and its
pods carry what KAI's pod-grouper copies into the PodGroup it makes for each of the Job's pods (leaf Queue, node pool,
preemptibility, priority class); a fraction of a GPU is KAI's gpu-fraction annotation instead of a GPU request. A
runtime limit is the Job's activeDeadlineSeconds. KAI (v0.20.1) gangs no Job's pods, so a multi-pod training there is
no Job: the portal's PodGroup (minMember = its pods) and one ownerless Pod per rank annotated with it, which KAI's
grouper leaves in that PodGroup (`kai_gang_pod_group`, `kai_gang_pod`; the portal is their controller: worker/tasks.py,
kai_gang_repair).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings

from apps.core import kueue_names
from apps.core.kueue_names import (
    KAI_GPU_FRACTION_ANNOTATION,
    KAI_NODE_POOL_LABEL,
    KAI_NON_PREEMPTIBLE,
    KAI_POD_GROUP_ANNOTATION,
    KAI_POD_GROUP_API_VERSION,
    KAI_PREEMPTIBILITY_LABEL,
    KAI_PREEMPTIBLE,
    KAI_PRIORITY_CLASS_LABEL,
    KAI_QUEUE_LABEL,
    KAI_SCHEDULER_NAME,
    MAX_EXEC_TIME_LABEL,
    NAME_ANNOTATION,
    OWNER_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    REQUEST_ID_ANNOTATION,
    WORKLOAD_ID_LABEL,
)
from apps.org.models import DataSource, ImagePullSecret
from apps.workloads import notebooks
from apps.workloads.manifests import portal_labels
from apps.workloads.models import Credential, Kind, Workload
from apps.workloads.services.inference import LEADERWORKERSET_API_VERSION
from apps.workloads.validation import SHM_PATH

CONTAINER_NAME = "main"
BATCH_BACKOFF_LIMIT = 2
MASTER_PORT = 29500  # torchrun's default rendezvous port
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
SHM_VOLUME = "dshm"


@dataclass(frozen=True)
class Attachments:
    """What the pods mount and read besides the image: the workload's data sources and credentials, and the
    project's image pull secrets (read by the submit task, so the manifest functions stay pure)."""

    data_sources: list[DataSource] = field(default_factory=list)
    credentials: list[Credential] = field(default_factory=list)
    pull_secrets: list[ImagePullSecret] = field(default_factory=list)


def attachments_of(workload: Workload) -> Attachments:
    return Attachments(
        data_sources=list(workload.data_sources.order_by("name")),
        credentials=list(workload.credentials.order_by("name")),
        pull_secrets=list(ImagePullSecret.objects.filter(project_id=workload.project_id, deleted_at=None)
                          .order_by("name")),
    )


def is_distributed(workload: Workload) -> bool:
    """A gang the portal wires itself (an Indexed Job and its headless Service); a framework's operator wires its
    own (worker/frameworks.py)."""
    return workload.kind == Kind.TRAINING and workload.pods > 1 and not workload.runs_on_framework


def job_name(workload: Workload) -> str:
    return kueue_names.job_name(workload.pk)


def _cpu(cores: Decimal) -> str:
    return f"{int(cores * 1000)}m"


def _memory(gib: Decimal) -> str:
    return f"{int(gib * 1024)}Mi"


def is_kai_gang(workload: Workload) -> bool:
    """A gang on a KAI pool: the portal's PodGroup and ownerless Pods instead of an Indexed Job."""
    return workload.kai_gang


def _launcher_env(workload: Workload, index: int | None = None) -> list[dict[str, Any]]:
    """What torchrun and similar launchers read: rank 0 is pod 0 of the Indexed Job (or of a KAI gang, whose pods
    know their `index`), found by its stable hostname under the headless Service; one node per pod, one process per
    GPU."""
    name = job_name(workload)
    rank: dict[str, Any] = ({"value": str(index)} if index is not None
                            else {"valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}})
    return [
        {"name": "MASTER_ADDR", "value": f"{name}-0.{name}"},
        {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
        {"name": "WORLD_SIZE", "value": str(workload.pods)},
        {"name": "NNODES", "value": str(workload.pods)},
        {"name": "NPROC_PER_NODE", "value": str(workload.gpus)},
        {"name": "RANK", **rank},
        {"name": "NODE_RANK", **rank},
    ]


def _volume_name(source: DataSource) -> str:
    return f"data-{source.name}"[:63]


def volumes_of(workload: Workload, attachments: Attachments) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, container mounts): the data sources, and /dev/shm as memory when a size is asked for."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for source in attachments.data_sources:
        if source.kind == DataSource.Kind.NFS:
            volume = {"nfs": {"server": source.nfs_server, "path": source.nfs_path, "readOnly": source.read_only}}
        else:
            volume = {"persistentVolumeClaim": {"claimName": source.claim_name, "readOnly": source.read_only}}
        volumes.append({"name": _volume_name(source), **volume})
        mounts.append({"name": _volume_name(source), "mountPath": source.mount_path, "readOnly": source.read_only})
    if workload.shm_gib:
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": _memory(workload.shm_gib)}})
        mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})
    return volumes, mounts


def main_container(workload: Workload, attachments: Attachments, mounts: list[dict[str, Any]],
                   index: int | None = None) -> dict[str, Any]:
    # A fraction of a GPU is asked for by KAI's annotation on the pod (kai_pod_annotations), never as a resource.
    gpu = {} if workload.gpu_fraction is not None else {workload.node_pool.gpu_resource: str(workload.gpus)}
    own_env = [{"name": item["name"], "value": item["value"]} for item in workload.env]
    if workload.kind == Kind.NOTEBOOK:
        own_env.append({"name": notebooks.TOKEN_ENV, "valueFrom": {"secretKeyRef": {
            "name": notebooks.token_secret_name(workload.pk), "key": notebooks.TOKEN_KEY}}})
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": workload.image,
        "env": [
            {"name": "PORTAL_WORKLOAD_ID", "value": str(workload.pk)},
            {"name": "PORTAL_PROJECT", "value": workload.project.slug},
            *(_launcher_env(workload, index) if is_distributed(workload) else []),
            *own_env,
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
    if attachments.credentials:
        # By reference: the values live only in the Secrets, never in the Job.
        container["envFrom"] = [{"secretRef": {"name": credential.secret_name}} for credential in
                                attachments.credentials]
    if mounts:
        container["volumeMounts"] = mounts
    if workload.kind == Kind.NOTEBOOK:
        container["ports"] = [{"name": notebooks.PORT_NAME, "containerPort": workload.notebook_port or 8888,
                               "protocol": "TCP"}]
    elif is_distributed(workload):
        container["ports"] = [{"name": "rendezvous", "containerPort": MASTER_PORT, "protocol": "TCP"}]
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


def pod_spec(workload: Workload, attachments: Attachments, index: int | None = None) -> dict[str, Any]:
    """The pods' spec; `index` for a pod of a KAI gang, which has no Job to name its hostname after its index."""
    volumes, mounts = volumes_of(workload, attachments)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "containers": [main_container(workload, attachments, mounts, index)],
    }
    if volumes:
        spec["volumes"] = volumes
    if attachments.pull_secrets:
        spec["imagePullSecrets"] = [{"name": secret.secret_name} for secret in attachments.pull_secrets]
    if is_distributed(workload):
        spec["subdomain"] = job_name(workload)  # pods are <job>-<index>.<job>: the headless Service's names
        if index is not None:
            spec["hostname"] = gang_pod_name(workload, index)
    return spec


def kai_labels(workload: Workload) -> dict[str, str]:
    """The portal's labels and what KAI Scheduler reads on a KAI pool's work, which its pod-grouper copies from the
    top owner (the Job) into the PodGroups it makes: the leaf Queue of the project on the pool
    (worker/kai_objects.py), the pool (KAI's scheduling shard), the preemptibility and the priority class."""
    priority_class = workload.priority_class
    if priority_class is None:
        raise ValueError("only the portal's own submissions have a manifest")
    return {**portal_labels(workload), KAI_QUEUE_LABEL: workload.kai_queue_name,
            KAI_NODE_POOL_LABEL: workload.node_pool.slug, KAI_PREEMPTIBILITY_LABEL: kai_preemptibility(workload),
            KAI_PRIORITY_CLASS_LABEL: priority_class.name}


def kai_preemptibility(workload: Workload) -> str:
    return KAI_PREEMPTIBLE if workload.preemptible else KAI_NON_PREEMPTIBLE


def object_metadata(workload: Workload, *, request_id: str = "") -> dict[str, Any]:
    """The metadata of the object Kueue queues for a workload (its Job, or its framework's object): the
    deterministic name, the queue, priority and runtime labels Kueue reads, the portal's own labels; `request_id`,
    when the submission came with one, is annotated so its log lines can be found. On a KAI pool: no Kueue label,
    KAI's queue and node-pool labels instead."""
    owner, priority_class = workload.owner, workload.priority_class
    if owner is None or priority_class is None:
        raise ValueError("only the portal's own submissions have a manifest")
    if workload.node_pool.kai:
        labels = kai_labels(workload)
    else:
        labels = {**portal_labels(workload), QUEUE_NAME_LABEL: workload.queue_name,
                  PRIORITY_CLASS_LABEL: priority_class.name}
        if workload.max_runtime_seconds:
            labels[MAX_EXEC_TIME_LABEL] = str(workload.max_runtime_seconds)
    return {
        "name": job_name(workload),
        "namespace": workload.project.namespace,
        "labels": labels,
        "annotations": {OWNER_ANNOTATION: owner.get_username(), NAME_ANNOTATION: workload.name,
                        **({REQUEST_ID_ANNOTATION: request_id} if request_id else {})},
    }


def job_manifest(workload: Workload, *, request_id: str = "", attachments: Attachments | None = None) -> dict[str, Any]:
    """The Job: for Kueue, or for KAI Scheduler on a KAI pool (`kai_job_manifest`)."""
    attachments = attachments or Attachments()
    if workload.node_pool.kai:
        return kai_job_manifest(workload, request_id=request_id, attachments=attachments)
    labels = portal_labels(workload)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_metadata(workload, request_id=request_id),
        "spec": {
            "suspend": True,  # Kueue starts it on admission
            **_counts(workload),
            "template": {
                "metadata": {"labels": labels},
                "spec": pod_spec(workload, attachments),
            },
        },
    }


def kai_pod_annotations(workload: Workload) -> dict[str, str]:
    """The share of one GPU a fractional pod asks for."""
    if workload.gpu_fraction is None:
        return {}
    return {KAI_GPU_FRACTION_ANNOTATION: format(workload.gpu_fraction.normalize(), "f")}


# A pod KAI Scheduler evicts (reclaim, preemption) is marked DisruptionTarget before it is deleted; without this rule
# the Job counts it as a failed pod, and with a backoffLimit of 0 a preempted training would fail instead of waiting
# again (Kueue suspends its Jobs instead, so their pods never count). Kubernetes' own advice for preemptible Jobs.
EVICTIONS_NOT_FAILURES = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                                             "status": "True"}]}]}


def _kai_pod_spec(workload: Workload, attachments: Attachments, index: int | None = None) -> dict[str, Any]:
    """A pod spec for KAI Scheduler: its scheduler and priority class, placed on the pool's nodes and tolerating
    their taints (KAI injects neither)."""
    priority_class = workload.priority_class
    if priority_class is None:
        raise ValueError("only the portal's own submissions have a manifest")
    spec = pod_spec(workload, attachments, index)
    spec["schedulerName"] = KAI_SCHEDULER_NAME
    spec["priorityClassName"] = priority_class.name
    pool = workload.node_pool
    if pool.node_labels:
        spec["nodeSelector"] = dict(pool.node_labels)
    if pool.node_taints:
        spec["tolerations"] = [{"key": taint["key"], "operator": "Equal", "value": taint.get("value", ""),
                                "effect": taint["effect"]} for taint in pool.node_taints]
    return spec


def kai_job_manifest(workload: Workload, *, request_id: str = "",
                     attachments: Attachments | None = None) -> dict[str, Any]:
    """The Job of work on a KAI pool: not suspended (KAI Scheduler binds its pods; nothing would unsuspend it),
    labelled (it and its pods) with what KAI's pod-grouper copies into each pod's PodGroup, and no PodGroup of its
    own: the grouper makes one per pod and names it on the pod (minMember 1: right for a notebook or a one-pod
    training, and for a batch run, whose pods come and go one by one). Stopped after the runtime limit by
    Kubernetes' activeDeadlineSeconds (Kueue's label has no effect without Kueue); its evicted pods replaced, not
    failed."""
    if is_kai_gang(workload):
        raise ValueError("a gang on a KAI pool is a PodGroup and its pods, not a Job (kai_gang_pod_group)")
    job_spec: dict[str, Any] = {"suspend": False, **_counts(workload), "podFailurePolicy": EVICTIONS_NOT_FAILURES}
    if workload.max_runtime_seconds:
        job_spec["activeDeadlineSeconds"] = workload.max_runtime_seconds
    template_metadata: dict[str, Any] = {"labels": kai_labels(workload)}
    if annotations := kai_pod_annotations(workload):
        template_metadata["annotations"] = annotations
    job_spec["template"] = {"metadata": template_metadata,
                            "spec": _kai_pod_spec(workload, attachments or Attachments())}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": object_metadata(workload, request_id=request_id),
            "spec": job_spec}


def kai_gang_pod_group(workload: Workload, *, request_id: str = "") -> dict[str, Any]:
    """The PodGroup of a gang on a KAI pool, named like the Job it replaces and owned by nothing (the portal deletes
    it at the stop): minMember is every pod (KAI starts them together or not at all), with the leaf Queue, priority
    class and preemptibility KAI schedules it by."""
    priority_class = workload.priority_class
    if priority_class is None:
        raise ValueError("only the portal's own submissions have a manifest")
    return {
        "apiVersion": KAI_POD_GROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": object_metadata(workload, request_id=request_id),
        "spec": {"minMember": workload.pods, "queue": workload.kai_queue_name,
                 "priorityClassName": priority_class.name, "preemptibility": kai_preemptibility(workload)},
    }


def gang_pod_name(workload: Workload, index: int) -> str:
    """<job>-<index>: the pod of one rank, its hostname under the headless Service as an Indexed Job's would be."""
    return f"{job_name(workload)}-{index}"


def kai_gang_pod(workload: Workload, index: int, *, request_id: str = "",
                 attachments: Attachments | None = None) -> dict[str, Any]:
    """One rank of a gang on a KAI pool: an ownerless Pod annotated with the gang's PodGroup, which KAI's grouper
    keeps only on a pod without owners (so the portal, not a Job, is its controller: worker/tasks.py,
    kai_gang_repair). Never restarted; stopped by the kubelet after the runtime limit (activeDeadlineSeconds)."""
    metadata = object_metadata(workload, request_id=request_id)
    metadata["name"] = gang_pod_name(workload, index)
    metadata["annotations"] = {**metadata["annotations"], KAI_POD_GROUP_ANNOTATION: job_name(workload)}
    spec = _kai_pod_spec(workload, attachments or Attachments(), index)
    if workload.max_runtime_seconds:
        spec["activeDeadlineSeconds"] = workload.max_runtime_seconds
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _owned_by(workload: Workload, owner_uid: str) -> list[dict[str, Any]]:
    """Owned by what runs the workload (its Job, or a KAI gang's PodGroup), so they go when it goes."""
    api_version, kind = (KAI_POD_GROUP_API_VERSION, "PodGroup") if is_kai_gang(workload) else ("batch/v1", "Job")
    return [{"apiVersion": api_version, "kind": kind, "name": job_name(workload), "uid": owner_uid,
             "controller": True, "blockOwnerDeletion": True}]


def _metadata(workload: Workload, owner_uid: str, name: str | None = None) -> dict[str, Any]:
    return {"name": name or job_name(workload), "namespace": workload.project.namespace,
            "labels": portal_labels(workload), "ownerReferences": _owned_by(workload, owner_uid)}


def notebook_service(workload: Workload, job_uid: str) -> dict[str, Any]:
    """A ClusterIP Service in front of the notebook pod."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(workload, job_uid),
        "spec": {
            "type": "ClusterIP",
            "selector": {WORKLOAD_ID_LABEL: str(workload.pk)},
            "ports": [{"name": notebooks.PORT_NAME, "port": notebooks.SERVICE_PORT,
                       "targetPort": workload.notebook_port or 8888, "protocol": "TCP"}],
        },
    }


def notebook_token_secret(workload: Workload, job_uid: str) -> dict[str, Any]:
    """The notebook's token, which its container reads by reference (never written into the Job)."""
    value = base64.b64encode(notebooks.token(workload.pk).encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(workload, job_uid, notebooks.token_secret_name(workload.pk)),
        "type": "Opaque",
        "data": {notebooks.TOKEN_KEY: value},
    }


def _ingress(metadata: dict[str, Any], *, host: str, service: str, port_name: str, tls_secret: str) -> dict[str, Any]:
    """networking.k8s.io/v1 Ingress: every path of `host` to the named port of `service`."""
    spec: dict[str, Any] = {
        "rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
            "service": {"name": service, "port": {"name": port_name}}}}]}}],
    }
    if settings.NOTEBOOK_INGRESS_CLASS:
        spec["ingressClassName"] = settings.NOTEBOOK_INGRESS_CLASS
    if tls_secret:
        spec["tls"] = [{"hosts": [host], "secretName": tls_secret}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata, "spec": spec}


def _http_route(metadata: dict[str, Any], *, host: str, service: str, port: int) -> dict[str, Any]:
    """Gateway API HTTPRoute attached to settings.NOTEBOOK_GATEWAY ("<namespace>/<name>"): every path of `host` to
    `port` of `service`."""
    gateway_namespace, _, gateway_name = settings.NOTEBOOK_GATEWAY.rpartition("/")
    parent: dict[str, Any] = {"name": gateway_name}
    if gateway_namespace:
        parent["namespace"] = gateway_namespace
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": metadata,
        "spec": {
            "parentRefs": [parent],
            "hostnames": [host],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                       "backendRefs": [{"name": service, "port": port}]}],
        },
    }


def notebook_ingress(workload: Workload, job_uid: str) -> dict[str, Any]:
    """<job>.<NOTEBOOK_BASE_DOMAIN> to the notebook's Service."""
    return _ingress(_metadata(workload, job_uid), host=notebooks.host(workload.pk), service=job_name(workload),
                    port_name=notebooks.PORT_NAME, tls_secret=settings.NOTEBOOK_TLS_SECRET)


def notebook_http_route(workload: Workload, job_uid: str) -> dict[str, Any]:
    """<job>.<NOTEBOOK_BASE_DOMAIN> to the notebook's Service, through the notebooks' Gateway."""
    return _http_route(_metadata(workload, job_uid), host=notebooks.host(workload.pk), service=job_name(workload),
                       port=notebooks.SERVICE_PORT)


def rendezvous_service(workload: Workload, job_uid: str) -> dict[str, Any]:
    """The headless Service that gives each pod of a distributed training job its stable DNS name
    (<job>-<index>.<job>), published before the pods are ready so rank 0 is found while the gang starts."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(workload, job_uid),
        "spec": {
            "clusterIP": "None",
            "selector": {WORKLOAD_ID_LABEL: str(workload.pk)},
            "publishNotReadyAddresses": True,
            "ports": [{"name": "rendezvous", "port": MASTER_PORT, "targetPort": MASTER_PORT, "protocol": "TCP"}],
        },
    }


def companions(workload: Workload, job_uid: str) -> list[dict[str, Any]]:
    """Every object the Job (or a KAI gang's PodGroup, whose uid `job_uid` then is) needs beside it, in the order
    they are created."""
    objects: list[dict[str, Any]] = []
    if workload.kind == Kind.NOTEBOOK:
        objects += [notebook_token_secret(workload, job_uid), notebook_service(workload, job_uid)]
        if settings.NOTEBOOK_EXPOSE == "ingress":
            objects.append(notebook_ingress(workload, job_uid))
        elif settings.NOTEBOOK_EXPOSE == "httproute":
            objects.append(notebook_http_route(workload, job_uid))
    elif is_distributed(workload):
        objects.append(rendezvous_service(workload, job_uid))
    return objects


def user_secret(*, name: str, namespace: str, values: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
    """A credential's Secret: Opaque, its keys as given (read by workloads through envFrom)."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace,
                                                                "labels": labels},
            "type": "Opaque", "data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}}


def pull_secret(*, name: str, namespace: str, registry: str, username: str, password: str,
                labels: dict[str, str]) -> dict[str, Any]:
    """A kubernetes.io/dockerconfigjson Secret, the shape kubelets read imagePullSecrets in."""
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    config = {"auths": {registry: {"username": username, "password": password, "auth": auth}}}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace,
                                                                "labels": labels},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()}}


INFERENCE_PORT_NAME = "http"
INFERENCE_SERVICE_PORT = 80


LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"  # LWS sets it on every pod: "0" on leaders


def _inference_template(workload: Workload, attachments: Attachments) -> dict[str, Any]:
    """The pod template of every replica's pods: no Kueue queue-name label (a serving pool has no queue), so Kueue
    never holds or preempts them; placed on the pool by its node labels and tolerations, which Kueue would otherwise
    inject."""
    volumes, mounts = volumes_of(workload, attachments)
    container = main_container(workload, attachments, mounts)
    container["ports"] = [{"name": INFERENCE_PORT_NAME, "containerPort": workload.serving_port or 8000,
                           "protocol": "TCP"}]
    pool = workload.node_pool
    pod: dict[str, Any] = {"restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "containers": [container]}
    if pool.node_labels:
        pod["nodeSelector"] = dict(pool.node_labels)
    if pool.node_taints:
        pod["tolerations"] = [{"key": taint["key"], "operator": "Equal", "value": taint.get("value", ""),
                               "effect": taint["effect"]} for taint in pool.node_taints]
    if volumes:
        pod["volumes"] = volumes
    if attachments.pull_secrets:
        pod["imagePullSecrets"] = [{"name": secret.secret_name} for secret in attachments.pull_secrets]
    return {"metadata": {"labels": portal_labels(workload)}, "spec": pod}


def _inference_metadata(workload: Workload, request_id: str) -> dict[str, Any]:
    owner = workload.owner
    if owner is None:
        raise ValueError("only the portal's own inference services have a manifest")
    return {"name": job_name(workload), "namespace": workload.project.namespace, "labels": portal_labels(workload),
            "annotations": {OWNER_ANNOTATION: owner.get_username(), NAME_ANNOTATION: workload.name,
                            **({REQUEST_ID_ANNOTATION: request_id} if request_id else {})}}


def is_multi_node(workload: Workload) -> bool:
    """Whether the service's replicas are LeaderWorkerSet groups (recorded at submit, by `pods`)."""
    return workload.object_api_version == LEADERWORKERSET_API_VERSION


def inference_object(workload: Workload, *, request_id: str = "",
                     attachments: Attachments | None = None) -> dict[str, Any]:
    """What runs an inference service's replicas: a Deployment, or a LeaderWorkerSet when a replica is several
    pods."""
    build = inference_leaderworkerset if is_multi_node(workload) else inference_deployment
    return build(workload, request_id=request_id, attachments=attachments)


def inference_deployment(workload: Workload, *, request_id: str = "",
                         attachments: Attachments | None = None) -> dict[str, Any]:
    """An inference service's Deployment. A rollout replaces one replica at a time without a surge (maxSurge 0): the
    project's reservation has no room for an extra replica's GPUs (docs/architecture.md, Inference services)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _inference_metadata(workload, request_id),
        "spec": {
            "replicas": workload.replicas,
            "selector": {"matchLabels": {WORKLOAD_ID_LABEL: str(workload.pk)}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": _inference_template(workload, attachments or Attachments()),
        },
    }


def inference_leaderworkerset(workload: Workload, *, request_id: str = "",
                              attachments: Attachments | None = None) -> dict[str, Any]:
    """A multi-node inference service's LeaderWorkerSet: `replicas` groups of `pods` pods (a leader and its
    workers, one template for both), rolled a group at a time without a surge, as the Deployment; the workers are
    created once their leader exists (startupPolicy LeaderCreated). No queue-name label: Kueue's LWS integration
    leaves an LWS that names no queue alone."""
    return {
        "apiVersion": LEADERWORKERSET_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": _inference_metadata(workload, request_id),
        "spec": {
            "replicas": workload.replicas,
            "leaderWorkerTemplate": {"size": workload.pods,
                                     "workerTemplate": _inference_template(workload, attachments or Attachments())},
            "rolloutStrategy": {"type": "RollingUpdate",
                                "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1}},
            "startupPolicy": "LeaderCreated",
        },
    }


def _owned_by_deployment(workload: Workload, deployment_uid: str) -> dict[str, Any]:
    """Metadata of an object beside an inference service's Deployment (or LeaderWorkerSet), owned by it (it goes
    when that goes)."""
    api_version, kind = ((LEADERWORKERSET_API_VERSION, "LeaderWorkerSet") if is_multi_node(workload)
                         else ("apps/v1", "Deployment"))
    return {"name": job_name(workload), "namespace": workload.project.namespace, "labels": portal_labels(workload),
            "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": job_name(workload),
                                 "uid": deployment_uid, "controller": True, "blockOwnerDeletion": True}]}


def inference_service(workload: Workload, deployment_uid: str) -> dict[str, Any]:
    """The ClusterIP Service in front of the replicas, owned by the Deployment; the portal's proxy, or the Ingress
    or HTTPRoute, reaches the model server through it. A LeaderWorkerSet's requests go to its groups' leaders only:
    a worker serves its leader, not clients."""
    selector = {WORKLOAD_ID_LABEL: str(workload.pk)}
    if is_multi_node(workload):
        selector[LWS_WORKER_INDEX_LABEL] = "0"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _owned_by_deployment(workload, deployment_uid),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": INFERENCE_PORT_NAME, "port": INFERENCE_SERVICE_PORT,
                       "targetPort": workload.serving_port or 8000, "protocol": "TCP"}],
        },
    }


def inference_companions(workload: Workload, deployment_uid: str) -> list[dict[str, Any]]:
    """What an inference service needs beside its Deployment, in the order they are created: its Service, and with
    INFERENCE_EXPOSE ingress or httproute the route publishing it at <job>.<INFERENCE_BASE_DOMAIN>."""
    objects = [inference_service(workload, deployment_uid)]
    host, service = notebooks.inference_host(workload.pk), job_name(workload)
    if settings.INFERENCE_EXPOSE == "ingress":
        objects.append(_ingress(_owned_by_deployment(workload, deployment_uid), host=host, service=service,
                                port_name=INFERENCE_PORT_NAME, tls_secret=settings.INFERENCE_TLS_SECRET))
    elif settings.INFERENCE_EXPOSE == "httproute":
        objects.append(_http_route(_owned_by_deployment(workload, deployment_uid), host=host, service=service,
                                   port=INFERENCE_SERVICE_PORT))
    return objects


def inference_patch(workload: Workload, *, attachments: Attachments | None = None) -> dict[str, Any]:
    """The merge patch that brings the Deployment (or LeaderWorkerSet) to the row's replicas and image (a new image
    starts a rollout). The whole pod template is sent: a merge patch replaces a list such as the containers whole."""
    spec = inference_object(workload, attachments=attachments)["spec"]
    if is_multi_node(workload):
        return {"spec": {"replicas": spec["replicas"], "leaderWorkerTemplate": {
            "workerTemplate": spec["leaderWorkerTemplate"]["workerTemplate"]}}}
    return {"spec": {"replicas": spec["replicas"], "template": spec["template"]}}
