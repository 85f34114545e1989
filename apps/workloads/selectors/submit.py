"""The submit page's side panels (the project's quota on the chosen pool, and whether the request would start now;
the project's effective policy) and the priority class defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db.models import Count, Max, QuerySet

from apps.core.actors import Actor
from apps.core.http import parse_id, parse_int
from apps.org.models import NodePool, PriorityClass, Project, Quota
from apps.org.selectors import effective_policy
from apps.workloads.explain import NEVER_FITS, Forecast, explain_probe, forecast
from apps.workloads.models import (
    MAX_GPU_FRACTION,
    MIN_GPU_FRACTION,
    WAITING_STATUSES,
    ForecastBasis,
    Workload,
    WorkloadForecast,
)
from apps.workloads.validation import non_preemptible_amount_held


@dataclass
class PoolPanel:
    """What the project has on the chosen pool, for the submit page's side panel."""

    project: Project
    pool: NodePool
    quota: Quota | None
    # What the form currently asks for, when it can be computed: whole units, or a share of a card on a KAI pool.
    units: Decimal | None
    preemptible: bool
    # Held by the project's running non-preemptible work, a share of a card as that share (KAI adds them up).
    held_non_preemptible: Decimal = Decimal(0)
    other_pools: list[Quota] = field(default_factory=list)
    forecast: Forecast | None = None  # whether it would start now or wait, and why (when the size is known)
    # "If you submit this now": the stored forecasts of the work ahead of it in its queue (`queue_start_forecast`)
    start: WorkloadForecast | None = None
    ahead: int = 0

    @property
    def non_preemptible_room(self) -> Decimal:
        """Deserved units not held by the project's running non-preemptible work (0.5 left beside a half card held
        in a deserved 1: KAI packs another half there)."""
        return max(Decimal(0), (self.quota.deserved if self.quota else 0) - self.held_non_preemptible)

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
               viewer: Actor | None = None) -> PoolPanel:
    """The panel for `project` on `pool`; with a `probe` (the workload being filled in, sizes known) it also says
    whether that would start now or wait, and why (`explain.explain_probe`: the mirror, no cluster call)."""
    quotas = list(Quota.objects.filter(project=project).select_related("node_pool").order_by("node_pool__name"))
    quota = next((q for q in quotas if q.node_pool_id == pool.pk), None)
    held = non_preemptible_amount_held(project_id=project.pk, pool_id=pool.pk) if quota else Decimal(0)
    expected, start, ahead = None, None, 0
    if probe is not None and quota is not None:
        explanation = explain_probe(probe, viewer=viewer)
        expected = forecast(probe, explanation) if explanation is not None else None
        start, ahead = queue_start_forecast(probe)  # always, so the live check costs the same whatever it says
        if expected is None or expected.starts_now or explanation is None or explanation.reason == NEVER_FITS:
            start, ahead = None, 0
    return PoolPanel(project=project, pool=pool, quota=quota, units=probe.gpu_amount if probe else None,
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
        ahead = ahead.filter(workload__priority_class__value__gte=probe.priority_value)
    found = ahead.aggregate(count=Count("pk"), estimated=Count("likely"), earliest_bound=Max("earliest"),
                            likely_bound=Max("likely"), latest_bound=Max("latest"), computed=Max("computed_at"))
    if not found["count"] or found["estimated"] < found["count"]:
        return None, found["count"]
    bound = WorkloadForecast(earliest=found["earliest_bound"], likely=found["likely_bound"],
                             latest=found["latest_bound"], computed_at=found["computed"], basis=ForecastBasis.MIXED)
    return bound, found["count"]


def submit_panel(*, kind: str, projects: QuerySet[Project], source: Any,
                 viewer: Actor | None = None) -> PoolPanel | None:
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
    # A share of one card, for a single pod on a KAI pool that shares cards (the form refuses it elsewhere).
    fraction = _gpu_fraction(source.get("gpu_fraction")) if pool.kai and pool.gpu_fractions and not sizes["gpus"] \
        else None
    probe = None
    gpus = sizes["gpus"] or 0
    if (gpus > 0 or fraction is not None) and all(size is None or size > 0 for key, size in sizes.items()
                                                   if key != "gpus"):
        priority_class_id = parse_id(source.get("priority_class"))
        probe = Workload(kind=kind, project=project, node_pool=pool, gpus=gpus,
                         gpu_fraction=None if gpus else fraction, pods=sizes["pods"] or 1,
                         completions=sizes["completions"] or 1, parallelism=sizes["parallelism"] or 1,
                         preemptible=preemptible,
                         priority_class=PriorityClass.objects.filter(pk=priority_class_id).first()
                         if priority_class_id else None)
    return pool_panel(project=project, pool=pool, probe=probe, preemptible=preemptible, viewer=viewer)


def _gpu_fraction(value: Any) -> Decimal | None:
    """A share of one GPU from a query or form value (0.5, "0.25"), or None when it is no valid share."""
    try:
        fraction = Decimal(str(value).strip()) if value not in (None, "") else None
    except InvalidOperation:
        return None
    if fraction is None or not fraction.is_finite() or not MIN_GPU_FRACTION <= fraction <= MAX_GPU_FRACTION \
            or fraction != round(fraction, 2):
        return None
    return fraction


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


def submit_pool(*, project: Project | None, raw: Any) -> NodePool | None:
    """The pool a submit page starts on: the one `raw` (an id from the page) names, else the first the project has a
    quota on, else the first there is."""
    batch_pools = NodePool.objects.filter(serving=False)  # serving pools take inference services only
    pool = batch_pools.filter(pk=parse_id(raw) or 0).first() if raw else None
    if pool is None and project is not None:
        quota = Quota.objects.filter(project=project).select_related("node_pool").order_by("node_pool__name").first()
        pool = quota.node_pool if quota else None
    return pool or batch_pools.order_by("name").first()


@dataclass(frozen=True)
class PolicyFact:
    """One line of the submit page's policy panel: what a field allows and which policy sets it ("" when none)."""

    name: str
    label: str
    value: str
    source: str


@dataclass
class PolicyPanel:
    """What the chosen project's effective policy allows and fills in (docs/architecture.md, Policies), shown before
    anyone types so a refusal is never the first news of a limit."""

    project: Project
    facts: list[PolicyFact]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _minutes(seconds: int) -> str:
    hours, minutes = divmod(seconds // 60, 60)
    return " ".join(part for part in (f"{hours} h" if hours else "", f"{minutes} min" if minutes else "")
                    if part) or f"{seconds} s"


def _policy_value(name: str, value: Any) -> str:
    if value is None:
        return "no limit" if name.startswith("max_") or name.startswith("allowed_") else "none"
    if name == "max_gpus_per_workload":
        return f"{value} GPU unit{'s' if value != 1 else ''} in all its pods"
    if name in ("max_runtime_seconds", "default_runtime_seconds"):
        return _minutes(value)
    if name == "max_notebook_idle_minutes":
        return f"{value} min (also the default)"
    if name == "default_priority_class":
        return str(value.name)
    if isinstance(value, list):
        return ", ".join(value)
    return str(value)


_POLICY_LABELS = {
    "max_gpus_per_workload": "Max GPUs per workload", "max_runtime_seconds": "Max runtime",
    "default_runtime_seconds": "Default runtime", "allowed_images": "Allowed images",
    "allowed_priority_classes": "Allowed priority classes", "default_priority_class": "Default priority class",
    "max_notebook_idle_minutes": "Notebook idle limit", "required_labels": "Required labels",
    "pod_security": "Pod security (manifests)",
}


def policy_panel(*, projects: QuerySet[Project], source: Any, project: Project | None = None) -> PolicyPanel | None:
    """The effective policy of `project`, else of the project `source` names (else the first offered), each field
    with the scope that sets it. The merged policy is kept on the project object (`effective_policy`), so passing the
    project the submission check already used costs no query."""
    if project is None:
        project_id = parse_id(source.get("project"))
        project = (projects.filter(pk=project_id).first() if project_id else None) or projects.first()
    if project is None:
        return None
    effective = effective_policy(project)
    facts = [PolicyFact(name=name, label=label, value=_policy_value(name, effective.get(name)),
                        source=_capital(effective.source(name)))
             for name, label in _POLICY_LABELS.items()]
    return PolicyPanel(project=project, facts=facts)
