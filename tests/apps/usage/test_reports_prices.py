"""Cost is GPU-hours priced at the price in force when they were used (the pool's price history): a change never
re-prices past hours or closed months, a stretch of use across a change is priced per part, a removed price stops
charging, and every grouping, the CSV and the API add up to the same cost."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest

from apps.org import services as org_services
from apps.org.models import NodePool
from apps.usage import reports
from apps.usage.models import UsageInterval
from apps.usage.reports import Group, Window
from apps.usage.services import usage_timeline_refresh

from .reports_support import at, interval, priced, workload

SPRING = Window(at("2026-02-01 00:00"), at("2026-04-01 00:00"))
AFTER = at("2026-06-01 00:00")


@pytest.fixture
def ledger(demo):
    """H100 at 2 per card-hour from February, 3 from 2 March 12:00, none from 5 March; time-sliced L40S at 8 per
    card-hour all along. Alice's 2 H100 from 10:00 to 13:00 on 2 March run across the change."""
    priced("h100", "2", "2026-02-01 00:00")
    priced("h100", "3", "2026-03-02 12:00")
    priced("h100", None, "2026-03-05 00:00")
    priced("l40s-shared", "8", "1970-01-01 00:00")
    alice, bob = demo["alice"], demo["bob"]
    interval(workload(alice, gpus=2), "2026-02-10 00:00", "2026-02-10 01:00")  # 2 card-hours at 2 = 4
    interval(workload(alice, gpus=2), "2026-03-02 10:00", "2026-03-02 13:00")  # 2 x 2 h x 2 + 2 x 1 h x 3 = 14
    interval(workload(bob, project="nlp", gpus=1), "2026-03-04 23:00", "2026-03-05 02:00")  # 1 h at 3, 2 h unpriced
    interval(workload(bob, project="nlp", pool="l40s-shared", gpus=8), "2026-03-06 00:00", "2026-03-06 02:00")  # 16
    return demo


def costs(demo, group: Group, window: Window = SPRING) -> dict[str, Decimal | None]:
    report = reports.usage_report(user=demo["admin"], group=group, window=window, now=AFTER)
    return {row.slug: row.cost for row in report.rows} | {"total": report.total.cost}


def test_each_stretch_is_priced_at_the_price_in_force_then(ledger):
    assert costs(ledger, Group.POOL) == {"h100": Decimal("21"), "l40s-shared": Decimal("16"), "total": Decimal("37")}
    projects = costs(ledger, Group.PROJECT)
    assert (projects["vision"], projects["nlp"], projects["total"]) == (Decimal("18"), Decimal("19"), Decimal("37"))
    users = costs(ledger, Group.USER)
    assert (users["alice"], users["bob"], users["total"]) == (Decimal("18"), Decimal("19"), Decimal("37"))
    assert costs(ledger, Group.DEPARTMENT)["research"] == Decimal("37")
    months = costs(ledger, Group.MONTH)
    assert (months["2026-02"], months["2026-03"]) == (Decimal("4"), Decimal("33"))
    # A window cut inside the change prices only its own part: 1 h at 2 and 30 min at 3, of 2 cards.
    noon = Window(at("2026-03-02 11:00"), at("2026-03-02 12:30"))
    assert costs(ledger, Group.POOL, noon)["h100"] == Decimal("2") * 2 + Decimal("3") * 1
    # After the price was removed the H100 hours are shown, not charged.
    later = reports.usage_report(user=ledger["admin"], group=Group.POOL, now=AFTER,
                                 window=Window(at("2026-03-05 00:00"), at("2026-03-05 12:00")))
    (h100,) = later.rows
    assert h100.gpu_hours == pytest.approx(2) and h100.cost is None and later.priced


def test_a_new_price_never_reprices_closed_months(ledger):
    before = costs(ledger, Group.MONTH)
    org_services.node_pool_update(actor=ledger["admin"], node_pool=NodePool.objects.get(slug="h100"),
                                  price_per_card_hour=Decimal("100"))
    org_services.node_pool_update(actor=ledger["admin"], node_pool=NodePool.objects.get(slug="l40s-shared"),
                                  price_per_card_hour=None)
    assert costs(ledger, Group.MONTH) == before


