"""The showback/chargeback report: GPU-hours per department, project, user, pool or month in a window, within the
deserved quota and over it, beside the deserved hours, the cost and (with a Prometheus) the utilisation; and the one
table its page, its CSV and the API's CSV show."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.org.models import Department, NodePool, NodePoolPrice, Project
from apps.org.selectors import projects_for
from apps.workloads.models import OUTSIDE_THE_PORTAL

from ..models import DeservedPeriod, UtilisationHour
from .ledger import card_hours, deserved_unit_hours, in_force, over_hours, overlapping, slices_for, within_hours
from .window import Window, months_in


class Group(StrEnum):
    DEPARTMENT = "department"
    PROJECT = "project"
    USER = "user"
    POOL = "pool"
    MONTH = "month"


GROUP_LABELS = {Group.DEPARTMENT: "Department", Group.PROJECT: "Project", Group.USER: "User",
                Group.POOL: "Node pool", Group.MONTH: "Month"}
# The ledger column each group sums by (months are buckets of time, not a column).
GROUP_FIELD = {Group.DEPARTMENT: "department_id", Group.PROJECT: "project_id", Group.USER: "user_id",
               Group.POOL: "node_pool_id"}
# The same key on a deserved period, for the deserved figures (users have none).
PERIOD_GROUP_FIELD = {Group.DEPARTMENT: "department_id", Group.PROJECT: "project_id", Group.POOL: "node_pool_id"}


@dataclass(frozen=True)
class Filters:
    """Narrowing inside what the viewer may see; ids of rows the caller has already checked are visible."""

    department_id: int | None = None
    project_id: int | None = None
    user_id: int | None = None
    node_pool_id: int | None = None

    def ledger(self) -> dict[str, int]:
        return {name: value for name, value in (("department_id", self.department_id),
                                                  ("project_id", self.project_id), ("user_id", self.user_id),
                                                  ("node_pool_id", self.node_pool_id)) if value is not None}

    def periods(self) -> dict[str, int]:
        return {name: value for name, value in (("department_id", self.department_id),
                                                  ("project_id", self.project_id),
                                                  ("node_pool_id", self.node_pool_id)) if value is not None}


@dataclass
class ReportRow:
    group: Group
    key: Any  # the group's id (a month's start for months)
    slug: str  # project/department/pool slug, username, or YYYY-MM
    name: str
    gpu_hours: float = 0.0
    within_quota: float = 0.0
    borrowed: float = 0.0
    deserved: float | None = None
    cost: Decimal | None = None
    department_slug: str = ""  # for project rows
    measured_hours: float = 0.0  # card hours Prometheus sampled
    used_hours: float = 0.0  # of which busy (weighted by utilisation)
    idle_hours: float = 0.0  # of which below the idle threshold

    @property
    def utilisation(self) -> float | None:
        """Mean utilisation of the measured GPU-hours (0..1); None where nothing was measured."""
        return self.used_hours / self.measured_hours if self.measured_hours else None

    @property
    def ratio(self) -> float | None:
        """Used over deserved (1.0 = as much as was reserved); None without a deserved figure."""
        return self.gpu_hours / self.deserved if self.deserved else None

    @property
    def within_share(self) -> float:
        return self.within_quota / self.gpu_hours if self.gpu_hours else 0.0


@dataclass
class Report:
    group: Group
    window: Window
    now: datetime
    rows: list[ReportRow]
    total: ReportRow
    priced: bool  # some pool had a price in force in the window: the report is chargeback, with a cost column
    filters: Filters = field(default_factory=Filters)
    measured: bool = False  # a Prometheus is configured: utilisation columns

    @property
    def until(self) -> datetime:
        return self.window.until(self.now)

    @property
    def scale(self) -> float:
        """The largest bar of the chart (used or deserved), so bars share one scale."""
        return max([max(row.gpu_hours, row.deserved or 0.0) for row in self.rows] or [0.0]) or 1.0


def group_labels(group: Group, keys: set[Any]) -> dict[Any, tuple[str, str, str]]:
    """key -> (slug, name, department slug); one query."""
    if group == Group.PROJECT:
        return {pk: (slug, name, dept) for pk, slug, name, dept in Project.objects.filter(pk__in=keys).values_list(
            "pk", "slug", "name", "department__slug")}
    if group == Group.DEPARTMENT:
        return {pk: (slug, name, "") for pk, slug, name in Department.objects.filter(pk__in=keys).values_list(
            "pk", "slug", "name")}
    if group == Group.USER:
        users = get_user_model().objects.filter(pk__in=keys - {None}).values_list(
            "pk", "username", "first_name", "last_name")
        return {pk: (username, f"{first} {last}".strip() or username, "") for pk, username, first, last in users}
    return {}


def grouped_deserved(*, user: Actor, group: Group, buckets: list[Window], filters: Filters, now: datetime
                     ) -> QuerySet | None:
    """Deserved unit-hours per (group key, pool), one sum per bucket, over the visible projects' deserved periods
    in force during the buckets (from when each quota came into force, never before: see DeservedPeriod); None where
    there is no deserved figure (users, or a report narrowed to one user)."""
    if group == Group.USER or filters.user_id is not None:
        return None
    key_field = PERIOD_GROUP_FIELD.get(group)
    columns = [key_field] if key_field else []
    whole = Window(buckets[0].start, buckets[-1].end)
    periods = DeservedPeriod.objects.filter(project__in=projects_for(user, Action.VIEW), deserved__gt=0,
                                            **filters.periods()).filter(in_force(whole, now))
    return periods.values(*columns, "node_pool_id").annotate(**{
        f"b{index}": Sum(deserved_unit_hours(bucket, now), filter=in_force(bucket, now) if len(buckets) > 1
                         else None, default=0.0)
        for index, bucket in enumerate(buckets)}).order_by()


@dataclass(frozen=True)
class Priced:
    """A stretch of a bucket during which one price was in force on one pool."""

    window: Window
    price: Decimal


# (bucket index, pool id) -> the priced stretches of that bucket on that pool, in time order.
PriceStretches = dict[tuple[int, int], list[Priced]]


def priced_stretches(buckets: list[Window], now: datetime) -> PriceStretches:
    """Where a price was in force in each bucket, per pool, from the pools' price history (one query): each row holds
    from its `valid_from` until the pool's next row; a row without a price leaves its stretch unpriced."""
    history: dict[int, list[tuple[datetime, Decimal | None]]] = defaultdict(list)
    for pool_id, valid_from, price in NodePoolPrice.objects.order_by("node_pool_id", "valid_from").values_list(
            "node_pool_id", "valid_from", "price_per_card_hour"):
        history[pool_id].append((valid_from, price))
    stretches: PriceStretches = {}
    for pool_id, rows in history.items():
        for position, (since, price) in enumerate(rows):
            if price is None:
                continue
            until = rows[position + 1][0] if position + 1 < len(rows) else None
            for index, bucket in enumerate(buckets):
                start, end = max(bucket.start, since), bucket.until(now)
                end = end if until is None else min(end, until)
                if start < end:
                    stretches.setdefault((index, pool_id), []).append(Priced(Window(start, end), price))
    return stretches


