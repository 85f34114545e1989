"""GPU-hours of fractional work on a KAI pool: a share of one card counts that share of the card's hours
(apps.usage.services.held_cards), whole GPUs their units as before."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from apps.org import services as org_services
from apps.org.models import Department, NodePool, Project
from apps.usage import reports, services
from apps.usage.history import quota_history
from apps.usage.models import UsageDay, UsageInterval, UsageSlice
from apps.usage.reports import Granularity, Group, Window
from apps.workloads import signals
from apps.workloads.models import Workload

from .reports_support import at, workload

pytestmark = pytest.mark.django_db
MARCH = Window(at("2026-03-01 00:00"), at("2026-04-01 00:00"))
AFTER = at("2026-06-01 00:00")


@pytest.fixture
def rtx(demo):
    pool = org_services.node_pool_create(actor=demo["admin"], slug="rtx", name="RTX", gpu_resource="nvidia.com/gpu",
                                         capacity=16, scheduler="kai", gpu_fractions=True)
    org_services.quota_set(actor=demo["admin"], node_pool=pool, department=Department.objects.get(slug="research"),
                           deserved=4, limit=None)
    org_services.quota_set(actor=demo["admin"], node_pool=pool, project=Project.objects.get(slug="vision"),
                           deserved=2, limit=None)
    return pool


def held(work: Workload, start: str, end: str) -> None:
    signals.quota_held.send(sender=Workload, workload=work, at=at(start))
    signals.quota_released.send(sender=Workload, workload_id=work.pk, at=at(end), reason="Succeeded")


def hours(demo, work: Workload) -> float:
    return sum(row.held_hours for row in reports.holders(user=demo["admin"], window=MARCH,
                                                         filters=reports.HolderFilters(), now=AFTER)
               if row.workload_id == work.pk)


def test_half_a_card_for_ninety_minutes_is_three_quarters_of_a_gpu_hour(demo, rtx):
    half = workload(demo["alice"], pool="rtx", name="nb")
    Workload.objects.filter(pk=half.pk).update(gpu_fraction=Decimal("0.5"))
    half.refresh_from_db()
    assert services.held_cards(half) == (1, Fraction(1, 2))
    held(half, "2026-03-02 10:00", "2026-03-02 11:30")
    interval = UsageInterval.objects.get(workload=half)
    assert (interval.units, interval.card_fraction_numerator, interval.card_fraction_denominator) == (1, 1, 2)
    assert hours(demo, half) == pytest.approx(0.75)


def test_whole_gpus_count_their_units_and_a_sliced_pool_its_own_fraction(demo, rtx):
    whole = workload(demo["alice"], pool="rtx", gpus=2, name="whole")
    held(whole, "2026-03-02 10:00", "2026-03-02 11:30")
    assert hours(demo, whole) == pytest.approx(3.0)
    mig = NodePool.objects.get(slug="a100-mig-3g40gb")
    assert services.held_cards(workload(demo["alice"], pool=mig.slug, gpus=2)) == (2, mig.card_fraction)


def _share(demo, name: str, fraction: str | None, start: str, end: str) -> Workload:
    """Vision's preemptible work on rtx: `fraction` of one card (None: one whole GPU), held from `start` to `end`."""
    work = workload(demo["alice"], pool="rtx", name=name)
    if fraction is not None:
        Workload.objects.filter(pk=work.pk).update(gpus=0, gpu_fraction=Decimal(fraction))
        work.refresh_from_db()
    held(work, start, end)
    return work


def test_the_within_deserved_split_counts_a_share_of_a_card_as_that_share(demo, rtx):
    """Vision deserves 2 rtx units. 10:00-11:00 a whole GPU and two halves hold 2 units: all within; 11:00-12:00 a
    third half makes 2.5, so 2 of them are within (a share of 4/5 each) and 0.5 over. Every figure agrees: the
    slices, showback, the holders report, UsageDay, use over time and the quota history."""
    whole = _share(demo, "whole", None, "2026-03-02 10:00", "2026-03-02 12:00")
    halves = [_share(demo, f"half-{n}", "0.5", "2026-03-02 10:00", "2026-03-02 12:00") for n in range(2)]
    late = _share(demo, "late", "0.5", "2026-03-02 11:00", "2026-03-02 12:00")
    shares = {(row.interval.workload_id, row.started_at.hour): (row.share_numerator, row.share_denominator)
              for row in UsageSlice.objects.select_related("interval")}
    assert shares == {(whole.pk, 10): (1, 1), (whole.pk, 11): (4, 5), (halves[0].pk, 10): (1, 1),
                      (halves[0].pk, 11): (4, 5), (halves[1].pk, 10): (1, 1), (halves[1].pk, 11): (4, 5),
                      (late.pk, 11): (4, 5)}
    report = reports.usage_report(user=demo["admin"], group=Group.POOL, window=MARCH, now=AFTER)
    row = next(row for row in report.rows if row.key == rtx.pk)
    assert (row.gpu_hours, row.within_quota, row.borrowed) == (pytest.approx(4.5), pytest.approx(4.0),
                                                               pytest.approx(0.5))
    holders = reports.holders(user=demo["admin"], window=MARCH, filters=reports.HolderFilters(), now=AFTER)
    within = {item.workload_id: reports.held_split(item.held_hours, item.within_hours) for item in holders}
    assert within[whole.pk] == (pytest.approx(1.8), pytest.approx(0.2))
    assert within[late.pk] == (pytest.approx(0.4), pytest.approx(0.1))
    days = UsageDay.objects.filter(project__slug="vision", node_pool=rtx)
    assert sum(day.card_seconds for day in days) / 3600 == pytest.approx(4.5)
    assert sum(day.within_seconds for day in days) / 3600 == pytest.approx(4.0)
    for granularity in (Granularity.HOUR, Granularity.DAY):
        over_time = reports.use_over_time(user=demo["admin"], window=MARCH, granularity=granularity, now=AFTER)
        series = next(series for series in over_time.pools if series.pool.pk == rtx.pk)
        assert (series.card_hours, series.within_hours) == (pytest.approx(4.5), pytest.approx(4.0))
    history = quota_history(project=Project.objects.get(slug="vision"), pool=rtx, span="week",
                            now=at("2026-03-03 00:00"))
    assert sum(history.used) == pytest.approx(4.5)  # hourly steps: unit-hours
    assert history.borrowed_card_hours == pytest.approx(0.5)