def test_use_across_a_change_made_through_the_service_is_priced_per_part(demo):
    """Real moments: a price set, then another while the work runs; the report two hours after the change."""
    h100 = NodePool.objects.get(slug="h100")
    org_services.node_pool_update(actor=demo["admin"], node_pool=h100, price_per_card_hour=Decimal("2"))
    org_services.node_pool_update(actor=demo["admin"], node_pool=h100, price_per_card_hour=Decimal("5"))
    first, second = h100.prices.order_by("valid_from").values_list("valid_from", flat=True)
    run = workload(demo["alice"], gpus=4)
    UsageInterval.objects.create(
        workload=run, project=run.project, department_id=run.project.department_id, user=run.owner, node_pool=h100,
        units=4, card_fraction_numerator=1, card_fraction_denominator=1, queue="elastic", model_label="m",
        data_class="d", started_at=first - timedelta(hours=1), ended_at=second + timedelta(hours=1))
    usage_timeline_refresh(project_id=run.project_id, node_pool_id=h100.pk, since=first - timedelta(hours=1))
    window = Window(first - timedelta(days=1), second + timedelta(days=1))
    row = {row.slug: row for row in reports.usage_report(user=demo["admin"], group=Group.POOL, window=window,
                                                         now=second + timedelta(hours=2)).rows}["h100"]
    between = Decimal(repr((second - first).total_seconds() / 3600))
    # The hour before the first price is not charged; then 4 cards at 2 until the change, at 5 for the last hour.
    assert row.gpu_hours == pytest.approx(4 * (2 + float(between)))
    assert row.cost == pytest.approx(4 * 2 * between + 4 * 5 * 1, abs=Decimal("0.000001"))


def test_the_csv_and_the_api_show_the_same_costs(ledger, client_for):
    client = client_for("admin")
    exported = list(csv.reader(io.StringIO(b"".join(client.get(
        "/usage/reports.csv?start=2026-02-01&end=2026-03-31&group=pool").streaming_content).decode())))
    cost = exported[0].index("Cost")
    assert {row[0]: row[cost] for row in exported[1:]} == {"h100": "21.00", "l40s-shared": "16.00"}
    body = client.get("/api/v1/usage/?group_by=project&start=2026-02-01&end=2026-04-01").json()
    assert {row["project_slug"]: row["cost"] for row in body["rows"] if row["cost"]} == {"vision": 18.0, "nlp": 19.0}
    assert body["total"]["cost"] == 37.0


def test_a_window_before_any_price_is_not_chargeback(demo):
    priced("h100", "2", "2026-02-01 00:00")
    interval(workload(demo["alice"], gpus=2), "2026-01-10 00:00", "2026-02-01 01:00")
    january = reports.usage_report(user=demo["admin"], group=Group.POOL, now=AFTER,
                                   window=Window(at("2026-01-01 00:00"), at("2026-02-01 00:00")))
    assert not january.priced and "Cost" not in reports.report_header(january)
    february = reports.usage_report(user=demo["admin"], group=Group.POOL, now=AFTER,
                                    window=Window(at("2026-01-01 00:00"), at("2026-03-01 00:00")))
    assert february.priced and february.total.cost == Decimal("4")  # the hour after the price came in
    # Use only before the price came in is shown, not charged, in a window that is partly priced.
    interval(workload(demo["bob"], project="nlp", gpus=1), "2026-01-20 00:00", "2026-01-20 05:00")
    rows = {row.slug: row for row in reports.usage_report(
        user=demo["admin"], group=Group.PROJECT, now=AFTER,
        window=Window(at("2026-01-01 00:00"), at("2026-03-01 00:00"))).rows}
    assert rows["nlp"].gpu_hours == pytest.approx(5) and rows["nlp"].cost is None
    assert rows["vision"].cost == Decimal("4")


def test_costs_name_the_installations_currency(ledger, client_for, settings):
    client = client_for("admin")
    query = "start=2026-02-01&end=2026-03-31&group=pool"
    assert client.get(f"/api/v1/usage/?group_by=pool&{query[:-11]}").json()["currency"] is None
    settings.USAGE_CURRENCY = "EUR"
    header = next(csv.reader(io.StringIO(b"".join(client.get(f"/usage/reports.csv?{query}").streaming_content)
                                         .decode())))
    assert header[-1] == "Cost (EUR)"
    assert "cost in EUR (priced pools)" in client.get(f"/usage/reports/?{query}").content.decode()
    assert client.get(f"/api/v1/usage/?group_by=pool&{query[:-11]}").json()["currency"] == "EUR"
    assert "none (usage here is not charged)" in client.get("/pools/h100/").content.decode()  # removed on 5 March
    assert "8 EUR per physical card-hour" in client.get("/pools/l40s-shared/").content.decode()
