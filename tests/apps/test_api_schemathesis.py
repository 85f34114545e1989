"""The API against its own OpenAPI schema (schemathesis): for a personal token of each demo role, every operation
is called with inputs generated from the schema, valid ones and invalid ones (a few per operation, bounded in time);
no answer is a 5xx and every answer (errors too) has a documented status, content type and body shape.

The calls go in process to the WSGI application (inside the test's transaction: what they create or delete is rolled
back), so the same generated input meets the same code as over the network.
"""

from __future__ import annotations

import time

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from apps.accounts import services

pytestmark = pytest.mark.slow

ROLES = ["admin", "deptadmin", "lead", "alice", "viewer"]
EXAMPLES_PER_OPERATION = 4
SECONDS_PER_ROLE = 300  # a loaded CI machine; unloaded, one role and mode takes about 20 s
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def wsgi_in_transaction():
    """Django's WSGI application whose requests keep the test's connection (as the test client does: the end of a
    request closes the connection otherwise, and the test's transaction with it)."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield get_wsgi_application()
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("username", ROLES)
def test_every_answer_conforms_to_the_schema(demo, wsgi_in_transaction, username, mode):
    _, secret = services.personal_token_create(user=demo[username], name="schemathesis")
    headers = {"Authorization": f"Token {secret}"}
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", wsgi_in_transaction)
    deadline = time.monotonic() + SECONDS_PER_ROLE
    called: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path == "/api/v1/auth/token/":
            continue  # password sign-in: its lockout counts failures (tests/apps/accounts/test_signin.py)

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def call(case):
            if case.query and "follow" in case.query:
                case.query["timeout"] = 1  # a follow streams until its timeout: one second is enough here
            response = case.call(headers=headers)
            case.validate_response(response, checks=CHECKS)

        try:
            call()
        except Unsatisfiable:
            if mode is GenerationMode.POSITIVE:
                raise
            continue  # nothing of it can be made invalid (no parameters, no body): the positive run covers it
        called.append(f"{operation.method.upper()} {operation.path}")
        assert time.monotonic() < deadline, f"over {SECONDS_PER_ROLE}s after {len(called)} operations"
    assert len(called) >= (45 if mode is GenerationMode.POSITIVE else 30), called
