"""Budgets against the GPU-hour ledger (docs/architecture.md, Budgets): what a budget's scope has spent in the
current period, how fast it burns, where it will end, and the sweep that notifies and holds.

- **Spent** counts as showback does: physical card hours (units x card fraction x hours) of the scope's ledger
  intervals clipped to the period, open ones up to now; for a cost budget each stretch at the pool's price in force
  then (unpriced stretches cost nothing).
- **Burn rate**: spent per day of the period so far.
- **Projected end of period**: spent, plus the work holding cards now running on until its forecast end or the
  period's, whichever comes first; priced at the price in force now. The forecast end is the start forecast's own
  expectation for work holding quota (apps.workloads.history.expected_runtime): the likely runtime of similar recent
  runs longer than it has run so far (capped by its maximum runtime), else its maximum runtime, else none (it runs to
  the period's end). Work not started yet is not counted: it has no cards.

The sweep (`budgets_evaluate`, every minute from beat, and for one budget right after it is created or changed)
records each crossed threshold once per period and notifies after commit; for `hold_preemptible` budgets it sets the
hold when spent reaches the amount and releases it when the scope is no longer over it (the period rolled over, or
the budget was raised enough). Its writes go through apps.org.services.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Role, RoleBinding
from apps.core.actors import Actor, Visitor
from apps.core.tasks import enqueue_on_commit
from apps.org import selectors as org_selectors
from apps.org import services as org_services
from apps.org.models import Budget, BudgetCrossing, NodePoolPrice, NotificationEvent, Project, budget_period
from apps.workloads.history import expected_runtime, runtime_samples, similar_work

from .models import UsageInterval
from .reports.ledger import card_hours, overlapping
from .reports.showback import Priced, priced_stretches
from .reports.window import SECONDS_PER_HOUR, Window

BUDGET_NOTIFY_TASK = "worker.tasks.budget_notify"
SECONDS_PER_DAY = 24 * SECONDS_PER_HOUR
# Who hears about a budget: those who look after the scope's spending.
NOTIFIED_ROLES = (Role.ADMIN, Role.DEPARTMENT_ADMIN, Role.TEAM_LEAD)


@dataclass(frozen=True)
class BudgetStatus:
    budget: Budget
    period: Window
    spent: Decimal
    burn_per_day: Decimal
    projected: Decimal

    @property
    def percent(self) -> float | None:
        return float(self.spent / self.budget.amount * 100) if self.budget.amount else None

    @property
    def projected_percent(self) -> float | None:
        return float(self.projected / self.budget.amount * 100) if self.budget.amount else None

    @property
    def exceeded(self) -> bool:
        return self.spent >= self.budget.amount

    @property
    def held(self) -> bool:
        return self.budget.on_exceed == Budget.OnExceed.HOLD_PREEMPTIBLE and self.budget.held_period_start is not None


def _decimal(value: float | None) -> Decimal:
    return Decimal(repr(float(value or 0.0))).quantize(Decimal("0.001"))


def _scopes(budgets: list[Budget]) -> Q:
    return Q(project_id__in=[b.project_id for b in budgets if b.project_id]) | Q(
        department_id__in=[b.department_id for b in budgets if not b.project_id])


def _prices_now(now: datetime) -> dict[int, Decimal | None]:
    prices: dict[int, Decimal | None] = {}
    for pool_id, price in NodePoolPrice.objects.filter(valid_from__lte=now).order_by(
            "node_pool_id", "valid_from").values_list("node_pool_id", "price_per_card_hour"):
        prices[pool_id] = price  # the latest row in force wins
    return prices


# (project id, department id) -> that pair's sums: "hours", and "s<n>" the card hours in each priced stretch.
Sums = dict[tuple[int, int], dict[str, float]]


def _period_sums(budgets: list[Budget], window: Window, now: datetime,
                 stretches: list[tuple[int, Priced]]) -> Sums:
    """One grouped query: the card hours of the scopes' intervals inside the period per project (with its
    department), and per priced stretch where a cost budget needs them."""
    aggregates = {"hours": Sum(card_hours(window, now), default=0.0)}
    aggregates |= {f"s{index}": Sum(card_hours(stretch.window, now), filter=Q(node_pool_id=pool_id) & overlapping(
        stretch.window, now), default=0.0) for index, (pool_id, stretch) in enumerate(stretches)}
    rows = UsageInterval.objects.filter(_scopes(budgets)).filter(overlapping(window, now)).order_by().values(
        "project_id", "department_id").annotate(**aggregates)
    names = list(aggregates)
    return {(row["project_id"], row["department_id"]): {name: row[name] for name in names}  # type: ignore[literal-required]
            for row in rows}


def _in_scope(budget: Budget, project_id: int, department_id: int) -> bool:
    return project_id == budget.project_id if budget.project_id else department_id == budget.department_id


def _spent(budget: Budget, sums: Sums, stretches: list[tuple[int, Priced]]) -> Decimal:
    mine = [row for (project_id, department_id), row in sums.items() if _in_scope(budget, project_id, department_id)]
    if budget.metric == Budget.Metric.GPU_HOURS:
        return _decimal(sum(row["hours"] or 0.0 for row in mine))
    total = sum((Decimal(repr(float(sum(row[f"s{index}"] or 0.0 for row in mine)))) * stretch.price
                 for index, (_, stretch) in enumerate(stretches)), Decimal(0))
    return total.quantize(Decimal("0.001"))


# units, card fraction numerator and denominator, pool id, started at, project id, department id, and its expected
# end (None: none known)
Running = tuple[int, int, int, int, datetime, int, int, datetime | None]


def _running(budgets: list[Budget], now: datetime) -> list[Running]:
    """The scopes' open ledger intervals, each with the end the start forecast expects of it: two queries, however
    much runs (the intervals with their workloads, and the recent runs of their projects, found by a subquery so the
    count stays the same when nothing runs)."""
    open_intervals = UsageInterval.objects.filter(_scopes(budgets), ended_at__isnull=True)
    rows = list(open_intervals.select_related("workload").only(
        "units", "card_fraction_numerator", "card_fraction_denominator", "node_pool_id", "started_at", "project_id",
        "department_id", "workload__max_runtime_seconds", "workload__project_id", "workload__kind", "workload__image"))
    samples = runtime_samples(now=now, project_ids=open_intervals.values("project_id"))
    running: list[Running] = []
    for row in rows:
        runtime = expected_runtime(max_runtime=row.workload.max_runtime_seconds,
                                   samples=samples.get(similar_work(row.workload), ()),
                                   elapsed=max(0.0, (now - row.started_at).total_seconds()))
        end = None if runtime is None else row.started_at + timedelta(seconds=runtime.likely)
        running.append((row.units, row.card_fraction_numerator, row.card_fraction_denominator, row.node_pool_id,
                        row.started_at, row.project_id, row.department_id, end))
    return running


def _still_to_come(budget: Budget, window: Window, now: datetime, prices: dict[int, Decimal | None],
                   running: list[Running]) -> Decimal:
    """What the scope's running work adds until its expected end or the period's."""
    total = Decimal(0)
    for units, numerator, denominator, pool_id, _, project_id, department_id, expected_end in running:
        if not _in_scope(budget, project_id, department_id):
            continue
        end = window.end if expected_end is None else min(window.end, expected_end)
        hours = Decimal(max(0.0, (end - now).total_seconds()) / SECONDS_PER_HOUR)
        cards = Decimal(units * numerator) / Decimal(denominator)
        if budget.metric == Budget.Metric.GPU_HOURS:
            total += cards * hours
        else:
            total += cards * hours * (prices.get(pool_id) or Decimal(0))
    return total.quantize(Decimal("0.001"))


def budget_statuses(budgets: list[Budget], *, now: datetime | None = None,
                    prices: dict[int, Decimal | None] | None = None) -> list[BudgetStatus]:
    """Spent, burn rate and projection of each budget's current period, in the order given, in a number of queries
    that does not grow with the budgets or the ledger (pages list every budget their viewer may see): the prices in
    force (unless given), the price history where a cost budget is among them, one grouped sum per kind of period
    (month, quarter), the running work, and the recent runs of its projects when any is running."""
    budgets = list(budgets)
    if not budgets:
        return []
    now = now or timezone.now()
    prices = _prices_now(now) if prices is None else prices
    windows = {period: Window(*budget_period(period, now)) for period in sorted({b.period for b in budgets})}
    priced = priced_stretches(list(windows.values()), now) if any(
        b.metric == Budget.Metric.COST for b in budgets) else {}
    stretches = {period: [(pool_id, stretch) for (index, pool_id), parts in priced.items()
                          if index == position for stretch in parts]
                 for position, period in enumerate(windows)}
    sums = {period: _period_sums([b for b in budgets if b.period == period], window, now, stretches[period])
            for period, window in windows.items()}
    running = _running(budgets, now)
    statuses = []
    for budget in budgets:
        window = windows[budget.period]
        spent = _spent(budget, sums[budget.period], stretches[budget.period])
        days = Decimal(max(window.hours(now), 1 / 60) / 24)
        statuses.append(BudgetStatus(
            budget=budget, period=window, spent=spent, burn_per_day=(spent / days).quantize(Decimal("0.001")),
            projected=spent + _still_to_come(budget, window, now, prices, running)))
    return statuses


def budget_status(budget: Budget, *, now: datetime | None = None,
                  prices: dict[int, Decimal | None] | None = None) -> BudgetStatus:
    """Spent, burn rate and projection of one budget's current period."""
    return budget_statuses([budget], now=now, prices=prices)[0]


