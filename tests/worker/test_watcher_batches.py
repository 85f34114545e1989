"""The watcher's work queue hands out batches per lane, owners come by their watches, and a burst of outside work
reaches the mirror with each hop of its lag measured."""

import threading

import pytest
from django.db import DatabaseError
from prometheus_client import REGISTRY

from apps.workloads.models import Origin, Workload
from tests.worker.conftest import wait_for
from tests.worker.test_watcher_outside import batch_job, create_job, outside
from worker.watcher import Watcher, WorkQueue


def test_a_batched_lane_hands_out_up_to_the_batch_size_and_lanes_go_oldest_first():
    work = WorkQueue(batched={"outside": 3})
    work.add(("job", "a"))
    for uid in "pqrst":
        work.add(("outside", uid))
    work.add(("job", "b"))
    assert work.get(0.01) == [("job", "a")]  # the oldest key's lane first
    assert work.get(0.01) == [("outside", "p"), ("outside", "q"), ("outside", "r")]
    assert work.get(0.01) == [("outside", "s"), ("outside", "t")]  # came before b
    assert work.get(0.01) == [("job", "b")]
    assert work.get(0.01) == [] and len(work) == 0


def test_a_background_lane_waits_for_the_others_unless_its_head_is_overdue(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("worker.watcher.time.monotonic", lambda: clock[0])
    work = WorkQueue(batched={"outside": 2, "event": 2}, background=frozenset({"event"}),
                     background_after=30.0)
    for uid in "abc":
        work.add(("event", uid))
    clock[0] += 1
    work.add(("outside", "p"))
    assert work.get(0.01) == [("outside", "p")]  # newer, but status goes before history
    assert work.get(0.01) == [("event", "a"), ("event", "b")]  # nothing else waits
    work.done(("event", "a"))
    work.done(("event", "b"))
    work.add(("outside", "q"))
    clock[0] += 30
    assert work.get(0.01) == [("event", "c")]  # its head has waited 31 s: overdue, and older than q
    assert work.get(0.01) == [("outside", "q")]


def test_one_background_batch_at_most_is_out_at_a_time_however_overdue(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("worker.watcher.time.monotonic", lambda: clock[0])
    work = WorkQueue(batched={"outside": 2, "event": 2}, background=frozenset({"event"}),
                     background_after=30.0)
    for uid in "abcde":
        work.add(("event", uid))
    clock[0] += 60
    work.add(("outside", "p"))
    assert work.get(0.01) == [("event", "a"), ("event", "b")]  # overdue
    assert work.get(0.01) == [("outside", "p")]  # another applier: not the next events
    assert work.get(0.01) == []  # only events wait, and a batch of them is out
    taken = []
    other = threading.Thread(target=lambda: taken.extend(work.get(5)))
    other.start()  # an idle applier waits for the batch to be done, then takes the next
    work.done(("event", "a"))
    work.done(("event", "b"))
    other.join(5)
    assert taken == [("event", "c"), ("event", "d")]


def test_a_backlog_is_shared_among_the_appliers_up_to_the_batch_size():
    work = WorkQueue(batched={"job": 50}, appliers=4)
    for index in range(300):
        work.add(("job", index))
    assert len(work.get(0.01)) == 50  # 300 waiting: a full batch
    work = WorkQueue(batched={"job": 50}, appliers=4)
    for index in range(100):
        work.add(("job", index))
    # 100 waiting: a quarter each, so four appliers write at once; then a quarter of what is left
    assert [len(work.get(0.01)) for _ in range(5)] == [25, 19, 14, 11, 8]
    assert len(work) == 23


def test_a_key_added_while_it_is_processed_comes_back_once_afterwards():
    work = WorkQueue(batched={"outside": 10})
    work.add(("outside", "p"))
    (key,) = work.get(0.01)
    work.add(("outside", "p"))
    work.add(("outside", "p"))
    assert work.get(0.01) == []  # never by two appliers at once
    work.done(key)
    assert work.get(0.01) == [("outside", "p")]


def test_an_owner_no_watch_delivered_is_looked_up_by_name_and_a_namesake_is_not_it(kubesim, org, cluster):
    job = create_job(kubesim, batch_job("looked-up", labels={"portal.gpu/user": "alice"}, pods=1, gpus=1))
    watcher = Watcher(cluster)  # not started: its owner cache is empty
    reference = {"apiVersion": "batch/v1", "kind": "Job", "name": "looked-up", "uid": job.metadata.uid}
    found = watcher._owner("proj-vision", reference)
    assert found["metadata"]["labels"] == {"portal.gpu/user": "alice"}
    assert watcher._owner("proj-vision", {**reference, "uid": "an-older-one"}) is None


def counted(name, what=None):
    return REGISTRY.get_sample_value(f"{name}_count", {"what": what} if what else {}) or 0.0


@pytest.mark.slow
def test_a_burst_of_fifty_reaches_the_mirror_attributed_with_each_hop_measured(kubesim, org, watcher):
    lookups = []
    raw_list = watcher.gw.raw_list

    def spy(path, query=None):  # the real call, recorded: an owner looked up by name instead of watched
        if query and any(name == "fieldSelector" for name, _ in query):
            lookups.append(path)
        return raw_list(path, query)

    watcher.gw.raw_list = spy
    before = {name: counted(*name) for name in [("portal_watcher_queued_seconds", "outside"),
                                                 ("portal_watcher_apply_seconds", "outside"),
                                                 ("portal_watcher_lag_seconds",)]}
    creators = [threading.Thread(target=create_job, args=(kubesim, batch_job(
        f"burst-{index}", labels={"portal.gpu/user": "alice"}, pods=1, gpus=0))) for index in range(50)]
    for thread in creators:
        thread.start()
    for thread in creators:
        thread.join(30)
    rows = wait_for(lambda: (found := Workload.objects.filter(origin=Origin.OUTSIDE, object_name__startswith="burst-")
                             ).count() == 50 and found, timeout=120)
    assert {row.owner.username for row in rows.select_related("owner")} == {"alice"}
    assert outside("burst-0").submitted_by
    # Owners come by their watch; only one whose event came later than the grace (a machine under heavy load) is
    # looked up by name, and then attributed all the same.
    assert len(lookups) < 25
    assert counted("portal_watcher_queued_seconds", "outside") - before[
        ("portal_watcher_queued_seconds", "outside")] >= 50
    passes = counted("portal_watcher_apply_seconds", "outside") - before[("portal_watcher_apply_seconds", "outside")]
    assert passes >= 1
    assert counted("portal_watcher_lag_seconds") - before[("portal_watcher_lag_seconds",)] >= 50


def test_a_resync_reads_workloads_and_their_owners_a_page_at_a_time(kubesim, org, cluster, monkeypatch):
    monkeypatch.setattr("worker.gateway.LIST_PAGE", 2)  # five Jobs and their Workloads come in three pages each
    jobs = [create_job(kubesim, batch_job(f"paged-{i}", pods=1, gpus=1, labels={"portal.gpu/user": "alice"}))
            for i in range(5)]
    kubesim.advance(1)
    watcher = Watcher(cluster)  # not started: the resync alone
    watcher.resync()
    assert {job.metadata.uid for job in jobs} <= set(watcher.owners) and len(watcher.outside) == 5
    while keys := watcher.work.get(0.01):
        watcher.process(keys)
        for key in keys:
            watcher.work.done(key)
    assert sorted((row.object_name, row.owner.username) for row in Workload.objects.filter(
        origin=Origin.OUTSIDE).select_related("owner")) == [(f"paged-{i}", "alice") for i in range(5)]


def test_a_batch_that_fails_is_applied_key_by_key_so_a_bad_key_holds_back_only_itself(cluster, monkeypatch):
    watcher = Watcher(cluster, appliers=1)  # not started: its one applier loop, run below
    applied, tried = [], []

    def process(keys):  # the database refuses whatever includes the bad Job's row
        tried.append(list(keys))
        if ("job", "bad") in keys:
            raise DatabaseError("value too long")
        applied.extend(keys)

    monkeypatch.setattr(watcher, "process", process)
    for uid in ("a", "bad", "c"):
        watcher.work.add(("job", uid))
    loop = threading.Thread(target=watcher._apply_loop)
    loop.start()
    wait_for(lambda: len(tried) >= 4, timeout=10)
    watcher.stopping.set()
    watcher.work.close()
    loop.join(10)
    assert tried[:4] == [[("job", "a"), ("job", "bad"), ("job", "c")], [("job", "a")], [("job", "bad")],
                         [("job", "c")]]
    assert applied == [("job", "a"), ("job", "c")]
    assert ("job", "bad") in watcher.work.dirty  # kept for a retry
