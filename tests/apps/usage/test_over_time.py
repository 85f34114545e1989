"""Use over time and fairness over time: the series are the ledger's sums, bucket by bucket and in total (checked by
hand and against the showback report), scoped to what the viewer may see, with all form errors at once, the same
numbers in the CSV, a fixed number of queries, and each project's weekly share beside its weight."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.cluster.models import ClusterQueueState, LocalQueueState
from apps.cluster.services import local_queues_mirror
from apps.org.models import Department, NodePool, Project
from apps.usage.models import UsageDay, UtilisationHour
from apps.usage.reports import Filters, Granularity, Group, Window, fairness, usage_report, use_over_time
from apps.usage.services import (
    deserved_period_set,
    usage_days_rebuild,
    usage_interval_close,
    usage_interval_open,
    usage_timeline_refresh,
    utilisation_hours_add,
)
from tests.api_support import call
from tests.apps.usage.reports_support import at, expected_hours, interval, quotas_in_force_since, workload

PAGE = "/usage/over-time/"
CSV = "/usage/over-time.csv"
NOW = at("2026-03-04 00:00")


@pytest.fixture(autouse=True)
def _quotas_in_force_since_january(db):
    quotas_in_force_since("2026-01-01 00:00")


def _ledger(users):
    """Vision on h100: 6 units 10:00-11:30 on 1 March (2 over its deserved 4), 2 units from 23:00 on 1 March to
    01:00 on 2 March; NLP 3 MIG slices for 3 hours; Forecasting (another department) 2 units all of 2 March."""
    alice, carol = users["alice"], users["carol"]
    rows = [
        interval(workload(alice, name="wide", gpus=6), "2026-03-01 10:00", "2026-03-01 11:30"),
        interval(workload(alice, name="night", gpus=2), "2026-03-01 23:00", "2026-03-02 01:00"),
        interval(workload(users["bob"], project="nlp", pool="a100-mig-3g40gb", name="mig", gpus=3),
                 "2026-03-01 12:00", "2026-03-01 15:00"),
        interval(workload(carol, project="forecasting", name="fc", gpus=2), "2026-03-02 00:00", "2026-03-03 00:00"),
    ]
    return rows


def _window():
    return Window(at("2026-03-01 00:00"), at("2026-03-03 00:00"))


def test_hourly_buckets_by_hand_and_totals_equal_the_ledger(users):
    rows = _ledger(users)
    result = use_over_time(user=users["admin"], window=_window(), granularity=Granularity.HOUR, now=NOW)
    assert len(result.starts) == 48
    h100 = next(series for series in result.pools if series.pool.slug == "h100")
    hour = {start: position for position, start in enumerate(result.starts)}
    assert h100.allocated[hour[at("2026-03-01 10:00")]] == pytest.approx(6)
    assert h100.within[hour[at("2026-03-01 10:00")]] == pytest.approx(4)
    assert h100.allocated[hour[at("2026-03-01 11:00")]] == pytest.approx(3)  # 6 units for half the hour
    assert h100.allocated[hour[at("2026-03-01 23:00")]] == pytest.approx(2)
    assert h100.allocated[hour[at("2026-03-02 00:00")]] == pytest.approx(4)  # vision 2 + forecasting 2
    assert h100.allocated[hour[at("2026-03-02 01:00")]] == pytest.approx(2)
    # Deserved on h100: every project quota there (4 + 4 + 4 + 0 + 2 + 2 units) in every hour.
    assert {round(value, 6) for value in h100.deserved} == {16}
    report = usage_report(user=users["admin"], group=Group.POOL, window=_window(), now=NOW)
    for series in result.pools:
        row = next(row for row in report.rows if row.key == series.pool.pk)
        assert series.card_hours == pytest.approx(row.gpu_hours)
        assert series.within_hours == pytest.approx(row.within_quota)
        assert series.deserved_hours == pytest.approx(row.deserved)
    assert sum(series.card_hours for series in result.pools) == pytest.approx(
        expected_hours(rows, _window().start, _window().end))
    mig = next(series for series in result.pools if series.pool.slug == "a100-mig-3g40gb")
    assert mig.allocated[hour[at("2026-03-01 12:00")]] == pytest.approx(3 * 3 / 7)


def test_daily_buckets_and_a_window_reaching_past_now(users):
    _ledger(users)
    open_row = interval(workload(users["alice"], name="open", gpus=1), "2026-03-02 12:00", None)
    now = at("2026-03-02 18:00")
    result = use_over_time(user=users["admin"], window=_window(), granularity=Granularity.DAY, now=now)
    h100 = next(series for series in result.pools if series.pool.slug == "h100")
    assert result.seconds == [86400, 18 * 3600]
    # 1 March: 6 x 1.5 h + 2 x 1 h = 11 card hours; 2 March until 18:00: 2 x 1 h + 2 x 18 h + 1 x 6 h = 44.
    assert h100.allocated[0] * 24 == pytest.approx(11)
    assert h100.allocated[1] * 18 == pytest.approx(44)
    assert h100.card_hours == pytest.approx(55)
    assert open_row.ended_at is None


def test_a_department_and_a_researcher_see_only_their_part(users, client_for):
    _ledger(users)
    research = Department.objects.get(slug="research")
    result = use_over_time(user=users["admin"], window=_window(), granularity=Granularity.DAY,
                           filters=Filters(department_id=research.pk), now=NOW)
    assert sum(series.card_hours for series in result.pools) == pytest.approx(6 * 1.5 + 2 * 2 + 3 * 3 * 3 / 7)
    assert {row.slug for row in result.top} == {"vision", "nlp"}
    alice = use_over_time(user=users["alice"], window=_window(), granularity=Granularity.DAY, now=NOW)
    assert {row.slug for row in alice.top} == {"vision"}
    assert sum(series.card_hours for series in alice.pools) == pytest.approx(6 * 1.5 + 2 * 2)
    carol = client_for("carol").get(PAGE, {"department": "research", "start": "2026-03-01", "end": "2026-03-02"})
    assert carol.status_code == 400
    assert "No department &#x27;research&#x27; that you may see." in carol.content.decode()


def test_the_form_reports_every_mistake_at_once_and_refuses_too_many_buckets(client_for):
    response = client_for("admin").get(PAGE, {"start": "2026-13-01", "end": "yesterday", "granularity": "week",
                                              "node_pool": "nope"})
    assert response.status_code == 400
    errors = dict(re.findall(r'data-field-errors="(\w+)"><li>([^<]+)', response.content.decode()))
    assert set(errors) == {"start", "end", "granularity", "node_pool"}
    long = client_for("admin").get(PAGE, {"start": "2026-01-01", "end": "2026-06-30", "granularity": "hour"})
    assert long.status_code == 400
    assert "4,344 hours is more than the 2,208 steps a chart shows" in long.content.decode()
    backwards = client_for("admin").get(CSV, {"start": "2026-03-05", "end": "2026-03-01"})
    assert backwards.status_code == 400 and "The end date is before the start date." in backwards.content.decode()


def test_the_page_draws_with_the_kept_library_and_the_csv_has_the_same_numbers(users, client_for):
    _ledger(users)
    query = {"start": "2026-03-01", "end": "2026-03-02", "granularity": "hour", "department": "research"}
    page = client_for("admin").get(PAGE, query)
    assert page.status_code == 200
    content = page.content.decode()
    assert "/static/vendor/uplot/uPlot.iife.min.js" in content and "/static/js/use-over-time.js" in content
    data = json.loads(re.search(r'<script id="over-time-data" type="application/json">(.*?)</script>', content,
                                re.S).group(1))
    assert len(data["t"]) == 48 and {pool["slug"] for pool in data["pools"]} == {
        "h100", "a100-mig-3g40gb", "l40s-shared"}  # Research deserves cards on the L40S pool it did not use
    response = client_for("admin").get(CSV, query)
    assert response.status_code == 200
    table = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert table[0][:5] == ["Bucket start (UTC)", "Node pool", "Allocated cards", "Within deserved cards",
                            "Deserved cards"]
    rows = {(row[0], row[1]): row for row in table[1:]}
    assert len(rows) == 3 * 48
    assert rows[("2026-03-01T10:00:00+00:00", "h100")][2:6] == ["6.000", "4.000", "8.000", "6.000"]
    assert sum(float(row[5]) for row in table[1:] if row[1] == "h100") == pytest.approx(6 * 1.5 + 2 * 2)


def _count(user, window, granularity):
    with CaptureQueriesContext(connection) as queries:
        use_over_time(user=user, window=window, granularity=granularity, now=NOW)
    return len(queries)


def test_queries_do_not_grow_with_the_ledger(users):
    window = Window(at("2026-02-01 00:00"), at("2026-03-03 00:00"))
    _ledger(users)
    for name in ("admin", "deptadmin", "alice"):  # warm: each viewer's grants are read once and cached
        _count(users[name], window, Granularity.HOUR)
    small = {name: _count(users[name], window, Granularity.HOUR) for name in ("admin", "deptadmin", "alice")}
    alice = users["alice"]
    for day in range(1, 28):
        for start in ("02:00", "09:00", "17:00"):
            interval(workload(alice, name=f"w{day}-{start[:2]}", gpus=1 + day % 4),
                     f"2026-02-{day:02d} {start}", f"2026-02-{day:02d} {start[:2]}:45")
    large = {name: _count(users[name], window, Granularity.HOUR) for name in ("admin", "deptadmin", "alice")}
    assert large == small
    # Settle, the pools, four ledger aggregates, and the top consumers' report (its own queries); no Prometheus.
    assert small == {"admin": 12, "deptadmin": 12, "alice": 12}


def test_fairness_shows_weekly_shares_beside_the_weights(users):
    """Week of 23 Feb: Vision 10 of Research's 20 H100 hours; week of 2 March so far: Vision 6, NLP 2."""
    alice, bob = users["alice"], users["bob"]
    interval(workload(alice, name="a", gpus=2), "2026-02-24 10:00", "2026-02-24 15:00")
    interval(workload(bob, project="nlp", name="b", gpus=2), "2026-02-25 10:00", "2026-02-25 15:00")
    interval(workload(alice, name="c", gpus=6), "2026-03-02 10:00", "2026-03-02 11:00")
    interval(workload(bob, project="nlp", name="d", gpus=2), "2026-03-02 10:00", "2026-03-02 11:00")
    result = fairness(user=users["lead"], now=at("2026-03-03 12:00"))
    assert [week.start for week in result.weeks] == [at(day) for day in (
        "2026-02-09 00:00", "2026-02-16 00:00", "2026-02-23 00:00", "2026-03-02 00:00")]
    vision = next(row for row in result.rows if row.project_slug == "vision" and row.pool.slug == "h100")
    assert vision.weight == 2 and vision.weight_share == pytest.approx(2 / 3)
    assert vision.shares == [None, None, pytest.approx(0.5), pytest.approx(0.75)]
    assert vision.hours[2:] == [pytest.approx(10), pytest.approx(6)]
    assert not result.admission_fair_sharing and vision.afs_usage is None
    assert {row.project_slug for row in fairness(user=alice, now=at("2026-03-03 12:00")).rows} == {"vision"}
    h100 = NodePool.objects.get(slug="h100")
    assert {row.pool.slug for row in fairness(user=users["lead"], node_pool_id=h100.pk).rows} == {"h100"}


