"""Writes of the GPU-hour ledger. The workloads app announces quota held and released (apps.workloads.signals); the
org app announces changes of deserved quota (apps.org.signals). The receivers below record both inside the same
transaction as the change that caused them.

Three tables move together, per project and node pool (a "timeline"):
- UsageInterval: one row per stretch a workload held quota (admission to eviction, finish or stop);
- DeservedPeriod: the project's deserved units on the pool over time;
- UsageSlice: the intervals cut where their within-deserved share changes (apps/usage/split.py).

A write changes intervals or periods, then the slices are recomputed from the moment of the change on, under the
timeline's lock (a transaction-level advisory lock on PostgreSQL; SQLite serialises writers anyway). Slices are a
pure function of the intervals and periods, kept in canonical form (maximal stretches of constant share), so a
replayed observation, which changes no interval, changes no slice either, and recomputing any stretch again gives
the same rows.

The watcher defers the recompute (`ledger_deferred`): its writes leave a PendingRecompute mark in their own
transaction and take no timeline lock, and its ledger loop settles every marked timeline once for all its marks
(`usage_timelines_settle`). Workloads of one project then never queue behind each other's accounting, and a burst
of admissions costs one recompute per timeline and pass instead of one each (docs/architecture.md, The GPU-hour
ledger). Every other writer recomputes at once, taking up any marks of the timeline on the way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.core.services import lock_for_transaction
from apps.org.models import Quota
from apps.workloads.models import Workload

from . import days, split
from .models import DeservedPeriod, PendingRecompute, UsageDay, UsageInterval, UsageSlice, UtilisationHour

_DEFERRED: ContextVar[bool] = ContextVar("ledger_deferred", default=False)


@contextmanager
def ledger_deferred() -> Iterator[None]:
    """Within it, interval writes leave their slice recompute to `usage_timelines_settle` (see the module's doc)."""
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


def _lock_timeline(project_id: int, node_pool_id: int) -> None:
    """Serialise recomputes of one project's ledger on one pool until the transaction ends."""
    lock_for_transaction(f"usage-timeline:{project_id}:{node_pool_id}")


def _settle(project_id: int, node_pool_id: int, since: datetime | None = None, *, locked: bool = False) -> int:
    """Recompute a timeline from the earliest of `since` and its marks, under its lock (`locked`: the caller holds
    it already), and drop those marks; returns the slice rows written. Inside a transaction."""
    if not locked:
        _lock_timeline(project_id, node_pool_id)
    marks = list(PendingRecompute.objects.filter(project_id=project_id, node_pool_id=node_pool_id).values_list(
        "pk", "since"))
    starts = [start for _, start in marks] + ([since] if since is not None else [])
    if not starts:
        return 0
    written = usage_timeline_refresh(project_id=project_id, node_pool_id=node_pool_id, since=min(starts))
    if marks:
        PendingRecompute.objects.filter(pk__in=[pk for pk, _ in marks]).delete()
    return written


def _timeline_changed(timelines: dict[tuple[int, int], datetime]) -> None:
    """The intervals of these timelines changed from these moments on: recompute now, or mark them when deferred."""
    if _DEFERRED.get():
        PendingRecompute.objects.bulk_create([
            PendingRecompute(project_id=project_id, node_pool_id=node_pool_id, since=since)
            for (project_id, node_pool_id), since in timelines.items()])
        return
    for (project_id, node_pool_id), since in sorted(timelines.items()):  # one order: no deadlock with another writer
        _settle(project_id, node_pool_id, since)


def usage_timelines_settle() -> int:
    """Recompute every timeline with PendingRecompute marks, each once; returns how many. The watcher's ledger loop
    calls it, and so does every reader of slices before it reads (one query when nothing is due), so a report is
    exact even in the moment between an admission and the loop's next pass."""
    timelines = sorted(set(PendingRecompute.objects.values_list("project_id", "node_pool_id")))
    for project_id, node_pool_id in timelines:
        with transaction.atomic():
            _settle(project_id, node_pool_id)
    return len(timelines)


def usage_timeline_refresh(*, project_id: int, node_pool_id: int, since: datetime) -> int:
    """Recompute the within-deserved slices of a project's intervals on a pool from `since` on; returns the number of
    slice rows written. Call with the timeline locked, inside the transaction that changed it."""
    rows = {row["pk"]: row for row in UsageInterval.objects.filter(
        project_id=project_id, node_pool_id=node_pool_id).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
        .values("pk", "started_at", "ended_at", "units", "queue", "department_id", "user_id",
                "card_fraction_numerator", "card_fraction_denominator", "workload__gpu_fraction")}
    intervals = [split.Held(row["pk"], row["started_at"], row["ended_at"], quota_units(
        row["units"], row["workload__gpu_fraction"]), row["queue"] == UsageInterval.Queue.GUARANTEED)
        for row in rows.values()]
    periods = list(DeservedPeriod.objects.filter(project_id=project_id, node_pool_id=node_pool_id).values_list(
        "started_at", "deserved"))
    pieces = split.split(intervals, periods, since)
    # Slices reaching `since` (or ending there: an equal share after it continues them) are cut or continued; the
    # ones after it are replaced.
    current = UsageSlice.objects.filter(project_id=project_id, node_pool_id=node_pool_id).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=since))
    current.filter(started_at__gte=since).delete()
    straddling = {piece.interval_id: piece for piece in current.filter(started_at__lt=since)}
    changed: list[UsageSlice] = []
    new: list[split.Piece] = []
    for piece in pieces:
        before = straddling.pop(piece.interval_id, None) if piece.start == since else None
        if before is not None and (before.share_numerator, before.share_denominator) == piece.share:
            if before.ended_at != piece.end:  # the same share goes on: one slice, as a full recompute would give
                before.ended_at = piece.end
                changed.append(before)
            continue
        if before is not None and before.ended_at != since:
            before.ended_at = since
            changed.append(before)
        new.append(piece)
    for before in straddling.values():  # intervals that ended at `since` (or had a cut there already)
        if before.ended_at != since:
            before.ended_at = since
            changed.append(before)
    if changed:
        UsageSlice.objects.bulk_update(changed, ["ended_at"])
    if new:
        UsageSlice.objects.bulk_create([
            UsageSlice(interval_id=piece.interval_id, project_id=project_id, node_pool_id=node_pool_id,
                       department_id=rows[piece.interval_id]["department_id"],
                       user_id=rows[piece.interval_id]["user_id"], units=rows[piece.interval_id]["units"],
                       card_fraction_numerator=rows[piece.interval_id]["card_fraction_numerator"],
                       card_fraction_denominator=rows[piece.interval_id]["card_fraction_denominator"],
                       share_numerator=piece.numerator, share_denominator=piece.denominator,
                       started_at=piece.start, ended_at=piece.end)
            for piece in new])
    _days_refresh(project_id, node_pool_id, since)
    return len(changed) + len(new)


