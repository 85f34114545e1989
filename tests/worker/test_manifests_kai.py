"""What the portal creates on a KAI pool (README, Kueue and KAI in one cluster): a Job whose pods KAI's grouper puts in
PodGroups of its own, or for a gang the portal's PodGroup and ownerless pods; exactly the labels and annotations KAI
Scheduler reads, no Kueue label, every field one the schemas know (batch/v1 and v1 Pod as the official client's models
define them, the PodGroup against KAI's vendored CRD, strictly)."""

from decimal import Decimal

import pytest

from apps.org.models import NodePool, PriorityClass
from apps.workloads.models import Kind
from tests.crd_schemas import validate_kai_object
from tests.k8s_fields import unknown_fields
from worker.manifests import companions, job_manifest, kai_gang_pod, kai_gang_pod_group

from .test_manifests import make

PORTAL_LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "portal.gpu/workload-id": "42",
                 "portal.gpu/project": "vision", "portal.gpu/department": "research", "portal.gpu/pool": "rtx",
                 "portal.gpu/owner-id": "7", "portal.gpu/model": "resnet50", "portal.gpu/data-class": "public"}
KAI_LABELS = {"kai.scheduler/queue": "proj-vision-rtx", "kai.scheduler/node-pool": "rtx",
              "kai.scheduler/preemptibility": "preemptible", "priorityClassName": "train"}


def kai_pool(**overrides):
    values = {"slug": "rtx", "name": "RTX PRO 6000", "gpu_resource": "nvidia.com/gpu", "capacity": 16,
              "scheduler": "kai", "gpu_fractions": True,
              "node_labels": {"kai.scheduler/node-pool": "rtx"}}
    return NodePool(**{**values, **overrides})


def kai(kind=Kind.TRAINING, **overrides):
    return make(kind=kind, node_pool=kai_pool(), **overrides)