def test_fairness_shows_kueues_decayed_usage_from_the_mirrored_local_queues(users):
    vision = Project.objects.get(slug="vision")
    pool = NodePool.objects.get(slug="h100")
    ClusterQueueState.objects.create(name="vision-h100-elastic", project=vision, node_pool=pool,
                                     observed_at=at("2026-03-03 12:00"))
    local_queues_mirror(objs=[{
        "metadata": {"name": "h100-elastic", "namespace": "proj-vision",
                     "labels": {"portal.gpu/project": "vision"}},
        "spec": {"clusterQueue": "vision-h100-elastic"},
        "status": {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
            "consumedResources": {"nvidia.com/gpu": "3500m"}, "lastUpdate": "2026-03-03T11:59:00Z"}}},
    }], at=at("2026-03-03 12:00"))
    queue = LocalQueueState.objects.get(namespace="proj-vision", name="h100-elastic")
    assert queue.afs_consumed == {"nvidia.com/gpu": "3500m"} and queue.afs_updated_at == at("2026-03-03 11:59")
    result = fairness(user=users["alice"], now=at("2026-03-03 12:00"))
    row = next(row for row in result.rows if row.project_slug == "vision" and row.pool.slug == "h100")
    assert result.admission_fair_sharing and row.afs_usage == pytest.approx(3.5)


