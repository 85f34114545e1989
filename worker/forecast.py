"""When will it start: a start-time forecast for every waiting workload, computed in the worker.

The forecast replays Kueue's admission decisions forward in time with kubesim's scheduling core
(`kubesim.kueue.scheduler`, a pure library: no HTTP, no store, no controllers), on a snapshot of what the portal
knows: the organisation's quota tree as Kueue objects (the same `desired_objects` the reconcile applies), the
admitted workloads with their expected ends and the waiting ones in queue order. So the replay decides as Kueue
does: priorities, FIFO, borrowing, fair sharing, preemption and reclaim.

Expected ends (`expected_runtime`): the max runtime when one is set (Kueue stops the Job then); otherwise the runs
of similar work (same project, kind and image family) of the last 30 days, whose 10th, 50th and 90th percentiles
give an optimistic, a likely and a pessimistic end; work already running is measured against the similar runs that
lasted longer than it has run so far. The replay runs every workload for its likely time and gives each waiting
workload its likely start; its earliest and latest start follow the chain of ends that made room for it in that
replay (`_spread`): as early as the first of those ends can come, as late as the last (one replay, not three: the
other two cost twice as much again and gave no better ranges). The replay cannot see work not yet submitted, which
overtakes the waiting (a higher priority, a smaller fair share) or delays it; so the ranges shown are widened by
the record of earlier first estimates of the same kind of work against when that work then started
(`widenings_by_kind`, calibrated as split conformal prediction does; the record keeps the replay's own ranges, so
it does not feed on itself).

Work with neither a max runtime nor history never ends in the replay, so whatever waits on it gets "cannot
estimate" with that reason; so do work that can never fit, work in a stopped queue or with no queue, and starts
beyond the 7-day horizon.

`replay` is pure (plain records in, estimates out): the benchmark (bench/forecast_accuracy.py) drives it from
kubesim's objects, `forecasts_refresh` from the database.
"""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from django.utils import timezone

from apps.cluster.models import ClusterQueueState, LocalQueueState
from apps.core import kueue_conditions
from apps.workloads import selectors as workload_selectors
from apps.workloads import services as workload_services
from apps.workloads.history import Runtime, expected_runtime, quantile, runtime_samples, similar_work
from apps.workloads.models import ForecastBasis, ForecastReason, Status, Workload
from kubesim.kueue import constants as kueue
from kubesim.kueue.scheduler import Snapshot, forecast
from kubesim.kueue.scheduler.model import ParseCache
from kubesim.kueue.scheduler.quota import potential_available

from .kueue_sync import desired_from_database

HORIZON = timedelta(days=7)
RESOLUTION = timedelta(seconds=60)
RELATIVE_RESOLUTION = 0.1  # ends further out are grouped over a tenth of their distance from now (see `forecast`)
PREEMPT_LATER = False
WIDEN_QUANTILE = 0.9  # a range is widened until this share of recorded waits ended inside each of its edges
WIDEN_MIN_RECORD = 20  # fewer recorded waits than this say too little to widen by

# Held quota: admitted or running. Waiting: not in Kueue yet, queued, or preempted (back in the queue once its pods
# stop). A stopping workload is about to give its quota back, so it is in neither.
HOLDING = (Status.ADMITTED, Status.RUNNING)
WAITING = (Status.SUBMITTING, Status.QUEUED, Status.REQUEUED, Status.PREEMPTED)


@dataclass(frozen=True)
class Job:
    """One workload as the replay sees it: its LocalQueue, priority, size and expected runtime; for work holding
    quota also its ClusterQueue, flavor and when it was admitted."""

    id: int
    namespace: str
    queue: str
    priority: int
    created: datetime
    resource: str
    units_per_pod: int
    pods: int
    runtime: Runtime | None
    cluster_queue: str = ""
    flavor: str = ""
    reserved_at: datetime | None = None

    @cached_property
    def key(self) -> str:
        return f"{self.namespace}/{_name(self.id)}"


@dataclass(frozen=True)
class Estimate:
    """A forecast: earliest, likely and latest start, or no times and the reason (a ForecastReason) with a message."""

    earliest: datetime | None
    likely: datetime | None
    latest: datetime | None
    basis: str
    reason: str = ""
    message: str = ""