def budget_statuses_for(user: Visitor | None, *, now: datetime | None = None) -> list[BudgetStatus]:
    """The figures of every budget the user may see (the quota, GPU-hours and budgets pages): their budgets in one
    query, then budget_statuses' fixed few."""
    return budget_statuses(list(org_selectors.budgets_for(user)), now=now)


def budget_watchers(budget: Budget) -> list[Actor]:
    """Those who look after the budget's scope: admins, department admins and team leads bound to the project or its
    department (directly or through a group); admins over everything when nobody is. Active users only."""
    department_id = budget.project.department_id if budget.project is not None else budget.department_id
    at_scope = Q(department_id=department_id) | (Q(project_id=budget.project_id) if budget.project_id else Q(
        pk__in=[]))
    bindings = RoleBinding.objects.filter(role__in=NOTIFIED_ROLES).filter(at_scope)
    if not bindings.exists():
        bindings = RoleBinding.objects.filter(role=Role.ADMIN, department__isnull=True, project__isnull=True)
    watchers: dict[int, Actor] = {}
    for binding in bindings.select_related("user", "group"):
        people = [binding.user] if binding.user is not None else list(binding.group.user_set.all()) \
            if binding.group is not None else []
        watchers.update({person.pk: person for person in people if person.is_active})
    return [watchers[pk] for pk in sorted(watchers)]


