"""The split kept by the ledger writers: the services the watcher's transitions call (through the workloads app's
signals), quota changes through the org services, replays, late observations, and the quota dashboard's roll-ups."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.cluster.models import ClusterQueueState
from apps.org import services as org_services
from apps.org.models import NodePool, Project, Quota
from apps.usage import reports, selectors, services, split
from apps.usage.models import DeservedPeriod, UsageInterval, UsageSlice
from apps.usage.reports import Group, Window
from apps.workloads import signals
from apps.workloads.models import Workload

from .reports_support import at, expected_within, quotas_in_force_since, workload

pytestmark = pytest.mark.django_db
MARCH = Window(at("2026-03-01 00:00"), at("2026-04-01 00:00"))
AFTER = at("2026-06-01 00:00")


def held(work: Workload, start: str, end: str | None = None) -> None:
    """What the watcher's transitions announce: quota held from `start` (and released at `end`)."""
    signals.quota_held.send(sender=Workload, workload=work, at=at(start))
    if end is not None:
        signals.quota_released.send(sender=Workload, workload_id=work.pk, at=at(end), reason="Succeeded")


def rows(report: reports.Report) -> dict[str, reports.ReportRow]:
    return {row.slug: row for row in report.rows}


def slices() -> list[tuple]:
    return list(UsageSlice.objects.order_by("interval_id", "started_at").values_list(
        "interval_id", "started_at", "ended_at", "share_numerator", "share_denominator", "units", "project_id",
        "department_id", "user_id", "node_pool_id"))


def test_bob_preemptible_inside_nlps_deserved_is_within_not_borrowed(demo):
    """The issue's case: bob used 4 of NLP's 4 deserved H100 with preemptible work for 6 minutes."""
    run = workload(demo["bob"], project="nlp", gpus=4, preemptible=True)
    held(run, "2026-03-02 10:00", "2026-03-02 10:06")
    (interval,) = UsageInterval.objects.all()
    assert interval.queue == UsageInterval.Queue.ELASTIC  # it did run in the elastic queue
    report = reports.usage_report(user=demo["admin"], group=Group.USER, window=MARCH, now=AFTER)
    bob = rows(report)["bob"]
    assert (bob.gpu_hours, bob.within_quota, bob.borrowed) == (pytest.approx(0.4), pytest.approx(0.4), 0.0)
    (holder,) = reports.holders(user=demo["bob"], window=MARCH, filters=reports.HolderFilters(), now=AFTER)
    assert holder.held_hours == pytest.approx(0.4)
    assert reports.held_split(holder.held_hours, holder.within_hours) == (pytest.approx(0.4), 0.0)


def test_work_above_deserved_splits_exactly_at_d_between_users(demo):
    # NLP deserves 4 H100: bob's 3 and lead's 3 preemptible units for one hour are 4 within, 2 over.
    held(workload(demo["bob"], project="nlp", gpus=3), "2026-03-02 10:00", "2026-03-02 11:00")
    held(workload(demo["lead"], project="nlp", gpus=3), "2026-03-02 10:00", "2026-03-02 11:00")
    nlp = rows(reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=MARCH, now=AFTER))["nlp"]
    assert (nlp.within_quota, nlp.borrowed) == (pytest.approx(4.0), pytest.approx(2.0))
    users = rows(reports.usage_report(user=demo["admin"], group=Group.USER, window=MARCH, now=AFTER))
    assert users["bob"].within_quota == pytest.approx(2.0) and users["bob"].borrowed == pytest.approx(1.0)
    assert users["lead"].within_quota == pytest.approx(2.0) and users["lead"].borrowed == pytest.approx(1.0)


