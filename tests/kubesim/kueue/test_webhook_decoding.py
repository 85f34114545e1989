"""A quantity Kueue's webhooks cannot decode, answered as kube-apiserver relays it, through the official client.

kube-apiserver decodes a custom resource untyped, runs the mutating webhooks, then the CRD's schema (the OpenAPI
quantity pattern), then the validating webhooks. Kueue's webhooks decode the object into its Go type first; a
quantity that fails resource.Quantity's parser makes controller-runtime answer Errored(400, err), which the API
server relays as 400 `admission webhook "<name>" denied the request: <err>` with no reason (its ToStatusErr). So a
ClusterQueue or Workload created with a malformed quantity is refused by its mutating webhook (mclusterqueue.kb.io,
mworkload.kb.io: create only) before the schema sees it; on update the schema refuses what its pattern refuses (422
Invalid) and the validating webhook (vclusterqueue.kb.io, vcohort.kb.io, vworkload.kb.io) what the pattern admits
but the parser does not (`1e1.5`). Core kinds (a Job) are decoded by kube-apiserver itself: 400 "cannot be handled".
"""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from kubesim.kernel.quantity import QUANTITY_ERROR
from tests.kubesim.kueue.conftest import KUEUE, Cluster


def _answer(call) -> tuple[int, dict]:
    with pytest.raises(ApiException) as err:
        call()
    return err.value.status, json.loads(err.value.body)


def _denied(webhook: str) -> str:
    return f'admission webhook "{webhook}" denied the request: {QUANTITY_ERROR}'


def _cluster_queue(name: str, quota: object = "4", weight: object = "1") -> dict:
    return {
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "fairSharing": {"weight": weight},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": quota}]}],
                }
            ],
        },
    }


def _workload(name: str, cpu: object = "1") -> dict:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    return {
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


@pytest.mark.parametrize("value", ["abc", "1e1.5", True])
def test_a_cluster_queue_created_with_an_undecodable_quantity_is_refused_by_its_mutating_webhook(kc: Cluster, value):
    for body in (_cluster_queue("bad-quota", quota=value), _cluster_queue("bad-weight", weight=value)):
        code, status = _answer(lambda body=body: kc.create("clusterqueues", body))
        assert (code, status["message"]) == (400, _denied("mclusterqueue.kb.io")), status
        assert status["status"] == "Failure" and "reason" not in status and "details" not in status


def test_a_cluster_queue_updated_with_an_undecodable_quantity(kc: Cluster):
    made = kc.create("clusterqueues", _cluster_queue("cq"))
    made["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "1e1.5"
    code, status = _answer(lambda: kc.custom.replace_cluster_custom_object(*KUEUE, "clusterqueues", "cq", made))
    assert (code, status["message"]) == (400, _denied("vclusterqueue.kb.io")), status
    made["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "abc"
    code, status = _answer(lambda: kc.custom.replace_cluster_custom_object(*KUEUE, "clusterqueues", "cq", made))
    assert (code, status["reason"]) == (422, "Invalid"), status  # the CRD's pattern, before any validating webhook
    assert "should match" in status["message"]


def test_a_cohort_with_an_undecodable_weight(kc: Cluster):
    body = {"kind": "Cohort", "metadata": {"name": "co"}, "spec": {"fairSharing": {"weight": "1e1.5"}}}
    code, status = _answer(lambda: kc.create("cohorts", body))
    assert (code, status["message"]) == (400, _denied("vcohort.kb.io")), status
    body["spec"]["fairSharing"]["weight"] = "abc"
    code, status = _answer(lambda: kc.create("cohorts", body))
    assert (code, status["reason"]) == (422, "Invalid"), status  # no mutating webhook for Cohorts: the schema first


@pytest.mark.parametrize("value", ["abc", "1e1.5", True])
def test_a_workload_created_with_an_undecodable_quantity_is_refused_by_its_mutating_webhook(kc: Cluster, value):
    ns = kc.namespace()
    code, status = _answer(lambda: kc.create("workloads", _workload("bad", value), ns))
    assert (code, status["message"]) == (400, _denied("mworkload.kb.io")), status
    assert "reason" not in status


def test_a_workload_status_with_an_undecodable_quantity_is_refused_by_its_validating_webhook(kc: Cluster):
    ns = kc.namespace()
    made = kc.create("workloads", _workload("wl"), ns)
    made["status"] = {"resourceRequests": [{"name": "main", "resources": {"cpu": "1e1.5"}}]}
    replace = kc.custom.replace_namespaced_custom_object_status
    code, status = _answer(lambda: replace(*KUEUE, ns, "workloads", "wl", made))
    assert (code, status["message"]) == (400, _denied("vworkload.kb.io")), status
    made["status"]["resourceRequests"][0]["resources"]["cpu"] = "abc"
    code, status = _answer(lambda: replace(*KUEUE, ns, "workloads", "wl", made))
    assert (code, status["reason"]) == (422, "Invalid"), status
    assert status["details"]["causes"][0]["field"] == "status.resourceRequests[0].resources.cpu"


def test_a_workload_spec_updated_with_an_undecodable_quantity(kc: Cluster):
    ns = kc.namespace()
    made = kc.create("workloads", _workload("wl"), ns)
    containers = made["spec"]["podSets"][0]["template"]["spec"]["containers"]
    containers[0]["resources"]["requests"]["cpu"] = "1e1.5"
    call = lambda: kc.custom.replace_namespaced_custom_object(*KUEUE, ns, "workloads", "wl", made)  # noqa: E731
    code, status = _answer(call)
    assert (code, status["message"]) == (400, _denied("vworkload.kb.io")), status
    containers[0]["resources"]["requests"]["cpu"] = "abc"
    code, status = _answer(call)
    assert (code, status["reason"]) == (422, "Invalid"), status  # the CRD's pod template schema carries the pattern
    field = "spec.podSets[0].template.spec.containers[0].resources.requests.cpu"
    assert status["details"]["causes"][0]["field"] == field
    assert kc.get("workloads", "wl", ns)["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1"}
    }


def test_a_job_is_decoded_by_the_api_server_itself(kc: Cluster):
    ns = kc.namespace()
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1e1.5"}}}],
                }
            }
        },
    }
    code, status = _answer(lambda: kc.batch.create_namespaced_job(ns, job))
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == f'Job in version "v1" cannot be handled as a Job: {QUANTITY_ERROR}'