def _name(workload_id: int) -> str:
    return f"forecast-{workload_id}"


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _workload_object(job: Job) -> dict[str, Any]:
    """A Kueue Workload with what the scheduler reads: queue, priority, pods and their requests, and the admission of
    work holding quota. The uid orders equal creation times by id, as the portal numbered them."""
    obj: dict[str, Any] = {
        "metadata": {"name": _name(job.id), "namespace": job.namespace, "uid": f"{job.id:012d}",
                     "resourceVersion": "1", "creationTimestamp": _iso(job.created)},
        "spec": {"queueName": job.queue, "priority": job.priority, "podSets": [{
            "name": "main", "count": job.pods,
            "template": {"spec": {"containers": [{"name": "main", "resources": {
                "requests": {job.resource: str(job.units_per_pod)}}}]}},
        }]},
    }
    if job.reserved_at is not None:
        obj["status"] = {
            "conditions": [{"type": kueue.QUOTA_RESERVED, "status": "True", "reason": kueue.QUOTA_RESERVED,
                            "lastTransitionTime": _iso(job.reserved_at)}],
            "admission": {"clusterQueue": job.cluster_queue, "podSetAssignments": [{
                "name": "main", "count": job.pods, "flavors": {job.resource: job.flavor},
                "resourceUsage": {job.resource: str(job.units_per_pod * job.pods)}}]},
        }
    return obj


def _held(objects: list[dict[str, Any]], stopped: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """The objects with the queues an admin stopped (kind, name or namespace/name) on Hold, as Kueue sees them."""
    result = []
    for obj in objects:
        md = obj.get("metadata") or {}
        name = md.get("name", "") if obj["kind"] == "ClusterQueue" else f"{md.get('namespace', '')}/{md.get('name')}"
        if (obj["kind"], name) in stopped:
            obj = {**obj, "spec": {**obj.get("spec", {}), "stopPolicy": "Hold"}}
        result.append(obj)
    return result


def replay(*, objects: list[dict[str, Any]], holding: list[Job], waiting: list[Job], now: datetime,
           stopped: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
           horizon: timedelta = HORIZON, resolution: timedelta = RESOLUTION,
           relative_resolution: float = RELATIVE_RESOLUTION,
           preempt_later: bool = PREEMPT_LATER) -> dict[int, Estimate]:
    """The forecast of every waiting job, by id, from the organisation's Kueue objects (Cohorts, ClusterQueues,
    LocalQueues, ResourceFlavors; anything else is ignored) and the jobs holding quota at `now`."""
    objects = _held(objects, set(stopped))
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for obj in objects:
        by_kind[obj["kind"]].append(obj)
    jobs = {job.key: job for job in (*holding, *waiting)}
    workload_objects = [_workload_object(job) for job in jobs.values()]
    cache = ParseCache()

    def snapshot() -> Snapshot:
        return Snapshot.from_objects(resource_flavors=by_kind["ResourceFlavor"], cohorts=by_kind["Cohort"],
                                     cluster_queues=by_kind["ClusterQueue"], local_queues=by_kind["LocalQueue"],
                                     workloads=workload_objects, now=now, parse_cache=cache)

    def likely_runtime(wl: Any) -> float | None:
        runtime = jobs[wl.key].runtime
        return None if runtime is None else runtime.likely

    causes: dict[str, list[str]] = {}
    with _collector_paused():
        likely_starts = forecast(snapshot(), likely_runtime, now, horizon=horizon, resolution=resolution,
                                 relative_resolution=relative_resolution, preempt_later=preempt_later, causes=causes)
    earliest_starts, latest_starts = _spread(jobs, likely_starts, causes, now)
    base = snapshot()
    orphans = {wl.key: reason for wl, reason, _ in base.orphans}
    estimates: dict[int, Estimate] = {}
    holding_bases: dict[str, set[str]] = defaultdict(set)
    for other in holding:
        if other.runtime is not None:
            holding_bases[other.resource].add(other.runtime.basis)
    for job in waiting:
        likely = likely_starts.get(job.key)
        if likely is None:
            estimates[job.id] = _cannot(job, base, orphans.get(job.key), jobs, likely_starts, horizon)
            continue
        basis = (ForecastBasis.STARTS_NOW if likely <= now
                 else _basis(jobs, causes.get(job.key, []), holding_bases, job))
        estimates[job.id] = Estimate(earliest=earliest_starts[job.key], likely=likely,
                                     latest=latest_starts[job.key], basis=basis)
    return estimates


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off for the replay: it allocates many short-lived records, freed as they go, and
    the collector's passes over them found nothing but took a tenth of the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _spread(jobs: dict[str, Job], likely: dict[str, datetime], causes: dict[str, list[str]],
            now: datetime) -> tuple[dict[str, datetime], dict[str, datetime]]:
    """The earliest and latest start of every workload the likely replay started, along the chain of ends that
    made room for it: a start after now is as early as the first of those ends can come (their own earliest start
    plus their optimistic runtime) and as late as the last of them (latest start plus pessimistic runtime)."""
    low_end: dict[str, datetime] = {}
    high_end: dict[str, datetime] = {}
    for job in jobs.values():
        if job.reserved_at is not None and job.runtime is not None:
            low_end[job.key] = max(now, job.reserved_at + timedelta(seconds=job.runtime.low))
            high_end[job.key] = max(now, job.reserved_at + timedelta(seconds=job.runtime.high))
    earliest: dict[str, datetime] = {}
    latest: dict[str, datetime] = {}
    for key in sorted(likely, key=likely.__getitem__):
        start = likely[key]
        made_room = [c for c in causes.get(key, ()) if c in low_end]
        low = min((low_end[c] for c in made_room), default=start)
        high = max((high_end[c] for c in made_room), default=start)
        earliest[key], latest[key] = min(low, start), max(high, start)
        runtime = jobs[key].runtime
        if runtime is not None:
            low_end[key] = earliest[key] + timedelta(seconds=runtime.low)
            high_end[key] = latest[key] + timedelta(seconds=runtime.high)
    return earliest, latest


