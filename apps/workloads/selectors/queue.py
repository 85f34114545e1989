"""Live queue state: positions, explanations, the project queue, the detail page's history and live markers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import (
    BigIntegerField,
    CharField,
    Count,
    F,
    Func,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, Length, StrIndex
from django.utils import timezone

from apps.accounts import access
from apps.cluster.models import ClusterQueueState, CohortState, LocalQueueState
from apps.core.actors import Actor
from apps.core.prepared import PreparedQuery
from apps.org.models import NodePool, Project, Quota
from apps.workloads.explain import Peer, PreemptionNote, explain_workloads
from apps.workloads.history import conditions_scoped, preemptions, preemptor_job_uids
from apps.workloads.logs import log_tails
from apps.workloads.models import (
    HOLDING_STATUSES,
    LIVE_STATUSES,
    QUEUED_STATUSES,
    WAITING_STATUSES,
    Status,
    Workload,
    WorkloadClusterEvent,
    WorkloadEvent,
    WorkloadLogTail,
)

from .lookups import workloads_for
from .tallies import tallies_by_pool, workload_tallies


def queue_position_label(workload: Workload) -> str:
    """Its place in its LocalQueue as people count it, "#1 in <queue>" for the next in line (pages, CLI tables and
    e-mails alike; Kueue and the API count from 0); empty unless it waits with a position from Kueue."""
    if workload.status not in QUEUED_STATUSES or workload.queue_position_local is None:
        return ""
    return f"#{workload.queue_position_local + 1} in {workload.queue_name}"


def kai_queue_waiting(**where: Any) -> dict[tuple[int, int, bool], int]:
    """The portal's waiting work on KAI pools (queued, requeued or preempted), counted per mirrored KAI queue row:
    (project id, pool id, guaranteed: its non-preemptible row) -> workloads. KAI's Queue status has resource totals
    only, no workload counts, so these are the rows' pending as Kueue's ClusterQueues report theirs. `where` narrows
    the workloads (`project__department_id__in=...`). One query."""
    counted = Workload.objects.filter(node_pool__scheduler=NodePool.Scheduler.KAI, status__in=WAITING_STATUSES,
                                      **where).values_list("project_id", "node_pool_id", "preemptible").annotate(
        n=Count("pk")).order_by()
    return {(project_id, pool_id, not preemptible): n for project_id, pool_id, preemptible, n in counted}


def annotate_live(workloads: list[Workload], *, viewer: Actor | None = None, now: Any = None) -> list[Workload]:
    """Attach `explanation` (why it waits, worded for `viewer`: other projects are named only when the viewer may see
    them), `position_label` and `runtime` to rows already joined with project and node_pool: a fixed number of
    queries for any number of rows (three for `explain_workloads` when anything waits, one or two more when a row
    was preempted or preempts others, one for the runtimes when anything holds quota), none otherwise."""
    now = now or timezone.now()
    explanations = explain_workloads(workloads, viewer=viewer)
    # A live holder's runtime is measured on the portal's clock, from the event of its current stretch (the cluster's
    # clock may differ: kubesim's manual clock does); a finished one's on the cluster's, from start to finish.
    holding = [w.pk for w in workloads if w.status in HOLDING_STATUSES]
    since = dict(WorkloadEvent.objects.filter(workload_id__in=holding, to_status__in=HOLDING_STATUSES).values(
        "workload_id").annotate(at=Max("at")).order_by().values_list("workload_id", "at")) if holding else {}
    for workload in workloads:
        workload.explanation = explanations.get(workload.pk)
        workload.position_label = queue_position_label(workload)
        if workload.pk in since:
            workload.runtime = now - since[workload.pk]
        else:
            start = workload.started_at or workload.admitted_at
            workload.runtime = ((workload.finished_at or now) - start) if start else None
    return workloads


PENDING_STATUSES = frozenset({Status.SUBMITTING, *QUEUED_STATUSES, Status.PREEMPTED})


@dataclass
class PoolQuotaFigures:
    """One project's quota on one pool as Kueue reports it, in GPU units."""

    pool: NodePool
    deserved: int
    limit: int | None
    used: Any = 0
    used_guaranteed: Any = 0
    used_elastic: Any = 0
    pending_units: Decimal = Decimal(0)  # a share of a card on a KAI pool counts as that share
    weighted_share: int | None = None
    observed: bool = False  # whether the watcher has mirrored the project's queues yet

    @property
    def borrowed(self) -> Any:
        """Units in use beyond the deserved quota (idle capacity of others, preemptible)."""
        return max(0, self.used - self.deserved)

    @property
    def free_deserved(self) -> Any:
        return max(0, self.deserved - self.used)