def _one_price(stretches: list[Priced], bucket: Window, now: datetime) -> Decimal | None:
    """The price of the whole bucket when one price held all of it (the common case: no extra sums needed)."""
    if len(stretches) == 1 and stretches[0].window == Window(bucket.start, bucket.until(now)):
        return stretches[0].price
    return None


def grouped_ledger(*, user: Actor, group: Group, window: Window, filters: Filters, now: datetime,
                   priced: PriceStretches | None = None) -> tuple[QuerySet, list[Window]]:
    """The one aggregate query: within-deserved and over-quota card hours per (group key, pool), one pair of sums per
    bucket (the window, or each month of it), over the visible slices that overlap the window. Where a pool's price
    changed inside a bucket (`priced`), also its card hours in each priced stretch (`c<bucket>_<pool>_<n>`), so each
    part is priced at the price in force then."""
    buckets = months_in(window) if group == Group.MONTH else [window]
    keys = [GROUP_FIELD[group]] if group != Group.MONTH else []
    aggregates = {}
    for index, bucket in enumerate(buckets):
        # One bucket is the whole window, which the WHERE clause already selects: no FILTER (about a third faster).
        only = overlapping(bucket, now) if len(buckets) > 1 else None
        aggregates[f"w{index}"] = Sum(within_hours(bucket, now), filter=only, default=0.0)
        aggregates[f"o{index}"] = Sum(over_hours(bucket, now), filter=only, default=0.0)
    for (index, pool_id), stretches in (priced or {}).items():
        if _one_price(stretches, buckets[index], now) is None:
            for part, stretch in enumerate(stretches):
                aggregates[f"c{index}_{pool_id}_{part}"] = Sum(
                    card_hours(stretch.window, now), filter=Q(node_pool_id=pool_id) & overlapping(stretch.window, now),
                    default=0.0)
    ledger = slices_for(user).filter(**filters.ledger())
    return ledger.filter(overlapping(window, now)).values(*keys, "node_pool_id").annotate(
        **aggregates).order_by(), buckets


