"""Per-store list cache: Kueue's controllers run one after another inside a settle round and mostly write other
resources (events, status of other kinds), so they share one copy of each list until that resource changes.

Callers must not mutate listed objects without writing them back (a write moves the resourceVersion and so
invalidates the cache).
"""

from __future__ import annotations

import weakref

_LISTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def listed(store, resource: str) -> list[dict]:
    """store.list(resource), shared until an object of that resource changes."""
    rv = store.resource_version
    per_store = _LISTS.setdefault(store, {})
    hit = per_store.get(resource)
    if hit is not None:
        if hit[0] == rv:
            return hit[1]
        if store.compacted_rv <= hit[0] and not any(e.resource == resource for e in store.events_since(hit[0])):
            per_store[resource] = (rv, hit[1])
            return hit[1]
    items = store.list(resource)
    per_store[resource] = (rv, items)
    return items


class ChangeGate:
    """Lets a controller skip a reconcile when none of the resources it watches changed and time stood still."""

    def __init__(self, watches: set[str]) -> None:
        self.watches = watches
        self._rv: int | None = None
        self._now = None

    def should_run(self, store) -> bool:
        """True when the controller must reconcile; remembers the store's position either way."""
        rv, now = store.resource_version, store.clock.now()
        previous, previous_now = self._rv, self._now
        self._rv, self._now = rv, now
        if previous is None or now != previous_now or store.compacted_rv > previous:
            return True
        return any(e.resource in self.watches for e in store.events_since(previous))
