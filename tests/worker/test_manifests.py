"""Job and Service manifests: pure functions of the workload row; every field name one Kubernetes knows."""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from apps.org.models import Department, NodePool, PriorityClass, Project
from apps.workloads.models import Kind, Workload
from tests.k8s_fields import unknown_fields
from worker.manifests import job_manifest, notebook_service


def make(kind=Kind.TRAINING, **overrides):
    department = Department(slug="research", name="Research")
    project = Project(slug="vision", name="Vision", namespace="proj-vision", department=department)
    pool = NodePool(slug="h100", name="H100", gpu_resource="nvidia.com/gpu", capacity=16)
    values = {"pk": 42, "project": project, "owner": get_user_model()(pk=7, username="alice"), "kind": kind,
              "name": "resnet", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["python", "train.py"],
              "args": ["--epochs", "3"], "env": [{"name": "SEED", "value": "1"}], "node_pool": pool, "gpus": 2,
              "cpu": Decimal("4"), "memory_gib": Decimal("32"), "pods": 1, "completions": 1, "parallelism": 1,
              "priority_class": PriorityClass(name="train", value=50), "preemptible": True,
              "model_label": "resnet50", "data_class": "public"}
    values.update(overrides)
    return Workload(**values)


def test_training_job_is_suspended_and_labelled_for_kueue():
    job = job_manifest(make(pods=4, max_runtime_seconds=3600))
    assert job["metadata"]["name"] == "wl-42" and job["metadata"]["namespace"] == "proj-vision"
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "elastic-h100"
    assert labels["kueue.x-k8s.io/priority-class"] == "train"
    assert labels["kueue.x-k8s.io/max-exec-time-seconds"] == "3600"
    assert labels["portal.gpu/workload-id"] == "42" and labels["portal.gpu/model"] == "resnet50"
    assert labels["portal.gpu/data-class"] == "public" and labels["app.kubernetes.io/managed-by"] == "gpu-portal"
    spec = job["spec"]
    assert spec["suspend"] is True
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (4, 4, "Indexed")
    container = spec["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == container["resources"]["limits"]["nvidia.com/gpu"]
    assert container["resources"]["requests"] == {"cpu": "4000m", "memory": "32768Mi", "nvidia.com/gpu": "2"}
    assert container["command"] == ["python", "train.py"] and container["args"] == ["--epochs", "3"]
    assert {"name": "SEED", "value": "1"} in container["env"]


def test_non_preemptible_work_goes_to_the_guaranteed_queue():
    job = job_manifest(make(preemptible=False, priority_class=PriorityClass(name="build", value=100,
                                                                               preemptible=False)))
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "guaranteed-h100"
    assert "kueue.x-k8s.io/max-exec-time-seconds" not in job["metadata"]["labels"]
    assert "completionMode" not in job["spec"]


def test_mig_pool_requests_its_own_resource_name():
    pool = NodePool(slug="a100-mig-3g40gb", name="MIG", gpu_resource="nvidia.com/mig-3g.40gb", capacity=16)
    container = job_manifest(make(node_pool=pool, gpus=1))["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/mig-3g.40gb"] == "1"
    assert "nvidia.com/gpu" not in container["resources"]["limits"]


def test_batch_counts():
    spec = job_manifest(make(kind=Kind.BATCH, completions=10, parallelism=3))["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (10, 3, 2)


def test_notebook_job_and_service():
    workload = make(kind=Kind.NOTEBOOK, notebook_port=8888, command=[], args=[])
    job = job_manifest(workload)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "http", "containerPort": 8888, "protocol": "TCP"}]
    assert "command" not in container
    service = notebook_service(workload, "uid-1")
    assert service["spec"]["selector"] == {"portal.gpu/workload-id": "42"}
    assert service["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert unknown_fields(service, "V1Service") == []


@pytest.mark.parametrize("kind", [Kind.TRAINING, Kind.NOTEBOOK, Kind.BATCH])
def test_every_field_is_a_batch_v1_job_field(kind):
    assert unknown_fields(job_manifest(make(kind=kind, pods=2 if kind == Kind.TRAINING else 1)), "V1Job") == []


def test_field_check_catches_a_typo():
    job = job_manifest(make())
    job["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    assert unknown_fields(job, "V1Job") == ["spec.template.spec.containers[0].resource"]


def _attachments():
    from apps.org.models import DataSource, ImagePullSecret
    from apps.workloads.models import Credential
    from worker.manifests import Attachments

    project = Project(slug="vision", namespace="proj-vision")
    return Attachments(
        data_sources=[DataSource(project=project, name="imagenet", kind="pvc", claim_name="imagenet-pvc",
                                 mount_path="/data/imagenet", read_only=True),
                      DataSource(project=project, name="scratch", kind="nfs", nfs_server="10.0.0.9",
                                 nfs_path="/exports/s", mount_path="/mnt/s", read_only=False)],
        credentials=[Credential(pk=5, project=project, name="wandb", keys=["WANDB_API_KEY"])],
        pull_secrets=[ImagePullSecret(pk=3, project=project, name="nvcr")])


@pytest.mark.parametrize("kind", [Kind.TRAINING, Kind.NOTEBOOK, Kind.BATCH])
def test_attachments_are_volumes_mounts_env_sources_and_pull_secrets(kind):
    job = job_manifest(make(kind=kind, shm_gib=Decimal("1.5")), attachments=_attachments())
    assert unknown_fields(job, "V1Job") == []
    spec = job["spec"]["template"]["spec"]
    assert [v["name"] for v in spec["volumes"]] == ["data-imagenet", "data-scratch", "dshm"]
    assert spec["volumes"][2]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1536Mi"}
    assert spec["imagePullSecrets"] == [{"name": "portal-pull-3"}]
    container = spec["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "portal-cred-5"}}]
    assert [m["mountPath"] for m in container["volumeMounts"]] == ["/data/imagenet", "/mnt/s", "/dev/shm"]
    assert "subdomain" not in spec and not any(e["name"] == "MASTER_ADDR" for e in container["env"])


def test_only_a_multi_pod_training_job_gets_the_launcher_env_and_its_headless_service():
    from worker.manifests import companions

    single = make(pods=1)
    assert companions(single, "uid") == []
    gang = make(pods=3, gpus=4)
    job = job_manifest(gang)
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"]["value"] == "wl-42-0.wl-42" and env["WORLD_SIZE"]["value"] == "3"
    assert env["NPROC_PER_NODE"]["value"] == "4" and "fieldRef" in env["RANK"]["valueFrom"]
    [service] = companions(gang, "uid")
    assert service["spec"]["clusterIP"] == "None" and unknown_fields(service, "V1Service") == []


@pytest.mark.parametrize(("kind", "overrides"), [(Kind.TRAINING, {"pods": 4}), (Kind.NOTEBOOK, {"notebook_port": 8888}),
                                                 (Kind.BATCH, {})])
def test_every_variable_the_portal_sets_is_refused_as_a_users_own(kind, overrides):
    """A user's variable of the same name would override the portal's wiring: each name the manifests set besides
    the user's own (here SEED) is one env_errors refuses."""
    from apps.workloads.validation import env_errors

    container = job_manifest(make(kind, **overrides))["spec"]["template"]["spec"]["containers"][0]
    portal_names = [item["name"] for item in container["env"] if item["name"] != "SEED"]
    assert portal_names
    for name in portal_names:
        assert env_errors([{"name": name, "value": "x"}]), name
