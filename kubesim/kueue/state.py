"""The Kueue half's in-memory state for one simulator, shared explicitly by its controllers and the visibility API.

Kueue keeps state outside the API objects: the queue manager's inadmissible sets and sticky preemptor (which the
visibility API's positions must agree with), plus kubesim's read caches. One KueueState belongs to one simulator
(kubesim.kueue.Kueue creates it); nothing here is module-global.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from kubesim.kernel.store import Store
from kubesim.kueue.cache import ListCache
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.scheduler import Queues, Snapshot
from kubesim.kueue.scheduler.afs import Usage, summed
from kubesim.kueue.scheduler.model import ParseCache


@dataclass(eq=False)
class KueueState:
    config: KueueConfig
    queues: Queues = field(default_factory=Queues)  # the scheduler's queue state between cycles
    lists: ListCache = field(default_factory=ListCache)  # shared read-only lists of stored objects
    parsed: ParseCache = field(default_factory=ParseCache)  # workload parses per resourceVersion
    # Admission Fair Sharing's entry penalties, kept in memory as Kueue's usage ledger keeps them: one record per
    # workload that reserved quota and has not settled it (`afs_records`, by LocalQueue; `afs_owner` says whose
    # LocalQueue holds a workload's record), their sum per LocalQueue (`afs_penalty`), and a counter bumped when
    # samples or settlements change a LocalQueue's usage, so kept snapshots rebuild. Values are quantity values
    # (scheduler/afs.py). `afs_seen`: the LocalQueues whose usage this process has sampled or settled (Kueue's
    # ledger entries), so a LocalQueue's first sample after a restart seeds from its status.
    afs_penalty: dict[tuple[str, str], Usage] = field(default_factory=dict)
    afs_records: dict[tuple[str, str], dict[str, Usage]] = field(default_factory=dict)
    afs_owner: dict[str, tuple[str, str]] = field(default_factory=dict)
    afs_seen: set[tuple[str, str]] = field(default_factory=set)
    afs_epoch: int = 0

    def push_penalty(self, lq: tuple[str, str], workload: str, penalty: Usage) -> None:
        """A reservation's entry penalty: replaces the workload's record (a workload evicted and reserving again
        does not stack a second one)."""
        self.sub_penalty(workload)
        self.afs_records.setdefault(lq, {})[workload] = dict(penalty)
        self.afs_owner[workload] = lq
        self._sum_penalties(lq)

    def sub_penalty(self, workload: str) -> Usage:
        """Remove the workload's record (settled into the consumed usage, or never to settle): what it held."""
        lq = self.afs_owner.pop(workload, None)
        if lq is None:
            return {}
        record = self.afs_records.get(lq, {}).pop(workload, {})
        self._sum_penalties(lq)
        self.afs_epoch += 1
        return record

    def _sum_penalties(self, lq: tuple[str, str]) -> None:
        records = self.afs_records.get(lq)
        if not records:
            self.afs_records.pop(lq, None)
            self.afs_penalty.pop(lq, None)
            return
        total: Usage = {}
        for record in records.values():
            total = summed(total, record)
        self.afs_penalty[lq] = total

    def listed(self, store: Store, resource: str) -> list[dict]:
        """The stored objects of a resource (read-only: clone before changing one)."""
        return self.lists.listed(store, resource)

    def snapshot(self, store: Store, now: datetime | None) -> Snapshot:
        """A scheduler snapshot of the store (now=None keeps workloads in backoff in their queues)."""
        return build_snapshot(
            store, self.config, now, lists=self.lists, parsed=self.parsed, afs_penalties=self.afs_penalty
        )


def build_snapshot(
    store: Store,
    config: KueueConfig,
    now: datetime | None,
    *,
    lists: ListCache | None = None,
    parsed: ParseCache | None = None,
    afs_penalties: dict[tuple[str, str], Usage] | None = None,
) -> Snapshot:
    """A scheduler snapshot of everything in the store; lists and parsed reuse a KueueState's caches."""

    def objects(resource: str) -> list[dict]:
        return lists.listed(store, resource) if lists is not None else store.list(resource, copy=False)

    return Snapshot.from_objects(
        resource_flavors=objects("resourceflavors"),
        cohorts=objects("cohorts"),
        cluster_queues=objects("clusterqueues"),
        local_queues=objects("localqueues"),
        workloads=objects("workloads"),
        namespaces=objects("namespaces"),
        admission_checks=objects("admissionchecks"),
        config=config,
        now=now,
        parse_cache=parsed,
        afs_penalties=afs_penalties,
    )
