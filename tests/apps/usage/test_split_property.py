"""Property-style: generated organisations and workload mixes (fixed seeds, bounded), written through the ledger
writers in a shuffled order with late observations and quota changes. For every admitted interval, within deserved
plus over quota equals its GPU-hours and within deserved equals a brute-force reference; incremental slices equal a
full recompute; department rows equal the sums of their projects' rows in the showback selector, the CSV and the
API; users and pools add up to the same totals."""

from __future__ import annotations

import csv
import io
import random
from collections import defaultdict
from datetime import timedelta

import pytest
from django.test import Client

from apps.accounts.models import Role
from apps.org.models import Project
from apps.usage import reports, services, split
from apps.usage.models import DeservedPeriod, UsageInterval, UsageSlice
from apps.usage.reports import Group, Window
from apps.workloads import signals
from apps.workloads.models import Workload
from tests.factories import (
    DepartmentFactory,
    NodePoolFactory,
    ProjectFactory,
    QuotaFactory,
    RoleBindingFactory,
    UserFactory,
    WorkloadFactory,
)

from .reports_support import at, expected_within

pytestmark = pytest.mark.django_db
START = at("2026-03-02 00:00")
WINDOW = Window(at("2026-03-01 00:00"), at("2026-03-05 00:00"))
NOW = at("2026-03-04 12:00")
FACTS = ("gpu_hours", "within_quota", "borrowed", "deserved")
# Tolerances: SQLite's julianday() arithmetic is exact to ~1e-8 relative; PostgreSQL's to ~1e-15.


def generate(rng: random.Random) -> list[Workload]:
    """An organisation (pools with card fractions, departments, projects with random deserved quotas, users) and a
    mix of guaranteed and elastic workloads; ledger and quota events applied through the services, partly late."""
    pools = [NodePoolFactory(capacity=64, card_fraction_numerator=numerator, card_fraction_denominator=denominator)
             for numerator, denominator in rng.sample([(1, 1), (3, 7), (1, 8)], rng.randint(1, 2))]
    projects = [ProjectFactory(department=department) for department in
                [DepartmentFactory() for _ in range(rng.randint(2, 3))] for _ in range(rng.randint(1, 3))]
    for project in projects:
        for pool in pools:
            if rng.random() < 0.85:
                QuotaFactory(project=project, node_pool=pool, deserved=rng.randint(0, 5))
    people = [UserFactory() for _ in range(3)]
    events: list[tuple] = []  # (moment, order, action)
    workloads = []
    for n in range(rng.randint(8, 24)):
        work = WorkloadFactory(project=rng.choice(projects), owner=rng.choice(people), node_pool=rng.choice(pools),
                               gpus=rng.choice((1, 1, 2, 3, 4, 6)), preemptible=rng.random() < 0.6, name=f"w{n}",
                               status="running")
        workloads.append(work)
        moment = START + timedelta(minutes=15 * rng.randint(0, 160))
        for _ in range(rng.randint(1, 2)):  # admitted, then maybe preempted and admitted again
            end = moment + timedelta(minutes=15 * rng.randint(1, 40))
            still_open = end > NOW and rng.random() < 0.5
            if rng.random() < 0.2 and not still_open:  # the watcher learns of it only after it ended
                events.append((end + timedelta(minutes=rng.randint(0, 600)), n, ("late", work, moment, end)))
            else:
                events.append((moment, n, ("held", work, moment, None)))
                if not still_open:
                    events.append((end, n, ("released", work, end, None)))
            moment = end + timedelta(minutes=15 * rng.randint(1, 20))
            if still_open:
                break
    for index in range(rng.randint(0, 3)):  # a quota change at some moment
        project, pool = rng.choice(projects), rng.choice(pools)
        moment = START + timedelta(minutes=15 * rng.randint(1, 200))
        events.append((moment, 1000 + index, ("quota", project, pool, moment)))
    for _, _, action in sorted(events, key=lambda event: (event[0], event[1])):
        kind, subject, moment, end = action
        if kind == "held":
            signals.quota_held.send(sender=Workload, workload=subject, at=moment)
        elif kind == "released":
            signals.quota_released.send(sender=Workload, workload_id=subject.pk, at=moment, reason="Succeeded")
        elif kind == "late":
            signals.quota_held.send(sender=Workload, workload=subject, at=moment, ended_at=end, reason="Succeeded")
        else:
            services.deserved_period_set(project_id=subject.pk, department_id=subject.department_id,
                                         node_pool_id=moment.pk, deserved=rng.randint(0, 5), at=end)
    return workloads


def csv_table(client: Client, group: str) -> dict[str, list[str]]:
    response = client.get(f"/usage/reports.csv?start=2026-03-01&end=2026-03-04&group={group}")  # end inclusive
    assert response.status_code == 200
    table = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    return {row[0]: row for row in table[1:]}