@dataclass
class ProjectQueue:
    project: Project
    pending: list[Workload]  # the first PROJECT_QUEUE_ROWS in queue order
    holding: list[Workload]
    pools: list[PoolQuotaFigures]
    pending_total: int = 0

    @property
    def live(self) -> bool:
        return bool(self.pending or self.holding)

    @property
    def pending_hidden(self) -> int:
        return self.pending_total - len(self.pending)


# The project queue page shows this many waiting workloads (in queue order) with their explanations; the rest are
# counted, their demand summed, and found on the workload list (a long queue rendered whole was 378 kB a poll).
PROJECT_QUEUE_ROWS = 100


# Queue order: by pool and LocalQueue (`queue_name`: elastic before guaranteed, as their names sort), Kueue's position
# first (those without one after), then by age.
QUEUE_ORDER = ("node_pool__slug", "-preemptible", F("queue_position_cluster").asc(nulls_last=True), "created_at",
               "pk")


def project_queue(*, project: Project, viewer: Actor | None = None) -> ProjectQueue:
    """The project's live work in queue order and its quota per pool: a fixed number of queries.

    The caller has checked the viewer may see the project (the access module lets project members see all its
    workloads) and passes it with its department joined (every row is given that instance); the page decides which
    details of other people's work it shows, and the explanations name other projects only as far as the viewer may
    see them.
    """
    live = Workload.objects.filter(project=project).select_related(
        "node_pool", "owner", "priority_class", "forecast")
    # The head of the queue and the holders are read; the rest of a long queue is only counted and summed.
    pending = list(live.filter(status__in=PENDING_STATUSES).order_by(*QUEUE_ORDER)[:PROJECT_QUEUE_ROWS])
    holding = list(live.filter(status__in=LIVE_STATUSES - PENDING_STATUSES).order_by(
        "node_pool__slug", Coalesce("admitted_at", "created_at"), "pk"))
    for workload in (*pending, *holding):
        # Every row's project is this one: one instance given to each rather than a project and a department joined
        # to each row and built for it (which cost more than reading the rows: 28 ms against 18 for the 100 rows).
        workload.project = project
    annotate_live([*pending, *holding], viewer=viewer)
    # How many wait and their demand, from the kept tallies rather than from every waiting row.
    tallies = workload_tallies(statuses=PENDING_STATUSES, project=project)
    figures: dict[int, PoolQuotaFigures] = {}
    for quota in Quota.objects.filter(project=project).select_related("node_pool").order_by("node_pool__name"):
        figures[quota.node_pool_id] = PoolQuotaFigures(pool=quota.node_pool, deserved=quota.deserved,
                                                       limit=quota.limit)
    for state in ClusterQueueState.objects.filter(project=project, node_pool_id__in=list(figures)):
        assert state.node_pool_id is not None  # filtered by node_pool_id__in
        entry = figures[state.node_pool_id]
        entry.used += state.used
        entry.observed = True
        if state.guaranteed:
            entry.used_guaranteed += state.used
        else:
            entry.used_elastic += state.used
    for cohort in CohortState.objects.filter(project=project, node_pool_id__in=list(figures)):
        assert cohort.node_pool_id is not None  # filtered by node_pool_id__in
        figures[cohort.node_pool_id].weighted_share = cohort.weighted_share
    pending_total = sum(tally.workloads for tally in tallies.values())
    for (_, pool_id), tally in tallies_by_pool(tallies, statuses=WAITING_STATUSES).items():
        if pool_id in figures:  # demand as the dashboard counts it: the waiting statuses' units
            figures[pool_id].pending_units += tally.units
    return ProjectQueue(project=project, pending=pending, holding=holding, pools=list(figures.values()),
                        pending_total=pending_total)


