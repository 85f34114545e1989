"""org 0011 keeps every existing price as the first row of its pool's history, valid from the start, so the costs
of months before the upgrade stay what they were; unpriced pools get no row."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.org.models import PRICED_FROM_THE_START, NodePoolPrice
from tests.apps.usage.test_split_migration import migrate

BEFORE = [("org", "0009_projectnamespace")]


@pytest.mark.django_db(transaction=True)
def test_existing_prices_become_the_first_row_of_their_history():
    try:
        pools = migrate(BEFORE).get_model("org", "NodePool").objects
        pools.create(slug="mig-priced", name="Priced", capacity=8, gpu_resource="nvidia.com/gpu",
                     price_per_card_hour=Decimal("2.75"))
        pools.create(slug="mig-free", name="Free", capacity=8, gpu_resource="nvidia.com/gpu")
        migrate(None)
        assert list(NodePoolPrice.objects.filter(node_pool__slug__startswith="mig-").values_list(
            "node_pool__slug", "price_per_card_hour", "valid_from", "set_by")) == [
            ("mig-priced", Decimal("2.75"), PRICED_FROM_THE_START, None)]
    finally:
        migrate(None)
