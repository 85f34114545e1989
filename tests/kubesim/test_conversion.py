"""Kueue's deprecated kueue.x-k8s.io/v1beta1 served with conversion to the stored v1beta2 (Kueue's field renames)."""

from __future__ import annotations

from kubernetes import client

from kubesim.testing import serve
from tests.kubesim.conftest import http, raw

V1BETA1 = "/apis/kueue.x-k8s.io/v1beta1"


def test_discovery_lists_v1beta1_after_the_preferred_v1beta2(api):
    _, group = raw(api, "GET", "/apis/kueue.x-k8s.io")
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    assert group["preferredVersion"]["version"] == "v1beta2"
    _, resources = raw(api, "GET", V1BETA1)
    assert {"clusterqueues", "workloads", "localqueues"} <= {r["name"] for r in resources["resources"]}


def test_a_v1beta1_cluster_queue_is_stored_as_v1beta2(api):
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "legacy"},
        "spec": {
            "cohort": "research",
            "namespaceSelector": {},
            "flavorFungibility": {"whenCanBorrow": "Borrow"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
                }
            ],
        },
    }
    resp = http(api, "POST", f"{V1BETA1}/clusterqueues", body)
    assert resp.status == 201
    assert resp.headers["Warning"] == '299 - "This version is deprecated. Use v1beta2 instead."'
    _, stored = raw(api, "GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/legacy")
    assert stored["spec"]["cohortName"] == "research" and "cohort" not in stored["spec"]
    assert stored["spec"]["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"

    _, old = raw(api, "GET", f"{V1BETA1}/clusterqueues/legacy")
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert old["spec"]["cohort"] == "research" and "cohortName" not in old["spec"]
    assert old["spec"]["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"  # Kueue's conversion keeps it
    _, listed = raw(api, "GET", f"{V1BETA1}/clusterqueues")
    assert [i["spec"].get("cohort") for i in listed["items"] if i["metadata"]["name"] == "legacy"] == ["research"]


def test_a_v1beta1_workload_priority_class_becomes_a_reference(api, ns):
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "old-style"},
        "spec": {
            "queueName": "lq",
            "priorityClassName": "high",
            "priority": 100,
            "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}},
                }
            ],
        },
    }
    code, created = raw(api, "POST", f"{V1BETA1}/namespaces/{ns}/workloads", body)
    assert code == 201, created
    assert created["spec"]["priorityClassName"] == "high"
    _, stored = raw(api, "GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/old-style")
    assert stored["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }


def test_the_installed_crd_serves_v1beta1_as_deprecated():
    with serve(clock="manual") as with_kueue:
        api_client = with_kueue.api_client()
        crd = client.ApiextensionsV1Api(api_client).read_custom_resource_definition("clusterqueues.kueue.x-k8s.io")
        crd = api_client.sanitize_for_serialization(crd)
        api_client.close()
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert versions["v1beta2"]["storage"] is True
    assert versions["v1beta1"]["served"] is True and versions["v1beta1"]["storage"] is False
    assert versions["v1beta1"]["deprecated"] is True
    assert "cohort" in versions["v1beta1"]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
