from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template

from apps.org.selectors import KUEUE_MAX_SHARE

register = template.Library()


@register.filter
def get_item(mapping: dict, key: Any) -> Any:
    """{{ quotas|get_item:pool.pk }}: dictionary lookup by a variable key."""
    return mapping.get(key) if mapping else None


@register.filter
def per_mille(share: int | None) -> str:
    """Kueue's weighted share with its unit: 350 -> "350 ‰"; Kueue's MaxInt64 (borrowing at weight 0) -> "∞"."""
    if share is None:
        return "—"
    return "∞" if share >= KUEUE_MAX_SHARE else f"{share} ‰"


@register.filter
def weight(value: Decimal | None) -> str:
    """A weight without trailing zeros: 2.50 -> 2.5, 1.00 -> 1."""
    return "" if value is None else format(value.normalize(), "f")
