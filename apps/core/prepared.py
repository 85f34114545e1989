"""Queries the ORM compiles once per process and runs again with new values: for the small, hot queries of the
polls' change markers, where building and compiling the subqueries and aggregates costs the web process several
milliseconds of CPU a call, many times what the database takes to answer (docs/architecture.md, Serving the portal).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.models import QuerySet

# Stand-ins for the values a query is built with: integers no row ever has, found again among the compiled parameters.
_STAND_IN = -7_340_019_851


class PreparedQuery:
    """`build(*stand_ins)` returns the queryset (e.g. `Project.objects.filter(pk=pk).annotate(...)[:1]`); `row(*values)`
    runs its SQL, compiled on the first call for each database, with each stand-in's parameter replaced by the value
    in its place, and returns the first row as the database driver gives it (no ORM conversions: for fingerprints,
    whose parts are only ever compared and hashed)."""

    def __init__(self, build: Callable[..., QuerySet[Any]], *, values: int = 0) -> None:
        self._build = build
        self._values = values
        self._compiled: dict[str, tuple[str, list[Any], dict[int, int]]] = {}

    def _compile(self, using: str) -> tuple[str, list[Any], dict[int, int]]:
        stand_ins = [_STAND_IN - index for index in range(self._values)]
        queryset = self._build(*stand_ins)
        sql, params = queryset.query.get_compiler(using).as_sql()
        slots = {position: stand_ins.index(param) for position, param in enumerate(params)
                 if isinstance(param, int) and param in stand_ins}
        if sorted(set(slots.values())) != list(range(self._values)):
            raise ValueError("Every stand-in must reach the compiled query as a parameter of its own.")
        compiled = (sql, list(params), slots)
        self._compiled[using] = compiled  # a race compiles it twice, to the same thing
        return compiled

    def row(self, *values: Any, using: str = "default") -> tuple[Any, ...] | None:
        if len(values) != self._values:
            raise TypeError(f"This query takes {self._values} values, not {len(values)}.")
        sql, params, slots = self._compiled.get(using) or self._compile(using)
        bound = list(params)
        for position, index in slots.items():
            bound[position] = values[index]
        with connections[using].cursor() as cursor:
            cursor.execute(sql, bound)
            return cursor.fetchone()
