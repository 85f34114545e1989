"""The quota dashboard's reads compiled once per process and scope shape, then run again with the viewer's
departments: building and compiling them (two cohort-share subqueries, the serving units' subquery, the tallies'
union) cost the web process more CPU than the database takes to answer them (docs/architecture.md, Serving the
portal).

A read is a function of the departments on show (None: every one); it is compiled with stand-ins for their ids,
once for each number of departments, and each stand-in's parameter is replaced by the id in its place. Rows go
through the compiler's converters as the ORM's would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from apps.core.prepared import Compiled, compile_with_stand_ins


class ScopedRead:
    """`build(department_ids)` returns the queryset (a values() or values_list() one) of the departments given, or of
    every department for None; `read_together` runs it, compiled on the first call for each database and number of
    departments."""

    def __init__(self, build: Callable[[Sequence[int] | None], QuerySet[Any, Any]]) -> None:
        self._build = build
        self._compiled: dict[tuple[str, int | None], Compiled] = {}

    def _compile(self, using: str, count: int | None) -> Compiled:
        compiled = compile_with_stand_ins(self._build, count, using=using)
        self._compiled[(using, count)] = compiled  # a race compiles it twice, to the same thing
        return compiled

    def compiled(self, department_ids: Sequence[int], *, using: str = "default") -> tuple[str, list[Any]]:
        """The statement and its parameters for these departments (at least one)."""
        compiled = self._compiled.get((using, len(department_ids))) or self._compile(using, len(department_ids))
        return compiled.sql, compiled.bound(department_ids)

    def everything(self, *, using: str = "default") -> tuple[str, list[Any]]:
        """The statement and its parameters for every department."""
        compiled = self._compiled.get((using, None)) or self._compile(using, None)
        return compiled.sql, list(compiled.params)

    def converted(self, fetched: list[Any], department_ids: Sequence[int] | None, *,
                  using: str = "default") -> list[dict[str, Any]]:
        """Rows fetched for these departments as values() gives them (a values_list() read's too, by column)."""
        compiled = self._compiled[(using, None if department_ids is None else len(department_ids))]
        return [dict(zip(compiled.names, row, strict=True))
                for row in compiled.compiler.results_iter(results=[fetched])]


def read_together(department_ids: Sequence[int] | None, *reads: ScopedRead,
                  using: str = "default") -> list[list[dict[str, Any]]]:
    """The rows of each read for these departments (None: every one), as values() gives them. On PostgreSQL the
    statements go in one round trip (psycopg's client-side cursor runs several statements and returns a result set
    each); on SQLite, whose driver runs one statement an execute, one after another. No query for no department
    (what the ORM does with an empty `__in`)."""
    if department_ids is not None and not department_ids:
        return [[] for _ in reads]
    statements = [read.everything(using=using) if department_ids is None else read.compiled(department_ids,
                                                                                           using=using)
                  for read in reads]
    fetched: list[list[Any]] = []
    with connections[using].cursor() as cursor:
        if connections[using].vendor == "postgresql":
            cursor.execute(";\n".join(sql for sql, _ in statements), [p for _, params in statements for p in params])
            fetched.append(cursor.fetchall())
            while cursor.nextset():
                fetched.append(cursor.fetchall())
        else:
            for sql, params in statements:
                cursor.execute(sql, params)
                fetched.append(cursor.fetchall())
    return [read.converted(rows, department_ids, using=using) for read, rows in zip(reads, fetched, strict=True)]
