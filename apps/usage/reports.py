"""GPU-hour reports over the usage ledger: reads only, always scoped through apps.accounts.access.

Definitions (issue 6, DESIGN section 4):

- **GPU-hours are physical card hours**: units x card fraction x hours. The fraction is the one copied onto each
  interval when it opened (a 3g.40gb MIG slice is 3/7 of a card, one of 8 time-sliced replicas 1/8), so later edits
  of a pool never rewrite history. Allocation, not utilisation: a held card counts whether or not it was busy.
- **The window is [start, end)**. Every interval is clipped to it; an open interval counts up to `now`, and the
  window itself ends at `now` when it reaches into the future.
- **Within deserved vs over quota** follows the organisation's quota, not the ClusterQueue a workload ran in: at each
  moment a project's held units H(t) on a pool (guaranteed and elastic queues together) are within deserved up to
  its deserved quota D(t) and over quota above it; non-preemptible work fills deserved first, preemptible work shares
  the rest of it in proportion to units (apps/usage/split.py has the rule and why). A preemptible job inside its
  project's deserved quota is not borrowing. The split is precomputed by the ledger writers as UsageSlice rows
  (stretches of an interval with a constant within-deserved share), so reports stay one aggregate query; within
  plus over quota is every interval's GPU-hours, and per-user, per-workload, per-project, per-department and
  per-pool rows add up to one another.
- **Deserved at each moment** comes from DeservedPeriod rows: written whenever a project quota changes (inside the
  quota change's transaction), so a change counts from then on and closed months keep the quota they had. Quotas set
  before the periods existed count from the beginning with the value they had then (the migration backfilled the
  quota rows of that day; older history is only in the audit log, AuditEvent rows `quota.*`).
- **Deserved GPU-hours** = deserved units x the pool's card fraction x the hours of the window (up to now) each
  quota was in force, summed over the *project* quotas in the group: within-deserved usage draws from exactly that (a
  department's deserved units not handed to a project are only lent, never used directly). There is no deserved
  figure per user, nor when the report is narrowed to one user.
- **Utilisation** (with a Prometheus, `PROMETHEUS_URL`): the mean GPU utilisation of the allocated GPU-hours that
  were measured (used card hours / measured card hours) and the "allocated but idle" GPU-hours, measured below the
  idle policy's threshold, from the hourly UtilisationHour rows the worker adds up from Prometheus' samples (one
  more aggregate query; hours whose start lies in the window count). Without a Prometheus both are absent and the
  page says why.
- **Cost** (chargeback) = GPU-hours x the pool's current `price_per_card_hour`, summed over priced pools; None when
  none of the group's usage is on a priced pool. Unpriced pools add nothing to the cost.

The arithmetic runs in the database: one aggregate query over the slices, grouped by (group key, pool), with each
slice clipped by Greatest/Least, its duration turned into seconds (works on PostgreSQL and SQLite) and weighted by
its within-deserved share; one more over the deserved periods. The grouped rows (groups x pools at most) are folded
into report rows in Python; the number of queries does not depend on the number of intervals, projects or users.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import (
    DateTimeField,
    DurationField,
    Expression,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, Greatest, Least
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from apps.accounts import access
from apps.accounts.access import Action
from apps.org.models import Department, NodePool, Project
from apps.org.selectors import projects_for
from apps.workloads.selectors import workloads_for

from .models import DeservedPeriod, UsageInterval, UsageSlice, UtilisationHour

MAX_SPAN = timedelta(days=400)
# The days a report's window may touch: a month inside what datetime can hold at either end, so month arithmetic
# (next_month) and time-zone shifts never overflow into a 500.
FIRST_DAY, LAST_DAY = date(1, 2, 1), date(9999, 11, 30)
OUT_OF_RANGE = f"Pick a day from {FIRST_DAY.isoformat()} to {LAST_DAY.isoformat()}."


def day_in_range(day: date) -> bool:
    return FIRST_DAY <= day <= LAST_DAY
SECONDS_PER_HOUR = 3600


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


# --- the window ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The report period [start, end), both aware."""

    start: datetime
    end: datetime

    def until(self, now: datetime) -> datetime:
        """Where counting stops: the end, or now when the window reaches into the future."""
        return max(self.start, min(self.end, now))

    def hours(self, now: datetime) -> float:
        return (self.until(now) - self.start).total_seconds() / SECONDS_PER_HOUR


