"""TrainJob, ClusterTrainingRuntime and TrainingRuntime (trainer.kubeflow.org/v1alpha1) as a cluster with Kubeflow
Trainer v2.3.0 serves and runs them, without Kueue: the vendored CRDs (discovery, CEL with string.matches, defaults,
status subresource), the installed torch-distributed runtime, the JobSet the Trainer builds from a runtime
(numNodes, the trainer's overrides, torchrun's environment, runtimePatches), status copied back from the JobSet, and
the Trainer's webhook. Everything goes through the official client."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from kubesim.apiserver.registry.resources import crd_schema
from kubesim.apiserver.validation import cel
from kubesim.apiserver.validation import schema as validation
from tests.kubesim.conftest import (
    JOBSET,
    TRAINER,
    raw,
    replicated_job,
    training_runtime_body,
    trainjob_body,
)


def create(api, ns: str, body: dict) -> dict:
    return api.custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", body)


def get(api, ns: str, name: str) -> dict:
    return api.custom.get_namespaced_custom_object(*TRAINER, ns, "trainjobs", name)


def patch(api, ns: str, name: str, body: dict) -> dict:
    return api.custom.patch_namespaced_custom_object(*TRAINER, ns, "trainjobs", name, body)


def jobset(api, ns: str, name: str) -> dict:
    return api.custom.get_namespaced_custom_object(*JOBSET, ns, "jobsets", name)


def conditions(obj: dict) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in obj.get("status", {}).get("conditions", [])]


def message(exc: pytest.ExceptionInfo[ApiException]) -> str:
    return json.loads(exc.value.body)["message"]


def test_every_cel_rule_of_the_trainer_crds_compiles():
    for plural, count in (("trainjobs", 19), ("clustertrainingruntimes", 11), ("trainingruntimes", 11)):
        rules = validation.known_rules(crd_schema(plural))
        assert len(rules) == count, plural
        for rule in rules:
            cel.compile_rule(rule)


def test_discovery_and_the_installed_torch_distributed_runtime(api):
    status, body = raw(api, "GET", "/apis/trainer.kubeflow.org/v1alpha1")
    assert status == 200
    scopes = {r["name"]: r["namespaced"] for r in body["resources"]}
    assert scopes == {
        "trainjobs": True,
        "trainjobs/status": True,
        "clustertrainingruntimes": False,
        "trainingruntimes": True,
    }
    runtime = api.custom.get_cluster_custom_object(*TRAINER, "clustertrainingruntimes", "torch-distributed")
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
    [node] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert node["template"]["metadata"]["labels"] == {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}


def test_schema_defaults_and_cel_rules(api, ns):
    created = create(api, ns, trainjob_body("t1", numNodes=1, command=["sleep", "5"]))
    assert created["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": "torch-distributed",
    }
    assert created["spec"]["suspend"] is False
    with pytest.raises(ApiException) as exc:  # metadata.name must be an RFC 1035 label (a root CEL rule)
        create(api, ns, trainjob_body("1abc"))
    assert exc.value.status == 422 and "metadata.name must match RFC 1035 DNS label format" in message(exc)
    with pytest.raises(ApiException) as exc:
        patch(api, ns, "t1", {"spec": {"trainer": {"numNodes": 3}}})
    assert exc.value.status == 422 and "spec.trainer: Invalid value" in message(exc) and "immutable" in message(exc)
    body = trainjob_body("t2")
    body["spec"]["initializer"] = {"dataset": {"storageUri": "not-a-uri"}}
    with pytest.raises(ApiException) as exc:
        create(api, ns, body)
    assert "storageUri may be empty, or it must be a valid URI" in message(exc)


def test_the_trainer_runs_a_trainjob_as_a_jobset_to_completion(api, ks, ns):
    body = trainjob_body(
        "llm",
        numNodes=2,
        command=["sleep", "20"],
        env=[{"name": "EPOCHS", "value": "3"}],
        resourcesPerNode={"requests": {"cpu": "4"}},
    )
    create(api, ns, body)
    ks.advance(0)
    js = jobset(api, ns, "llm")
    assert js["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert js["metadata"]["ownerReferences"][0]["controller"] is True
    [rj] = js["spec"]["replicatedJobs"]
    job_spec = rj["template"]["spec"]
    assert (rj["name"], rj["replicas"], job_spec["parallelism"], job_spec["completions"]) == ("node", 1, 2, 2)
    container = rj["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["sleep", "20"]
    assert container["resources"] == {"requests": {"cpu": "4"}}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env == {
        "EPOCHS": "3",
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "4",
        "PET_NODE_RANK": None,
        "PET_MASTER_ADDR": "llm-node-0-0.llm",
        "PET_MASTER_PORT": "29500",
    }
    assert len([p for p in api.core.list_namespaced_pod(ns).items if p.metadata.name.startswith("llm-node-0-")]) == 2
    tj = get(api, ns, "llm")
    assert tj["status"]["jobsStatus"] == [
        {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
    ]
    ks.advance(25)
    tj = get(api, ns, "llm")
    assert conditions(tj) == [("Complete", "True", "AllJobsCompleted")]
    assert tj["status"]["conditions"][0]["message"] == "jobset completed successfully"


def _trainer_step(command: str) -> dict:
    """A replicatedJob marked as the trainer step, its pod not restarted and its Job not retried."""
    step = replicated_job("node", 1, 1, command)
    step["template"]["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}
    step["template"]["spec"]["backoffLimit"] = 0
    return step


def test_a_failed_jobset_fails_the_trainjob(api, ks, ns):
    runtime = training_runtime_body("fails", _trainer_step("sleep 1; exit 1"))
    api.custom.create_namespaced_custom_object(*TRAINER, ns, "trainingruntimes", runtime)
    create(api, ns, trainjob_body("bad", "fails", kind="TrainingRuntime"))
    ks.advance(5)
    tj = get(api, ns, "bad")
    assert conditions(tj)[-1] == ("Failed", "True", "FailedJobs")
    assert tj["status"]["conditions"][-1]["message"].startswith("jobset failed due to one or more job failures")


def test_suspend_is_carried_to_the_jobset_and_reported(api, ks, ns):
    body = trainjob_body("s", numNodes=1, command=["sleep", "600"])
    body["spec"]["suspend"] = True
    create(api, ns, body)
    ks.advance(0)
    assert jobset(api, ns, "s")["spec"]["suspend"] is True
    assert conditions(get(api, ns, "s")) == [("Suspended", "True", "Suspended")]
    assert api.core.list_namespaced_pod(ns).items == []
    patch(api, ns, "s", {"spec": {"suspend": False}})
    ks.advance(0)
    assert jobset(api, ns, "s")["spec"]["suspend"] is False
    tj = get(api, ns, "s")
    assert conditions(tj) == [("Suspended", "False", "Resumed")]
    assert tj["status"]["conditions"][0]["message"] == "TrainJob is resumed"
    assert len(api.core.list_namespaced_pod(ns).items) == 1


def test_runtime_patches_reach_the_jobset_while_suspended_and_only_then(api, ks, ns):
    body = trainjob_body("p", command=["sleep", "600"])
    body["spec"]["suspend"] = True
    create(api, ns, body)
    ks.advance(0)
    node_patch = {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}}}}}}
    runtime_spec = {"template": {"spec": {"replicatedJobs": [node_patch]}}}
    patches = [{"manager": "example.com/scheduler", "trainingRuntimeSpec": runtime_spec}]
    patch(api, ns, "p", {"spec": {"runtimePatches": patches, "suspend": False}})
    ks.advance(0)
    js = jobset(api, ns, "p")
    assert js["spec"]["suspend"] is False
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "a"}
    with pytest.raises(ApiException) as exc:
        patch(api, ns, "p", {"spec": {"runtimePatches": [{**patches[0], "trainingRuntimeSpec": {}}]}})
    assert exc.value.status == 403
    assert message(exc) == (
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimePatches: '
        "Forbidden: RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
    )


def test_a_namespaced_training_runtime_without_an_ml_policy(api, ks, ns):
    runtime = training_runtime_body("plain", _trainer_step("sleep 5"), replicated_job("aux", 2, 3, "sleep 5"))
    api.custom.create_namespaced_custom_object(*TRAINER, ns, "trainingruntimes", runtime)
    create(api, ns, trainjob_body("plain", "plain", kind="TrainingRuntime", numNodes=3))
    ks.advance(0)
    rjobs = jobset(api, ns, "plain")["spec"]["replicatedJobs"]
    assert [(r["name"], r["replicas"], r["template"]["spec"]["parallelism"]) for r in rjobs] == [
        ("node", 1, 3),
        ("aux", 2, 3),
    ]
    env = rjobs[0]["template"]["spec"]["template"]["spec"]["containers"][0].get("env")
    assert env is None  # no torch policy: no PET_* variables


def test_a_missing_runtime_is_reported_and_an_unknown_kind_fails_the_trainjob(api, ks, ns):
    create(api, ns, trainjob_body("lost", "no-such-runtime"))
    ks.advance(0)
    evs = [(e.reason, e.message) for e in api.core.list_namespaced_event(ns).items if e.involved_object.name == "lost"]
    warning = "TrainJob resources reconciliation failed: runtime 'no-such-runtime' not found"
    assert ("TrainJobResourcesCreationFailed", warning) in evs
    assert "status" not in get(api, ns, "lost")
    create(api, ns, trainjob_body("odd", "x", kind="Runtime"))
    ks.advance(0)
    odd = get(api, ns, "odd")
    assert conditions(odd) == [("Failed", "True", "TrainingRuntimeNotSupported")]
    assert odd["status"]["conditions"][0]["message"] == "unsupported runtime: Runtime.trainer.kubeflow.org"


def test_a_trainjob_managed_by_multikueue_is_left_alone(api, ks, ns):
    body = trainjob_body("mk")
    body["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    create(api, ns, body)
    ks.advance(0)
    status, _ = raw(api, "GET", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/mk")
    assert status == 404
