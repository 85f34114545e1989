"""Use over time: per pool and per day or hour of a window, the cards held (allocated, and of which within deserved),
the cards deserved, and (with a Prometheus) the cards busy, the utilisation and the held-but-idle hours; beside the
window's top consumers. The organisation's dashboard, or one department's, scoped to what the viewer may see.

The numbers are the ledger's: each bucket's card hours are those of the slices inside it, so the buckets of a pool add
up to the showback report's GPU-hours on that pool (apps.usage.reports.showback). A slice spans many buckets, so the
database does not sum per bucket (one column per bucket would be thousands of columns for a quarter by hour): it sums
the *changes* of the held rate instead. Each slice adds its rate (units x card fraction, and x its within-deserved
share) where it starts and takes it away where it ends, so one GROUP BY over the truncated start and one over the
truncated end give, per bucket, the sum of the rate changes and the sum of rate x moment; a walk over the buckets
(not over the slices) turns them into card-seconds per bucket exactly. Deserved periods are walked the same way.
Fixed number of queries whatever the size of the ledger; Python work grows with buckets x pools only.

By day, the days before the one holding now are read from UsageDay (closed card-seconds and measured use per project,
pool and day, kept by the ledger's writers) instead: a row per project and day rather than a year of slices, with the
open slices, the closed ones reaching past that day and the hours after it summed live as above (bench/README.md).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from django.db.models import (
    Case,
    DateTimeField,
    DurationField,
    Expression,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Greatest, Least, Trunc
from django.utils import timezone

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.org.models import NodePool
from apps.org.selectors import projects_for

from ..models import DeservedPeriod, UsageDay, UtilisationHour
from .ledger import DurationSeconds, in_force, overlapping, slices_for
from .showback import (
    Filters,
    Group,
    ReportRow,
    group_labels,
    grouped_deserved,
    usage_report,
    utilisation_available,
)
from .window import SECONDS_PER_HOUR, Window


class Granularity(StrEnum):
    DAY = "day"
    HOUR = "hour"


# At most this many buckets per series: 400 days by day, or 92 days by hour.
MAX_BUCKETS = 2208
TOP_CONSUMERS = 10


def bucket_starts(window: Window, granularity: Granularity) -> list[datetime]:
    """The buckets' starts: local midnights (a day can be 23 or 25 hours long), or whole UTC hours."""
    starts, cursor = [], window.start
    while cursor < window.end:
        starts.append(cursor)
        if granularity == Granularity.HOUR:
            cursor = cursor + timedelta(hours=1)
        else:
            day = timezone.localtime(cursor).date() + timedelta(days=1)
            cursor = timezone.make_aware(datetime.combine(day, datetime.min.time()))
    return starts


def bucket_count(window: Window, granularity: Granularity) -> int:
    """How many buckets the window makes, without building them (the form refuses too many before any work)."""
    seconds = (window.end - window.start).total_seconds()
    step = 3600 if granularity == Granularity.HOUR else 86400
    return int(-(-seconds // step))


@dataclass
class PoolSeries:
    """One pool's series; each list has one value per bucket (averages in cards over the bucket's time so far)."""

    pool: NodePool
    allocated: list[float]
    within: list[float]
    deserved: list[float]
    card_hours: float = 0.0
    within_hours: float = 0.0
    deserved_hours: float = 0.0
    busy: list[float | None] = field(default_factory=list)
    utilisation: list[float | None] = field(default_factory=list)
    idle_hours: list[float | None] = field(default_factory=list)
    measured_hours: float = 0.0
    busy_hours: float = 0.0
    idle_total: float = 0.0

    @property
    def mean_utilisation(self) -> float | None:
        return self.busy_hours / self.measured_hours if self.measured_hours else None


@dataclass
class UseOverTime:
    window: Window
    granularity: Granularity
    now: datetime
    starts: list[datetime]
    seconds: list[float]  # each bucket's length up to now (0 for buckets still ahead)
    pools: list[PoolSeries]
    top: list[ReportRow]  # the window's largest consumers by GPU-hours (projects)
    measured: bool  # a Prometheus is configured: busy cards, utilisation and idle hours

    def chart_data(self) -> dict[str, Any]:
        """What static/js/use-over-time.js draws: epoch seconds and, per pool, the series rounded to 0.01 card."""

        def rounded(values: list[float | None]) -> list[float | None]:
            return [None if value is None else round(value, 2) for value in values]

        return {"t": [int(moment.timestamp()) for moment in self.starts], "pools": [{
            "slug": series.pool.slug, "title": series.pool.name,
            "allocated": rounded(list(series.allocated)), "within": rounded(list(series.within)),
            "deserved": rounded(list(series.deserved)),
            "busy": rounded(series.busy) if self.measured else None,
        } for series in self.pools]}


def _moment(value: datetime) -> Value:
    return Value(value, output_field=DateTimeField())


class EpochSeconds(Func):
    """A moment as seconds since 1970 in double precision. On PostgreSQL date_part gives a double at once, where
    EXTRACT on an interval (ledger.DurationSeconds) computes in numeric, several times slower over a year of slices;
    SQLite's julianday is native."""

    output_field = FloatField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="date_part('epoch', %(expressions)s)", **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)",
                           **extra)


