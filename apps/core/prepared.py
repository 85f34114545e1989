"""Queries the ORM compiles once per process and runs again with new values: for the small, hot queries of the
polls' change markers, where building and compiling the subqueries and aggregates costs the web process several
milliseconds of CPU a call, many times what the database takes to answer (docs/architecture.md, Serving the portal).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import QuerySet
from django.db.models.sql.compiler import SQLCompiler

# Stand-ins for the values a query is built with: integers no row ever has, found again among the compiled parameters.
_STAND_IN = -7_340_019_851


@dataclass(frozen=True)
class Compiled:
    """A query's SQL and parameters, with the parameter positions each stand-in reached (position -> value index)."""

    sql: str
    params: tuple[Any, ...]
    slots: dict[int, int]
    compiler: SQLCompiler
    names: tuple[str, ...]  # the columns' names as values() names them, read before compiling changes the query

    def bound(self, values: Sequence[Any]) -> list[Any]:
        """The parameters with each stand-in replaced by the value in its place."""
        bound = list(self.params)
        for position, index in self.slots.items():
            bound[position] = values[index]
        return bound


def compile_with_stand_ins(build: Callable[[list[int] | None], QuerySet[Any, Any]], count: int | None, *,
                           using: str = "default") -> Compiled:
    """`build` called with `count` stand-ins (None: none at all), compiled; every stand-in must reach the SQL as a
    parameter of its own, so that binding values later changes nothing else."""
    stand_ins = None if count is None else [_STAND_IN - index for index in range(count)]
    query = build(stand_ins).query
    names = tuple(query.selected) if query.selected is not None else (
        *query.extra_select, *query.values_select, *query.annotation_select)
    compiler = query.get_compiler(using)
    sql, params = compiler.as_sql()
    slots = {position: stand_ins.index(param) for position, param in enumerate(params)
             if stand_ins and isinstance(param, int) and param in stand_ins}
    if count is not None and sorted(set(slots.values())) != list(range(count)):
        raise ValueError("Every stand-in must reach the compiled query as a parameter of its own.")
    return Compiled(sql, tuple(params), slots, compiler, names)


class PreparedQuery:
    """`build(*stand_ins)` returns the queryset (e.g. `Project.objects.filter(pk=pk).annotate(...)[:1]`); `row(*values)`
    runs its SQL, compiled on the first call for each database, with each stand-in's parameter replaced by the value
    in its place, and returns the first row as the database driver gives it (no ORM conversions: for fingerprints,
    whose parts are only ever compared and hashed); `rows(*values)` returns every row so (for columns the ORM would
    not convert either: text, integers)."""

    def __init__(self, build: Callable[..., QuerySet[Any]], *, values: int = 0) -> None:
        self._build = build
        self._values = values
        self._compiled: dict[str, Compiled] = {}

    def _compile(self, using: str) -> Compiled:
        compiled = compile_with_stand_ins(lambda stand_ins: self._build(*(stand_ins or [])), self._values,
                                          using=using)
        self._compiled[using] = compiled  # a race compiles it twice, to the same thing
        return compiled

    def _statement(self, values: Sequence[Any], using: str) -> tuple[str, list[Any]]:
        if len(values) != self._values:
            raise TypeError(f"This query takes {self._values} values, not {len(values)}.")
        compiled = self._compiled.get(using) or self._compile(using)
        return compiled.sql, compiled.bound(values)

    def row(self, *values: Any, using: str = "default") -> tuple[Any, ...] | None:
        with connections[using].cursor() as cursor:
            cursor.execute(*self._statement(values, using))
            return cursor.fetchone()

    def rows(self, *values: Any, using: str = "default") -> list[tuple[Any, ...]]:
        with connections[using].cursor() as cursor:
            cursor.execute(*self._statement(values, using))
            return list(cursor.fetchall())