def test_the_page_shows_fairness_for_a_lead(users, client_for):
    interval(workload(users["alice"], name="c", gpus=6), "2026-03-02 10:00", "2026-03-02 11:00")
    response = client_for("lead").get(PAGE)
    assert response.status_code == 200
    content = response.content.decode()
    assert 'data-fairness-row="vision/h100"' in content and "66.7%" in content



def test_measured_use_gives_busy_cards_utilisation_and_idle_hours_per_bucket(users, settings):
    """With a Prometheus, hourly rows the worker wrote: 10:00 6 cards measured, 3 busy, 2 idle; 11:00 3 measured,
    3 busy."""
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    row = _ledger(users)[0]
    common = {"workload_id": row.workload_id, "project_id": row.project_id, "department_id": row.department_id,
              "user_id": row.user_id, "node_pool_id": row.node_pool_id}
    UtilisationHour.objects.create(hour=at("2026-03-01 10:00"), observed_card_hours=6, used_card_hours=3,
                                   idle_card_hours=2, **common)
    UtilisationHour.objects.create(hour=at("2026-03-01 11:00"), observed_card_hours=3, used_card_hours=3, **common)
    usage_days_rebuild()  # rows written past the service: the daily rows are rebuilt as after a shell's change
    result = use_over_time(user=users["admin"], window=_window(), granularity=Granularity.HOUR, now=NOW)
    h100 = next(series for series in result.pools if series.pool.slug == "h100")
    assert h100.busy[10] == pytest.approx(3) and h100.utilisation[10] == pytest.approx(0.5)
    assert h100.idle_hours[10] == pytest.approx(2) and h100.utilisation[11] == pytest.approx(1)
    assert h100.utilisation[12] is None and h100.idle_total == pytest.approx(2)
    assert h100.mean_utilisation == pytest.approx(6 / 9)
    daily = use_over_time(user=users["admin"], window=_window(), granularity=Granularity.DAY, now=NOW)
    assert next(s for s in daily.pools if s.pool.slug == "h100").busy[0] == pytest.approx(6 / 24)
    assert next(row for row in daily.top if row.slug == "vision").idle_hours == pytest.approx(2)


