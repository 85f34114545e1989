"""KAI Scheduler's Queue (scheduling.run.ai/v2) and PodGroup (v2alpha2) as kubesim serves them from the vendored
release CRDs: discovery, OpenAPI, strict schema validation, the status subresource, watch."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.crd_schemas import validate_kai_object
from tests.kubesim.conftest import raw

QUEUE = ("scheduling.run.ai", "v2")
PODGROUP = ("scheduling.run.ai", "v2alpha2")


def queue(name: str, **spec: object) -> dict:
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def test_discovery_lists_one_group_with_both_versions_queue_preferred(api):
    _, groups = raw(api, "GET", "/apis")
    (group,) = [g for g in groups["groups"] if g["name"] == "scheduling.run.ai"]
    assert [v["version"] for v in group["versions"]] == ["v2", "v2alpha2"]
    assert group["preferredVersion"]["version"] == "v2"
    _, v2 = raw(api, "GET", "/apis/scheduling.run.ai/v2")
    assert {(r["name"], r["namespaced"]) for r in v2["resources"]} == {("queues", False), ("queues/status", False)}
    _, v2alpha2 = raw(api, "GET", "/apis/scheduling.run.ai/v2alpha2")
    assert {(r["name"], r["namespaced"]) for r in v2alpha2["resources"]} == {
        ("podgroups", True), ("podgroups/status", True)
    }
    assert [r.get("shortNames") for r in v2alpha2["resources"] if r["name"] == "podgroups"] == [["pg"]]
    for name in ("queues.scheduling.run.ai", "podgroups.scheduling.run.ai"):
        crd = api.custom.get_cluster_custom_object("apiextensions.k8s.io", "v1", "customresourcedefinitions", name)
        assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_openapi_documents_the_queue_schema(api):
    _, index = raw(api, "GET", "/openapi/v3")
    _, doc = raw(api, "GET", index["paths"]["apis/scheduling.run.ai/v2"]["serverRelativeURL"])
    schema = doc["components"]["schemas"]["ai.run.scheduling.v2.Queue"]
    assert set(schema["properties"]["spec"]["properties"]["resources"]["properties"]) == {"cpu", "gpu", "memory"}


def test_a_queue_is_created_read_patched_listed_and_deleted(api):
    body = queue("team-a", parentQueue="dept-1", priority=100,
                 resources={"gpu": {"quota": 4, "limit": -1, "overQuotaWeight": 2},
                            "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                            "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}})
    validate_kai_object(body)
    api.custom.create_cluster_custom_object(*QUEUE, "queues", body)
    got = api.custom.get_cluster_custom_object(*QUEUE, "queues", "team-a")
    assert got["spec"]["resources"]["gpu"] == {"quota": 4, "limit": -1, "overQuotaWeight": 2}
    api.custom.patch_cluster_custom_object(*QUEUE, "queues", "team-a", {"spec": {"resources": {"gpu": {"limit": 0}}}})
    listed = api.custom.list_cluster_custom_object(*QUEUE, "queues")["items"]
    assert [(q["metadata"]["name"], q["spec"]["resources"]["gpu"]["limit"]) for q in listed] == [("team-a", 0)]
    api.custom.delete_cluster_custom_object(*QUEUE, "queues", "team-a")
    assert api.custom.list_cluster_custom_object(*QUEUE, "queues")["items"] == []


def test_unknown_and_mistyped_queue_fields_are_refused_under_strict(api):
    body = queue("strict", resources={"gpu": {"quota": 1, "deserved": 1}})
    with pytest.raises(AssertionError, match="deserved"):
        validate_kai_object(body)
    with pytest.raises(ApiException) as exc:
        api.custom.create_cluster_custom_object(*QUEUE, "queues", body, field_validation="Strict")
    assert exc.value.status == 400 and 'unknown field "spec.resources.gpu.deserved"' in json.loads(exc.value.body)[
        "message"]
    with pytest.raises(ApiException) as exc:
        api.custom.create_cluster_custom_object(*QUEUE, "queues", queue("typed", priority="high"))
    assert exc.value.status == 422 and "spec.priority" in json.loads(exc.value.body)["message"]


def test_a_podgroup_is_validated_and_its_status_written_through_the_subresource(api, ns):
    body = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "gang"},
            "spec": {"minMember": 0, "queue": "team-a"}}
    with pytest.raises(ApiException) as exc:
        api.custom.create_namespaced_custom_object(*PODGROUP, ns, "podgroups", body)
    assert exc.value.status == 422 and "spec.minMember" in json.loads(exc.value.body)["message"]
    body["spec"]["minMember"] = 2
    validate_kai_object(body)
    api.custom.create_namespaced_custom_object(*PODGROUP, ns, "podgroups", body)
    api.custom.patch_namespaced_custom_object_status(
        *PODGROUP, ns, "podgroups", "gang", {"status": {"phase": "Pending"}})
    got = api.custom.get_namespaced_custom_object(*PODGROUP, ns, "podgroups", "gang")
    assert got["status"]["phase"] == "Pending" and got["spec"]["minMember"] == 2
