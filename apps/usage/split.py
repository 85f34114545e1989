"""Within deserved or over quota: the attribution rule, as a pure function (no database; migrations use it too).

GPU-hours are split by the organisation's quota, not by the ClusterQueue a workload ran in. For one project on one
node pool, at each moment t:

- H(t) = the units of every interval the project held at t, guaranteed and elastic queues together (a share of a
  card on a KAI pool counts as that share of a unit: KAI adds fractions up against the deserved quota);
- D(t) = the project's deserved quota on the pool at t (``DeservedPeriod`` rows);
- within-deserved units = min(H, D); over-quota units = H - min(H, D).

Who gets the within-deserved units: non-preemptible work (the guaranteed queue) fills deserved first, since Kueue
never lets it borrow (its queue's nominal quota *is* the deserved quota): the guaranteed intervals share
min(G, D) in proportion to their units, so each holds the share min(G, D) / G (1 unless today's deserved is below
what guaranteed work once held). Preemptible work (the elastic queue) shares what is left, R = D - min(G, D), in
proportion to its units: each elastic interval holds the share min(E, R) / E. Proportional sharing needs no order
between jobs (Kueue does not say which elastic job is the borrowing one: borrowing belongs to the project, not to a
job) and makes every split add up exactly: summed over the intervals, within-deserved units are min(H, D) at every
moment, so per-interval, per-user and per-workload within-deserved hours add up to the project's.

Units are whole numbers or exact fractions (Fraction), never floats, so the shares stay exact. A share is kept as
a fraction (numerator, denominator) in lowest terms, 1/1 for "all within deserved" and 0/1 for
"all over quota". The result is a list of pieces: per interval, maximal stretches of constant share. That form is
canonical (the same intervals and quotas always give the same pieces), so recomputing a stretch of a timeline is
idempotent.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction

# The start of the first deserved period of a project on a pool: the first quota known applies to all earlier time
# (no queue, so no usage, existed before a project had a quota row; and cluster clocks may lag the portal's).
BEGINNING = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Held:
    """One ledger interval of the timeline (units held from start to end; end None while still held): whole units,
    or a share of one (a fraction of a card on a KAI pool)."""

    id: int
    start: datetime
    end: datetime | None
    units: int | Fraction
    guaranteed: bool


@dataclass
class Piece:
    """A stretch of one interval with a constant within-deserved share numerator/denominator."""

    interval_id: int
    start: datetime
    end: datetime | None
    numerator: int
    denominator: int

    @property
    def share(self) -> tuple[int, int]:
        return self.numerator, self.denominator


def fraction(numerator: int | Fraction, denominator: int | Fraction) -> tuple[int, int]:
    """numerator/denominator in lowest terms, 0 <= n <= d; an empty class (d == 0) counts as fully within."""
    if denominator <= 0 or numerator >= denominator:
        return 1, 1
    if numerator <= 0:
        return 0, 1
    ratio = Fraction(numerator) / Fraction(denominator)
    return ratio.numerator, ratio.denominator


def shares(guaranteed: int | Fraction, elastic: int | Fraction,
           deserved: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(guaranteed share, elastic share) of one moment: G units in guaranteed, E in elastic, D deserved."""
    guaranteed_within = min(guaranteed, max(deserved, 0))
    left = max(deserved, 0) - guaranteed_within
    return fraction(guaranteed_within, guaranteed), fraction(min(elastic, left), elastic)


def deserved_at(periods: Sequence[tuple[datetime, int]]) -> tuple[list[datetime], list[int]]:
    """Sorted period starts and their deserved units, for bisecting (D = 0 before the first and without any)."""
    ordered = sorted(periods)
    return [start for start, _ in ordered], [units for _, units in ordered]


def split(intervals: Iterable[Held], periods: Sequence[tuple[datetime, int]], since: datetime) -> list[Piece]:
    """The pieces of every interval from `since` on (intervals that ended by then are ignored), in canonical form.

    `periods` are (start, deserved units) of the project's deserved quota on the pool, each valid until the next.
    One sweep over the start, end and quota-change moments, O((n + p) log n) for n intervals and p periods.
    """
    starts, units_at = deserved_at(periods)

    def deserved(moment: datetime) -> int:
        index = bisect_right(starts, moment) - 1
        return units_at[index] if index >= 0 else 0

    alive = [held for held in intervals if (held.end is None or held.end > since)
             and (held.end is None or held.end > held.start)]
    # Moments where something changes: interval starts and ends after `since`, quota changes after `since`.
    moments = {since}
    moments.update(held.start for held in alive if held.start > since)
    moments.update(held.end for held in alive if held.end is not None)
    moments.update(start for start in starts if start > since)
    order = sorted(moments)
    begins = sorted(alive, key=lambda held: (max(held.start, since), held.id))
    ending: list[tuple[datetime, int]] = []  # heap of (end, id) of the active intervals that end
    active: dict[int, Held] = {}
    open_piece: dict[int, Piece] = {}
    pieces: list[Piece] = []
    cursor = 0
    held_units: dict[bool, int | Fraction] = {True: 0, False: 0}  # units held now, by queue (guaranteed or not)
    for index, moment in enumerate(order):
        while ending and ending[0][0] <= moment:
            _, gone = heapq.heappop(ending)
            left = active.pop(gone)
            held_units[left.guaranteed] -= left.units
            open_piece.pop(gone, None)
        while cursor < len(begins) and max(begins[cursor].start, since) <= moment:
            held = begins[cursor]
            cursor += 1
            active[held.id] = held
            held_units[held.guaranteed] += held.units
            if held.end is not None:
                heapq.heappush(ending, (held.end, held.id))
        following = order[index + 1] if index + 1 < len(order) else None
        guaranteed, elastic = held_units[True], held_units[False]
        guaranteed_share, elastic_share = shares(guaranteed, elastic, deserved(moment))
        for held in active.values():
            share = guaranteed_share if held.guaranteed else elastic_share
            end = following if held.end is None else (held.end if following is None else min(held.end, following))
            current = open_piece.get(held.id)
            if current is not None and current.share == share and current.end == moment:
                current.end = end
            else:
                current = Piece(held.id, moment, end, *share)
                pieces.append(current)
                open_piece[held.id] = current
    return sorted(pieces, key=lambda piece: (piece.interval_id, piece.start))