def _seconds_since(expression: Any, origin: datetime) -> Expression:
    return ExpressionWrapper(EpochSeconds(expression) - Value(origin.timestamp()), output_field=FloatField())


def _trunc(expression: Any, granularity: Granularity) -> Trunc:
    # Hours in UTC: no ambiguous local hour at a clock change; days at the portal's local midnight.
    zone = UTC if granularity == Granularity.HOUR else timezone.get_current_timezone()
    return Trunc(expression, granularity.value, output_field=DateTimeField(), tzinfo=zone)


@dataclass
class _Changes:
    """Per bucket: the sum of rate changes and of rate change x its moment (seconds from the window's start)."""

    rate: list[float]
    moment: list[float]


def _changes(count: int) -> _Changes:
    return _Changes([0.0] * count, [0.0] * count)


def _add(changes: dict[Any, _Changes], rows: Iterable[dict[str, Any]], index: dict[datetime, int], count: int,
         sign: float, names: tuple[str, str]) -> None:
    for row in rows:
        position = index.get(row["bucket"])
        if position is None:
            continue  # a moment outside the buckets (only at now's edge); the walk clips there anyway
        entry = changes.setdefault(row["node_pool_id"], _changes(count))
        # Slices are grouped by their card fraction (the pool's when they were written), applied here, not per row.
        factor = sign * row.get("card_fraction_numerator", 1) / row.get("card_fraction_denominator", 1)
        entry.rate[position] += factor * float(row[names[0]] or 0.0)
        entry.moment[position] += factor * float(row[names[1]] or 0.0)


def _walk(entry: _Changes | None, ends: list[float], seconds: list[float]) -> list[float]:
    """Card-seconds per bucket of a step function given by its changes: the rate held into each bucket for the
    bucket's time, plus each change for the rest of its bucket (a change at moment m adds rate x (end - m))."""
    if entry is None:
        return [0.0] * len(ends)
    held, out = 0.0, []
    for position, end in enumerate(ends):
        out.append(held * seconds[position] + entry.rate[position] * end - entry.moment[position])
        held += entry.rate[position]
    return out


def _rate_changes(queryset: QuerySet, *, since: str, rate: Expression, extra: dict[str, Expression],
                  window: Window, until: datetime, granularity: Granularity, keys: tuple[str, ...] = (),
                  started: Any = None) -> tuple[QuerySet, QuerySet]:
    """Two aggregate queries: rate (and `extra` rates) added per bucket where rows start (`started`: where they
    start counting, by default `since` clipped to the window), taken away where they end inside the window (open rows
    and rows ending after now hold on to its end)."""
    started = started if started is not None else Greatest(since, _moment(window.start))
    sums: dict[str, Any] = {"r": rate, **extra}

    def aggregate(rows: QuerySet, moment: Any) -> QuerySet:
        offset = _seconds_since(moment, window.start)
        annotations = {}
        for name, value in sums.items():
            annotations[name] = Sum(value, default=0.0)
            annotations[f"{name}t"] = Sum(ExpressionWrapper(value * offset, output_field=FloatField()), default=0.0)
        return rows.annotate(bucket=_trunc(moment, granularity)).values("node_pool_id", *keys, "bucket").annotate(
            **annotations).order_by()

    return (aggregate(queryset, started),
            aggregate(queryset.filter(ended_at__isnull=False, ended_at__lt=until), F("ended_at")))


