"""GPU-hour report arithmetic over ledger rows built directly: card fractions, clipping, months, open intervals,
preemption and requeue, the within-quota / borrowed split, deserved hours, cost, and sums equal to the ledger."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.org import services as org_services
from apps.org.models import NodePool, Project, Quota
from apps.usage import reports
from apps.usage.reports import Filters, Group, Window

from .reports_support import (
    at,
    expected_hours,
    expected_within,
    interval,
    priced,
    quotas_in_force_since,
    workload,
)

MARCH = Window(at("2026-03-01 00:00"), at("2026-04-01 00:00"))
AFTER = at("2026-06-01 00:00")  # a frozen "now" after every window below


def by_slug(report: reports.Report) -> dict[str, reports.ReportRow]:
    return {row.slug: row for row in report.rows}


@pytest.fixture
def alice(demo):
    return demo["alice"]


def test_card_fractions_full_mig_and_time_sliced(demo, alice):
    interval(workload(alice, pool="h100", gpus=2), "2026-03-02 10:00", "2026-03-02 13:00")  # 2 x 1 x 3h = 6
    interval(workload(alice, pool="a100-mig-3g40gb", gpus=7), "2026-03-03 10:00", "2026-03-03 12:00")  # 7 x 3/7 x 2h
    interval(workload(alice, pool="l40s-shared", gpus=8), "2026-03-04 00:00", "2026-03-04 04:00")  # 8 x 1/8 x 4h = 4
    report = reports.usage_report(user=demo["admin"], group=Group.POOL, window=MARCH, now=AFTER)
    rows = by_slug(report)
    assert rows["h100"].gpu_hours == pytest.approx(6.0)
    assert rows["a100-mig-3g40gb"].gpu_hours == pytest.approx(6.0)
    assert rows["l40s-shared"].gpu_hours == pytest.approx(4.0)
    assert report.total.gpu_hours == pytest.approx(16.0)


def test_an_interval_across_a_month_boundary_is_split_between_the_months(demo, alice):
    interval(workload(alice), "2026-03-31 22:00", "2026-04-01 03:00")
    spring = Window(at("2026-03-01 00:00"), at("2026-05-01 00:00"))
    months = reports.usage_report(user=demo["admin"], group=Group.MONTH, window=spring, now=AFTER)
    assert [(row.slug, row.gpu_hours) for row in months.rows] == [("2026-03", pytest.approx(2.0)),
                                                                    ("2026-04", pytest.approx(3.0))]
    assert reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=MARCH,
                                now=AFTER).total.gpu_hours == pytest.approx(2.0)
    april = reports.month_window(2026, 4)
    assert reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=april,
                                now=AFTER).total.gpu_hours == pytest.approx(3.0)


def test_window_clipping_counts_only_the_part_inside(demo, alice):
    interval(workload(alice, gpus=3), "2026-02-27 00:00", "2026-03-02 00:00")  # 24h of it in March
    interval(workload(alice, gpus=1), "2026-03-31 12:00", "2026-04-02 00:00")  # 12h in March
    interval(workload(alice, gpus=5), "2026-02-01 00:00", "2026-02-28 00:00")  # none
    report = reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=MARCH, now=AFTER)
    assert report.total.gpu_hours == pytest.approx(3 * 24 + 12)


def test_open_intervals_count_up_to_a_frozen_now(demo, alice):
    interval(workload(alice, gpus=2), "2026-03-10 10:00", None)
    now = at("2026-03-10 16:30")
    report = reports.usage_report(user=demo["admin"], group=Group.USER, window=MARCH, now=now)
    assert by_slug(report)["alice"].gpu_hours == pytest.approx(2 * 6.5)
    assert report.until == now
    # A window that ended before now takes the open interval up to the window's end.
    day = Window(at("2026-03-10 00:00"), at("2026-03-10 12:00"))
    assert reports.usage_report(user=demo["admin"], group=Group.USER, window=day,
                                now=now).total.gpu_hours == pytest.approx(2 * 2)
    # A window entirely in the future counts nothing.
    later = Window(at("2026-03-11 00:00"), at("2026-03-12 00:00"))
    assert reports.usage_report(user=demo["admin"], group=Group.USER, window=later, now=now).rows == []


def test_preemption_and_requeue_are_two_intervals_summed(demo, alice):
    work = workload(alice, gpus=4, preemptible=True)
    interval(work, "2026-03-05 10:00", "2026-03-05 12:00", reason="Preempted: InCohortReclamation")
    interval(work, "2026-03-05 13:00", "2026-03-05 14:30", reason="Succeeded")
    report = reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=MARCH, now=AFTER)
    vision = by_slug(report)["vision"]
    assert vision.gpu_hours == pytest.approx(4 * 3.5)
    # Preemptible (elastic queue), but inside Vision's 4 deserved H100: not borrowing.
    assert vision.within_quota == pytest.approx(4 * 3.5) and vision.borrowed == 0


def test_within_deserved_and_over_quota_split_by_the_projects_quota(demo, alice):
    interval(workload(alice, gpus=2, preemptible=False), "2026-03-05 00:00", "2026-03-05 10:00")  # guaranteed 20
    interval(workload(alice, gpus=3, preemptible=True), "2026-03-05 00:00", "2026-03-05 02:00")  # elastic 6
    vision = by_slug(reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=MARCH, now=AFTER))["vision"]
    # 5 units held for 2 h against 4 deserved: the guaranteed 2 within, 2 of the elastic 3 within, 1 over.
    assert (vision.within_quota, vision.borrowed, vision.gpu_hours) == (pytest.approx(24), pytest.approx(2),
                                                                        pytest.approx(26))
    assert vision.within_share == pytest.approx(24 / 26)


def test_deserved_hours_from_current_project_quotas_and_the_ratio(demo, alice):
    quotas_in_force_since("2026-01-01 00:00")
    interval(workload(alice, gpus=4, preemptible=False), "2026-03-01 00:00", "2026-03-02 00:00")
    report = reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=MARCH, now=AFTER)
    hours = 31 * 24
    # Vision deserves 4 H100 (x1), 3 MIG slices (x3/7) and 8 time-sliced replicas (x1/8).
    vision = by_slug(report)["vision"]
    assert vision.deserved == pytest.approx((4 + 3 * 3 / 7 + 8 / 8) * hours)
    assert vision.ratio == pytest.approx(96 / vision.deserved)
    # Projects with quota and no usage are listed with zero use; ETL deserves no H100.
    assert by_slug(report)["etl"].gpu_hours == 0
    assert by_slug(report)["etl"].deserved == pytest.approx((2 * 3 / 7 + 8 / 8) * hours)
    # Per department: its projects' deserved; per pool: every visible project's on the pool.
    research = by_slug(reports.usage_report(user=demo["admin"], group=Group.DEPARTMENT, window=MARCH,
                                            now=AFTER))["research"]
    assert research.deserved == pytest.approx(2 * (4 + 3 * 3 / 7 + 1) * hours)
    h100 = by_slug(reports.usage_report(user=demo["admin"], group=Group.POOL, window=MARCH, now=AFTER))["h100"]
    assert h100.deserved == pytest.approx((4 + 4 + 4 + 0 + 2 + 2) * hours)
    # Users have no deserved quota.
    assert reports.usage_report(user=demo["admin"], group=Group.USER, window=MARCH, now=AFTER).rows[0].deserved is None
    # Deserved hours stop at now when the window reaches past it.
    now = at("2026-03-11 00:00")
    partial = by_slug(reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=MARCH, now=now))["vision"]
    assert partial.deserved == pytest.approx((4 + 3 * 3 / 7 + 1) * 10 * 24)


def test_month_rows_carry_each_months_deserved_hours(demo, alice):
    quotas_in_force_since("2026-01-01 00:00")
    interval(workload(alice, gpus=1, preemptible=False), "2026-02-28 00:00", "2026-03-01 12:00")
    window = Window(at("2026-02-01 00:00"), at("2026-04-01 00:00"))
    rows = reports.usage_report(user=demo["alice"], group=Group.MONTH, window=window,
                                filters=Filters(node_pool_id=NodePool.objects.get(slug="h100").pk), now=AFTER).rows
    assert [(row.slug, row.gpu_hours, row.deserved) for row in rows] == [
        ("2026-02", pytest.approx(24), pytest.approx(4 * 28 * 24)),
        ("2026-03", pytest.approx(12), pytest.approx(4 * 31 * 24)),
    ]


def test_report_sums_equal_the_ledger(demo):
    people = [demo[name] for name in ("alice", "bob", "carol", "lead")]
    projects = ["vision", "nlp", "forecasting", "vision"]
    pools = ["h100", "a100-mig-3g40gb", "l40s-shared"]
    rows = []
    for n in range(40):
        work = workload(people[n % 4], project=projects[n % 4], pool=pools[n % 3], gpus=1 + n % 5,
                        preemptible=n % 2 == 0)
        start = f"2026-0{2 + n % 3}-{1 + n % 27:02d} {n % 24:02d}:15"
        end = None if n % 7 == 0 else f"2026-0{3 + n % 2}-{1 + (n * 5) % 27:02d} 08:45"
        if end is not None and at(end) <= at(start):
            end = None
        rows.append(interval(work, start, end))
    window = Window(at("2026-03-01 00:00"), at("2026-04-15 00:00"))
    now = at("2026-04-10 00:00")
    expected = expected_hours(rows, window.start, min(window.end, now))
    for group in Group:
        report = reports.usage_report(user=demo["admin"], group=group, window=window, now=now)
        assert sum(row.gpu_hours for row in report.rows) == pytest.approx(expected), group
        assert report.total.gpu_hours == pytest.approx(expected)
        assert report.total.within_quota + report.total.borrowed == pytest.approx(expected)
    deserved = {(quota.project_id, quota.node_pool_id): quota.deserved
                for quota in Quota.objects.filter(project__isnull=False)}
    within = sum(expected_within(rows, window.start, now, deserved).values())
    assert reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=window,
                                now=now).total.within_quota == pytest.approx(within)


def test_chargeback_cost_where_a_price_is_set(demo, alice):
    h100 = NodePool.objects.get(slug="h100")
    priced("h100", "2.50", "2026-02-01 00:00")
    interval(workload(alice, gpus=2), "2026-03-02 10:00", "2026-03-02 13:00")  # 6 card-hours on h100
    interval(workload(alice, pool="l40s-shared", gpus=8), "2026-03-02 10:00", "2026-03-02 12:00")  # 2, unpriced
    report = reports.usage_report(user=demo["admin"], group=Group.POOL, window=MARCH, now=AFTER)
    assert report.priced
    rows = by_slug(report)
    assert rows["h100"].cost == Decimal("15.00")
    assert rows["l40s-shared"].cost is None
    assert report.total.cost == Decimal("15.00")
    assert "Cost" in reports.report_header(report)
    with pytest.raises(Exception, match="may not"):
        org_services.node_pool_update(actor=demo["alice"], node_pool=h100, price_per_card_hour=Decimal("0"))


def test_scoping_researchers_see_their_projects_department_admins_their_department(demo):
    interval(workload(demo["alice"], project="vision"), "2026-03-02 00:00", "2026-03-02 01:00")
    interval(workload(demo["bob"], project="nlp"), "2026-03-02 00:00", "2026-03-02 02:00")
    interval(workload(demo["carol"], project="forecasting"), "2026-03-02 00:00", "2026-03-02 04:00")

    def used(username: str, group: Group = Group.PROJECT) -> dict[str, float]:
        report = reports.usage_report(user=demo[username], group=group, window=MARCH, now=AFTER)
        return {row.slug: row.gpu_hours for row in report.rows if row.gpu_hours}

    assert used("alice") == {"vision": pytest.approx(1)}
    assert used("alice", Group.USER) == {"alice": pytest.approx(1)}
    assert used("bob", Group.DEPARTMENT) == {"research": pytest.approx(2)}
    assert used("deptadmin") == {"vision": pytest.approx(1), "nlp": pytest.approx(2)}
    assert used("admin", Group.DEPARTMENT) == {"research": pytest.approx(3), "data-science": pytest.approx(4)}
    assert used("viewer") == used("admin")
    # Deserved figures count only visible projects too.
    alice_rows = reports.usage_report(user=demo["alice"], group=Group.PROJECT, window=MARCH, now=AFTER).rows
    assert [row.slug for row in alice_rows] == ["vision"]
    # Narrowing to a project of another department finds nothing for a department admin.
    etl = Project.objects.get(slug="etl")
    assert reports.usage_report(user=demo["deptadmin"], group=Group.PROJECT, window=MARCH, now=AFTER,
                                filters=Filters(project_id=etl.pk)).rows == []


def test_windows_are_parsed_and_checked():
    window = reports.window_from("2026-03-01", "2026-04-01T00:00:00Z")
    assert (window.start, window.end) == (at("2026-03-01 00:00"), at("2026-04-01 00:00"))
    for start, end, message in [
        ("2026-03-02", "2026-03-01", "The end must be after the start."),
        ("2026-03-01", "2026-03-01", "The end must be after the start."),
        ("2025-01-01", "2026-03-01", "at most 400 days"),
        ("yesterday", "2026-03-01", "is not an ISO date"),
        ("", "2026-03-01", "Give start"),
    ]:
        with pytest.raises(Exception, match=message):
            reports.window_from(start, end)
    assert [m.start.month for m in reports.months_in(Window(at("2026-11-15 00:00"), at("2027-02-02 00:00")))] == [
        11, 12, 1, 2]