def _as_moment(value: str, name: str) -> datetime:
    value = (value or "").strip()
    if not value:
        raise ValidationError({name: f"Give {name} as an ISO date (2026-03-01) or date-time (2026-03-01T08:00Z)."})
    try:
        moment = parse_datetime(value)
        if moment is None:
            day = parse_date(value)
            moment = None if day is None else datetime.combine(day, time.min)
    except ValueError:
        moment = None
    if moment is None:
        raise ValidationError({name: f"{value!r} is not an ISO date (2026-03-01) or date-time (2026-03-01T08:00Z)."})
    if not day_in_range(moment.date()):
        raise ValidationError({name: OUT_OF_RANGE})
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


def window_from(start: str, end: str) -> Window:
    """Parse and check a window from ISO dates or date-times (naive ones are in the portal's time zone)."""
    window = Window(_as_moment(start, "start"), _as_moment(end, "end"))
    if window.end <= window.start:
        raise ValidationError({"end": "The end must be after the start."})
    if window.end - window.start > MAX_SPAN:
        raise ValidationError({"end": f"A report spans at most {MAX_SPAN.days} days; choose a shorter period."})
    return window


def month_start(day: date | datetime) -> datetime:
    return datetime(day.year, day.month, 1, tzinfo=timezone.get_current_timezone())


def next_month(moment: datetime) -> datetime:
    local = timezone.localtime(moment)
    year, month = (local.year + 1, 1) if local.month == 12 else (local.year, local.month + 1)
    return datetime(year, month, 1, tzinfo=timezone.get_current_timezone())


def month_window(year: int, month: int) -> Window:
    start = datetime(year, month, 1, tzinfo=timezone.get_current_timezone())
    return Window(start, next_month(start))


def months_in(window: Window) -> list[Window]:
    """The calendar months the window touches, each clipped to it."""
    months = []
    cursor = month_start(timezone.localtime(window.start))
    while cursor < window.end:
        following = next_month(cursor)
        months.append(Window(max(cursor, window.start), min(following, window.end)))
        cursor = following
    return months


# --- the arithmetic -----------------------------------------------------------------------------------------------


class DurationSeconds(Func):
    """Seconds of a duration (an ExpressionWrapper of one timestamp minus another, output DurationField).

    PostgreSQL subtracts the timestamps to an interval and takes its epoch. On SQLite Django would call its Python
    function django_timestamp_diff once per row (microseconds); julianday() is native and ~5x faster, with a
    resolution far below a second; any other duration falls back to Django's microseconds.
    """

    output_field = FloatField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="EXTRACT(EPOCH FROM %(expressions)s)::double precision",
                           **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        duration = self.source_expressions[0]
        subtraction = getattr(duration, "expression", duration)
        if (getattr(subtraction, "connector", None) == "-" and hasattr(subtraction, "lhs")
                and hasattr(subtraction, "rhs")):
            lhs_sql, lhs_params = compiler.compile(subtraction.lhs)
            rhs_sql, rhs_params = compiler.compile(subtraction.rhs)
            return f"((julianday({lhs_sql}) - julianday({rhs_sql})) * 86400.0)", (*lhs_params, *rhs_params)
        return self.as_sql(compiler, connection, template="(%(expressions)s) / 1000000.0", **extra)


def _moment(value: datetime) -> Value:
    return Value(value, output_field=DateTimeField())


def overlapping(window: Window, now: datetime) -> Q:
    """Intervals that held quota for some time inside the window (open ones up to now)."""
    until = window.until(now)
    return Q(started_at__lt=until) & (Q(ended_at__isnull=True) | Q(ended_at__gt=window.start))


