"""Serving pools and their reservations: admins only, within the pool's capacity, every refusal at once, audited."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import NodePool, Project, Quota, ServingReservation
from tests.factories import NodePoolFactory
from worker.kueue_sync import desired_from_database


@pytest.fixture
def serving_pool(demo):
    return services.node_pool_create(actor=demo["admin"], slug="serve-l4", name="L4 serving",
                                     gpu_resource="nvidia.com/gpu", capacity=6, serving=True,
                                     node_labels={"portal.gpu/pool": "serve-l4"})


def test_reservations_fill_the_pool_and_no_further(demo, serving_pool):
    vision, nlp = Project.objects.get(slug="vision"), Project.objects.get(slug="nlp")
    services.serving_reservation_create(actor=demo["admin"], project=vision, node_pool=serving_pool, cards=4)
    before = AuditEvent.objects.count()
    with pytest.raises(ValidationError) as caught:
        services.serving_reservation_create(actor=demo["admin"], project=nlp, node_pool=serving_pool, cards=3)
    assert caught.value.message_dict == {"cards": [
        "serve-l4 has 6 units and other projects reserve 4, so at most 2 can be reserved here."]}
    assert AuditEvent.objects.count() == before
    reservation = services.serving_reservation_create(actor=demo["admin"], project=nlp, node_pool=serving_pool,
                                                      cards=2)
    event = AuditEvent.objects.get(action="serving_reservation.create", object_id=str(reservation.pk))
    assert event.project == nlp and event.after["cards"] == 2


def test_update_checks_the_pool_without_counting_itself(demo, serving_pool):
    vision = Project.objects.get(slug="vision")
    reservation = services.serving_reservation_create(actor=demo["admin"], project=vision, node_pool=serving_pool,
                                                      cards=4)
    reservation = services.serving_reservation_update(actor=demo["admin"], serving_reservation=reservation, cards=6)
    assert reservation.cards == 6 and reservation.version == 2
    with pytest.raises(ValidationError) as caught:
        services.serving_reservation_update(actor=demo["admin"], serving_reservation=reservation, cards=7,
                                            node_pool=NodePool.objects.get(slug="h100"))
    assert set(caught.value.message_dict) == {"cards", "node_pool"}  # both refusals at once
    assert ServingReservation.objects.get(pk=reservation.pk).cards == 6


def test_only_serving_pools_take_reservations_and_only_admins_give_them(demo):
    vision = Project.objects.get(slug="vision")
    h100 = NodePool.objects.get(slug="h100")
    with pytest.raises(ValidationError) as caught:
        services.serving_reservation_create(actor=demo["admin"], project=vision, node_pool=h100, cards=1)
    assert caught.value.message_dict == {"node_pool": [
        "h100 is not a serving pool; mark it as serving before reserving its cards."]}
    with pytest.raises(PermissionDenied):
        services.serving_reservation_create(actor=demo["deptadmin"], project=vision, node_pool=h100, cards=1)
    assert not ServingReservation.objects.exists()


def test_a_pool_with_quotas_cannot_become_serving_nor_a_serving_pool_take_quotas(demo, serving_pool):
    with pytest.raises(ValidationError) as caught:
        services.node_pool_update(actor=demo["admin"], node_pool=NodePool.objects.get(slug="h100"), serving=True)
    assert "h100 has quotas, which a serving pool cannot have" in caught.value.message_dict["serving"][0]
    with pytest.raises(ValidationError) as caught:
        services.quota_set(actor=demo["admin"], node_pool=serving_pool, project=Project.objects.get(slug="vision"),
                           deserved=1, limit=1)
    assert "serve-l4 is a serving pool" in " ".join(caught.value.messages)
    assert not Quota.objects.filter(node_pool=serving_pool).exists()


def test_a_pool_keeps_room_for_its_reservations(demo, serving_pool):
    services.serving_reservation_create(actor=demo["admin"], project=Project.objects.get(slug="vision"),
                                        node_pool=serving_pool, cards=5)
    with pytest.raises(ValidationError) as caught:
        services.node_pool_update(actor=demo["admin"], node_pool=serving_pool, capacity=4, serving=False)
    assert caught.value.message_dict == {"serving": [
        "Projects reserve 5 units of serve-l4 for serving; remove their reservations first."]}
    with pytest.raises(ValidationError) as caught:
        services.node_pool_update(actor=demo["admin"], node_pool=serving_pool, capacity=4)
    assert caught.value.message_dict == {"capacity": [
        "Projects reserve 5 units of serve-l4 for serving, more than a capacity of 4. Lower their reservations "
        "first."]}
    assert NodePool.objects.get(pk=serving_pool.pk).capacity == 6


def test_a_serving_pool_has_no_kueue_objects(demo, serving_pool):
    batch = NodePoolFactory(slug="batch-l4")
    names = {(obj["kind"], obj["metadata"]["name"]) for obj in desired_from_database()}
    assert ("ResourceFlavor", batch.slug) in names
    assert not [name for name in names if serving_pool.slug in name[1]]
