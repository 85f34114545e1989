"""The workloads API says in its OpenAPI schema what it does: real answers checked with schemathesis's schema
checks (status, content type, body), and the limits the views enforce declared as the views enforce them, each
bound accepted and each value just past it refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from apps.workloads.manifests import MAX_MANIFEST_BYTES
from apps.workloads.models import Kind, Workload
from apps.workloads.services import BULK_STOP_LIMIT
from tests.api_support import call, connection_kept, personal_token
from tests.apps.workloads.test_views_queue import mirror, queued
from tests.worker.manifest_kinds import CASES

CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]
WORKLOADS, DETAIL, BULK_STOP = "/api/v1/workloads/", "/api/v1/workloads/{id}/", "/api/v1/workloads/stop/"
RESUBMIT, LOGS = "/api/v1/workloads/{id}/resubmit/", "/api/v1/workloads/{id}/logs/"


def conforming(api_schema, token: str, method: str, path: str, **case: Any):
    """Call one operation as schemathesis would and check the answer against the schema; the answer."""
    made = api_schema[path][method].Case(headers={"Authorization": f"Token {token}", **case.pop("headers", {})},
                                         **case)
    with connection_kept():
        response = made.call()
    made.validate_response(response, checks=CHECKS)
    return response


def parameter(api_schema, path: str, method: str, name: str) -> dict[str, Any]:
    found = [p for p in api_schema.raw_schema["paths"][path][method.lower()].get("parameters", [])
             if p["name"] == name]
    assert len(found) == 1, f"{method} {path} declares no parameter {name}"
    return found[0]["schema"]


def test_waiting_workloads_in_the_list_and_the_detail_match_the_schema(api_schema, demo, make_workload):
    """A wait's numbers carry the keys of its reason only: `held_back` (and its `held_back_by`) belong to
    not_lendable; the schema must not require them of every reason."""
    mirror(elastic=8)
    waiting = queued(make_workload("alice", name="waits", gpus=4), 0)
    token = personal_token(demo["alice"])
    listed = conforming(api_schema, token, "GET", WORKLOADS).json()["results"]
    numbers = next(row for row in listed if row["id"] == waiting.pk)["waiting"]["numbers"]
    assert "held_back" not in numbers and numbers["requested"] == 4
    detail = conforming(api_schema, token, "GET", DETAIL, path_parameters={"id": waiting.pk}).json()
    assert detail["waiting"]["reason"] == "project_limit" and "held_back" not in detail["waiting"]["numbers"]


def test_bulk_stop_answers_the_array_its_schema_declares(api_schema, demo, make_workload):
    first, second = make_workload("alice", name="one"), make_workload("alice", name="two")
    token = personal_token(demo["alice"])
    stopped = conforming(api_schema, token, "POST", BULK_STOP, body={"ids": [first.pk, second.pk]},
                         media_type="application/json")
    assert stopped.status_code == 202
    assert sorted(row["id"] for row in stopped.json()) == [first.pk, second.pk]
    assert {row["status"] for row in stopped.json()} == {"stopping"}
    operation = api_schema.raw_schema["paths"][BULK_STOP]["post"]
    assert "parameters" not in operation  # it filters and pages nothing


def test_resubmit_takes_a_json_object_or_nothing(api_schema, demo, make_workload, client_for):
    source = make_workload("alice", name="again")
    token = personal_token(demo["alice"])
    client = client_for("alice")
    url = f"/api/v1/workloads/{source.pk}/resubmit/"
    body = api_schema.raw_schema["paths"][RESUBMIT]["post"]["requestBody"]
    assert set(body["content"]) == {"application/json"}
    assert body["content"]["application/json"]["schema"]["type"] == "object"
    for not_an_object in ("null", "5", "[]", '"gpus"'):
        refused = client.post(url, data=not_an_object, content_type="application/json")
        assert refused.status_code == 400, not_an_object
        assert refused.json() == {"non_field_errors": ["Send a JSON object of the fields to change, or nothing."]}
    for form in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        assert client.post(url, data="5", content_type=form).status_code == 415, form
    assert not Workload.objects.filter(resubmitted_from=source).exists()
    assert conforming(api_schema, token, "POST", RESUBMIT, path_parameters={"id": source.pk},
                      body={"gpus": 2}).status_code == 201
    assert client.generic("POST", url).status_code == 201  # no body: submitted again as it was


@pytest.mark.parametrize(("path", "method", "name", "lowest", "highest"), [
    (WORKLOADS, "GET", "limit", 1, 1000),
    (WORKLOADS, "GET", "offset", 0, None),
    (LOGS, "GET", "lines", 1, 100),
    (LOGS, "GET", "timeout", 1, 3600),
])
def test_bounded_query_parameters_are_declared_as_enforced(api_schema, client_for, make_workload, path, method, name,
                                                           lowest, highest):
    declared = parameter(api_schema, path, method, name)
    assert declared["type"] == "integer" and declared["minimum"] == lowest
    if highest is not None:
        assert declared["maximum"] == highest
    url = path.replace("{id}", str(make_workload("alice", name="logs").pk))
    client = client_for("alice")
    for value, accepted in ((lowest, True), (lowest - 1, False), *(((highest, True), (highest + 1, False))
                                                                   if highest is not None else ())):
        response = client.get(url, {name: value} | ({"follow": "false"} if name == "timeout" else {}))
        assert (response.status_code == 200) is accepted, (name, value, response.content[:200])
        if not accepted:
            assert response.status_code == 400 and name in response.json(), (name, value)


def test_bulk_stop_ids_are_declared_as_enforced(api_schema, demo, make_workload, client_for):
    ids = api_schema.raw_schema["components"]["schemas"]["BulkStopRequest"]["properties"]["ids"]
    assert (ids["minItems"], ids["maxItems"], ids["items"]["minimum"]) == (1, BULK_STOP_LIMIT, 1)
    client = client_for("alice")
    for refused in ([], list(range(1, BULK_STOP_LIMIT + 2)), [0]):
        response = call(client, "POST", "workloads/stop/", {"ids": refused})
        assert response.status_code == 400 and "ids" in response.json(), refused[:3]


def test_the_idempotency_key_is_declared_as_enforced(api_schema, demo, client_for):
    declared = parameter(api_schema, WORKLOADS, "POST", "Idempotency-Key")
    assert (declared["minLength"], declared["maxLength"]) == (1, 100)
    assert declared["pattern"] == "^[\\x21-\\x7e]{1,100}$"
    resubmit = parameter(api_schema, RESUBMIT, "POST", "Idempotency-Key")
    assert resubmit == declared
    client = client_for("alice")
    for key in ("", "x" * 101, "with space", "é"):
        response = call(client, "POST", "workloads/", {}, HTTP_IDEMPOTENCY_KEY=key)
        assert response.status_code == 400 and "Idempotency-Key" in response.json(), key


def test_a_dry_run_answers_the_preview_its_schema_declares(api_schema, demo):
    from apps.workloads.models import Workload
    from tests.apps.workloads.test_api_manifests import body, jobset

    assert parameter(api_schema, WORKLOADS, "POST", "dry_run") == {"type": "boolean"}
    token = personal_token(demo["alice"])
    answer = conforming(api_schema, token, "POST", WORKLOADS, body=body(jobset()), query={"dry_run": "true"},
                        media_type="application/json")
    assert answer.status_code == 200 and answer.json()["dry_run"] is True
    assert not Workload.objects.exists()
    responses = api_schema.raw_schema["paths"][WORKLOADS]["post"]["responses"]
    assert {"200", "201"} <= set(responses)


def test_both_submission_bodies_are_documented_and_told_apart_by_kind(api_schema, demo):
    schemas = api_schema.raw_schema["components"]["schemas"]
    body = api_schema.raw_schema["paths"][WORKLOADS]["post"]["requestBody"]["content"]["application/json"]["schema"]
    submission = schemas[body["$ref"].rsplit("/", 1)[1]]
    assert {ref["$ref"].rsplit("/", 1)[1] for ref in submission["oneOf"]} == {"WorkloadSubmitRequest",
                                                                             "ManifestSubmitRequest"}
    assert submission["discriminator"]["propertyName"] == "kind"
    assert submission["discriminator"]["mapping"]["manifest"].endswith("/ManifestSubmitRequest")
    manifest = schemas["ManifestSubmitRequest"]
    assert set(manifest["required"]) == {"project", "kind", "manifest", "node_pool", "labels"}
    text, obj = manifest["properties"]["manifest"]["oneOf"]
    assert (text["type"], text["maxLength"], obj["type"]) == ("string", MAX_MANIFEST_BYTES, "object")
    kinds = {value for ref in submission["oneOf"]
             for value in schemas[schemas[ref["$ref"].rsplit("/", 1)[1]]["properties"]["kind"]["$ref"]
                                  .rsplit("/", 1)[1]]["enum"]}
    assert kinds == {"training", "notebook", "batch", "manifest"}  # disjoint: a body is one of the two


def test_a_manifest_submission_answers_as_its_schema_says(api_schema, demo):
    token = personal_token(demo["alice"])
    body = {"project": "vision", "kind": "manifest", "manifest": yaml.safe_dump(CASES[Kind.RAYJOB].build(60)),
            "node_pool": "h100", "labels": {"model": "resnet", "data_class": "public"}}
    created = conforming(api_schema, token, "POST", WORKLOADS, body=body, media_type="application/json")
    assert created.status_code == 201 and created.json()["kind"] == "rayjob"
    refused = conforming(api_schema, token, "POST", WORKLOADS, media_type="application/json",
                         body={**body, "manifest": "apiVersion: v1\nkind: Secret\n"})
    assert refused.status_code == 400 and refused.json()["manifest"][0].startswith("kind:")


def _manifest_only(api_schema, app):
    """The API's schema with the submission body narrowed to its manifest shape, so every generated body is one."""
    raw = copy.deepcopy(api_schema.raw_schema)
    for media in raw["paths"][WORKLOADS]["post"]["requestBody"]["content"].values():
        media["schema"] = {"$ref": "#/components/schemas/ManifestSubmitRequest"}
    narrowed = schemathesis.openapi.from_dict(raw)
    narrowed.app = app
    return narrowed


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_fuzzed_manifest_submissions_conform_and_never_answer_5xx(api_schema, wsgi_in_transaction, demo, mode):
    headers = {"Authorization": f"Token {personal_token(demo['alice'])}"}
    operation = _manifest_only(api_schema, wsgi_in_transaction)[WORKLOADS]["POST"]
    statuses: list[int] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=60, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    def submit(case):
        with connection_kept():
            response = case.call(headers=headers)
        statuses.append(response.status_code)
        case.validate_response(response, headers=headers, excluded_checks=[positive_data_acceptance])

    submit()
    assert statuses and max(statuses) < 500


def _leaves(value: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(value, dict):
        return [path] + [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    if isinstance(value, list):
        return [path] + [leaf for index, item in enumerate(value) for leaf in _leaves(item, (*path, index))]
    return [path]


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False)
                           | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=3), max_leaves=6)


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(CASES))
def test_a_manifest_with_any_value_anywhere_is_answered_201_or_400(client_for, kind):
    """Each kind's manifest with one value (or a whole subtree) replaced by any JSON: the checks read every field
    defensively, so the answer is a verdict, never a 500."""
    client = client_for("alice")
    paths = _leaves(CASES[kind].build(60))

    @given(where=st.sampled_from(paths), value=JSON_VALUES)
    @settings(max_examples=40, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def submit(where, value):
        manifest = CASES[kind].build(60)
        if not where:
            manifest = value
        else:
            node = manifest
            for part in where[:-1]:
                node = node[part]
            node[where[-1]] = value
        response = call(client, "POST", "workloads/", {
            "project": "vision", "kind": "manifest", "manifest": manifest, "node_pool": "h100",
            "labels": {"model": "resnet", "data_class": "public"}})
        assert response.status_code in (201, 400), (where, value, response.status_code, response.content[:300])

    submit()
