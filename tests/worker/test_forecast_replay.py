"""The forecast's replay on fixed snapshots whose answers are worked out by hand (worker/forecast.py `replay`).

One pool of 8 H100 cards in one department; vision and nlp deserve 4 each (the Kueue objects are the reconcile's
own `desired_objects`). Times are seconds after NOW; the replay plays ends within a minute of each other together,
at the last of them, so the snapshots space their ends further apart unless a test is about that.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from apps.workloads.history import Runtime, expected_runtime, quantile
from apps.workloads.models import ForecastBasis, ForecastReason
from worker.forecast import (
    WIDEN_MIN_RECORD,
    Job,
    Widening,
    replay,
    widened,
    widening_from,
    widenings_by_kind,
)
from worker.kueue_objects import (
    DepartmentSpec,
    OrgSnapshot,
    PoolQuota,
    PoolSpec,
    PriorityClassSpec,
    ProjectSpec,
    desired_objects,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"


def org(*, capacity=8, vision=4, nlp=4, nlp_limit=None) -> list[dict]:
    quotas = {"vision": PoolQuota(vision, None, Decimal(1)), "nlp": PoolQuota(nlp, nlp_limit, Decimal(1))}
    projects = tuple(ProjectSpec(slug=slug, namespace=f"proj-{slug}", does_not_lend=False, quotas={"h100": quota})
                     for slug, quota in quotas.items())
    department = DepartmentSpec(slug="research", quotas={"h100": PoolQuota(vision + nlp, None, Decimal(1))},
                                projects=projects)
    return desired_objects(OrgSnapshot(pools=(PoolSpec(slug="h100", gpu_resource=GPU, capacity=capacity),),
                                       departments=(department,),
                                       priority_classes=(PriorityClassSpec("train", 50, ""),)))


def fixed(seconds: float) -> Runtime:
    return Runtime(seconds, seconds, seconds, ForecastBasis.MAX_RUNTIME)


def job(pk: int, project: str, units: int, *, guaranteed=True, priority=50, created=0, runtime=None,
        running_since: float | None = None) -> Job:
    holding = running_since is not None
    queue = f"{'guaranteed' if guaranteed else 'elastic'}-h100"
    return Job(id=pk, namespace=f"proj-{project}", queue=queue, priority=priority,
               created=NOW - timedelta(hours=1) + timedelta(seconds=created), resource=GPU, units_per_pod=units,
               pods=1, runtime=runtime,
               cluster_queue=f"proj-{project}-h100-{'guaranteed' if guaranteed else 'elastic'}" if holding else "",
               flavor="h100", reserved_at=NOW - timedelta(seconds=running_since) if holding else None)


def seconds(estimate) -> tuple:
    return tuple(None if t is None else (t - NOW).total_seconds()
                 for t in (estimate.earliest, estimate.likely, estimate.latest))


def test_empty_pool_starts_now():
    estimates = replay(objects=org(), holding=[], waiting=[job(1, "vision", 4, runtime=fixed(600))], now=NOW)
    assert seconds(estimates[1]) == (0, 0, 0)
    assert estimates[1].basis == ForecastBasis.STARTS_NOW


def test_full_pool_waits_for_the_known_ends():
    """vision's own 4 cards free at +480 (max runtime 600, running 120 s); nlp's from its history: similar runs of
    60, 210, 300, 420 and 520 s give 120 / 300 / 480 (10th, 50th, 90th percentiles, interpolated)."""
    history = expected_runtime(max_runtime=None, samples=[520, 60, 300, 210, 420])
    assert history == Runtime(120, 300, 480, ForecastBasis.HISTORY)
    holding = [job(1, "vision", 4, runtime=fixed(600), running_since=120),
               job(2, "nlp", 4, runtime=history, running_since=0)]
    waiting = [job(3, "vision", 4, created=10, runtime=fixed(60)), job(4, "nlp", 4, created=20, runtime=fixed(60))]
    estimates = replay(objects=org(), holding=holding, waiting=waiting, now=NOW)
    assert seconds(estimates[3]) == (480, 480, 480) and estimates[3].basis == ForecastBasis.MAX_RUNTIME
    assert seconds(estimates[4]) == (120, 300, 480) and estimates[4].basis == ForecastBasis.HISTORY


def test_ends_within_a_minute_are_replayed_together_and_the_range_spans_them():
    """vision's work ends at +590 (max runtime), nlp's from its history (540, 600, 660 s: 552 / 600 / 648): both
    ends fall within a minute of the first, so the replay plays them together at the later, +600, and either
    makes room for vision's next workload (the department lends nlp's cards). Its range runs from the first those
    ends can come (nlp's optimistic +552) to the last (nlp's pessimistic +648); its basis is mixed."""
    history = expected_runtime(max_runtime=None, samples=[540, 600, 660])
    assert history == Runtime(552, 600, 648, ForecastBasis.HISTORY)
    holding = [job(1, "vision", 4, runtime=fixed(590), running_since=0),
               job(2, "nlp", 4, runtime=history, running_since=0)]
    estimates = replay(objects=org(), holding=holding, waiting=[job(3, "vision", 4, runtime=fixed(60))], now=NOW)
    assert seconds(estimates[3]) == (552, 600, 648) and estimates[3].basis == ForecastBasis.MIXED


def test_a_range_follows_the_chain_of_ends():
    """vision's 4 cards are held until +600 (nlp's by work that never ends); two waiting vision workloads with a
    history of 110 / 300 / 490 s (10th, 50th and 90th percentiles of 50, 200, 300, 400, 550). The first starts at
    +600 exactly; the second when the first ends: likely +900, as early as +710 and as late as +1090."""
    history = expected_runtime(max_runtime=None, samples=[50, 200, 300, 400, 550])
    assert history == Runtime(110, 300, 490, ForecastBasis.HISTORY)
    holding = [job(1, "vision", 4, runtime=fixed(600), running_since=0)]
    waiting = [job(2, "vision", 4, created=0, runtime=history), job(3, "vision", 4, created=10, runtime=history)]
    holding.append(job(4, "nlp", 4, runtime=None, running_since=0))
    estimates = replay(objects=org(), holding=holding, waiting=waiting, now=NOW)
    assert seconds(estimates[2]) == (600, 600, 600) and estimates[2].basis == ForecastBasis.MAX_RUNTIME
    assert seconds(estimates[3]) == (710, 900, 1090) and estimates[3].basis == ForecastBasis.HISTORY


def test_a_higher_priority_arrival_goes_first():
    """One queue, 4 cards held until +600: the later but higher-priority workload (300 s) starts at +600, the
    earlier one after it, at +900."""
    holding = [job(1, "vision", 4, runtime=fixed(600), running_since=0)]
    waiting = [job(2, "vision", 4, priority=50, created=0, runtime=fixed(300)),
               job(3, "vision", 4, priority=100, created=30, runtime=fixed(300))]
    estimates = replay(objects=org(), holding=holding, waiting=waiting, now=NOW)
    assert seconds(estimates[3]) == (600, 600, 600)
    assert seconds(estimates[2]) == (900, 900, 900)


def test_reclaim_starts_at_once_and_the_borrower_waits():
    """nlp's preemptible work borrows vision's idle 4 cards for an hour; vision's non-preemptible work reclaims
    them now. nlp's next preemptible workload then waits for nlp's own running work (+200)."""
    holding = [job(1, "nlp", 4, runtime=fixed(200), running_since=0),
               job(2, "nlp", 4, guaranteed=False, runtime=fixed(3600), running_since=0)]
    waiting = [job(3, "vision", 4, created=10, runtime=fixed(600)),
               job(4, "nlp", 4, guaranteed=False, created=20, runtime=fixed(100))]
    estimates = replay(objects=org(), holding=holding, waiting=waiting, now=NOW)
    assert seconds(estimates[3]) == (0, 0, 0) and estimates[3].basis == ForecastBasis.STARTS_NOW
    # The preempted borrower (#2, created first) goes back in its queue ahead of #4: it restarts at +200, and #4
    # follows when vision's work ends at +600 and gives its lent cards back to the cohort.
    assert seconds(estimates[4]) == (600, 600, 600)


def test_unknown_runtime_is_said_only_where_it_matters():
    """nlp runs work with no max runtime and no history: nlp's next non-preemptible workload cannot be estimated,
    vision's, which does not wait on it, can."""
    holding = [job(1, "nlp", 4, runtime=None, running_since=0)]
    waiting = [job(2, "nlp", 4, runtime=fixed(60)), job(3, "vision", 4, runtime=fixed(60))]
    estimates = replay(objects=org(), holding=holding, waiting=waiting, now=NOW)
    assert seconds(estimates[2]) == (None, None, None)
    assert estimates[2].basis == ForecastBasis.NONE and estimates[2].reason == ForecastReason.NO_RUNTIME
    assert estimates[2].message == "1 workload it waits for has no max runtime and no history of similar runs"
    assert seconds(estimates[3]) == (0, 0, 0)