def utilisation_available() -> bool:
    return bool(settings.PROMETHEUS_URL)


def grouped_utilisation(*, user: Actor, group: Group, buckets: list[Window], filters: Filters, now: datetime
                        ) -> QuerySet:
    """Measured, busy and idle card hours per group key, one triple per bucket, over the visible hourly rows whose
    hour starts inside the buckets."""
    keys = [GROUP_FIELD[group]] if group != Group.MONTH else []
    whole = Window(buckets[0].start, buckets[-1].until(now))
    rows = access.restrict(UtilisationHour.objects.all(), user, Action.VIEW).filter(
        hour__gte=whole.start, hour__lt=whole.end, **filters.ledger())
    aggregates = {}
    for index, bucket in enumerate(buckets):
        only = Q(hour__gte=bucket.start, hour__lt=bucket.end) if len(buckets) > 1 else None
        aggregates[f"m{index}"] = Sum("observed_card_hours", filter=only, default=0.0)
        aggregates[f"u{index}"] = Sum("used_card_hours", filter=only, default=0.0)
        aggregates[f"i{index}"] = Sum("idle_card_hours", filter=only, default=0.0)
    return rows.values(*keys).annotate(**aggregates).order_by()


def usage_report(*, user: Actor, group: Group, window: Window, filters: Filters | None = None,
                 now: datetime | None = None) -> Report:
    """GPU-hours per group in the window, within deserved and over quota, beside deserved hours; a fixed number of
    queries.

    Queries: the ledger aggregate, the deserved periods' aggregate, the pools, their price history, (with a
    Prometheus) the utilisation aggregate, and (except for months) the group's names.
    """
    filters = filters or Filters()
    now = now or timezone.now()
    pools = {pool.pk: pool for pool in NodePool.objects.all()}
    buckets = months_in(window) if group == Group.MONTH else [window]
    priced = priced_stretches(buckets, now)
    grouped, buckets = grouped_ledger(user=user, group=group, window=window, filters=filters, now=now, priced=priced)
    keys = [GROUP_FIELD[group]] if group != Group.MONTH else []

    rows: dict[Any, ReportRow] = {}

    def row_for(key: Any) -> ReportRow:
        if key not in rows:
            rows[key] = ReportRow(group=group, key=key, slug="", name="")
        return rows[key]

    if group == Group.MONTH:
        for bucket in buckets:
            local = timezone.localtime(bucket.start)
            row = row_for(bucket.start)
            row.slug, row.name = f"{local:%Y-%m}", f"{local:%B %Y}"
    for entry in grouped:
        for index, bucket in enumerate(buckets):
            within, over = float(entry[f"w{index}"] or 0.0), float(entry[f"o{index}"] or 0.0)
            hours = within + over
            if not hours:
                continue
            row = row_for(bucket.start if group == Group.MONTH else entry[keys[0]])
            row.gpu_hours += hours
            row.within_quota += within
            row.borrowed += over
            cost = _cost(entry, index, bucket, hours, priced.get((index, entry["node_pool_id"])), now)
            if cost is not None:
                row.cost = (row.cost or Decimal(0)) + cost

    deserved = grouped_deserved(user=user, group=group, buckets=buckets, filters=filters, now=now)
    if deserved is not None:
        key_field = PERIOD_GROUP_FIELD.get(group)
        for entry in deserved:
            pool = pools[entry["node_pool_id"]]
            fraction = pool.card_fraction_numerator / pool.card_fraction_denominator
            for index, bucket in enumerate(buckets):
                unit_hours = float(entry[f"b{index}"] or 0.0)
                if not unit_hours and group == Group.MONTH:
                    continue
                row = row_for(bucket.start if group == Group.MONTH else entry[key_field] if key_field else None)
                row.deserved = (row.deserved or 0.0) + fraction * unit_hours
        for row in rows.values():
            if row.deserved is None:
                row.deserved = 0.0

    measured = utilisation_available()
    if measured:
        for entry in grouped_utilisation(user=user, group=group, buckets=buckets, filters=filters, now=now):
            for index, bucket in enumerate(buckets):
                observed = float(entry[f"m{index}"] or 0.0)
                if not observed:
                    continue
                row = row_for(bucket.start if group == Group.MONTH else entry[keys[0]])
                row.measured_hours += observed
                row.used_hours += float(entry[f"u{index}"] or 0.0)
                row.idle_hours += float(entry[f"i{index}"] or 0.0)

    if group == Group.POOL:
        for key, row in rows.items():
            row.slug, row.name = pools[key].slug, pools[key].name
    elif group != Group.MONTH:
        labels = group_labels(group, set(rows))
        for key, row in rows.items():
            row.slug, row.name, row.department_slug = labels.get(key, (str(key), str(key), ""))
        if group == Group.USER and None in rows:  # work from outside the portal attributed to no user
            rows[None].slug, rows[None].name = "", OUTSIDE_THE_PORTAL

    ordered = sorted(rows.values(), key=lambda r: r.key) if group == Group.MONTH else sorted(
        rows.values(), key=lambda r: (-r.gpu_hours, r.slug))
    total = ReportRow(group=group, key=None, slug="total", name="Total")
    for row in ordered:
        total.gpu_hours += row.gpu_hours
        total.within_quota += row.within_quota
        total.borrowed += row.borrowed
        if row.deserved is not None:
            total.deserved = (total.deserved or 0.0) + row.deserved
        if row.cost is not None:
            total.cost = (total.cost or Decimal(0)) + row.cost
        total.measured_hours += row.measured_hours
        total.used_hours += row.used_hours
        total.idle_hours += row.idle_hours
    return Report(group=group, window=window, now=now, rows=ordered, total=total, priced=bool(priced),
                  filters=filters, measured=measured)


