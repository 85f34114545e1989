"""Helpers for the API tests: JSON calls, the ids of the demo organisation, and a snapshot of what can change."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.test import Client

API = "/api/v1/"

def call(client: Client, method: str, path: str, body: dict[str, Any] | None = None, **extra: Any) -> Any:
    """One API call; `path` is relative to /api/v1/."""
    url = path if path.startswith("/") else API + path
    handler = getattr(client, method.lower())
    if method.upper() in {"GET", "HEAD", "OPTIONS"}:
        return handler(url, **extra)
    return handler(url, data=body or {}, content_type="application/json", **extra)


@contextmanager
def connection_kept() -> Iterator[None]:
    """Requests made through Django's WSGI application (not the test client) keep the test's database connection:
    the start and end of a request close it otherwise, and the test's transaction with it. The test client
    reconnects the closing after each of its own requests, so calls after one of those need this again."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    try:
        yield
    finally:
        for signal in (request_started, request_finished):
            signal.connect(close_old_connections)


def personal_token(user: Any, *, warm: bool = True) -> str:
    """A new personal access token of `user` (through the service); `warm` uses it once, so its first-use
    "last used" stamp (one UPDATE) is behind it and query counts show the steady state."""
    from apps.accounts.services import personal_token_create

    _, secret = personal_token_create(user=user, name="test")
    if warm:
        assert call(Client(), "GET", "me/", HTTP_AUTHORIZATION=f"Token {secret}").status_code == 200
    return secret


def demo_ids() -> dict[str, int]:
    """Ids of the demo rows the tests address, under short names (vision, q_vision_h100, rb_alice, ...)."""
    from apps.accounts.models import RoleBinding
    from apps.org.models import Department, NodePool, PriorityClass, Project, Quota

    ids: dict[str, int] = {}
    for department in Department.objects.all():
        ids[department.slug.replace("-", "_")] = department.pk
    for project in Project.objects.all():
        ids[project.slug] = project.pk
    for pool in NodePool.objects.all():
        ids["pool_" + pool.slug.replace("-", "_")] = pool.pk
    for priority_class in PriorityClass.objects.all():
        ids["pc_" + priority_class.name.replace("-", "_")] = priority_class.pk
    for quota in Quota.objects.select_related("node_pool", "department", "project"):
        ids[f"q_{quota.owner.slug.replace('-', '_')}_{quota.node_pool.slug.replace('-', '_')}"] = quota.pk
    for binding in RoleBinding.objects.filter(user__isnull=False).select_related("user"):
        ids[f"rb_{binding.user.username}"] = binding.pk
    return ids


def org_state() -> dict[str, Any]:
    """Everything an API write could change, to show that a refused one changed nothing."""
    from apps.accounts.models import RoleBinding
    from apps.core.models import AuditEvent
    from apps.org.models import Department, NodePool, PriorityClass, Project, Quota

    def rows(model: Any, *exclude: str) -> list[tuple]:
        names = [f.attname for f in model._meta.concrete_fields if f.name not in {"created_at", *exclude}]
        return list(model.objects.order_by("pk").values_list(*names))

    return {
        "pools": rows(NodePool), "departments": rows(Department), "projects": rows(Project),
        "quotas": rows(Quota), "priority_classes": rows(PriorityClass), "bindings": rows(RoleBinding),
        "audit": AuditEvent.objects.count(),
    }
