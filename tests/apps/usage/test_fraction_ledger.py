"""GPU-hours of fractional work on a KAI pool: a share of one card counts that share of the card's hours
(apps.usage.services.held_cards), whole GPUs their units as before."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from apps.org import services as org_services
from apps.org.models import Department, NodePool, Project
from apps.usage import reports, services
from apps.usage.models import UsageInterval
from apps.usage.reports import Window
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
