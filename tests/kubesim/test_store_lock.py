"""The store's lock: reentrant like threading.RLock, works under threading.Condition, and its holder's
yield_to_waiters() lets the threads blocked on it by then have it first. Ordered by events, never by sleeps."""

from __future__ import annotations

import threading
import time

from kubesim.apiserver.storage.lock import StoreLock

DEADLINE = 30.0  # generous: a loaded machine may take long to run a thread, these tests never wait for it to pass


def _until(predicate) -> bool:
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _queue(lock: StoreLock, order: list[str], name: str) -> threading.Thread:
    """A thread that takes the lock (blocking: the test holds it), notes its name, lets go."""

    def take() -> None:
        with lock:
            order.append(name)

    thread = threading.Thread(target=take, daemon=True)
    before = lock.waiters
    thread.start()
    assert _until(lambda: lock.waiters > before), f"{name} never queued for the lock"
    return thread


def test_the_holder_yields_to_every_thread_waiting_before_it_goes_on():
    lock = StoreLock()
    order: list[str] = []
    with lock:
        threads = [_queue(lock, order, f"waiter-{i}") for i in range(3)]
        assert lock.yield_to_waiters(DEADLINE)
        order.append("holder")
    for thread in threads:
        thread.join(DEADLINE)
    assert sorted(order[:3]) == ["waiter-0", "waiter-1", "waiter-2"]
    assert order[3] == "holder"
    assert lock.waiters == 0


def test_nobody_waiting_the_holder_keeps_the_lock():
    lock = StoreLock()
    with lock:
        assert not lock.yield_to_waiters(DEADLINE)
        assert lock._is_owned()


def test_a_hold_of_an_outer_frame_is_never_let_go():
    lock = StoreLock()
    order: list[str] = []
    with lock:
        with lock:
            thread = _queue(lock, order, "waiter")
            assert not lock.yield_to_waiters(DEADLINE)  # held twice: the outer frame relies on it
            order.append("inner")
        order.append("outer")
    thread.join(DEADLINE)
    assert order == ["inner", "outer", "waiter"]


def test_the_yield_is_bounded_when_a_waiter_never_takes_the_lock():
    """A thread can stay queued however long the holder waits (newcomers keep overtaking it): the holder goes on
    after the bound all the same. Such a thread is stood in for by a ticket nobody serves."""
    lock = StoreLock()
    returned: list[bool] = []

    def holder() -> None:
        with lock:
            lock._ticket()
            returned.append(lock.yield_to_waiters(0.05))
            returned.append(lock._is_owned())

    thread = threading.Thread(target=holder, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert returned == [True, True]


def test_a_condition_wait_on_it_lets_go_of_every_hold_and_takes_them_back():
    lock = StoreLock()
    changed = threading.Condition(lock)
    waiting = threading.Event()
    seen: list[bool] = []

    def waiter() -> None:
        with lock:
            with lock:
                waiting.set()
                changed.wait(DEADLINE)  # lets go of both holds, takes both back
                seen.append(lock._is_owned())
            seen.append(lock._is_owned())  # the outer hold came back too
        seen.append(lock._is_owned())

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    assert waiting.wait(DEADLINE)
    with lock:  # taken while the waiter waits: it holds nothing then
        changed.notify_all()
    thread.join(DEADLINE)
    assert seen == [True, True, False]
