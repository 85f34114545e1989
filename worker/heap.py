"""Keep the watcher's full garbage collections short.

After its first sync the watcher holds every outside Workload, owner and queue it follows (about 250 MiB at 10,000
Workloads), and CPython's full collection walks all of it: 280-460 ms with every thread stopped, measured in
bench/outside_sync.py, which is most of the watcher's 1 s lag budget. Those objects are long-lived and acyclic, so
the heap is frozen (gc.freeze: the permanent generation, skipped by collections) after the first list and again
every FREEZE_SECONDS, after collecting the young generations. Cyclic garbage that reached the oldest generation
before a freeze is only reclaimed when the heap is thawed and fully collected, every THAW_SECONDS: one pause of that
length per interval instead of one every few seconds under load (docs/architecture.md, Work submitted outside the
portal, the watcher's heap).
"""

from __future__ import annotations

import gc
import time

FREEZE_SECONDS = 5.0
THAW_SECONDS = 600.0


class FrozenHeap:
    """Freezes the heap now and then; `settle` is called from one thread, every FREEZE_SECONDS."""

    def __init__(self) -> None:
        self.thawed_at = time.monotonic()

    def start(self) -> None:
        """Collect everything once (the first sync's garbage) and freeze what lives on."""
        gc.collect()
        gc.freeze()
        self.thawed_at = time.monotonic()

    def settle(self) -> None:
        """Freeze what survived since the last freeze; past THAW_SECONDS, thaw and collect everything first."""
        now = time.monotonic()
        if now - self.thawed_at >= THAW_SECONDS:
            gc.unfreeze()
            gc.collect()
            self.thawed_at = now
        else:
            gc.collect(1)  # the young garbage goes now, not into the permanent generation
        gc.freeze()
