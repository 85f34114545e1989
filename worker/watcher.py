"""The watcher: the only reader of cluster state; mirrors Jobs, Kueue Workloads, queues and Nodes into the database.

On KAI Scheduler's pools there is no Kueue Workload: the portal's Jobs there, and its gangs (a PodGroup and ownerless
pods), are followed through their pods and the PodGroups each pod names (worker/kai_status.py, docs/architecture.md,
The life of a submission), and the portal's KAI Queues are mirrored as its queues are. A gang whose pods KAI evicted
while it is still wanted, or whose pods outlive its end, is handed to the worker (kai_gang_repair, through its
outbox intent). A cluster without KAI's CRDs has none of them to watch.

Every Kueue Workload is watched, whatever submitted it: the portal's own (their Jobs are `wl-<id>`) follow their
Jobs; every other one in a project's namespace is mirrored as work submitted outside the portal
(worker/outside_work.py, docs/architecture.md, Work submitted outside the portal), and what it cannot map is kept
for admins as unmapped work, as are GPU pods of project namespaces that run outside Kueue's queues.

One thread per watched kind keeps a watch open from the last resourceVersion it saw; a dropped watch resumes from
there, a 410 Gone relists that kind. A periodic full resync repairs anything a watch missed, and a positions loop
asks Kueue's visibility API for the order of every LocalQueue with pending portal workloads. The appliers leave
the GPU-hour slices to a ledger loop that recomputes each project's timeline once per pass (apps.usage.services,
ledger_deferred), so a status is visible without waiting for accounting. Everything it writes is idempotent
(state, not deltas), so a restart or a replayed event converges to the same rows and events. Each loop notes its
every turn: one that stops turning is stalled, which the heartbeat records and the process's probes answer
(worker/watcher_process.py).

Stops the worker has not recorded yet (`stopping` rows) are finished here when the cluster got there first: a Job
that completed or failed gives the workload its final state, a Job being deleted (the cluster's deletionTimestamp)
or gone (a DELETED event, or missing at a resync) records the stop; the GPU-hour interval closes at the cluster's
time when it says one.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q
from django.utils import timezone
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from apps.cluster import services as mirror
from apps.core import kai_conditions, kueue_names, metrics
from apps.core.http import parse_id, parse_int
from apps.core.kueue_names import (
    JOB_PREFIX,
    JOB_UID_LABEL,
    KAI_QUEUE_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PODSET_LABEL,
    WORKLOAD_ID_LABEL,
)
from apps.org.models import Project, ProjectNamespace
from apps.usage import services as usage_services
from apps.workloads import selectors as workload_selectors
from apps.workloads import services as workload_services
from apps.workloads.frameworks import TORCH_RUNTIME_LABEL, torch_runtime_of
from apps.workloads.manifests import MANIFEST_KIND_VALUES
from apps.workloads.models import (
    CLUSTER_EVENTS_KEPT,
    CLUSTER_NAMESPACE,
    LIVE_STATUSES,
    PORTAL_KIND_VALUES,
    QUEUED_STATUSES,
    Framework,
    Kind,
    Origin,
    Status,
    Workload,
)
from apps.workloads.observation import ClusterEvent, Observation, Preemption, Unmapped
from apps.workloads.services import names_another_workload

from .gateway import KINDS, ClusterError, Gateway
from .heap import FREEZE_SECONDS, FrozenHeap
from .kai_status import (
    FINISHED_PHASES,
    KaiPod,
    compact_pod,
    compact_pod_group,
    gang_key,
    gang_missing,
    gang_outliving,
    is_gang,
    observe_kai,
    observe_kai_gang,
    on_kai,
    pod_group_owner_uid,
)
from .outside_work import (
    OWNER_KINDS,
    OWNER_SELECTOR,
    compact,
    group_of,
    owner_lookup,
    owner_reference,
    read_outside,
    submitter_fields,
    unqueued_gpu_pods,
)
from .status_map import observe, parse_time
from .tasks import forecasts_refresh_soon

logger = logging.getLogger(__name__)
OWNED = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
# Pods Kueue started carry the pod set label it writes into their templates; the portal's own carry its label.
UNQUEUED_POD_SELECTOR = f"!{PODSET_LABEL},{MANAGED_BY_LABEL}!={MANAGED_BY}"
UNMAPPED_WORKLOAD_REASONS = ("no_project", "no_owner", "no_queue", "malformed")
OWNER_READERS = 8  # owners of a batch read at once
# Cluster events (a timeline's history) wait behind status work at most this long (WorkQueue's `background`).
EVENTS_WAIT_AT_MOST = 30.0
# Events held for the appliers at most: the events watch (its first list a page at a time) waits for room beyond
# this, so the watcher's memory is bounded whatever the cluster's backlog (80,000 Events at 10,000 Workloads).
EVENTS_HELD_AT_MOST = 5000
OUTSIDE_BATCH = 250  # outside Workloads mirrored in one pass at most (services.workloads_mirror_outside)
# The portal's own Jobs applied in one pass at most (services.workloads_observe): their rows show together, when the
# pass commits, so a pass is kept short (about a few ms a row).
JOB_BATCH = 50
# Nodes are not the portal's: all of them, so each pool's are found by the pool's node labels.
# The portal's Deployments and LeaderWorkerSets are its inference services, followed by their own status (no Kueue
# Workload).
# Portal work on KAI pools (no Kueue Workload) is followed through its pods and their PodGroups (worker/kai_status.py):
# only the portal's, by its labels (KAI's grouper copies a Job's labels into the PodGroups it makes); the pods of
# portal work on KAI pools carry KAI's queue label too.
KAI_PODS = "Pod"
WATCHED = {"Job": OWNED, "Workload": None, "ClusterQueue": OWNED, "LocalQueue": OWNED, "Cohort": OWNED, "Node": None,
           "Deployment": OWNED, "LeaderWorkerSet": OWNED, "Queue": OWNED, "PodGroup": OWNED,
           KAI_PODS: f"{OWNED},{KAI_QUEUE_LABEL}"}
SERVING_KINDS = frozenset({"Deployment", "LeaderWorkerSet"})
KAI_KINDS = frozenset({"PodGroup", KAI_PODS})
# Custom resources: a cluster without one has none to follow (KAI's PodGroup where KAI Scheduler is not installed).
OPTIONAL_KINDS = frozenset({"LeaderWorkerSet", "Queue", "PodGroup"})
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
# Owners of outside Workloads, watched for who submitted them (worker/outside_work.py), by watch name.
OWNER_WATCHES = {f"owner:{group or 'core'}/{kind}": (group, owner) for (group, kind), owner in OWNER_KINDS.items()}
TORCH_RUNTIMES_PATH = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
OWNER_KIND_RETRY_SECONDS = 60.0  # an owner kind not installed is looked for again this often
OWNER_GRACE_SECONDS = 1.0  # how long a new outside Workload waits for its owner's watch event
APPLY_WAIT_SECONDS = 0.5  # an idle applier looks at the work queue again this often
# Two sightings of a KAI eviction this close are one: its pod's condition and its PodGroup's Event, a gang's pods.
KAI_EVICTION_SEEN_TWICE = timedelta(seconds=10)
SERVING_STATUSES = frozenset({Status.SUBMITTING, Status.ADMITTED, Status.RUNNING})  # an inference row counting GPUs
# Kubernetes Events (core v1) of these kinds of object are kept with the workload they are about (its pods, its Job
# or owner, Kueue's Workload). A field selector cannot name a set of namespaces or kinds, so the watch takes every
# Event and keeps those the applier finds a workload for (services.workload_cluster_events_record).
EVENT_KINDS = frozenset({"Pod", "Job", "Workload", *(kind for _, kind in OWNER_KINDS)})
EVENTS = "Event"  # the events watch's name
MIRRORS: dict[str, Callable[..., None]] = {
    "ClusterQueue": mirror.cluster_queues_mirror, "LocalQueue": mirror.local_queues_mirror,
    "Cohort": mirror.cohorts_mirror, "Node": mirror.nodes_mirror,
    "Queue": mirror.kai_queues_mirror,  # KAI's leaf Queues: what a project's work holds on a KAI pool
}


class WorkQueue:
    """Keys waiting to be applied, coalesced as in client-go's workqueue, and handed out in batches by kind.

    A key added again before it is processed is processed once, with the latest state; a key is never processed by
    two threads at once, and one added while it is being processed comes back afterwards. Bursts of events for one
    Job (created, admitted, started, ready...) thus cost one database write when the appliers are behind.

    Keys whose first element is in `batched` wait in a lane of their own and are taken up to that lane's batch size
    at a time, a backlog shared among the `appliers`: when they are behind, one pass applies many Jobs' rows or
    outside Workloads in one transaction, so the cost of a burst grows with the number of passes, not of events,
    and the appliers write in parallel. The lane whose first key has waited longest goes next, except that lanes in
    `background` (cluster events: history, not status) go only when no other lane waits or their first key has
    waited `background_after` seconds: a first list of 80,000 Events must not hold back the status of work created
    meanwhile, and the events still come within that bound. One background batch at most is out at a time, so an
    overdue backlog takes one applier, never all of them.
    """

    def __init__(self, *, batched: Mapping[str, int] | None = None, appliers: int = 1,
                 background: frozenset[str] = frozenset(), background_after: float = 30.0) -> None:
        self.condition = threading.Condition()
        self.batched = dict(batched or {})
        self.appliers = appliers
        self.background = background
        self.background_after = background_after
        self.lanes: dict[str, deque[Any]] = {}
        self.dirty: set[Any] = set()
        self.processing: set[Any] = set()
        self.added_at: dict[Any, float] = {}  # when a waiting key first came in, for the lag metric
        self.background_out = 0  # keys of a background lane handed out and not done yet
        self.closed = False

    def _name(self, key: Any) -> str:
        return key[0] if key[0] in self.batched else ""

    def _lane(self, key: Any) -> deque[Any]:
        return self.lanes.setdefault(self._name(key), deque())

    def _queue(self, key: Any) -> None:
        self._lane(key).append(key)
        self.condition.notify()

    def __len__(self) -> int:
        with self.condition:
            return sum(len(lane) for lane in self.lanes.values())

    def add(self, key: Any) -> None:
        with self.condition:
            if key in self.dirty:
                return
            self.dirty.add(key)
            self.added_at.setdefault(key, time.monotonic())
            if key not in self.processing:
                self._queue(key)

    def _waiting(self) -> list[tuple[float, str]]:
        """The lanes that may hand out keys now, each with when its first key came in."""
        return [(self.added_at.get(lane[0], 0.0), name) for name, lane in self.lanes.items()
                if lane and not (name in self.background and self.background_out)]

    def get(self, timeout: float) -> list[Any]:
        """The next keys to process (one, or a batch from a batched lane); empty when none came within `timeout`."""
        with self.condition:
            if not self._waiting() and not self.closed:
                self.condition.wait(timeout)
            waiting = self._waiting()
            if self.closed or not waiting:
                return []
            overdue = time.monotonic() - self.background_after
            foreground = [(since, name) for since, name in waiting
                          if name not in self.background or since <= overdue]
            name = min(foreground or waiting)[1]
            lane = self.lanes[name]
            # A backlog is shared among the appliers (each takes its share, up to the batch size), so they write in
            # parallel rather than one taking it all while the others wait.
            share = len(lane) if name in self.background else -(-len(lane) // self.appliers)  # one out at a time
            keys = [lane.popleft() for _ in range(min(share, self.batched.get(name, 1)))]
            if name in self.background:
                self.background_out += len(keys)
            now = time.monotonic()
            for key in keys:
                metrics.WATCHER_QUEUED.labels(what=key[0]).observe(now - self.added_at.get(key, now))
            self.dirty.difference_update(keys)
            self.processing.update(keys)
            return keys

    def waited(self, key: Any) -> float:
        """Seconds since `key` came in (taken once it is processed: a key added meanwhile starts again)."""
        with self.condition:
            return time.monotonic() - self.added_at.pop(key, time.monotonic())

    def done(self, key: Any) -> None:
        with self.condition:
            if key in self.processing and (name := self._name(key)) in self.background:
                self.background_out -= 1
                if not self.background_out and self.lanes.get(name):
                    self.condition.notify()  # the lane's next batch may go
            self.processing.discard(key)
            if key in self.dirty:
                self._queue(key)

    def close(self) -> None:
        with self.condition:
            self.closed = True
            self.condition.notify_all()


class Watcher:
    def __init__(self, gw: Gateway, *, resync_seconds: float = 300.0, positions_seconds: float = 2.0,
                 watch_timeout_seconds: int = 60, appliers: int = 4, ledger_seconds: float = 0.5,
                 freeze_heap: bool = False) -> None:
        """`freeze_heap`: the process is the watcher's own (`manage.py watch_cluster`), whose heap it may freeze
        (worker/heap.py); never in a process that holds much else."""
        self.gw = gw
        self.custom = k8s.CustomObjectsApi(gw.api_client)
        self.core = k8s.CoreV1Api(gw.api_client)
        self.resync_seconds = resync_seconds
        self.positions_seconds = positions_seconds
        self.watch_timeout_seconds = watch_timeout_seconds
        self.ledger_seconds = ledger_seconds
        self.stopping = threading.Event()
        self.lock = threading.RLock()
        self.jobs: dict[str, dict[str, Any]] = {}  # job uid -> Job
        self.workloads: dict[str, dict[str, Any]] = {}  # job uid -> Kueue Workload (the portal's Jobs)
        # Portal work on KAI pools. The PodGroups (compacted) by gang_key (namespace/name): a gang's is the gang,
        # keyed so; by the key of their work (a Job's uid, a gang's key): the pods (as KaiPods, by pod uid) and the
        # latest eviction KAI made of them (kept once the evicted pods are gone); the gangs that lost pods since
        # their repair was last asked for
        self.pod_groups: dict[str, dict[str, Any]] = {}
        self.kai_pods: dict[str, dict[str, KaiPod]] = {}
        self.kai_preemptions: dict[str, Preemption] = {}
        # by the same key: the latest eviction read from KAI's Evict Event on a PodGroup, taken as the work's once its
        # pods no longer show it running (the pod's own condition usually comes first: KAI records the Event before
        # it evicts)
        self.kai_evict_events: dict[str, Preemption] = {}
        self.gangs_lost: set[str] = set()
        self.outside: dict[str, dict[str, Any]] = {}  # Kueue Workload uid -> Workload submitted outside the portal
        # Kueue Workload uid -> (the portal workload, the Workload) of a manifest the portal submitted (not a Job)
        self.manifests: dict[str, tuple[int, dict[str, Any]]] = {}
        self.applied_manifests: dict[str, Observation] = {}
        # uid -> an inference service's Deployment or LeaderWorkerSet (its `kind` set)
        self.deployments: dict[str, dict[str, Any]] = {}
        self.owners: dict[str, dict[str, Any] | None] = {}  # owner uid -> the object (None: unreadable), read once
        self.applied_outside: dict[str, Observation] = {}
        self.owner_readers = ThreadPoolExecutor(OWNER_READERS, thread_name_prefix="owner-read")
        # owner uid -> (since when, the outside Workloads waiting for its watch event)
        self.awaiting_owners: dict[str, tuple[float, set[str]]] = {}
        self.resource_versions: dict[str, str] = {}
        self.applied: dict[str, Observation] = {}  # job uid -> the last one written (most events change nothing)
        self.mirror_objects: dict[Any, tuple[str, dict[str, Any]]] = {}
        # (namespace, kind, name) of the object -> its Events by uid, the latest of each, until applied: at most
        # CLUSTER_EVENTS_KEPT per object, the newest (the portal keeps no more per workload, whose objects they are)
        self.cluster_events: dict[tuple[str, str, str], dict[str, ClusterEvent]] = {}
        self.events_held = 0
        self.work = WorkQueue(batched={"outside": OUTSIDE_BATCH, "mirror": OUTSIDE_BATCH, "event": OUTSIDE_BATCH,
                                       "job": JOB_BATCH}, appliers=appliers,
                              background=frozenset({"event"}), background_after=EVENTS_WAIT_AT_MOST)
        self.appliers = appliers
        self.heap = FrozenHeap() if freeze_heap else None
        self.synced = threading.Event()
        # thread name -> (monotonic time of its loop's last turn, the loop's own period): what `stalled` reads
        self.progress: dict[str, tuple[float, float]] = {}

    # --- applying what we see ------------------------------------------------------------------------------------

    def apply_all_jobs(self) -> None:
        """Apply every Job and gang held (after a relist), a batch at a time; those unchanged cost nothing. The ledger
        is deferred as in the appliers: a batch takes no timeline's lock, which it would take out of order."""
        with self.lock:
            job_uids = [*self.jobs, *self._gang_keys()]
        with usage_services.ledger_deferred():
            for start in range(0, len(job_uids), JOB_BATCH):
                self.apply_job_uids(job_uids[start:start + JOB_BATCH])

    def apply_job_uids(self, job_uids: list[str]) -> None:
        """Bring the portal rows of these Jobs up to date with each Job and its Kueue Workload, or on a KAI pool with
        its pods and their PodGroups (a key is a gang's key for a gang on a KAI pool: its PodGroup), in one
        transaction for those whose observation changed."""
        seen = [(job_uid, *found) for job_uid in job_uids if (found := self._job_observation(job_uid)) is not None]
        news = [(job_uid, workload_id, observation) for job_uid, workload_id, observation, _ in seen
                if self.applied.get(job_uid) != observation]
        if news:
            moved = workload_services.workloads_observe(observations=[
                (workload_id, observation, workload_selectors.preemptor_id(observation))
                for _, workload_id, observation in news])
            for job_uid, _, observation in news:
                self.applied[job_uid] = observation
            if any(moved.values()):  # a queue changed: the start forecasts are due again
                forecasts_refresh_soon()
        for job_uid, workload_id, observation, pods in seen:
            if pods is not None:  # a gang, after its row moved: the repair reads it
                self._gang_repair(job_uid, workload_id, observation, pods)

    def _job_observation(self, job_uid: str) -> tuple[int, Observation, list[KaiPod] | None] | None:
        """(workload id, what the cluster says of it, and for a gang on a KAI pool its pods) of one key; None when
        there is nothing to say yet or it is not the portal's."""
        with self.lock:
            job, kueue_workload = self.jobs.get(job_uid), self.workloads.get(job_uid)
            gang = self.pod_groups.get(job_uid)
            pods = list(self.kai_pods.get(job_uid, {}).values())
            namespace = ((job or gang or {}).get("metadata") or {}).get("namespace", "")
            pod_groups = {pod.pod_group: group for pod in pods
                          if (group := self.pod_groups.get(gang_key(namespace, pod.pod_group))) is not None}
        if job is not None:
            workload_id = _workload_id(job)
            if on_kai(job):
                observation = observe_kai(job, pod_groups, pods, self._kai_preemption(job_uid))
            else:
                observation = observe(job, kueue_workload)
        elif gang is not None and is_gang(gang):
            workload_id = _workload_id(gang)
            observation = observe_kai_gang(gang, pods, self._kai_preemption(job_uid))
        else:
            return None
        if not workload_id or observation is None:
            return None
        return workload_id, observation, (pods if job is None else None)

    def _gang_repair(self, key: str, workload_id: int, observation: Observation, pods: list[KaiPod]) -> None:
        """Hand a gang to the worker when its pods differ from what its row may want: pods gone (evicted, deleted)
        while it waits or runs, or pods still running once it finished or failed. The worker's task reads the row and
        decides (worker/tasks.py kai_gang_repair); asked again only after more pods are lost."""
        min_member = max(1, int(((self.pod_groups.get(key) or {}).get("spec") or {}).get("minMember") or 1))
        finished = observation.status in (Status.SUCCEEDED, Status.FAILED)
        with self.lock:
            # a gang being deleted (a stop) is not repaired; the mark stays until acted on, since `pods` may be older
            # than the deletion that set it (the key is applied again then)
            lost = (key in self.gangs_lost and gang_missing(pods, min_member) and not finished
                    and observation.deleted_at is None)
            if lost or finished:
                self.gangs_lost.discard(key)
        if lost or (finished and gang_outliving(pods)):
            workload_services.workload_gang_repair_request(workload_id=workload_id)

    def _kai_preemption(self, job_uid: str) -> Preemption | None:
        """The latest eviction KAI made of a Job's (or gang's) pods, with the preemptor when KAI's message names a
        PodGroup: the Job it was made for (its owner), or the gang it is. The PodGroup is read from the API when its
        watch event has not come yet (KAI may evict for it before that)."""
        with self.lock:
            self._take_evict_event(job_uid)
            preemption = self.kai_preemptions.get(job_uid)
        if preemption is None or preemption.preemptor_job_uid:
            return preemption
        match = kai_conditions.PREEMPTOR.search(preemption.message)
        if match is None:
            return preemption
        with self.lock:
            held = self.pod_groups.get(gang_key(match.group("namespace"), match.group("name")))
        if held is None:  # asked for once, by name
            try:
                held = self.gw.get("PodGroup", match.group("name"), namespace=match.group("namespace"))
            except ClusterError as error:
                if not error.not_found:
                    raise
        preemptor = pod_group_owner_uid(held) if held else ""
        if not preemptor:
            return preemption
        preemption = Preemption(at=preemption.at, reason=preemption.reason, message=preemption.message,
                                preemptor_workload_uid="", preemptor_job_uid=preemptor)
        with self.lock:
            if self.kai_preemptions.get(job_uid, preemption).at == preemption.at:
                self.kai_preemptions[job_uid] = preemption
        return preemption

    def _handle_kai(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        """A PodGroup of the portal's work on a KAI pool, or one of its pods: kept compacted, and the key of the work
        queued (the Job a PodGroup was made for, or the gang it is; the Job or gang of a pod). A gang's deleted
        PodGroup is the gang gone."""
        if kind == "PodGroup":
            metadata = obj["metadata"]
            key = gang_key(metadata.get("namespace", ""), metadata["name"])
            work = key if is_gang(obj) else pod_group_owner_uid(obj)
            with self.lock:
                if event_type == "DELETED":
                    self.pod_groups.pop(key, None)
                    if work == key:
                        self.applied.pop(key, None)
                        self.kai_pods.pop(key, None)
                        self.kai_preemptions.pop(key, None)
                        self.kai_evict_events.pop(key, None)
                        self.gangs_lost.discard(key)
                        if workload_id := _workload_id(obj):
                            self.work.add(("deleted", workload_id, metadata.get("deletionTimestamp") or ""))
                        return
                elif _newer(obj, self.pod_groups.get(key)):
                    self.pod_groups[key] = compact_pod_group(obj)
                else:
                    return
            self.work.add(("job", work))
            return
        pod = compact_pod(obj)
        if pod is None:
            return
        with self.lock:
            pods = self.kai_pods.setdefault(pod.job_uid, {})
            held = pods.get(pod.uid)
            if event_type == "DELETED":
                pods.pop(pod.uid, None)
                if pod.job_uid in self.pod_groups:  # a gang's: made again while the gang is wanted
                    self.gangs_lost.add(pod.job_uid)
            elif held is None or _newer(obj, {"metadata": {"resourceVersion": held.resource_version}}):
                pods[pod.uid] = pod
            else:
                return
            self._note_preemption(pod)
            if not pods and event_type == "DELETED" and pod.job_uid not in self.jobs and (
                    pod.job_uid not in self.pod_groups):
                self.kai_pods.pop(pod.job_uid, None)
        self.work.add(("job", pod.job_uid))

    def _note_preemption(self, pod: KaiPod) -> None:
        """Keep the latest eviction of a Job's (or gang's) pods (called with the lock held)."""
        if pod.preemption is not None:
            self._note_eviction(pod.job_uid, pod.preemption)

    def _note_eviction(self, key: str, preemption: Preemption) -> None:
        """Keep an eviction of the work `key` unless one as late or within KAI_EVICTION_SEEN_TWICE before it is held
        (the same eviction, seen on a pod and in the Event on its PodGroup, a gang's pods each); called with the lock
        held."""
        held = self.kai_preemptions.get(key)
        if held is None or preemption.at - held.at >= KAI_EVICTION_SEEN_TWICE:
            self.kai_preemptions[key] = preemption

    def _note_kai_eviction(self, event: dict[str, Any]) -> None:
        """KAI records each eviction as an `Evict` Event on the evicted PodGroup. Kept as the pod's DisruptionTarget
        is, so a relist (after a watch gap, or a restart: Events are listed at the start) that finds the work waiting
        again still finds why; the Event is dated at or before the pod's condition, so an eviction the row recorded
        already is not recorded again."""
        involved = event.get("involvedObject") or {}
        if event.get("reason") != kai_conditions.EVICT or involved.get("kind") != "PodGroup":
            return
        metadata = event.get("metadata") or {}
        try:
            at = parse_time(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
                            or metadata.get("creationTimestamp") or "")
        except (TypeError, ValueError):
            return
        if at is None:
            return
        key = gang_key(str(involved.get("namespace") or metadata.get("namespace") or ""), str(involved.get("name")))
        with self.lock:
            group = self.pod_groups.get(key)
            if group is None:  # not the portal's work, or gone with it
                return
            work = key if is_gang(group) else pod_group_owner_uid(group)
            held = self.kai_evict_events.get(work)
            if held is not None and held.at >= at:
                return
            self.kai_evict_events[work] = Preemption(
                at=at, reason=kai_conditions.PREEMPTION_BY_SCHEDULER, message=str(event.get("message") or ""),
                preemptor_workload_uid="", preemptor_job_uid="")
        self.work.add(("job", work))

    def _take_evict_event(self, key: str) -> None:
        """Take the eviction read from an Evict Event as the work's once no pod bound before it still runs (called
        with the lock held): until then the pods' own update is on its way, and would show the work running after
        its preemption."""
        event = self.kai_evict_events.get(key)
        if event is None:
            return
        pods = self.kai_pods.get(key, {}).values()
        if any(p.bound_at is not None and p.bound_at <= event.at and not p.leaving and p.phase not in FINISHED_PHASES
               for p in pods):
            return
        self.kai_evict_events.pop(key, None)
        self._note_eviction(key, event)

    def handle(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        """Remember the object and queue its key; the appliers write the database."""
        metadata = obj.get("metadata") or {}
        if kind in KAI_KINDS:
            self._handle_kai(kind, event_type, obj)
            return
        if kind == EVENTS:
            if event_type != "DELETED":  # the cluster forgets them
                self._note_kai_eviction(obj)
                if (event := _cluster_event(obj)) is not None:
                    self.hold_events([event])
            return
        if kind in OWNER_WATCHES:
            if event_type != "DELETED":  # a deleted owner's Workload may come later: kept until the next resync
                self.owners[str(metadata.get("uid", ""))] = submitter_fields(obj)
                with self.lock:
                    _, waiting = self.awaiting_owners.pop(str(metadata.get("uid", "")), (0.0, set()))
                for workload in waiting:
                    self.work.add(("outside", workload))
            return
        if kind in MIRRORS:
            key = ("mirror", kind, metadata.get("namespace", ""), metadata["name"])
            with self.lock:
                self.mirror_objects[key] = (event_type, obj)
            self.work.add(key)
            return
        if kind in SERVING_KINDS:
            self._handle_deployment(event_type, {**obj, "kind": kind})
            return
        if kind == "Workload" and (workload_id := _portal_manifest_id(obj)):
            self._handle_manifest(event_type, obj, workload_id)
            return
        if kind == "Workload" and not _portal_workload(obj):
            self._handle_outside(event_type, obj)
            return
        if kind == "Job":
            job_uid, cache = metadata["uid"], self.jobs
        else:
            job_uid, cache = (metadata.get("labels") or {}).get(JOB_UID_LABEL, ""), self.workloads
            if not job_uid:
                return
        with self.lock:
            if event_type == "DELETED":
                cache.pop(job_uid, None)
                if kind == "Job":
                    self.applied.pop(job_uid, None)
                    self.kai_pods.pop(job_uid, None)
                    self.kai_preemptions.pop(job_uid, None)
                    self.kai_evict_events.pop(job_uid, None)
                    workload_id = _workload_id(obj)
                    if workload_id:
                        self.work.add(("deleted", workload_id, metadata.get("deletionTimestamp") or ""))
                return
            if not _newer(obj, cache.get(job_uid)):
                return  # a replayed or reordered event older than what we hold
            cache[job_uid] = obj
        self.work.add(("job", job_uid))

    def _handle_manifest(self, event_type: str, obj: dict[str, Any], workload_id: int) -> None:
        uid = obj["metadata"]["uid"]
        with self.lock:
            if event_type == "DELETED":
                self.manifests.pop(uid, None)
                self.applied_manifests.pop(uid, None)
                self.work.add(("deleted", workload_id, obj["metadata"].get("deletionTimestamp") or ""))
                return
            if not _newer(obj, (self.manifests.get(uid) or (0, None))[1]):
                return
            self.manifests[uid] = (workload_id, obj)
        self.work.add(("manifest", uid))

    def _handle_deployment(self, event_type: str, obj: dict[str, Any]) -> None:
        uid, workload_id = obj["metadata"]["uid"], _workload_id(obj)
        if not workload_id:
            return
        with self.lock:
            if event_type == "DELETED":
                self.deployments.pop(uid, None)
                self.work.add(("deleted", workload_id, obj["metadata"].get("deletionTimestamp") or ""))
                return
            if not _newer(obj, self.deployments.get(uid)):
                return
            self.deployments[uid] = obj
        self.work.add(("deployment", uid))

    def apply_deployment(self, uid: str) -> None:
        """Bring an inference service's row up to date with its Deployment's (or LeaderWorkerSet's) status: ready
        replicas, running, and the GPU-hours of the ready replicas (apps.workloads.services.inference_observe), on
        the cluster's clock. A change of the ready count is dated from the service's pods (ready_changed_at): a pure
        scale stamps none of the Deployment's conditions, so their latest update is only the fallback
        (docs/architecture.md, Inference services). The pods are listed only when the count differs from the
        row's."""
        with self.lock:
            deployment = self.deployments.get(uid)
        if deployment is None:
            return
        spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
        generation = deployment["metadata"].get("generation", 0)
        replicas = int(spec.get("replicas", 1))
        updated = int(status.get("updatedReplicas", 0))
        ready = int(status.get("readyReplicas", 0))
        # A LeaderWorkerSet has no availableReplicas: its readyReplicas counts the groups whose pods all run.
        available = ready if deployment.get("kind") == "LeaderWorkerSet" else int(status.get("availableReplicas", 0))
        rolled_out = (status.get("observedGeneration", 0) >= generation and updated == replicas
                      and int(status.get("replicas", 0)) == replicas and available == replicas)
        row = Workload.objects.filter(  # the portal's own Deployment in its project's namespace, not a namesake
            pk=_workload_id(deployment), kind=Kind.INFERENCE, origin=Origin.PORTAL,
            job_name=deployment["metadata"]["name"],
            project__namespace=deployment["metadata"].get("namespace")).values("ready_replicas", "status").first()
        if row is None:
            return
        held = row["ready_replicas"] or 0
        at = None
        if ready != held and row["status"] in SERVING_STATUSES:  # a stopping service's stretch ends with its stop
            pods = self._deployment_pods(deployment)
            if deployment.get("kind") == "LeaderWorkerSet" and ready > held:
                pods = ready_groups(pods)  # a group counts once all its pods are: its last one dates the rise
            at = ready_changed_at(pods, rising=ready > held)
        workload_services.inference_observe(
            workload_id=_workload_id(deployment), uid=uid, ready=ready, replicas=replicas,
            updated=updated, rolled_out=rolled_out, at=at or _conditions_updated_at(status) or timezone.now())

    def _deployment_pods(self, deployment: dict[str, Any]) -> list[dict[str, Any]]:
        """The pods of a portal Deployment, by its selector's labels (its workload id), in its namespace; a
        LeaderWorkerSet's by the workload id its pod template carries."""
        labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {
            WORKLOAD_ID_LABEL: str(_workload_id(deployment))}
        return self.gw.list("Pod", namespace=deployment["metadata"].get("namespace"),
                            label_selector=",".join(f"{key}={value}" for key, value in sorted(labels.items())))

    def apply_manifest(self, uid: str) -> None:
        """Bring the portal row of a manifest it submitted (a JobSet, a RayJob...) up to date with Kueue's Workload
        for it: the same state machine as its Jobs, read from the Workload alone."""
        with self.lock:
            workload_id, kueue_workload = self.manifests.get(uid, (0, None))
        if kueue_workload is None:
            return
        observation = observe(None, kueue_workload)
        if observation is None or self.applied_manifests.get(uid) == observation:
            return
        reference = owner_reference(kueue_workload) or {}
        if not Workload.objects.filter(  # the portal's own object in its project's namespace, not a namesake
                pk=workload_id, origin=Origin.PORTAL, project__namespace=kueue_workload["metadata"].get("namespace"),
                job_name=reference.get("name")).filter(RUNS_AS_OBJECT).exists():
            return
        moved = workload_services.workload_observe(workload_id=workload_id, observation=observation,
                                                   preemptor_id=workload_selectors.preemptor_id(observation))
        self.applied_manifests[uid] = observation
        if moved:
            forecasts_refresh_soon()

    def _handle_outside(self, event_type: str, obj: dict[str, Any]) -> None:
        uid = obj["metadata"]["uid"]
        with self.lock:
            if event_type == "DELETED":
                self.outside.pop(uid, None)
                self.applied_outside.pop(uid, None)
                self.work.add(("outside-gone", uid, obj["metadata"].get("deletionTimestamp") or ""))
                return
            if not _newer(obj, self.outside.get(uid)):
                return
            self.outside[uid] = compact(obj)
        self.work.add(("outside", uid))

    def apply_outside(self, uids: list[str]) -> None:
        """Mirror Kueue Workloads submitted outside the portal (one, or a batch of a first sync), or keep them for
        admins as unmapped; those whose observation was applied already cost nothing."""
        news = []
        for uid in uids:
            with self.lock:
                kueue_workload = self.outside.get(uid)
            if kueue_workload is None:
                continue
            observation = observe(None, kueue_workload) or Observation(
                status=Status.QUEUED, kueue_name=kueue_workload["metadata"].get("name", ""))
            if self.applied_outside.get(uid) != observation and not self._owner_awaited(kueue_workload):
                news.append((kueue_workload, observation))
        self._read_owners_of([kueue_workload for kueue_workload, _ in news])
        items = []
        for kueue_workload, observation in news:
            namespace = kueue_workload["metadata"].get("namespace", "")
            work = read_outside(kueue_workload, self._owner(namespace, owner_reference(kueue_workload)))
            if isinstance(work, Unmapped):
                self._unmapped(work, mirrored=True)
            else:
                items.append((work, observation))
        if not items:
            return
        mirrored = workload_services.workloads_mirror_outside(items=items)
        for work, observation in items:
            result = mirrored[work.kueue_uid]
            if isinstance(result, Unmapped):
                self._unmapped(result, mirrored=True)
            else:
                self.applied_outside[work.kueue_uid] = observation
        mirror.unmapped_forget_many(uids={uid for uid, result in mirrored.items() if not isinstance(result, Unmapped)})
        forecasts_refresh_soon()  # a queue changed (coalesced: a burst asks once)

    def _unmapped(self, unmapped: Unmapped, *, mirrored: bool = False) -> None:
        """Keep it for admins (logged and counted when first seen); a Kueue Workload that was `mirrored` before (its
        namespace unmapped since, say) stops counting as a project's work."""
        if mirrored:
            workload_services.workloads_unmapped(kueue_uids=[unmapped.uid], at=timezone.now(),
                                                 detail=unmapped.detail)
        if not mirror.unmapped_seen(uid=unmapped.uid):
            logger.info("cannot map %s/%s (%s): %s", unmapped.namespace, unmapped.name, unmapped.reason,
                        unmapped.detail)
            metrics.WATCHER_UNMAPPED.labels(reason=unmapped.reason).inc()
        mirror.unmapped_record(uid=unmapped.uid, namespace=unmapped.namespace, name=unmapped.name,
                               reason=unmapped.reason, detail=unmapped.detail, object_kind=unmapped.object_kind,
                               gpus=unmapped.gpus, at=timezone.now())

    def _owner(self, namespace: str, reference: dict[str, Any] | None) -> dict[str, Any] | None:
        """What an outside Workload's owner says of who submitted it. The owner watches keep these for every owner
        Kueue queues; one they have not delivered (a Workload seen first, an owner without the queue label) is
        looked up by name once: it does not change."""
        if reference is None:
            return None
        uid = str(reference.get("uid", ""))
        if uid in self.owners:
            return self.owners[uid]
        lookup = owner_lookup(namespace, reference)
        owner = None
        if lookup is not None:
            try:
                owner = next((item for item in self.gw.raw_list(*lookup)
                              if (item.get("metadata") or {}).get("uid") == uid), None)  # not a namesake
            except ClusterError as error:
                if not error.not_found:
                    raise
        self.owners[uid] = submitter_fields(owner)
        return self.owners[uid]

    def _owner_awaited(self, kueue_workload: dict[str, Any]) -> bool:
        """Whether to wait for the owner's watch event before mirroring this Workload: Kueue makes a Workload right
        after its owner, and the two come on different watches. The owner's event brings the Workload back (`handle`);
        after OWNER_GRACE_SECONDS it is looked up by name instead (`_owners_overdue`)."""
        reference = owner_reference(kueue_workload)
        if reference is None:
            return False
        uid = str(reference.get("uid", ""))
        watch = f"owner:{group_of(str(reference.get('apiVersion', ''))) or 'core'}/{reference.get('kind', '')}"
        if uid in self.owners or watch not in self.resource_versions:  # known, or a kind not watched
            return False
        with self.lock:
            since, waiting = self.awaiting_owners.setdefault(uid, (time.monotonic(), set()))
            if time.monotonic() - since > OWNER_GRACE_SECONDS:
                self.awaiting_owners.pop(uid, None)
                return False
            waiting.add(kueue_workload["metadata"]["uid"])
        return True

    def _owners_overdue(self) -> None:
        """Workloads whose owner no watch event brought within the grace: back to the appliers, to look it up."""
        now = time.monotonic()
        with self.lock:
            overdue = [uid for uid, (since, _) in self.awaiting_owners.items() if now - since > OWNER_GRACE_SECONDS]
            workloads = {workload for uid in overdue for workload in self.awaiting_owners[uid][1]}
        for workload in workloads:
            self.work.add(("outside", workload))

    def _read_owners_of(self, kueue_workloads: list[dict[str, Any]]) -> None:
        """The owners of a batch the watches have not delivered, looked up side by side (a round trip each)."""
        missing = {}
        for kueue_workload in kueue_workloads:
            reference = owner_reference(kueue_workload)
            if reference is not None and str(reference.get("uid", "")) not in self.owners:
                missing[str(reference.get("uid", ""))] = (kueue_workload["metadata"].get("namespace", ""), reference)
        if len(missing) > 1:
            list(self.owner_readers.map(lambda found: self._owner(*found), missing.values()))

    def relist_owners(self, name: str) -> set[str] | None:
        """List one owner kind's queued objects into the owner cache (its watch resumes from the list's
        resourceVersion); returns their uids, or None when the kind is not installed."""
        group, owner_kind = OWNER_WATCHES[name]
        uids, version = set(), ""
        try:  # a page at a time: 10,000 Jobs are kept as who submitted each, never all at once as objects
            for items, listed in self.gw.raw_pages(owner_kind.list_path(group), [("labelSelector", OWNER_SELECTOR)]):
                for item in items:
                    uid = str(item["metadata"].get("uid", ""))
                    self.owners[uid] = submitter_fields(item)
                    uids.add(uid)
                version = listed
        except ClusterError as error:
            if error.not_found:
                self.resource_versions.pop(name, None)
                return None
            raise
        self.resource_versions[name] = version
        return uids

    def torch_runtime(self) -> str:
        """The ClusterTrainingRuntime PyTorch runs on as a TrainJob (docs/frameworks.md), "" for none: a cluster whose
        Trainer has no runtime for torch (or lacks the kind, or a watcher without the permission to list it: a
        warning) runs PyTorch as a JobSet."""
        try:
            runtimes = self.gw.raw_list(TORCH_RUNTIMES_PATH, [("labelSelector", f"{TORCH_RUNTIME_LABEL}=torch")])
        except ClusterError as error:
            if error.status == 403:
                logger.warning("cannot list ClusterTrainingRuntimes, PyTorch runs as a JobSet: %s", error.describe())
            elif not error.not_found:
                raise
            return ""
        return torch_runtime_of(runtimes)

    def process(self, keys: list[Any]) -> None:
        """Apply what the work queue handed out: a batch of Jobs' portal rows, of outside Workloads, of mirrored
        queues, cohorts and Nodes or of Events, or one key: a manifest's or an inference service's row, a deleted
        Job's, a gone outside Workload's."""
        key = keys[0]
        if key[0] == "outside":
            self.apply_outside([uid for _, uid in keys])
            return
        if key[0] == "event":
            self.apply_events([(namespace, kind, name) for _, namespace, kind, name in keys])
            return
        if key[0] == "mirror":
            self.apply_mirror(keys)
            return
        if key[0] == "job":
            self.apply_job_uids([job_uid for _, job_uid in keys])
            return
        if key[0] == "manifest":
            self.apply_manifest(key[1])
            return
        if key[0] == "deployment":
            self.apply_deployment(key[1])
            return
        if key[0] == "outside-gone":
            mirror.unmapped_forget(uid=key[1])
            workload_services.workloads_gone(
                workload_ids=list(Workload.objects.filter(kueue_uid=key[1]).values_list("pk", flat=True)),
                at=timezone.now(), cluster_at=parse_time(key[2]))
            return
        if key[0] == "deleted":
            workload_services.workloads_gone(workload_ids=[key[1]], at=timezone.now(), cluster_at=parse_time(key[2]))
            return

    def hold_events(self, events: list[ClusterEvent], *, retried: bool = False) -> None:
        """Hold Events for the appliers, queued by the object they are about: many Events of one object are one
        key, and beyond CLUSTER_EVENTS_KEPT of it only the newest are held (the older ones the portal would trim
        anyway, as the object's workload keeps the newest). A `retried` Event does not replace a newer one."""
        objects = set()
        with self.lock:
            for event in events:
                if names_another_workload(event):
                    continue
                key = (event.namespace, event.object_kind, event.object_name)
                held = self.cluster_events.setdefault(key, {})
                if event.uid not in held:
                    self.events_held += 1
                elif retried:
                    continue
                held[event.uid] = event
                if len(held) > CLUSTER_EVENTS_KEPT:
                    oldest = min(held.values(), key=lambda kept: kept.last_seen)
                    del held[oldest.uid]
                    self.events_held -= 1
                objects.add(key)
        for key in objects:
            self.work.add(("event", *key))

    def apply_events(self, objects: list[tuple[str, str, str]]) -> None:
        """Keep the held Events of these objects with the workloads they are about (the rest are dropped)."""
        with self.lock:
            events = [event for key in objects for event in self.cluster_events.pop(key, {}).values()]
            self.events_held -= len(events)
        try:
            workload_services.workload_cluster_events_record(events=events)
        except Exception:
            self.hold_events(events, retried=True)  # the applier adds the keys back
            raise

    def wait_for_event_room(self) -> None:
        """Hold the events watch while the appliers hold EVENTS_HELD_AT_MOST Events (they wait behind status work):
        the backlog stays in the cluster, not in the watcher's memory."""
        while not self.stopping.is_set():
            with self.lock:
                if self.events_held < EVENTS_HELD_AT_MOST:
                    return
            self._progressed(max(self.watch_timeout_seconds, OWNER_KIND_RETRY_SECONDS))
            self.stopping.wait(0.1)

    def relist_events(self) -> str:
        """List every Event into the work queue a page at a time, each once there is room for it; returns the list's
        resourceVersion. Only at the start and after a 410: Events come and go within the hour, a missed one is not
        repaired by resyncs."""
        version = ""
        for items, listed in self.gw.raw_pages("/api/v1/events"):
            self.wait_for_event_room()
            for item in items:
                self._note_kai_eviction(item)
            self.hold_events([event for item in items if (event := _cluster_event(item)) is not None])
            version = listed
        return version

    def apply_mirror(self, keys: list[Any]) -> None:
        """Mirror the latest state of these queues, cohorts and Nodes: one statement per kind for the batch."""
        current: dict[str, list[dict[str, Any]]] = {}
        taken: dict[Any, tuple[str, dict[str, Any]]] = {}
        with self.lock:
            for key in keys:
                if key in self.mirror_objects:
                    taken[key] = self.mirror_objects.pop(key)
        try:
            for (_, kind, namespace, name), (event_type, obj) in taken.items():
                if event_type == "DELETED":
                    mirror.mirror_forget(kind=kind, name=name, namespace=namespace)
                else:
                    current.setdefault(kind, []).append(obj)
            for kind, objs in current.items():
                MIRRORS[kind](objs=objs, at=timezone.now())
        except Exception:
            with self.lock:  # held again for the retry, unless a newer state came meanwhile
                for key, held in taken.items():
                    self.mirror_objects.setdefault(key, held)
            raise

    def _apply_loop(self) -> None:
        self._progressed(APPLY_WAIT_SECONDS)  # known from the start: a stop before the first turn still shows
        while not self.stopping.is_set():
            self._progressed(APPLY_WAIT_SECONDS)
            keys = self.work.get(timeout=APPLY_WAIT_SECONDS)
            if not keys:
                continue
            close_old_connections()
            try:
                failed = not self._apply(keys, retry=len(keys) == 1)
                if failed and len(keys) > 1:
                    # One object the database refuses must not hold back the rest of its batch: each alone.
                    applied = [self._apply([key], retry=True) for key in keys]  # every one, not up to a failure
                    failed = not all(applied)
                if failed:
                    self.stopping.wait(0.5)  # once a turn, not once a key: a database that is down stays down
            finally:
                for key in keys:
                    self.work.done(key)

    def _apply(self, keys: list[Any], *, retry: bool) -> bool:
        """One applier pass; False when it failed (the keys then go back to the work queue if `retry`)."""
        started = time.monotonic()
        try:
            with usage_services.ledger_deferred():  # the ledger loop recomputes slices, once per burst
                self.process(keys)
        except Exception:
            logger.warning("applying %s%s failed%s", keys[0], f" and {len(keys) - 1} more" * (len(keys) > 1),
                           "; will retry" if retry else "; applying each alone", exc_info=True)
            if retry:
                for key in keys:
                    self.work.add(key)
            return False
        metrics.WATCHER_APPLY.labels(what=keys[0][0]).observe(time.monotonic() - started)
        for key in keys:
            metrics.WATCHER_LAG.observe(self.work.waited(key))
        return True

    def relist(self, kind: str) -> str:
        """List one kind afresh, apply every object, forget what is gone; returns the list's resourceVersion."""
        if kind == "Workload":
            return self._relist_workloads()
        if kind == KAI_PODS:
            return self._relist_kai_pods()
        lister, args = self._lister(kind)
        if kind == "Node":  # core v1: the raw JSON, as the custom objects come
            response = json.loads(lister(*args, _preload_content=False).data)
        else:
            try:
                # The generated client declares `object`; a custom-object list is a decoded JSON mapping.
                response = cast(dict[str, Any], lister(*args, label_selector=WATCHED[kind] or None))
            except ApiException as exc:
                if exc.status != 404 or kind not in OPTIONAL_KINDS:
                    raise
                response = {"items": [], "metadata": {"resourceVersion": ""}}  # not installed: nothing of it runs
        items = response.get("items", [])
        now = timezone.now()
        if kind == "Job":
            with self.lock:
                self.jobs = {item["metadata"]["uid"]: item for item in items}
        elif kind == "PodGroup":
            with self.lock:
                self.pod_groups = {gang_key(item["metadata"].get("namespace", ""), item["metadata"]["name"]):
                                   compact_pod_group(item) for item in items}
        elif kind in SERVING_KINDS:
            with self.lock:  # the other serving kind's objects stay
                self.deployments = {**{uid: item for uid, item in self.deployments.items() if item["kind"] != kind},
                                    **{item["metadata"]["uid"]: {**item, "kind": kind} for item in items
                                       if _workload_id(item)}}
        else:
            MIRRORS[kind](objs=items, at=now)
            mirror.mirror_keep_only(kind=kind, keys={(item["metadata"].get("namespace", ""), item["metadata"]["name"])
                                                     for item in items})
        return response["metadata"]["resourceVersion"]

    def _relist_kai_pods(self) -> str:
        """List the pods of portal Jobs on KAI pools a page at a time, kept compacted by Job. The evictions noted
        before stay for the Jobs still there (an evicted pod is gone by the next list)."""
        pods: dict[str, dict[str, KaiPod]] = {}
        version = ""
        for items, listed in self.gw.raw_pages("/api/v1/pods", [("labelSelector", WATCHED[KAI_PODS] or "")]):
            for item in items:
                if (pod := compact_pod(item)) is not None:
                    pods.setdefault(pod.job_uid, {})[pod.uid] = pod
            version = listed
        with self.lock:
            self.kai_pods = pods
            self.kai_preemptions = {uid: held for uid, held in self.kai_preemptions.items()
                                    if uid in self.jobs or uid in self.pod_groups}
            self.kai_evict_events = {uid: held for uid, held in self.kai_evict_events.items()
                                     if uid in self.jobs or uid in self.pod_groups}
            # A gang short of pods at a relist may have lost them unseen (a watch gap): its repair is asked for.
            self.gangs_lost |= {key for key, group in self.pod_groups.items() if is_gang(group) and gang_missing(
                pods.get(key, {}).values(), int((group.get("spec") or {}).get("minMember") or 1))}
            for job_pods in pods.values():
                for pod in job_pods.values():
                    self._note_preemption(pod)
        return version

    def _relist_workloads(self) -> str:
        """List every Kueue Workload a page at a time, keeping the portal's whole and the others compacted as each
        page comes: 10,000 outside Workloads are never all held as listed objects at once."""
        workloads: dict[str, dict[str, Any]] = {}
        manifests: dict[str, tuple[int, dict[str, Any]]] = {}
        outside: dict[str, dict[str, Any]] = {}
        kind, version = KINDS["Workload"], ""
        for items, listed in self.gw.raw_pages(f"/apis/{kind.group}/{kind.version}/{kind.plural}"):
            for item in items:
                job_uid = (item["metadata"].get("labels") or {}).get(JOB_UID_LABEL)
                if _portal_workload(item):
                    if job_uid:
                        workloads[job_uid] = item
                elif workload_id := _portal_manifest_id(item):
                    manifests[item["metadata"]["uid"]] = (workload_id, item)
                else:
                    outside[item["metadata"]["uid"]] = compact(item)
            version = listed
        with self.lock:
            self.workloads, self.manifests, self.outside = workloads, manifests, outside
        return version

    def resync(self) -> None:
        """Full relist of every kind, then every portal row of a known Job is re-applied."""
        listed_at = timezone.now()
        self.applied.clear()  # a resync re-applies everything (idempotently) to repair what a watch missed
        for kind in WATCHED:
            self.resource_versions[kind] = self.relist(kind)
        queued_owners: set[str] = set()
        served = {Kind.JOB.value, Kind.POD.value}
        for name in OWNER_WATCHES:
            listed = self.relist_owners(name)
            queued_owners |= listed or set()
            if listed is not None:
                served.add(OWNER_WATCHES[name][1].kind.value)
        torch_runtime = self.torch_runtime() if Kind.TRAINJOB.value in served else ""
        mirror.watcher_served_kinds(kinds=sorted(served), at=timezone.now(), torch_runtime=torch_runtime)
        self.apply_all_jobs()
        self._jobs_gone(listed_at)
        self._apply_all_deployments(listed_at)
        self._apply_all_manifests(listed_at)
        self._apply_all_outside(listed_at, keep_owners=queued_owners)
        self.unqueued_pods_scan()
        metrics.WATCHER_RESYNCS.inc()
        self.synced.set()

    def heartbeat(self) -> None:
        """One cheap list (a LocalQueue, a verb the watcher holds anyway) recorded for /readyz and the metrics; with
        a loop stalled the cluster counts as not seen, since the mirror no longer follows it."""
        try:
            self.gw.raw_get(f"/apis/{KINDS['LocalQueue'].group}/{KINDS['LocalQueue'].version}/localqueues",
                            query=[("labelSelector", OWNED), ("limit", 1)])
        except ClusterError as error:
            logger.warning("heartbeat: %s", error.describe())
            mirror.watcher_heartbeat(at=timezone.now(), error=error.describe())
            return
        if stalled := self.stalled():
            logger.error("heartbeat: stalled: %s", "; ".join(stalled))
            mirror.watcher_heartbeat(at=timezone.now(), error=f"the watcher is stalled: {'; '.join(stalled)}")
            return
        mirror.watcher_heartbeat(at=timezone.now())

    def stalled(self) -> list[str]:
        """The loops that made no progress for their own period plus WATCHER_STALL_SECONDS, each with how long."""
        now = time.monotonic()
        return [f"{name} made no progress for {now - at:.0f} s" for name, (at, period) in sorted(self.progress.items())
                if now - at > period + settings.WATCHER_STALL_SECONDS]

    def _progressed(self, period: float) -> None:
        """The calling loop turned; it turns at least every `period` seconds while it is healthy."""
        self.progress[threading.current_thread().name] = (time.monotonic(), period)

    def _apply_all_outside(self, listed_at: datetime, keep_owners: set[str] | None = None) -> None:
        """Every outside Workload listed (queued for the appliers), then the rows and unmapped entries of those that
        are gone; with `keep_owners` (the owners a resync listed) the owner cache keeps only those and the owners
        of Workloads still there."""
        self.applied_outside.clear()
        with self.lock:
            present = set(self.outside)
        for uid in sorted(present):
            self.work.add(("outside", uid))
        missing = Workload.objects.filter(origin=Origin.OUTSIDE, status__in=LIVE_STATUSES,
                                          created_at__lt=listed_at).exclude(kueue_uid__in=present)
        workload_services.workloads_gone(workload_ids=list(missing.values_list("pk", flat=True)), at=timezone.now())
        mirror.unmapped_keep_only(uids=present, reasons=set(UNMAPPED_WORKLOAD_REASONS))
        if keep_owners is None:
            return
        with self.lock:
            referenced = {str((owner_reference(item) or {}).get("uid", "")) for item in self.outside.values()}
        keep = referenced | keep_owners
        self.owners = {uid: owner for uid, owner in list(self.owners.items()) if uid in keep}

    def unqueued_pods_scan(self) -> None:
        """GPU pods of project namespaces that no Kueue queue admitted: flagged for admins, "runs outside the
        queue" (their GPUs are in no project's numbers)."""
        pods = self.gw.list("Pod", label_selector=UNQUEUED_POD_SELECTOR)
        namespaces = set(Project.objects.values_list("namespace", flat=True)) | set(
            ProjectNamespace.objects.values_list("namespace", flat=True))
        found = unqueued_gpu_pods(pods, namespaces=namespaces)
        for item in found:
            self._unmapped(item)
        mirror.unmapped_keep_only(uids={item.uid for item in found}, reasons={"outside_queue"})

    def _apply_all_manifests(self, listed_at: datetime) -> None:
        """Every manifest Workload listed (re-applied), then the live rows of manifests whose Kueue Workload, seen
        before, is gone (its object deleted by someone else)."""
        self.applied_manifests.clear()
        with self.lock:
            present = {workload_id for workload_id, _ in self.manifests.values()}
            uids = list(self.manifests)
        for uid in uids:
            self.apply_manifest(uid)
        missing = Workload.objects.filter(RUNS_AS_OBJECT, origin=Origin.PORTAL,
                                          status__in=LIVE_STATUSES - {Status.SUBMITTING},
                                          submitted_at__lt=listed_at).exclude(kueue_name="").exclude(pk__in=present)
        workload_services.workloads_gone(workload_ids=list(missing.values_list("pk", flat=True)), at=timezone.now())

    def _apply_all_deployments(self, listed_at: datetime) -> None:
        """Every inference service's Deployment or LeaderWorkerSet listed (re-applied), then the live rows whose
        object is gone."""
        with self.lock:
            uids = list(self.deployments)
        for uid in uids:
            self.apply_deployment(uid)
        missing = Workload.objects.filter(kind=Kind.INFERENCE, origin=Origin.PORTAL,
                                          status__in=LIVE_STATUSES - {Status.SUBMITTING},
                                          submitted_at__lt=listed_at).exclude(k8s_uid="").exclude(k8s_uid__in=uids)
        workload_services.workloads_gone(workload_ids=list(missing.values_list("pk", flat=True)), at=timezone.now())

    def _jobs_gone(self, listed_at: datetime) -> None:
        """Live rows whose Job (or a KAI gang's PodGroup) no longer exists in the cluster (deleted by someone
        else)."""
        with self.lock:
            present = {*self.jobs, *(str(self.pod_groups[key]["metadata"].get("uid")) for key in self._gang_keys())}
        missing = Workload.objects.filter(origin=Origin.PORTAL, kind__in=[*PORTAL_KIND_VALUES, Kind.JOB]).exclude(
            RUNS_AS_OBJECT).exclude(k8s_uid="").exclude(k8s_uid__in=present).filter(
            status__in=LIVE_STATUSES - {Status.SUBMITTING},
            submitted_at__lt=listed_at,  # submitted after the list was taken: its Job may simply not be listed
        ).values_list("pk", flat=True)
        workload_services.workloads_gone(workload_ids=list(missing), at=timezone.now())

    def _gang_keys(self) -> list[str]:
        """The keys of the gangs on KAI pools (their PodGroups), called with the lock held."""
        return [key for key, group in self.pod_groups.items() if is_gang(group)]

    # --- queue positions -----------------------------------------------------------------------------------------

    def refresh_positions(self) -> None:
        queued = list(Workload.objects.filter(status__in=QUEUED_STATUSES).exclude(kueue_name="").values_list(
            "pk", "kueue_name", CLUSTER_NAMESPACE, "preemptible", "node_pool__slug", "queue_position_local",
            "queue_position_cluster"))
        queues = {(namespace, kueue_names.local_queue(pool, guaranteed=not preemptible))
                  for _, _, namespace, preemptible, pool, _, _ in queued}
        by_name = {(namespace, name): pk for pk, name, namespace, _, _, _, _ in queued}
        positions: dict[int, tuple[int, int]] = {}
        for namespace, queue in sorted(queues):
            summary = self.gw.raw_get(
                f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/{queue}/pendingworkloads",
                query=[("limit", 1000)])
            for item in (summary or {}).get("items", []):
                workload_id = by_name.get((namespace, item["metadata"]["name"]))
                if workload_id is not None:
                    positions[workload_id] = (item["positionInLocalQueue"], item["positionInClusterQueue"])
        workload_services.workload_positions_set(
            positions=positions, queued={pk: (local, cluster) for pk, *_, local, cluster in queued}, at=timezone.now())

    # --- the loops -----------------------------------------------------------------------------------------------

    def _lister(self, kind: str) -> tuple[Callable[..., Any], tuple[str, ...]]:
        """The list call of a kind and its arguments (a watch is the same call): Nodes are core v1, the rest the
        portal's batch and Kueue kinds, read as custom objects."""
        if kind == "Node":
            return self.core.list_node, ()
        if kind == EVENTS:
            return self.core.list_event_for_all_namespaces, ()
        if kind == KAI_PODS:
            return self.core.list_pod_for_all_namespaces, ()
        if kind in OWNER_WATCHES:
            group, owner_kind = OWNER_WATCHES[kind]
            if not group:
                return self.core.list_pod_for_all_namespaces, ()
            return self.custom.list_cluster_custom_object, (group, owner_kind.version, owner_kind.plural)
        kind_info = KINDS[kind]
        return self.custom.list_cluster_custom_object, (kind_info.group, kind_info.version, kind_info.plural)

    def _watch_loop(self, kind: str) -> None:
        lister, args = self._lister(kind)
        selector = OWNER_SELECTOR if kind in OWNER_WATCHES else WATCHED.get(kind)
        self._progressed(max(self.watch_timeout_seconds, OWNER_KIND_RETRY_SECONDS))  # known before the first turn
        while not self.stopping.is_set():
            self._progressed(max(self.watch_timeout_seconds, OWNER_KIND_RETRY_SECONDS))
            close_old_connections()
            if kind == EVENTS and kind not in self.resource_versions:
                self._relist_and_apply(kind)  # the first list (and after a 410)
                if kind not in self.resource_versions:
                    continue
            if kind in OWNER_WATCHES and kind not in self.resource_versions:
                self._relist_and_apply(kind)  # not installed when last listed: look again
                if kind not in self.resource_versions:
                    self.stopping.wait(OWNER_KIND_RETRY_SECONDS)
                    continue
            try:
                stream = k8s_watch.Watch()
                for event in stream.stream(
                        lister, *args, label_selector=selector or None,
                        resource_version=self.resource_versions.get(kind), allow_watch_bookmarks=True,
                        timeout_seconds=self.watch_timeout_seconds):
                    if self.stopping.is_set():
                        stream.stop()
                        break
                    self._progressed(max(self.watch_timeout_seconds, OWNER_KIND_RETRY_SECONDS))
                    event_type, obj = event["type"], event["raw_object"]  # JSON, whatever the client's model
                    if event_type == "ERROR":
                        raise ApiException(status=obj.get("code", 500), reason=obj.get("reason", ""))
                    if event_type != "BOOKMARK":
                        if kind == EVENTS:
                            self.wait_for_event_room()
                        self.handle(kind, event_type, obj)
                    # Only once handled: if handling fails, the watch resumes before this event and gets it again.
                    self.resource_versions[kind] = obj["metadata"].get("resourceVersion") or \
                        self.resource_versions.get(kind, "")
            except ApiException as exc:
                if exc.status == 410:
                    logger.info("watch %s: resourceVersion too old, relisting", kind)
                    self._relist_and_apply(kind)
                elif exc.status == 404 and kind in OWNER_WATCHES:  # the kind was removed from the cluster
                    self.resource_versions.pop(kind, None)
                elif exc.status == 404 and kind in OPTIONAL_KINDS:  # not installed: looked for again later
                    self.stopping.wait(OWNER_KIND_RETRY_SECONDS)
                else:
                    logger.warning("watch %s failed (%s); retrying", kind, exc.status)
                    self.stopping.wait(1.0)
            except Exception:  # a dropped connection, a bad chunk: resume from the last resourceVersion
                logger.warning("watch %s interrupted; resuming", kind, exc_info=True)
                self.stopping.wait(1.0)

    def _relist_and_apply(self, kind: str) -> None:
        try:
            if kind in OWNER_WATCHES:
                self.relist_owners(kind)
                return
            if kind == EVENTS:
                self.resource_versions[kind] = self.relist_events()
                return
            self.resource_versions[kind] = self.relist(kind)
            if kind in ("Job", "Workload", *KAI_KINDS):
                self.apply_all_jobs()
            if kind in SERVING_KINDS:
                self._apply_all_deployments(timezone.now())
            if kind == "Workload":
                self._apply_all_manifests(timezone.now())
                self._apply_all_outside(timezone.now())
        except (ApiException, ClusterError, OSError):
            logger.warning("relist %s failed; retrying", kind, exc_info=True)
            self.stopping.wait(1.0)

    def _every(self, seconds: float, action: Callable[[], None], name: str) -> None:
        self._progressed(seconds)
        while not self.stopping.wait(seconds):
            self._progressed(seconds)
            close_old_connections()
            try:
                action()
            except Exception:
                logger.warning("%s failed; will try again", name, exc_info=True)

    def _thread(self, target: Callable[..., None], *args: Any, name: str) -> threading.Thread:
        def run() -> None:
            try:
                target(*args)
            finally:
                connection.close()  # each thread's own database connection

        return threading.Thread(target=run, name=name, daemon=True)

    def start(self) -> list[threading.Thread]:
        """Resync once (retrying until the cluster answers), then run the loops in daemon threads."""
        while not self.stopping.is_set():
            try:
                self.heartbeat()
                self.resync()
                break
            except (ApiException, ClusterError, OSError):
                logger.warning("initial sync failed; retrying", exc_info=True)
                self.stopping.wait(2.0)
        if self.heap is not None:
            self.heap.start()
        self.threads = [self._thread(self._watch_loop, kind, name=f"watch-{kind}") for kind in
                        [*WATCHED, *OWNER_WATCHES, EVENTS]]
        self.threads += [self._thread(self._apply_loop, name=f"apply-{n}") for n in range(self.appliers)]
        self.threads.append(self._thread(self._every, self.positions_seconds, self.refresh_positions, "positions",
                                         name="positions"))
        self.threads.append(self._thread(self._every, self.resync_seconds, self.resync, "resync", name="resync"))
        self.threads.append(self._thread(self._every, self.ledger_seconds, usage_services.usage_timelines_settle,
                                         "ledger", name="ledger"))
        self.threads.append(self._thread(self._every, OWNER_GRACE_SECONDS / 2, self._owners_overdue, "owners",
                                         name="owners"))
        self.threads.append(self._thread(self._every, settings.WATCHER_HEARTBEAT_SECONDS, self.heartbeat,
                                         "heartbeat", name="heartbeat"))
        if self.heap is not None:
            self.threads.append(self._thread(self._every, FREEZE_SECONDS, self.heap.settle, "heap", name="heap"))
        for thread in self.threads:
            thread.start()
        return self.threads

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every loop: open watch streams are cut by closing the client's connections."""
        self.stopping.set()
        self.work.close()
        self.custom.api_client.rest_client.pool_manager.clear()
        for thread in getattr(self, "threads", []):
            thread.join(timeout)
        self.owner_readers.shutdown(wait=False, cancel_futures=True)


# The portal's own workloads that run as an object other than a Job, followed through Kueue's Workload for it: a
# manifest's of another kind, or a training on a framework (a TrainJob, JobSet or RayJob).
RUNS_AS_OBJECT = Q(kind__in=MANIFEST_KIND_VALUES - {Kind.JOB.value}) | (
    Q(kind=Kind.TRAINING) & ~Q(framework=Framework.NONE))


def _portal_workload(kueue_workload: dict[str, Any]) -> bool:
    """Whether a Kueue Workload stands for one of the portal's Jobs (`wl-<id>`, docs/architecture.md)."""
    reference = owner_reference(kueue_workload) or {}
    name = str(reference.get("name", ""))
    return (reference.get("kind") == "Job" and str(reference.get("apiVersion", "")) == "batch/v1"
            and name.startswith(JOB_PREFIX) and parse_id(name[len(JOB_PREFIX):]) is not None)


def _cluster_event(obj: dict[str, Any]) -> ClusterEvent | None:
    """A core v1 Event about an object of a kind a workload has (EVENT_KINDS) in a namespace, as the workloads app
    takes it; None for any other. Counts and times as kubectl describe reads them: `count`/`lastTimestamp`, or the
    newer `series` and `eventTime`."""
    involved = obj.get("involvedObject") or {}
    metadata = obj.get("metadata") or {}
    kind, namespace = str(involved.get("kind") or ""), str(involved.get("namespace") or metadata.get("namespace") or "")
    if kind not in EVENT_KINDS or not namespace or not involved.get("name") or not metadata.get("uid"):
        return None
    series = obj.get("series") or {}
    try:
        last = parse_time(series.get("lastObservedTime") or obj.get("lastTimestamp") or obj.get("eventTime")
                          or metadata.get("creationTimestamp") or "")
        first = parse_time(obj.get("firstTimestamp") or obj.get("eventTime") or metadata.get("creationTimestamp")
                           or "")
    except (TypeError, ValueError):
        return None
    if last is None or first is None:
        last = first = last or first
    if last is None or first is None:
        return None
    count = series.get("count") or obj.get("count") or 1
    source = (obj.get("source") or {}).get("component") or obj.get("reportingComponent") or ""
    return ClusterEvent(
        uid=str(metadata["uid"]), namespace=namespace, object_kind=kind, object_name=str(involved["name"]),
        type=str(obj.get("type") or "Normal"), reason=str(obj.get("reason") or ""),
        message=str(obj.get("message") or obj.get("note") or ""), source=str(source),
        count=count if isinstance(count, int) and count > 0 else 1, first_seen=first, last_seen=last)


def _portal_manifest_id(kueue_workload: dict[str, Any]) -> int:
    """The portal workload a Kueue Workload stands for when it belongs to a manifest the portal submitted of a kind
    other than Job (its object is `wl-<id>` too); 0 for anything else."""
    reference = owner_reference(kueue_workload) or {}
    name, kind = str(reference.get("name", "")), str(reference.get("kind", ""))
    if kind == "Job" or (group_of(str(reference.get("apiVersion", ""))), kind) not in OWNER_KINDS:
        return 0
    if not name.startswith(JOB_PREFIX):
        return 0
    return parse_id(name[len(JOB_PREFIX):]) or 0


def _conditions_updated_at(status: dict[str, Any]) -> datetime | None:
    """The latest lastUpdateTime of an object's status conditions, or lastTransitionTime where a condition has no
    lastUpdateTime (a LeaderWorkerSet's); None without one."""
    times = [_parsed(condition.get("lastUpdateTime") or condition.get("lastTransitionTime"))
             for condition in status.get("conditions") or []]
    return max((at for at in times if at is not None), default=None)


def ready_groups(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of a LeaderWorkerSet's groups whose every pod is Ready (a group is its replica: ready when all its
    pods are, as the LWS controller counts readyReplicas)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        groups.setdefault((pod["metadata"].get("labels") or {}).get(LWS_GROUP_INDEX_LABEL, ""), []).append(pod)
    return [pod for members in groups.values() if all(map(_pod_ready, members)) for pod in members]


def _pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        item.get("type") == "Ready" and item.get("status") == "True" for item in conditions)


def ready_changed_at(pods: list[dict[str, Any]], *, rising: bool) -> datetime | None:
    """When a Deployment's ready count moved, on the cluster's clock, from its pods: a rise at the latest Ready=True
    transition of its ready pods; a fall at the latest Ready=False transition of its pods not ready, or deletion
    of its terminating ones (the ReplicaSet counts a terminating pod out at once): its deletionTimestamp less its
    deletionGracePeriodSeconds, since the API server dates a graceful deletion by when the grace period ends. None
    when the pods say nothing (those that went are gone)."""
    times = []
    for pod in pods:
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready: dict[str, Any] = next((item for item in conditions if item.get("type") == "Ready"), {})
        deleted = pod["metadata"].get("deletionTimestamp")
        if rising and ready.get("status") == "True" and not deleted:
            times.append(_parsed(ready.get("lastTransitionTime")))
        elif not rising and deleted:
            ends = _parsed(deleted)
            grace = pod["metadata"].get("deletionGracePeriodSeconds")
            times.append(ends - timedelta(seconds=grace) if ends is not None and isinstance(grace, int) else ends)
        elif not rising and ready.get("status") == "False":
            times.append(_parsed(ready.get("lastTransitionTime")))
    return max((at for at in times if at is not None), default=None)


def _parsed(value: Any) -> datetime | None:
    """A timestamp of the cluster's, or None when it is missing or malformed."""
    try:
        return parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _workload_id(job: dict[str, Any]) -> int:
    value = (job["metadata"].get("labels") or {}).get(WORKLOAD_ID_LABEL, "0") or "0"
    return parse_id(value) or 0


def _newer(obj: dict[str, Any], held: dict[str, Any] | None) -> bool:
    """Whether obj is at least as new as the copy we hold (resourceVersions compare as numbers where they are)."""
    if held is None:
        return True
    new, old = obj["metadata"].get("resourceVersion", ""), held["metadata"].get("resourceVersion", "")
    new_number, old_number = parse_int(new), parse_int(old)
    if new_number is not None and old_number is not None:
        return new_number >= old_number
    return True