def _newest(queryset: QuerySet, column: str) -> Subquery:
    """The newest `column` of all the rows, as a subquery."""
    return Subquery(queryset.order_by(F(column).desc(nulls_last=True)).values(column)[:1])


def explanation_inputs() -> dict[str, Subquery]:
    """Subqueries whose values change whenever any explanation's numbers may: explanations look at the whole pool
    (who holds it, who keeps idle cards), so the newest mirror of every queue, every quota, pool and project."""
    return {"queues_at": _newest(ClusterQueueState.objects.all(), "observed_at"),
            "local_queues_at": _newest(LocalQueueState.objects.all(), "observed_at"),
            "quotas_at": _newest(Quota.objects.all(), "updated_at"),
            "pools_at": _newest(NodePool.objects.all(), "updated_at"),
            "projects_at": _newest(Project.objects.all(), "updated_at")}


def _project_queue_marker_query(project_pk: int) -> QuerySet[Any, Any]:
    def newest(queryset: QuerySet, column: str) -> Subquery:
        return Subquery(queryset.filter(project=OuterRef("pk")).order_by().values("project").annotate(
            newest=Max(column)).values("newest")[:1])

    live = Q(workloads__status__in=sorted(LIVE_STATUSES))
    return Project.objects.filter(pk=project_pk).annotate(
        live=Count("workloads", filter=live), positions=Max("workloads__positions_at", filter=live),
        preempted=Max("workloads__last_preempted_at", filter=live),
        # Kueue's reason and message may change without a transition; their lengths catch most such changes.
        reasons=Sum(Length("workloads__status_reason") + Length("workloads__status_message"), filter=live),
        event=Subquery(WorkloadEvent.objects.filter(workload__project=OuterRef("pk")).order_by("-id").values("id")[:1]),
        cohorts=newest(CohortState.objects.all(), "observed_at"),
        **explanation_inputs(),
    ).values_list("live", "positions", "preempted", "reasons", "event", "cohorts", "queues_at", "local_queues_at",
                  "quotas_at", "pools_at", "projects_at")[:1]


# Compiled once per process: the ORM's compile of these subqueries cost more CPU than the database's answer.
_PROJECT_QUEUE_MARKER = PreparedQuery(_project_queue_marker_query, values=1)
_EXPLANATION_INPUTS = PreparedQuery(lambda: Project.objects.annotate(**explanation_inputs()).values_list(
    *explanation_inputs())[:1])


def project_queue_marker(*, project: Project) -> str:
    """A cheap fingerprint of everything the project queue page shows, in one query of aggregates (no rows fetched):
    the live workloads' count and newest position and preemption, the newest event, the newest mirror of the
    project's cohorts, and everything explanations read (`explanation_inputs`). It changes whenever the page would
    (runtimes and ages aside). The viewer's scope is not in it: callers add it to their cache keys."""
    return "|".join(str(part) for part in _PROJECT_QUEUE_MARKER.row(project.pk) or ())


# Each status's place in one string: `states` below weighs each row by it in one expression, which the ORM compiles
# in a fraction of the time a CASE of one WHEN per status takes.
_STATUS_CODES = f"|{'|'.join(Status.values)}|"


