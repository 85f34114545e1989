"""usage 0012: a ledger written when a share of a card counted as a whole unit in the within/over-deserved split gets
its fractional timelines marked for a recompute from their first such interval; the next settle (the watcher's
ledger loop, or any report) splits them at their share, and rewrites their UsageDay rows. Timelines of whole GPUs
are left alone."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.conf import settings

from apps.usage import services, split
from apps.usage.models import PendingRecompute, UsageDay, UsageSlice

from .test_split_migration import migrate

BEFORE = [("usage", "0011_usage_day")]

pytestmark = pytest.mark.django_db(transaction=True)


def at(hour: int) -> datetime:
    return datetime(2026, 3, 2, hour, tzinfo=UTC)


def seed(apps) -> dict[str, object]:
    """On a KAI pool, a project deserving 1 unit ran three preemptible half-card notebooks from 10 to 12 h, and
    another project two whole GPUs against 1 deserved, with the slices and days of the old split: each half counted
    one unit, so 3 units held against 1 deserved put a third of each within."""
    user = apps.get_model(settings.AUTH_USER_MODEL).objects.create(username="fraction-owner")
    pool = apps.get_model("org", "NodePool").objects.create(
        slug="frac-rtx", name="RTX", capacity=16, gpu_resource="nvidia.com/gpu", scheduler="kai",
        gpu_fractions=True)
    department = apps.get_model("org", "Department").objects.create(slug="frac-dept", name="Dept")
    projects = {slug: apps.get_model("org", "Project").objects.create(
        slug=slug, name=slug, department=department, namespace=f"proj-{slug}")
        for slug in ("frac-halves", "frac-whole")}
    periods, workloads = (apps.get_model("usage", "DeservedPeriod").objects,
                          apps.get_model("workloads", "Workload").objects)
    intervals, slices = apps.get_model("usage", "UsageInterval").objects, apps.get_model("usage", "UsageSlice").objects
    days = apps.get_model("usage", "UsageDay").objects
    ids: dict[str, object] = {"projects": projects}
    for slug, names, kind, gpus, fraction, units, card, share in (
            ("frac-halves", ("a", "b", "c"), "notebook", 0, Decimal("0.5"), 1, (1, 2), (1, 3)),
            ("frac-whole", ("w",), "training", 2, None, 2, (1, 1), (1, 2))):
        project = projects[slug]
        periods.create(project=project, department=department, node_pool=pool, deserved=1,
                       started_at=split.BEGINNING, in_force_from=split.BEGINNING)
        for name in names:
            work = workloads.create(project=project, owner=user, kind=kind, name=name, image="busybox",
                                    node_pool=pool, gpus=gpus, gpu_fraction=fraction, status="succeeded")
            row = intervals.create(workload=work, project=project, department=department, user=user,
                                   node_pool=pool, units=units, card_fraction_numerator=card[0],
                                   card_fraction_denominator=card[1], queue="elastic", started_at=at(10),
                                   ended_at=at(12))
            slices.create(interval=row, project=project, department=department, user=user, node_pool=pool,
                          units=units, card_fraction_numerator=card[0], card_fraction_denominator=card[1],
                          share_numerator=share[0], share_denominator=share[1], started_at=at(10), ended_at=at(12))
        held = len(names) * units * card[0] / card[1] * 7200
        days.create(project=project, department=department, node_pool=pool, day=at(0),
                    day_end=datetime(2026, 3, 3, tzinfo=UTC), card_seconds=held,
                    within_seconds=held * share[0] / share[1])
    return ids


def test_fractional_timelines_are_recomputed_at_their_share_and_whole_ones_left_alone():
    try:
        apps = migrate(BEFORE)
        projects = seed(apps)["projects"]
        migrate(None)
        halves, whole = projects["frac-halves"].pk, projects["frac-whole"].pk
        assert list(PendingRecompute.objects.filter(project_id__in=[halves, whole]).values_list(
            "project_id", "since")) == [(halves, at(10))]
        services.usage_timelines_settle()
        assert not PendingRecompute.objects.exists()
        # Three halves are 1.5 units against 1 deserved: two thirds of each within (it was one third).
        assert set(UsageSlice.objects.filter(project_id=halves).values_list(
            "share_numerator", "share_denominator", "started_at", "ended_at")) == {(2, 3, at(10), at(12))}
        assert UsageSlice.objects.filter(project_id=halves).count() == 3
        day = UsageDay.objects.get(project_id=halves)
        assert (day.card_seconds, day.within_seconds) == (pytest.approx(3 * 0.5 * 7200),
                                                          pytest.approx(3 * 0.5 * 7200 * 2 / 3))
        assert set(UsageSlice.objects.filter(project_id=whole).values_list("share_numerator", "share_denominator")) \
            == {(1, 2)}
    finally:
        migrate(None)
