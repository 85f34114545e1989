"""Where a row hangs off the scope tree (everything > department > project), in types mypy checks.

The access module (`apps.accounts.access`) sits below the apps whose rows it scopes, so it imports none of their
models. Each scoped model declares instead, as a class attribute, the lookups from its rows to the tree
(`access_paths`); a department or a project says which node of the tree it is (`access_scope()`), and so do the
installation-wide rows (node pools, priority classes), which belong to no department. A model that does not declare
its paths, or misspells them, is refused by mypy where it is handed to `restrict` or `can`; that each path names a
real lookup of its model is a test's (tests/apps/accounts/test_access_paths.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self, TypeVar


@dataclass(frozen=True)
class AccessPaths:
    """The lookups from a scoped model's rows to the scope tree, as `access.restrict` filters them."""

    departments: tuple[str, ...] = ()  # lookups naming the department(s) a row belongs to (any match counts)
    project: str | None = None  # the lookup naming its project, if it belongs to one
    member_department: str | None = None  # a department lookup that members of one of its projects may VIEW through
    owner: str | None = None  # a user lookup: the row's owner always VIEWs it


class ScopedModel(Protocol):
    """A model whose rows `access.restrict` scopes: it declares `access_paths: ClassVar[AccessPaths] = ...`."""

    access_paths: ClassVar[AccessPaths]


ScopedModelT_co = TypeVar("ScopedModelT_co", bound=ScopedModel, covariant=True)


class ScopedRows(Protocol[ScopedModelT_co]):
    """A queryset of a scoped model, as much of it as `access.restrict` uses. (A QuerySet's model must be a Model,
    which a Protocol cannot be, so `restrict` takes any queryset of this shape and returns the same type.)"""

    @property
    def model(self) -> type[ScopedModelT_co]: ...

    def none(self) -> Self: ...

    def filter(self, *args: Any, **kwargs: Any) -> Self: ...


class Scoped(Protocol):
    """What `access.can` is asked about: a node of the scope tree (a department, a project), or an installation-wide
    row (a node pool, a priority class), whose scope is None."""

    def access_scope(self) -> tuple[int, int | None] | None:
        """(department id, project id or None); None for what belongs to the whole installation."""
        ...


class ScopeNode(Protocol):
    """A department or a project: a node of the scope tree."""

    def access_scope(self) -> tuple[int, int | None]:
        """(department id, project id or None)."""
        ...