def _delimited_status() -> Func:
    """'|' || status || '|': what `Concat` writes for the never-null column, without the copies, coalesces and
    casts its compile goes through (a third of the list's marker's CPU)."""
    return Func(Value("|"), F("status"), Value("|"), template="(%(expressions)s)", arg_joiner=" || ",
                output_field=CharField())


def workload_list_marker(*, queryset: QuerySet[Workload], now: Any = None) -> str:
    """A cheap fingerprint of a page of the workload list (the filtered `queryset`), in two queries of aggregates: which
    rows there are, each row's status (a sum weighted by row and status), the newest of every time a transition
    stamps, positions, preemptions and forecasts, Kueue's reasons and messages (by length), and everything
    explanations read. Runtimes and ages move with the clock: the list shows seconds while a listed workload has
    held its GPUs for less than an hour, minutes otherwise, so the clock's 5 or 60 s bucket is part of it. The
    viewer's scope and the query string are not in it: callers add them."""
    now = now or timezone.now()
    row = queryset.order_by().aggregate(
        rows=Count("pk"), newest=Max("pk"),
        states=Sum(F("pk") * StrIndex(Value(_STATUS_CODES), _delimited_status()),
                   output_field=BigIntegerField()),
        admitted=Max("admitted_at"), started=Max("started_at"), finished=Max("finished_at"),
        positions=Max("positions_at"), preempted=Max("last_preempted_at"), forecasts=Max("forecast__computed_at"),
        reasons=Sum(Length("status_reason") + Length("status_message")),
        fresh=Count("pk", filter=Q(status__in=HOLDING_STATUSES, admitted_at__gt=now - timedelta(hours=1))),
    )
    inputs = _EXPLANATION_INPUTS.row() or ()  # uncorrelated: any one row carries them
    bucket = int(now.timestamp()) // (5 if row["fresh"] else 60)
    return "|".join(str(part) for part in (*row.values(), *inputs, bucket))


@dataclass(frozen=True)
class LiveMarker:
    key: str
    last_log_fetch: Any


def workload_live_marker(*, workload: Workload) -> LiveMarker:
    """A fingerprint of the detail page's live part: the row's mirrored state (already loaded) and, in one query,
    the newest event and log tail and everything the explanation reads (`explanation_inputs`). The viewer's scope is
    not in it: callers add it to their cache keys."""
    inputs = explanation_inputs()
    row = Workload.objects.filter(pk=workload.pk).annotate(
        event=Subquery(WorkloadEvent.objects.filter(workload=OuterRef("pk")).order_by("-id").values("id")[:1]),
        # a Kubernetes event seen again changes its count and last_seen, not its id
        cluster_event=Subquery(WorkloadClusterEvent.objects.filter(workload=OuterRef("pk")).order_by(
            "-last_seen", "-id").values("last_seen")[:1]),
        log=Subquery(WorkloadLogTail.objects.filter(workload=OuterRef("pk")).order_by().values("workload").annotate(
            at=Max("fetched_at")).values("at")[:1]),
        **inputs,
    ).values_list("event", "log", "cluster_event", *inputs).first() or (None,) * (3 + len(inputs))
    mirrored = (workload.status, workload.status_reason, workload.status_message, workload.queue_position_local,
                workload.queue_position_cluster, workload.cluster_queue, len(str(workload.kueue_conditions)),
                workload.last_activity_at, workload.stop_requested_by_id, workload.finished_at)
    return LiveMarker(key="|".join(str(part) for part in (*mirrored, *row)), last_log_fetch=row[1])


