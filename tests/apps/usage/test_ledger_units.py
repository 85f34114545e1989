"""The ledger of a workload whose held units change while it runs (an inference service's ready replicas): changes
at one and the same instant, or dated before the stretch they end, count exactly, through `inference_observe` as the
watcher calls it and through the ledger's own writer with generated sequences (fixed seeds) against a reference."""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timedelta

import pytest

from apps.org import services as org_services
from apps.org.models import Project
from apps.usage import reports, services, split
from apps.usage.models import UsageInterval, UsageSlice
from apps.usage.reports import Group, Window
from apps.workloads import services as workload_services
from apps.workloads import signals
from apps.workloads.models import Kind, Status, Workload
from tests.factories import WorkloadFactory

from .reports_support import at, expected_hours, quotas_in_force_since

pytestmark = pytest.mark.django_db
MARCH = Window(at("2026-03-01 00:00"), at("2026-04-01 00:00"))
AFTER = at("2026-06-01 00:00")


@pytest.fixture
def service(demo) -> Workload:
    """vision's running inference service of 4 replicas of 2 pods x 1 GPU on a serving pool, none ready yet."""
    pool = org_services.node_pool_create(actor=demo["admin"], slug="serve-l4", name="serve-l4 pool",
                                         gpu_resource="nvidia.com/gpu", capacity=8, serving=True,
                                         node_labels={"portal.gpu/pool": "serve-l4"})
    vision = Project.objects.get(slug="vision")
    org_services.serving_reservation_create(actor=demo["admin"], project=vision, node_pool=pool, cards=8)
    quotas_in_force_since("2026-01-01 00:00")
    return WorkloadFactory(project=vision, owner=demo["alice"], kind=Kind.INFERENCE, node_pool=pool, gpus=1, pods=2,
                           replicas=4, serving_port=8000, priority_class=None, preemptible=False,
                           status=Status.RUNNING, model_label="llama-3-70b", k8s_uid="0f0e0d0c-0000-4000-8000-1")


def observe(workload: Workload, ready: int, moment: str) -> None:
    workload_services.inference_observe(workload_id=workload.pk, uid=workload.k8s_uid, ready=ready, replicas=4,
                                        updated=4, rolled_out=True, at=at(moment))


def stretches(workload: Workload) -> list[tuple[int, datetime, datetime | None]]:
    return list(UsageInterval.objects.filter(workload=workload).order_by("started_at").values_list(
        "units", "started_at", "ended_at"))


def test_a_fall_and_rise_at_one_instant_loses_nothing(service):
    """A group replaced within the clock's resolution: ready 2 -> 1 -> 2 at 11:00, and 3 -> 0 -> 3 at 12:00 (every
    group replaced at once), the service stopped at 13:00: 2 groups x 2 pods for 2 h, 3 x 2 for 1 h: 14 GPU-hours."""
    observe(service, 2, "2026-03-02 10:00")
    observe(service, 1, "2026-03-02 11:00")
    observe(service, 2, "2026-03-02 11:00")
    observe(service, 3, "2026-03-02 12:00")
    observe(service, 0, "2026-03-02 12:00")
    observe(service, 3, "2026-03-02 12:00")
    observe(service, 3, "2026-03-02 12:00")  # a replay writes nothing
    signals.quota_released.send(sender=Workload, workload_id=service.pk, at=at("2026-03-02 13:00"), reason="Stopped")
    assert stretches(service) == [  # none lasting no time
        (4, at("2026-03-02 10:00"), at("2026-03-02 11:00")), (4, at("2026-03-02 11:00"), at("2026-03-02 12:00")),
        (6, at("2026-03-02 12:00"), at("2026-03-02 13:00"))]
    vision = {row.slug: row for row in reports.usage_report(
        user=service.owner, group=Group.PROJECT, window=MARCH, now=AFTER).rows}["vision"]
    assert vision.gpu_hours == pytest.approx(14.0)


def test_a_change_dated_before_the_stretch_it_ends_counts_from_that_stretch_on(service):
    """The pods date the changes: a fall dated 11:30 seen after a rise dated 12:00 ends nothing before 12:00, and a
    rise dated before a fall to none starts from that fall."""
    observe(service, 1, "2026-03-02 10:00")
    observe(service, 2, "2026-03-02 12:00")
    observe(service, 1, "2026-03-02 11:30")  # counts from 12:00: the 2 held there last no time
    observe(service, 0, "2026-03-02 13:00")
    observe(service, 2, "2026-03-02 12:45")  # counts from 13:00
    signals.quota_released.send(sender=Workload, workload_id=service.pk, at=at("2026-03-02 14:00"), reason="Stopped")
    assert stretches(service) == [(2, at("2026-03-02 10:00"), at("2026-03-02 12:00")),
                                  (2, at("2026-03-02 12:00"), at("2026-03-02 13:00")),
                                  (4, at("2026-03-02 13:00"), at("2026-03-02 14:00"))]


@pytest.mark.parametrize("seed", range(8))
def test_generated_changes_count_as_a_reference_does(service, seed):
    """Changes of held units as the watcher sends them (each a new count), many at one instant, some falls dated
    before the last change: the GPU-hours are those of the reference (each change counts from the latest of its own
    time and every earlier change's), no stretch lasts no time or overlaps another, and the slices are those of a
    full recompute."""
    rng = random.Random(seed)
    moment, last, units_held = at("2026-03-02 10:00"), at("2026-03-02 10:00"), 0
    reference: list[tuple[datetime, int]] = []  # (from, units), in effect order
    for _ in range(40):
        moment += timedelta(minutes=rng.choice([0, 0, 0, 5, 10, 30]))
        dated = moment - timedelta(minutes=rng.choice([0, 0, 0, 15]) if units_held else 0)  # late, while held
        units = rng.choice([units for units in (0, 2, 4, 6, 8) if units != units_held])
        services.usage_interval_units_set(workload=service, at=dated, units=units, reason="ReadyReplicasChanged")
        last = max(last, dated)
        reference.append((last, units))
        units_held = units
    end = last + timedelta(hours=1)
    signals.quota_released.send(sender=Workload, workload_id=service.pk, at=end, reason="Stopped")
    expected = sum(units * (until - since).total_seconds() / 3600 for (since, units), (until, _) in zip(
        reference, [*reference[1:], (end, 0)], strict=True))
    rows = list(UsageInterval.objects.filter(workload=service))
    assert expected_hours(rows, MARCH.start, MARCH.end) == pytest.approx(expected)
    vision = {row.slug: row for row in reports.usage_report(
        user=service.owner, group=Group.PROJECT, window=MARCH, now=AFTER).rows}.get("vision")
    assert (vision.gpu_hours if vision else 0.0) == pytest.approx(expected)
    held = stretches(service)
    assert all(until is None or since < until for _, since, until in held)  # none lasts no time
    assert all(first[2] is not None and first[2] <= second[1] for first, second in itertools.pairwise(held))
    assert units_held == 0 or held[-1][0] == units_held
    incremental = list(UsageSlice.objects.order_by("interval_id", "started_at").values_list(
        "interval_id", "started_at", "ended_at", "units", "share_numerator", "share_denominator"))
    services.usage_timeline_refresh(project_id=service.project_id, node_pool_id=service.node_pool_id,
                                    since=split.BEGINNING)
    assert list(UsageSlice.objects.order_by("interval_id", "started_at").values_list(
        "interval_id", "started_at", "ended_at", "units", "share_numerator", "share_denominator")) == incremental

