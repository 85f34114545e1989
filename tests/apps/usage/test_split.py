"""The attribution rule as a pure function (apps/usage/split.py): exact at the deserved quota, guaranteed first,
proportional sharing of the rest, canonical pieces, and incremental recomputation equal to a full one."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta

import pytest

from apps.usage import split
from apps.usage.split import BEGINNING, Held, Piece

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def within_hours(pieces: list[Piece], units: dict[int, int], until: datetime) -> dict[int, float]:
    totals: dict[int, float] = {}
    for piece in pieces:
        end = piece.end or until
        totals[piece.interval_id] = totals.get(piece.interval_id, 0.0) + (
            (end - piece.start).total_seconds() / 3600 * units[piece.interval_id] * piece.numerator / piece.denominator)
    return totals


def test_preemptible_work_inside_deserved_is_all_within():
    pieces = split.split([Held(1, h(0), h(0.1), 4, guaranteed=False)], [(BEGINNING, 4)], BEGINNING)
    assert pieces == [Piece(1, h(0), h(0.1), 1, 1)]


def test_work_above_deserved_splits_exactly_at_d():
    # Two elastic jobs of 3 units against 4 deserved: 4 of the 6 within, each job 2/3 of its units.
    held = [Held(1, h(0), h(1), 3, False), Held(2, h(0), h(1), 3, False)]
    pieces = split.split(held, [(BEGINNING, 4)], BEGINNING)
    assert [piece.share for piece in pieces] == [(2, 3), (2, 3)]
    totals = within_hours(pieces, {1: 3, 2: 3}, h(1))
    assert sum(totals.values()) == pytest.approx(4.0)


def test_guaranteed_fills_deserved_first_and_elastic_shares_the_rest_by_units():
    held = [Held(1, h(0), h(2), 3, True), Held(2, h(0), h(1), 1, False), Held(3, h(0), h(1), 2, False)]
    pieces = split.split(held, [(BEGINNING, 4)], BEGINNING)
    shares = {piece.interval_id: piece.share for piece in pieces}
    assert shares == {1: (1, 1), 2: (1, 3), 3: (1, 3)}  # the one unit left of 4 after the guaranteed 3
    assert within_hours(pieces, {1: 3, 2: 1, 3: 2}, h(2)) == {1: pytest.approx(6.0), 2: pytest.approx(1 / 3),
                                                             3: pytest.approx(2 / 3)}


def test_a_share_changes_only_when_the_project_crosses_its_quota():
    # An elastic job alone inside deserved, then a second one pushes the project over, then it leaves again.
    held = [Held(1, h(0), h(3), 2, False), Held(2, h(1), h(2), 4, False)]
    pieces = split.split(held, [(BEGINNING, 4)], BEGINNING)
    assert [(p.interval_id, p.start, p.end, p.share) for p in pieces] == [
        (1, h(0), h(1), (1, 1)), (1, h(1), h(2), (2, 3)), (1, h(2), h(3), (1, 1)),
        (2, h(1), h(2), (2, 3)),
    ]


def test_quota_periods_count_from_their_start_and_open_intervals_stay_open():
    held = [Held(1, h(0), None, 4, False)]
    pieces = split.split(held, [(BEGINNING, 4), (h(5), 2)], BEGINNING)
    assert [(p.start, p.end, p.share) for p in pieces] == [(h(0), h(5), (1, 1)), (h(5), None, (1, 2))]


def test_no_quota_means_everything_is_over_and_zero_length_intervals_vanish():
    assert split.split([Held(1, h(0), h(1), 2, False)], [], BEGINNING) == [Piece(1, h(0), h(1), 0, 1)]
    assert split.split([Held(1, h(0), h(0), 2, False)], [(BEGINNING, 4)], BEGINNING) == []


def test_guaranteed_above_todays_deserved_counts_over():
    # Deserved lowered below what non-preemptible work holds (only possible in the past): the excess is over quota.
    pieces = split.split([Held(1, h(0), h(1), 4, True)], [(BEGINNING, 3)], BEGINNING)
    assert [piece.share for piece in pieces] == [(3, 4)]


def random_timeline(rng: random.Random, count: int) -> tuple[list[Held], list[tuple[datetime, int]]]:
    held = []
    for index in range(count):
        start = h(rng.randint(0, 40) / 2)
        end = None if rng.random() < 0.15 else start + timedelta(hours=rng.randint(0, 12) / 2)
        held.append(Held(index + 1, start, end, rng.choice((1, 1, 2, 3, 4, 8)), rng.random() < 0.35))
    periods = [(BEGINNING, rng.randint(0, 6))]
    for _ in range(rng.randint(0, 3)):
        periods.append((h(rng.randint(1, 50) / 2), rng.randint(0, 6)))
    return held, sorted(dict(periods).items())


def brute_force(held: list[Held], periods: list[tuple[datetime, int]], until: datetime) -> tuple[dict, dict]:
    """Within-deserved and held unit-hours of each interval, cutting at every half hour (all times are on it)."""
    within = {item.id: 0.0 for item in held}
    total = {item.id: 0.0 for item in held}
    moment = h(0)
    while moment < until:
        deserved = [units for since, units in periods if since <= moment][-1]
        live = [item for item in held if item.start <= moment and (item.end is None or item.end > moment)]
        guaranteed = sum(item.units for item in live if item.guaranteed)
        elastic = sum(item.units for item in live if not item.guaranteed)
        g_within = min(guaranteed, deserved)
        e_within = min(elastic, deserved - g_within)
        for item in live:
            share = g_within / guaranteed if item.guaranteed else e_within / elastic
            within[item.id] += 0.5 * item.units * share
            total[item.id] += 0.5 * item.units
        moment += timedelta(minutes=30)
    return within, total


@pytest.mark.parametrize("seed", range(40))
def test_random_timelines_match_brute_force_and_add_up(seed):
    rng = random.Random(seed)
    held, periods = random_timeline(rng, rng.randint(1, 14))
    until = h(40)
    pieces = split.split(held, periods, BEGINNING)
    units = {item.id: item.units for item in held}
    within = within_hours(pieces, units, until)
    expected_within, expected_total = brute_force(held, periods, until)
    for item in held:
        assert within.get(item.id, 0.0) == pytest.approx(expected_within[item.id], abs=1e-9), item
    # Pieces cover each interval exactly, without gaps or overlaps, and are maximal (no equal neighbours).
    for item in held:
        mine = [piece for piece in pieces if piece.interval_id == item.id]
        if item.end is not None and item.end <= item.start:
            assert mine == []
            continue
        assert mine[0].start == item.start and mine[-1].end == item.end
        for before, after in itertools.pairwise(mine):
            assert before.end == after.start and before.share != after.share
        held_hours = sum(((piece.end or until) - piece.start).total_seconds() / 3600 * item.units for piece in mine)
        assert held_hours == pytest.approx(expected_total[item.id])
    # Recomputing from any moment on gives the same pieces from then on (what the ledger writers rely on).
    since = h(rng.randint(0, 40) / 2)
    later = split.split(held, periods, since)
    expected_later = []
    for piece in pieces:
        if piece.end is not None and piece.end <= since:
            continue
        expected_later.append(Piece(piece.interval_id, max(piece.start, since), piece.end, *piece.share))
    assert later == expected_later