def card_hours(window: Window, now: datetime) -> Expression:
    """Physical card hours of one interval inside the window: clipped seconds x units x card fraction / 3600."""
    until = window.until(now)
    held = ExpressionWrapper(
        Least(Coalesce("ended_at", _moment(until)), _moment(until)) - Greatest("started_at", _moment(window.start)),
        output_field=DurationField(),
    )
    return ExpressionWrapper(
        DurationSeconds(held) * F("units") * F("card_fraction_numerator") / F("card_fraction_denominator")
        / Value(float(SECONDS_PER_HOUR)),
        output_field=FloatField(),
    )


def _clipped_seconds(window: Window, now: datetime) -> Expression:
    until = window.until(now)
    return DurationSeconds(ExpressionWrapper(
        Least(Coalesce("ended_at", _moment(until)), _moment(until)) - Greatest("started_at", _moment(window.start)),
        output_field=DurationField(),
    ))


def within_hours(window: Window, now: datetime) -> Expression:
    """Within-deserved card hours of one slice inside the window: its card hours x its share."""
    return ExpressionWrapper(card_hours(window, now) * F("share_numerator") / F("share_denominator"),
                             output_field=FloatField())


def over_hours(window: Window, now: datetime) -> Expression:
    """Over-quota card hours of one slice inside the window: its card hours x (1 - its share)."""
    return ExpressionWrapper(card_hours(window, now) * (F("share_denominator") - F("share_numerator"))
                             / F("share_denominator"), output_field=FloatField())


def deserved_unit_hours(window: Window, now: datetime) -> Expression:
    """Deserved units x hours of one deserved period inside the window (the pool's card fraction comes after)."""
    return ExpressionWrapper(_clipped_seconds(window, now) * F("deserved") / Value(float(SECONDS_PER_HOUR)),
                             output_field=FloatField())


# --- scope -----------------------------------------------------------------------------------------------------


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


def visible_users(user: Any) -> QuerySet:
    """People who own workloads the viewer may see (the user filter's choices)."""
    return get_user_model().objects.filter(pk__in=workloads_for(user).values("owner_id")).order_by("username")


def intervals_for(user: Any) -> QuerySet[UsageInterval]:
    """Ledger rows of the projects the user may see (researchers: their projects; department admins: theirs)."""
    return access.restrict(UsageInterval.objects.all(), user, Action.VIEW)


def slices_for(user: Any) -> QuerySet[UsageSlice]:
    """The within-deserved slices of the ledger rows the user may see."""
    return access.restrict(UsageSlice.objects.all(), user, Action.VIEW)


# --- the report ----------------------------------------------------------------------------------------------


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
    priced: bool  # some pool has a price: the report is chargeback, with a cost column
    filters: Filters = field(default_factory=Filters)
    measured: bool = False  # a Prometheus is configured: utilisation columns

    @property
    def until(self) -> datetime:
        return self.window.until(self.now)

    @property
    def scale(self) -> float:
        """The largest bar of the chart (used or deserved), so bars share one scale."""
        return max([max(row.gpu_hours, row.deserved or 0.0) for row in self.rows] or [0.0]) or 1.0


def _labels(group: Group, keys: set[Any]) -> dict[Any, tuple[str, str, str]]:
    """key -> (slug, name, department slug); one query."""
    if group == Group.PROJECT:
        return {pk: (slug, name, dept) for pk, slug, name, dept in Project.objects.filter(pk__in=keys).values_list(
            "pk", "slug", "name", "department__slug")}
    if group == Group.DEPARTMENT:
        return {pk: (slug, name, "") for pk, slug, name in Department.objects.filter(pk__in=keys).values_list(
            "pk", "slug", "name")}
    if group == Group.USER:
        users = get_user_model().objects.filter(pk__in=keys).values_list("pk", "username", "first_name", "last_name")
        return {pk: (username, f"{first} {last}".strip() or username, "") for pk, username, first, last in users}
    return {}


