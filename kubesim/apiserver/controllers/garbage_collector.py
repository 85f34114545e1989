"""The garbage collector: ownerReference cascades the store could not finish at deletion time."""

from __future__ import annotations

from datetime import datetime

from kubesim.kernel.store import Store


class GarbageCollector:
    """ownerReference cascade for dependents created late, and foreground-deletion completion."""

    name = "garbage-collector"

    def __init__(self) -> None:
        self._seen = -1

    def reconcile(self, store: Store) -> bool:
        if store.deletions == self._seen:
            return False  # only deletions can orphan objects or complete a foreground deletion
        self._seen = store.deletions
        return store.collect_orphans() | store.release_foreground()

    def next_deadline(self, store: Store) -> datetime | None:
        return None
