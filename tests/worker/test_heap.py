"""The watcher's frozen heap: full collections skip what lived through the first sync, and the cyclic garbage a
freeze kept is reclaimed at the next thaw."""

import gc
import weakref

import pytest

from worker.heap import THAW_SECONDS, FrozenHeap


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def heap():
    yield FrozenHeap()
    gc.unfreeze()  # the rest of the test process is not the watcher's


def test_what_lives_at_the_start_is_frozen_and_young_garbage_is_collected_before_a_freeze(heap):
    heap.start()
    assert gc.get_freeze_count() > 0
    young = Cycle()
    gone = weakref.ref(young)
    del young
    heap.settle()
    assert gone() is None  # collected, not frozen


def test_a_cycle_frozen_while_alive_is_kept_until_the_thaw(heap):
    survivor = Cycle()
    kept = weakref.ref(survivor)
    heap.start()
    del survivor
    gc.collect()
    assert kept() is not None  # frozen: the full collection skipped it
    heap.settle()
    assert kept() is not None
    heap.thawed_at -= THAW_SECONDS
    heap.settle()
    assert kept() is None and gc.get_freeze_count() > 0
