"""Reads of workloads, always scoped through the access module (a row the user may not see does not exist)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import (
    Case,
    Count,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    When,
    Window,
)
from django.db.models.functions import Least, Length, RowNumber
from django.utils import timezone

from apps.accounts import access
from apps.accounts.access import Action, can_anywhere
from apps.cluster.models import ClusterQueueState, CohortState, LocalQueueState
from apps.core.http import parse_id, parse_int
from apps.org.models import NodePool, PriorityClass, Project, Quota
from apps.org.selectors import projects_for

from .explain import NEVER_FITS, Forecast, Peer, PreemptionNote, explain_probe, explain_workloads, forecast
from .history import preemptions
from .logs import log_tails
from .models import (
    FORECAST_RECORD_DAYS,
    FORECAST_STATUSES,
    HOLDING_STATUSES,
    LIVE_STATUSES,
    QUEUED_STATUSES,
    WAITING_STATUSES,
    Credential,
    ForecastBasis,
    ForecastRecord,
    Kind,
    Status,
    Workload,
    WorkloadEvent,
    WorkloadForecast,
    WorkloadLogTail,
    WorkloadTemplate,
    WorkloadUtilisation,
)
from .validation import non_preemptible_units_held

FORECAST_RECORD_SIZE = 100  # recorded waits the range calibration reads: few enough to follow the cluster's changes


def workloads_for(user: Any) -> QuerySet[Workload]:
    """The user's own workloads and every workload in a project they may view (the same rows as the API)."""
    return access.restrict(Workload.objects.all(), user, Action.VIEW)


def offers_scope_filter(*, user: Any) -> bool:
    """Team leads, department admins and admins may switch from their own work to everything in their scope."""
    return can_anywhere(user, Action.STOP_ANY)


def default_scope(*, user: Any) -> str:
    """`mine` or `all`, as the access module decides (researchers start on their own work, leads on their scope's)."""
    return "mine" if access.starts_on_own_workloads(user) else "all"


def requested_units() -> Case:
    """A workload's GPU units in SQL (`Workload.gpu_units`), so lists sort by them: gang pods, batch parallelism, or
    one notebook pod."""
    return Case(
        When(kind=Kind.TRAINING, then=F("gpus") * F("pods")),
        When(kind=Kind.BATCH, then=F("gpus") * Least(F("parallelism"), F("completions"))),
        default=F("gpus"), output_field=IntegerField(),
    )


def workload_list(*, user: Any) -> QuerySet[Workload]:
    """The list's rows (page, CSV and API) with everything a row shows joined in: a fixed number of queries however
    many rows; `filters.WorkloadFilterSet` narrows and orders them (by `requested_units` too)."""
    return workloads_for(user).select_related(
        "project__department", "node_pool", "owner", "priority_class", "stop_requested_by", "forecast", "utilisation",
    ).defer("utilisation__series").annotate(requested_units=requested_units())


def workload_for_page(*, user: Any, pk: int) -> Workload | None:
    return workloads_for(user).select_related(
        "project__department", "node_pool", "owner", "priority_class", "stop_requested_by", "resubmitted_from",
        "forecast",
    ).filter(pk=pk).first()


def notebook_to_connect(*, user: Any, pk: int) -> Workload | None:
    """A notebook the user may open (its owner; project members where the project shares notebooks); None for
    anything else, which the views answer 404 whatever the user may otherwise see."""
    workload = Workload.objects.select_related("project").filter(pk=pk, kind=Kind.NOTEBOOK).first()
    if workload is None or not access.can_connect_notebook(user, workload):
        return None
    return workload


def credentials_of(*, owner: Any) -> QuerySet[Credential]:
    """A user's credentials (not being deleted): names and keys only, never values."""
    return Credential.objects.filter(owner=owner, deleted_at=None).select_related("project").defer("sealed")


def submit_projects(*, user: Any) -> QuerySet[Project]:
    return projects_for(user, Action.SUBMIT).select_related("department", "default_priority_class").order_by(
        "department__name", "name")


