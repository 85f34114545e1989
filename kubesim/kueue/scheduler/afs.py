"""Admission Fair Sharing's arithmetic, in Kueue's units and precision (learned from Kueue v0.20's
pkg/util/admissionfairsharing and pkg/util/resource).

Kueue keeps a LocalQueue's decayed usage as resource quantities: every product with a float (the decay, the entry
penalty) is exact decimal arithmetic on the float's shortest decimal form, cut toward zero at nano precision, so a
contribution below a milli-unit still accumulates (a week-long half-life sampled every five minutes adds about
0.3m of a GPU per sample) and decay ends at zero instead of sticking. Amounts here are quantity values as Decimals
(CPU in cores, memory in bytes), not the scheduler's int64 view (CPU in millicores): the usage that orders
LocalQueues is weight x value summed over resources, so a core and a GPU weigh the same, as in Kueue.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_DOWN, Context, Decimal

from kubesim.kernel.quantity import Quantity, decimal_value

Usage = dict[str, Decimal]

_NANO = Decimal("1e-9")
_EXACT = Context(prec=80)  # wide enough that a product is exact before it is cut to nano precision


def alpha(elapsed_seconds: float, half_life_seconds: float) -> float:
    """The share of the current usage a sample after elapsed_seconds takes in: 1 - 0.5^(elapsed / half-life); none
    with a half-life of zero (Kueue's calculateAlphaRate)."""
    if half_life_seconds == 0:
        return 0.0
    return 1.0 - 0.5 ** (elapsed_seconds / half_life_seconds)


def scaled(values: Mapping[str, Decimal], factor: float) -> Usage:
    """Each value times the factor (taken as its shortest decimal form, as Go formats a float), cut toward zero
    at nano precision."""
    f = Decimal(repr(factor))
    return {r: _EXACT.multiply(v, f).quantize(_NANO, rounding=ROUND_DOWN, context=_EXACT) for r, v in values.items()}


def summed(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> Usage:
    """Both lists merged, values of a resource in both added."""
    out = dict(a)
    for r, v in b.items():
        out[r] = out[r] + v if r in out else v
    return out


def decayed(old: Mapping[str, Decimal], current: Mapping[str, Decimal], elapsed: float, half_life: float) -> Usage:
    """A sample: old x (1 - alpha) + current x alpha, alpha = alpha(elapsed, half-life)."""
    a = alpha(elapsed, half_life)
    return summed(scaled(old, 1 - a), scaled(current, a))


def entry_penalty(requests: Mapping[str, Decimal], sampling_seconds: float, half_life_seconds: float) -> Usage:
    """What an admission adds to its LocalQueue's usage until it settles: its requests x alpha(sampling interval)."""
    return scaled(requests, alpha(sampling_seconds, half_life_seconds))


def weighted_usage(
    consumed: Mapping[str, Decimal], penalty: Mapping[str, Decimal] | None, weight: float, weights: Mapping[str, float]
) -> float:
    """Sum over resources (in name order) of the resource's weight (1 unless configured) x its consumed usage plus
    pending penalty, over the LocalQueue's weight; infinite for a weight of zero or below, so such a queue goes
    last (Kueue's CalculateUsage)."""
    total = summed(consumed, penalty or {})
    usage = 0.0
    for r in sorted(total):
        usage += weights.get(r, 1.0) * float(total[r])
    if weight <= 0:
        return float("inf")
    return usage / weight


def value_of_amount(resource: str, amount: float) -> Decimal:
    """A scheduler amount (CPU in millicores) as a quantity value."""
    d = Decimal(amount) if isinstance(amount, int) else Decimal(repr(amount))
    return d.scaleb(-3) if resource == "cpu" else d


def parse_usage(quantities: Mapping[str, object]) -> Usage:
    """A status' consumedResources as values."""
    return {r: decimal_value(q) for r, q in quantities.items()}


def format_usage(values: Mapping[str, Decimal]) -> dict[str, str]:
    """Values as canonical quantity strings (`8`, `1500m`, `6828427124n`), by resource name."""
    return {r: str(Quantity(format(v, "f"))) for r, v in sorted(values.items())}
