"""A pool's price per card-hour has a history: a change applies from the moment it is saved (audited with that
moment), a price given with a new pool prices all of its use, and the pool's page and the API show every price with
when it took effect."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import PRICED_FROM_THE_START, NodePool, NodePoolPrice

from .view_helpers import pool_payload

pytestmark = pytest.mark.django_db


def history(pool: NodePool) -> list[tuple[Decimal | None, object]]:
    return list(NodePoolPrice.objects.filter(node_pool=pool).order_by("valid_from").values_list(
        "price_per_card_hour", "valid_from"))


def test_a_price_change_starts_a_new_row_from_now_and_is_audited(demo):
    admin, h100 = demo["admin"], NodePool.objects.get(slug="h100")
    before = timezone.now()
    services.node_pool_update(actor=admin, node_pool=h100, price_per_card_hour=Decimal("2.50"))
    services.node_pool_update(actor=admin, node_pool=h100, price_per_card_hour=Decimal("3"))
    rows = list(NodePoolPrice.objects.filter(node_pool=h100).order_by("valid_from"))
    assert [row.price_per_card_hour for row in rows] == [Decimal("2.5"), Decimal("3")]
    assert before <= rows[0].valid_from < rows[1].valid_from <= timezone.now()
    assert all(row.set_by == admin for row in rows)
    assert NodePool.objects.get(pk=h100.pk).price_per_card_hour == Decimal("3")
    audit = AuditEvent.objects.filter(action="node_pool.update", object_id=str(h100.pk)).order_by("at", "id")
    assert [(event.before["price_per_card_hour"], event.after["price_per_card_hour"], event.after["price_valid_from"])
            for event in audit] == [(None, "2.5", rows[0].valid_from.isoformat()),
                                    ("2.5", "3", rows[1].valid_from.isoformat())]
    # The same price written another way changes nothing; a change of another field adds no price.
    services.node_pool_update(actor=admin, node_pool=h100, price_per_card_hour=Decimal("3.0000"), name="H100 SXM")
    assert len(history(h100)) == 2
    # Removing the price: usage from now on is not charged, earlier hours keep theirs.
    services.node_pool_update(actor=admin, node_pool=h100, price_per_card_hour=None)
    assert [price for price, _ in history(h100)] == [Decimal("2.5"), Decimal("3"), None]


def test_a_price_given_with_a_new_pool_prices_all_of_its_use(demo):
    pool = services.node_pool_create(actor=demo["admin"], slug="b200", name="B200", gpu_resource="nvidia.com/gpu",
                                     capacity=8, price_per_card_hour=Decimal("6"))
    assert history(pool) == [(Decimal("6"), PRICED_FROM_THE_START)]
    event = AuditEvent.objects.get(action="node_pool.create", object_id=str(pool.pk))
    assert event.after["price_valid_from"] == PRICED_FROM_THE_START.isoformat()
    unpriced = services.node_pool_create(actor=demo["admin"], slug="b300", name="B300",
                                         gpu_resource="nvidia.com/gpu", capacity=8)
    assert history(unpriced) == []


def test_a_clock_behind_the_last_price_replaces_it_instead_of_going_back(demo):
    h100 = NodePool.objects.get(slug="h100")
    ahead = timezone.now() + timedelta(minutes=5)
    NodePoolPrice.objects.create(node_pool=h100, price_per_card_hour=Decimal("1"), valid_from=ahead)
    services.node_pool_update(actor=demo["admin"], node_pool=h100, price_per_card_hour=Decimal("2"))
    assert history(h100) == [(Decimal("2"), ahead)]


def test_only_admins_change_a_price_and_nothing_is_recorded_when_refused(demo):
    h100 = NodePool.objects.get(slug="h100")
    with pytest.raises(Exception, match="may not"):
        services.node_pool_update(actor=demo["deptadmin"], node_pool=h100, price_per_card_hour=Decimal("1"))
    with pytest.raises(Exception, match="price_per_card_hour"):
        services.node_pool_update(actor=demo["admin"], node_pool=h100, price_per_card_hour=Decimal("-1"))
    assert history(h100) == []
    assert not AuditEvent.objects.filter(action="node_pool.update", object_id=str(h100.pk)).exists()


def test_the_pools_page_shows_its_price_history(demo, client_for):
    h100 = NodePool.objects.get(slug="h100")
    NodePoolPrice.objects.create(node_pool=h100, price_per_card_hour=Decimal("2"), valid_from=PRICED_FROM_THE_START)
    services.node_pool_update(actor=demo["admin"], node_pool=h100, price_per_card_hour=Decimal("3.25"))
    page = client_for("admin").get("/pools/h100/")
    assert page.status_code == 200
    content = page.content.decode()
    rows = content.split('data-price="')[1:]
    assert len(rows) == 2
    assert "the start" in rows[0] and ">2<" in rows[0]
    assert ">3.25<" in rows[1] and ">admin<" in rows[1] and ">now<" in rows[1]
    assert 'data-fact="price">3.25 per physical card-hour' in content
    assert "/pools/h100/edit/" in content
    # Everyone signed in reads it; who set a price is for admins.
    researcher = client_for("alice").get("/pools/h100/").content.decode()
    assert ">3.25<" in researcher and ">admin<" not in researcher and "/pools/h100/edit/" not in researcher
    assert client_for("alice").get("/pools/nope/").status_code == 404
    assert 'href="/pools/h100/"' in client_for("alice").get("/pools/").content.decode()
    never = client_for("alice").get("/pools/l40s-shared/").content.decode()
    assert "Never priced" in never and "none (usage here is not charged)" in never


def test_the_api_shows_the_history_and_a_patch_adds_to_it(demo, client_for):
    client = client_for("admin")
    h100 = NodePool.objects.get(slug="h100")
    response = client.patch(f"/api/v1/node-pools/{h100.pk}/", {"price_per_card_hour": "4.5"},
                            content_type="application/json")
    assert response.status_code == 200, response.content
    (entry,) = response.json()["price_history"]
    valid_from = NodePoolPrice.objects.get(node_pool=h100).valid_from
    assert entry == {"price_per_card_hour": "4.5000", "valid_from": valid_from.isoformat().replace("+00:00", "Z"),
                     "from_the_start": False}
    created = client.post("/api/v1/node-pools/", {"slug": "b200", "name": "B200", "gpu_resource": "nvidia.com/gpu",
                                                  "capacity": 8, "price_per_card_hour": "6"},
                          content_type="application/json")
    assert created.status_code == 201, created.content
    assert created.json()["price_history"] == [{"price_per_card_hour": "6.0000", "valid_from": "1970-01-01T00:00:00Z",
                                                "from_the_start": True}]
    listed = {pool["slug"]: pool for pool in client_for("alice").get("/api/v1/node-pools/").json()["results"]}
    assert listed["h100"]["price_history"] == [entry] and listed["l40s-shared"]["price_history"] == []
    # A refused change records nothing.
    refused = client.patch(f"/api/v1/node-pools/{h100.pk}/", {"price_per_card_hour": "-2"},
                           content_type="application/json")
    assert refused.status_code == 400 and "price_per_card_hour" in refused.json()
    assert client_for("alice").patch(f"/api/v1/node-pools/{h100.pk}/", {"price_per_card_hour": "1"},
                                     content_type="application/json").status_code == 403
    assert NodePoolPrice.objects.filter(node_pool=h100).count() == 1


def test_the_edit_page_records_a_price_change_from_now_on(demo, client_for):
    h100 = NodePool.objects.get(slug="h100")
    form = client_for("admin").get("/pools/h100/edit/").content.decode()
    assert "hours used before keep the price they had" in form
    response = client_for("admin").post("/pools/h100/edit/", pool_payload(
        slug="h100", name=h100.name, gpu_product=h100.gpu_product, capacity=str(h100.capacity),
        node_labels="portal.gpu/pool=h100", version=h100.version, price_per_card_hour="1.75"))
    assert response.status_code == 302, response.content.decode()[:2000]
    (row,) = NodePoolPrice.objects.filter(node_pool=h100)
    assert (row.price_per_card_hour, row.set_by) == (Decimal("1.75"), demo["admin"])
    assert not row.from_the_start and row.valid_from <= timezone.now()


@pytest.mark.parametrize("field", ["valid_from", "price_valid_from", "price_history"])
def test_a_price_cannot_be_scheduled_a_patch_naming_when_is_refused_saying_so(demo, client_for, field):
    """Prices are not scheduled: a price takes effect when it is saved (cost, the pool page and the audit log all
    assume it). A body that says when, for a moment in the future or any other, is refused with a 400 that says
    so, and nothing is recorded."""
    h100 = NodePool.objects.get(slug="h100")
    future = (timezone.now() + timedelta(days=30)).isoformat()
    value = [{"price_per_card_hour": "9", "valid_from": future}] if field == "price_history" else future
    response = client_for("admin").patch(f"/api/v1/node-pools/{h100.pk}/", {"price_per_card_hour": "9", field: value},
                                         content_type="application/json")
    assert response.status_code == 400
    assert "takes effect when it is saved" in " ".join(response.json()[field])
    assert not NodePoolPrice.objects.filter(node_pool=h100).exists()
    assert NodePool.objects.get(pk=h100.pk).price_per_card_hour is None
