"""The watcher's deferred ledger (apps.usage.services.ledger_deferred): interval writes leave PendingRecompute marks
instead of recomputing slices under the timeline's lock; a settle pass, or any reader of slices, brings the slices to
exactly what immediate recomputes give."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from apps.usage import reports, services
from apps.usage.models import PendingRecompute, UsageInterval, UsageSlice
from apps.usage.reports import Group, Window
from apps.workloads import signals
from apps.workloads.models import Workload

from .reports_support import at, workload

MARCH = Window(at("2026-03-01 00:00"), at("2026-04-01 00:00"))
AFTER = at("2026-06-01 00:00")
# Four admissions and two releases of NLP's H100 work (4 deserved): crossing deserved and back.
STORY = [("a", "2026-03-02 10:00", "2026-03-02 12:00", 3), ("b", "2026-03-02 10:30", None, 2),
         ("c", "2026-03-02 11:00", "2026-03-02 11:45", 2), ("d", "2026-03-02 13:00", None, 1)]


def slices() -> list[tuple]:
    return list(UsageSlice.objects.order_by("interval__workload__name", "started_at").values_list(
        "interval__workload__name", "started_at", "ended_at", "share_numerator", "share_denominator"))


def tell(works: dict[str, Workload]) -> None:
    """What the watcher's transitions announce, in the order the cluster said it."""
    for name, start, end, _ in STORY:
        signals.quota_held.send(sender=Workload, workload=works[name], at=at(start))
        if end is not None:
            signals.quota_released.send(sender=Workload, workload_id=works[name].pk, at=at(end), reason="Succeeded")


def story_workloads(demo) -> dict[str, Workload]:
    return {name: workload(demo["bob"], project="nlp", name=name, gpus=gpus) for name, _, _, gpus in STORY}


@pytest.mark.django_db
def test_deferred_writes_leave_marks_and_a_settle_gives_the_immediate_slices(demo):
    works = story_workloads(demo)
    tell(works)
    immediate = slices()
    assert immediate and not PendingRecompute.objects.exists()
    UsageSlice.objects.all().delete()
    UsageInterval.objects.all().delete()

    with services.ledger_deferred():
        tell(works)
    assert UsageInterval.objects.count() == 4
    assert not UsageSlice.objects.exists()  # nothing recomputed on the writers' path
    assert PendingRecompute.objects.count() == 6  # one mark per change
    assert services.usage_timelines_settle() == 1  # NLP on H100, once for all six
    assert slices() == immediate
    assert not PendingRecompute.objects.exists()
    assert services.usage_timelines_settle() == 0


@pytest.mark.django_db
def test_a_report_read_before_the_settle_pass_is_already_exact(demo):
    works = story_workloads(demo)
    tell(works)
    expected = reports.usage_report(user=demo["admin"], group=Group.USER, window=MARCH, now=AFTER).rows
    UsageSlice.objects.all().delete()
    UsageInterval.objects.all().delete()
    with services.ledger_deferred():
        tell(works)
    assert PendingRecompute.objects.exists()
    assert reports.usage_report(user=demo["admin"], group=Group.USER, window=MARCH, now=AFTER).rows == expected
    assert not PendingRecompute.objects.exists()


@pytest.mark.django_db
def test_an_immediate_writer_takes_up_the_marks_of_its_timeline(demo):
    works = story_workloads(demo)
    tell(works)
    immediate = slices()
    UsageSlice.objects.all().delete()
    UsageInterval.objects.all().delete()
    *first, (name, start, _, _) = STORY
    with services.ledger_deferred():
        for early, early_start, early_end, _ in first:
            signals.quota_held.send(sender=Workload, workload=works[early], at=at(early_start))
            if early_end:
                signals.quota_released.send(sender=Workload, workload_id=works[early].pk, at=at(early_end),
                                            reason="Succeeded")
    signals.quota_held.send(sender=Workload, workload=works[name], at=at(start))  # not deferred: the worker, say
    assert not PendingRecompute.objects.exists()
    assert slices() == immediate


@pytest.mark.django_db(transaction=True)
def test_concurrent_deferred_writers_of_one_project_neither_block_nor_lose_a_change(demo):
    """Eight appliers admitting NLP work at once on PostgreSQL: no timeline lock is taken, and the settle gives the
    slices one writer alone would have written."""
    if connection.vendor != "postgresql":
        pytest.skip("the concurrency is PostgreSQL's")
    works = [workload(demo["bob"], project="nlp", name=f"w{index}", gpus=1) for index in range(8)]
    starts = [at(f"2026-03-02 10:{index:02d}") for index in range(8)]
    barrier = threading.Barrier(8)
    failures: list[BaseException] = []

    def admit(index: int) -> None:
        try:
            barrier.wait(5)
            with services.ledger_deferred():
                signals.quota_held.send(sender=Workload, workload=works[index], at=starts[index])
        except BaseException as error:  # reported below
            failures.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=admit, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not failures
    assert PendingRecompute.objects.count() == 8
    services.usage_timelines_settle()
    together = slices()
    UsageSlice.objects.all().delete()
    UsageInterval.objects.all().delete()
    for index in range(8):
        signals.quota_held.send(sender=Workload, workload=works[index], at=starts[index])
    assert together == slices()
    # NLP deserves 4: from the fifth admission on, the elastic work shares 4 units (4/5, ..., 4/8 of each).
    assert ("w0", starts[4], starts[5], 4, 5) in together and ("w0", starts[7], None, 1, 2) in together