def test_mixed_guaranteed_and_elastic(demo):
    # Vision deserves 4: alice's non-preemptible 3 for 2 h fill deserved first; the preemptible 2 share the last unit.
    held(workload(demo["alice"], gpus=3, preemptible=False), "2026-03-02 10:00", "2026-03-02 12:00")
    elastic = workload(demo["lead"], gpus=2, preemptible=True)
    held(elastic, "2026-03-02 10:00", "2026-03-02 14:00")
    vision = rows(reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=MARCH, now=AFTER))["vision"]
    # 10-12: 5 held, 4 within (3 + 1); 12-14: the elastic 2 alone, within.
    assert (vision.gpu_hours, vision.within_quota, vision.borrowed) == (
        pytest.approx(14.0), pytest.approx(12.0), pytest.approx(2.0))
    by_workload = {row.workload_id: reports.held_split(row.held_hours, row.within_hours) for row in reports.holders(
        user=demo["admin"], window=MARCH, filters=reports.HolderFilters(), now=AFTER)}
    # The elastic 2 units: half within for 2 h (the one unit left), then all within for 2 h.
    assert by_workload[elastic.pk] == (pytest.approx(2 * 0.5 * 2 + 2 * 2), pytest.approx(2 * 0.5 * 2))


def test_replays_and_late_observations(demo):
    first = workload(demo["bob"], project="nlp", gpus=4)
    held(first, "2026-03-02 10:00")
    before = slices()
    held(first, "2026-03-02 10:00")  # a replayed admission: nothing changes
    assert slices() == before
    # The watcher learns late of a second workload that held 4 units from 10:30 to 11:00 (already over).
    late = workload(demo["lead"], project="nlp", gpus=4)
    signals.quota_held.send(sender=Workload, workload=late, at=at("2026-03-02 10:30"), ended_at=at("2026-03-02 11:00"),
                            reason="Succeeded")
    signals.quota_released.send(sender=Workload, workload_id=first.pk, at=at("2026-03-02 12:00"), reason="Succeeded")
    signals.quota_released.send(sender=Workload, workload_id=first.pk, at=at("2026-03-02 13:00"), reason="Again")
    assert UsageInterval.objects.get(workload=first).ended_at == at("2026-03-02 12:00")
    nlp = rows(reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=MARCH, now=AFTER))["nlp"]
    assert (nlp.gpu_hours, nlp.within_quota, nlp.borrowed) == (pytest.approx(10.0), pytest.approx(8.0),
                                                               pytest.approx(2.0))
    # Incremental writes gave exactly the rows a full recompute gives (canonical slices).
    incremental = slices()
    nlp_pk, h100 = Project.objects.get(slug="nlp").pk, NodePool.objects.get(slug="h100").pk
    services.usage_timeline_refresh(project_id=nlp_pk, node_pool_id=h100, since=split.BEGINNING)
    assert slices() == incremental
    assert [(s[1], s[2], s[3], s[4]) for s in incremental if s[0] == first.usage_intervals.get().pk] == [
        (at("2026-03-02 10:00"), at("2026-03-02 10:30"), 1, 1), (at("2026-03-02 10:30"), at("2026-03-02 11:00"), 1, 2),
        (at("2026-03-02 11:00"), at("2026-03-02 12:00"), 1, 1)]


