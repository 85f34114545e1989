"""deploy/admission/submitted-by.yaml: every field is one the Kubernetes API defines (the official client's
admissionregistration.k8s.io/v1beta1 models, generated from the API's OpenAPI schema), kubesim accepts both objects
under strict field validation, and every CEL expression compiles."""

import re
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from kubesim.testing import RequestError, serve

POLICY = Path(__file__).resolve().parents[2] / "deploy" / "admission" / "submitted-by.yaml"
PRIMITIVES = {"str", "int", "bool", "float", "object", "datetime"}


def unknown_fields(value, type_name, path="") -> list[str]:
    """Paths of fields the client's model `type_name` does not define, walking nested models and lists."""
    if type_name.startswith("List["):
        return [f for i, item in enumerate(value) for f in unknown_fields(item, type_name[5:-1], f"{path}[{i}]")]
    if type_name.startswith("Dict[") or type_name in PRIMITIVES:
        return []
    model = getattr(k8s, type_name)
    by_json = {json_name: attr for attr, json_name in model.attribute_map.items()}
    found = []
    for key, item in value.items():
        if key not in by_json:
            found.append(f"{path}.{key}".lstrip("."))
        else:
            found += unknown_fields(item, model.openapi_types[by_json[key]], f"{path}.{key}")
    return found


def shipped():
    return list(yaml.safe_load_all(POLICY.read_text()))


def test_every_field_is_one_the_api_defines():
    kinds = {}
    for obj in shipped():
        assert obj["apiVersion"] == "admissionregistration.k8s.io/v1beta1"
        kinds[obj["kind"]] = obj
        assert unknown_fields(obj, f"V1beta1{obj['kind']}") == []
    assert set(kinds) == {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
    assert kinds["MutatingAdmissionPolicyBinding"]["spec"]["policyName"] == kinds["MutatingAdmissionPolicy"][
        "metadata"]["name"]


def test_the_check_catches_a_misspelt_field():
    policy = shipped()[0]
    policy["spec"]["mutations"][0]["applyConfig"] = policy["spec"]["mutations"][0].pop("applyConfiguration")
    assert unknown_fields(policy, "V1beta1MutatingAdmissionPolicy") == ["spec.mutations[0].applyConfig"]


def test_kubesim_accepts_the_policy_and_refuses_an_expression_it_cannot_compile():
    with serve(clock="manual") as ks:
        for obj in shipped():
            ks.apply(obj)
        broken = shipped()[0]
        broken["metadata"]["name"] = "broken"
        broken["spec"]["mutations"][0]["applyConfiguration"]["expression"] = "Object{metadata: "
        with pytest.raises(RequestError, match=re.escape("spec.mutations[0].applyConfiguration.expression")):
            ks.apply(broken)
