"""A tiny in-memory driver for the scheduler core: Kueue objects as dicts, decisions applied as Kueue applies them.

Preempted workloads are released at once (as if their Job stopped instantly), which is what the controllers do
within one settle of the emulator.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubesim.kueue import constants as C
from kubesim.kueue import workload_status as ws
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.integrations.jobframework import release_time
from kubesim.kueue.scheduler import Queues, Scheduler, Snapshot
from kubesim.kueue.scheduler.model import find_condition

GPU = "nvidia.com/gpu"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def flavor(name: str, labels: dict | None = None, taints: list | None = None) -> dict:
    return {"metadata": {"name": name}, "spec": {"nodeLabels": labels or {}, "nodeTaints": taints or []}}


def quota_spec(
    flavor_name: str, nominal: int, borrowing: int | None = None, lending: int | None = None, resource: str = GPU
) -> dict:
    r: dict = {"name": resource, "nominalQuota": str(nominal)}
    if borrowing is not None:
        r["borrowingLimit"] = str(borrowing)
    if lending is not None:
        r["lendingLimit"] = str(lending)
    return {"coveredResources": [resource], "flavors": [{"name": flavor_name, "resources": [r]}]}


def cluster_queue(
    name: str,
    nominal: int = 0,
    *,
    cohort: str = "",
    flavor_name: str = "f",
    borrowing=None,
    lending=None,
    within: str = "Never",
    reclaim: str = "Never",
    borrow_policy: str | None = None,
    threshold: int | None = None,
    strategy: str = "BestEffortFIFO",
    weight: str | None = None,
    namespace_selector: dict | None = None,
    groups: list | None = None,
) -> dict:
    spec: dict = {
        "namespaceSelector": {} if namespace_selector is None else namespace_selector,
        "queueingStrategy": strategy,
        "resourceGroups": groups or [quota_spec(flavor_name, nominal, borrowing, lending)],
        "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim},
    }
    if borrow_policy:
        spec["preemption"]["borrowWithinCohort"] = {"policy": borrow_policy, "maxPriorityThreshold": threshold}
    if cohort:
        spec["cohortName"] = cohort
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"metadata": {"name": name}, "spec": spec}


def cohort(
    name: str,
    parent: str | None = None,
    nominal: int | None = None,
    *,
    flavor_name: str = "f",
    borrowing=None,
    lending=None,
    weight: str | None = None,
) -> dict:
    spec: dict = {}
    if parent:
        spec["parentName"] = parent
    if nominal is not None:
        spec["resourceGroups"] = [quota_spec(flavor_name, nominal, borrowing, lending)]
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"metadata": {"name": name}, "spec": spec}


def local_queue(name: str, cq: str, namespace: str = "default", stop_policy: str | None = None) -> dict:
    spec = {"clusterQueue": cq}
    if stop_policy:
        spec["stopPolicy"] = stop_policy
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


class Sim:
    """Holds objects, runs the scheduler until stable and applies its decisions."""

    def __init__(self, config: KueueConfig | None = None, scheduler: type[Scheduler] = Scheduler) -> None:
        self.config = config or KueueConfig.default()
        self.scheduler = scheduler
        self.flavors: list[dict] = [flavor("f")]
        self.cohorts: list[dict] = []
        self.cqs: list[dict] = []
        self.lqs: list[dict] = []
        self.namespaces: list[dict] | None = None
        self.workloads: dict[str, dict] = {}
        self.queues = Queues()
        self.now = T0
        self.preemptions: list = []
        self._seq = 0

    def apply(self, objects: list[dict]) -> None:
        """Take the cluster's queueing objects from a list of API objects (e.g. an org mapping's output), replacing
        the default flavor; objects the scheduler does not read (priority classes) are left out."""
        by_kind: dict[str, list[dict]] = {}
        for obj in objects:
            by_kind.setdefault(obj["kind"], []).append(obj)
        self.flavors = by_kind.get("ResourceFlavor", [])
        self.cohorts = by_kind.get("Cohort", [])
        self.cqs = by_kind.get("ClusterQueue", [])
        self.lqs = by_kind.get("LocalQueue", [])
        self.namespaces = by_kind.get("Namespace", [])

    def add(
        self,
        name: str,
        queue: str,
        gpu: int = 1,
        *,
        namespace: str = "default",
        priority: int = 0,
        count: int = 1,
        min_count: int | None = None,
        node_selector: dict | None = None,
        tolerations: list | None = None,
        cpu: str | None = None,
    ) -> dict:
        """A pending workload created one second after the previous one (FIFO is by creation time)."""
        self._seq += 1
        requests = {GPU: str(gpu)}
        if cpu:
            requests["cpu"] = cpu
        podspec: dict = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
        if node_selector:
            podspec["nodeSelector"] = node_selector
        if tolerations:
            podspec["tolerations"] = tolerations
        ps: dict = {"name": "main", "count": count, "template": {"spec": podspec}}
        if min_count is not None:
            ps["minCount"] = min_count
        obj = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{self._seq:04d}",
                "labels": {C.JOB_UID_LABEL: f"job-{self._seq:04d}"},
                "creationTimestamp": ws.ts(self.now + timedelta(seconds=self._seq)),
                "generation": 1,
            },
            "spec": {"queueName": queue, "priority": priority, "podSets": [ps], "active": True},
            "status": {},
        }
        self.workloads[name] = obj
        return obj

    def snapshot(self) -> Snapshot:
        return Snapshot.from_objects(
            resource_flavors=self.flavors,
            cohorts=self.cohorts,
            cluster_queues=self.cqs,
            local_queues=self.lqs,
            workloads=list(self.workloads.values()),
            namespaces=self.namespaces,
            config=self.config,
            now=self.now,
        )

    def settle(self, rounds: int = 50) -> None:
        """Schedule, release preempted workloads, and repeat until nothing changes."""
        by_key = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in self.workloads.values()}
        for _ in range(rounds):
            for obj in self.workloads.values():  # paced releases that are due
                if self.condition_name(obj, C.EVICTED) and self.condition_name(obj, C.QUOTA_RESERVED):
                    at = release_time(obj)
                    if at is None or at <= self.now:
                        ws.release_after_eviction(obj, self.now)
                        self.queues.flush()
            snap = self.snapshot()
            results = self.scheduler(self.config, self.queues).run(snap, self.now)
            released = False
            last_pending = {}
            for r in results:
                for a in r.admitted:
                    ws.set_quota_reservation(by_key[a.workload.key], a.cluster_queue, a.podset_assignments, self.now)
                for p in r.preempted:
                    self.preemptions.append(p)
                    obj = by_key[p.victim.key]
                    ws.preempt(obj, p.reason, p.message, self.now)
                    at = release_time(obj)
                    if at is None or at <= self.now:  # as the Job integration paces repeated preemptions
                        ws.release_after_eviction(obj, self.now)
                        released = True
                for p in r.pending:
                    last_pending[p.workload.key] = p
            for key, p in last_pending.items():
                if not self.admitted(by_key[key]["metadata"]["name"]):
                    ws.set_pending(by_key[key], p.reason, p.message, self.now)
            if released:
                self.queues.flush()
                continue
            if not any(r.admitted for r in results):
                return
        raise AssertionError(f"scheduler did not settle in {rounds} rounds")

    def finish(self, name: str) -> None:
        obj = self.workloads[name]
        ws.set_condition(obj, C.FINISHED, "True", "Succeeded", "Job finished successfully", self.now)
        self.queues.flush()

    # -- queries -------------------------------------------------------------------------------------------

    def admitted(self, name: str) -> bool:
        c = find_condition(self.workloads[name], C.QUOTA_RESERVED)
        return c is not None and c["status"] == "True" and find_condition(self.workloads[name], C.FINISHED) is None

    def running(self) -> set[str]:
        return {n for n in self.workloads if self.admitted(n)}

    def cq_of(self, name: str) -> str | None:
        adm = self.workloads[name]["status"].get("admission")
        return adm["clusterQueue"] if adm else None

    @staticmethod
    def condition_name(obj: dict, ctype: str) -> bool:
        """Whether the condition is True on a workload dict."""
        c = find_condition(obj, ctype)
        return c is not None and c["status"] == "True"

    def condition(self, name: str, ctype: str) -> dict | None:
        return find_condition(self.workloads[name], ctype)