def test_quota_changes_count_from_then_on_and_keep_history(demo):
    """Deserved is versioned: a change through the org services splits from its moment on, not backwards."""
    quotas_in_force_since("2026-01-01 00:00")
    nlp, h100 = Project.objects.get(slug="nlp"), NodePool.objects.get(slug="h100")
    assert list(DeservedPeriod.objects.filter(project=nlp, node_pool=h100).values_list(
        "deserved", "started_at", "ended_at")) == [(4, split.BEGINNING, None)]
    start = timezone.now().replace(microsecond=0) - timedelta(hours=2)
    run = workload(demo["bob"], project="nlp", gpus=4)
    signals.quota_held.send(sender=Workload, workload=run, at=start)
    org_services.quota_set(actor=demo["admin"], node_pool=h100, project=nlp, deserved=1, limit=8)
    changed = DeservedPeriod.objects.get(project=nlp, node_pool=h100, ended_at__isnull=True)
    assert changed.deserved == 1 and start < changed.started_at <= timezone.now()
    now = changed.started_at + timedelta(hours=1)
    window = Window(start - timedelta(hours=1), now)
    report = rows(reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=window, now=now))["nlp"]
    before_change = (changed.started_at - start).total_seconds() / 3600
    assert report.within_quota == pytest.approx(4 * before_change + 1 * 1)
    assert report.borrowed == pytest.approx(3 * 1)
    h100_deserved = (4 * (changed.started_at - window.start).total_seconds() / 3600 + 1 * 1)
    a100 = NodePool.objects.get(slug="a100-mig-3g40gb")
    hours = (now - window.start).total_seconds() / 3600
    assert report.deserved == pytest.approx(h100_deserved + (3 * 3 / 7 + 8 / 8) * hours)
    assert a100  # the other pools' periods did not change
    # Saving the same deserved again (a weight change) adds no period.
    quota = Quota.objects.get(project=nlp, node_pool=h100)
    org_services.quota_update(actor=demo["admin"], quota=quota, over_quota_weight=3)
    assert DeservedPeriod.objects.filter(project=nlp, node_pool=h100).count() == 2
    # Removing a quota: nothing deserved from then on.
    etl, l40s = Project.objects.get(slug="etl"), NodePool.objects.get(slug="l40s-shared")
    org_services.quota_delete(actor=demo["admin"], quota=Quota.objects.get(project=etl, node_pool=l40s))
    assert DeservedPeriod.objects.get(project=etl, node_pool=l40s, ended_at__isnull=True).deserved == 0


def test_report_rows_agree_with_a_brute_force_reference(demo):
    for n, (user, project, gpus, preemptible, start, end) in enumerate([
            ("alice", "vision", 3, False, "2026-03-02 08:00", "2026-03-02 12:00"),
            ("lead", "vision", 2, True, "2026-03-02 09:00", "2026-03-02 10:30"),
            ("alice", "vision", 4, True, "2026-03-02 10:00", None),
            ("bob", "nlp", 8, True, "2026-03-02 09:30", "2026-03-02 11:00"),
            ("carol", "forecasting", 1, False, "2026-03-02 07:00", "2026-03-02 09:00")]):
        held(workload(demo[user], project=project, gpus=gpus, preemptible=preemptible, name=f"w{n}"), start, end)
    now = at("2026-03-02 13:00")
    deserved = {(q.project_id, q.node_pool_id): q.deserved for q in Quota.objects.filter(project__isnull=False)}
    reference = expected_within(list(UsageInterval.objects.all()), MARCH.start, now, deserved)
    for row in reports.holders(user=demo["admin"], window=MARCH, filters=reports.HolderFilters(), now=now):
        within, over = reports.held_split(row.held_hours, row.within_hours)
        assert within == pytest.approx(reference[row.pk]) and row.within_hours == pytest.approx(reference[row.pk]), row
        assert within + over == pytest.approx(row.held_hours)
    projects = rows(reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=MARCH, now=now))
    vision = [row.pk for row in UsageInterval.objects.filter(project__slug="vision")]
    assert projects["vision"].within_quota == pytest.approx(sum(reference[pk] for pk in vision))


# --- the quota dashboard ------------------------------------------------------------------------------------------


def mirror(project: str, *, guaranteed: int = 0, elastic: int = 0, pool: str = "h100") -> None:
    proj, node_pool = Project.objects.get(slug=project), NodePool.objects.get(slug=pool)
    for kind, used in (("guaranteed", guaranteed), ("elastic", elastic)):
        ClusterQueueState.objects.update_or_create(name=f"proj-{project}-{pool}-{kind}", defaults={
            "project": proj, "node_pool": node_pool, "guaranteed": kind == "guaranteed", "used": Decimal(used),
            "used_borrowed": Decimal(used) if kind == "elastic" else 0, "observed_at": timezone.now()})


