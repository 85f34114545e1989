"""The rows a user may see: the list, a page's workload, a notebook to connect, credentials, the submit page's
projects, templates."""

from __future__ import annotations

from django.db.models import BigIntegerField, Case, CharField, F, IntegerField, Q, QuerySet, Value, When
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Cast, Concat, Least, Round

from apps.accounts import access
from apps.accounts.access import Action, can_anywhere
from apps.core.actors import Actor, Visitor
from apps.core.http import reference_lookup
from apps.org.models import NodePool, Project
from apps.org.selectors import projects_for
from apps.workloads.models import (
    LIVE_STATUSES,
    OUTSIDE_THE_PORTAL,
    Credential,
    Kind,
    Origin,
    Workload,
    WorkloadTemplate,
)
from apps.workloads.observation import Observation


def workloads_for(user: Visitor | None) -> QuerySet[Workload]:
    """The user's own workloads and every workload in a project they may view (the same rows as the API)."""
    return access.restrict(Workload.objects.all(), user, Action.VIEW)


def offers_scope_filter(*, user: Actor) -> bool:
    """Everyone who may view more than their own work switches between the two: researchers see their projects'
    work too, kubectl's and pipelines' included (docs/architecture.md, Work submitted outside the portal)."""
    return can_anywhere(user, Action.VIEW)


def default_scope(*, user: Actor) -> str:
    """`mine` or `all`, as the access module decides (researchers start on their own work, leads on their scope's)."""
    return "mine" if access.starts_on_own_workloads(user) else "all"


def requested_units() -> Case:
    """A workload's GPU units in SQL (`Workload.gpu_units`), so lists sort by them: the pod sets' units of work from
    outside, gang pods, batch parallelism, or one notebook pod."""
    return Case(
        When(pod_set_units__isnull=False, then=F("pod_set_units")),
        When(kind=Kind.TRAINING, then=F("gpus") * F("pods")),
        When(kind=Kind.BATCH, then=F("gpus") * Least(F("parallelism"), F("completions"))),
        default=F("gpus"), output_field=IntegerField(),
    )


def requested_hundredths() -> Case:
    """A workload's GPUs in hundredths of a unit in SQL (`Workload.gpu_amount` x 100), as the tallies keep them (the
    triggers of the `workload_tallies_fractions` migration count the same): a share of a card on a KAI pool is its
    share (0.5: 50), whole units x 100. An exact integer on SQLite too, where a decimal sum would be a float's."""
    return Case(
        When(gpu_fraction__isnull=False, then=Cast(Round(F("gpu_fraction") * 100), BigIntegerField())),
        default=requested_units() * 100, output_field=BigIntegerField(),
    )


def holds_serving_units() -> Q:
    """Whether a workload holds units of its project's serving reservation: a live inference service of the
    portal's (docs/architecture.md, Inference services)."""
    return Q(kind=Kind.INFERENCE, origin=Origin.PORTAL, status__in=LIVE_STATUSES)


def serving_services() -> QuerySet[Workload]:
    """The inference services that hold units of their project's serving reservation."""
    return Workload.objects.filter(holds_serving_units())


def serving_units() -> CombinedExpression:
    """The units an inference service holds of its reservation, in SQL: replicas x pods x GPUs."""
    return F("gpus") * F("pods") * F("replicas")


def creator() -> Case:
    """Who submitted a workload in SQL, as `models.submitter_text` says it, so lists sort and search by what their
    Creator column shows: the owner's username, else "outside the portal (<Kubernetes user>)"."""
    return Case(
        When(owner__isnull=False, then=F("owner__username")),
        When(submitted_by="", then=Value(OUTSIDE_THE_PORTAL)),
        default=Concat(Value(f"{OUTSIDE_THE_PORTAL} ("), F("submitted_by"), Value(")")),
        output_field=CharField(),
    )


