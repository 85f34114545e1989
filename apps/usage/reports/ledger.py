"""The ledger as the reports read it: the rows a viewer may see, and the SQL arithmetic over them.

Each slice or interval is clipped to the window by Greatest/Least, its duration turned into seconds (on PostgreSQL and
SQLite alike) and weighted by units, card fraction and, for slices, the within-deserved share, so a report is one
aggregate query however many rows the ledger holds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import (
    DateTimeField,
    DurationField,
    Expression,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    Q,
    QuerySet,
    Value,
)
from django.db.models.functions import Coalesce, Greatest, Least

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.actors import Actor, Visitor
from apps.workloads.selectors import workloads_for

from ..models import UsageInterval, UsageSlice
from ..services import usage_timelines_settle
from .window import SECONDS_PER_HOUR, Window


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


def in_force(window: Window, now: datetime) -> Q:
    """Deserved periods in force for some time inside the window: from when their quota came into force (not the
    split's BEGINNING) to their end."""
    until = window.until(now)
    return Q(in_force_from__lt=until) & (Q(ended_at__isnull=True) | (Q(ended_at__gt=window.start) & Q(
        ended_at__gt=F("in_force_from"))))


def within_hours(window: Window, now: datetime) -> Expression:
    """Within-deserved card hours of one slice inside the window: its card hours x its share."""
    return ExpressionWrapper(card_hours(window, now) * F("share_numerator") / F("share_denominator"),
                             output_field=FloatField())


def over_hours(window: Window, now: datetime) -> Expression:
    """Over-quota card hours of one slice inside the window: its card hours x (1 - its share)."""
    return ExpressionWrapper(card_hours(window, now) * (F("share_denominator") - F("share_numerator"))
                             / F("share_denominator"), output_field=FloatField())


def deserved_unit_hours(window: Window, now: datetime) -> Expression:
    """Deserved units x hours of one deserved period inside the window, counted from when its quota came into force
    (the pool's card fraction comes after). For the periods `in_force` selects."""
    until = window.until(now)
    seconds = DurationSeconds(ExpressionWrapper(
        Least(Coalesce("ended_at", _moment(until)), _moment(until)) - Greatest("in_force_from", _moment(window.start)),
        output_field=DurationField(),
    ))
    return ExpressionWrapper(seconds * F("deserved") / Value(float(SECONDS_PER_HOUR)), output_field=FloatField())


# --- scope: what the viewer may see -----------------------------------------------------------------------------


def visible_users(user: Actor) -> QuerySet:
    """People who own workloads the viewer may see (the user filter's choices)."""
    return get_user_model().objects.filter(pk__in=workloads_for(user).values("owner_id")).order_by("username")


def intervals_for(user: Visitor | None) -> QuerySet[UsageInterval]:
    """Ledger rows of the projects the user may see (researchers: their projects; department admins: theirs)."""
    return access.restrict(UsageInterval.objects.all(), user, Action.VIEW)


def slices_for(user: Visitor | None) -> QuerySet[UsageSlice]:
    """The within-deserved slices of the ledger rows the user may see, brought up to date first."""
    usage_timelines_settle()
    return access.restrict(UsageSlice.objects.all(), user, Action.VIEW)

