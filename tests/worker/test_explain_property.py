"""Property: over generated organisations and workload mixes run by kubesim (fixed seeds, bounded), every waiting
workload's reason code agrees with the quota figures the dashboard (`apps.usage.selectors.quota_dashboard`) shows
at that moment, its numbers are the dashboard's, and a researcher's wording names no project they may not see; and
the ledger the watcher wrote adds up: every admitted interval's within-deserved plus over-quota hours are its hours
(within deserved as a brute-force reference computes it from the deserved periods), and department rows are the
sums of their projects' in the GPU-hour report and on the quota dashboard (in use, borrowed, lent, pending).

The mirror comes from the real watcher code (`Watcher.resync` and `refresh_positions`, called in the test's thread
so each check sees one settled moment); submissions go through the service and the real submit task."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from apps.accounts.models import Role
from apps.accounts.services import role_binding_create
from apps.org import services as org_services
from apps.org.models import Department, NodePool, Project
from apps.usage import reports
from apps.usage.models import DeservedPeriod, UsageInterval
from apps.usage.reports import Group, HolderFilters, Window
from apps.usage.selectors import quota_dashboard
from apps.workloads import services
from apps.workloads.explain import (
    ADMITTING,
    BEHIND,
    DEPARTMENT_LIMIT,
    NEVER_FITS,
    NOT_LENDABLE,
    POOL_FULL,
    PREEMPTED,
    PREEMPTING,
    PROJECT_DESERVED,
    PROJECT_LIMIT,
    explain_workloads,
)
from apps.workloads.models import QUEUED_STATUSES, Kind, Status, Workload
from tests.apps.usage.reports_support import expected_hours, expected_within
from worker import tasks
from worker.kueue_sync import desired_from_database, reconcile
from worker.watcher import Watcher

pytestmark = pytest.mark.slow

# Chosen (from 1-10) so that together they wait for every quota reason: project and department limits, the
# deserved quota of non-preemptible work, a full pool, cards kept by projects that do not lend, and never fits.
SEEDS = [3, 4, 6, 7, 8]
QUOTA_REASONS = {PROJECT_LIMIT, PROJECT_DESERVED, DEPARTMENT_LIMIT, POOL_FULL, NOT_LENDABLE}


@dataclass
class World:
    pool: NodePool
    departments: list[Department] = field(default_factory=list)
    projects: list[Project] = field(default_factory=list)


def split(rng: random.Random, total: int, parts: int) -> list[int]:
    """`parts` non-negative integers adding up to at most `total`."""
    cuts = sorted(rng.randint(0, total) for _ in range(parts))
    return [b - a for a, b in zip([0, *cuts], cuts, strict=False)]


def generate(rng: random.Random, admin, seed: int) -> World:
    """A pool on kubesim's H100 nodes with two or three departments of one to three projects each."""
    capacity = rng.randint(8, 24)
    pool = org_services.node_pool_create(actor=admin, slug=f"gen{seed}", name=f"Gen{seed} pool",
                                         gpu_resource="nvidia.com/gpu", capacity=capacity,
                                         node_labels={"portal.gpu/pool": "h100"})
    world = World(pool=pool)
    for d, deserved in enumerate(split(rng, capacity, rng.randint(2, 3))):
        department = org_services.department_create(actor=admin, slug=f"g{seed}d{d}", name=f"Gen{seed} Dept{d}")
        limit = None if rng.random() < 0.3 else deserved + rng.randint(0, 6)
        org_services.quota_set(actor=admin, node_pool=pool, department=department, deserved=deserved, limit=limit)
        world.departments.append(department)
        for p, project_deserved in enumerate(split(rng, deserved, rng.randint(1, 3))):
            project = org_services.project_create(actor=admin, department=department, slug=f"g{seed}d{d}p{p}",
                                                  name=f"Gen{seed} Proj{d}-{p}", does_not_lend=rng.random() < 0.35)
            project_limit = None if rng.random() < 0.3 else project_deserved + rng.randint(0, 6)
            org_services.quota_set(actor=admin, node_pool=pool, project=project, deserved=project_deserved,
                                   limit=project_limit)
            world.projects.append(project)
    return world


def settle(watcher: Watcher) -> None:
    watcher.resync()
    watcher.refresh_positions()


