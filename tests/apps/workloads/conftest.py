"""Fixtures for the workload page tests: the demo organisation seeded once per module, a client per persona.

Seeding per test would dominate the access matrices; `wl_seeded` commits the demo once for the module and flushes the
database afterwards (each test still runs in its own rolled-back transaction through `db`).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command


@pytest.fixture(scope="module")
def wl_seeded(django_db_setup, django_db_blocker):
    from apps.org.demo import seed_demo

    with django_db_blocker.unblock():
        seed_demo()
    yield
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture
def people(wl_seeded, db):
    """username -> demo user."""
    from django.contrib.auth import get_user_model

    return {user.username: user for user in get_user_model().objects.all()}


@pytest.fixture
def as_user(people):
    """as_user("alice") -> a test client signed in as that demo user."""
    from django.test import Client

    def make(username: str) -> Client:
        signed_in = Client()
        signed_in.force_login(people[username])
        return signed_in

    return make


@pytest.fixture
def make_workload(people):
    """make_workload("alice", project="vision", ...) -> a submitted workload (through the service)."""
    from apps.org.models import NodePool, Project
    from apps.workloads import services

    def make(owner: str = "alice", *, project: str = "vision", pool: str = "h100", **extra: Any):
        values: dict[str, Any] = {"kind": "training", "name": "run", "image": "pytorch/pytorch:2.4.0", "gpus": 1,
                                  "model_label": "resnet", "data_class": "public", "command": ["sleep", "60"]}
        values.update(extra)
        return services.workload_submit(actor=people[owner], project=Project.objects.get(slug=project),
                                        node_pool=NodePool.objects.get(slug=pool), **values)

    return make