def submit_project_known(*, projects: QuerySet[Project], raw: str) -> bool:
    """Whether `raw` (a project id from the page) names one of the projects the submit page offers."""
    return projects.filter(pk=parse_id(raw) or 0).exists()


def templates(*, kind: str | None = None) -> QuerySet[WorkloadTemplate]:
    rows = WorkloadTemplate.objects.all()
    return rows if kind is None else rows.filter(kind=kind)


@dataclass
class PoolPanel:
    """What the project has on the chosen pool, for the submit page's side panel."""

    project: Project
    pool: NodePool
    quota: Quota | None
    units: int | None  # what the form currently asks for, when it can be computed
    preemptible: bool
    held_non_preemptible: int = 0
    other_pools: list[Quota] = field(default_factory=list)
    forecast: Forecast | None = None  # whether it would start now or wait, and why (when the size is known)
    # "If you submit this now": the stored forecasts of the work ahead of it in its queue (`queue_start_forecast`)
    start: WorkloadForecast | None = None
    ahead: int = 0

    @property
    def non_preemptible_room(self) -> int:
        """Deserved units not held by the project's running non-preemptible work."""
        return max(0, (self.quota.deserved if self.quota else 0) - self.held_non_preemptible)

    @property
    def fits_limit(self) -> bool | None:
        if self.quota is None or self.units is None:
            return None
        return self.quota.limit is None or self.units <= self.quota.limit

    @property
    def fits_non_preemptible(self) -> bool | None:
        """Whether this request could run non-preemptible here at all (inside the deserved quota)."""
        if self.quota is None or self.units is None:
            return None
        return self.units <= self.quota.deserved

    @property
    def fits_non_preemptible_now(self) -> bool | None:
        if self.quota is None or self.units is None:
            return None
        return self.units <= self.non_preemptible_room


def pool_panel(*, project: Project, pool: NodePool, probe: Workload | None, preemptible: bool,
               viewer: Any = None) -> PoolPanel:
    """The panel for `project` on `pool`; with a `probe` (the workload being filled in, sizes known) it also says
    whether that would start now or wait, and why (`explain.explain_probe`: the mirror, no cluster call)."""
    quotas = list(Quota.objects.filter(project=project).select_related("node_pool").order_by("node_pool__name"))
    quota = next((q for q in quotas if q.node_pool_id == pool.pk), None)
    held = non_preemptible_units_held(project_id=project.pk, pool_id=pool.pk) if quota else 0
    expected, start, ahead = None, None, 0
    if probe is not None and quota is not None:
        explanation = explain_probe(probe, viewer=viewer)
        expected = forecast(probe, explanation) if explanation is not None else None
        start, ahead = queue_start_forecast(probe)  # always, so the live check costs the same whatever it says
        if expected is None or expected.starts_now or explanation is None or explanation.reason == NEVER_FITS:
            start, ahead = None, 0
    return PoolPanel(project=project, pool=pool, quota=quota, units=probe.gpu_units if probe else None,
                     preemptible=preemptible, held_non_preemptible=held,
                     other_pools=[q for q in quotas if q.node_pool_id != pool.pk], forecast=expected, start=start,
                     ahead=ahead)


def queue_start_forecast(probe: Workload) -> tuple[WorkloadForecast | None, int]:
    """For a workload not submitted yet: no sooner than the work ahead of it in its queue (same project, pool and
    kind of queue, at its priority or higher) is forecast to start, read from the worker's stored forecasts (the web
    never replays). The bound and how many are ahead; None when nothing ahead has an estimate. One query."""
    ahead = WorkloadForecast.objects.filter(
        workload__project_id=probe.project_id, workload__node_pool_id=probe.node_pool_id,
        workload__preemptible=probe.preemptible, workload__status__in=WAITING_STATUSES)
    if probe.priority_class_id is not None:
        ahead = ahead.filter(workload__priority_class__value__gte=probe.priority_class.value)
    found = ahead.aggregate(count=Count("pk"), estimated=Count("likely"), earliest_bound=Max("earliest"),
                            likely_bound=Max("likely"), latest_bound=Max("latest"), computed=Max("computed_at"))
    if not found["count"] or found["estimated"] < found["count"]:
        return None, found["count"]
    bound = WorkloadForecast(earliest=found["earliest_bound"], likely=found["likely_bound"],
                             latest=found["latest_bound"], computed_at=found["computed"], basis=ForecastBasis.MIXED)
    return bound, found["count"]


