"""Fixtures for the page tests: signed-in clients for the demo personas (the demo is seeded once per session)."""

from __future__ import annotations

import pytest


@pytest.fixture
def users(demo):
    """username -> demo user."""
    return demo


@pytest.fixture
def page_client(client_for):
    """page_client("alice") -> a test client signed in as that demo user (the root conftest's `client_for`)."""
    return client_for



@pytest.fixture
def wsgi_in_transaction():
    """Django's WSGI application for schemathesis to call in process, its requests inside the test's transaction
    (what they create or delete is rolled back; see tests.api_support.connection_kept)."""
    from django.core.wsgi import get_wsgi_application

    from tests.api_support import connection_kept

    with connection_kept():
        yield get_wsgi_application()


@pytest.fixture
def api_schema(wsgi_in_transaction):
    """The API's OpenAPI schema as schemathesis reads it from /api/v1/schema/, calling the application in process."""
    import schemathesis

    return schemathesis.openapi.from_wsgi("/api/v1/schema/", wsgi_in_transaction)