def _cost(entry: dict[str, Any], index: int, bucket: Window, hours: float, stretches: list[Priced] | None,
          now: datetime) -> Decimal | None:
    """The cost of one (group key, pool) row's card hours in one bucket: each priced stretch's hours at its price;
    None when none of them were used while a price was in force."""
    if not stretches:
        return None
    whole = _one_price(stretches, bucket, now)
    if whole is not None:
        return Decimal(repr(hours)) * whole
    pool_id = entry["node_pool_id"]
    parts = [(float(entry[f"c{index}_{pool_id}_{part}"] or 0.0), stretch.price)
             for part, stretch in enumerate(stretches)]
    if not any(priced_hours for priced_hours, _ in parts):
        return None
    return sum((Decimal(repr(priced_hours)) * price for priced_hours, price in parts), Decimal(0))


@dataclass(frozen=True)
class ChartBar:
    """One row of the page's CSS bar chart, in percent of the largest figure (used or deserved) of the report."""

    row: ReportRow
    within: float
    borrowed: float
    deserved: float | None


def chart(report: Report) -> list[ChartBar]:
    """Bars for the page; anything above zero stays visible (at least 0.4 %) even beside a large deserved figure."""
    scale = report.scale

    def percent(value: float | None) -> float:
        return 0.0 if not value else min(max(value / scale * 100, 0.4), 100.0)

    return [ChartBar(row=row, within=percent(row.within_quota), borrowed=percent(row.borrowed),
                     deserved=percent(row.deserved) if row.deserved else None) for row in report.rows]


# --- one table for the page and the CSV -------------------------------------------------------------------------


def hours_text(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def cost_text(value: Decimal | None) -> str:
    return "" if value is None else f"{value.quantize(Decimal('0.01'))}"


def ratio_text(value: float | None) -> str:
    return "" if value is None else f"{value * 100:.1f}%"


def report_header(report: Report) -> list[str]:
    header = [GROUP_LABELS[report.group], "Name"]
    if report.group == Group.PROJECT:
        header.append("Department")
    header += ["GPU-hours", "Within deserved", "Over quota", "Deserved GPU-hours", "Used / deserved"]
    if report.measured:
        header += ["GPU utilisation", "Allocated but idle GPU-hours"]
    if report.priced:
        header.append(f"Cost ({settings.USAGE_CURRENCY})" if settings.USAGE_CURRENCY else "Cost")
    return header


def report_cells(report: Report, row: ReportRow) -> list[str]:
    cells = [row.slug, row.name]
    if report.group == Group.PROJECT:
        cells.append(row.department_slug)
    cells += [hours_text(row.gpu_hours), hours_text(row.within_quota), hours_text(row.borrowed),
              hours_text(row.deserved), ratio_text(row.ratio)]
    if report.measured:
        cells += [ratio_text(row.utilisation), hours_text(row.idle_hours if row.measured_hours else None)]
    if report.priced:
        cells.append(cost_text(row.cost))
    return cells


def report_table(report: Report) -> Iterator[list[str]]:
    """The header, then one list of cells per row: exactly what the page's table and the CSV show."""
    yield report_header(report)
    for row in report.rows:
        yield report_cells(report, row)

