"""The watcher's work queue hands out batches per lane, owners come by their watches, and a burst of outside work
reaches the mirror with each hop of its lag measured."""

import threading

import pytest
from prometheus_client import REGISTRY

from apps.workloads.models import Origin, Workload
from tests.worker.conftest import wait_for
from tests.worker.test_watcher_outside import batch_job, create_job, outside
from worker.watcher import Watcher, WorkQueue


def test_a_batched_lane_hands_out_up_to_the_batch_size_and_lanes_go_oldest_first():
    work = WorkQueue(batched=frozenset({"outside"}), batch_size=3)
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
    work = WorkQueue(batched=frozenset({"outside", "event"}), batch_size=2, background=frozenset({"event"}),
                     background_after=30.0)
    for uid in "abc":
        work.add(("event", uid))
    clock[0] += 1
    work.add(("outside", "p"))
    assert work.get(0.01) == [("outside", "p")]  # newer, but status goes before history
    assert work.get(0.01) == [("event", "a"), ("event", "b")]  # nothing else waits
    work.add(("outside", "q"))
    clock[0] += 30
    assert work.get(0.01) == [("event", "c")]  # its head has waited 31 s: overdue, and older than q
    assert work.get(0.01) == [("outside", "q")]


def test_a_key_added_while_it_is_processed_comes_back_once_afterwards():
    work = WorkQueue(batched=frozenset({"outside"}), batch_size=10)
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
