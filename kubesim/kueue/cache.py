"""Cheap reads of the store for Kueue's controllers.

`ListCache.listed` returns the store's own objects (no copy) and reuses one list per resource until that resource
changes: callers must treat them as read-only and `clone` an object before changing and writing it back. The
KueueState of a simulator holds the one ListCache its controllers and visibility share. `Lookup` finds a few stored
objects by key without listing them all. `ChangeGate` lets a controller skip a pass when nothing it reads changed
and time stood still; `Changes` names the objects written since a controller's last pass, so a pass costs what
changed rather than what exists. `Tracked` keeps the few objects a controller's next_deadline must look at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from kubesim.kernel.store import ChangeFeed, Store, WatchEvent, clone

__all__ = ["ChangeGate", "Changes", "Key", "ListCache", "Lookup", "Tracked", "clone"]


class ListCache:
    """The stored objects of each resource, read-only, one list shared until one of them changes."""

    def __init__(self) -> None:
        self._lists: dict[str, tuple[Store, int, list[dict]]] = {}  # resource -> (store, last change, objects)

    def listed(self, store: Store, resource: str) -> list[dict]:
        last = store.last_change(resource)
        hit = self._lists.get(resource)
        if hit is not None and hit[0] is store and hit[1] == last:
            return hit[2]
        items = store.list(resource, copy=False)
        self._lists[resource] = (store, last, items)
        return items


class Lookup:
    """One resource's stored objects by key, read from the store when asked (read-only): a pass that needs a few
    queues looks them up instead of building a dict of all of them."""

    def __init__(self, store: Store, resource: str) -> None:
        self._store = store
        self._resource = resource

    def get(self, key: str | tuple[str, str]) -> dict | None:
        """The object named key (a name, or (namespace, name)), or None."""
        namespace, name = key if isinstance(key, tuple) else ("", key)
        return self._store.get(self._resource, namespace or None, name, copy=False)


class Tracked:
    """The keys of one resource's objects that pass a test, kept current from the objects a controller looks at
    each pass (all of them on a full pass, those written since otherwise): a controller's next_deadline reads these
    few instead of every object. Current once the controller has had its pass after the last write (every settle
    ends so)."""

    def __init__(self, resource: str, test: Callable[[dict], bool]) -> None:
        self.resource = resource
        self.test = test
        self.keys: set[Key] = set()

    def reset(self, objs: Iterable[dict]) -> None:
        """From every object of the resource."""
        self.keys = {_key(o) for o in objs if self.test(o)}

    def update(self, store: Store, keys: Iterable[Key]) -> None:
        """These objects were written (or deleted): look at them again."""
        for key in keys:
            obj = store.get(self.resource, key[0] or None, key[1], copy=False)
            if obj is not None and self.test(obj):
                self.keys.add(key)
            else:
                self.keys.discard(key)

    def objects(self, store: Store) -> list[dict]:
        """The tracked objects as stored now, in store order."""
        return [o for ns, name in sorted(self.keys) if (o := store.get(self.resource, ns or None, name, copy=False))]


def _key(obj: dict) -> Key:
    md = obj["metadata"]
    return md.get("namespace") or "", md["name"]


class ChangeGate:
    """Remembers the store position of a controller's last pass."""

    def __init__(self, watches: set[str]) -> None:
        self.watches = tuple(watches)
        self._rv: int | None = None
        self._now: datetime | None = None

    def should_run(self, store: Store) -> bool:
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

    def since_last(self, store: Store) -> dict[str, dict[Key, dict]] | None:
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


def _status_only(e: WatchEvent) -> bool:
    """Whether a MODIFIED event changed nothing but status (and the resourceVersion)."""
    if e.type != "MODIFIED" or e.prev is None:
        return False
    new, old = e.obj, e.prev
    if any(new.get(k) != old.get(k) for k in new.keys() | old.keys() if k not in ("status", "metadata")):
        return False
    nmd, omd = new["metadata"], old["metadata"]
    return all(nmd.get(k) == omd.get(k) for k in nmd.keys() | omd.keys() if k != "resourceVersion")
