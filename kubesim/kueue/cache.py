"""Cheap reads of the store for Kueue's controllers.

`listed` returns the store's own objects (no copy) and reuses one list per resource until that resource changes:
callers must treat them as read-only and `clone` an object before changing and writing it back.
`ChangeGate` lets a controller skip a pass when nothing it reads changed and time stood still; `Changes` names the
objects written since a controller's last pass, so a pass costs what changed rather than what exists.
"""

from __future__ import annotations

import weakref

from kubesim.store import ChangeFeed, clone

_LISTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

__all__ = ["ChangeGate", "Changes", "clone", "listed"]


def listed(store, resource: str) -> list[dict]:
    """The stored objects of a resource, read-only, shared until one of them changes."""
    last = store.last_change(resource)
    per_store = _LISTS.setdefault(store, {})
    hit = per_store.get(resource)
    if hit is not None and hit[0] == last:
        return hit[1]
    items = store.list(resource, copy=False)
    per_store[resource] = (last, items)
    return items


class ChangeGate:
    """Remembers the store position of a controller's last pass."""

    def __init__(self, watches: set[str]) -> None:
        self.watches = tuple(watches)
        self._rv: int | None = None
        self._now = None

    def should_run(self, store) -> bool:
        """True when a watched resource changed or the clock moved since the last call."""
        rv, now = store.resource_version, store.clock.now()
        previous, previous_now = self._rv, self._now
        self._rv, self._now = rv, now
        return previous is None or now != previous_now or store.last_change(*self.watches) > previous


Key = tuple[str, str]  # (namespace or "", name), the store's key


class Changes:
    """A controller's view of the store's change feed: the keys written per resource since its previous call."""

    def __init__(self, *resources: str, status_only: tuple[str, ...] = ()) -> None:
        """status_only: resources whose status-only writes do not count (the queue status controller writes
        ClusterQueue / LocalQueue / Cohort status after nearly every pass; no reader here looks at it)."""
        self._feed = ChangeFeed(*resources)
        self.resources = resources
        self._ignore = frozenset(status_only)

    def since_last(self, store) -> dict[str, dict[Key, dict]] | None:
        """resource -> {key: the object as last written (as deleted for a deletion)}; None when the controller
        must look at everything (first call, or the watch history no longer reaches back to the previous call)."""
        events = self._feed.changed(store)
        if events is None:
            return None
        out: dict[str, dict[Key, dict]] = {r: {} for r in self.resources}
        for e in events:
            if e.resource in self._ignore and _status_only(e):
                continue
            md = e.obj["metadata"]
            out[e.resource][(md.get("namespace") or "", md["name"])] = e.obj
        return out


def _status_only(e) -> bool:
    """Whether a MODIFIED event changed nothing but status (and the resourceVersion)."""
    if e.type != "MODIFIED" or e.prev is None:
        return False
    new, old = e.obj, e.prev
    if any(new.get(k) != old.get(k) for k in new.keys() | old.keys() if k not in ("status", "metadata")):
        return False
    nmd, omd = new["metadata"], old["metadata"]
    return all(nmd.get(k) == omd.get(k) for k in nmd.keys() | omd.keys() if k != "resourceVersion")
