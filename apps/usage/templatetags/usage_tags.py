"""The quota bar: deserved vs in use vs borrowed vs pending, drawn with CSS widths (no chart library)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template

register = template.Library()


def _pct(value: Decimal, scale: Decimal) -> str:
    return f"{min(Decimal(100), max(Decimal(0), value * 100 / scale)):.1f}"


@register.inclusion_tag("usage/partials/_bar.html")
def quota_bar(deserved: Any, used: Any, limit: Any = None, pending: Any = 0) -> dict[str, Any]:
    """Segments as percentages of the widest figure: used within deserved, borrowed beyond it, pending demand;
    markers at the deserved quota and the limit."""
    deserved, used, pending = Decimal(deserved or 0), Decimal(used or 0), Decimal(pending or 0)
    limit_value = None if limit is None else Decimal(limit)
    scale = max(deserved, used + pending, limit_value or Decimal(0), Decimal(1))
    within = min(used, deserved)
    borrowed = max(Decimal(0), used - deserved)
    return {
        "within": _pct(within, scale), "borrowed": _pct(borrowed, scale), "pending": _pct(pending, scale),
        "deserved_at": _pct(deserved, scale), "limit_at": None if limit_value is None else _pct(limit_value, scale),
        "label": f"{used.normalize():f} in use of {deserved} deserved"
                 + (f", {borrowed.normalize():f} borrowed over deserved" if borrowed else "")
                 + (f", {pending.normalize():f} waiting" if pending else "")
                 + ("" if limit_value is None else f", limit {limit_value}"),
    }