def test_work_that_can_never_fit():
    estimates = replay(objects=org(), holding=[], waiting=[job(1, "vision", 6, runtime=fixed(60))], now=NOW)
    assert estimates[1].reason == ForecastReason.NEVER_FITS
    assert estimates[1].message == ("it asks for 6 GPU units; its queue can never get more than 4, whatever else "
                                    "finishes")


def test_a_stopped_queue_and_a_missing_queue():
    stopped = {("ClusterQueue", "proj-vision-h100-guaranteed")}
    waiting = [job(1, "vision", 1, runtime=fixed(60)), job(2, "etl", 1, runtime=fixed(60))]
    estimates = replay(objects=org(), holding=[], waiting=waiting, now=NOW, stopped=stopped)
    assert estimates[1].reason == ForecastReason.QUEUE_STOPPED
    assert estimates[2].reason == ForecastReason.NO_QUEUE


def test_beyond_the_horizon():
    holding = [job(1, "vision", 4, runtime=fixed(8 * 86400), running_since=0)]
    estimates = replay(objects=org(), holding=holding, waiting=[job(2, "vision", 4, runtime=fixed(60))], now=NOW)
    assert estimates[2].reason == ForecastReason.BEYOND_HORIZON


@pytest.mark.parametrize(("samples", "elapsed", "max_runtime", "expected"), [
    ([100, 200], 0, None, None),  # too few similar runs and no max runtime
    ([100, 200], 0, 900, Runtime(900, 900, 900, ForecastBasis.MAX_RUNTIME)),
    ([100, 200, 300, 400, 500], 250, None, Runtime(320, 400, 480, ForecastBasis.HISTORY)),  # ran 250 s already
    ([100, 200, 300, 400, 500], 600, None, Runtime(600, 600, 920, ForecastBasis.HISTORY)),  # longer than any
    ([100, 200, 300, 400, 500], 0, 250, Runtime(140, 250, 250, ForecastBasis.HISTORY)),  # capped by its max
])
def test_expected_runtime(samples, elapsed, max_runtime, expected):
    assert expected_runtime(max_runtime=max_runtime, samples=samples, elapsed=elapsed) == expected