def _days_refresh(project_id: int, node_pool_id: int, since: datetime) -> None:
    """Rewrite the timeline's UsageDay card-seconds from the local day of `since` on, from its closed slices (the
    slices before that day are untouched by a recompute from `since`); a read and two writes."""
    first = days.day_start(since)
    sums: dict[tuple[int, datetime], list[Any]] = {}
    for department_id, units, numerator, denominator, share_n, share_d, start, end in UsageSlice.objects.filter(
            project_id=project_id, node_pool_id=node_pool_id, ended_at__gt=first).values_list(
            "department_id", "units", "card_fraction_numerator", "card_fraction_denominator", "share_numerator",
            "share_denominator", "started_at", "ended_at"):
        cards = units * numerator / denominator
        for day, day_end, seconds in days.days_crossed(max(start, first), end or first):  # closed: never None
            entry = sums.setdefault((department_id, day), [day_end, 0.0, 0.0])
            entry[1] += cards * seconds
            entry[2] += cards * seconds * share_n / share_d
    # Zeroed, never deleted: the worker's utilisation write may be adding to a row at this moment (another
    # transaction, no timeline lock), and its increment must find the row.
    UsageDay.objects.filter(project_id=project_id, node_pool_id=node_pool_id, day__gte=first).update(
        card_seconds=0.0, within_seconds=0.0)
    if sums:
        UsageDay.objects.bulk_create([
            UsageDay(project_id=project_id, node_pool_id=node_pool_id, department_id=department_id, day=day,
                     day_end=day_end, card_seconds=held, within_seconds=within)
            for (department_id, day), (day_end, held, within) in sums.items()],
            update_conflicts=True, unique_fields=["project", "node_pool", "department", "day"],
            update_fields=["day_end", "card_seconds", "within_seconds"])


