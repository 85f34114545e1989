"""Django's SQLite backend with the process's write transactions queued in the process.

SQLite has one write lock for every process of `make run` (docs/architecture.md, One writer on SQLite), and a writer
that finds it taken polls for it, sleeping longer the longer it has waited (up to 100 ms a time), while a newcomer
tries at once: under a burst the web's twenty request threads took it in turns and the worker's four threads, polling,
waited seconds. Here the threads of one process queue on a lock of the process before they ask SQLite, so each process
has at most one writer polling: the web's requests wait their turn among themselves, not against the worker.

The queue is bounded by the connection's own busy timeout: a thread that has not got it by then asks SQLite anyway
(and gets SQLite's answer), so a transaction left open cannot hang the process's other writers.
"""

from __future__ import annotations

import threading

from django.db.backends.sqlite3 import base

WRITERS = threading.Lock()


class DatabaseWrapper(base.DatabaseWrapper):
    _queued = False

    def _start_transaction_under_autocommit(self) -> None:
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        self._queued = WRITERS.acquire(timeout=timeout)
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # private in django-stubs
        except BaseException:
            self._leave()
            raise

    def _leave(self) -> None:
        if self._queued:
            self._queued = False
            WRITERS.release()

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]
        finally:
            self._leave()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]
        finally:
            self._leave()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]
        finally:
            self._leave()