def test_quantile_interpolates():
    assert quantile([10.0], 0.9) == 10.0
    assert quantile([0.0, 10.0], 0.25) == 2.5


def test_an_end_alone_is_replayed_at_its_own_time():
    holding = [job(1, "vision", 4, runtime=fixed(600), running_since=100)]  # ends at +500
    estimates = replay(objects=org(), holding=holding, waiting=[job(2, "vision", 4, runtime=fixed(60))], now=NOW)
    assert seconds(estimates[2]) == (500, 500, 500)


@pytest.mark.parametrize(("nlp_ends", "start"), [(10_900, 10_900), (11_100, 10_000)])
def test_ends_far_ahead_are_grouped_over_a_tenth_of_their_distance(nlp_ends, start):
    """vision's cards free at +10,000; nlp's work ends 900 s later (within a tenth of 10,000 s: replayed together,
    at the later end) or 1,100 s later (not: vision's next workload starts when vision's own work ends)."""
    holding = [job(1, "vision", 4, runtime=fixed(10_000), running_since=0),
               job(2, "nlp", 4, runtime=fixed(nlp_ends), running_since=0)]
    estimates = replay(objects=org(), holding=holding, waiting=[job(3, "vision", 4, runtime=fixed(60))], now=NOW)
    assert seconds(estimates[3])[1] == start


