"""The core Workload controller's part no job kind owns (upstream pkg/controller/core/workload_controller.go,
isOrphanedWorkload and FinalizeOrphanedWorkload): a Workload whose owner is gone while it stays (its ownerReferences
removed, as an Orphan deletion of the job leaves it, the job-uid label still naming the job) is finished with
OwnerNotFound, which releases its quota (FinishOrphanedWorkloads, on in v0.20), and loses Kueue's finalizer."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.cache import Changes, clone
from kubesim.kueue.integrations.jobframework import JobKind, remove_in_use_finalizer
from kubesim.kueue.scheduler.model import condition_true
from kubesim.kueue.state import KueueState

OWNER_NOT_FOUND = "OwnerNotFound"


class OrphanedWorkloads:
    """The Workloads no integrated job controls: one whose owner is gone while it stays (no ownerReferences left, the
    job-uid label still naming it) is finished with OwnerNotFound, which releases its quota, and loses the in-use
    finalizer; one being deleted loses the finalizer at once (FinalizeOrphanedWorkload)."""

    name = "kueue-orphaned-workloads"

    def __init__(self, state: KueueState, kinds: Iterable[JobKind]) -> None:
        self.state = state
        self._kinds = {k.kind for k in kinds}
        self._changes = Changes("workloads")

    def next_deadline(self, store) -> datetime | None:
        return None

    def reconcile(self, store) -> bool:
        changes = self._changes.since_last(store)
        if changes is None:
            candidates = list(self.state.listed(store, "workloads"))
        else:
            candidates = [
                wl
                for key in changes["workloads"]
                if (wl := store.get("workloads", key[0], key[1], copy=False)) is not None
            ]
        wrote = False
        for wl in candidates:
            wrote = self._finalize(store, wl) or wrote
        return wrote

    def _finalize(self, store, wl: dict) -> bool:
        md = wl["metadata"]
        refs = md.get("ownerReferences") or []
        if any(r.get("controller") and r.get("kind") in self._kinds for r in refs):
            return False  # its integration looks after it
        if md.get("deletionTimestamp"):
            return remove_in_use_finalizer(store, wl)
        if refs or not (md.get("labels") or {}).get(C.JOB_UID_LABEL):
            return False
        if condition_true(wl, C.FINISHED):
            return remove_in_use_finalizer(store, wl)
        wl = clone(wl)
        ws.set_condition(wl, C.FINISHED, "True", OWNER_NOT_FOUND, "The workload's owner no longer exists", store.now())
        store.update_status("workloads", wl)
        remove_in_use_finalizer(store, wl)
        return True