def submit_panel(*, kind: str, projects: QuerySet[Project], source: Any, viewer: Any = None) -> PoolPanel | None:
    """The side panel for whatever project, pool, size and priority class `source` (form data or initial values)
    names, worded for `viewer`."""
    project_id, pool_id = parse_id(source.get("project")), parse_id(source.get("node_pool"))
    project = (projects.filter(pk=project_id).first() if project_id else None) or projects.first()
    pool = NodePool.objects.filter(pk=pool_id).first() if pool_id else None
    if project is None or pool is None:
        return None
    preemptible = source.get("preemptible")
    preemptible = preemptible if isinstance(preemptible, bool) else preemptible in ("on", "true", "1", "True")
    sizes = {key: parse_int(source.get(key)) for key in ("gpus", "pods", "completions", "parallelism")}
    probe = None
    if sizes["gpus"] is not None and sizes["gpus"] > 0 and all(size is None or size > 0 for size in sizes.values()):
        priority_class_id = parse_id(source.get("priority_class"))
        probe = Workload(kind=kind, project=project, node_pool=pool, gpus=sizes["gpus"], pods=sizes["pods"] or 1,
                         completions=sizes["completions"] or 1, parallelism=sizes["parallelism"] or 1,
                         preemptible=preemptible,
                         priority_class=PriorityClass.objects.filter(pk=priority_class_id).first()
                         if priority_class_id else None)
    return pool_panel(project=project, pool=pool, probe=probe, preemptible=preemptible, viewer=viewer)


def default_priority_class(*, project: Project, preemptible: bool) -> PriorityClass | None:
    """The project's default class when it matches, else the lowest class of that preemptibility."""
    if project.default_priority_class and project.default_priority_class.preemptible == preemptible:
        return project.default_priority_class
    return PriorityClass.objects.filter(preemptible=preemptible).order_by("value").first()


def preemptible_by_class() -> dict[int, bool]:
    return dict(PriorityClass.objects.values_list("pk", "preemptible"))


def priority_class_preemptible(*, pk: int | None) -> bool | None:
    """Whether the priority class's work is preemptible by default; None when there is no such class."""
    if pk is None:
        return None
    return PriorityClass.objects.filter(pk=pk).values_list("preemptible", flat=True).first()


# --- start-time forecasts (worker/forecast.py computes them; pages and the API only read) -------------------------


def forecasts_for(*, workload_ids: Any) -> dict[int, WorkloadForecast]:
    """The latest forecast of each of these workloads that waits, by workload id: one query. Rows the caller may show
    only (the ids come from a scoped queryset); a workload that does not wait has none. Lists may instead join it
    with `select_related("forecast")` (the reverse one-to-one; absent reads as no attribute in templates)."""
    return {row.workload_id: row for row in WorkloadForecast.objects.filter(workload_id__in=list(workload_ids))}


def forecast_record(*, now: datetime, size: int = FORECAST_RECORD_SIZE,
                    ) -> list[tuple[datetime, datetime, datetime, datetime | None, bool]]:
    """(estimated at, earliest, latest, started or None, preemptible) of the latest `size` first estimates of each
    kind of work (preemptible or not) that was to wait (likely after the estimate), estimated within
    FORECAST_RECORD_DAYS of `now`, and that has got quota since or waits still (work stopped before it started says
    nothing): what the worker calibrates its ranges on (no user's view, so not scoped). One query."""
    latest_first = [F("forecast_at").desc(), F("workload_id").desc()]
    recorded = ForecastRecord.objects.filter(
        Q(started_at__isnull=False) | Q(workload__status__in=FORECAST_STATUSES), likely__gt=F("forecast_at"),
        forecast_at__gte=now - timedelta(days=FORECAST_RECORD_DAYS),
    ).annotate(rank=Window(RowNumber(), partition_by=F("workload__preemptible"), order_by=latest_first))
    return list(recorded.filter(rank__lte=size).order_by(*latest_first).values_list(
        "forecast_at", "earliest", "latest", "started_at", "workload__preemptible"))


