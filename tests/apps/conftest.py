"""Fixtures for the page tests: signed-in clients for the demo personas (the demo is seeded once per session)."""

from __future__ import annotations

import pytest


@pytest.fixture
def users(demo):
    """username -> demo user."""
    return demo


@pytest.fixture
def page_client(users):
    """page_client("alice") -> a test client signed in as that demo user."""
    from django.test import Client

    def make(username: str) -> Client:
        signed_in = Client()
        signed_in.force_login(users[username])
        return signed_in

    return make
