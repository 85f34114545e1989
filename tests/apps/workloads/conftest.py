"""Fixtures for the workload page tests: demo personas, signed-in clients, submitted workloads."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def people(demo):
    """username -> demo user (the name these tests use for `demo`)."""
    return demo


@pytest.fixture
def as_user(client_for):
    """as_user("alice") -> a test client signed in as that demo user (the root conftest's `client_for`)."""
    return client_for


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