def usage_days_rebuild() -> int:
    """Rebuild every UsageDay row from the slices and the hourly utilisation: for an existing ledger (migration
    usage 0011), after a change of TIME_ZONE (the rows are cut at local midnights) or after ledger rows were deleted
    outside the services (a workload deleted in a shell takes its intervals, slices and hours with it). Returns the
    rows written."""
    with transaction.atomic():
        UsageDay.objects.all().delete()
        sums = days.daily_figures(
            UsageSlice.objects.filter(ended_at__isnull=False).values_list(*days.SLICE_COLUMNS).order_by().iterator(
                chunk_size=5000),
            UtilisationHour.objects.values_list(*days.HOUR_COLUMNS).order_by().iterator(chunk_size=5000))
        UsageDay.objects.bulk_create([
            UsageDay(project_id=project_id, node_pool_id=pool_id, department_id=department_id, day=day,
                     day_end=figures[0], card_seconds=figures[1], within_seconds=figures[2],
                     observed_card_hours=figures[3], used_card_hours=figures[4], idle_card_hours=figures[5])
            for (project_id, pool_id, department_id, day), figures in sums.items()], batch_size=5000)
    return len(sums)


def usage_interval_open(*, workload: Workload, at: datetime, ended_at: datetime | None = None,
                        reason: str = "") -> bool:
    """Record the stretch of quota that began at `at` (Kueue's admission time); idempotent.

    No-op when an interval starting then exists already, or when another one is still open. With `ended_at` the
    stretch is recorded closed at once: the watcher learnt of the admission only after it ended.
    """
    pool = workload.node_pool
    # No savepoint inside a caller's transaction (the watcher's batch): a failure fails the caller's whole change.
    with transaction.atomic(savepoint=False):
        if not _DEFERRED.get():
            _lock_timeline(workload.project_id, pool.pk)
        # Two writers of one workload cannot both pass: the table allows one open interval and one per admission.
        held = Q(started_at=at)
        if ended_at is None:
            held |= Q(ended_at__isnull=True)
        if UsageInterval.objects.filter(held, workload_id=workload.pk).exists():
            return False
        _interval(workload, at, ended_at, reason).save(force_insert=True)
        _timeline_changed({(workload.project_id, pool.pk): at})
    return True


def held_cards(workload: Workload) -> tuple[int, Fraction]:
    """(units, card fraction of one unit) a workload holds while it runs: its quota units, each the pool's fraction
    of a card; fractional work on a KAI pool (`gpu_fraction`, one pod) holds one unit of that fraction of a card, so
    its card hours are the fraction x hours (README, Kueue and KAI in one cluster). In the within/over-deserved split
    such a unit counts as that share of a unit (`quota_units`)."""
    pool = workload.node_pool
    if workload.gpu_fraction is not None:
        return max(workload.pod_count, 1), pool.card_fraction * Fraction(workload.gpu_fraction)
    return workload.gpu_units, pool.card_fraction


def quota_units(units: int, gpu_fraction: Decimal | None) -> int | Fraction:
    """What an interval's `units` hold of the deserved quota, for the within/over-deserved split: a share of a card
    on a KAI pool (its workload's `gpu_fraction`, read through the interval, since a workload's size never changes)
    holds that share of a unit, as KAI counts it against the queue's quota. Its card fraction counts the share in
    the GPU-hours already, so the split and the total agree."""
    return units if gpu_fraction is None else units * Fraction(gpu_fraction)


def _interval(workload: Workload, at: datetime, ended_at: datetime | None, reason: str,
              units: int | None = None) -> UsageInterval:
    """The ledger row of one stretch of held quota, with the card fraction it holds and the queue it was held in."""
    pool = workload.node_pool
    held, card = held_cards(workload)
    return UsageInterval(
        workload_id=workload.pk, project_id=workload.project_id, department_id=workload.project.department_id,
        user_id=workload.owner_id, node_pool_id=pool.pk, units=held if units is None else units,
        card_fraction_numerator=card.numerator, card_fraction_denominator=card.denominator,
        queue=UsageInterval.Queue.ELASTIC if workload.preemptible else UsageInterval.Queue.GUARANTEED,
        model_label=workload.model_label, data_class=workload.data_class, started_at=at,
        ended_at=None if ended_at is None else max(at, ended_at), end_reason=reason[:100] if ended_at else "")


def usage_intervals_open_many(*, stretches: list[tuple[Workload, datetime, datetime | None, str]]) -> int:
    """`usage_interval_open` for many workloads that hold no interval yet (first seen by the watcher), in one
    transaction: the intervals written together, then each project's timeline on each pool recomputed once."""
    by_timeline: dict[tuple[int, int], datetime] = {}
    rows = []
    for workload, at, ended_at, reason in stretches:
        key = (workload.project_id, workload.node_pool_id)
        by_timeline[key] = min(at, by_timeline.get(key, at))
        rows.append(_interval(workload, at, ended_at, reason))
    with transaction.atomic():
        if not _DEFERRED.get():
            for project_id, node_pool_id in sorted(by_timeline):  # one order: no deadlock with another writer
                _lock_timeline(project_id, node_pool_id)
        UsageInterval.objects.bulk_create(rows, batch_size=1000)
        _timeline_changed(by_timeline)
    return len(rows)


