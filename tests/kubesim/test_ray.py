"""KubeRay's RayCluster and RayJob served by kubesim without Kueue (kubesim.apiserver.controllers.raycluster_controller,
rayjob_controller): their vendored CRDs (defaults, strict schema, CEL, status subresource) and what the operator does,
observed through the official client."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from kubesim.apiserver.registry.resources import crd_schema
from kubesim.apiserver.validation import cel
from kubesim.apiserver.validation import schema as validation
from kubesim.kernel.clock import parse_rfc3339
from kubesim.testing import InProcessKubesim
from tests.kubesim import ray as R
from tests.kubesim.conftest import http, raw


def _cluster(api: SimpleNamespace, ns: str, name: str) -> dict:
    return R.read(api.custom, ns, "rayclusters", name)


def _job(api: SimpleNamespace, ns: str, name: str) -> dict:
    return R.read(api.custom, ns, "rayjobs", name)


# -- the CRDs ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("plural", "count"), [("rayclusters", 3), ("rayjobs", 9)])
def test_every_cel_rule_of_the_kuberay_crds_compiles(plural: str, count: int):
    """RayJob repeats the RayCluster spec's rules under rayClusterSpec."""
    rules = validation.known_rules(crd_schema(plural))
    assert len(rules) == count
    for rule in rules:
        cel.compile_rule(rule)


def test_raycluster_crd_defaults_worker_groups(api: SimpleNamespace, ns: str):
    created = R.create(api.custom, ns, R.raycluster_body("rc", {"groupName": "w", "template": R.group_template("w")}))
    group = created["spec"]["workerGroupSpecs"][0]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"], group["numOfHosts"]) == (
        0,
        0,
        2147483647,
        1,
    )


def test_rayjob_crd_defaults_submission_mode(api: SimpleNamespace, ns: str):
    created = R.create(api.custom, ns, R.rayjob_body("rj", suspend=True))
    assert created["spec"]["submissionMode"] == "K8sJobMode"


def test_raycluster_managed_by_is_checked_by_its_cel_rule(api: SimpleNamespace, ns: str):
    with pytest.raises(ApiException) as err:
        R.create(api.custom, ns, R.raycluster_body("rc", managedBy="someone"))
    assert err.value.status == 422
    assert "the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'" in (
        err.value.body
    )


def test_rayjob_deletion_strategy_rules_are_cel(api: SimpleNamespace, ns: str):
    body = R.rayjob_body("rj", deletionStrategy={"onSuccess": {"policy": "DeleteCluster"}})
    with pytest.raises(ApiException) as err:
        R.create(api.custom, ns, body)
    assert err.value.status == 422
    assert "deletionStrategy requires either BOTH onSuccess and onFailure" in err.value.body


def test_unknown_fields_are_refused_under_strict_validation(api: SimpleNamespace, ns: str):
    body = R.raycluster_body("rc")
    body["spec"]["headGroupSpec"]["bogus"] = 1
    status, answer = raw(api, "POST", f"/apis/ray.io/v1/namespaces/{ns}/rayclusters?fieldValidation=Strict", body)
    assert status == 400
    assert 'unknown field "spec.headGroupSpec.bogus"' in answer["message"]