def preemptions_seen_by(*, workload: Workload, user: Actor) -> list[dict[str, Any]]:
    """The workload's preemptions, each with its plain sentence (`note`, an `explain.PreemptionNote`); a preemptor
    the user may not see keeps only `visible: False` (no id, no name)."""
    found = preemptions(workload)
    ids = [p["preemptor"]["id"] for p in found if p["preemptor"]]
    visible = dict(workloads_for(user).filter(pk__in=ids).values_list("pk", "project__name")) if ids else {}
    for preemption in found:
        preemptor, peer = preemption["preemptor"], None
        if preemptor is not None:
            seen = preemptor["id"] in visible
            preemption["preemptor"] = {**preemptor, "visible": True} if seen else {"visible": False}
            peer = Peer(preemptor["id"], preemptor["name"], visible[preemptor["id"]]) if seen else Peer()
        preemption["note"] = PreemptionNote(at=preemption["at"], reason=preemption["reason"], preemptor=peer)
    return found


def preemptors_visible(messages: Iterable[str], *, user: Actor) -> set[str] | None:
    """Of the preemptors Kueue's `messages` name (by UID and cohort path), the Job uids `user` may see; None when
    they may see every one (or none is named). One query when a preemptor is named to someone who sees less
    than everything."""
    job_uids = preemptor_job_uids(messages)
    if not job_uids or access.sees_everything(user):
        return None
    return set(workloads_for(user).filter(k8s_uid__in=job_uids).values_list("k8s_uid", flat=True))


@dataclass
class ClusterEventLine:
    """Kubernetes Events of a workload's objects that say the same thing (type, reason, message), as one line:
    their counts added up, from the first seen to the last, with the objects they were about (several pods of one
    Job that failed to schedule alike read as one line, kubectl describe's "x8 over 3m")."""

    type: str
    reason: str
    message: str
    source: str
    count: int
    first_seen: datetime
    last_seen: datetime
    objects: list[str] = field(default_factory=list)  # "Pod/wl-12-abcde", ...

    @property
    def warning(self) -> bool:
        return self.type == "Warning"


def cluster_events_of(*, workload: Workload) -> list[ClusterEventLine]:
    """The Kubernetes Events of the workload's pods, Job (or owner) and Kueue Workload, newest first, the same
    event of several objects (or repeated) counted on one line. One query."""
    lines: dict[tuple[str, str, str], ClusterEventLine] = {}
    for row in WorkloadClusterEvent.objects.filter(workload=workload).order_by("-last_seen", "-id"):
        line = lines.get((row.type, row.reason, row.message))
        if line is None:
            line = lines[(row.type, row.reason, row.message)] = ClusterEventLine(
                type=row.type, reason=row.reason, message=row.message, source=row.source, count=0,
                first_seen=row.first_seen, last_seen=row.last_seen)
        line.count += row.count
        line.first_seen = min(line.first_seen, row.first_seen)
        if (name := f"{row.object_kind}/{row.object_name}") not in line.objects:
            line.objects.append(name)
    return sorted(lines.values(), key=lambda line: line.last_seen, reverse=True)


def workload_history(*, workload: Workload, user: Actor) -> dict[str, Any]:
    """The detail page's timeline (each preemption carries its preemptor, linked only when the viewer may see it),
    Kueue's conditions scoped to the viewer, the Kubernetes events of its objects and the stored log tails: six
    queries, seven when a condition names a preemptor and the viewer does not see everything."""

    events = list(workload.events.select_related("actor"))
    preempted = preemptions_seen_by(workload=workload, user=user)  # same order as the events (at, id)
    remaining = iter(preempted)
    for event in events:
        event.preemption = next(remaining, None) if event.to_status == "preempted" else None
    flavors = sorted({flavor for pod_set in (workload.admission or {}).get("pod_sets", [])
                      for flavor in (pod_set.get("flavors") or {}).values()})
    visible_job_uids = preemptors_visible(
        (c.get("message") or "" for c in workload.kueue_conditions or []), user=user)
    return {"events": events, "preemptions": preempted, "flavors": flavors, "log_tails": log_tails(workload=workload),
            "conditions": conditions_scoped(workload, visible_job_uids=visible_job_uids),
            "cluster_events": cluster_events_of(workload=workload)}
