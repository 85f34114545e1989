"""Server-side apply (application/apply-patch+yaml) through the official client's connection: creation, field
managers, kube's conflict Status, force, fields a manager stops applying, and ordinary writes taking ownership."""

from __future__ import annotations

import pytest

from tests.kubesim.conftest import raw

APPLY = "application/apply-patch+yaml"


def _config_map(ns: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}, "data": data}


def _apply(api, ns: str, body: dict, manager: str | None, force: bool = False) -> tuple[int, dict]:
    query = [f"fieldManager={manager}"] if manager else []
    if force:
        query.append("force=true")
    path = f"/api/v1/namespaces/{ns}/configmaps/cfg?" + "&".join(query)
    return raw(api, "PATCH", path, body, content_type=APPLY)


def _owners(obj: dict) -> dict[str, dict]:
    return {m["manager"]: m for m in obj["metadata"]["managedFields"]}


def test_apply_creates_then_records_its_fields(api, ns):
    code, created = _apply(api, ns, _config_map(ns, a="1"), "deployer")
    assert code == 201
    assert created["data"] == {"a": "1"}
    entry = _owners(created)["deployer"]
    assert (entry["operation"], entry["apiVersion"], entry["fieldsType"]) == ("Apply", "v1", "FieldsV1")
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}}}
    code, again = _apply(api, ns, _config_map(ns, a="1"), "deployer")
    assert code == 200
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_apply_needs_a_field_manager(api, ns):
    code, status = _apply(api, ns, _config_map(ns, a="1"), None)
    assert code == 422
    assert status["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )


def test_conflict_is_reported_as_kube_does_and_force_takes_the_field(api, ns):
    _apply(api, ns, _config_map(ns, a="1", b="2"), "deployer")
    code, status = _apply(api, ns, _config_map(ns, a="9", b="2"), "operator")
    assert code == 409
    assert status["reason"] == "Conflict"
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "deployer": .data.a'
    assert status["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "deployer"', "field": ".data.a"}
    ]
    code, status = _apply(api, ns, _config_map(ns, a="9", b="3"), "operator")
    assert status["message"] == 'Apply failed with 2 conflicts: conflicts with "deployer"\n- .data.a\n- .data.b'

    code, forced = _apply(api, ns, _config_map(ns, a="9", b="2"), "operator", force=True)
    assert code == 200
    assert forced["data"] == {"a": "9", "b": "2"}
    owners = _owners(forced)
    assert owners["deployer"]["fieldsV1"] == {"f:data": {"f:b": {}}}  # b had the same value: shared
    assert owners["operator"]["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}


def test_fields_a_manager_stops_applying_are_removed_unless_shared(api, ns):
    _apply(api, ns, _config_map(ns, a="1", b="2", c="3"), "deployer")
    _apply(api, ns, _config_map(ns, c="3"), "operator")
    code, after = _apply(api, ns, _config_map(ns, a="1"), "deployer")
    assert code == 200
    assert after["data"] == {"a": "1", "c": "3"}  # b dropped; c still applied by operator


def test_an_ordinary_write_takes_the_fields_it_changes(api, ns):
    assert _apply(api, ns, _config_map(ns, a="1"), "deployer")[0] == 201
    path = f"/api/v1/namespaces/{ns}/configmaps/cfg?fieldManager=hand-edit"
    code, _ = raw(api, "PATCH", path, {"data": {"a": "5"}}, content_type="application/merge-patch+json")
    assert code == 200
    code, status = _apply(api, ns, _config_map(ns, a="1"), "deployer")
    assert code == 409
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "hand-edit" using v1: .data.a'


@pytest.mark.parametrize("body", [{"data": {"a": "1"}}, "not an object"])
def test_an_apply_body_must_be_a_typed_object(api, ns, body):
    code, status = raw(api, "PATCH", f"/api/v1/namespaces/{ns}/configmaps/cfg?fieldManager=x", body, APPLY)
    assert code == 400
    assert "apiVersion and kind" in status["message"]


def _deployment(ns: str, *containers: dict) -> dict:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": list(containers)}},
        },
    }


def test_keyed_lists_merge_by_key_and_conflicts_name_the_item(api, ns):
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/web?fieldManager="
    code, _ = raw(api, "PATCH", path + "deployer", _deployment(ns, {"name": "web", "image": "nginx:1"}), APPLY)
    assert code == 201
    code, status = raw(api, "PATCH", path + "ops", _deployment(ns, {"name": "web", "image": "nginx:2"}), APPLY)
    assert code == 409
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "deployer": .spec.template.spec.containers[name="web"].image'
    )
    code, merged = raw(api, "PATCH", path + "ops", _deployment(ns, {"name": "proxy", "image": "envoy:1"}), APPLY)
    assert code == 200
    containers = merged["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("web", "nginx:1"), ("proxy", "envoy:1")]
