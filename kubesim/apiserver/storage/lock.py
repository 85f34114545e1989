"""The store's lock: reentrant, and its holder can hand it to the threads that are waiting for it.

Python's locks are not fair: a thread that lets go of a lock and takes it again soon after usually gets it back before
a thread woken on it runs, so a pause of a millisecond does not reliably let a waiting thread in, least of all on a
loaded machine. The background settle (kubesim.sim) holds the store lock for one controller at a time and must let
the API requests and watch streams that queued meanwhile in between. So a thread that has to block for this lock
first takes a numbered ticket, and the holder's yield_to_waiters() lets go and waits until every ticket taken before
it has been served (or a bound has passed), then takes the lock back. Taking a free lock, or one this thread already
holds, costs no ticket."""

from __future__ import annotations

import threading
import time
from types import TracebackType


class StoreLock:
    """A reentrant lock (threading.RLock's interface, threading.Condition accepts it) with yield_to_waiters()."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._tickets = threading.Condition(threading.Lock())
        self._issued = 0
        self._waiting: set[int] = set()  # tickets of the threads blocked on _lock now: as many as such threads

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(False):  # free, or held by this thread already: no ticket needed
            return True
        if not blocking:
            return False
        ticket = self._ticket()
        try:
            return self._lock.acquire(True, timeout)
        finally:
            self._served(ticket)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._lock.release()

    @property
    def waiters(self) -> int:
        """How many threads are blocked on the lock now."""
        with self._tickets:
            return len(self._waiting)

    def yield_to_waiters(self, bound: float) -> bool:
        """Let the threads blocked on the lock now have it before this thread goes on: let go of the lock, wait
        until each of them has taken it (at most `bound` seconds: a thread that keeps being overtaken by newcomers
        does not stall the holder for ever), take it back. The caller must hold the lock exactly once: a hold by an
        outer frame is never let go from under it (nothing happens). Returns whether the lock was let go."""
        with self._tickets:
            if not self._waiting:
                return False
            last = self._issued
        if self._lock._recursion_count() != 1:  # type: ignore[attr-defined]
            return False
        state = self._lock._release_save()  # type: ignore[attr-defined]
        try:
            deadline = time.monotonic() + bound
            with self._tickets:
                while any(ticket <= last for ticket in self._waiting):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._tickets.wait(remaining)
        finally:
            self._lock._acquire_restore(state)  # type: ignore[attr-defined]
        return True

    # threading.Condition's hooks: a condition's wait() lets go of every hold and takes them back on waking, and a
    # watch woken by a write queues for the lock with a ticket like any request.
    def _is_owned(self) -> bool:
        return bool(self._lock._is_owned())  # type: ignore[attr-defined]

    def _release_save(self) -> object:
        return self._lock._release_save()  # type: ignore[attr-defined]

    def _acquire_restore(self, state: tuple[int, int]) -> None:
        count = state[0]
        if self._lock.acquire(False):  # free: take it as many times as it was held
            for _ in range(count - 1):
                self._lock.acquire()
            return
        ticket = self._ticket()
        try:
            self._lock._acquire_restore(state)  # type: ignore[attr-defined]
        finally:
            self._served(ticket)

    def _ticket(self) -> int:
        with self._tickets:
            self._issued += 1
            self._waiting.add(self._issued)
            return self._issued

    def _served(self, ticket: int) -> None:
        with self._tickets:
            self._waiting.discard(ticket)
            self._tickets.notify_all()