def test_a_kai_job_is_not_suspended_names_no_kueue_queue_and_no_pod_group():
    job = job_manifest(kai(kind=Kind.BATCH, completions=4, parallelism=2, max_runtime_seconds=3600))
    # What KAI's grouper copies into each pod's PodGroup, on the Job (the top owner, read first) and its pods.
    assert job["metadata"]["labels"] == {**PORTAL_LABELS, "portal.gpu/kind": "batch", **KAI_LABELS}
    assert job["metadata"]["annotations"] == {"portal.gpu/owner": "alice", "portal.gpu/name": "resnet"}
    spec = job["spec"]
    assert spec["suspend"] is False and spec["activeDeadlineSeconds"] == 3600
    # a pod KAI evicts is replaced, not counted against the backoffLimit (a preempted run waits again)
    assert spec["podFailurePolicy"] == {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}]}
    assert (spec["parallelism"], spec["completions"]) == (2, 4)
    template = spec["template"]
    assert template["metadata"] == {"labels": {**PORTAL_LABELS, "portal.gpu/kind": "batch", **KAI_LABELS}}
    pod = template["spec"]
    assert pod["schedulerName"] == "kai-scheduler" and pod["priorityClassName"] == "train"
    assert pod["nodeSelector"] == {"kai.scheduler/node-pool": "rtx"}
    resources = pod["containers"][0]["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == "2"
    assert companions(kai(kind=Kind.BATCH), "uid-1") == []


def test_non_preemptible_work_says_so_to_kai():
    build = PriorityClass(name="build", value=100)
    job = job_manifest(kai(preemptible=False, priority_class=build))
    for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
        assert (labels["kai.scheduler/preemptibility"], labels["priorityClassName"]) == ("non-preemptible", "build")
    assert "activeDeadlineSeconds" not in job["spec"]
    group = kai_gang_pod_group(kai(pods=2, preemptible=False, priority_class=build))
    assert group["spec"]["preemptibility"] == "non-preemptible" and group["spec"]["priorityClassName"] == "build"


def test_a_fraction_is_an_annotation_and_no_gpu_request():
    job = job_manifest(kai(kind=Kind.NOTEBOOK, gpus=0, gpu_fraction=Decimal("0.50"), notebook_port=8888))
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    resources = template["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "4000m", "memory": "32768Mi"}, "limits": {"memory": "32768Mi"}}
    assert [obj["kind"] for obj in companions(kai(kind=Kind.NOTEBOOK, notebook_port=8888), "uid-1")][:2] == [
        "Secret", "Service"]  # no PodGroup: KAI's grouper makes the pod's


def test_a_gang_is_its_pod_group_owned_by_nothing_and_a_pod_per_rank():
    gang = kai(pods=4, max_runtime_seconds=600)
    with pytest.raises(ValueError, match="not a Job"):
        job_manifest(gang)
    group = kai_gang_pod_group(gang, request_id="r-1")
    assert group == {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
        "metadata": {"name": "wl-42", "namespace": "proj-vision",
                     "labels": {**PORTAL_LABELS, "portal.gpu/kind": "training", **KAI_LABELS},
                     "annotations": {"portal.gpu/owner": "alice", "portal.gpu/name": "resnet",
                                     "portal.gpu/request-id": "r-1"}},
        "spec": {"minMember": 4, "queue": "proj-vision-rtx", "priorityClassName": "train",
                 "preemptibility": "preemptible"},
    }
    pod = kai_gang_pod(gang, 2)
    assert pod["metadata"]["name"] == "wl-42-2" and "ownerReferences" not in pod["metadata"]
    assert pod["metadata"]["labels"] == {**PORTAL_LABELS, "portal.gpu/kind": "training", **KAI_LABELS}
    assert pod["metadata"]["annotations"]["pod-group-name"] == "wl-42"  # kept by KAI on a pod without owners
    spec = pod["spec"]
    assert (spec["restartPolicy"], spec["activeDeadlineSeconds"], spec["schedulerName"]) == (
        "Never", 600, "kai-scheduler")
    assert (spec["hostname"], spec["subdomain"], spec["nodeSelector"]) == (
        "wl-42-2", "wl-42", {"kai.scheduler/node-pool": "rtx"})
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    assert (env["RANK"], env["NODE_RANK"]) == ({"name": "RANK", "value": "2"}, {"name": "NODE_RANK", "value": "2"})
    assert env["MASTER_ADDR"]["value"] == "wl-42-0.wl-42" and env["WORLD_SIZE"]["value"] == "4"
    [service] = companions(gang, "pg-uid")
    assert service["spec"]["clusterIP"] == "None"
    assert service["metadata"]["ownerReferences"] == [{
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "name": "wl-42", "uid": "pg-uid",
        "controller": True, "blockOwnerDeletion": True}]


def test_a_pools_taints_are_tolerated():
    pool = kai_pool(node_taints=[{"key": "gpu", "value": "rtx", "effect": "NoSchedule"}])
    toleration = [{"key": "gpu", "operator": "Equal", "value": "rtx", "effect": "NoSchedule"}]
    assert job_manifest(make(node_pool=pool))["spec"]["template"]["spec"]["tolerations"] == toleration
    assert kai_gang_pod(make(node_pool=pool, pods=2), 0)["spec"]["tolerations"] == toleration


@pytest.mark.parametrize(("kind", "overrides"), [
    (Kind.TRAINING, {"max_runtime_seconds": 600}),
    (Kind.NOTEBOOK, {"gpus": 0, "gpu_fraction": Decimal("0.25"), "notebook_port": 8888}),
    (Kind.BATCH, {"completions": 4, "parallelism": 2}),
])
def test_every_job_is_schema_valid(kind, overrides):
    assert unknown_fields(job_manifest(kai(kind=kind, **overrides)), "V1Job") == []


def test_a_gangs_objects_are_schema_valid():
    gang = kai(pods=2, max_runtime_seconds=600, shm_gib=Decimal("1.5"))
    validate_kai_object(kai_gang_pod_group(gang))
    for index in range(2):
        assert unknown_fields(kai_gang_pod(gang, index), "V1Pod") == []
    assert unknown_fields(companions(gang, "uid")[0], "V1Service") == []