def figures(user, pool: NodePool):
    (dashboard,) = [d for d in quota_dashboard(user=user) if d.pool.pk == pool.pk]
    projects = {p.slug: (p, d) for d in dashboard.departments for p in d.children}
    return dashboard, projects


def check(world: World, admin, researcher, *, settled: bool) -> dict[str, int]:
    """Every waiting workload's reason against the dashboard; returns how often each reason came up."""
    rows = list(Workload.objects.filter(node_pool=world.pool).select_related("project", "node_pool"))
    explanations = explain_workloads(rows, viewer=admin)
    dashboard, projects = figures(admin, world.pool)
    capacity, pool_used = world.pool.capacity, dashboard.cluster.used
    seen: dict[str, int] = {}
    for workload in rows:
        explanation = explanations[workload.pk]
        if workload.status not in (*QUEUED_STATUSES, Status.PREEMPTED, Status.REJECTED):
            continue
        assert explanation is not None, workload
        reason, numbers, units = explanation.reason, explanation.numbers, workload.gpu_units
        seen[reason] = seen.get(reason, 0) + 1
        project, department = projects[workload.project.slug]
        guaranteed_used = sum((q["used"] for q in project.queues if q["guaranteed"]), Decimal(0))
        context = f"{workload} {workload.status}/{workload.status_reason}: {explanation.sentence} | {numbers}"
        # The numbers are the dashboard's.
        assert numbers["project_used"] == project.used and numbers["limit"] == project.limit, context
        assert numbers["deserved"] == project.deserved, context
        assert numbers["department_used"] == department.used, context
        assert numbers["department_limit"] == department.limit, context
        assert numbers["pool_used"] == pool_used and numbers["pool_capacity"] == capacity, context
        within_project = project.limit is None or project.used + units <= project.limit
        within_department = department.limit is None or department.used + units <= department.limit
        if reason == PROJECT_LIMIT:
            assert not within_project, context
        elif reason == PROJECT_DESERVED:
            assert not workload.preemptible and guaranteed_used + units > project.deserved, context
        elif reason == DEPARTMENT_LIMIT:
            assert within_project and not within_department, context
        elif reason == POOL_FULL:
            assert within_project and within_department and pool_used + units > capacity, context
        elif reason == NOT_LENDABLE:
            assert within_project and within_department and pool_used + units <= capacity, context
            idle_kept = sum((max(Decimal(0), p.deserved - sum((q["used"] for q in p.queues if q["guaranteed"]),
                                                             Decimal(0)))
                             for p, _ in projects.values() if not p.lends), Decimal(0))
            assert 0 < numbers["held_back"] <= idle_kept, context
        elif reason == PREEMPTING:
            assert workload.status_reason == "WaitingForPreemptedWorkloads" or (
                not workload.preemptible and guaranteed_used + units <= project.deserved), context
        elif reason == PREEMPTED:
            assert workload.status == Status.PREEMPTED, context
        elif reason == NEVER_FITS:  # Kueue, doing the same arithmetic on the same tree, agrees
            assert workload.status == Status.REJECTED and workload.status_reason == "ExceedsMaxQuota", context
            assert numbers["change"] in ("project_limit", "department_limit", "not_lendable", "request"), context
        else:
            assert reason in (BEHIND, ADMITTING), context
            # Room for it by the dashboard's figures: a settled kubesim would have admitted it.
            assert within_project and within_department and pool_used + units <= capacity, context
            assert not settled or workload.status_reason in ("Created", "PendingEvaluation"), context
        if reason in QUOTA_REASONS:
            assert workload.status_reason != "ExceedsMaxQuota", context
            assert numbers["more_needed"] > 0, context
    # A researcher's wording names no project they may not see.
    mine = world.projects[0]  # the researcher's project
    others = [p.name for p in world.projects if p.pk != mine.pk]
    for_researcher = explain_workloads([w for w in rows if w.project_id == mine.pk], viewer=researcher)
    for explanation in for_researcher.values():
        if explanation is not None:
            for name in others:
                assert name not in explanation.sentence and name not in str(explanation.numbers), (name, explanation)
    return seen


