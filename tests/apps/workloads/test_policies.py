"""Policies applied to submissions: through the one check the forms, the API and the CLI share, and to manifests;
every violation at once in one 400 naming the policy's scope, defaults filled in, inheritance field by field, and the
check's queries fixed however many policies there are."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.org import services as org
from apps.org.models import Department, NodePool, PriorityClass, Project
from apps.org.selectors import effective_policy
from apps.workloads import services
from apps.workloads.models import Workload
from tests.api_support import call

GOOD: dict[str, Any] = {
    "project": "vision", "kind": "training", "name": "run", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "node_pool": "h100", "gpus": 1, "pods": 1, "labels": {"model": "resnet", "data_class": "public"},
}
GPU = "nvidia.com/gpu"


@pytest.fixture
def scopes(demo) -> dict[str, Any]:
    return {"admin": demo["admin"], "research": Department.objects.get(slug="research"),
            "vision": Project.objects.get(slug="vision")}


def policy(scopes: dict[str, Any], scope: str | None = None, **fields: Any) -> None:
    owner = {} if scope is None else {"project" if scope == "vision" else "department": scopes[scope]}
    org.policy_create(actor=scopes["admin"], **owner, **fields)


def submit(client: Any, **changes: Any) -> Any:
    return call(client, "POST", "workloads/", {**GOOD, **changes})


def test_inheritance_is_field_by_field(scopes):
    policy(scopes, max_gpus_per_workload=16, allowed_images=["nvcr.io/*"], max_runtime_seconds=86400)
    policy(scopes, "research", max_gpus_per_workload=8, max_runtime_seconds=3600)
    policy(scopes, "vision", max_gpus_per_workload=4, pod_security="restricted")
    effective = effective_policy(Project.objects.get(slug="vision"))
    assert (effective.get("max_gpus_per_workload"), effective.source("max_gpus_per_workload")) == (
        4, "the Vision project's policy")
    assert (effective.get("max_runtime_seconds"), effective.source("max_runtime_seconds")) == (
        3600, "the Research department's policy")
    assert (effective.get("allowed_images"), effective.source("allowed_images")) == (
        ["nvcr.io/*"], "the organisation's policy")
    assert effective.pod_security == "restricted"
    nlp = effective_policy(Project.objects.get(slug="nlp"))
    assert (nlp.get("max_gpus_per_workload"), nlp.pod_security) == (8, "baseline")  # the installation's profile
    forecasting = effective_policy(Project.objects.get(slug="forecasting"))
    assert (forecasting.get("max_gpus_per_workload"), forecasting.get("max_runtime_seconds")) == (16, 86400)


def test_every_violation_at_once_naming_the_scope(client_for, scopes):
    policy(scopes, "research", max_gpus_per_workload=2, allowed_images=["nvcr.io/*"], max_runtime_seconds=3600,
           allowed_priority_classes=["train", "interactive-preemptible"])
    response = submit(client_for("alice"), image="pytorch/pytorch:2.4.0", gpus=2, pods=2, max_runtime_seconds=7200,
                      priority_class="build")
    assert response.status_code == 400, response.content
    errors = response.json()
    assert errors["gpus"] == ["The Research department's policy allows at most 2 GPUs per workload; this one asks "
                              "for 4."]
    assert errors["image"] == ["The Research department's policy allows images matching nvcr.io/* only; "
                               "pytorch/pytorch:2.4.0 matches none."]
    assert errors["max_runtime_seconds"] == ["The Research department's policy allows a runtime of at most 3600 "
                                             "seconds; give 3600 or less."]
    assert errors["priority_class"] == ["The Research department's policy allows the priority classes train, "
                                        "interactive-preemptible only, not build."]
    assert not Workload.objects.exists()
    assert submit(client_for("alice"), gpus=2).status_code == 201


def test_the_live_check_reports_the_policy_too(scopes):
    policy(scopes, "vision", max_gpus_per_workload=1)
    with pytest.raises(Exception) as refused:
        services.workload_check(actor=scopes["admin"], unknown={"name"}, project=scopes["vision"], kind="training",
                                image="nvcr.io/nvidia/pytorch:24.05-py3", node_pool=NodePool.objects.get(slug="h100"),
                                gpus=2, model_label="m", data_class="d")
    assert refused.value.message_dict["gpus"] == [  # type: ignore[attr-defined]
        "The Vision project's policy allows at most 1 GPUs per workload; this one asks for 2."]


def test_a_required_label_left_empty_names_the_policy(client_for, scopes):
    policy(scopes, required_labels=["model", "data_class"])
    response = submit(client_for("alice"), labels={"model": "resnet", "data_class": ""})
    assert response.json()["labels"]["data_class"] == ["The organisation's policy requires the data_class audit "
                                                       "label."]


def test_defaults_fill_what_the_submission_leaves_empty(client_for, scopes):
    policy(scopes, "research", default_runtime_seconds=1800, default_priority_class=PriorityClass.objects.get(
        name="build"), max_notebook_idle_minutes=60)
    response = submit(client_for("alice"))
    assert response.status_code == 201, response.content
    workload = Workload.objects.get(pk=response.json()["id"])
    assert (workload.max_runtime_seconds, workload.priority_class.name, workload.preemptible) == (1800, "build", False)
    response = submit(client_for("alice"), name="nb", kind="notebook")
    assert response.status_code == 201, response.content
    assert Workload.objects.get(pk=response.json()["id"]).notebook_idle_timeout_minutes == 60
    response = submit(client_for("alice"), name="nb2", kind="notebook", idle_timeout_minutes=90)
    assert response.json() == {"idle_timeout_minutes": [
        "The Research department's policy allows a notebook at most 60 idle minutes."]}



def test_a_maximum_runtime_without_a_default_is_the_default(client_for, scopes):
    policy(scopes, max_runtime_seconds=3600)
    response = submit(client_for("alice"))
    assert Workload.objects.get(pk=response.json()["id"]).max_runtime_seconds == 3600


def _job(*, init_image: str = "nvcr.io/nvidia/busybox:1", privileged: bool = False) -> str:
    main = {"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["sleep", "60"],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", GPU: 3}, "limits": {GPU: 3}}}
    if privileged:
        main["securityContext"] = {"privileged": True}
    return yaml.safe_dump({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "my-job"}, "spec": {
        "template": {"spec": {"restartPolicy": "Never", "containers": [main],
                              "initContainers": [{"name": "fetch", "image": init_image}]}}}})


def _manifest(client: Any, text: str, **extra: Any) -> Any:
    return call(client, "POST", "workloads/", {"project": "vision", "kind": "manifest", "manifest": text,
                                               "node_pool": "h100",
                                               "labels": {"model": "resnet", "data_class": "public"}, **extra})


def test_a_manifest_meets_the_policy_every_container_and_all_at_once(client_for, scopes):
    policy(scopes, "research", max_gpus_per_workload=2, allowed_images=["nvcr.io/nvidia/*"],
           allowed_priority_classes=["train"], max_runtime_seconds=600)
    response = _manifest(client_for("alice"), _job(init_image="docker.io/library/busybox:1"),
                         priority_class="build", max_runtime_seconds=1200)
    assert response.status_code == 400, response.content
    errors = response.json()
    assert errors["manifest"] == [
        "manifest: The Research department's policy allows at most 2 GPUs per workload; this one asks for 3.",
        "spec.template.spec.initContainers[0].image: The Research department's policy allows images matching "
        "nvcr.io/nvidia/* only; docker.io/library/busybox:1 matches none."]
    assert set(errors) == {"manifest", "priority_class", "max_runtime_seconds"}
    assert not Workload.objects.exists()


def test_a_manifest_meets_the_policys_pod_security_profile(client_for, scopes):
    assert _manifest(client_for("alice"), _job()).status_code == 201  # baseline: the installation's
    policy(scopes, "vision", pod_security="restricted")
    errors = _manifest(client_for("alice"), _job()).json()["manifest"]
    assert any("allowPrivilegeEscalation: must be false under the restricted profile" in error for error in errors)


def test_the_checks_queries_do_not_grow_with_the_number_of_policies(scopes):
    pool = NodePool.objects.get(slug="h100")

    def queries() -> int:
        project = Project.objects.get(slug="vision")  # a fresh object: nothing cached
        with CaptureQueriesContext(connection) as captured:
            services.workload_validate(actor=scopes["admin"], project=project, kind="training", name="run",
                                       image="nvcr.io/nvidia/pytorch:24.05-py3", node_pool=pool, gpus=1,
                                       model_label="m", data_class="d")
        return len(captured)

    queries()  # the admin's grants, cached on the user for the rest of the "request"
    without = queries()
    policy(scopes, max_gpus_per_workload=64)
    policy(scopes, "research", max_gpus_per_workload=32)
    policy(scopes, "vision", max_gpus_per_workload=16)
    for department in Department.objects.exclude(slug="research"):
        policy({**scopes, "other": department}, "other", max_gpus_per_workload=8)
    assert queries() == without
