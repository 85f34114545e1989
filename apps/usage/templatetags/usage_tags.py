"""The quota bar (deserved vs in use vs borrowed vs pending) and the budget bar (spent vs amount vs projected),
drawn with CSS widths (no chart library)."""

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


def _figure(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.1')).normalize():f}"


@register.inclusion_tag("usage/partials/_budget_bar.html")
def budget_bar(status: Any) -> dict[str, Any]:
    """A budget's bar (a BudgetStatus): spent within the amount, spent beyond it, what the running work adds by the
    end of the period; a marker at the amount. Scaled to the widest of amount and projection."""
    amount, spent, projected = status.budget.amount, status.spent, status.projected
    scale = max(amount, projected, spent, Decimal("0.001"))
    unit = status.budget.unit
    return {
        "within": _pct(min(spent, amount), scale), "over": _pct(max(Decimal(0), spent - amount), scale),
        "coming": _pct(max(Decimal(0), projected - spent), scale), "amount_at": _pct(amount, scale),
        "label": f"{_figure(spent)} of {_figure(amount)} {unit} spent, {_figure(projected)} projected by the end of "
                 "the period".replace("  ", " "),
    }


@register.filter
def budget_figure(value: Decimal) -> str:
    """A budget figure to one decimal, without trailing zeros (12.5, 240)."""
    return _figure(Decimal(value))
