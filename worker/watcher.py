"""The watcher: the only reader of cluster state; mirrors Jobs, Kueue Workloads, queues and Nodes into the database.

One thread per watched kind keeps a watch open from the last resourceVersion it saw; a dropped watch resumes from
there, a 410 Gone relists that kind. A periodic full resync repairs anything a watch missed, and a positions loop
asks Kueue's visibility API for the order of every LocalQueue with pending portal workloads. Everything it writes
is idempotent (state, not deltas), so a restart or a replayed event converges to the same rows and events.

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
from collections.abc import Callable
from datetime import datetime
from typing import Any, cast

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from apps.cluster import services as mirror
from apps.core import kueue_names, metrics
from apps.core.http import parse_id, parse_int
from apps.core.kueue_names import JOB_UID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, WORKLOAD_ID_LABEL
from apps.workloads import services as workload_services
from apps.workloads.models import LIVE_STATUSES, QUEUED_STATUSES, Status, Workload
from apps.workloads.observation import Observation

from .gateway import KINDS, ClusterError, Gateway
from .status_map import observe, parse_time
from .tasks import forecasts_refresh_soon

logger = logging.getLogger(__name__)
OWNED = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
# Nodes are not the portal's: all of them, so each pool's are found by the pool's node labels.
WATCHED = {"Job": OWNED, "Workload": None, "ClusterQueue": OWNED, "LocalQueue": OWNED, "Cohort": OWNED, "Node": None}
MIRRORS: dict[str, Callable[..., None]] = {
    "ClusterQueue": mirror.cluster_queue_mirror, "LocalQueue": mirror.local_queue_mirror,
    "Cohort": mirror.cohort_mirror, "Node": mirror.node_mirror,
}


class WorkQueue:
    """Keys waiting to be applied, coalesced as in client-go's workqueue.

    A key added again before it is processed is processed once, with the latest state; a key is never processed by
    two threads at once, and one added while it is being processed comes back afterwards. Bursts of events for one
    Job (created, admitted, started, ready...) thus cost one database write when the appliers are behind.
    """

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.queue: deque[Any] = deque()
        self.dirty: set[Any] = set()
        self.processing: set[Any] = set()
        self.added_at: dict[Any, float] = {}  # when a waiting key first came in, for the lag metric
        self.closed = False

    def add(self, key: Any) -> None:
        with self.condition:
            if key in self.dirty:
                return
            self.dirty.add(key)
            self.added_at.setdefault(key, time.monotonic())
            if key not in self.processing:
                self.queue.append(key)
                self.condition.notify()

    def get(self, timeout: float) -> Any | None:
        with self.condition:
            if not self.queue and not self.closed:
                self.condition.wait(timeout)
            if self.closed or not self.queue:
                return None
            key = self.queue.popleft()
            self.dirty.discard(key)
            self.processing.add(key)
            return key

    def waited(self, key: Any) -> float:
        """Seconds since `key` came in (taken once it is processed: a key added meanwhile starts again)."""
        with self.condition:
            return time.monotonic() - self.added_at.pop(key, time.monotonic())

    def done(self, key: Any) -> None:
        with self.condition:
            self.processing.discard(key)
            if key in self.dirty:
                self.queue.append(key)
                self.condition.notify()

    def close(self) -> None:
        with self.condition:
            self.closed = True
            self.condition.notify_all()


class Watcher:
    def __init__(self, gw: Gateway, *, resync_seconds: float = 300.0, positions_seconds: float = 2.0,
                 watch_timeout_seconds: int = 60, appliers: int = 4) -> None:
        self.gw = gw
        self.custom = k8s.CustomObjectsApi(gw.api_client)
        self.core = k8s.CoreV1Api(gw.api_client)
        self.resync_seconds = resync_seconds
        self.positions_seconds = positions_seconds
        self.watch_timeout_seconds = watch_timeout_seconds
        self.stopping = threading.Event()
        self.lock = threading.RLock()
        self.jobs: dict[str, dict[str, Any]] = {}  # job uid -> Job
        self.workloads: dict[str, dict[str, Any]] = {}  # job uid -> Kueue Workload
        self.resource_versions: dict[str, str] = {}
        self.applied: dict[str, Observation] = {}  # job uid -> the last one written (most events change nothing)
        self.mirror_objects: dict[Any, tuple[str, dict[str, Any]]] = {}
        self.work = WorkQueue()
        self.appliers = appliers
        self.synced = threading.Event()

    # --- applying what we see ------------------------------------------------------------------------------------

    def apply_job_uid(self, job_uid: str) -> None:
        """Bring the portal row of one Job up to date with the Job and its Kueue Workload."""
        with self.lock:
            job, kueue_workload = self.jobs.get(job_uid), self.workloads.get(job_uid)
        if job is None:
            return
        workload_id = _workload_id(job)
        observation = observe(job, kueue_workload)
        if not workload_id or observation is None or self.applied.get(job_uid) == observation:
            return
        preemptor_id = None
        if observation.preemption and observation.preemption.preemptor_job_uid:
            preemptor_id = Workload.objects.filter(k8s_uid=observation.preemption.preemptor_job_uid).values_list(
                "pk", flat=True).first()
        moved = workload_services.workload_observe(workload_id=workload_id, observation=observation,
                                                   preemptor_id=preemptor_id)
        self.applied[job_uid] = observation
        if moved:  # a queue changed: the start forecasts are due again
            forecasts_refresh_soon()

    def handle(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        """Remember the object and queue its key; the appliers write the database."""
        metadata = obj.get("metadata") or {}
        if kind in MIRRORS:
            key = ("mirror", kind, metadata.get("namespace", ""), metadata["name"])
            with self.lock:
                self.mirror_objects[key] = (event_type, obj)
            self.work.add(key)
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
                    workload_id = _workload_id(obj)
                    if workload_id:
                        self.work.add(("deleted", workload_id, metadata.get("deletionTimestamp") or ""))
                return
            if not _newer(obj, cache.get(job_uid)):
                return  # a replayed or reordered event older than what we hold
            cache[job_uid] = obj
        self.work.add(("job", job_uid))

    def process(self, key: Any) -> None:
        """Apply one queued key: a Job's portal row, a deleted Job's, or one mirrored queue or cohort."""
        if key[0] == "job":
            self.apply_job_uid(key[1])
            return
        if key[0] == "deleted":
            workload_services.workloads_gone(workload_ids=[key[1]], at=timezone.now(), cluster_at=parse_time(key[2]))
            return
        _, kind, namespace, name = key
        with self.lock:
            event_type, obj = self.mirror_objects.pop(key, (None, None))
        if obj is None:
            return
        if event_type == "DELETED":
            mirror.mirror_forget(kind=kind, name=name, namespace=namespace)
        else:
            MIRRORS[kind](obj=obj, at=timezone.now())

    def _apply_loop(self) -> None:
        while not self.stopping.is_set():
            key = self.work.get(timeout=0.5)
            if key is None:
                continue
            close_old_connections()
            try:
                self.process(key)
                metrics.WATCHER_LAG.observe(self.work.waited(key))
            except Exception:
                logger.warning("applying %s failed; will retry", key, exc_info=True)
                self.stopping.wait(0.5)
                self.work.add(key)
            finally:
                self.work.done(key)

    def relist(self, kind: str) -> str:
        """List one kind afresh, apply every object, forget what is gone; returns the list's resourceVersion."""
        lister, args = self._lister(kind)
        if kind == "Node":  # core v1: the raw JSON, as the custom objects come
            response = json.loads(lister(*args, _preload_content=False).data)
        else:
            # The generated client declares `object`; a custom-object list is a decoded JSON mapping.
            response = cast(dict[str, Any], lister(*args, label_selector=WATCHED[kind] or None))
        items = response.get("items", [])
        now = timezone.now()
        if kind == "Job":
            with self.lock:
                self.jobs = {item["metadata"]["uid"]: item for item in items}
        elif kind == "Workload":
            with self.lock:
                self.workloads = {
                    (item["metadata"].get("labels") or {})[JOB_UID_LABEL]: item for item in items
                    if (item["metadata"].get("labels") or {}).get(JOB_UID_LABEL)
                }
        else:
            for item in items:
                MIRRORS[kind](obj=item, at=now)
            mirror.mirror_keep_only(kind=kind, keys={(item["metadata"].get("namespace", ""), item["metadata"]["name"])
                                                     for item in items})
        return response["metadata"]["resourceVersion"]

    def resync(self) -> None:
        """Full relist of every kind, then every portal row of a known Job is re-applied."""
        listed_at = timezone.now()
        self.applied.clear()  # a resync re-applies everything (idempotently) to repair what a watch missed
        for kind in WATCHED:
            self.resource_versions[kind] = self.relist(kind)
        with self.lock:
            job_uids = list(self.jobs)
        for job_uid in job_uids:
            self.apply_job_uid(job_uid)
        self._jobs_gone(listed_at)
        metrics.WATCHER_RESYNCS.inc()
        self.synced.set()

    def heartbeat(self) -> None:
        """One cheap list (a LocalQueue, a verb the watcher holds anyway) recorded for /readyz and the metrics."""
        try:
            self.gw.raw_get(f"/apis/{KINDS['LocalQueue'].group}/{KINDS['LocalQueue'].version}/localqueues",
                            query=[("labelSelector", OWNED), ("limit", 1)])
        except ClusterError as error:
            logger.warning("heartbeat: %s", error.describe())
            mirror.watcher_heartbeat(at=timezone.now(), error=error.describe())
            return
        mirror.watcher_heartbeat(at=timezone.now())

    def _jobs_gone(self, listed_at: datetime) -> None:
        """Live rows whose Job no longer exists in the cluster (deleted by someone else)."""
        with self.lock:
            present = set(self.jobs)
        missing = Workload.objects.exclude(k8s_uid="").exclude(k8s_uid__in=present).filter(
            status__in=LIVE_STATUSES - {Status.SUBMITTING},
            submitted_at__lt=listed_at,  # submitted after the list was taken: its Job may simply not be listed
        ).values_list("pk", flat=True)
        workload_services.workloads_gone(workload_ids=list(missing), at=timezone.now())

    # --- queue positions -----------------------------------------------------------------------------------------

    def refresh_positions(self) -> None:
        queued = list(Workload.objects.filter(status__in=QUEUED_STATUSES).exclude(kueue_name="").values_list(
            "pk", "kueue_name", "project__namespace", "preemptible", "node_pool__slug"))
        queues = {(namespace, kueue_names.local_queue(pool, guaranteed=not preemptible))
                  for _, _, namespace, preemptible, pool in queued}
        by_name = {(namespace, name): pk for pk, name, namespace, _, _ in queued}
        positions: dict[int, tuple[int, int]] = {}
        for namespace, queue in sorted(queues):
            summary = self.gw.raw_get(
                f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/{queue}/pendingworkloads",
                query=[("limit", 1000)])
            for item in (summary or {}).get("items", []):
                workload_id = by_name.get((namespace, item["metadata"]["name"]))
                if workload_id is not None:
                    positions[workload_id] = (item["positionInLocalQueue"], item["positionInClusterQueue"])
        workload_services.workload_positions_set(positions=positions, queued_ids=[pk for pk, *_ in queued],
                                                 at=timezone.now())

    # --- the loops -----------------------------------------------------------------------------------------------

    def _lister(self, kind: str) -> tuple[Callable[..., Any], tuple[str, ...]]:
        """The list call of a kind and its arguments (a watch is the same call): Nodes are core v1, the rest the
        portal's batch and Kueue kinds, read as custom objects."""
        if kind == "Node":
            return self.core.list_node, ()
        kind_info = KINDS[kind]
        return self.custom.list_cluster_custom_object, (kind_info.group, kind_info.version, kind_info.plural)

    def _watch_loop(self, kind: str) -> None:
        lister, args = self._lister(kind)
        while not self.stopping.is_set():
            close_old_connections()
            try:
                stream = k8s_watch.Watch()
                for event in stream.stream(
                        lister, *args, label_selector=WATCHED[kind] or None,
                        resource_version=self.resource_versions.get(kind), allow_watch_bookmarks=True,
                        timeout_seconds=self.watch_timeout_seconds):
                    if self.stopping.is_set():
                        stream.stop()
                        break
                    event_type, obj = event["type"], event["raw_object"]  # JSON, whatever the client's model
                    if event_type == "ERROR":
                        raise ApiException(status=obj.get("code", 500), reason=obj.get("reason", ""))
                    if event_type != "BOOKMARK":
                        self.handle(kind, event_type, obj)
                    # Only once handled: if handling fails, the watch resumes before this event and gets it again.
                    self.resource_versions[kind] = obj["metadata"].get("resourceVersion") or \
                        self.resource_versions.get(kind, "")
            except ApiException as exc:
                if exc.status == 410:
                    logger.info("watch %s: resourceVersion too old, relisting", kind)
                    self._relist_and_apply(kind)
                else:
                    logger.warning("watch %s failed (%s); retrying", kind, exc.status)
                    self.stopping.wait(1.0)
            except Exception:  # a dropped connection, a bad chunk: resume from the last resourceVersion
                logger.warning("watch %s interrupted; resuming", kind, exc_info=True)
                self.stopping.wait(1.0)

    def _relist_and_apply(self, kind: str) -> None:
        try:
            self.resource_versions[kind] = self.relist(kind)
            if kind in ("Job", "Workload"):
                with self.lock:
                    job_uids = list(self.jobs)
                for job_uid in job_uids:
                    self.apply_job_uid(job_uid)
        except (ApiException, ClusterError, OSError):
            logger.warning("relist %s failed; retrying", kind, exc_info=True)
            self.stopping.wait(1.0)

    def _every(self, seconds: float, action: Callable[[], None], name: str) -> None:
        while not self.stopping.wait(seconds):
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
        self.threads = [self._thread(self._watch_loop, kind, name=f"watch-{kind}") for kind in WATCHED]
        self.threads += [self._thread(self._apply_loop, name=f"apply-{n}") for n in range(self.appliers)]
        self.threads.append(self._thread(self._every, self.positions_seconds, self.refresh_positions, "positions",
                                         name="positions"))
        self.threads.append(self._thread(self._every, self.resync_seconds, self.resync, "resync", name="resync"))
        self.threads.append(self._thread(self._every, settings.WATCHER_HEARTBEAT_SECONDS, self.heartbeat,
                                         "heartbeat", name="heartbeat"))
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