def waits(*rows: tuple[float, float, float | None]) -> list[tuple]:
    """Records estimated at NOW: (earliest, latest, started or None) in seconds after it."""
    return [(NOW, *(None if s is None else NOW + timedelta(seconds=s) for s in row)) for row in rows]


LATER = NOW + timedelta(hours=1)  # when the widening is asked for


def test_no_widening_from_too_short_a_record():
    assert widening_from(waits(*[(100, 200, 900)] * (WIDEN_MIN_RECORD - 1)), now=LATER) is None


def test_widening_puts_the_recorded_starts_inside_each_edge():
    """Twenty waits estimated at 100-200 s: fourteen started inside, three at 300 s and three at 50 s. The 90th
    percentile of started/latest and the 10th of started/earliest make the edges (latest x 1.5, earliest x 0.5); one
    start outside on each side is within the tenth allowed; a record of good ranges leaves them as they are (never
    narrower)."""
    record = waits(*[(100, 200, 150)] * 14, *[(100, 200, 300)] * 3, *[(100, 200, 50)] * 3)
    assert widening_from(record, now=LATER) == Widening(earlier=0.5, later=1.5)
    assert widening_from(waits(*[(100, 200, 150)] * 18, (100, 200, 300), (100, 200, 50)), now=LATER) == Widening()
    assert widening_from(waits(*[(100, 200, 150)] * 20), now=LATER) == Widening()
    # A range starting at once gives its earliest edge nothing to learn from.
    assert widening_from(waits(*[(0, 200, 150)] * 20), now=LATER).earlier == 1.0


def test_a_wait_still_going_counts_once_its_outcome_is_known():
    """Seventeen waits started inside 100-200 s; three still wait. Asked 150 s after the estimate, nothing is known of
    the three (too few to widen); asked 600 s after, they missed their latest by three times at least."""
    record = waits(*[(100, 200, 150)] * 17, *[(100, 200, None)] * 3)
    assert widening_from(record, now=NOW + timedelta(seconds=150)) is None
    assert widening_from(record, now=NOW + timedelta(seconds=600)) == Widening(later=3.0)


def test_a_widened_range_stretches_from_now_and_keeps_its_likely_start():
    estimate = replay(objects=org(), holding=[job(1, "vision", 4, runtime=Runtime(400, 600, 800, "history"),
                                                 running_since=0)],
                      waiting=[job(2, "vision", 4, runtime=fixed(60))], now=NOW)[2]
    assert seconds(estimate) == (400, 600, 800)
    assert seconds(widened(estimate, Widening(earlier=0.5, later=1.5), NOW)) == (200, 600, 1200)
    # Something starting now, or without an estimate, stays as it is.
    now = replay(objects=org(), holding=[], waiting=[job(3, "vision", 4, runtime=fixed(60))], now=NOW)[3]
    assert widened(now, Widening(0.5, 1.5), NOW) == now
    never = replay(objects=org(), holding=[], waiting=[job(4, "vision", 20, runtime=fixed(60))], now=NOW)[4]
    assert never.likely is None and widened(never, Widening(0.5, 1.5), NOW) == never


def test_each_kind_is_widened_by_its_own_record_else_by_the_whole():
    """Non-preemptible work's twenty waits all started inside; preemptible work's twenty all at twice their latest:
    each kind keeps its own widening. With only ten preemptible waits, preemptible work gets the whole record's;
    with too few in all, nothing is widened."""
    inside = [(*row, False) for row in waits(*[(100, 200, 150)] * 20)]
    late = [(*row, True) for row in waits(*[(100, 200, 400)] * 20)]
    assert widenings_by_kind(inside + late, now=LATER) == {False: Widening(), True: Widening(later=2.0)}
    whole = widening_from((row[:4] for row in inside + late[:10]), now=LATER)
    assert whole is not None and whole.later > 1.0
    assert widenings_by_kind(inside + late[:10], now=LATER) == {False: Widening(), True: whole}
    assert widenings_by_kind(late[:10], now=LATER) == {False: Widening(), True: Widening()}
