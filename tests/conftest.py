"""Shared fixtures: the demo organisation and one signed-in client per demo persona."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings


def pytest_configure(config: pytest.Config) -> None:
    # One test database per run, so several runs on one machine (developers, CI) never share one.
    database = settings.DATABASES["default"]
    if "postgresql" in database["ENGINE"]:
        database["TEST"] = {**database.get("TEST", {}), "NAME": f"test_{database['NAME']}_{os.getpid()}"}
    else:
        # A file, not SQLite's shared in-memory database: the watcher and worker threads of the end-to-end tests
        # then wait for each other's writes instead of failing with "database table is locked".
        settings.RUN_DIR.mkdir(parents=True, exist_ok=True)
        database["TEST"] = {**database.get("TEST", {}), "NAME": str(settings.RUN_DIR / f"test-{os.getpid()}.sqlite3")}
    # One broker queue per run too, so parallel runs never take each other's tasks.
    settings.CELERY_TASK_DEFAULT_QUEUE = f"portal-test-{os.getpid()}"
    settings.NOTIFICATIONS_QUEUE = f"portal-test-notifications-{os.getpid()}"
    # The suite's expected names use the documented default prefixes, whatever the environment configures (the
    # tests of other prefixes set them per test).
    settings.KUEUE_ROOT_COHORT_PREFIX, settings.KUEUE_DEPARTMENT_COHORT_PREFIX, settings.KUEUE_PROJECT_PREFIX = (
        "portal-", "dept-", "proj-")
    # Fast hashing: the suite logs demo users in thousands of times; production keeps Django's default.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Tests render templates without running collectstatic first (WhiteNoise only needs the folder to exist).
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"} and "postgresql" not in settings.DATABASES["default"][
        "ENGINE"
    ]:
        raise pytest.UsageError("CI=true requires DATABASE_URL to point at PostgreSQL (run through `make test`).")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`make test`), the files of browser tests first, then those of slow tests: each file runs on
    one worker (--dist loadfile, in this order with --no-loadscope-reorder), so the longest start first and end with
    the rest instead of after them. A serial run keeps pytest-django's order."""
    if not hasattr(config, "workerinput"):
        return
    weight: dict[Path, int] = {}
    for item in items:
        rank = 0 if item.get_closest_marker("browser") else 1 if item.get_closest_marker("slow") else 2
        weight[item.path] = min(rank, weight.get(item.path, 2))
    items.sort(key=lambda item: weight[item.path])


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """Every test database starts with the demo organisation, seeded once; each `db` test rolls back to it, and each
    transactional test ends by putting its rows back (tests/seeded_database.py) where Django would empty the tables."""
    from django.db import connection
    from django.test import TransactionTestCase

    from apps.org.demo import seed_demo
    from tests.seeded_database import SeededDatabase

    with django_db_blocker.unblock():
        seed_demo()
        seeded = SeededDatabase.take(connection)
    flush = TransactionTestCase._fixture_teardown

    def restore_seeded(test_case: TransactionTestCase) -> None:
        """What Django's flush does for a transactional test, but back to the seeded rows (Django's own flush for a
        test that limits its apps or uses other databases)."""
        if test_case.available_apps is not None or set(test_case._databases_names()) != {connection.alias}:
            flush(test_case)
        else:
            seeded.restore()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TransactionTestCase, "_fixture_teardown", restore_seeded)
        yield
    with django_db_blocker.unblock():
        seeded.drop()


def demo_users() -> dict:
    """The demo organisation of the README's Quick start (built through the services like an admin would), by username.

    Seeded once per test database (django_db_setup) and put back after every transactional test; seeded again here
    only if a test emptied the tables.
    """
    from django.contrib.auth import get_user_model

    from apps.org.demo import seed_demo

    users = get_user_model().objects
    if not users.filter(username="admin").exists():
        seed_demo()
    return {user.username: user for user in users.all()}


@pytest.fixture
def demo(db):
    """username -> demo user (demo_users)."""
    return demo_users()


@pytest.fixture
def client_for(demo):
    """client_for("alice") -> a Django test client signed in as that demo user."""
    from django.test import Client

    def make(username: str) -> Client:
        signed_in = Client()
        signed_in.force_login(demo[username])
        return signed_in

    return make