def _basis(jobs: dict[str, Job], made_room: list[str], holding_bases: dict[str, set[str]], job: Job) -> str:
    """Where the ends a workload waits for come from: the runtimes of the work whose ends made room for it in the
    replay, else (no such end: it never happens after now with preemption off, but is not assumed) of all the work
    holding its pool at now."""
    bases = {jobs[key].runtime.basis for key in made_room if jobs[key].runtime is not None}  # type: ignore[union-attr]
    bases = bases or holding_bases.get(job.resource, set())
    if bases == {ForecastBasis.MAX_RUNTIME}:
        return ForecastBasis.MAX_RUNTIME
    if bases == {ForecastBasis.HISTORY}:
        return ForecastBasis.HISTORY
    return ForecastBasis.MIXED


def _cannot(job: Job, snapshot: Snapshot, orphaned: str | None, jobs: dict[str, Job],
            likely_starts: dict[str, datetime], horizon: timedelta) -> Estimate:
    """Why the likely replay never started it, most fundamental first."""
    def no(reason: str, message: str) -> Estimate:
        return Estimate(None, None, None, ForecastBasis.NONE, reason, message)

    if orphaned == kueue.REASON_SUSPENDED:
        return no(ForecastReason.QUEUE_STOPPED, f"its queue {job.queue} is stopped")
    if orphaned is not None:
        return no(ForecastReason.NO_QUEUE, f"there is no queue {job.queue} for it (no quota on this pool)")
    cq = snapshot.cluster_queues.get(snapshot.cluster_queue_for(snapshot.workloads[job.key]))
    if cq is not None and not cq.active:
        return no(ForecastReason.QUEUE_STOPPED, f"its cluster queue {cq.name} is stopped")
    asked = job.units_per_pod * job.pods
    if cq is not None:
        group = cq.rg_for(job.resource)
        flavors = group.flavors if group is not None else ()
        most = max((potential_available(cq, (flavor, job.resource)) for flavor in flavors), default=0)
        if asked > most:
            return no(ForecastReason.NEVER_FITS, f"it asks for {asked} GPU units; its queue can never get more than "
                                                 f"{most}, whatever else finishes")
    unknown = [other for other in jobs.values()
               if other.runtime is None and other.resource == job.resource and other.key != job.key
               and (other.reserved_at is not None or other.key in likely_starts)]
    if unknown:
        count = len(unknown)
        return no(ForecastReason.NO_RUNTIME,
                  f"{count} workload{'s' if count != 1 else ''} it waits for {'have' if count != 1 else 'has'} no "
                  f"max runtime and no history of similar runs")
    return no(ForecastReason.BEYOND_HORIZON, f"not within the next {horizon.days} days")