def forecasts_computed_since(*, at: Any) -> bool:
    """Whether a forecast refresh started at or after `at` (so it saw everything committed before then)."""
    return WorkloadForecast.objects.filter(computed_at__gte=at).exists()


# --- live queue state: positions, explanations, the project queue, the detail page's history -------------------


def annotate_live(workloads: list[Workload], *, viewer: Any = None, now: Any = None) -> list[Workload]:
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
        workload.position_label = (f"#{workload.queue_position_local + 1} in {workload.queue_name}"
                                   if workload.status in QUEUED_STATUSES and workload.queue_position_local is not None
                                   else "")
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
    pending_units: int = 0
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


def _queue_order(workload: Workload) -> tuple:
    position = workload.queue_position_cluster
    return (workload.node_pool.slug, workload.queue_name, position is None,
            position if position is not None else 0, workload.created_at, workload.pk)


def project_queue(*, project: Project, viewer: Any = None) -> ProjectQueue:
    """The project's live work in queue order and its quota per pool: a fixed number of queries.

    The caller has checked the viewer may see the project (the access module lets project members see all its
    workloads); the page decides which details of other people's work it shows, and the explanations name other
    projects only as far as the viewer may see them.
    """
    rows = list(Workload.objects.filter(project=project, status__in=LIVE_STATUSES).select_related(
        "project__department", "node_pool", "owner", "priority_class", "forecast"))
    pending = sorted((w for w in rows if w.status in PENDING_STATUSES), key=_queue_order)
    holding = sorted((w for w in rows if w.status not in PENDING_STATUSES),
                     key=lambda w: (w.node_pool.slug, w.admitted_at or w.created_at, w.pk))
    annotate_live([*pending[:PROJECT_QUEUE_ROWS], *holding], viewer=viewer)
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
    for workload in pending:  # demand as the dashboard counts it: what Kueue holds waiting (not yet submitted: no)
        if workload.node_pool_id in figures and workload.status in WAITING_STATUSES:
            figures[workload.node_pool_id].pending_units += workload.gpu_units
    return ProjectQueue(project=project, pending=pending[:PROJECT_QUEUE_ROWS], holding=holding,
                        pools=list(figures.values()), pending_total=len(pending))


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


def project_queue_marker(*, project: Project) -> str:
    """A cheap fingerprint of everything the project queue page shows, in one query of aggregates (no rows fetched):
    the live workloads' count and newest position and preemption, the newest event, the newest mirror of the
    project's cohorts, and everything explanations read (`explanation_inputs`). It changes whenever the page would
    (runtimes and ages aside). The viewer's scope is not in it: callers add it to their cache keys."""

    def newest(queryset: QuerySet, column: str) -> Subquery:
        return Subquery(queryset.filter(project=OuterRef("pk")).order_by().values("project").annotate(
            newest=Max(column)).values("newest")[:1])

    live = Q(workloads__status__in=LIVE_STATUSES)
    row = Project.objects.filter(pk=project.pk).annotate(
        live=Count("workloads", filter=live), positions=Max("workloads__positions_at", filter=live),
        preempted=Max("workloads__last_preempted_at", filter=live),
        # Kueue's reason and message may change without a transition; their lengths catch most such changes.
        reasons=Sum(Length("workloads__status_reason") + Length("workloads__status_message"), filter=live),
        event=Subquery(WorkloadEvent.objects.filter(workload__project=OuterRef("pk")).order_by("-id").values("id")[:1]),
        cohorts=newest(CohortState.objects.all(), "observed_at"),
        **explanation_inputs(),
    ).values_list("live", "positions", "preempted", "reasons", "event", "cohorts", "queues_at", "local_queues_at",
                  "quotas_at", "pools_at", "projects_at").first()
    return "|".join(str(part) for part in row or ())


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
        log=Subquery(WorkloadLogTail.objects.filter(workload=OuterRef("pk")).order_by().values("workload").annotate(
            at=Max("fetched_at")).values("at")[:1]),
        **inputs,
    ).values_list("event", "log", *inputs).first() or (None,) * (2 + len(inputs))
    mirrored = (workload.status, workload.status_reason, workload.status_message, workload.queue_position_local,
                workload.queue_position_cluster, workload.cluster_queue, len(str(workload.kueue_conditions)),
                workload.last_activity_at, workload.stop_requested_by_id, workload.finished_at)
    return LiveMarker(key="|".join(str(part) for part in (*mirrored, *row)), last_log_fetch=row[1])