def usage_interval_close(*, workload_id: int, at: datetime, reason: str) -> bool:
    """Stop counting; an interval closes once (no-op when none is open). Never ends before it began."""
    opened = UsageInterval.objects.filter(workload_id=workload_id, ended_at__isnull=True)
    timeline = opened.values_list("project_id", "node_pool_id").first()
    if timeline is None:
        return False
    with transaction.atomic(savepoint=False):  # as in usage_interval_open
        if not _DEFERRED.get():
            _lock_timeline(*timeline)
        interval = opened.select_for_update().first()
        if interval is None:  # closed meanwhile by another writer
            return False
        interval.ended_at = max(interval.started_at, at)
        interval.end_reason = reason[:100]
        interval.save(update_fields=["ended_at", "end_reason"])
        _timeline_changed({(interval.project_id, interval.node_pool_id): interval.ended_at})
    return True


def usage_interval_units_set(*, workload: Workload, at: datetime, units: int, reason: str) -> bool:
    """The workload holds `units` from `at` on (0: nothing), as an inference service's ready replicas do: the open
    stretch closes at `at` and one with the new units opens there; False when nothing changed.

    Changes come in any order and at any moment: the watcher dates them from the pods, so two may share an instant (a
    replica replaced within the cluster clock's resolution) or be dated before the stretch they end. So a change
    never goes back before the workload's recorded stretches (the start of its open one, the end of its last closed
    one): dated earlier, it counts from there; and a stretch that would last no time is not kept: one opened at that
    instant takes the new units in its place (or goes, at 0). Each instant has one count, the last one seen
    (docs/architecture.md, Inference services).
    """
    pool = workload.node_pool
    with transaction.atomic():
        if not _DEFERRED.get():
            _lock_timeline(workload.project_id, pool.pk)
        rows = UsageInterval.objects.select_for_update().filter(workload_id=workload.pk)
        opened = rows.filter(ended_at__isnull=True).first()
        last_end = rows.filter(ended_at__isnull=False).order_by("-ended_at").values_list("ended_at", flat=True).first()
        at = max(at, last_end or at, opened.started_at if opened is not None else at)
        if (opened.units if opened is not None else 0) == units:
            return False
        if opened is not None and opened.started_at < at:
            opened.ended_at, opened.end_reason = at, reason[:100]
            opened.save(update_fields=["ended_at", "end_reason"])
        elif opened is not None and units:  # opened at this instant: it held nothing yet
            opened.units = units
            opened.save(update_fields=["units"])
        elif opened is not None:
            opened.delete()
        if units and (opened is None or opened.ended_at is not None):
            # A stretch closed at its start (a stop at the same instant) takes the instant's one row.
            lasted_nothing = rows.filter(started_at=at, ended_at=at).first()
            if lasted_nothing is not None:
                lasted_nothing.units, lasted_nothing.ended_at, lasted_nothing.end_reason = units, None, ""
                lasted_nothing.save(update_fields=["units", "ended_at", "end_reason"])
            else:
                _interval(workload, at, None, "", units=units).save(force_insert=True)
        _timeline_changed({(workload.project_id, pool.pk): at})
    return True


def deserved_period_set(*, project_id: int, department_id: int, node_pool_id: int, deserved: int,
                        at: datetime | None = None) -> bool:
    """The project's deserved units on the pool are `deserved` from `at` (now) on; False when nothing changed.

    The first period of a project and pool starts at split.BEGINNING for the split, and is in force (deserves
    GPU-hours) from `at` (see DeservedPeriod). Recomputes the slices from the change on; closed stretches before it
    keep the quota they had.
    """
    at = at or timezone.now()
    with transaction.atomic():
        _lock_timeline(project_id, node_pool_id)  # deserved changes are rare: always recomputed at once
        periods = DeservedPeriod.objects.filter(project_id=project_id, node_pool_id=node_pool_id)
        current = periods.filter(ended_at__isnull=True).first()
        if current is not None and current.deserved == deserved:
            return False
        if current is None:
            since = split.BEGINNING
            DeservedPeriod.objects.create(project_id=project_id, department_id=department_id,
                                          node_pool_id=node_pool_id, deserved=deserved, started_at=since,
                                          in_force_from=max(at, since))
        elif at <= current.started_at:  # a second change at the same moment (or a clock behind the last one)
            since = current.started_at
            current.deserved = deserved
            current.save(update_fields=["deserved"])
        else:
            since = at
            current.ended_at = at
            current.save(update_fields=["ended_at"])
            DeservedPeriod.objects.create(project_id=project_id, department_id=department_id,
                                          node_pool_id=node_pool_id, deserved=deserved, started_at=at,
                                          in_force_from=at)
        _settle(project_id, node_pool_id, since, locked=True)
    return True