# --- from the database -------------------------------------------------------------------------------------------


def _reserved_at(workload: Workload, now: datetime) -> datetime:
    """When its current stretch of quota began: Kueue's QuotaReserved transition as mirrored, else its admission."""
    for condition in workload.kueue_conditions or []:
        if (condition.get("type") == kueue_conditions.QUOTA_RESERVED
                and condition.get("status") == kueue_conditions.TRUE):
            at = condition.get("lastTransitionTime")
            if at:
                return datetime.fromisoformat(at.replace("Z", "+00:00"))
    return workload.admitted_at or now


def _job(workload: Workload, *, samples: dict[Any, list[float]], now: datetime, holding: bool) -> Job:
    reserved_at = _reserved_at(workload, now) if holding else None
    elapsed = max(0.0, (now - reserved_at).total_seconds()) if reserved_at else 0.0
    return Job(
        id=workload.pk, namespace=workload.project.namespace, queue=workload.queue_name,
        priority=workload.priority_value, created=workload.submitted_at or workload.created_at,
        resource=workload.node_pool.gpu_resource, units_per_pod=workload.gang_shape[0], pods=workload.gang_shape[1],
        runtime=expected_runtime(max_runtime=workload.max_runtime_seconds, samples=samples.get(similar_work(workload),
                                 ()), elapsed=elapsed),
        cluster_queue=workload.cluster_queue_name if holding else "", flavor=workload.node_pool.slug,
        reserved_at=reserved_at,
    )


def forecasts_compute(*, now: datetime | None = None, preemptible: dict[int, bool] | None = None,
                      ) -> dict[int, Estimate]:
    """The forecast of every waiting workload from the database (organisation, mirror, workloads, history): a fixed
    number of queries. `now` is the cluster's clock, which the mirrored admission times are on. `preemptible`, when
    given, is filled with whether each waiting workload is (the kind its range is calibrated by)."""
    now = now or timezone.now()
    rows = list(Workload.objects.filter(status__in=(*HOLDING, *WAITING)).select_related(
        "project", "node_pool", "priority_class").order_by("id"))
    if preemptible is not None:
        preemptible.update((w.pk, w.preemptible) for w in rows if w.status in WAITING)
    # The replay is Kueue's admission; KAI Scheduler's pools (fair shares, reclaim) it does not model: their waiting
    # work says so instead of an estimate (README, Kueue and KAI in one cluster).
    on_kai = {w.pk: Estimate(None, None, None, ForecastBasis.NONE, ForecastReason.KAI_POOL,
                             f"KAI Scheduler schedules {w.node_pool.name}; the forecast models Kueue's pools only")
              for w in rows if w.node_pool.kai and w.status in WAITING}
    rows = [w for w in rows if not w.node_pool.kai]
    samples = runtime_samples(now=now)
    holding = [_job(w, samples=samples, now=now, holding=True) for w in rows if w.status in HOLDING]
    waiting = [_job(w, samples=samples, now=now, holding=False) for w in rows if w.status in WAITING]
    if not waiting:
        return on_kai
    stopped = {("ClusterQueue", name) for name in ClusterQueueState.objects.filter(
        active=False, active_reason__in=kueue_conditions.STOPPED_REASONS).values_list("name", flat=True)}
    stopped |= {("LocalQueue", f"{namespace}/{name}") for namespace, name in LocalQueueState.objects.filter(
        active=False, active_reason__in=kueue_conditions.STOPPED_REASONS).values_list("namespace", "name")}
    return {**replay(objects=desired_from_database(), holding=holding, waiting=waiting, now=now, stopped=stopped),
            **on_kai}


