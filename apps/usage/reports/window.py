"""The period a GPU-hour report covers: [start, end) in the portal's time zone, parsed, checked and cut into months."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

MAX_SPAN = timedelta(days=400)
# The days a report's window may touch: a month inside what datetime can hold at either end, so month arithmetic
# (next_month) and time-zone shifts never overflow into a 500.
FIRST_DAY, LAST_DAY = date(1, 2, 1), date(9999, 11, 30)
OUT_OF_RANGE = f"Pick a day from {FIRST_DAY.isoformat()} to {LAST_DAY.isoformat()}."
SECONDS_PER_HOUR = 3600


def day_in_range(day: date) -> bool:
    return FIRST_DAY <= day <= LAST_DAY


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


def window_slug(window: Window) -> str:
    """The window in a CSV download's file name: its first and last local day."""
    start, end = timezone.localtime(window.start), timezone.localtime(window.end)
    return f"{start:%Y%m%d}-{end:%Y%m%d}"