def test_the_api_gives_the_pages_series_and_refuses_bad_input_all_at_once(users, client_for):
    _ledger(users)
    query = "start=2026-03-01&end=2026-03-02&granularity=hour"
    data = call(client_for("admin"), "GET", f"usage/over-time/?{query}").json()
    assert len(data["buckets"]) == 48 and data["granularity"] == "hour" and not data["utilisation_available"]
    h100 = next(pool for pool in data["pools"] if pool["node_pool_slug"] == "h100")
    assert h100["allocated"][10] == 6 and h100["within_deserved"][10] == 4 and h100["busy"] is None
    shown = call(client_for("admin"), "GET", "usage/?group_by=pool&start=2026-03-01&end=2026-03-03").json()
    assert h100["gpu_hours"] == pytest.approx(next(row["gpu_hours"] for row in shown["rows"]
                                                   if row["node_pool_slug"] == "h100"))
    assert [row["project_slug"] for row in data["top_consumers"]] == ["forecasting", "vision", "nlp"]
    alice = call(client_for("alice"), "GET", f"usage/over-time/?{query}").json()
    assert [row["project_slug"] for row in alice["top_consumers"]] == ["vision"]
    bad = call(client_for("admin"), "GET", "usage/over-time/?start=x&end=2026-02-30&granularity=minute&department=no")
    assert bad.status_code == 400 and set(bad.json()) >= {"start", "end", "granularity", "department"}
    empty = call(client_for("admin"), "GET", "usage/over-time/?granularity=&start=&end=2026-03-02")
    assert empty.status_code == 400 and set(empty.json()) == {"granularity", "start"}
    long = call(client_for("admin"), "GET", "usage/over-time/?start=2025-01-01&end=2025-12-31&granularity=hour")
    assert long.status_code == 400 and "8,760 hours" in long.json()["granularity"][0]


def test_each_department_links_to_its_own_dashboard(users, client_for):
    _ledger(users)
    client = client_for("deptadmin")
    departments = client.get(reverse("org:departments")).content.decode()
    link = re.search(r'href="(/usage/over-time/\?department=research)"', departments).group(1)
    page = client.get(link)
    assert page.status_code == 200 and '<option value="research" selected>' in page.content.decode()


# --- by day from UsageDay: the same sums as the slices, through every ledger write ------------------------------


