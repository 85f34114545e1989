"""The objects a training on a framework is created as: pure functions of the row, each valid against its kind's
published schema (strict), wired as the framework expects."""

import pytest
from django.contrib.auth import get_user_model

from apps.workloads.manifests import MANIFEST_KINDS
from apps.workloads.models import Credential, Framework
from tests.worker.test_manifests import make
from worker.frameworks import framework_manifest, framework_schema_errors
from worker.manifests import Attachments

TRAINJOB = MANIFEST_KINDS["TrainJob"].api_version
JOBSET = MANIFEST_KINDS["JobSet"].api_version
RAY = {"ray_version": "2.41.0", "ray_entrypoint": "python train.py --epochs 3", "ray_working_dir": "/workspace"}


def torch(**overrides):
    return make(framework=Framework.PYTORCH, pods=3,
                **{"object_api_version": TRAINJOB, "training_runtime": "torch-distributed", **overrides})


def ray(**overrides):
    return make(framework=Framework.RAY, pods=2, command=[], args=[],
                **{"framework_settings": RAY, "object_api_version": "ray.io/v1", **overrides})


def env_of(container):
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


@pytest.mark.parametrize("workload", [torch(), torch(object_api_version=JOBSET), ray(),
                                      ray(framework_settings={**RAY, "ray_working_dir": ""})],
                         ids=["trainjob", "jobset", "rayjob", "rayjob-no-working-dir"])
def test_every_object_is_what_its_schema_accepts_queued_and_labelled(workload):
    obj = framework_manifest(workload, request_id="req-1", attachments=Attachments())
    assert framework_schema_errors(obj) == []
    metadata = obj["metadata"]
    assert (metadata["name"], metadata["namespace"]) == ("wl-42", "proj-vision")
    assert metadata["labels"]["kueue.x-k8s.io/queue-name"] == "elastic-h100"
    assert metadata["labels"]["kueue.x-k8s.io/priority-class"] == "train"
    assert metadata["labels"]["portal.gpu/workload-id"] == "42"
    assert metadata["labels"]["portal.gpu/owner-id"] == "7"
    assert metadata["annotations"]["portal.gpu/request-id"] == "req-1"
    assert obj["spec"]["suspend"] is True


def test_a_schema_refusal_is_found_by_its_path():
    obj = framework_manifest(torch(), attachments=Attachments())
    obj["spec"]["trainer"]["numNode"] = 3
    assert framework_schema_errors(obj) == ["spec.trainer.numNode: unknown field."]


def test_pytorch_on_trainer_is_a_trainjob_on_the_torch_runtime_with_one_process_per_gpu():
    obj = framework_manifest(torch(max_runtime_seconds=600), attachments=Attachments())
    assert obj["kind"] == "TrainJob"
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "600"
    assert obj["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                         "name": "torch-distributed"}
    # The runtime the row was submitted for, whatever the cluster calls it.
    assert framework_manifest(torch(training_runtime="torch-h100"))["spec"]["runtimeRef"]["name"] == "torch-h100"
    trainer = obj["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (3, 2)
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "2"
    assert trainer["resourcesPerNode"]["requests"]["nvidia.com/gpu"] == "2"
    assert trainer["command"] == ["python", "train.py"] and trainer["args"] == ["--epochs", "3"]
    assert env_of(trainer)["SEED"] == "1" and env_of(trainer)["PORTAL_WORKLOAD_ID"] == "42"
    # The portal's labels reach the pods through a runtime patch (the Trainer copies no TrainJob label to them).
    patch = obj["spec"]["runtimePatches"][0]
    assert patch["manager"] == "portal.gpu/submit"
    node = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert node["name"] == "node"
    assert node["template"]["spec"]["template"]["metadata"]["labels"]["portal.gpu/workload-id"] == "42"


def test_a_trainjob_reads_credentials_key_by_key_and_mounts_shared_memory_through_its_patch():
    credential = Credential(pk=5, name="wandb", keys=["WANDB_API_KEY"], owner=get_user_model()(pk=7))
    obj = framework_manifest(torch(shm_gib=4), attachments=Attachments(credentials=[credential]))
    assert framework_schema_errors(obj) == []
    assert env_of(obj["spec"]["trainer"])["WANDB_API_KEY"] == {
        "secretKeyRef": {"name": credential.secret_name, "key": "WANDB_API_KEY"}}
    pod = obj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4096Mi"}}]
    assert pod["containers"] == [{"name": "node", "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}]


def test_pytorch_without_trainer_is_a_jobset_wired_as_the_trainer_would_wire_it():
    obj = framework_manifest(torch(object_api_version=JOBSET), attachments=Attachments())
    assert obj["kind"] == "JobSet"
    (node,) = obj["spec"]["replicatedJobs"]
    job = node["template"]["spec"]
    assert (node["name"], node["replicas"]) == ("node", 1)
    assert (job["parallelism"], job["completions"], job["completionMode"], job["backoffLimit"]) == (3, 3, "Indexed", 0)
    assert job["template"]["metadata"]["labels"]["portal.gpu/workload-id"] == "42"
    container = job["template"]["spec"]["containers"][0]
    env = env_of(container)
    assert env["PET_NNODES"] == "3" and env["PET_NPROC_PER_NODE"] == "2" and env["PET_MASTER_PORT"] == "29500"
    assert env["PET_MASTER_ADDR"] == "wl-42-node-0-0.wl-42"
    assert env["PET_NODE_RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert "MASTER_ADDR" not in env and "subdomain" not in job["template"]["spec"]  # the JobSet's own Service names it
    assert container["ports"] == [{"name": "rendezvous", "containerPort": 29500, "protocol": "TCP"}]


def test_ray_is_a_rayjob_with_a_head_without_gpus_and_the_workers_with_them():
    obj = framework_manifest(ray(), attachments=Attachments())
    spec = obj["spec"]
    assert obj["kind"] == "RayJob"
    assert spec["entrypoint"] == "python train.py --epochs 3" and spec["shutdownAfterJobFinishes"] is True
    assert spec["runtimeEnvYAML"] == "working_dir: /workspace\n"
    cluster = spec["rayClusterSpec"]
    assert cluster["rayVersion"] == "2.41.0"
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in head["resources"]["requests"] and "nvidia.com/gpu" not in head["resources"]["limits"]
    assert cluster["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    (workers,) = cluster["workerGroupSpecs"]
    assert (workers["replicas"], workers["minReplicas"], workers["maxReplicas"]) == (2, 2, 2)
    assert workers["rayStartParams"]["num-gpus"] == "2"
    worker = workers["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == worker["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert "command" not in worker and "args" not in worker
    for template in (cluster["headGroupSpec"]["template"], workers["template"]):
        assert template["metadata"]["labels"]["portal.gpu/workload-id"] == "42"