def use_over_time(*, user: Actor, window: Window, granularity: Granularity, filters: Filters | None = None,
                  now: datetime | None = None) -> UseOverTime:
    """The series for the viewer's scope (narrowed by `filters`: a department, a pool); a fixed number of queries
    whatever the ledger holds (by hour: the ledger's four aggregates, the pools and the top consumers' report; by
    day: UsageDay's rows per pool and per project beside the live ones, tests/apps/usage/test_over_time.py pins
    both)."""
    filters = filters or Filters()
    now = now or timezone.now()
    until = window.until(now)
    starts = bucket_starts(window, granularity)
    count = len(starts)
    index = {start: position for position, start in enumerate(starts)}
    bounds = [*starts[1:], window.end]
    # In UTC: Python subtracts two moments of one time zone by their wall clocks (a 23-hour day would count 24).
    origin, clipped = window.start.astimezone(UTC), [min(bound, until).astimezone(UTC) for bound in bounds]
    ends = [(end - origin).total_seconds() for end in clipped]
    seconds = [max(0.0, (end - start.astimezone(UTC)).total_seconds()) for start, end in zip(starts, clipped,
                                                                                             strict=True)]

    # Per row only units and shares; the card fraction multiplies each group's sums (_add): fewer operations per
    # slice over a year of them.
    cards = ExpressionWrapper(Value(1.0) * F("units"), output_field=FloatField())
    within = ExpressionWrapper(cards * F("share_numerator") / F("share_denominator"), output_field=FloatField())
    slices = slices_for(user).filter(**filters.ledger()).filter(overlapping(window, now))
    # By day, the days before `cut` (the day holding now) come from UsageDay's closed card-seconds and only the open
    # slices and the closed ones reaching past `cut` are summed here; by hour, or where UsageDay's days are not these
    # (cut at another TIME_ZONE's midnights), every slice is.
    days = _days(user, window, filters, starts, bounds, until) if granularity == Granularity.DAY and \
        filters.user_id is None else None
    cut = days.cut if days else window.start
    live, started = slices, None
    if days:
        live = slices.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=cut))
        started = Greatest("started_at", Case(When(ended_at__isnull=True, then=_moment(window.start)),
                                              default=_moment(cut), output_field=DateTimeField()))
    held: dict[Any, _Changes] = {}
    inside: dict[Any, _Changes] = {}
    for sign, queryset in zip((1.0, -1.0), _rate_changes(
            live, since="started_at", rate=cards, extra={"w": within}, window=window, until=until,
            granularity=granularity, keys=("card_fraction_numerator", "card_fraction_denominator"), started=started),
            strict=True):
        rows = list(queryset)
        _add(held, rows, index, count, sign, ("r", "rt"))
        _add(inside, rows, index, count, sign, ("w", "wt"))

    periods = DeservedPeriod.objects.filter(project__in=projects_for(user, Action.VIEW), deserved__gt=0,
                                            **filters.periods()).filter(in_force(window, now))
    deserved: dict[Any, _Changes] = {}
    units = ExpressionWrapper(Value(1.0) * F("deserved"), output_field=FloatField())
    for sign, queryset in zip((1.0, -1.0), _rate_changes(
            periods, since="in_force_from", rate=units, extra={}, window=window, until=until,
            granularity=granularity), strict=True):
        _add(deserved, list(queryset), index, count, sign, ("r", "rt"))

    measured = utilisation_available()
    utilisation: dict[Any, dict[int, tuple[float, float, float]]] = defaultdict(dict)
    if measured and days:
        for pool_id, figures in days.measured.items():
            utilisation[pool_id].update(figures)
    if measured:
        hours = access.restrict(UtilisationHour.objects.all(), user, Action.VIEW).filter(
            hour__gte=cut, hour__lt=until, **filters.ledger())
        for row in hours.annotate(bucket=_trunc(F("hour"), granularity)).values("node_pool_id", "bucket").annotate(
                m=Sum("observed_card_hours"), u=Sum("used_card_hours"), i=Sum("idle_card_hours")).order_by():
            position = index.get(row["bucket"])
            if position is not None:
                utilisation[row["node_pool_id"]][position] = (float(row["m"] or 0.0), float(row["u"] or 0.0),
                                                              float(row["i"] or 0.0))

    pools = []
    shown = set(held) | set(deserved) | set(utilisation) | set(days.held if days else ())
    known = {}
    for pool in NodePool.objects.filter(pk__in=shown).order_by("name"):
        known[pool.pk] = pool
        fraction = pool.card_fraction_numerator / pool.card_fraction_denominator
        held_seconds = _walk(held.get(pool.pk), ends, seconds)
        within_seconds = _walk(inside.get(pool.pk), ends, seconds)
        if days:
            for position, (card_seconds, within_card_seconds) in days.held.get(pool.pk, {}).items():
                held_seconds[position] += card_seconds
                within_seconds[position] += within_card_seconds
        deserved_seconds = [fraction * value for value in _walk(deserved.get(pool.pk), ends, seconds)]

        def mean(values: list[float]) -> list[float]:
            return [value / length if length else 0.0 for value, length in zip(values, seconds, strict=True)]

        series = PoolSeries(pool=pool, allocated=mean(held_seconds), within=mean(within_seconds),
                            deserved=mean(deserved_seconds), card_hours=sum(held_seconds) / SECONDS_PER_HOUR,
                            within_hours=sum(within_seconds) / SECONDS_PER_HOUR,
                            deserved_hours=sum(deserved_seconds) / SECONDS_PER_HOUR)
        if measured:
            measured_rows = utilisation.get(pool.pk, {})
            for position, length in enumerate(seconds):
                observed, busy, idle = measured_rows.get(position, (0.0, 0.0, 0.0))
                series.busy.append(busy * SECONDS_PER_HOUR / length if length else None)
                series.utilisation.append(busy / observed if observed else None)
                series.idle_hours.append(idle if observed else None)
                series.measured_hours += observed
                series.busy_hours += busy
                series.idle_total += idle
        pools.append(series)

    if days:
        top = _top_consumers(user=user, window=window, filters=filters, now=now, cut=cut, live=live,
                             started=started, pools=known, measured=measured)
    else:
        report = usage_report(user=user, group=Group.PROJECT, window=window, filters=filters, now=now)
        top = [row for row in report.rows if row.gpu_hours > 0][:TOP_CONSUMERS]  # rows come largest first
    return UseOverTime(window=window, granularity=granularity, now=now, starts=starts, seconds=seconds, pools=pools,
                       top=top, measured=measured)