def _by_day_from_hours(user, window, now):
    """Card-seconds and within-deserved card-seconds per (pool, local day), from the hourly series (which sums the
    slices live, never UsageDay): the reference for the daily series."""
    hourly = use_over_time(user=user, window=window, granularity=Granularity.HOUR, now=now)
    out = {}
    for series in hourly.pools:
        for start, held, within, length in zip(hourly.starts, series.allocated, series.within, hourly.seconds,
                                               strict=True):
            entry = out.setdefault((series.pool.slug, timezone.localtime(start).date()), [0.0, 0.0])
            entry[0] += held * length
            entry[1] += within * length
    return out


def _assert_days_equal_the_slices(user, window, now):
    daily = use_over_time(user=user, window=window, granularity=Granularity.DAY, now=now)
    expected = _by_day_from_hours(user, window, now)
    seen = set()
    for series in daily.pools:
        for start, held, within, length in zip(daily.starts, series.allocated, series.within, daily.seconds,
                                               strict=True):
            key = (series.pool.slug, timezone.localtime(start).date())
            seen.add(key)
            # To a millisecond: SQLite's julianday arithmetic in the live sums is that coarse.
            assert held * length == pytest.approx(expected.get(key, [0.0, 0.0])[0], abs=1e-3), key
            assert within * length == pytest.approx(expected.get(key, [0.0, 0.0])[1], abs=1e-3), key
    assert {key for key, (held, _) in expected.items() if held} <= seen
    report = usage_report(user=user, group=Group.PROJECT, window=window, now=now)
    assert [(row.slug, pytest.approx(row.gpu_hours), pytest.approx(row.borrowed), pytest.approx(row.deserved))
            for row in daily.top] == [(row.slug, row.gpu_hours, row.borrowed, row.deserved)
                                      for row in report.rows if row.gpu_hours > 0]
    return daily


def test_by_day_the_daily_rows_stay_the_ledgers_sums_through_rewrites_deletes_and_the_open_slice(users):
    rows = _ledger(users)
    window = Window(at("2026-03-01 00:00"), at("2026-03-04 00:00"))
    now = at("2026-03-03 09:30")
    alice = users["alice"]
    running = workload(alice, name="running", gpus=3)
    assert usage_interval_open(workload=running, at=at("2026-03-01 20:00"))  # open: held live up to now
    assert UsageDay.objects.filter(card_seconds__gt=0).exists()
    _assert_days_equal_the_slices(users["admin"], window, now)

    # A stretch learnt late, back-dated over the others: their within-deserved shares change from its start.
    assert usage_interval_open(workload=workload(alice, name="late", gpus=4, preemptible=False),
                               at=at("2026-03-01 09:00"), ended_at=at("2026-03-02 03:00"))
    usage_interval_close(workload_id=running.pk, at=at("2026-03-02 22:15"), reason="Succeeded")
    _assert_days_equal_the_slices(users["admin"], window, now)
    # The deserved quota changes in the middle of a day: slices from then on split differently.
    vision = Project.objects.get(slug="vision")
    h100 = NodePool.objects.get(slug="h100")
    deserved_period_set(project_id=vision.pk, department_id=vision.department_id, node_pool_id=h100.pk,
                        deserved=1, at=at("2026-03-01 10:30"))
    _assert_days_equal_the_slices(users["admin"], window, now)
    _assert_days_equal_the_slices(users["deptadmin"], window, now)
    _assert_days_equal_the_slices(alice, window, now)

    # A workload deleted outside the services (a shell) takes its intervals and slices along; a rebuild follows.
    rows[0].workload.delete()
    usage_timeline_refresh(project_id=vision.pk, node_pool_id=h100.pk, since=rows[0].started_at)
    usage_days_rebuild()
    _assert_days_equal_the_slices(users["admin"], window, now)

    # The daily rows are what the series read: spoil them and the days before now's are off.
    UsageDay.objects.update(card_seconds=0.0)
    daily = use_over_time(user=users["admin"], window=window, granularity=Granularity.DAY, now=now)
    assert next(series for series in daily.pools if series.pool.slug == "h100").allocated[0] == 0


