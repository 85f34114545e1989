"""Kueue's WorkloadPriorityClass controller on kubesim's store: a class created or whose value changes carries its
value to every Workload that references it (spec.priority), admitted or not."""

from __future__ import annotations

from datetime import datetime

from kubesim.kernel.store import Store
from kubesim.kueue import constants as C
from kubesim.kueue.cache import Changes, clone
from kubesim.kueue.state import KueueState


class PriorityClassController:
    """spec.priority of the Workloads whose priorityClassRef names a WorkloadPriorityClass follows its value."""

    name = "kueue-workload-priority-classes"

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self._changes = Changes("workloadpriorityclasses")

    def next_deadline(self, store: Store) -> datetime | None:
        return None

    def reconcile(self, store: Store) -> bool:
        changes = self._changes.since_last(store)
        if changes is None:
            classes = self.state.listed(store, "workloadpriorityclasses")
        else:
            classes = [
                obj
                for key in changes["workloadpriorityclasses"]
                if (obj := store.get("workloadpriorityclasses", None, key[1], copy=False)) is not None
            ]
        if not classes:
            return False
        values = {o["metadata"]["name"]: int(o.get("value", 0)) for o in classes}
        wrote = False
        for wl in self.state.listed(store, "workloads"):
            ref = (wl.get("spec") or {}).get("priorityClassRef") or {}
            if ref.get("group") != C.KUEUE_GROUP or ref.get("kind") != "WorkloadPriorityClass":
                continue
            value = values.get(ref.get("name", ""))
            if value is None or wl["spec"].get("priority") == value or wl["metadata"].get("deletionTimestamp"):
                continue
            new = clone(wl)
            new["spec"]["priority"] = value
            store.update("workloads", new)
            wrote = True
        return wrote
