"""Numbers and names in words: the helpers every sentence and status line of an explanation is built with."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any, TypeVar

from apps.workloads.capacity import ZERO

from .facts import Peer, Share, WaitFacts

_T = TypeVar("_T")


def _n(value: Decimal | int | None) -> str:
    if value is None:
        return "?"
    value = Decimal(value)
    return format(value.normalize(), "f") if value != value.to_integral() else str(int(value))


def _num(value: Decimal | int | None) -> int | float | None:
    """A number for the API: integral units as integers."""
    if value is None:
        return None
    value = Decimal(value)
    return int(value) if value == value.to_integral() else float(value)


def _ahead(position: int | None) -> str:
    if position is None:
        return ""
    if position == 0:
        return " You are next in line."
    return f" {position} workload{'s are' if position != 1 else ' is'} ahead of you."


def _limit(name: str, used: Decimal, limit: int, units: Decimal | int, *, holders: str = "") -> tuple[str, str]:
    """The sentence's and the headline's words for a limit in the way: "at its limit" only when it is reached;
    below it, that this request would take it over (`holders`: " (Vision 4, others 8)" after the use)."""
    if used >= limit:
        return (f"{name} is at its limit there, {_n(used)} of {limit} in use{holders}",
                f"{name} is at its limit ({_n(used)} of {limit})")
    return (f"{name} has {_n(used)} of its limit of {limit} in use there{holders}; these {_n(units)} would take it "
            "over the limit", f"{name} would go over its limit ({_n(used)} of {limit} in use, asks {_n(units)})")


def _gang(pods: int, per_pod: int, nodes: tuple[int, ...] | None, hosting: int | None) -> str:
    """' (4 pods of 2 each, admitted together; 2 of the pool's 3 nodes can host such a pod)', '' for one pod."""
    if pods <= 1:
        return ""
    where = ""
    if nodes is not None and hosting is not None:
        where = f"; {'none' if hosting == 0 else hosting} of the pool's {_plural(len(nodes), 'node')} can host " \
                "such a pod"
    return f" ({pods} pods of {per_pod} each, admitted together{where})"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _join(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return f"{', '.join(parts[:-1])} and {parts[-1]}"


# Every waiting row of one project on one pool names the same holders and keepers: the very same tuple of shares
# (gather._Standing builds it once per project and pool), and a pool with a hundred projects names a hundred of them.
# Each tuple is put in words once, remembered by identity: hashing and comparing a hundred shares per row cost more
# than the words themselves (a tuple caches no hash, and the next request's equal tuple is another object).
_WORDED = 512


def _once(word: Callable[[tuple[Share, ...]], _T]) -> Callable[[tuple[Share, ...]], _T]:
    """`word` of a tuple of shares, remembered for the last `_WORDED` tuples by identity (the tuple is kept with its
    words, so its id cannot be reused while remembered; the oldest go first)."""
    seen: dict[int, tuple[tuple[Share, ...], _T]] = {}
    forgetting = threading.Lock()  # the web's threads share it: dropping the oldest iterates the dict

    def worded(shares: tuple[Share, ...]) -> _T:
        found = seen.get(id(shares))
        if found is not None and found[0] is shares:
            return found[1]
        words = word(shares)
        with forgetting:
            if len(seen) >= _WORDED:
                seen.pop(next(iter(seen)), None)
            seen[id(shares)] = (shares, words)
        return words

    return worded


def _shares(shares: Iterable[Share]) -> str:
    """'Vision 8, NLP 4, others 4': named projects first by size, the unnamed summed."""
    return _shares_worded(tuple(shares))


@_once
def _shares_worded(shares: tuple[Share, ...]) -> str:
    named = sorted((s for s in shares if s.project is not None and s.units > 0), key=lambda s: (-s.units, s.project))
    hidden = sum((s.units for s in shares if s.project is None), ZERO)
    parts = [f"{s.project} {_n(s.units)}" for s in named]
    if hidden > 0:
        parts.append(f"others {_n(hidden)}")
    return ", ".join(parts)


def _keepers(shares: Iterable[Share]) -> str:
    """Who keeps idle cards: 'Serving (4)', 'a project you cannot see (4)'."""
    return _keepers_worded(tuple(shares))


@_once
def _keepers_worded(shares: tuple[Share, ...]) -> str:
    named = [f"{s.project} ({_n(s.units)})" for s in shares if s.project is not None]
    hidden = [s for s in shares if s.project is None]
    if hidden:
        units = sum((s.units for s in hidden), ZERO)
        what = "a project you cannot see" if len(hidden) == 1 else f"{len(hidden)} projects you cannot see"
        named.append(f"{what} ({_n(units)})")
    return _join(named)


def _share_numbers(shares: Iterable[Share]) -> list[dict[str, Any]]:
    """The shares for the API: named projects first by size, the unnamed summed (a list of its own each call)."""
    return [{"project": project, "units": units} for project, units in _share_pairs(tuple(shares))]


@_once
def _share_pairs(shares: tuple[Share, ...]) -> tuple[tuple[str | None, int | float | None], ...]:
    hidden = sum((s.units for s in shares if s.project is None), ZERO)
    named = sorted((s for s in shares if s.project is not None and s.units > 0), key=lambda s: (-s.units, s.project))
    pairs = [(s.project, _num(s.units)) for s in named]
    if hidden > 0:
        pairs.append((None, _num(hidden)))
    return tuple(pairs)


def _peer(peer: Peer | None) -> dict[str, Any] | None:
    if peer is None:
        return None
    return {"id": peer.id, "name": peer.name, "project": peer.project} if peer.visible else \
        {"id": None, "name": None, "project": None}


def _over_a_cap(f: WaitFacts, *, amount: Decimal | int, preemptible: bool, project: str) -> tuple[str, str] | None:
    """The first cap an amount can never fit, in words, with what to change; None when it fits them all (the
    project's limit, the deserved quota for non-preemptible work, the department's limit, the pool)."""
    if f.limit is not None and amount > f.limit:
        return f"{project} may use at most {f.limit} there", "project_limit"
    if not preemptible and f.deserved is not None and amount > f.deserved:
        return f"non-preemptible work must fit in {project}'s deserved {f.deserved}", "preemptible"
    if f.department_limit is not None and amount > f.department_limit:
        return f"{f.department or 'the department'} may use at most {f.department_limit} there", "department_limit"
    if f.pool_capacity is not None and amount > f.pool_capacity:
        return f"the pool has {f.pool_capacity} in all", "request"
    return None