@dataclass
class _Days:
    """UsageDay's sums per pool and bucket for the days before `cut`."""

    cut: datetime
    held: dict[int, dict[int, tuple[float, float]]]  # card-seconds, within-deserved card-seconds
    measured: dict[int, dict[int, tuple[float, float, float]]]  # observed, used, idle card hours


def _days(user: Actor, window: Window, filters: Filters, starts: list[datetime], bounds: list[datetime],
          until: datetime) -> _Days | None:
    """One query; None where a row's day is not one of the buckets (cut for another TIME_ZONE)."""
    cut = next((start for start, bound in zip(starts, bounds, strict=True) if bound > until), window.end)
    index = {start: position for position, start in enumerate(starts)}
    result = _Days(cut, defaultdict(dict), defaultdict(dict))
    for row in access.restrict(UsageDay.objects.all(), user, Action.VIEW).filter(
            day__gte=window.start, day__lt=cut, **filters.ledger()).values("node_pool_id", "day", "day_end").annotate(
            c=Sum("card_seconds"), w=Sum("within_seconds"), m=Sum("observed_card_hours"), u=Sum("used_card_hours"),
            i=Sum("idle_card_hours")).order_by():
        position = index.get(row["day"])
        if position is None or bounds[position] != row["day_end"]:
            return None
        result.held[row["node_pool_id"]][position] = (row["c"], row["w"])
        if row["m"]:
            result.measured[row["node_pool_id"]][position] = (row["m"], row["u"], row["i"])
    return result