def workload_rows(*, user: Actor) -> QuerySet[Workload]:
    """The list page's and its CSV's rows with everything their columns show joined in: a fixed number of queries
    however many rows; `filters.WorkloadFilterSet` narrows and orders them (by `requested_gpus`, a share of a card as
    that share, and `creator` too).
    Seven tables and no more: PostgreSQL's planner spends more on each further join than the page's query takes to
    run (about 4 ms to plan seven, 26 ms nine, on this machine under load)."""
    return workloads_for(user).select_related(
        "project__department", "node_pool", "owner", "priority_class", "forecast",
    ).annotate(requested_gpus=requested_hundredths(), creator=creator())


def workload_list(*, user: Actor, detail: bool = False) -> QuerySet[Workload]:
    """The API's rows: `workload_rows` with who asked for a stop and the utilisation summary joined in too (with
    `detail`, an inference service's figures per replica as well: the detail shows them, the list does not)."""
    return workload_rows(user=user).select_related("stop_requested_by", "utilisation").defer(
        "utilisation__series", *(() if detail else ("utilisation__replicas",)))


def workload_for_page(*, user: Actor, pk: int) -> Workload | None:
    return workloads_for(user).select_related(
        "project__department", "node_pool", "owner", "priority_class", "stop_requested_by", "resubmitted_from",
        "forecast",
    ).filter(pk=pk).first()


def notebook_to_connect(*, user: Actor, pk: int) -> Workload | None:
    """A notebook the user may open (its owner; project members where the project shares notebooks); None for
    anything else, which the views answer 404 whatever the user may otherwise see."""
    workload = Workload.objects.select_related("project").filter(pk=pk, kind=Kind.NOTEBOOK).first()
    if workload is None or not access.can_connect_notebook(user, workload):
        return None
    return workload


def inference_to_reach(*, user: Actor, pk: int) -> Workload | None:
    """An inference service whose endpoint the user may reach (a member of its project); None for anything else,
    which the views answer 404."""
    workload = Workload.objects.select_related("project").filter(pk=pk, kind=Kind.INFERENCE).first()
    if workload is None or not access.can_reach_inference(user, workload):
        return None
    return workload


def credentials_of(*, owner: Actor) -> QuerySet[Credential]:
    """A user's credentials (not being deleted): names and keys only, never values."""
    return Credential.objects.filter(owner=owner, deleted_at=None).select_related("project").defer("sealed")


def submit_projects(*, user: Actor) -> QuerySet[Project]:
    return projects_for(user, Action.SUBMIT).select_related("department", "default_priority_class").order_by(
        "department__name", "name")


def serving_pools(*, projects: QuerySet[Project]) -> QuerySet[NodePool]:
    """The serving pools where one of `projects` holds a serving reservation: the only pools an inference service
    of theirs may run on (docs/architecture.md, Inference services)."""
    return NodePool.objects.filter(serving=True, serving_reservations__project__in=projects).distinct().order_by(
        "name")


def submit_project(*, projects: QuerySet[Project], raw: str) -> Project | None:
    """The project of those the submit page offers that `raw` names, by id or slug (the manifest page's links keep
    the slug a user typed), if any."""
    return projects.filter(**(reference_lookup(raw, name_field="slug") or {"pk__in": []})).first()


def submit_project_known(*, projects: QuerySet[Project], raw: str) -> bool:
    """Whether `raw` (a project id or slug from the page) names one of the projects the submit page offers."""
    return submit_project(projects=projects, raw=raw) is not None


def templates(*, kind: str | None = None) -> QuerySet[WorkloadTemplate]:
    rows = WorkloadTemplate.objects.all()
    return rows if kind is None else rows.filter(kind=kind)


def preemptor_id(observation: Observation) -> int | None:
    """The row of the workload that preempted it, found by the Job uid Kueue's message names (any origin): the
    watcher's read, not user-scoped."""
    if not (observation.preemption and observation.preemption.preemptor_job_uid):
        return None
    return Workload.objects.filter(k8s_uid=observation.preemption.preemptor_job_uid).values_list(
        "pk", flat=True).first()
