"""Kueue's ClusterQueue, LocalQueue and Cohort status on kubesim's store: workload counts, flavor reservation and
usage, the fair-sharing weighted share, and the Active condition."""

from __future__ import annotations

from datetime import datetime, timedelta

from kubesim.kernel.quantity import format_amount
from kubesim.kernel.store import Store
from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.cache import ChangeGate, Changes, Key
from kubesim.kueue.controllers.live_snapshot import SCHEDULING_INPUTS, LiveSnapshot
from kubesim.kueue.scheduler import ClusterQueueNode, afs
from kubesim.kueue.scheduler.model import condition_true, consumed_resources, parse_time
from kubesim.kueue.scheduler.quota import dominant_resource_share
from kubesim.kueue.state import KueueState


class StatusController:
    """ClusterQueue, LocalQueue and Cohort status: counts, flavor reservation/usage, weighted share, Active."""

    name = "kueue-status"

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self.config = state.config
        self._gate = ChangeGate(SCHEDULING_INPUTS)
        self._live = LiveSnapshot(state)
        self._written: dict[tuple[str, str, str], str] = {}  # (resource, ns, name) -> resourceVersion we left
        self._queue_feed = Changes("clusterqueues", "localqueues", "cohorts")
        self._queue_writes: dict[str, dict[Key, dict]] | None = None  # queues written since the last pass

    def next_deadline(self, store: Store) -> datetime | None:
        """The next Admission Fair Sharing usage sample of a LocalQueue in a queue that uses it."""
        afs = self.config.admission_fair_sharing
        if afs is None:
            return None
        now, times = store.clock.now(), []
        for lq in self._afs_local_queues(store):
            last = parse_time(_afs_status(lq).get("lastUpdate"))
            if last is not None and (at := last + timedelta(seconds=afs.usage_sampling_interval_seconds)) > now:
                times.append(at)
        return min(times) if times else None

    def _afs_local_queues(self, store: Store) -> list[dict]:
        """The LocalQueues whose usage is sampled: every one not stopped whose ClusterQueue is active, whatever that
        queue's admission mode (which only decides whether the samples order it), as Kueue's LocalQueue controller
        samples each LocalQueue it reconciles while admissionFairSharing is configured."""
        cqs = {o["metadata"]["name"] for o in self.state.listed(store, "clusterqueues") if condition_true(o, "Active")}
        return [
            o
            for o in self.state.listed(store, "localqueues")
            if (o.get("spec") or {}).get("clusterQueue") in cqs
            and (o.get("spec") or {}).get("stopPolicy", "None") == "None"
        ]

    def _settle_penalties(self, store: Store, snap, now: datetime) -> bool:
        """Admission Fair Sharing's entry penalties after the reservation that pushed them (Kueue's workload
        controller, reconcileAfsPenaltiesOnUpdate): a workload now admitted settles its penalty into its
        LocalQueue's consumed usage, which is brought up to date at once (decayed toward what the LocalQueue's
        admitted workloads use now, plus the penalty: updateAfsConsumedUsage); one deleted, finished,
        deactivated without a reservation, or moved to another LocalQueue drops its penalty unsettled."""
        cfg = self.config.admission_fair_sharing
        if cfg is None or not self.state.afs_owner:
            return False
        wrote = False
        for key, lq_key in sorted(self.state.afs_owner.items()):
            ns, name = key.split("/", 1)
            wl = store.get("workloads", ns, name, copy=False)
            spec = (wl or {}).get("spec") or {}
            reserved = wl is not None and condition_true(wl, C.QUOTA_RESERVED)
            active = spec.get("active", True) is not False
            if (
                wl is None
                or condition_true(wl, C.FINISHED)
                or (not active and not reserved)
                or (ns, spec.get("queueName", "")) != lq_key
            ):
                self.state.sub_penalty(key)
                continue
            if not (active and condition_true(wl, C.ADMITTED)):
                continue  # evicted or waiting for its admission checks: the record stays
            penalty = self.state.sub_penalty(key)
            lq = store.get("localqueues", ns, lq_key[1], copy=False)
            if lq is None:
                continue
            if cfg.usage_half_life_seconds == 0:  # no usage is kept (the penalty was zero)
                wrote = self._write_afs_status(store, lq, {}, now) or wrote
                continue
            consumed, last = self._ledger(lq, now)
            elapsed = max(0.0, (now - last).total_seconds())
            consumed = afs.decayed(consumed, self._admitted_usage(snap, lq), elapsed, cfg.usage_half_life_seconds)
            wrote = self._write_afs_status(store, lq, afs.summed(consumed, penalty), now) or wrote
        return wrote

    def _ledger(self, lq: dict, now: datetime) -> tuple[afs.Usage, datetime]:
        """A LocalQueue's consumed usage and when it was last brought up to date, as Kueue's usage ledger holds
        them: read back from the LocalQueue's status, except the first time this process meets the LocalQueue
        (Kueue's ledger is in memory: after a restart it is seeded from the status with the time of seeding, so the
        time between the last sample before the restart and the seeding is not decayed; initializeAfsIfNeeded)."""
        md = lq["metadata"]
        status = _afs_status(lq)
        last = parse_time(status.get("lastUpdate"))
        if last is None or (md["namespace"], md["name"]) not in self.state.afs_seen:
            return consumed_resources(lq), now
        return consumed_resources(lq), last

    @staticmethod
    def _admitted_usage(snap, lq: dict) -> afs.Usage:
        """What the LocalQueue's admitted workloads use now, as values."""
        md = lq["metadata"]
        key = (md["namespace"], md["name"])
        cq = snap.cluster_queues.get((lq.get("spec") or {}).get("clusterQueue", ""))
        total: dict[str, int] = {}
        for w in cq.workloads.values() if cq else []:
            if (w.namespace, w.queue_name) == key and condition_true(w.obj, C.ADMITTED):
                for (_, r), v in w.usage.items():
                    total[r] = total.get(r, 0) + v
        return {r: afs.value_of_amount(r, v) for r, v in total.items()}

    def _write_afs_status(self, store: Store, lq: dict, consumed: afs.Usage, now: datetime) -> bool:
        """The sample into the LocalQueue's status. Kueue's LocalQueue controller writes no weighted share of its
        own there (the field stays 0); the usage that orders the queue is the consumed usage plus the pending
        entry penalties."""
        md = lq["metadata"]
        self.state.afs_seen.add((md["namespace"], md["name"]))
        status = dict(lq.get("status") or {})
        sample = {"consumedResources": afs.format_usage(consumed), "lastUpdate": ws.ts(now)}
        status["fairSharing"] = {"weightedShare": 0, "admissionFairSharingStatus": sample}
        self.state.afs_epoch += 1
        return self._write(store, "localqueues", lq, status)

    def _sample_usage(self, store: Store, snap, now: datetime) -> bool:
        """Admission Fair Sharing: every sampling interval a LocalQueue's consumed usage decays toward what its
        admitted workloads use now (consumed x (1 - alpha) + current x alpha) (Kueue's LocalQueue
        reconcileConsumedUsage); with a half-life of zero it is kept empty. Entry penalties stay until their
        workloads settle or drop them. A LocalQueue met for the first time is sampled at once (elapsed zero)."""
        cfg = self.config.admission_fair_sharing
        if cfg is None:
            return False
        wrote = False
        for lq in self._afs_local_queues(store):
            md = lq["metadata"]
            seen = (md["namespace"], md["name"]) in self.state.afs_seen
            last = parse_time(_afs_status(lq).get("lastUpdate"))
            if seen and last is not None and (now - last).total_seconds() < cfg.usage_sampling_interval_seconds:
                continue
            consumed: afs.Usage = {}
            if cfg.usage_half_life_seconds != 0:
                old, since = self._ledger(lq, now)
                elapsed = max(0.0, (now - since).total_seconds())
                consumed = afs.decayed(old, self._admitted_usage(snap, lq), elapsed, cfg.usage_half_life_seconds)
            wrote = self._write_afs_status(store, lq, consumed, now) or wrote
        return wrote

    def _unchanged(self, resource: str, obj: dict, touched: bool) -> bool:
        """Skip a queue whose members did not change and whose object is as this controller left it."""
        md = obj["metadata"]
        return not touched and self._written.get((resource, md.get("namespace", ""), md["name"])) == md.get(
            "resourceVersion"
        )

    def reconcile(self, store: Store) -> bool:
        if not self._gate.should_run(store):
            return False
        now = store.clock.now()
        full = self._live.refresh(store, None) is None
        self._queue_writes = self._queue_feed.since_last(store)
        live = self._live
        snap = live.snap
        wrote = self._settle_penalties(store, snap, now)
        wrote = self._sample_usage(store, snap, now) or wrote
        pending_by_lq: dict[tuple[str, str], int] = {}
        lqs_seen = live.local_queues_touched | (self._queue_writes or {}).get("localqueues", {}).keys()
        lq_cqs: set[str] = {
            name
            for k in lqs_seen
            if isinstance(name := ((snap.local_queues.get(k) or {}).get("spec") or {}).get("clusterQueue"), str)
        }
        for wls in snap.pending.values() if full else [snap.pending.get(c, []) for c in live.queues_touched | lq_cqs]:
            for w in wls:
                pending_by_lq[(w.namespace, w.queue_name)] = pending_by_lq.get((w.namespace, w.queue_name), 0) + 1
        for w, _, _ in snap.orphans:
            # Kueue's LocalQueue holds its workloads even while its ClusterQueue is missing, and counts them.
            key = (w.namespace, w.queue_name)
            if (full or key in lqs_seen) and _holds_workloads(snap.local_queues.get(key)):
                pending_by_lq[key] = pending_by_lq.get(key, 0) + 1
        for obj in self._listed(store, "clusterqueues", full, {("", name) for name in live.queues_touched}):
            if self._unchanged("clusterqueues", obj, full or obj["metadata"]["name"] in live.queues_touched):
                continue
            cq = snap.cluster_queues[obj["metadata"]["name"]]
            status = dict(obj.get("status") or {})
            reservation = self._flavors(cq, cq.usage, borrowed=True)
            admitted = [w for w in cq.workloads.values() if condition_true(w.obj, C.ADMITTED)]
            # Usage counts admitted workloads only: a reservation waiting on admission checks is not in use yet.
            in_use = reservation if len(admitted) == len(cq.workloads) else self._flavors(cq, _sum(admitted), True)
            status.update(
                pendingWorkloads=len(snap.pending.get(cq.name, [])),
                reservingWorkloads=len(cq.workloads),
                admittedWorkloads=len(admitted),
                flavorsReservation=reservation,
                flavorsUsage=in_use,
            )
            if self.config.fair_sharing:
                status["fairSharing"] = {"weightedShare": dominant_resource_share(cq).weighted_share()}
            if cq.active:
                status["conditions"] = self._active(obj, now, "True", C.CQ_REASON_READY, "Can admit new workloads")
            else:
                status["conditions"] = self._active(obj, now, "False", cq.inactive_reason, cq.inactive_message)
            wrote = self._write(store, "clusterqueues", obj, status) or wrote
        for obj in self._listed(store, "localqueues", full, live.local_queues_touched):
            md = obj["metadata"]
            if self._unchanged("localqueues", obj, full or (md["namespace"], md["name"]) in live.local_queues_touched):
                continue
            lq_cq = snap.cluster_queues.get((obj.get("spec") or {}).get("clusterQueue", ""))
            mine = [
                w
                for w in (lq_cq.workloads.values() if lq_cq else [])
                if w.namespace == md["namespace"] and w.queue_name == md["name"]
            ]
            admitted_here = [w for w in mine if condition_true(w.obj, C.ADMITTED)]
            flavors = self._flavors(lq_cq, _sum(mine), borrowed=False) if lq_cq else []
            in_use = flavors
            if lq_cq and len(admitted_here) != len(mine):
                in_use = self._flavors(lq_cq, _sum(admitted_here), borrowed=False)
            status = dict(obj.get("status") or {})
            stopped = ((obj.get("spec") or {}).get("stopPolicy") or "None") != "None"
            status.update(
                # a stopped LocalQueue reports no pending workloads (Kueue does not ask its queue)
                pendingWorkloads=0 if stopped else pending_by_lq.get((md["namespace"], md["name"]), 0),
                reservingWorkloads=len(mine),
                admittedWorkloads=len(admitted_here),
                flavorsReservation=flavors,
                flavorsUsage=in_use,
            )
            if stopped:
                cond = ("False", "Stopped", "LocalQueue is stopped")
            elif lq_cq is None:
                # Kueue writes empty usage for a LocalQueue whose ClusterQueue does not exist
                status.update(reservingWorkloads=0, admittedWorkloads=0)
                status.pop("flavorsReservation", None)
                status.pop("flavorsUsage", None)
                cond = ("False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
            elif not lq_cq.active:
                cond = ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
            else:
                cond = ("True", "Ready", "Can submit new workloads to localQueue")
            status["conditions"] = self._active(obj, now, *cond)
            wrote = self._write(store, "localqueues", obj, status) or wrote
        if self.config.fair_sharing:
            for obj in self._listed(store, "cohorts", full, {("", name) for name in live.cohorts_touched}):
                if self._unchanged("cohorts", obj, full or obj["metadata"]["name"] in live.cohorts_touched):
                    continue
                node = snap.cohorts.get(obj["metadata"]["name"])
                if node is None:
                    continue
                status = dict(obj.get("status") or {})
                status["fairSharing"] = {"weightedShare": dominant_resource_share(node).weighted_share()}
                wrote = self._write(store, "cohorts", obj, status) or wrote
        return wrote

    def _listed(self, store: Store, resource: str, full: bool, touched: set[tuple[str, str]]) -> list[dict]:
        """The queues a pass looks at, in store order: all of them after a full build, else those whose members
        changed and those written since the last pass (by this controller, which _unchanged then skips, or by
        anyone else)."""
        if full or self._queue_writes is None:
            return self.state.listed(store, resource)
        keys = touched | self._queue_writes[resource].keys()
        return [obj for ns, name in sorted(keys) if (obj := store.get(resource, ns or None, name, copy=False))]

    @staticmethod
    def _flavors(cq: ClusterQueueNode, usage: dict, borrowed: bool) -> list[dict]:
        out = []
        seen = set()
        for rg in cq.resource_groups:
            for flavor in rg.flavors:
                if flavor in seen:
                    continue
                seen.add(flavor)
                resources = []
                for res in rg.covered:
                    used = usage.get((flavor, res), 0)
                    entry = {"name": res, "total": format_amount(res, used)}
                    if borrowed:
                        nominal = cq.quota_for((flavor, res)).nominal
                        entry["borrowed"] = format_amount(res, max(0, used - nominal))
                    resources.append(entry)
                out.append({"name": flavor, "resources": resources})
        return out

    @staticmethod
    def _active(obj: dict, now: datetime, status: str, reason: str, message: str) -> list[dict]:
        """The Active condition; its lastTransitionTime moves only when the status flips."""
        conds = [dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
        old = next((c for c in conds if c.get("type") == "Active"), None)
        kept = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
        new = {
            "type": "Active",
            "status": status,
            "reason": reason,
            "message": message,
            "observedGeneration": (obj.get("metadata") or {}).get("generation"),
            "lastTransitionTime": kept or ws.ts(now),
        }
        return [*(c for c in conds if c.get("type") != "Active"), new]

    def _write(self, store: Store, resource: str, obj: dict, status: dict) -> bool:
        md = obj["metadata"]
        key = (resource, md.get("namespace", ""), md["name"])
        if status == (obj.get("status") or {}):
            self._written[key] = md.get("resourceVersion")
            return False
        new = {**obj, "status": status}
        self._written[key] = store.update_status(resource, new)["metadata"]["resourceVersion"]
        return True


def _holds_workloads(lq: dict | None) -> bool:
    """A LocalQueue in Kueue's queue manager: it exists and is not stopped."""
    return lq is not None and ((lq.get("spec") or {}).get("stopPolicy") or "None") == "None"


def _sum(workloads: list) -> dict:
    """The (flavor, resource) usage of these workloads."""
    usage: dict = {}
    for w in workloads:
        for fr, v in w.usage.items():
            usage[fr] = usage.get(fr, 0) + v
    return usage


def _afs_status(lq: dict) -> dict:
    return ((lq.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus") or {}
