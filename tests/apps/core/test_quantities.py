"""apps.core.quantities: every suffix Kubernetes writes, the sub-milli ones included (Kueue's Admission Fair Sharing
keeps a LocalQueue's decayed usage at nano precision, e.g. `343763n` of a GPU)."""

from decimal import Decimal

import pytest

from apps.core.quantities import quantity


@pytest.mark.parametrize(("text", "value"), [
    ("2", Decimal(2)), ("500m", Decimal("0.5")), ("16Gi", Decimal(16 * 2**30)), ("1e3", Decimal(1000)),
    ("250u", Decimal("0.00025")), ("6828427124n", Decimal("6.828427124")), ("343763n", Decimal("0.000343763")),
])
def test_quantity_reads_every_suffix(text, value):
    assert quantity(text) == value


@pytest.mark.parametrize("text", ["n", "-1", "1x", "abc"])
def test_quantity_refuses_what_is_not_one(text):
    with pytest.raises(ValueError):
        quantity(text)
