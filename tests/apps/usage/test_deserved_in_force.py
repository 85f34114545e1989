"""Deserved GPU-hours count from when a quota came into force, never from the start of the report's window: a quota
set mid-window deserves only the rest of it, and a pool never deserves more card-hours than its cards give. The
split keeps treating a project's first quota as valid a little earlier (cluster clocks lag the portal's)."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from apps.org import services as org_services
from apps.org.models import Department, NodePool, Project, Quota
from apps.usage import reports
from apps.usage.history import quota_history
from apps.usage.models import DeservedPeriod, UsageSlice
from apps.usage.reports import Group, Window
from apps.workloads import signals
from apps.workloads.models import Workload

from .reports_support import quotas_in_force_since, workload
from .test_reports_pages import table_rows

L40S_CARDS = 48 / 8  # the demo's time-sliced pool: 48 replicas of 6 physical cards


@pytest.fixture
def labs(demo) -> Project:
    """Production hands ETL's 8 L40S replicas to a new project, Labs, today: the pool stays fully assigned, by the
    demo's quotas (in force for two days) until now and by Labs' from now on."""
    quotas_in_force_since(timezone.now() - timedelta(days=2))
    admin, l40s = demo["admin"], NodePool.objects.get(slug="l40s-shared")
    org_services.quota_delete(actor=admin, quota=Quota.objects.get(project__slug="etl", node_pool=l40s))
    project = org_services.project_create(actor=admin, department=Department.objects.get(slug="production"),
                                          slug="labs", name="Labs")
    org_services.quota_create(actor=admin, node_pool=l40s, project=project, deserved=8, limit=8)
    return project


def created(project: Project) -> datetime:
    return DeservedPeriod.objects.get(project=project, ended_at__isnull=True).in_force_from


def demo_set() -> datetime:
    """When the demo's quotas came into force (the `labs` fixture dates them two days back)."""
    return DeservedPeriod.objects.get(project__slug="vision", node_pool__slug="h100").in_force_from


def etl_handed_over() -> datetime:
    """When ETL's L40S quota was removed (a moment before Labs got it)."""
    return DeservedPeriod.objects.get(project__slug="etl", node_pool__slug="l40s-shared", deserved=8).ended_at


def rows(report: reports.Report) -> dict[str, reports.ReportRow]:
    return {row.slug: row for row in report.rows}


def test_a_quota_set_mid_window_deserves_only_the_rest_of_it(demo, labs):
    since = created(labs)
    assert timezone.now() - timedelta(minutes=1) < since <= timezone.now()
    window = Window(since - timedelta(days=5), since + timedelta(days=1))
    later = since + timedelta(hours=10)
    report = reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=window, now=later)
    assert rows(report)["labs"].deserved == pytest.approx(8 / 8 * 10)  # not the five days before it existed
    # ETL deserved its 8 replicas from when the demo set them (two days ago) until today, none before.
    etl = rows(report)["etl"].deserved
    assert etl == pytest.approx(8 / 8 * (etl_handed_over() - demo_set()).total_seconds() / 3600
                                + 2 * 3 / 7 * (later - demo_set()).total_seconds() / 3600)
    # A month's report counts the quota from its creation too: the days before it are not deserved.
    month = reports.month_window(timezone.localtime(since).year, timezone.localtime(since).month)
    monthly = reports.usage_report(user=demo["admin"], group=Group.MONTH, window=month, now=later,
                                   filters=reports.Filters(project_id=labs.pk))
    assert sum(row.deserved or 0 for row in monthly.rows) == pytest.approx(
        8 / 8 * (min(later, month.end) - since).total_seconds() / 3600)


def test_a_pool_never_deserves_more_card_hours_than_its_cards_give(demo, labs):
    since = created(labs)
    window = Window(since - timedelta(days=5), since + timedelta(days=1))
    for later in (since + timedelta(hours=3), since + timedelta(days=1)):
        pools = rows(reports.usage_report(user=demo["admin"], group=Group.POOL, window=window, now=later))
        # Every L40S replica is deserved by someone from the demo's quotas on: the cards' hours since then, less the
        # moment between ETL giving its 8 replicas (one card) up and Labs getting them.
        in_force = (window.until(later) - demo_set()).total_seconds() / 3600
        handover = (since - etl_handed_over()).total_seconds() / 3600
        assert pools["l40s-shared"].deserved == pytest.approx(L40S_CARDS * in_force - handover, rel=1e-9)
        for slug, row in pools.items():
            pool = NodePool.objects.get(slug=slug)
            cards = pool.capacity * pool.card_fraction_numerator / pool.card_fraction_denominator
            assert row.deserved <= cards * window.hours(later) + 1e-6, slug
        departments = rows(reports.usage_report(user=demo["admin"], group=Group.DEPARTMENT, window=window, now=later))
        assert departments["production"].deserved == pytest.approx(
            rows(reports.usage_report(user=demo["admin"], group=Group.DEPARTMENT, window=window, now=later,
                                      filters=reports.Filters(node_pool_id=NodePool.objects.get(
                                          slug="l40s-shared").pk)))["production"].deserved
            + (4 + 4 * 3 / 7) * in_force, rel=1e-6)


