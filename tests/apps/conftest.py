"""Fixtures for the page tests: the demo organisation seeded once per test module.

The access matrices make hundreds of requests; seeding the demo per test would dominate the run. `seeded_module`
commits the demo once for the module and flushes the database afterwards, so other modules still start empty;
each test still runs in its own rolled-back transaction (it requests `db`).
"""

from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.fixture(scope="module")
def seeded_module(django_db_setup, django_db_blocker):
    from apps.org.demo import seed_demo

    with django_db_blocker.unblock():
        seed_demo()
    yield
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture
def users(seeded_module, db):
    """username -> demo user, from the module's seeded organisation."""
    from django.contrib.auth import get_user_model

    return {user.username: user for user in get_user_model().objects.all()}


@pytest.fixture
def page_client(users):
    """page_client("alice") -> a test client signed in as that demo user (module-seeded organisation)."""
    from django.test import Client

    def make(username: str) -> Client:
        signed_in = Client()
        signed_in.force_login(users[username])
        return signed_in

    return make
