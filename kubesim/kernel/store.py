"""The object store as every controller sees it (kubesim/CONTRACT.md, "Store"): the API server half implements it
(kubesim.apiserver.storage.store.ObjectStore), the controllers of both halves use it through this interface.

Objects are plain JSON dicts addressed by their resource plural. Also here: what a controller needs next to the
store (the watch event and a cursor into the watch history, a fast copy of a JSON tree, a controller reference).
"""

from __future__ import annotations

import builtins
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from kubesim.kernel.clock import Clock


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    resource: str
    type: str  # ADDED / MODIFIED / DELETED
    obj: dict
    prev: dict | None = None  # the object before this event (MODIFIED, DELETED): watch selectors need it


class Store(Protocol):
    """Reads return deep copies unless copy=False (the stored dicts: never mutate them, write back a clone()).
    Writes through the store are watch events like any API write; internal writes run no admission."""

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """Held by controllers while they run (a re-entrant lock)."""
        ...

    @property
    def clock(self) -> Clock: ...

    @property
    def resource_version(self) -> int:
        """The global counter, bumped by every write."""
        ...

    @property
    def compacted_rv(self) -> int:
        """Events with a resourceVersion up to this one are no longer in the watch history."""
        ...

    @property
    def deletions(self) -> int:
        """Bumped by every deletion step."""
        ...

    def now(self) -> datetime: ...

    def last_change(self, *resources: str) -> int:
        """The resourceVersion of the latest write to any of these resources."""
        ...

    def events_since(self, rv: int) -> builtins.list[WatchEvent]: ...

    def get(self, resource: str, namespace: str | None, name: str, *, copy: bool = True) -> dict | None: ...

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        label_selector: dict[str, str] | None = None,
        *,
        copy: bool = True,
    ) -> builtins.list[dict]: ...

    def by_uid(self, uid: str) -> tuple[str, str, str] | None:
        """(resource, namespace, name) of the object with this uid."""
        ...

    def dependents(self, uid: str, resource: str | None = None) -> builtins.list[tuple[str, dict]]:
        """(resource, object) whose ownerReferences name this uid (live stored dicts)."""
        ...

    def create(self, resource: str, obj: dict) -> dict: ...

    def update(self, resource: str, obj: dict) -> dict:
        """Replaces metadata and spec (status kept where status is a subresource)."""
        ...

    def update_status(self, resource: str, obj: dict) -> dict: ...

    def delete(self, resource: str, namespace: str | None, name: str, propagation: str = "Background") -> dict: ...

    def remove_finalizer(self, resource: str, namespace: str | None, name: str, finalizer: str) -> None: ...

    def pod_terminated(self, namespace: str, name: str) -> dict | None:
        """The kubelet's delete with grace period 0 of a pod whose containers have stopped."""
        ...

    def record_event(self, involved: dict, type_: str, reason: str, message: str, component: str) -> None: ...

    def release_foreground(self) -> bool:
        """The garbage collector's pass over foreground deletions whose dependents are gone."""
        ...

    def collect_orphans(self) -> bool:
        """The garbage collector's pass over objects whose owners are all gone."""
        ...


class ChangeFeed:
    """A controller's cursor into the watch history: which objects of some resources changed since last asked.

    changed() returns the new events, or None when the controller must resync from a full list (first call,
    or the history window moved past the cursor).
    """

    def __init__(self, *resources: str) -> None:
        self.resources = set(resources)
        self._rv: int | None = None

    def changed(self, store: Store) -> builtins.list[WatchEvent] | None:
        with store.lock:
            previous, self._rv = self._rv, store.resource_version
            if previous is None or store.compacted_rv > previous:
                return None
            return [e for e in store.events_since(previous) if e.resource in self.resources]


def controller_reference(owner: dict) -> dict:
    """The ownerReference that makes owner the controller of an object it creates (cascading delete follows it)."""
    md = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": md["name"],
        "uid": md["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def clone(obj: Any) -> Any:
    """Deep copy of a JSON tree; several times faster than copy.deepcopy (no memo, no reductions)."""
    if type(obj) is dict:
        return {k: clone(v) for k, v in obj.items()}
    if type(obj) is list:
        return [clone(v) for v in obj]
    return obj
