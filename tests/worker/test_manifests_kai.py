"""The Job and PodGroup of work on a KAI pool (README, Kueue and KAI in one cluster): exactly the labels and
annotations KAI Scheduler reads, no Kueue label, every field one the schemas know (batch/v1 as the official client's
models define it, the PodGroup against KAI's vendored CRD, strictly)."""

from decimal import Decimal

import pytest

from apps.org.models import NodePool, PriorityClass
from apps.workloads.models import Kind
from tests.crd_schemas import validate_kai_object
from tests.k8s_fields import unknown_fields
from worker.manifests import companions, job_manifest, kai_pod_group

from .test_manifests import make

PORTAL_LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "portal.gpu/workload-id": "42",
                 "portal.gpu/project": "vision", "portal.gpu/department": "research", "portal.gpu/pool": "rtx",
                 "portal.gpu/owner-id": "7", "portal.gpu/model": "resnet50", "portal.gpu/data-class": "public"}
KAI_LABELS = {"kai.scheduler/queue": "proj-vision-rtx", "kai.scheduler/node-pool": "rtx"}


def kai_pool(**overrides):
    values = {"slug": "rtx", "name": "RTX PRO 6000", "gpu_resource": "nvidia.com/gpu", "capacity": 16,
              "scheduler": "kai", "gpu_fractions": True,
              "node_labels": {"kai.scheduler/node-pool": "rtx"}}
    return NodePool(**{**values, **overrides})


def kai(kind=Kind.TRAINING, **overrides):
    return make(kind=kind, node_pool=kai_pool(), **overrides)


def test_a_kai_job_is_not_suspended_and_names_no_kueue_queue():
    job = job_manifest(kai(pods=2, max_runtime_seconds=3600))
    assert job["metadata"]["labels"] == {**PORTAL_LABELS, "portal.gpu/kind": "training", **KAI_LABELS}
    assert job["metadata"]["annotations"] == {"portal.gpu/owner": "alice", "portal.gpu/name": "resnet"}
    spec = job["spec"]
    assert spec["suspend"] is False and spec["activeDeadlineSeconds"] == 3600
    # a pod KAI evicts is replaced, not counted against the backoffLimit of 0 (a preempted training waits again)
    assert spec["podFailurePolicy"] == {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}]}
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (2, 2, "Indexed")
    template = spec["template"]
    assert template["metadata"] == {
        "labels": {**PORTAL_LABELS, "portal.gpu/kind": "training", **KAI_LABELS,
                   "kai.scheduler/preemptibility": "preemptible"},
        "annotations": {"pod-group-name": "wl-42"}}
    pod = template["spec"]
    assert pod["schedulerName"] == "kai-scheduler" and pod["priorityClassName"] == "train"
    assert pod["nodeSelector"] == {"kai.scheduler/node-pool": "rtx"}
    resources = pod["containers"][0]["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == "2"


def test_non_preemptible_work_says_so_to_kai():
    job = job_manifest(kai(preemptible=False, priority_class=PriorityClass(name="build", value=100)))
    assert job["spec"]["template"]["metadata"]["labels"]["kai.scheduler/preemptibility"] == "non-preemptible"
    assert "activeDeadlineSeconds" not in job["spec"]
    group = kai_pod_group(kai(preemptible=False, priority_class=PriorityClass(name="build", value=100)), "uid-1")
    assert group["spec"]["preemptibility"] == "non-preemptible" and group["spec"]["priorityClassName"] == "build"


def test_a_fraction_is_an_annotation_and_no_gpu_request():
    job = job_manifest(kai(kind=Kind.NOTEBOOK, gpus=0, gpu_fraction=Decimal("0.50"), notebook_port=8888))
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"] == {"pod-group-name": "wl-42", "gpu-fraction": "0.5"}
    resources = template["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "4000m", "memory": "32768Mi"}, "limits": {"memory": "32768Mi"}}


def test_the_pod_group_is_the_jobs_gang_owned_by_it():
    group = kai_pod_group(kai(pods=4), "uid-1")
    assert group == {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
        "metadata": {"name": "wl-42", "namespace": "proj-vision",
                     "labels": {**PORTAL_LABELS, "portal.gpu/kind": "training", **KAI_LABELS},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "wl-42", "uid": "uid-1",
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"minMember": 4, "queue": "proj-vision-rtx", "priorityClassName": "train",
                 "preemptibility": "preemptible"},
    }
    assert kai_pod_group(kai(kind=Kind.BATCH, completions=8, parallelism=4), "u")["spec"]["minMember"] == 1
    assert kai_pod_group(kai(kind=Kind.NOTEBOOK), "u")["spec"]["minMember"] == 1


def test_the_pod_group_comes_first_among_the_companions():
    kinds = [obj["kind"] for obj in companions(kai(kind=Kind.NOTEBOOK, notebook_port=8888), "uid-1")]
    assert kinds[0] == "PodGroup" and "Service" in kinds
    assert [obj["kind"] for obj in companions(kai(pods=2), "uid-1")] == ["PodGroup", "Service"]
    assert [obj["kind"] for obj in companions(make(), "uid-1")] == []  # a Kueue pool's Job has none


def test_a_pools_taints_are_tolerated():
    pool = kai_pool(node_taints=[{"key": "gpu", "value": "rtx", "effect": "NoSchedule"}])
    pod = job_manifest(make(node_pool=pool))["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Equal", "value": "rtx", "effect": "NoSchedule"}]


@pytest.mark.parametrize(("kind", "overrides"), [
    (Kind.TRAINING, {"pods": 2, "max_runtime_seconds": 600}),
    (Kind.NOTEBOOK, {"gpus": 0, "gpu_fraction": Decimal("0.25"), "notebook_port": 8888}),
    (Kind.BATCH, {"completions": 4, "parallelism": 2}),
])
def test_every_manifest_is_schema_valid(kind, overrides):
    workload = kai(kind=kind, **overrides)
    assert unknown_fields(job_manifest(workload), "V1Job") == []
    validate_kai_object(kai_pod_group(workload, "uid-1"))