def test_status_is_a_subresource(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    R.create(api.custom, ns, R.raycluster_body("rc", suspend=True))
    ks.advance(0)
    R.patch(api.custom, ns, "rayclusters", "rc", {"status": {"state": "ready"}})
    assert _cluster(api, ns, "rc")["status"]["state"] == "suspended"


def test_v1alpha1_is_served_deprecated_and_stored_as_v1(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    body = {**R.raycluster_body("old", R.worker_group("w", 1)), "apiVersion": "ray.io/v1alpha1"}
    resp = http(api, "POST", f"/apis/ray.io/v1alpha1/namespaces/{ns}/rayclusters", body)
    assert resp.status == 201
    assert "ray.io/v1alpha1 RayCluster is deprecated; use ray.io/v1 RayCluster." in resp.headers["Warning"]
    ks.advance(1)
    stored = _cluster(api, ns, "old")
    assert (stored["apiVersion"], stored["status"]["state"]) == ("ray.io/v1", "ready")
    listed = api.custom.list_namespaced_custom_object("ray.io", "v1alpha1", ns, "rayclusters")
    assert [i["apiVersion"] for i in listed["items"]] == ["ray.io/v1alpha1"]
    group = raw(api, "GET", "/apis/ray.io")[1]
    assert [v["version"] for v in group["versions"]] == ["v1", "v1alpha1"]
    assert group["preferredVersion"]["version"] == "v1"


def test_v1alpha1_tables_have_that_versions_printer_columns(api: SimpleNamespace, ns: str):
    """KubeRay's v1alpha1 RayJob declares no printer columns (kubectl shows NAME and AGE); v1 declares six."""
    R.create(api.custom, ns, R.rayjob_body("rj", suspend=True))
    accept = {"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"}

    def columns(version: str) -> list[str]:
        path = f"/apis/ray.io/{version}/namespaces/{ns}/rayjobs"
        resp = api.client.rest_client.pool_manager.request("GET", api.client.configuration.host + path, headers=accept)
        return [c["name"] for c in json.loads(resp.data)["columnDefinitions"]]

    assert columns("v1alpha1") == ["Name", "Age"]
    assert columns("v1") == [
        "Name",
        "job status",
        "deployment status",
        "ray cluster name",
        "start time",
        "end time",
        "age",
    ]


def test_v1alpha1_requests_are_judged_by_its_own_schema(api: SimpleNamespace, ns: str):
    """managedBy is a v1 field: a v1alpha1 request carrying it is refused under Strict, and it is dropped under Warn."""
    body = {**R.raycluster_body("old", managedBy="ray.io/kuberay-operator"), "apiVersion": "ray.io/v1alpha1"}
    path = f"/apis/ray.io/v1alpha1/namespaces/{ns}/rayclusters"
    status, answer = raw(api, "POST", f"{path}?fieldValidation=Strict", body)
    assert (status, answer["message"]) == (400, 'strict decoding error: unknown field "spec.managedBy"')
    resp = http(api, "POST", path, body)
    assert resp.status == 201 and 'unknown field \\"spec.managedBy\\"' in resp.headers["Warning"]
    assert "managedBy" not in _cluster(api, ns, "old")["spec"]


# -- RayCluster ------------------------------------------------------------------------------------------------------


def test_raycluster_runs_a_head_and_its_worker_groups(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    body = R.raycluster_body("rc", R.worker_group("small", 2, {"cpu": "1"}), R.worker_group("big", 1, {"cpu": "2"}))
    R.create(api.custom, ns, body)
    ks.advance(1)
    pods = R.cluster_pods(api.core, ns, "rc")
    roles = sorted((p.metadata.labels["ray.io/node-type"], p.metadata.labels["ray.io/group"]) for p in pods)
    assert roles == [("head", "headgroup"), ("worker", "big"), ("worker", "small"), ("worker", "small")]
    assert all(p.status.phase == "Running" for p in pods)
    head = next(p for p in pods if p.metadata.labels["ray.io/node-type"] == "head")
    assert head.metadata.name.startswith("rc-head-")
    assert "ray start --head" in head.spec.containers[0].args[0]
    status = _cluster(api, ns, "rc")["status"]
    assert status["state"] == "ready"
    assert (status["desiredWorkerReplicas"], status["availableWorkerReplicas"], status["readyWorkerReplicas"]) == (
        3,
        3,
        3,
    )
    assert (status["desiredCPU"], status["head"]["podIP"]) == ("5", head.status.pod_ip)
    assert R.condition(_cluster(api, ns, "rc"), "RayClusterProvisioned")["status"] == "True"
    assert api.core.read_namespaced_service("rc-head-svc", ns).spec.selector == {
        "ray.io/cluster": "rc",
        "ray.io/node-type": "head",
    }


def test_ray_nodes_keep_running(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    R.create(api.custom, ns, R.raycluster_body("rc", R.worker_group("w", 1)))
    ks.advance(3600)
    pods = R.cluster_pods(api.core, ns, "rc")
    assert [(p.status.phase, p.status.container_statuses[0].restart_count) for p in pods] == [("Running", 0)] * 2


def test_suspending_a_raycluster_deletes_its_pods(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    R.create(api.custom, ns, R.raycluster_body("rc", R.worker_group("w", 2)))
    ks.advance(1)
    R.patch(api.custom, ns, "rayclusters", "rc", {"spec": {"suspend": True}})
    ks.advance(1)
    cluster = _cluster(api, ns, "rc")
    assert R.cluster_pods(api.core, ns, "rc") == []
    assert cluster["status"]["state"] == "suspended"
    assert R.condition(cluster, "RayClusterSuspended")["status"] == "True"
    R.patch(api.custom, ns, "rayclusters", "rc", {"spec": {"suspend": False}})
    ks.advance(1)
    assert _cluster(api, ns, "rc")["status"]["state"] == "ready"
    assert len(R.cluster_pods(api.core, ns, "rc")) == 3


def test_scaling_a_worker_group(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    R.create(api.custom, ns, R.raycluster_body("rc", R.worker_group("w", 3)))
    ks.advance(1)
    body = _cluster(api, ns, "rc")
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 1
    api.custom.replace_namespaced_custom_object(*R.RAY, ns, "rayclusters", "rc", body)
    ks.advance(1)
    assert len(R.cluster_pods(api.core, ns, "rc")) == 2
    assert _cluster(api, ns, "rc")["status"]["desiredWorkerReplicas"] == 1


def test_deleting_a_raycluster_deletes_its_pods(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    R.create(api.custom, ns, R.raycluster_body("rc", R.worker_group("w", 1)))
    ks.advance(1)
    api.custom.delete_namespaced_custom_object(*R.RAY, ns, "rayclusters", "rc")
    ks.advance(1)
    assert R.cluster_pods(api.core, ns, "rc") == []


# -- RayJob ----------------------------------------------------------------------------------------------------------


def test_rayjob_runs_its_cluster_and_submitter_then_completes(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    R.create(api.custom, ns, R.rayjob_body("rj", R.worker_group("w", 1), entrypoint="python train.py; sleep 30"))
    ks.advance(1)
    job = _job(api, ns, "rj")
    status = job["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Running", "RUNNING")
    assert "ray.io/rayjob-finalizer" in job["metadata"]["finalizers"]
    cluster = _cluster(api, ns, status["rayClusterName"])
    assert status["rayClusterName"].startswith("rj-")
    assert cluster["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    assert cluster["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert status["rayClusterStatus"]["state"] == "ready"
    submitter = api.batch.read_namespaced_job("rj", ns)
    assert submitter.spec.backoff_limit == 2
    container = submitter.spec.template.spec.containers[0]
    assert (container.name, container.image) == ("ray-job-submitter", R.IMAGE)
    assert f"--submission-id {status['jobId']} -- python train.py; sleep 30" in container.args[0]
    ks.advance(30)
    status = _job(api, ns, "rj")["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert status["message"] == "Job finished successfully."
    assert status["succeeded"] == 1 and status["endTime"]
    assert R.cluster_pods(api.core, ns, status["rayClusterName"]) == []  # shutdownAfterJobFinishes
    assert api.batch.read_namespaced_job("rj", ns).status.succeeded == 1  # the submitter stays for its logs


def test_rayjob_whose_entrypoint_fails_is_failed(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    R.create(api.custom, ns, R.rayjob_body("rj", entrypoint="python train.py; exit 3"))
    ks.advance(1)
    ks.advance(120)  # three submitter attempts with the Job controller's back-off in between
    status = _job(api, ns, "rj")["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"], status["reason"]) == ("Failed", "FAILED", "AppFailed")
    assert status["failed"] == 1


def test_rayjob_run_time_from_the_submitter_template_annotation(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    """An entrypoint that says nothing of its length runs as long as kubesim.io/run-seconds on the submitter says."""
    template = {
        "metadata": {"annotations": {"kubesim.io/run-seconds": "7"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "submit", "image": R.IMAGE}]},
    }
    R.create(api.custom, ns, R.rayjob_body("rj", entrypoint="python train.py", submitterPodTemplate=template))
    start = _job(api, ns, "rj")["status"]["startTime"]
    ks.advance(6)
    assert _job(api, ns, "rj")["status"]["jobDeploymentStatus"] == "Running"
    ks.advance(1)
    status = _job(api, ns, "rj")["status"]
    assert status["jobDeploymentStatus"] == "Complete"
    assert (parse_rfc3339(status["endTime"]) - parse_rfc3339(start)).total_seconds() == 7


def test_rayjob_keeps_its_cluster_for_the_time_to_live(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    R.create(api.custom, ns, R.rayjob_body("rj", entrypoint="sleep 5", ttlSecondsAfterFinished=60))
    ks.advance(1)
    ks.advance(5)
    name = _job(api, ns, "rj")["status"]["rayClusterName"]
    assert _job(api, ns, "rj")["status"]["jobDeploymentStatus"] == "Complete"
    assert len(R.cluster_pods(api.core, ns, name)) == 1
    ks.advance(60)
    assert R.cluster_pods(api.core, ns, name) == []


def test_suspending_a_rayjob_tears_its_cluster_down(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    R.create(api.custom, ns, R.rayjob_body("rj", R.worker_group("w", 1), entrypoint="sleep 300"))
    ks.advance(1)
    first = _job(api, ns, "rj")["status"]["rayClusterName"]
    R.patch(api.custom, ns, "rayjobs", "rj", {"spec": {"suspend": True}})
    ks.advance(1)
    status = _job(api, ns, "rj")["status"]
    assert status["jobDeploymentStatus"] == "Suspended"
    assert "rayClusterName" not in status and "jobId" not in status
    assert R.cluster_pods(api.core, ns, first) == []
    assert api.batch.list_namespaced_job(ns).items == []
    R.patch(api.custom, ns, "rayjobs", "rj", {"spec": {"suspend": False}})
    ks.advance(1)
    status = _job(api, ns, "rj")["status"]
    assert status["jobDeploymentStatus"] == "Running"
    assert status["rayClusterName"] != first


def test_rayjob_created_suspended_waits_suspended(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    R.create(api.custom, ns, R.rayjob_body("rj", suspend=True))
    ks.advance(1)
    assert _job(api, ns, "rj")["status"]["jobDeploymentStatus"] == "Suspended"
    assert api.custom.list_namespaced_custom_object(*R.RAY, ns, "rayclusters")["items"] == []