def test_by_day_rows_cut_for_another_time_zone_are_not_used(users):
    """The rows are cut at the local midnights of TIME_ZONE when written; read in another zone they do not match
    its days, so the dashboard sums the slices instead (exact, slower) until usage_days_rebuild cuts them again."""
    _ledger(users)
    window_days = ("2026-03-01", "2026-03-03")
    with timezone.override("Asia/Tokyo"):
        window = Window(*(timezone.make_aware(datetime.fromisoformat(day)) for day in window_days))
        _assert_days_equal_the_slices(users["admin"], window, NOW)
        usage_days_rebuild()
        assert UsageDay.objects.filter(day=timezone.make_aware(datetime.fromisoformat("2026-03-02"))).exists()
        _assert_days_equal_the_slices(users["admin"], window, NOW)


def test_by_day_queries_do_not_grow_with_the_ledger(users):
    window = Window(at("2026-02-01 00:00"), at("2026-03-03 00:00"))
    _ledger(users)
    for name in ("admin", "deptadmin", "alice"):
        _count(users[name], window, Granularity.DAY)
    small = {name: _count(users[name], window, Granularity.DAY) for name in ("admin", "deptadmin", "alice")}
    for day in range(1, 28):
        interval(workload(users["alice"], name=f"w{day}", gpus=1 + day % 4), f"2026-02-{day:02d} 09:00",
                 f"2026-02-{day:02d} 17:45")
    assert {name: _count(users[name], window, Granularity.DAY) for name in ("admin", "deptadmin", "alice")} == small
    # Settle, the daily rows, the live slices' two aggregates, the deserved periods' two, the pools; the top
    # consumers: daily rows, live slices, deserved, names. No Prometheus.
    assert small == {"admin": 11, "deptadmin": 11, "alice": 11}


def test_by_day_measured_use_is_added_to_the_daily_rows_by_the_worker_write(users, settings):
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    row = _ledger(users)[0]  # 6 cards 10:00-11:30 on 1 March
    samples = [(at("2026-03-01 10:00") + timedelta(minutes=minute), util, 0.0) for minute, util in (
        (0, 90.0), (30, 2.0), (60, 50.0))]
    utilisation_hours_add(workload=row.workload, samples=samples, sample_seconds=1800, threshold_percent=5)
    utilisation_hours_add(workload=row.workload, samples=[(at("2026-03-01 23:30"), 100.0, 0.0)], sample_seconds=1800,
                          threshold_percent=5)
    assert UsageDay.objects.get(project_id=row.project_id, day=at("2026-03-01 00:00")).observed_card_hours == 12
    hourly = use_over_time(user=users["admin"], window=_window(), granularity=Granularity.HOUR, now=NOW)
    daily = use_over_time(user=users["admin"], window=_window(), granularity=Granularity.DAY, now=NOW)
    by_hour = next(series for series in hourly.pools if series.pool.slug == "h100")
    by_day = next(series for series in daily.pools if series.pool.slug == "h100")
    assert (by_day.measured_hours, by_day.busy_hours, by_day.idle_total) == (
        pytest.approx(by_hour.measured_hours), pytest.approx(by_hour.busy_hours), pytest.approx(by_hour.idle_total))
    assert by_day.measured_hours == pytest.approx(12) and by_day.idle_total == pytest.approx(3)
    assert by_day.busy[0] * 24 == pytest.approx(sum(by_hour.busy[:24]))
    vision = next(top for top in daily.top if top.slug == "vision")
    assert (vision.measured_hours, vision.idle_hours) == (pytest.approx(12), pytest.approx(3))


def test_a_day_of_a_clock_change_counts_its_23_hours(users):
    interval(workload(users["alice"], name="long", gpus=2), "2026-03-28 12:00", "2026-03-30 12:00")
    with timezone.override("Europe/Berlin"):  # 29 March 2026 local: 23 hours
        window = Window(*(timezone.make_aware(datetime.fromisoformat(day)) for day in ("2026-03-29", "2026-03-30")))
        for rebuilt in (False, True):  # rows cut for UTC days (summed live), then for Berlin's
            if rebuilt:
                usage_days_rebuild()
            result = use_over_time(user=users["admin"], window=window, granularity=Granularity.DAY,
                                   now=at("2026-04-01 00:00"))
            h100 = next(series for series in result.pools if series.pool.slug == "h100")
            assert result.seconds == [23 * 3600]
            assert h100.allocated == [pytest.approx(2)] and h100.card_hours == pytest.approx(46)