def test_work_the_cluster_dates_before_the_quota_stays_within_it(demo, labs):
    """The split still lets a project's first quota cover a few seconds of clock skew, while the deserved hours
    count from the quota itself."""
    since = created(labs)
    run = workload(demo["admin"], project="labs", pool="l40s-shared", gpus=8, preemptible=False)
    signals.quota_held.send(sender=Workload, workload=run, at=since - timedelta(seconds=30))
    (piece,) = UsageSlice.objects.filter(project=labs)
    assert (piece.started_at, piece.share_numerator, piece.share_denominator) == (since - timedelta(seconds=30), 1, 1)
    window = Window(since - timedelta(hours=1), since + timedelta(hours=1))
    labs_row = rows(reports.usage_report(user=demo["admin"], group=Group.PROJECT, window=window,
                                         now=since + timedelta(hours=1)))["labs"]
    assert labs_row.within_quota == pytest.approx(1 + 30 / 3600) and labs_row.borrowed == 0
    assert labs_row.deserved == pytest.approx(1)


def test_the_quota_history_shows_nothing_deserved_before_the_quota(demo, labs):
    since = created(labs)
    history = quota_history(project=labs, pool=NodePool.objects.get(slug="l40s-shared"), span="day",
                            now=since + timedelta(hours=2))
    before = [value for moment, value in zip(history.times, history.deserved, strict=True)
              if moment + history.step <= since]
    after = [value for moment, value in zip(history.times, history.deserved, strict=True) if moment >= since]
    assert before and set(before) == {0}
    assert after and set(after) == {8}


def test_page_csv_and_api_count_a_new_quota_from_its_creation(demo, labs, client_for):
    client = client_for("admin")
    today = timezone.localdate()
    start, end = (today - timedelta(days=3)).isoformat(), (today + timedelta(days=1)).isoformat()
    window = reports.window_from(start, (today + timedelta(days=2)).isoformat())  # the form's end day is inclusive
    cards_hours = L40S_CARDS * window.hours(timezone.now())

    page = client.get(f"/usage/reports/?start={start}&end={end}&group=project")
    assert page.status_code == 200
    header, *body = table_rows(page)
    (shown,) = [cells for cells in body if cells[0] == "labs"]
    assert float(shown[header.index("Deserved GPU-hours")]) < 0.05
    exported = client.get(f"/usage/reports.csv?start={start}&end={end}&group=pool")
    table = list(csv.reader(io.StringIO(b"".join(exported.streaming_content).decode())))
    deserved = table[0].index("Deserved GPU-hours")
    (l40s,) = [row for row in table[1:] if row[0] == "l40s-shared"]
    assert float(l40s[deserved]) <= cards_hours
    projects = list(csv.reader(io.StringIO(b"".join(client.get(
        f"/usage/reports.csv?start={start}&end={end}&group=project").streaming_content).decode())))
    (labs_row,) = [row for row in projects[1:] if row[0] == "labs"]
    assert float(labs_row[deserved + 1]) < 0.05  # one more column (Department) for projects: seconds old

    body = client.get(f"/api/v1/usage/?group_by=project&start={start}&end={end}").json()
    (api_labs,) = [row for row in body["rows"] if row["project_slug"] == "labs"]
    assert api_labs["deserved_gpu_hours"] < 0.05
    pools = client.get(f"/api/v1/usage/?group_by=pool&start={start}&end={end}").json()["rows"]
    (api_l40s,) = [row for row in pools if row["node_pool_slug"] == "l40s-shared"]
    assert api_l40s["deserved_gpu_hours"] <= cards_hours

    history = client.get("/usage/quota/history/", {"project": "labs", "pool": "l40s-shared", "span": "day"})
    data = json.loads(re.search(r'<script id="quota-history-data" type="application/json">(.*?)</script>',
                                history.content.decode(), re.S).group(1))
    assert data["deserved"][0] == 0 and data["deserved"][-1] > 0  # from its creation, inside the current step