@dataclass(frozen=True)
class Widening:
    """How far the replay's ranges are stretched, as factors on the wait from the estimate: `earlier` (at most 1)
    on the earliest start, `later` (at least 1) on the latest."""

    earlier: float = 1.0
    later: float = 1.0


def widening_from(record: Iterable[tuple[datetime, datetime, datetime, datetime | None]], *,
                  now: datetime) -> Widening | None:
    """The widening that would have put WIDEN_QUANTILE of recorded waits inside each edge of their range (the
    empirical quantile of the misses, as split conformal prediction calibrates; the replay is blind to work not yet
    submitted, which overtakes or delays the waiting). `record`: (estimated at, earliest, latest, started or None
    while still waiting at `now`). A wait still going counts where its outcome is known already: past its latest it
    is a miss by at least the wait so far, past its earliest it was not early (leaving them out would keep only the
    waits short enough to have ended). None when fewer than WIDEN_MIN_RECORD say."""
    later: list[float] = []
    earlier: list[float] = []
    for at, earliest, latest, started in record:
        waited = ((started or now) - at).total_seconds()
        if latest > at and (started is not None or now > latest):
            later.append(waited / (latest - at).total_seconds())
        if earliest > at and (started is not None or now > earliest):
            earlier.append(waited / (earliest - at).total_seconds())
    if len(later) < WIDEN_MIN_RECORD:
        return None
    return Widening(
        earlier=min(1.0, quantile(sorted(earlier), 1 - WIDEN_QUANTILE)) if len(earlier) >= WIDEN_MIN_RECORD else 1.0,
        later=max(1.0, quantile(sorted(later), WIDEN_QUANTILE)))


def widened(estimate: Estimate, widening: Widening, now: datetime) -> Estimate:
    """The estimate with its range stretched from `now`; its likely start and anything starting now stay."""
    if estimate.likely is None or estimate.earliest is None or estimate.latest is None or estimate.likely <= now:
        return estimate
    earliest = now + max(timedelta(0), estimate.earliest - now) * widening.earlier
    latest = now + max(timedelta(0), estimate.latest - now) * widening.later
    return replace(estimate, earliest=min(earliest, estimate.likely), latest=max(latest, estimate.likely))


def widenings_by_kind(record: Iterable[tuple[datetime, datetime, datetime, datetime | None, bool]], *,
                      now: datetime) -> dict[bool, Widening]:
    """The widening of each kind of work (preemptible or not, the key) from its own recorded waits: the two wait
    for different things (lent capacity that arrivals reclaim, or the project's deserved quota) and miss their
    ranges differently. A kind whose record says too little gets the widening of the whole record, or none."""
    rows = list(record)
    whole = widening_from((row[:4] for row in rows), now=now) or Widening()
    return {kind: widening_from((row[:4] for row in rows if row[4] == kind), now=now) or whole
            for kind in (False, True)}


def forecasts_refresh(*, now: datetime | None = None) -> int:
    """Compute and store every waiting workload's forecast, its range widened by the record of earlier estimates
    of its kind against their starts; the rows of work no longer waiting go. Returns how many were stored."""
    now = now or timezone.now()
    preemptible: dict[int, bool] = {}
    estimates = forecasts_compute(now=now, preemptible=preemptible)
    widenings = widenings_by_kind(workload_selectors.forecast_record(now=now), now=now)
    shown = {workload_id: widened(e, widenings[preemptible[workload_id]], now) for workload_id, e in estimates.items()}
    workload_services.workload_forecasts_store(computed_at=now, forecasts={
        workload_id: {"earliest": e.earliest, "likely": e.likely, "latest": e.latest, "basis": e.basis,
                      "reason": e.reason, "message": e.message}
        for workload_id, e in shown.items()}, replayed={
        workload_id: (e.earliest, e.likely, e.latest) for workload_id, e in estimates.items()
        if e.earliest is not None and e.likely is not None and e.latest is not None})
    return len(estimates)
