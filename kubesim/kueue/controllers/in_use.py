"""Kueue's resource-in-use finalizers on ClusterQueues, ResourceFlavors and AdmissionChecks."""

from __future__ import annotations

from datetime import datetime

from kubesim.kernel.store import Store
from kubesim.kueue import constants as C
from kubesim.kueue.cache import Changes, clone
from kubesim.kueue.scheduler.model import condition_true, is_finished
from kubesim.kueue.state import KueueState


class InUseFinalizers:
    """`kueue.x-k8s.io/resource-in-use` on ClusterQueues, ResourceFlavors and AdmissionChecks: a ClusterQueue being
    deleted stays until no workload reserves quota in it; a flavor or an admission check stays until no ClusterQueue
    references it (Kueue's AdmissionCheck controller adds the finalizer to every check it reconciles)."""

    name = "kueue-in-use-finalizers"

    def __init__(self, state: KueueState) -> None:
        self.state = state
        # Time is no input, nor a queue's or flavor's status; workloads matter only while a ClusterQueue is deleted.
        self._changes = Changes(
            "clusterqueues",
            "resourceflavors",
            "admissionchecks",
            "workloads",
            status_only=("clusterqueues", "resourceflavors", "admissionchecks"),
        )
        self._deleting = False

    def next_deadline(self, store: Store) -> datetime | None:
        return None

    def reconcile(self, store: Store) -> bool:
        changes = self._changes.since_last(store)
        if changes is not None and not (
            changes["clusterqueues"]
            or changes["resourceflavors"]
            or changes["admissionchecks"]
            or (self._deleting and changes["workloads"])
        ):
            return False
        wrote = False
        cqs = self.state.listed(store, "clusterqueues")
        # Only a ClusterQueue being deleted asks which queues hold reservations: skip the workload scan otherwise.
        deleting = self._deleting = any(o["metadata"].get("deletionTimestamp") for o in cqs)
        reserving = {
            ((w.get("status") or {}).get("admission") or {}).get("clusterQueue")
            for w in (self.state.listed(store, "workloads") if deleting else ())
            if condition_true(w, C.QUOTA_RESERVED) and not is_finished(w)
        }
        used_flavors = {
            f["name"] for cq in cqs for rg in (cq.get("spec") or {}).get("resourceGroups") or [] for f in rg["flavors"]
        }
        used_checks = {
            c.get("name")
            for cq in cqs
            for c in ((cq.get("spec") or {}).get("admissionChecksStrategy") or {}).get("admissionChecks") or []
        }
        for resource, objs, in_use in (
            ("clusterqueues", cqs, lambda o: o["metadata"]["name"] in reserving),
            (
                "resourceflavors",
                self.state.listed(store, "resourceflavors"),
                lambda o: o["metadata"]["name"] in used_flavors,
            ),
            (
                "admissionchecks",
                self.state.listed(store, "admissionchecks"),
                lambda o: o["metadata"]["name"] in used_checks,
            ),
        ):
            for obj in objs:
                md = obj["metadata"]
                has = C.RESOURCE_IN_USE_FINALIZER in (md.get("finalizers") or [])
                if not md.get("deletionTimestamp") and not has:
                    new = clone(obj)
                    new["metadata"]["finalizers"] = [*(md.get("finalizers") or []), C.RESOURCE_IN_USE_FINALIZER]
                    store.update(resource, new)
                    wrote = True
                elif md.get("deletionTimestamp") and has and not in_use(obj):
                    store.remove_finalizer(resource, None, md["name"], C.RESOURCE_IN_USE_FINALIZER)
                    wrote = True
        return wrote
