"""Serving reservations through the API: admins write, a project's people read its own, bad input is a 400 naming
each field and changes nothing."""

import pytest

from apps.org import services
from apps.org.models import Project, ServingReservation
from tests.api_support import call, org_state


@pytest.fixture
def serving_pool(demo):
    return services.node_pool_create(actor=demo["admin"], slug="serve-l4", name="L4 serving",
                                     gpu_resource="nvidia.com/gpu", capacity=4, serving=True)


def test_admin_creates_changes_and_deletes_a_reservation(client_for, serving_pool):
    admin = client_for("admin")
    vision = Project.objects.get(slug="vision")
    created = call(admin, "POST", "serving-reservations/", {"project": vision.pk, "node_pool": "serve-l4", "cards": 3})
    assert created.status_code == 201, created.content
    assert created.json()["cards"] == 3 and created.json()["node_pool"] == "serve-l4"
    path = f"serving-reservations/{created.json()['id']}/"
    changed = call(admin, "PATCH", path, {"cards": 4, "version": 1})
    assert changed.status_code == 200, changed.content
    assert changed.json()["version"] == 2
    assert call(admin, "DELETE", path).status_code == 204
    assert not ServingReservation.objects.exists()


def test_pool_flag_is_in_the_pool_api(client_for, serving_pool):
    pools = call(client_for("alice"), "GET", "node-pools/?page_size=100").json()["results"]
    assert {pool["slug"]: pool["serving"] for pool in pools}["serve-l4"] is True


@pytest.mark.parametrize(("body", "fields"), [
    ({"project": "vision", "node_pool": "serve-l4", "cards": 1}, {"project"}),
    ({"node_pool": "serve-l4"}, {"project", "cards"}),
    ({"project": "VISION", "node_pool": "serve-l4", "cards": -1}, {"cards"}),
    ({"project": "VISION", "node_pool": "h100", "cards": 100_001}, {"cards"}),
    ({"project": "VISION", "node_pool": "h100", "cards": 1}, {"node_pool"}),
    ({"project": 0, "node_pool": "nope", "cards": "many"}, {"project", "node_pool", "cards"}),
    ({"node_pool": "serve-l4", "cards": 5, "project": None}, {"project"}),
])
def test_bad_input_names_every_field(client_for, serving_pool, body, fields):
    vision = Project.objects.get(slug="vision")
    body = {name: vision.pk if value == "VISION" else value for name, value in body.items()}
    before = org_state()
    response = call(client_for("admin"), "POST", "serving-reservations/", body)
    assert response.status_code == 400, response.content
    assert set(response.json()) == fields
    assert org_state() == before and not ServingReservation.objects.exists()


def test_over_the_pool_is_refused(client_for, serving_pool):
    vision = Project.objects.get(slug="vision")
    response = call(client_for("admin"), "POST", "serving-reservations/",
                    {"project": vision.pk, "node_pool": "serve-l4", "cards": 5})
    assert response.status_code == 400
    assert response.json() == {"cards": ["serve-l4 has 4 units and other projects reserve 0, so at most 4 can be "
                                         "reserved here."]}


def test_who_reads_and_who_writes(client_for, demo, serving_pool):
    vision, forecasting = Project.objects.get(slug="vision"), Project.objects.get(slug="forecasting")
    mine = services.serving_reservation_create(actor=demo["admin"], project=vision, node_pool=serving_pool, cards=2)
    services.serving_reservation_create(actor=demo["admin"], project=forecasting, node_pool=serving_pool, cards=1)
    alice = client_for("alice")
    listed = call(alice, "GET", "serving-reservations/").json()["results"]
    assert [row["id"] for row in listed] == [mine.pk]
    assert call(alice, "PATCH", f"serving-reservations/{mine.pk}/", {"cards": 1}).status_code == 403
    assert call(client_for("deptadmin"), "POST", "serving-reservations/",
                {"project": vision.pk, "node_pool": "serve-l4", "cards": 1}).status_code == 403
    assert ServingReservation.objects.get(pk=mine.pk).cards == 2
