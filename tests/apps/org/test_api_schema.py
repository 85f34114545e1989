"""The OpenAPI schema: generated without warnings, valid, and served with its Swagger page."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from drf_spectacular.validation import validate_schema


def test_schema_generates_without_warnings(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    assert "/api/v1/quotas/{id}/" in target.read_text()


@pytest.mark.parametrize("username", ["admin", "alice"])
def test_schema_endpoint_serves_valid_openapi(client_for, username):
    response = client_for(username).get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)
    assert schema["info"]["title"] == "GPU Portal API"
    paths = set(schema["paths"])
    for path in ("me", "node-pools", "departments", "projects", "quotas", "priority-classes", "role-bindings",
                 "audit-events", "cluster-queues", "local-queues", "cohorts", "flavors", "nodes", "data-sources",
                 "pull-secrets", "credentials", "held-idle", "idle-policy", "usage/holders", "usage/over-time"):
        assert f"/api/v1/{path}/" in paths
    # The pages' reads are read-only in the API, the idle rule excepted (its page changes it).
    for path in ("cluster-queues", "local-queues", "cohorts", "flavors", "nodes", "data-sources", "pull-secrets",
                 "credentials", "held-idle", "usage/holders", "usage/over-time"):
        assert set(schema["paths"][f"/api/v1/{path}/"]) == {"get"}, path
    assert set(schema["paths"]["/api/v1/idle-policy/"]) == {"get", "patch"}
    detail = schema["components"]["schemas"]["WorkloadDetail"]["properties"]["connect_url"]
    assert detail["nullable"] is True and detail["format"] == "uri"
    assert "password" not in schema["components"]["schemas"]["PullSecret"]["properties"]
    assert "values" not in schema["components"]["schemas"]["Credential"]["properties"]
    assert "/api/v1/auth/token/" in paths
    assert {"get", "patch", "delete"} <= set(schema["paths"]["/api/v1/quotas/{id}/"])
    assert "put" not in schema["paths"]["/api/v1/quotas/{id}/"]  # PATCH only: it changes the fields it names
    table = schema["paths"]["/api/v1/departments/{department}/quotas/"]
    assert set(table) >= {"get", "patch"} and "put" not in table
    assert table["patch"]["requestBody"]["content"]["application/json"]["schema"]["type"] == "array"
    assert {"200", "400", "401", "403", "404", "500"} <= set(table["patch"]["responses"])
    assert "401" not in schema["paths"]["/api/v1/auth/token/"]["post"]["responses"]  # needs no credentials
    # Every operation documents its errors, each with the one error shape (apps/core/api_schema.py).
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            errors = {code: response for code, response in operation["responses"].items() if code[0] in "45"}
            assert {"403", "500"} <= set(errors), (method, path)
            for code, response in errors.items():
                refs = str(response["content"]["application/json"]["schema"])
                assert "#/components/schemas/Error" in refs, (method, path, code)
    assert {"Error", "FieldErrors"} <= set(schema["components"]["schemas"])
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])


def test_docs_page_uses_the_bundled_swagger(client_for):
    response = client_for("viewer").get("/api/v1/docs/")
    assert response.status_code == 200
    assert b"swagger-ui" in response.content
    assert b"/api/v1/schema/" in response.content


@pytest.mark.parametrize("path", ["me/", "node-pools/", "departments/", "projects/", "quotas/", "priority-classes/",
                                  "role-bindings/"])
def test_browsable_api_renders_for_a_scoped_user(client_for, path):
    response = client_for("alice").get("/api/v1/" + path, HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")


def test_errors_are_json_even_for_a_browser(client_for):
    response = client_for("alice").get("/api/v1/workloads/999999/", HTTP_ACCEPT="text/html")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "No Workload matches the given query."}


@pytest.mark.parametrize(("username", "offers_post"), [("admin", True), ("viewer", False)])
def test_options_offers_the_create_form_only_to_creators(client_for, username, offers_post):
    response = client_for(username).options("/api/v1/node-pools/")
    assert response.status_code == 200
    assert ("POST" in response.json().get("actions", {})) is offers_post


def _properties_and_required(schema: dict, component: dict) -> tuple[dict, set]:
    if "$ref" in component:
        return _properties_and_required(schema, schema["components"]["schemas"][component["$ref"].split("/")[-1]])
    return component.get("properties", {}), set(component.get("required", []))


def test_responses_that_carry_a_version_declare_it_required(client_for):
    """A created or read versioned row always answers its `version` (the ETag's): the response schemas say so, so a
    client generated from them need not treat it as optional."""
    schema = client_for("admin").get("/api/v1/schema/", {"format": "json"}).json()
    checked = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for code in ("200", "201"):
                content = operation["responses"].get(code, {}).get("content", {}).get("application/json")
                if not content or "$ref" not in content["schema"]:
                    continue
                properties, required = _properties_and_required(schema, content["schema"])
                if "version" in properties:
                    assert "version" in required, (method, path, code)
                    checked.append(f"{method} {path}")
    for created in ("departments", "node-pools", "priority-classes", "projects", "quotas", "templates"):
        assert f"post /api/v1/{created}/" in checked


@pytest.mark.parametrize(("path", "body"), [
    ("node-pools/", {"slug": "b200", "name": "B200", "gpu_resource": "nvidia.com/gpu", "capacity": 8, "version": 1}),
    ("priority-classes/", {"name": "nightly", "value": 10, "preemptible": True, "version": 1}),
])
def test_a_create_neither_offers_nor_takes_a_version(client_for, path, body):
    """A new row starts at version 1: the server refuses a `version` in a create (400, nothing made), and the
    create's request shape does not offer it, while PATCH's does."""
    from tests.api_support import call

    client = client_for("admin")
    schema = client.get("/api/v1/schema/", {"format": "json"}).json()
    operations = schema["paths"][f"/api/v1/{path}"]
    properties, _ = _properties_and_required(
        schema, operations["post"]["requestBody"]["content"]["application/json"]["schema"])
    assert "version" not in properties
    patched, _ = _properties_and_required(
        schema, schema["paths"][f"/api/v1/{path}{{id}}/"]["patch"]["requestBody"]["content"]["application/json"][
            "schema"])
    assert "version" in patched
    response = call(client, "POST", path, body)
    assert response.status_code == 400 and "version" in response.json().get("fields", response.json()), \
        response.content
    without = call(client, "POST", path, {key: value for key, value in body.items() if key != "version"})
    assert without.status_code == 201, without.content


def test_the_usage_reports_window_is_declared_as_dates_or_date_times(client_for):
    schema = client_for("admin").get("/api/v1/schema/", {"format": "json"}).json()
    for path in ("/api/v1/usage/", "/api/v1/usage/csv/"):
        parameters = {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}
        for name in ("start", "end"):
            formats = {variant.get("format") for variant in parameters[name]["schema"]["anyOf"]}
            assert formats == {"date", "date-time"}, (path, name)
