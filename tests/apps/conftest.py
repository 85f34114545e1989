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
