"""A training on a framework through the API: the framework and its settings checked with every other field (one 400
with every refusal), the kind of object decided by what the cluster serves, and the choice recorded on the row."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from apps.cluster import services as mirror
from apps.core.models import AuditEvent
from apps.workloads.models import Framework, Workload
from tests.api_support import call


def body(**overrides: Any) -> dict[str, Any]:
    values = {"project": "vision", "kind": "training", "name": "ddp", "image": "pytorch/pytorch:2.4.0",
              "node_pool": "h100", "gpus": 1, "pods": 2, "labels": {"model": "resnet", "data_class": "public"}}
    values.update(overrides)
    return {key: value for key, value in values.items() if value is not None}


def test_pytorch_runs_as_a_trainjob_where_the_cluster_has_trainer_and_a_torch_runtime_else_as_a_jobset(client_for):
    mirror.watcher_served_kinds(kinds=["job", "jobset", "pod", "trainjob"], at=timezone.now(),
                                torch_runtime="torch-h100")
    response = call(client_for("alice"), "POST", "workloads/", body(framework="pytorch", command=["torchrun",
                                                                                                  "train.py"]))
    assert response.status_code == 201, response.content
    on_trainer = Workload.objects.get(pk=response.json()["id"])
    assert (on_trainer.framework, on_trainer.object_api_version) == (Framework.PYTORCH, "trainer.kubeflow.org/v1alpha1")
    assert on_trainer.training_runtime == "torch-h100"  # the runtime the cluster has, kept for a retried submit
    assert on_trainer.object_name == on_trainer.job_name
    assert response.json()["object"]["kind"] == "TrainJob"
    assert "as a TrainJob on the torch-h100 runtime" in on_trainer.events.get().message
    audit = AuditEvent.objects.get(action="workload.submit", object_id=str(on_trainer.pk))
    assert (audit.after["framework"], audit.after["training_runtime"]) == ("pytorch", "torch-h100")

    # Trainer without a runtime for torch would refuse the TrainJob: a JobSet instead.
    mirror.watcher_served_kinds(kinds=["job", "jobset", "pod", "trainjob"], at=timezone.now())
    response = call(client_for("alice"), "POST", "workloads/", body(framework="pytorch", name="ddp-1"))
    assert response.status_code == 201, response.content
    assert response.json()["object"]["kind"] == "JobSet"
    assert Workload.objects.get(pk=response.json()["id"]).training_runtime == ""

    mirror.watcher_served_kinds(kinds=["job", "jobset", "pod"], at=timezone.now(), torch_runtime="torch-h100")
    response = call(client_for("alice"), "POST", "workloads/", body(framework="pytorch", name="ddp-2"))
    assert response.status_code == 201, response.content
    assert response.json()["object"]["kind"] == "JobSet"
    assert Workload.objects.get(pk=response.json()["id"]).training_runtime == ""

    mirror.watcher_served_kinds(kinds=["job", "pod"], at=timezone.now())
    response = call(client_for("alice"), "POST", "workloads/", body(framework="pytorch", name="ddp-3"))
    assert response.status_code == 400
    assert response.json()["framework"][0].startswith("This cluster serves neither Kubeflow Trainer's TrainJob nor "
                                                      "JobSet")


def test_ray_settings_are_kept_with_their_default_version(client_for):
    response = call(client_for("alice"), "POST", "workloads/", body(framework="ray", ray_entrypoint="python tune.py"))
    assert response.status_code == 201, response.content
    workload = Workload.objects.get(pk=response.json()["id"])
    assert workload.framework_settings == {"ray_version": "2.41.0", "ray_entrypoint": "python tune.py",
                                           "ray_working_dir": ""}
    assert response.json()["object"]["kind"] == "RayJob"
    # Submit again: the same framework and settings.
    again = call(client_for("alice"), "POST", f"workloads/{workload.pk}/resubmit/", {})
    assert again.status_code == 201, again.content
    assert Workload.objects.get(pk=again.json()["id"]).framework_settings == workload.framework_settings


def test_every_refusal_of_the_framework_and_the_other_fields_comes_in_one_answer(client_for):
    response = call(client_for("alice"), "POST", "workloads/", body(
        framework="ray", ray_version="latest", ray_working_dir="my dir", command=["python", "x.py"], gpus=0,
        env={"RAY_ADDRESS": "auto"}))
    assert response.status_code == 400
    errors = response.json()
    assert errors["ray_entrypoint"] == ["Give the command Ray runs as the job, e.g. python train.py --epochs 3."]
    assert errors["ray_version"][0].startswith("'latest' is not a Ray version")
    assert errors["ray_working_dir"][0].startswith("A path in the image or a URI")
    assert errors["command"][0].startswith("A Ray job runs its entrypoint")
    assert errors["env"] == ["RAY_ADDRESS: set by KubeRay for the job; choose another name."]
    assert "gpus" in errors
    assert not Workload.objects.exists()


def test_settings_of_another_framework_or_kind_are_refused_not_dropped(client_for):
    response = call(client_for("alice"), "POST", "workloads/", body(
        framework="pytorch", ray_entrypoint="python x.py", env={"PET_MASTER_ADDR": "me"}))
    assert response.status_code == 400
    assert response.json()["ray_entrypoint"] == ["Only Ray training has this; choose framework ray, or leave it out."]
    assert response.json()["env"][0].startswith("PET_MASTER_ADDR: set by the portal for torchrun's rendezvous")
    response = call(client_for("alice"), "POST", "workloads/", body(kind="batch", pods=None, framework="pytorch"))
    assert response.status_code == 400
    assert response.json()["framework"] == ["Only training workloads run on a framework; leave it out of a batch "
                                            "workload."]
    response = call(client_for("alice"), "POST", "workloads/", body(framework="tensorflow"))
    assert response.status_code == 400 and "framework" in response.json()
    assert not Workload.objects.exists()


def test_the_openapi_schema_documents_the_framework_and_its_settings():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    submit = schema["components"]["schemas"]["WorkloadSubmitRequest"]["properties"]
    assert "pytorch" in submit["framework"]["description"] and "ray" in submit["framework"]["description"]
    assert {"ray_version", "ray_entrypoint", "ray_working_dir"} <= set(submit)