def _top_consumers(*, user: Actor, window: Window, filters: Filters, now: datetime, cut: datetime, live: QuerySet,
                   started: Any, pools: dict[int, NodePool], measured: bool) -> list[ReportRow]:
    """The showback report's project rows (GPU-hours, over quota, deserved, measured use) from UsageDay before `cut`
    and the live slices and hours after it; four queries, five with a Prometheus."""
    until = window.until(now)
    rows: dict[int, ReportRow] = {}

    def row_for(key: int) -> ReportRow:
        return rows.setdefault(key, ReportRow(group=Group.PROJECT, key=key, slug="", name="", deserved=0.0))

    for entry in access.restrict(UsageDay.objects.all(), user, Action.VIEW).filter(
            day__gte=window.start, day__lt=cut, **filters.ledger()).values("project_id").annotate(
            c=Sum("card_seconds"), w=Sum("within_seconds"), m=Sum("observed_card_hours"), u=Sum("used_card_hours"),
            i=Sum("idle_card_hours")).order_by():
        row = row_for(entry["project_id"])
        row.gpu_hours += entry["c"] / SECONDS_PER_HOUR
        row.within_quota += entry["w"] / SECONDS_PER_HOUR
        row.measured_hours += entry["m"]
        row.used_hours += entry["u"]
        row.idle_hours += entry["i"]
    held = ExpressionWrapper(
        DurationSeconds(ExpressionWrapper(Least(Coalesce("ended_at", _moment(until)), _moment(until)) - started,
                                          output_field=DurationField()))
        * F("units") * F("card_fraction_numerator") / F("card_fraction_denominator"), output_field=FloatField())
    for entry in live.values("project_id").annotate(h=Sum(held), w=Sum(ExpressionWrapper(
            held * F("share_numerator") / F("share_denominator"), output_field=FloatField()))).order_by():
        row = row_for(entry["project_id"])
        row.gpu_hours += float(entry["h"] or 0.0) / SECONDS_PER_HOUR
        row.within_quota += float(entry["w"] or 0.0) / SECONDS_PER_HOUR
    if measured and cut < until:
        for hours in access.restrict(UtilisationHour.objects.all(), user, Action.VIEW).filter(
                hour__gte=cut, hour__lt=until, **filters.ledger()).values("project_id").annotate(
                m=Sum("observed_card_hours"), u=Sum("used_card_hours"), i=Sum("idle_card_hours")).order_by():
            row = row_for(hours["project_id"])
            row.measured_hours += float(hours["m"] or 0.0)
            row.used_hours += float(hours["u"] or 0.0)
            row.idle_hours += float(hours["i"] or 0.0)
    ranked = sorted((row for row in rows.values() if row.gpu_hours > 0), key=lambda row: -row.gpu_hours)
    top = {row.key: row for row in ranked[:TOP_CONSUMERS * 2]}  # ties on the cut-off are settled by slug below
    for row in top.values():
        row.borrowed = row.gpu_hours - row.within_quota
    for entry in grouped_deserved(user=user, group=Group.PROJECT, buckets=[window], filters=filters, now=now) or ():
        pool = pools.get(entry["node_pool_id"])
        if entry["project_id"] in top and pool is not None:
            top[entry["project_id"]].deserved = (top[entry["project_id"]].deserved or 0.0) + float(
                entry["b0"] or 0.0) * pool.card_fraction_numerator / pool.card_fraction_denominator
    for key, (slug, name, department_slug) in group_labels(Group.PROJECT, set(top)).items():
        top[key].slug, top[key].name, top[key].department_slug = slug, name, department_slug
    return sorted(top.values(), key=lambda row: (-row.gpu_hours, row.slug))[:TOP_CONSUMERS]


# --- one table for the page's numbers and the CSV ---------------------------------------------------------------

SERIES_HEADER = ["Bucket start (UTC)", "Node pool", "Allocated cards", "Within deserved cards", "Deserved cards",
                 "GPU-hours", "Within deserved GPU-hours", "Deserved GPU-hours"]
MEASURED_HEADER = ["Busy cards", "GPU utilisation", "Held but idle GPU-hours"]


def _number(value: float | None, places: int = 3) -> str:
    return "" if value is None else f"{value:.{places}f}"


def series_table(result: UseOverTime) -> Iterator[list[str]]:
    """The header, then one row per bucket and pool: what the CSV holds (hours are card hours in the bucket)."""
    yield SERIES_HEADER + (MEASURED_HEADER if result.measured else [])
    for series in result.pools:
        for position, start in enumerate(result.starts):
            hours = result.seconds[position] / SECONDS_PER_HOUR
            cells = [start.astimezone(UTC).isoformat(), series.pool.slug, _number(series.allocated[position]),
                     _number(series.within[position]), _number(series.deserved[position]),
                     _number(series.allocated[position] * hours), _number(series.within[position] * hours),
                     _number(series.deserved[position] * hours)]
            if result.measured:
                utilisation = series.utilisation[position]
                cells += [_number(series.busy[position]),
                          "" if utilisation is None else f"{utilisation * 100:.1f}%",
                          _number(series.idle_hours[position])]
            yield cells

