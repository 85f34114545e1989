from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template

register = template.Library()


@register.filter
def get_item(mapping: dict, key: Any) -> Any:
    """{{ quotas|get_item:pool.pk }}: dictionary lookup by a variable key."""
    return mapping.get(key) if mapping else None


@register.filter
def weight(value: Decimal | None) -> str:
    """A weight without trailing zeros: 2.50 -> 2.5, 1.00 -> 1."""
    return "" if value is None else format(value.normalize(), "f")
