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
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import QuerySet
from django.db.models.sql.compiler import SQLCompiler

# Stand-ins for department ids: integers no row ever has, found again among the compiled parameters.
_STAND_IN = -6_520_377_113


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]
    slots: dict[int, int]  # parameter position -> index of the department id it stands for
    compiler: SQLCompiler
    names: tuple[str, ...]  # the columns' names, as values() names them


class ScopedRead:
    """`build(department_ids)` returns the queryset (a values() or values_list() one) of the departments given, or of
    every department for None; `rows(department_ids)` runs it, compiled on the first call for each database and
    number of departments."""

    def __init__(self, build: Callable[[Sequence[int] | None], QuerySet[Any, Any]]) -> None:
        self._build = build
        self._compiled: dict[tuple[str, int | None], _Compiled] = {}

    def _compile(self, using: str, count: int | None) -> _Compiled:
        stand_ins = None if count is None else [_STAND_IN - index for index in range(count)]
        query = self._build(stand_ins).query
        compiler = query.get_compiler(using)
        sql, params = compiler.as_sql()
        slots = {position: stand_ins.index(param) for position, param in enumerate(params)
                 if stand_ins and isinstance(param, int) and param in stand_ins}
        if count is not None and sorted(set(slots.values())) != list(range(count)):
            raise ValueError("Every department's stand-in must reach the compiled query as a parameter of its own.")
        names = tuple(query.selected) if query.selected is not None else (
            *query.extra_select, *query.values_select, *query.annotation_select)
        compiled = _Compiled(sql, tuple(params), slots, compiler, names)
        self._compiled[(using, count)] = compiled  # a race compiles it twice, to the same thing
        return compiled

    def tuples(self, department_ids: Sequence[int] | None, *, using: str = "default") -> list[tuple[Any, ...]]:
        """The rows as tuples, in the columns' order. No query when no department is given (nothing to read)."""
        return [tuple(row) for row in self._run(department_ids, using)[1]]

    def dicts(self, department_ids: Sequence[int] | None, *, using: str = "default") -> list[dict[str, Any]]:
        """The rows as values() gives them."""
        names, rows = self._run(department_ids, using)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def _run(self, department_ids: Sequence[int] | None, using: str) -> tuple[tuple[str, ...], Any]:
        count = None if department_ids is None else len(department_ids)
        if count == 0:
            return (), []  # what the ORM does with an empty `__in`
        compiled = self._compiled.get((using, count)) or self._compile(using, count)
        bound = list(compiled.params)
        for position, index in compiled.slots.items():
            bound[position] = department_ids[index]  # type: ignore[index]
        with connections[using].cursor() as cursor:
            cursor.execute(compiled.sql, bound)
            fetched = cursor.fetchall()
        return compiled.names, compiled.compiler.results_iter(results=[fetched])