def dashboard(user, pool: str = "h100") -> dict[str, selectors.Figures]:
    (entry,) = [d for d in selectors.quota_dashboard(user=user) if d.pool.slug == pool]
    figures = {}
    for department in entry.departments:
        figures[department.slug] = department
        figures.update({project.slug: project for project in department.children})
    return figures


def test_dashboard_counts_preemptible_work_inside_deserved_as_not_borrowed(demo):
    mirror("nlp", elastic=4)  # bob's 4 preemptible H100 run in NLP's elastic queue
    figures = dashboard(demo["admin"])
    assert (figures["nlp"].used, figures["nlp"].borrowed, figures["nlp"].lent) == (4, 0, 0)
    assert figures["research"].borrowed == 0 and figures["research"].lent == 4  # Vision's idle 4


def test_department_lent_and_borrowed_are_the_sums_of_its_projects(demo):
    mirror("vision", guaranteed=1, elastic=5)  # 6 of 4: borrows 2
    mirror("nlp", guaranteed=1)  # 1 of 4: lends 3
    mirror("forecasting", elastic=1)  # 1 of 2: lends 1
    mirror("analytics", elastic=5)  # 5 of 2: borrows 3
    for username in ("admin", "deptadmin", "alice"):
        figures = dashboard(demo[username])
        research = figures["research"]
        assert (research.used, research.borrowed, research.lent) == (7, 2, 3), username
    figures = dashboard(demo["admin"])
    for department, projects in (("research", ("vision", "nlp")), ("data-science", ("forecasting", "analytics")),
                                 ("production", ("serving", "etl"))):
        for fact in ("used", "borrowed", "lent", "pending"):
            assert getattr(figures[department], fact) == sum(getattr(figures[p], fact) for p in projects), (
                department, fact)
    # The same figures through the API.
    data = selectors.quota_dashboard(user=demo["admin"])[0]
    assert all(d.as_dict()["lent"] == sum(p.as_dict()["lent"] for p in d.children) for d in data.departments)


def test_a_project_that_does_not_lend_shows_lent_0_and_so_does_its_department(demo):
    """The issue's case: Production showed "lent 4" while Serving (does not lend) and ETL (deserves 0) lend nothing."""
    figures = dashboard(demo["admin"])
    assert Project.objects.get(slug="serving").does_not_lend
    assert (figures["serving"].deserved, figures["serving"].used, figures["serving"].lent) == (4, 0, 0)
    assert figures["etl"].lent == 0
    assert figures["production"].deserved == 4 and figures["production"].lent == 0
    mirror("serving", guaranteed=1)
    assert dashboard(demo["admin"])["production"].lent == 0


def test_a_stretch_that_vanishes_leaves_canonical_slices(demo):
    """A workload admitted and released at the same moment (zero length) undoes the cut it caused: the neighbour's
    slices merge back into one, exactly what a full recompute gives."""
    steady = workload(demo["alice"], gpus=4)
    held(steady, "2026-03-02 10:00")
    blip = workload(demo["lead"], gpus=2)
    held(blip, "2026-03-02 11:00")
    assert [s[3:5] for s in slices()] == [(1, 1), (2, 3), (2, 3)]  # steady cut at 11:00, and the blip
    signals.quota_released.send(sender=Workload, workload_id=blip.pk, at=at("2026-03-02 11:00"), reason="Stopped")
    assert [s[:5] for s in slices()] == [(steady.usage_intervals.get().pk, at("2026-03-02 10:00"), None, 1, 1)]
    incremental = slices()
    vision, h100 = Project.objects.get(slug="vision"), NodePool.objects.get(slug="h100")
    services.usage_timeline_refresh(project_id=vision.pk, node_pool_id=h100.pk, since=split.BEGINNING)
    assert slices() == incremental
