"""The shared parts of the access-matrix tests (pages and API): the demo personas in column order, rows of expected
status codes, demo ids filled into paths and bodies, and one request made as every persona."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import pytest
from django.db import transaction

from apps.org.demo import USERS as DEMO_USERS

# The matrices' columns: every demo persona, from the widest role to the narrowest.
USERS: tuple[str, ...] = tuple(user.username for user in DEMO_USERS)


def row(*statuses: int) -> dict[str, int]:
    """One expected status code per persona, in the order of USERS."""
    assert len(statuses) == len(USERS)
    return dict(zip(USERS, statuses, strict=True))


def matrix_params(matrix: list[tuple[str, str, str, Any, tuple[int, ...]]]) -> list[Any]:
    """(id, method, path, body, codes) rows -> pytest params (method, path, body, {persona: code})."""
    return [pytest.param(method, path, body, row(*codes), id=name) for name, method, path, body, codes in matrix]


def fill_ids(value: Any, ids: dict[str, int]) -> Any:
    """A request body with every "{key}" string replaced by ids[key] (nested dicts and lists too)."""
    if isinstance(value, dict):
        return {key: fill_ids(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [fill_ids(item, ids) for item in value]
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        return ids[value[1:-1]]
    return value


def as_every_user(request: Callable[[str], Any], state: Callable[[], Any],
                  capture: Callable[[], AbstractContextManager[list]] | None = None) -> dict[str, tuple[int, list]]:
    """{persona: (status code, on-commit callbacks)} of `request(persona)`, each made in a transaction rolled back
    after it; a refused request (4xx) must leave `state()` as it was. `capture` is pytest-django's
    django_capture_on_commit_callbacks when the callbacks matter."""
    outcomes = {}
    for username in USERS:
        with transaction.atomic():
            before = state()
            with capture() if capture else nullcontext([]) as callbacks:
                response = request(username)
            outcomes[username] = (response.status_code, list(callbacks))
            if response.status_code >= 400:
                assert state() == before, f"{username}: a refused request changed something"
            transaction.set_rollback(True)
    return outcomes
