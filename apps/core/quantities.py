"""Kubernetes resource quantities ("2", "500m", "16Gi", "1e3") as numbers, for reading objects the portal did not
write (docs/architecture.md, Work submitted outside the portal). Pure."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

_SUFFIXES = {"Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
             "Pi": Decimal(2**50), "Ei": Decimal(2**60), "k": Decimal(10**3), "M": Decimal(10**6),
             "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18),
             "m": Decimal("0.001"), "u": Decimal("0.000001"), "n": Decimal("0.000000001")}


def quantity(value: object) -> Decimal:
    """The quantity's value; ValueError when it is not one (or is negative, or not finite)."""
    text = str(value).strip()
    for suffix, factor in _SUFFIXES.items():
        if text.endswith(suffix) and len(text) > len(suffix):
            return _number(text[:-len(suffix)]) * factor
    return _number(text)


def _number(text: str) -> Decimal:
    try:
        number = Decimal(text)
    except InvalidOperation as error:
        raise ValueError(f"{text!r} is not a quantity") from error
    if not number.is_finite() or number < 0:
        raise ValueError(f"{text!r} is not a quantity")
    return number
