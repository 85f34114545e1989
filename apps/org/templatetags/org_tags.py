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


@register.filter
def audit_diff(event: Any) -> list[tuple[str, Any, Any]]:
    """(field, before, after) for the fields an audit row changed; every field for a create or delete."""
    before, after = event.before or {}, event.after or {}
    keys = list(after) + [key for key in before if key not in after]
    if event.before is not None and event.after is not None:
        keys = [key for key in keys if before.get(key) != after.get(key)]
    else:  # a create or delete: leave out empty fields to keep the row short
        state = after if event.after is not None else before
        keys = [key for key in keys if state.get(key) not in (None, "", [], {})]
    return [(key, before.get(key), after.get(key)) for key in keys if key != "id"]
