"""Kubernetes quantities as the integers Kueue's scheduler compares (CPU in millicores, everything else in units)."""

from __future__ import annotations

import math
import re
from decimal import Decimal

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_RE = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_BINARY = [("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)]


def parse(value: str | int | float) -> Decimal:
    """A quantity string (`500m`, `600Mi`, `2`) as an exact decimal; ValueError when malformed."""
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    m = _RE.match(str(value).strip())
    if not m:
        raise ValueError(f"invalid quantity {value!r}")
    num = m.group(1)
    suffix = m.group(2) or ""
    if "e" in num.lower() and suffix:
        raise ValueError(f"invalid quantity {value!r}")
    return Decimal(num) * _SUFFIX[suffix]


def to_amount(resource: str, value: str | int | float) -> int:
    """Kueue's int64 view: CPU as MilliValue, other resources as Value (rounded up, like resource.Quantity)."""
    d = parse(value)
    if resource == "cpu":
        return math.ceil(d * 1000)
    return math.ceil(d)


def format_amount(resource: str, amount: int) -> str:
    """Back to a canonical quantity string: `3`, `500m`, `600Mi`."""
    if resource == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount and ("memory" in resource or "storage" in resource):
        for suffix, size in _BINARY:
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)
