"""The local days a stretch crosses (UsageDay's rows and the dashboard's buckets): cut at local midnights, a day of a
clock change 23 or 25 hours long."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone

from apps.usage.days import days_crossed


def test_a_stretch_is_cut_at_local_midnights_across_a_clock_change():
    with timezone.override("Europe/Berlin"):  # 29 March 2026: clocks go from 02:00 to 03:00
        pieces = list(days_crossed(datetime(2026, 3, 28, 20, tzinfo=UTC), datetime(2026, 3, 30, 1, tzinfo=UTC)))
    assert [(start.astimezone(UTC), end.astimezone(UTC), seconds) for start, end, seconds in pieces] == [
        (datetime(2026, 3, 27, 23, tzinfo=UTC), datetime(2026, 3, 28, 23, tzinfo=UTC), 3 * 3600),
        (datetime(2026, 3, 28, 23, tzinfo=UTC), datetime(2026, 3, 29, 22, tzinfo=UTC), 23 * 3600),
        (datetime(2026, 3, 29, 22, tzinfo=UTC), datetime(2026, 3, 30, 22, tzinfo=UTC), 3 * 3600)]


def test_a_stretch_inside_one_day_and_an_empty_one():
    start = datetime(2026, 3, 2, 10, tzinfo=UTC)
    assert list(days_crossed(start, datetime(2026, 3, 2, 11, 30, tzinfo=UTC))) == [
        (datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 3, 3, tzinfo=UTC), 5400)]
    assert list(days_crossed(start, start)) == []