def check_ledger(world: World, admin, now: datetime) -> int:
    """The GPU-hours of the pool's admitted intervals, on the cluster's clock `now`; returns how many intervals."""
    intervals = list(UsageInterval.objects.filter(node_pool=world.pool))
    if not intervals:
        return 0
    window = Window(min(row.started_at for row in intervals) - timedelta(hours=1), now + timedelta(hours=1))
    periods: dict[tuple[int, int], list] = defaultdict(list)
    for period in DeservedPeriod.objects.filter(node_pool=world.pool):
        periods[(period.project_id, period.node_pool_id)].append((period.started_at, period.deserved))
    reference = expected_within(intervals, window.start, now, dict(periods))
    held = list(reports.holders(user=admin, window=window, filters=HolderFilters(node_pool_id=world.pool.pk),
                                now=now))
    assert {row.pk for row in held} == {row.pk for row in intervals}
    for row in held:
        within, over = reports.held_split(row.held_hours, row.within_hours)
        context = f"{row.workload_id} {row.started_at}-{row.ended_at} x{row.units}: {within} + {over}"
        assert row.held_hours == pytest.approx(expected_hours([row], window.start, now), rel=1e-6, abs=1e-6), context
        assert within + over == pytest.approx(row.held_hours, rel=1e-9, abs=1e-9), context
        assert within == pytest.approx(reference[row.pk], rel=1e-6, abs=1e-6), context
        assert over >= 0 and within >= 0, context
    # The report: each department is the sum of its projects.
    project_rows = reports.usage_report(user=admin, group=Group.PROJECT, window=window, now=now,
                                        filters=reports.Filters(node_pool_id=world.pool.pk)).rows
    department_rows = reports.usage_report(user=admin, group=Group.DEPARTMENT, window=window, now=now,
                                           filters=reports.Filters(node_pool_id=world.pool.pk)).rows
    department_of = {p.pk: p.department_id for p in world.projects}
    for department in department_rows:
        children = [row for row in project_rows if department_of.get(row.key) == department.key]
        for fact in ("gpu_hours", "within_quota", "borrowed"):
            assert (getattr(department, fact) or 0.0) == pytest.approx(
                sum(getattr(row, fact) or 0.0 for row in children), rel=1e-6, abs=1e-6), (department.key, fact)
    assert sum(row.gpu_hours or 0.0 for row in project_rows) == pytest.approx(
        sum(row.held_hours for row in held), rel=1e-6, abs=1e-6)
    # The quota dashboard: each department's figures are the sums of its projects' (lent and borrowed included).
    dashboard, _ = figures(admin, world.pool)
    for department in dashboard.departments:
        for fact in ("used", "borrowed", "lent", "pending"):
            assert getattr(department, fact) == sum(getattr(p, fact) for p in department.children), \
                (department.slug, fact)
    return len(intervals)


@pytest.mark.parametrize("seed", SEEDS)
def test_reasons_agree_with_the_dashboard(seed, kubesim, cluster, org):
    rng = random.Random(seed)
    admin = org["admin"]
    world = generate(rng, admin, seed)
    researcher = get_user_model().objects.create(username=f"gen{seed}-researcher")
    role_binding_create(actor=admin, role=Role.RESEARCHER, user=researcher, project=world.projects[0])
    reconcile(cluster, desired_from_database())
    watcher = Watcher(cluster)  # no threads: each check sees one settled moment
    submitted = 0
    for index in range(rng.randint(14, 20)):
        project = rng.choice(world.projects)
        preemptible = rng.random() < 0.6
        try:
            workload = services.workload_submit(
                actor=admin, project=project, kind=Kind.TRAINING, name=f"w{index}", image="pytorch/pytorch:2.4.0",
                command=["sleep", str(rng.choice([60, 300, 3600]))], node_pool=world.pool,
                gpus=rng.choice([1, 2, 2, 4]), pods=rng.choice([1, 1, 2]), model_label="m", data_class="public",
                preemptible=preemptible)
        except ValidationError:
            continue  # the form refuses what could never run (over the limit, non-preemptible over deserved)
        assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
        submitted += 1
        kubesim.advance(1)
    assert submitted >= 3
    seen: dict[str, int] = {}
    now = datetime.fromisoformat(kubesim.advance(0))
    for step in range(3):
        settle(watcher)
        for reason, count in check(world, admin, researcher, settled=True).items():
            seen[reason] = seen.get(reason, 0) + count
        assert check_ledger(world, admin, now) > 0, "nothing was ever admitted"
        now = datetime.fromisoformat(kubesim.advance(rng.choice([70, 310]) if step < 2 else 0))
    assert seen, "no workload ever waited: the generator is too generous"