# --- receivers --------------------------------------------------------------------------------------------------


def on_quota_held(*, workload: Workload, at: datetime, ended_at: datetime | None = None, reason: str = "",
                  **_: Any) -> None:
    usage_interval_open(workload=workload, at=at, ended_at=ended_at, reason=reason)


def on_quotas_held(*, stretches: list[tuple[Workload, datetime, datetime | None, str]], **_: Any) -> None:
    usage_intervals_open_many(stretches=stretches)


def on_quota_units_changed(*, workload: Workload, at: datetime, units: int, reason: str, **_: Any) -> None:
    usage_interval_units_set(workload=workload, at=at, units=units, reason=reason)


def on_quota_released(*, workload_id: int, at: datetime, reason: str, **_: Any) -> None:
    usage_interval_close(workload_id=workload_id, at=at, reason=reason)


def on_quota_deserved_changed(*, quota: Quota, deserved: int, **_: Any) -> None:
    """A quota's deserved units changed (created, changed, or removed: 0); only a project's count here. A project's
    own deletion takes its periods with it (and is refused while it has ledger rows), and sends nothing."""
    if quota.project is None:
        return
    deserved_period_set(project_id=quota.project.pk, department_id=quota.project.department_id,
                        node_pool_id=quota.node_pool_id, deserved=deserved)


def utilisation_hours_add(*, workload: Workload, samples: list[tuple[datetime, float, float]], sample_seconds: float,
                          threshold_percent: float) -> int:
    """Add one workload's new utilisation samples (each standing for `sample_seconds` of its run) to its hourly
    showback figures: observed, utilisation-weighted and below-threshold card hours. Returns the hours touched.

    The caller passes only samples not counted before (apps.workloads.services.workload_utilisation_record returns
    them), in the same transaction, so a repeated refresh adds nothing twice."""
    pool = workload.node_pool
    held, card = held_cards(workload)
    card_hours = held * card.numerator / card.denominator * sample_seconds / 3600
    per_hour: dict[datetime, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for moment, util, _memory in samples:
        figures = per_hour[moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)]
        figures[0] += card_hours
        figures[1] += card_hours * min(max(util, 0.0), 100.0) / 100
        figures[2] += card_hours if util < threshold_percent else 0.0
    with transaction.atomic():
        for hour, (observed, used, idle) in per_hour.items():
            row, created = UtilisationHour.objects.get_or_create(
                workload_id=workload.pk, hour=hour,
                defaults={"project_id": workload.project_id, "department_id": workload.project.department_id,
                          "user_id": workload.owner_id, "node_pool_id": pool.pk, "observed_card_hours": observed,
                          "used_card_hours": used, "idle_card_hours": idle})
            if not created:
                UtilisationHour.objects.filter(pk=row.pk).update(
                    observed_card_hours=F("observed_card_hours") + observed,
                    used_card_hours=F("used_card_hours") + used, idle_card_hours=F("idle_card_hours") + idle)
        per_day: dict[datetime, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for hour, figures in per_hour.items():
            for position, value in enumerate(figures):
                per_day[days.day_start(hour)][position] += value
        # The dashboard's daily rows (UsageDay), in day order as the ledger's recompute updates them: no deadlock.
        for day, (observed, used, idle) in sorted(per_day.items()):
            day_row, created = UsageDay.objects.get_or_create(
                project_id=workload.project_id, node_pool_id=pool.pk, department_id=workload.project.department_id,
                day=day, defaults={"day_end": days.next_day(day), "observed_card_hours": observed,
                                   "used_card_hours": used, "idle_card_hours": idle})
            if not created:
                UsageDay.objects.filter(pk=day_row.pk).update(
                    observed_card_hours=F("observed_card_hours") + observed,
                    used_card_hours=F("used_card_hours") + used, idle_card_hours=F("idle_card_hours") + idle)
    return len(per_hour)