def budget_recipients(budget: Budget) -> list[str]:
    """E-mail addresses of the budget's watchers (`budget_watchers`)."""
    return sorted({person.email for person in budget_watchers(budget) if person.email})


def _crossing_channels_record(budget: Budget, crossing: BudgetCrossing) -> int:
    """`budget.threshold` for the channels of the budget's watchers and of its project (or of its department's
    projects, for a department's budget), once per crossing."""
    period = budget.period_text(crossing.period_start)
    spent = format(crossing.spent.normalize(), "f")
    project_ids = [budget.project_id] if budget.project_id else list(
        Project.objects.filter(department_id=budget.department_id or 0).values_list("pk", flat=True))
    return org_services.notifications_emit(
        event=NotificationEvent.BUDGET_THRESHOLD, key=f"budget-crossing:{crossing.pk}",
        summary=f"{budget.owner} has spent {spent} of its {budget.amount_text()} budget for {period}, crossing "
                f"{crossing.threshold}%.", link=f"{settings.PORTAL_BASE_URL}{reverse('usage:quota')}",
        user_ids=[person.pk for person in budget_watchers(budget)], project_ids=project_ids,
        obj={"type": "budget", "id": budget.pk, "project": budget.project_id, "department": budget.department_id,
             "period": budget.period, "period_start": crossing.period_start.isoformat(), "metric": budget.metric,
             "amount": format(budget.amount.normalize(), "f"), "spent": spent, "threshold": crossing.threshold,
             "on_exceed": budget.on_exceed})


def budgets_evaluate(*, now: datetime | None = None, budget_ids: list[int] | None = None) -> int:
    """The sweep: for every budget (or those of `budget_ids`, which a change to them asks for at once), record the
    thresholds its scope crossed this period (each once, notified after commit), and hold its preemptible work while
    it is exceeded, releasing the hold when it no longer is (the period rolled over, or the budget was raised above
    what was spent; a raise that is not enough keeps the hold without a gap). Idempotent; returns how many crossings
    it recorded."""
    now = now or timezone.now()
    prices = _prices_now(now)
    recorded = 0
    budgets = Budget.objects.select_related("department", "project__department").order_by("pk")
    if budget_ids is not None:
        budgets = budgets.filter(pk__in=budget_ids)
    for budget in budgets:
        status = budget_status(budget, now=now, prices=prices)
        start = status.period.start
        hold = budget.on_exceed == Budget.OnExceed.HOLD_PREEMPTIBLE and status.exceeded
        if budget.held_period_start is not None and not hold:
            org_services.budget_hold_release(budget=budget)
        percent = status.percent
        for threshold in budget.thresholds:
            reached = status.exceeded if percent is None else percent >= threshold
            if not reached:
                continue
            with transaction.atomic():  # the crossing and its channels' deliveries: both or neither
                crossing = org_services.budget_crossing_record(budget=budget, period_start=start,
                                                               threshold=threshold, spent=status.spent)
                if crossing is not None:
                    recorded += 1
                    enqueue_on_commit(BUDGET_NOTIFY_TASK, crossing.pk)
                    _crossing_channels_record(budget, crossing)
        if hold and budget.held_period_start != start:
            org_services.budget_hold_set(budget=budget, period_start=start)
    return recorded