def preemptions_seen_by(*, workload: Workload, user: Any) -> list[dict[str, Any]]:
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


def workload_history(*, workload: Workload, user: Any) -> dict[str, Any]:
    """The detail page's timeline (each preemption carries its preemptor, linked only when the viewer may see it),
    the Kueue conditions and the stored log tails: five queries."""

    events = list(workload.events.select_related("actor"))
    preempted = preemptions_seen_by(workload=workload, user=user)  # same order as the events (at, id)
    remaining = iter(preempted)
    for event in events:
        event.preemption = next(remaining, None) if event.to_status == "preempted" else None
    flavors = sorted({flavor for pod_set in (workload.admission or {}).get("pod_sets", [])
                      for flavor in (pod_set.get("flavors") or {}).values()})
    return {"events": events, "preemptions": preempted, "flavors": flavors, "log_tails": log_tails(workload=workload)}


# --- GPU utilisation (stored by the worker from Prometheus; pages never query Prometheus) -------------------------


@dataclass(frozen=True)
class UtilisationChart:
    """The detail page's sparkline: SVG polyline points in a CHART_WIDTH x CHART_HEIGHT box (0 % at the bottom)."""

    row: WorkloadUtilisation | None
    util_points: str = ""
    memory_points: str = ""
    memory_scale_mib: float = 0.0
    started: Any = None
    ended: Any = None


CHART_WIDTH, CHART_HEIGHT = 300, 60


def utilisation_available() -> bool:
    return bool(settings.PROMETHEUS_URL)


def workload_utilisation_chart(*, workload: Workload) -> UtilisationChart:
    """The stored series as two polylines (GPU util %, framebuffer used relative to its peak); one query."""
    row = WorkloadUtilisation.objects.filter(workload=workload).first()
    series = row.series if row else []
    if not series:
        return UtilisationChart(row=row)
    first, last = series[0][0], series[-1][0]
    span = (last - first) or 1.0
    peak = max(point[2] for point in series) or 1.0

    def x(moment: float) -> str:
        return f"{(moment - first) / span * CHART_WIDTH:.1f}"

    def y(fraction: float) -> str:
        return f"{CHART_HEIGHT - min(max(fraction, 0.0), 1.0) * CHART_HEIGHT:.1f}"

    util = " ".join(f"{x(p[0])},{y(p[1] / 100)}" for p in series)
    memory = " ".join(f"{x(p[0])},{y(p[2] / peak)}" for p in series)
    return UtilisationChart(row=row, util_points=util, memory_points=memory, memory_scale_mib=peak,
                            started=datetime.fromtimestamp(first, tz=UTC), ended=datetime.fromtimestamp(last, tz=UTC))


def workloads_held_idle(*, user: Any) -> QuerySet[Workload]:
    """Workloads holding GPUs now that the idle policy flagged (GPUs below its threshold for its duration), longest
    idle first, scoped to what the user may see."""
    return workloads_for(user).filter(
        status__in=HOLDING_STATUSES, utilisation__idle_flagged_at__isnull=False).select_related(
        "project__department", "node_pool", "owner", "utilisation").order_by("utilisation__idle_since", "pk")
