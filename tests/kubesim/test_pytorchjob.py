"""PyTorchJob (kubeflow.org/v1) as a cluster with the Kubeflow training-operator v1.9.4 serves and runs it, without
Kueue: the vendored CRD (discovery, strict validation, CEL, status subresource), the operator's validating webhook,
and its controller (pods and Services, torchrun's environment, status, conditions, suspend and resume, failure).
Everything goes through the official client."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from kubesim.apiserver.registry.resources import crd_schema
from kubesim.apiserver.validation import cel
from kubesim.apiserver.validation import schema as validation
from tests.kubesim.conftest import KUBEFLOW, pytorch_replica, pytorchjob_body, raw


def create(api, ns: str, body: dict, **query) -> dict:
    return api.custom.create_namespaced_custom_object(*KUBEFLOW, ns, "pytorchjobs", body, **query)


def get(api, ns: str, name: str) -> dict:
    return api.custom.get_namespaced_custom_object(*KUBEFLOW, ns, "pytorchjobs", name)


def patch(api, ns: str, name: str, body: dict) -> dict:
    return api.custom.patch_namespaced_custom_object(*KUBEFLOW, ns, "pytorchjobs", name, body)


def conditions(job: dict) -> list[tuple[str, str, str]]:
    """(type, status, reason) in list order: the operator appends the newest last."""
    return [(c["type"], c["status"], c["reason"]) for c in job.get("status", {}).get("conditions", [])]


def pods(api, ns: str) -> dict:
    return {p.metadata.name: p for p in api.core.list_namespaced_pod(ns).items}


def test_every_cel_rule_of_the_pytorchjob_crd_compiles():
    rules = validation.known_rules(crd_schema("pytorchjobs"))
    assert len(rules) == 1
    cel.compile_rule(rules[0])


def test_discovery_serves_pytorchjobs_with_status_but_not_scale(api):
    status, body = raw(api, "GET", "/apis/kubeflow.org/v1")
    assert status == 200
    assert sorted(r["name"] for r in body["resources"]) == ["pytorchjobs", "pytorchjobs/status"]
    status, crd = raw(api, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/pytorchjobs.kubeflow.org")
    assert status == 200 and crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_unknown_fields_are_refused_under_strict_validation(api, ns):
    body = pytorchjob_body("strict", pytorch_replica())
    body["spec"]["pytorchReplicaSpecs"]["Master"]["bogus"] = 1
    with pytest.raises(ApiException) as exc:
        create(api, ns, body, field_validation="Strict")
    assert exc.value.status == 400
    assert 'unknown field "spec.pytorchReplicaSpecs.Master.bogus"' in json.loads(exc.value.body)["message"]


def test_scheduling_policy_queue_is_immutable_by_cel(api, ns):
    create(api, ns, pytorchjob_body("q", pytorch_replica(), schedulingPolicy={"queue": "a"}, suspend=True))
    with pytest.raises(ApiException) as exc:
        patch(api, ns, "q", {"spec": {"runPolicy": {"schedulingPolicy": {"queue": "b"}}}})
    assert exc.value.status == 422
    assert "spec.runPolicy.schedulingPolicy.queue is immutable" in json.loads(exc.value.body)["message"]


MASTER_REPLICAS = "spec.pytorchReplicaSpecs[Master].replicas"


@pytest.mark.parametrize(
    ("case", "body", "message"),
    [
        ("two masters", pytorchjob_body("two", pytorch_replica(2)), f"{MASTER_REPLICAS}: Forbidden: must be 1"),
        ("master without replicas", pytorchjob_body("none", pytorch_replica(None)), f"{MASTER_REPLICAS}: Forbidden"),
        (
            "no pytorch container",
            pytorchjob_body("c", None, {"template": {"spec": {"containers": [{"name": "x", "image": "i"}]}}}),
            "must have at least one container with name pytorch",
        ),
        ("bad name", pytorchjob_body("a.b", pytorch_replica()), "metadata.name: Invalid value"),
    ],
)
def test_operator_webhook_refuses_what_the_operator_cannot_run(api, ns, case, body, message):
    with pytest.raises(ApiException) as exc:
        create(api, ns, body)
    assert exc.value.status == 403, case
    text = json.loads(exc.value.body)["message"]
    assert text.startswith('admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the')
    assert message in text


def test_master_and_workers_run_to_success(api, ks, ns):
    create(api, ns, pytorchjob_body("train", pytorch_replica(1, "sleep 20"), pytorch_replica(2, "sleep 20")))
    ks.advance(0)
    found = pods(api, ns)
    assert sorted(found) == ["train-master-0", "train-worker-0", "train-worker-1"]
    master = found["train-master-0"]
    assert master.metadata.labels == {
        "training.kubeflow.org/job-name": "train",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    env = {e.name: e.value for e in found["train-worker-1"].spec.containers[0].env}
    assert env == {"MASTER_PORT": "23456", "MASTER_ADDR": "train-master-0", "WORLD_SIZE": "3", "RANK": "2",
                   "PYTHONUNBUFFERED": "1"}
    assert found["train-worker-1"].spec.restart_policy == "OnFailure"  # the operator's default, applied in memory
    assert "restartPolicy" not in get(api, ns, "train")["spec"]["pytorchReplicaSpecs"]["Worker"]  # never written
    services = {s.metadata.name: s for s in api.core.list_namespaced_service(ns).items}
    assert sorted(services) == ["train-master-0", "train-worker-0", "train-worker-1"]
    assert services["train-master-0"].spec.cluster_ip == "None"
    assert services["train-master-0"].spec.ports[0].port == 23456
    job = get(api, ns, "train")
    assert conditions(job) == [("Created", "True", "PyTorchJobCreated"), ("Running", "True", "PyTorchJobRunning")]
    assert job["status"]["replicaStatuses"]["Worker"]["active"] == 2
    ks.advance(25)
    job = get(api, ns, "train")
    assert conditions(job) == [
        ("Created", "True", "PyTorchJobCreated"),
        ("Running", "False", "PyTorchJobRunning"),
        ("Succeeded", "True", "PyTorchJobSucceeded"),
    ]
    assert job["status"]["conditions"][-1]["message"] == "PyTorchJob train is successfully completed."
    assert job["status"]["replicaStatuses"]["Master"] == {
        "succeeded": 1,
        "selector": "training.kubeflow.org/job-name=train,training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=master",
    }
    assert "completionTime" in job["status"]
    reasons = [e.reason for e in api.core.list_namespaced_event(ns).items if e.involved_object.kind == "PyTorchJob"]
    assert {"SuccessfulCreatePod", "SuccessfulCreateService", "PyTorchJobSucceeded"} <= set(reasons)


def test_workers_only_job_succeeds_when_every_worker_succeeds(api, ks, ns):
    create(api, ns, pytorchjob_body("w", None, pytorch_replica(2, "sleep 5")))
    ks.advance(10)
    job = get(api, ns, "w")
    assert conditions(job)[-1] == ("Succeeded", "True", "PyTorchJobSucceeded")
    assert job["status"]["conditions"][-1]["message"] == f"PyTorchJob {ns}/w successfully completed."


def test_a_failed_replica_under_restart_policy_never_fails_the_job(api, ks, ns):
    worker = pytorch_replica(1, "sleep 2; exit 3")
    worker["restartPolicy"] = "Never"
    create(api, ns, pytorchjob_body("f", pytorch_replica(1, "sleep 60"), worker, cleanPodPolicy="Running"))
    ks.advance(5)
    job = get(api, ns, "f")
    assert conditions(job)[-1] == ("Failed", "True", "PyTorchJobFailed")
    assert job["status"]["conditions"][-1]["message"] == "PyTorchJob f is failed because 1 Worker replica(s) failed."
    ks.advance(0)
    assert "f-master-0" not in pods(api, ns)  # cleanPodPolicy Running deletes the pods still running


def test_suspend_deletes_pods_and_resume_recreates_them(api, ks, ns):
    body = pytorchjob_body("s", pytorch_replica(1, "sleep 600"), pytorch_replica(1, "sleep 600"), suspend=True)
    create(api, ns, body)
    ks.advance(0)
    assert pods(api, ns) == {}
    job = get(api, ns, "s")
    assert conditions(job)[-1] == ("Suspended", "True", "PyTorchJobSuspended")
    assert "startTime" not in job["status"]
    patch(api, ns, "s", {"spec": {"runPolicy": {"suspend": False}}})
    ks.advance(0)
    assert sorted(pods(api, ns)) == ["s-master-0", "s-worker-0"]
    job = get(api, ns, "s")
    assert [c[:2] for c in conditions(job)][-2:] == [("Suspended", "False"), ("Running", "True")]
    patch(api, ns, "s", {"spec": {"runPolicy": {"suspend": True}}})
    ks.advance(0)
    assert pods(api, ns) == {} and api.core.list_namespaced_service(ns).items == []
    assert get(api, ns, "s")["status"]["replicaStatuses"]["Master"].get("active") is None


def test_a_pytorchjob_managed_by_another_controller_is_left_alone(api, ks, ns):
    create(api, ns, pytorchjob_body("m", pytorch_replica(), managedBy="kueue.x-k8s.io/multikueue"))
    ks.advance(0)
    assert pods(api, ns) == {} and "status" not in get(api, ns, "m")


def test_deleting_a_pytorchjob_deletes_its_pods_and_services(api, ks, ns):
    create(api, ns, pytorchjob_body("d", pytorch_replica(1, "sleep 600")))
    ks.advance(0)
    api.custom.delete_namespaced_custom_object(*KUBEFLOW, ns, "pytorchjobs", "d", propagation_policy="Foreground")
    ks.advance(0)
    assert pods(api, ns) == {} and api.core.list_namespaced_service(ns).items == []
