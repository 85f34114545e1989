"""Fixtures for the workload page tests: submitted workloads (personas and clients: tests/apps/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def make_workload(users):
    """make_workload("alice", project="vision", ...) -> a submitted workload (through the service)."""
    from apps.org.models import NodePool, Project
    from apps.workloads import services

    def make(owner: str = "alice", *, project: str = "vision", pool: str = "h100", **extra: Any):
        values: dict[str, Any] = {"kind": "training", "name": "run", "image": "pytorch/pytorch:2.4.0", "gpus": 1,
                                  "model_label": "resnet", "data_class": "public", "command": ["sleep", "60"]}
        values.update(extra)
        return services.workload_submit(actor=users[owner], project=Project.objects.get(slug=project),
                                        node_pool=NodePool.objects.get(slug=pool), **values)

    return make


@pytest.fixture
def make_outside(demo):
    """make_outside(project="vision", ...) -> a workload submitted outside the portal, as the watcher mirrors it (the
    factory's `outside` trait) in a demo project and pool."""
    from apps.org.models import NodePool, Project
    from tests.factories import WorkloadFactory

    def make(*, project: str = "vision", pool: str = "h100", **extra: Any):
        return WorkloadFactory(outside=True, project=Project.objects.get(slug=project),
                               node_pool=NodePool.objects.get(slug=pool), **extra)

    return make
