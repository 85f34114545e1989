"""Kubernetes resource quantities: the one strict parser every part of kubesim uses.

Grammar (resource.Quantity): an optional sign, digits with at most one decimal point (`1`, `1.5`, `.5`, `5.`),
then at most one of: a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal suffix (n u m k M G T P E), or a decimal
exponent (`e3`, `E-2`). Only ASCII digits count; nothing may surround the quantity (no whitespace, no NUL).
Anything else raises `QuantityError`, a ValueError whose message is kube's own, which the API turns into a
400/422 Status.

`parse_quantity` gives the exact value (and the format kube prints it back in); `to_amount` / `format_amount`
are the integer view Kueue's scheduler compares (CPU in millicores, everything else in units).
"""

from __future__ import annotations

import functools
import math
import re
from decimal import ROUND_CEILING, Decimal

# kube's resource.ErrFormatWrong text: what kube-apiserver answers for a body with a malformed quantity.
QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
# The OpenAPI pattern Kubernetes publishes for Quantity (and Kueue's CRDs carry on int-or-string quantity fields).
# It is looser than the parser (it admits `1e1.5`); validation checks the parser too on fields carrying it.
OPENAPI_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

_GRAMMAR = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([KMGTPE]i)|([numkMGTPE])|[eE]([+-]?[0-9]+))?")
_BINARY_POWER = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}  # powers of 1024
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL_EXPONENT.items()}
_MAX_EXPONENT = 2**31 - 1  # kube reads the exponent as a 32-bit integer
MAX_VALUE = Decimal(2**63 - 1)  # kube caps a quantity's magnitude at the largest int64
_BINARY_UNITS = [("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)]


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity. str(error) is kube's message; `.value` the offending input."""

    def __init__(self, value: object, message: str = QUANTITY_ERROR) -> None:
        super().__init__(message)
        self.value = value
        self.message = message


class Quantity:
    """A parsed resource.Quantity: the exact value plus the format kube keeps for printing it back."""

    __slots__ = ("format", "value")

    def __init__(self, text: str) -> None:
        """Parse a quantity string strictly; QuantityError when it is not one."""
        self.value, self.format = _parse(text)  # format: "binary", "decimal" or "exponent"

    def __str__(self) -> str:
        """Canonical form (Quantity.String()): the largest suffix that keeps the value an integer."""
        if self.value == 0:
            return "0"
        sign = "-" if self.value < 0 else ""
        v = abs(self.value)
        if self.format == "binary" and v >= 1024 and v == v.to_integral_value():
            for suffix, power in sorted(_BINARY_POWER.items(), key=lambda kv: -kv[1]):
                if v % (1024**power) == 0:
                    return f"{sign}{int(v) // 1024**power}{suffix}"
            return f"{sign}{int(v)}"
        v = (v.scaleb(9).to_integral_value(ROUND_CEILING)).scaleb(-9)  # kube keeps nano precision, rounding up
        for exp in range(18, -12, -3):
            scaled = v.scaleb(-exp)
            if scaled == scaled.to_integral_value():
                suffix = (f"e{exp}" if exp else "") if self.format == "exponent" else _DECIMAL_SUFFIX[exp]
                return f"{sign}{int(scaled)}{suffix}"
        return f"{sign}{v}"

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def parse_quantity(value: object) -> Quantity:
    """A JSON string or number as a Quantity; QuantityError for anything else (booleans, NaN, `1.2.3`, ...)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise QuantityError(value)
    return Quantity(value if isinstance(value, str) else repr(value))


def _parse(text: str) -> tuple[Decimal, str]:
    m = _GRAMMAR.fullmatch(text)
    if m is None:
        raise QuantityError(text)
    number, binary, decimal, exponent = m.groups()
    base = Decimal(number)  # the grammar admits only what Decimal reads exactly
    if binary:
        return _capped(base, 0, 1024 ** _BINARY_POWER[binary]), "binary"
    if exponent is not None:
        if len(exponent.lstrip("+-")) > 10 or abs(int(exponent)) > _MAX_EXPONENT:
            raise QuantityError(text, "unable to parse quantity's suffix")
        return _capped(base, int(exponent)), "exponent"
    return _capped(base, _DECIMAL_EXPONENT[decimal or ""]), "decimal"


def _capped(base: Decimal, shift: int, factor: int = 1) -> Decimal:
    """base * factor * 10**shift, its magnitude capped at the largest int64 as kube caps quantities, and a
    non-zero magnitude below 1e-30 raised to 1n (kube rounds non-zero values up to nano precision)."""
    if base == 0:
        return Decimal(0)
    magnitude = base.adjusted() + shift + len(str(factor))  # an upper bound of the decimal exponent
    if magnitude > 40:
        return MAX_VALUE.copy_sign(base)
    if magnitude < -30:
        return Decimal("1e-9").copy_sign(base)
    value = (base * factor).scaleb(shift)
    return MAX_VALUE.copy_sign(value) if abs(value) > MAX_VALUE else value


def decimal_value(value: object) -> Decimal:
    """The exact value of a quantity (`500m` -> 0.5); QuantityError when malformed."""
    return parse_quantity(value).value


def to_amount(resource: str, value: object) -> int:
    """Kueue's int64 view: CPU as MilliValue, other resources as Value (rounded up, like resource.Quantity).
    Remembered per (resource, value, its type): Kueue's controllers read the same few quantities on every pass."""
    try:
        return _remembered_amount(resource, value, type(value).__name__)
    except TypeError:  # unhashable, so not a quantity: the parser says why
        return _amount(resource, value)


@functools.lru_cache(maxsize=4096)
def _remembered_amount(resource: str, value: object, _type: str) -> int:
    return _amount(resource, value)  # the type is in the key: 1, 1.0 and True are equal but parse differently


def _amount(resource: str, value: object) -> int:
    d = decimal_value(value)
    if resource == "cpu":
        return math.ceil(d * 1000)
    return math.ceil(d)


def format_amount(resource: str, amount: int) -> str:
    """Back to a canonical quantity string: `3`, `500m`, `600Mi`."""
    if resource == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount and ("memory" in resource or "storage" in resource):
        for suffix, size in _BINARY_UNITS:
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)
