"""What a piece of code asks of the database's writer, read off the statements it ran (a CaptureQueriesContext):
the transactions it would open outside a test. On SQLite (make run) each one is `BEGIN IMMEDIATE`, so each waits
for the database's one write lock and holds it until it commits (docs/architecture.md, One writer on SQLite).

Inside a test everything runs in the test's transaction, so the code's own transactions show as savepoints: an
outermost savepoint block is one transaction, and a write outside any block is one more (autocommit).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

WRITES = ("INSERT", "UPDATE", "DELETE")


def transactions(captured: Iterable[dict[str, Any]]) -> list[list[str]]:
    """The statements of each transaction that takes the write lock, in order (savepoint markers left out)."""
    found: list[list[str]] = []
    depth = 0
    for query in captured:
        sql = query["sql"].strip()
        upper = sql.upper()
        if upper.startswith("SAVEPOINT"):
            if depth == 0:
                found.append([])
            depth += 1
        elif upper.startswith("RELEASE SAVEPOINT"):  # Django releases a savepoint it rolled back too
            depth -= 1
        elif depth:
            found[-1].append(sql)
        elif upper.startswith(WRITES):
            found.append([sql])
    return found


def described(statements: list[str]) -> list[str]:
    """Each statement as its verb and table, e.g. `UPDATE workloads_workload`, for assertions that read."""
    out = []
    for sql in statements:
        words = sql.replace('"', "").split()
        verb = words[0].upper()
        if verb == "UPDATE":
            table = words[1]
        elif verb in ("INSERT", "DELETE"):
            table = words[2]
        elif "FROM" in (upper := [word.upper() for word in words]):
            table = words[upper.index("FROM") + 1].split(".")[0]
        else:  # a function's call, e.g. `SELECT pg_advisory_xact_lock`
            table = words[1].split("(")[0]
        out.append(f"{verb} {table}")
    return out