def grouped_deserved(*, user: Any, group: Group, buckets: list[Window], filters: Filters, now: datetime
                     ) -> QuerySet | None:
    """Deserved unit-hours per (group key, pool), one sum per bucket, over the visible projects' deserved periods
    that overlap the buckets; None where there is no deserved figure (users, or a report narrowed to one user)."""
    if group == Group.USER or filters.user_id is not None:
        return None
    key_field = PERIOD_GROUP_FIELD.get(group)
    columns = [key_field] if key_field else []
    whole = Window(buckets[0].start, buckets[-1].end)
    periods = DeservedPeriod.objects.filter(project__in=projects_for(user, Action.VIEW), deserved__gt=0,
                                            **filters.periods()).filter(overlapping(whole, now))
    return periods.values(*columns, "node_pool_id").annotate(**{
        f"b{index}": Sum(deserved_unit_hours(bucket, now), filter=overlapping(bucket, now) if len(buckets) > 1
                         else None, default=0.0)
        for index, bucket in enumerate(buckets)}).order_by()


def grouped_ledger(*, user: Any, group: Group, window: Window, filters: Filters, now: datetime
                   ) -> tuple[QuerySet, list[Window]]:
    """The one aggregate query: within-deserved and over-quota card hours per (group key, pool), one pair of sums per
    bucket (the window, or each month of it), over the visible slices that overlap the window."""
    buckets = months_in(window) if group == Group.MONTH else [window]
    keys = [GROUP_FIELD[group]] if group != Group.MONTH else []
    aggregates = {}
    for index, bucket in enumerate(buckets):
        # One bucket is the whole window, which the WHERE clause already selects: no FILTER (about a third faster).
        only = overlapping(bucket, now) if len(buckets) > 1 else None
        aggregates[f"w{index}"] = Sum(within_hours(bucket, now), filter=only, default=0.0)
        aggregates[f"o{index}"] = Sum(over_hours(bucket, now), filter=only, default=0.0)
    ledger = slices_for(user).filter(**filters.ledger())
    return ledger.filter(overlapping(window, now)).values(*keys, "node_pool_id").annotate(
        **aggregates).order_by(), buckets


def utilisation_available() -> bool:
    return bool(settings.PROMETHEUS_URL)


