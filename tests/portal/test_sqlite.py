"""portal.sqlite: make run's SQLite backend queues a process's write transactions in the process, so each process
has at most one writer polling SQLite's write lock (docs/architecture.md, One writer on SQLite)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from portal.sqlite.base import WRITERS, DatabaseWrapper


def connect(path: Path, timeout: float = 5) -> DatabaseWrapper:
    """A connection as portal/settings.py makes them for make run (outside Django's registry of connections)."""
    wrapper = DatabaseWrapper({
        "ENGINE": "portal.sqlite", "NAME": str(path), "USER": "", "PASSWORD": "", "HOST": "", "PORT": "",
        "OPTIONS": {"timeout": timeout, "transaction_mode": "IMMEDIATE"}, "TIME_ZONE": None, "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": False, "AUTOCOMMIT": True, "ATOMIC_REQUESTS": False, "TEST": {},
    }, alias="queued")
    wrapper.ensure_connection()
    return wrapper


def begin(wrapper: DatabaseWrapper) -> None:
    wrapper.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)


@pytest.fixture
def database(tmp_path, django_db_blocker):
    """A SQLite file of its own (not the tests' database), so these connections are let through."""
    django_db_blocker.unblock()
    path = tmp_path / "portal.sqlite3"
    with sqlite3.connect(path) as setup:
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute("CREATE TABLE t (x INTEGER)")
    yield path
    django_db_blocker.restore()


def test_a_second_writer_of_the_process_waits_in_the_process_until_the_first_commits(database):
    first = connect(database)
    begin(first)
    assert WRITERS.locked()
    began = threading.Event()

    def write() -> None:
        second = connect(database)  # each thread its own connection, as Django's are
        begin(second)
        began.set()
        second.cursor().execute("INSERT INTO t VALUES (2)")
        second.commit()
        second.close()

    thread = threading.Thread(target=write)
    thread.start()
    assert not began.wait(0.3)  # queued in the process: it has not asked SQLite
    first.cursor().execute("INSERT INTO t VALUES (1)")
    first.commit()
    thread.join(5)
    assert began.is_set() and not WRITERS.locked()
    assert sorted(row for (row,) in sqlite3.connect(database).execute("SELECT x FROM t")) == [1, 2]
    first.close()


def test_a_rollback_or_a_close_in_a_transaction_leaves_the_queue(database):
    wrapper = connect(database)
    begin(wrapper)
    wrapper.rollback()
    assert not WRITERS.locked()
    begin(wrapper)
    wrapper.close()
    assert not WRITERS.locked()


def test_a_writer_that_waited_the_busy_timeout_asks_sqlite_anyway(database):
    holder, waiter = connect(database), connect(database, timeout=0.2)
    begin(holder)
    started = time.monotonic()
    with pytest.raises(Exception, match="locked"):  # SQLite's own answer, after the queue's and SQLite's timeouts
        begin(waiter)
    assert time.monotonic() - started >= 0.2 and WRITERS.locked()  # the holder still holds it
    holder.commit()
    assert not WRITERS.locked()
    holder.close()
    waiter.close()