@pytest.mark.parametrize("seed", range(8))
def test_generated_organisations_add_up_everywhere(seed):
    rng = random.Random(seed)
    generate(rng)
    admin = RoleBindingFactory(role=Role.ADMIN).user
    intervals = list(UsageInterval.objects.all())
    assert intervals, "the generator always admits something"

    # Incremental writes (in time order, late ones out of order, quota changes between) equal a full recompute.
    incremental = list(UsageSlice.objects.order_by("interval_id", "started_at").values_list(
        "interval_id", "started_at", "ended_at", "share_numerator", "share_denominator"))
    for project_id, pool_id in {(row.project_id, row.node_pool_id) for row in intervals}:
        services.usage_timeline_refresh(project_id=project_id, node_pool_id=pool_id, since=split.BEGINNING)
    assert list(UsageSlice.objects.order_by("interval_id", "started_at").values_list(
        "interval_id", "started_at", "ended_at", "share_numerator", "share_denominator")) == incremental

    # Every interval: within + over = its hours, within = the brute-force reference.
    periods: dict[tuple[int, int], list] = defaultdict(list)
    for period in DeservedPeriod.objects.all():
        periods[(period.project_id, period.node_pool_id)].append((period.started_at, period.deserved))
    reference = expected_within(intervals, WINDOW.start, NOW, dict(periods))
    holders = list(reports.holders(user=admin, window=WINDOW, filters=reports.HolderFilters(), now=NOW))
    for row in holders:
        row.over_hours = reports.held_split(row.held_hours, row.within_hours)[1]
    # The fixed seeds all generate both sides of the split (a generator that never went over quota proves little).
    assert any(row.over_hours > 0 for row in holders) and any(row.within_hours > 0 for row in holders)
    assert {row.pk for row in holders} == {row.pk for row in intervals}
    for row in holders:
        assert row.within_hours + row.over_hours == pytest.approx(row.held_hours, rel=1e-6, abs=1e-6)
        assert row.within_hours == pytest.approx(reference[row.pk], rel=1e-6, abs=1e-6), row
        assert row.over_hours >= 0

    # The selector: departments are the sums of their projects; users, pools and projects add up to one total.
    by = {group: reports.usage_report(user=admin, group=group, window=WINDOW, now=NOW) for group in Group}
    department_of = dict(Project.objects.values_list("pk", "department_id"))
    sums: dict[int, dict[str, float]] = defaultdict(lambda: dict.fromkeys(FACTS, 0.0))
    for project in by[Group.PROJECT].rows:
        department_id = department_of[project.key]
        for fact in FACTS:
            sums[department_id][fact] += getattr(project, fact) or 0.0
    assert {row.key for row in by[Group.DEPARTMENT].rows} == set(sums)
    for department in by[Group.DEPARTMENT].rows:
        for fact in FACTS:
            assert (getattr(department, fact) or 0.0) == pytest.approx(sums[department.key][fact], rel=1e-6,
                                                                       abs=1e-6), fact
    within_total = sum(reference.values())
    held_total = sum(row.held_hours for row in holders)
    for group in Group:
        total = by[group].total
        assert total.within_quota == pytest.approx(within_total, rel=1e-6, abs=1e-6), group
        assert total.gpu_hours == pytest.approx(held_total, rel=1e-6, abs=1e-6), group
        assert total.within_quota + total.borrowed == pytest.approx(total.gpu_hours, rel=1e-6, abs=1e-6)
    for user in by[Group.USER].rows:
        mine = [row for row in holders if row.user_id == user.key]
        assert user.within_quota == pytest.approx(sum(row.within_hours for row in mine), rel=1e-6, abs=1e-6)
        assert user.borrowed == pytest.approx(sum(row.over_hours for row in mine), rel=1e-6, abs=1e-6)

    # The CSV and the API show the same figures, departments still the sums of their projects. They count up to the
    # real now, after the window: open intervals up to its end.
    by[Group.DEPARTMENT] = reports.usage_report(user=admin, group=Group.DEPARTMENT, window=WINDOW)
    assert by[Group.DEPARTMENT].total.gpu_hours > held_total - 1e-9
    client = Client()
    client.force_login(admin)
    projects_csv, departments_csv = csv_table(client, "project"), csv_table(client, "department")
    columns = {"gpu_hours": 2, "within_quota": 3, "borrowed": 4, "deserved": 5}  # project rows: one further right
    for department in by[Group.DEPARTMENT].rows:
        cells = departments_csv[department.slug]
        for fact, column in columns.items():
            assert float(cells[column]) == pytest.approx(getattr(department, fact), abs=1e-3)
            children = [float(row[column + 1]) for row in projects_csv.values() if row[2] == department.slug]
            assert float(cells[column]) == pytest.approx(sum(children), abs=1e-3 * (len(children) + 1))
    api = {}
    for group in ("project", "department"):
        response = client.get(f"/api/v1/usage/?group_by={group}&start=2026-03-01T00:00Z&end=2026-03-05T00:00Z")
        assert response.status_code == 200
        api[group] = response.json()["rows"]
    fields = {"gpu_hours": "gpu_hours", "within_quota": "gpu_hours_within_quota", "borrowed": "gpu_hours_borrowed",
              "deserved": "deserved_gpu_hours"}
    for department in api["department"]:
        children = [row for row in api["project"] if row["department_slug"] == department["department_slug"]]
        for fact, field in fields.items():
            expected = getattr(next(r for r in by[Group.DEPARTMENT].rows if r.key == department["department"]), fact)
            assert department[field] == pytest.approx(expected, abs=1e-4)
            assert department[field] == pytest.approx(sum(row[field] for row in children),
                                                      abs=1e-4 * (len(children) + 1))
            assert department[field] >= 0