def grouped_utilisation(*, user: Any, group: Group, buckets: list[Window], filters: Filters, now: datetime
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


def usage_report(*, user: Any, group: Group, window: Window, filters: Filters | None = None,
                 now: datetime | None = None) -> Report:
    """GPU-hours per group in the window, within deserved and over quota, beside deserved hours; a fixed number of
    queries.

    Queries: the ledger aggregate, the deserved periods' aggregate, the pools, (with a Prometheus) the utilisation
    aggregate, and (except for months) the group's names.
    """
    filters = filters or Filters()
    now = now or timezone.now()
    pools = {pool.pk: pool for pool in NodePool.objects.all()}
    grouped, buckets = grouped_ledger(user=user, group=group, window=window, filters=filters, now=now)
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
            price = pools[entry["node_pool_id"]].price_per_card_hour
            if price is not None:
                row.cost = (row.cost or Decimal(0)) + Decimal(repr(hours)) * price

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
        labels = _labels(group, set(rows))
        for key, row in rows.items():
            row.slug, row.name, row.department_slug = labels.get(key, (str(key), str(key), ""))

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
    priced = any(pool.price_per_card_hour is not None for pool in pools.values())
    return Report(group=group, window=window, now=now, rows=ordered, total=total, priced=priced, filters=filters,
                  measured=measured)


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
        header.append("Cost")
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


# --- who held the cards -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HolderFilters:
    node_pool_id: int | None = None
    project_id: int | None = None
    user_id: int | None = None
    model_label: str = ""
    data_class: str = ""


def holders(*, user: Any, window: Window, filters: HolderFilters, now: datetime | None = None
            ) -> QuerySet[UsageInterval]:
    """Intervals that held cards of the pool inside the window, oldest first, each with its card hours in the
    window (`held_hours`) and of which within the project's deserved quota (`within_hours`, from its slices; one
    correlated subquery, evaluated once per row). held_split() gives within and over quota, which add up to it."""
    now = now or timezone.now()
    within = UsageSlice.objects.filter(interval_id=OuterRef("pk")).filter(overlapping(window, now)).order_by().values(
        "interval_id").annotate(hours=Sum(within_hours(window, now))).values("hours")
    queryset = intervals_for(user).filter(overlapping(window, now))
    if filters.node_pool_id is not None:
        queryset = queryset.filter(node_pool_id=filters.node_pool_id)
    if filters.project_id is not None:
        queryset = queryset.filter(project_id=filters.project_id)
    if filters.user_id is not None:
        queryset = queryset.filter(user_id=filters.user_id)
    if filters.model_label:
        queryset = queryset.filter(model_label__iexact=filters.model_label)
    if filters.data_class:
        queryset = queryset.filter(data_class__iexact=filters.data_class)
    return queryset.annotate(held_hours=card_hours(window, now),
                             within_hours=Coalesce(Subquery(within, output_field=FloatField()), Value(0.0)),
                             ).order_by("started_at", "id")


def held_split(held: float | None, within: float | None) -> tuple[float, float]:
    """(within deserved, over quota) card hours of a holders() row: within is never above the held hours (the
    slices' float sum may differ in the last bits), over is the rest, so the two add up to the held hours exactly."""
    held = float(held or 0.0)
    within = min(max(float(within or 0.0), 0.0), held)
    return within, held - within


HOLDER_COLUMNS = [
    "Interval", "Workload", "Workload name", "Department", "Project", "User", "Node pool", "Units", "Card fraction",
    "Queue", "Model", "Data class", "Started", "Ended", "End reason", "GPU-hours in window", "Within deserved",
    "Over quota",
]


def _iso(moment: datetime | None) -> str:
    """UTC, unambiguous for auditors whatever the portal's time zone (and cheap for 100,000s of rows)."""
    return "" if moment is None else moment.astimezone(UTC).isoformat()


def holder_rows(queryset: QuerySet[UsageInterval]) -> Iterator[list[str]]:
    """CSV cells of each interval; reads the rows in chunks (values, no model instances)."""
    columns = ("pk", "workload_id", "workload__name", "department__slug", "project__slug", "user__username",
               "node_pool__slug", "units", "card_fraction_numerator", "card_fraction_denominator", "queue",
               "model_label", "data_class", "started_at", "ended_at", "end_reason", "held_hours", "within_hours")
    for (pk, workload_id, workload_name, department, project, username, pool, units, numerator, denominator, queue,
         model_label, data_class, started_at, ended_at, end_reason, held, within) in queryset.values_list(
            *columns).iterator(chunk_size=5000):
        inside, over = held_split(held, within)
        yield [str(pk), str(workload_id), workload_name, department, project, username, pool, str(units),
               f"{numerator}/{denominator}", queue, model_label, data_class, _iso(started_at), _iso(ended_at),
               end_reason, hours_text(float(held or 0.0)), hours_text(inside), hours_text(over)]


@dataclass
class TimelineBar:
    interval: UsageInterval
    left: float  # percent of the window
    width: float
    open: bool
    within: float = 0.0  # card hours in the window within the project's deserved quota
    over: float = 0.0  # and over it


def timeline(intervals: list[UsageInterval], window: Window, now: datetime) -> list[TimelineBar]:
    """Bars positioned by percentage of the window (for the page's one page of rows)."""
    until = window.until(now)
    span = (until - window.start).total_seconds() or 1.0
    bars = []
    for interval in intervals:
        begin = max(interval.started_at, window.start)
        finish = min(interval.ended_at or until, until)
        left = (begin - window.start).total_seconds() / span * 100
        width = max((finish - begin).total_seconds() / span * 100, 0.3)
        within, over = held_split(getattr(interval, "held_hours", None), getattr(interval, "within_hours", None))
        bars.append(TimelineBar(interval=interval, left=round(left, 3), width=round(min(width, 100 - left), 3),
                                open=interval.ended_at is None, within=within, over=over))
    return bars
