"""Reads of the organisation, always scoped through the access module."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from django.apps import apps
from django.conf import settings
from django.db.models import F, Model, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum

from apps.accounts import access
from apps.accounts.access import Action
from apps.cluster.models import CohortState
from apps.core.actors import Actor, Visitor
from apps.core.models import AuditEvent

from .models import (
    Budget,
    BudgetCrossing,
    DataSource,
    Department,
    ImagePullSecret,
    KueueSyncRun,
    KueueSyncState,
    NodePool,
    NodePoolPrice,
    NotificationChannel,
    NotificationDelivery,
    Policy,
    PriorityClass,
    Project,
    ProjectNamespace,
    Quota,
    ServingReservation,
)
from .policies import EffectivePolicy, merge

# The rows a visitor may see (none for the anonymous one): access.restrict's querysets, which API serializers ask for
# too, with the request's user as it comes.


def departments_for(user: Visitor | None, action: Action = Action.VIEW) -> QuerySet[Department]:
    return access.restrict(Department.objects.all(), user, action)


def projects_for(user: Visitor | None, action: Action = Action.VIEW) -> QuerySet[Project]:
    return access.restrict(Project.objects.all(), user, action)


def project_namespaces_for(user: Visitor | None) -> QuerySet[ProjectNamespace]:
    """The namespaces mapped to the projects the user may see."""
    return access.restrict(ProjectNamespace.objects.select_related("project"), user)


def quotas_for(user: Visitor | None, action: Action = Action.VIEW) -> QuerySet[Quota]:
    """Department quotas of visible departments and project quotas of visible projects."""
    return access.restrict(Quota.objects.all(), user, action)


def budgets_for(user: Visitor | None, action: Action = Action.VIEW) -> QuerySet[Budget]:
    """Budgets of the departments and projects the user may see (members of a project see its department's)."""
    return access.restrict(Budget.objects.all(), user, action).select_related("department", "project__department")


def policies_for(user: Visitor | None) -> QuerySet[Policy]:
    """The policies of the departments and projects the user may see, and the organisation's for everyone signed in
    (it applies to their work)."""
    scoped = access.restrict(Policy.objects.all(), user)
    if not access.can(user, Action.VIEW):
        return scoped.select_related("department", "project", "default_priority_class")
    organisation = Policy.objects.filter(department__isnull=True, project__isnull=True)
    return (scoped | organisation).select_related("department", "project", "default_priority_class")


# Where `effective_policy` keeps its answer for the rest of the request: an attribute of the project object.
_EFFECTIVE_POLICY_CACHE = "_portal_effective_policy"


def _scope_order(policy: Policy) -> int:
    return 2 if policy.project_id else 1 if policy.department_id else 0


def policies_above(*, department_id: int | None, project_id: int | None = None) -> list[Policy]:
    """The policies that apply to a scope, from the organisation's to the scope's own, in one query (the
    organisation's alone for `department_id` None)."""
    condition = Q(department__isnull=True, project__isnull=True)
    if department_id is not None:
        condition |= Q(department_id=department_id)
    if project_id is not None:
        condition |= Q(project_id=project_id)
    rows = Policy.objects.filter(condition).select_related("department", "project", "default_priority_class")
    return sorted(rows, key=_scope_order)


def effective_policy(project: Project) -> EffectivePolicy:
    """What applies to work in `project`: the organisation's, its department's and its own policy merged field by
    field, the nearest winning (one query, kept on the project object for the rest of the request)."""
    cached: EffectivePolicy | None = getattr(project, _EFFECTIVE_POLICY_CACHE, None)
    if cached is None:
        cached = merge(policies_above(department_id=project.department_id, project_id=project.pk),
                       pod_security=settings.MANIFEST_POD_SECURITY)
        setattr(project, _EFFECTIVE_POLICY_CACHE, cached)
    return cached


def budget_crossings(budget_ids: list[int]) -> dict[int, dict[datetime, list[int]]]:
    """Budget id -> period start -> the thresholds crossed in that period, rising; one query."""
    crossings: dict[int, dict[datetime, list[int]]] = {}
    for budget_id, period_start, threshold in BudgetCrossing.objects.filter(budget_id__in=budget_ids).order_by(
            "budget_id", "period_start", "threshold").values_list("budget_id", "period_start", "threshold"):
        crossings.setdefault(budget_id, {}).setdefault(period_start, []).append(threshold)
    return crossings


def notification_channels_for(user: Visitor | None) -> QuerySet[NotificationChannel]:
    """The channels the user sets up: their own, and those of the projects whose channels they manage (never another
    person's own channels, not even an admin's view: they are personal)."""
    if user is None or not user.is_authenticated:
        return NotificationChannel.objects.none()
    projects = access.restrict(NotificationChannel.objects.filter(project__isnull=False), user, Action.EDIT_WEIGHT)
    return (NotificationChannel.objects.filter(user=user) | projects).select_related("project__department", "user")


def notification_channels_listening(*, event: str, user_ids: Iterable[int] = (),
                                    project_ids: Iterable[int] = ()) -> list[NotificationChannel]:
    """The enabled channels of these users and projects that listen to `event`; one query (none without owners)."""
    return [channel for channel in notification_channels_of(user_ids=user_ids, project_ids=project_ids)
            if event in channel.events]


def notification_channels_of(*, user_ids: Iterable[int], project_ids: Iterable[int]) -> list[NotificationChannel]:
    """The enabled channels of these users and projects, whatever they listen to; one query (none without owners)."""
    users, projects = set(user_ids), set(project_ids)
    if not users and not projects:
        return []
    return list(NotificationChannel.objects.filter(Q(user_id__in=users) | Q(project_id__in=projects), enabled=True))


def notification_deliveries(channel: NotificationChannel, *, limit: int = 50) -> list[NotificationDelivery]:
    """The channel's delivery log, newest first."""
    return list(channel.deliveries.order_by("-created_at", "-id")[:limit])


def notification_last_deliveries(channel_ids: list[int]) -> dict[int, NotificationDelivery]:
    """Channel id -> its newest delivery, for the channels page's "last delivery" column; one query however many
    channels."""
    if not channel_ids:
        return {}
    newest = NotificationDelivery.objects.filter(channel_id=OuterRef("channel_id")).order_by("-created_at", "-id")
    rows = NotificationDelivery.objects.filter(channel_id__in=channel_ids, pk=Subquery(newest.values("pk")[:1]))
    return {delivery.channel_id: delivery for delivery in rows}


def holding_budgets() -> QuerySet[Budget]:
    """Exceeded `hold_preemptible` budgets holding their scope's new preemptible work now (the budget sweep sets and
    clears the hold; the Kueue sync and the wait explanation read it). Unscoped: the system's own question."""
    return Budget.objects.filter(on_exceed=Budget.OnExceed.HOLD_PREEMPTIBLE, held_period_start__isnull=False
                                 ).select_related("department", "project__department")


def budget_holds() -> tuple[set[int], set[int]]:
    """(ids of projects, ids of departments) whose budgets hold new preemptible work now; one query."""
    projects: set[int] = set()
    departments: set[int] = set()
    for project_id, department_id in holding_budgets().values_list("project_id", "department_id"):
        if project_id is not None:
            projects.add(project_id)
        if department_id is not None:
            departments.add(department_id)
    return projects, departments


def serving_reservations_for(user: Visitor | None) -> QuerySet[ServingReservation]:
    """Reservations of the projects the user sees."""
    return access.restrict(ServingReservation.objects.all(), user, Action.VIEW)


def departments_with_projects(user: Actor) -> list[tuple[Department, list[Project]]]:
    """The departments the user sees, each with the projects the user sees in it (two queries)."""
    rows = departments_for(user).prefetch_related(
        Prefetch("projects", queryset=projects_for(user), to_attr="visible_projects"))
    return [(department, department.visible_projects) for department in rows]


def audit_events_for(user: Visitor | None) -> QuerySet[AuditEvent]:
    """Audit rows of the departments and projects the user audits; installation-wide rows for global admins."""
    return access.restrict(AuditEvent.objects.all(), user, Action.VIEW_AUDIT)


@dataclass(frozen=True)
class AuditChange:
    """One field of an audit row as people read it: foreign keys by name, not id."""

    field: str
    before: Any
    after: Any


def _audited_models() -> dict[str, type[Model]]:
    """model_name -> model, as AuditEvent.object_type names them (a name two apps share is left unresolved)."""
    by_name: dict[str, list[type[Model]]] = {}
    for model in apps.get_models():
        by_name.setdefault(model._meta.model_name or "", []).append(model)
    return {name: models[0] for name, models in by_name.items() if len(models) == 1}


def _changed_keys(event: AuditEvent) -> list[str]:
    """The fields an update changed; every non-empty field of a create or delete (short rows)."""
    before, after = event.before or {}, event.after or {}
    keys = list(after) + [key for key in before if key not in after]
    if event.before is not None and event.after is not None:
        keys = [key for key in keys if before.get(key) != after.get(key)]
    else:
        state = after if event.after is not None else before
        keys = [key for key in keys if state.get(key) not in (None, "", [], {})]
    return [key for key in keys if key != "id"]


def _display_name(row: Model) -> str:
    name = getattr(row, "name", None)
    return name if isinstance(name, str) and name else str(row)


def audit_changes(events: list[AuditEvent]) -> list[AuditEvent]:
    """Sets `changes` (a list of AuditChange) on each event, foreign keys resolved to names at render time (the
    snapshot keeps ids, which stay true when a name changes later): one query per kind of row the page names,
    however many events; a row deleted since reads "#id (deleted)"."""
    models = _audited_models()
    wanted: dict[type[Model], set[Any]] = {}
    Plan = list[tuple[str, str, type[Model] | None]]  # (snapshot key, label, model its id names)
    plans: list[tuple[AuditEvent, Plan]] = []
    for event in events:
        fields = {f.attname: f for f in models[event.object_type]._meta.concrete_fields} \
            if event.object_type in models else {}
        plan: Plan = []
        for key in _changed_keys(event):
            model_field = fields.get(key)
            related = model_field.related_model if model_field is not None and model_field.is_relation else None
            if model_field is not None and isinstance(related, type) and issubclass(related, Model):
                plan.append((key, model_field.name, related))
                for state in (event.before, event.after):
                    if state and state.get(key) is not None:
                        wanted.setdefault(related, set()).add(state[key])
            else:
                plan.append((key, key, None))
        plans.append((event, plan))
    names = {model: {pk: _display_name(row) for pk, row in model._default_manager.in_bulk(ids).items()}
             for model, ids in wanted.items()}

    def shown(value: Any, related: type[Model] | None) -> Any:
        if related is None or value is None:
            return value
        return names[related].get(value, f"#{value} (deleted)")

    for event, plan in plans:
        before, after = event.before or {}, event.after or {}
        event.changes = [AuditChange(label, shown(before.get(key), related), shown(after.get(key), related))
                         for key, label, related in plan]
    return events


@dataclass
class ProjectRow:
    project: Project
    quotas: dict[int, Quota]  # node pool id -> quota


@dataclass
class DepartmentRow:
    department: Department
    quotas: dict[int, Quota]
    projects: list[ProjectRow] = field(default_factory=list)

    def projects_deserved(self, pool_id: int) -> int:
        return sum(row.quotas[pool_id].deserved for row in self.projects if pool_id in row.quotas)


def node_pools() -> QuerySet[NodePool]:
    return NodePool.objects.all()


def node_pools_with_prices() -> QuerySet[NodePool]:
    """Pools with their price history (`pool.prices.all()`, oldest first, who set each price): two queries."""
    return NodePool.objects.prefetch_related(Prefetch("prices", queryset=NodePoolPrice.objects.select_related(
        "set_by").order_by("valid_from")))


def priority_classes() -> QuerySet[PriorityClass]:
    """Every priority class (everyone signed in may read them: they are what a submission picks from)."""
    return PriorityClass.objects.all()


def weight_projects(user: Actor) -> QuerySet[Project]:
    """The projects whose weights and default priority class the user may change, with their quotas' pools."""
    return projects_for(user, Action.EDIT_WEIGHT).select_related(
        "department", "default_priority_class"
    ).prefetch_related(Prefetch("quotas", queryset=Quota.objects.select_related("node_pool"))).order_by(
        "department__name", "name"
    )


def org_tree(*, user: Actor) -> tuple[list[NodePool], list[DepartmentRow]]:
    """Departments and projects the user may see, with their quotas per pool; a fixed number of queries."""
    pools = list(node_pools())
    visible_projects = projects_for(user, Action.VIEW).select_related("default_priority_class").prefetch_related(
        Prefetch("quotas", queryset=Quota.objects.select_related("node_pool"))
    )
    departments = departments_for(user, Action.VIEW).prefetch_related(
        Prefetch("quotas", queryset=Quota.objects.select_related("node_pool")),
        Prefetch("projects", queryset=visible_projects, to_attr="visible_projects"),
    )
    rows = []
    for department in departments:
        row = DepartmentRow(department=department, quotas={q.node_pool_id: q for q in department.quotas.all()})
        row.projects = [
            ProjectRow(project=project, quotas={q.node_pool_id: q for q in project.quotas.all()})
            for project in cast("list[Project]", department.visible_projects)  # the plugin reads the base class
        ]
        rows.append(row)
    return pools, rows


@dataclass
class QuotaTableData:
    """What the quota table of one department shows: every pool, the department's quota and each project's per
    pool, and what the other departments hold per pool (for the pool capacity rule)."""

    pools: list[NodePool]
    department_quotas: dict[int, Quota]  # node pool id -> quota
    projects: list[ProjectRow]
    other_departments_deserved: dict[int, int]  # node pool id -> deserved units


def department_quota_table(*, department: Department) -> QuotaTableData:
    """The editable quota table's rows (the caller has checked the user may manage the department's projects)."""
    projects = department.projects.order_by("name").prefetch_related(Prefetch("quotas", queryset=Quota.objects.all()))
    return QuotaTableData(
        pools=list(node_pools()),
        department_quotas={q.node_pool_id: q for q in department.quotas.all()},
        projects=[ProjectRow(project=project, quotas={q.node_pool_id: q for q in project.quotas.all()})
                  for project in projects],
        other_departments_deserved={
            row["node_pool"]: row["total"]
            for row in Quota.objects.filter(department__isnull=False).exclude(department=department)
            .values("node_pool").annotate(total=Sum("deserved"))
        },
    )


def department_quotas(*, user: Actor, department: Department) -> QuerySet[Quota]:
    """The quotas of a department and of its projects that the user may see, department first, then by project."""
    return quotas_for(user).filter(Q(department=department) | Q(project__department=department)).select_related(
        "node_pool", "department", "project"
    ).order_by(F("project__name").asc(nulls_first=True), "node_pool__slug")


def kueue_sync_status(*, limit: int = 50) -> dict[str, Any]:
    """The reconcile's state and its latest runs, for admins."""

    state = KueueSyncState.objects.filter(pk=1).first()
    runs = list(KueueSyncRun.objects.all()[:limit])
    last_ok = next((run for run in runs if run.ok), None)
    return {"state": state, "runs": runs, "last_ok": last_ok, "last": runs[0] if runs else None}


KUEUE_MAX_SHARE = 2**63 - 1  # what Kueue reports for a borrowing cohort of weight 0


@dataclass(frozen=True)
class WeightedShare:
    """Kueue's weighted share of a project cohort on one pool, in per mille (‰): the GPUs the cohort borrows above
    its deserved quota as ‰ of what the pool's cohort tree can lend (the dominant resource: queues cover only the
    pool's GPU resource), divided by the weight and rounded up. The borrowed ‰ does not depend on the weight, so
    the share at another weight follows from the observed one."""

    pool: NodePool
    share: int | None  # as Kueue reported it (None: not observed yet)
    observed_weight: Decimal  # the weight Kueue computed it with
    weight: Decimal  # the weight the portal has now

    @property
    def borrowed_per_mille(self) -> int | None:
        """Borrowed ‰ of the lendable capacity (at most the observed share x weight: Kueue rounds the share up)."""
        if self.share is None or self.share >= KUEUE_MAX_SHARE:
            return None
        return int(self.share * self.observed_weight)

    @property
    def expected(self) -> int | None:
        """The share Kueue will report at `weight` once it has the new weight (None: unchanged or unknown)."""
        if self.share is None or self.weight == self.observed_weight:
            return None
        if self.share == 0:
            return 0
        borrowed = self.borrowed_per_mille
        if borrowed is None:  # borrowing at weight 0: the per-mille figure is not reported
            return None
        return KUEUE_MAX_SHARE if self.weight == 0 else math.ceil(borrowed / self.weight)


def project_weighted_shares(*, project_ids: list[int]) -> dict[tuple[int, int], int | None]:
    """(project id, pool id) -> the fair-sharing weighted share Kueue reports on the project's Cohort
    (`proj-<slug>-<pool>`), as the watcher mirrored it; one query."""
    return {(project_id, pool_id): share for project_id, pool_id, share in CohortState.objects.filter(
        project_id__in=project_ids, node_pool__isnull=False).values_list("project_id", "node_pool_id",
                                                                          "weighted_share")}


def data_projects_for(user: Actor) -> QuerySet[Project]:
    """Projects whose data sources and pull secrets the user manages (admins, department admins)."""
    return projects_for(user, Action.MANAGE_PROJECTS).select_related("department").order_by("department__name",
                                                                                            "name")


def data_sources_for(user: Actor) -> QuerySet[DataSource]:
    return DataSource.objects.filter(project__in=data_projects_for(user)).select_related("project")


def data_sources_visible(user: Actor) -> QuerySet[DataSource]:
    """Data sources the user may see: those of the projects they manage (the Data page) and of the projects they
    may submit to (the submit form offers them), by project then name."""
    return DataSource.objects.filter(
        Q(project__in=projects_for(user, Action.SUBMIT).values("pk"))
        | Q(project__in=projects_for(user, Action.MANAGE_PROJECTS).values("pk"))
    ).select_related("project").order_by("project__slug", "name", "pk")


def pull_secrets_for(user: Actor) -> QuerySet[ImagePullSecret]:
    """Registry, user name and state only: the password is never read back (it is not kept once written)."""
    return ImagePullSecret.objects.filter(project__in=data_projects_for(user), deleted_at=None).select_related(
        "project").defer("sealed")
