"""usage 0011 fills UsageDay from an existing ledger: each closed slice's card-seconds cut at local midnights, the
hourly utilisation summed into the day of its hour; open slices stay out (the dashboard adds them live)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.usage.models import UsageDay

from .test_split_migration import migrate, seed

BEFORE = [("usage", "0010_deservedperiod_in_force_from")]


def at(day: int, hour: int) -> datetime:
    return datetime(2026, 3, day, hour, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_the_backfill_sums_closed_slices_and_hours_per_day():
    try:
        apps = migrate(BEFORE)
        ids = seed(apps)
        intervals = apps.get_model("usage", "UsageInterval").objects
        slices = apps.get_model("usage", "UsageSlice").objects
        for pk, start, end, share in ((ids["guaranteed"], at(2, 22), at(3, 2), (1, 1)),  # 2 h each side of midnight
                                      (ids["elastic"], at(2, 22), at(3, 1), (1, 3)),
                                      (ids["elastic"], at(3, 1), None, (1, 1))):  # open: not in the rows
            row = intervals.get(pk=pk)
            slices.create(interval=row, project_id=row.project_id, department_id=row.department_id,
                          user_id=row.user_id, node_pool_id=row.node_pool_id, units=3, card_fraction_numerator=1,
                          card_fraction_denominator=1, share_numerator=share[0], share_denominator=share[1],
                          started_at=start, ended_at=end)
        row = intervals.get(pk=ids["guaranteed"])
        apps.get_model("usage", "UtilisationHour").objects.create(
            workload_id=row.workload_id, project_id=row.project_id, department_id=row.department_id,
            user_id=row.user_id, node_pool_id=row.node_pool_id, hour=at(3, 0), observed_card_hours=3,
            used_card_hours=1.5, idle_card_hours=1)
        migrate(None)
        days = {day.day: day for day in UsageDay.objects.filter(project__slug="mig-proj")}
        assert set(days) == {at(2, 0), at(3, 0)}
        assert (days[at(2, 0)].day_end, days[at(2, 0)].card_seconds, days[at(2, 0)].within_seconds) == (
            at(3, 0), 3 * 7200 + 3 * 7200, pytest.approx(3 * 7200 + 3 * 7200 / 3))
        assert (days[at(3, 0)].card_seconds, days[at(3, 0)].within_seconds) == (
            3 * 7200 + 3 * 3600, pytest.approx(3 * 7200 + 3 * 3600 / 3))
        assert (days[at(3, 0)].observed_card_hours, days[at(3, 0)].used_card_hours,
                days[at(3, 0)].idle_card_hours) == (3, 1.5, 1)
        assert days[at(2, 0)].observed_card_hours == 0
    finally:
        migrate(None)
