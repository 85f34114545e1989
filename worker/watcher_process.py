"""The watcher's process (`manage.py watch_cluster`): the Watcher run while this process holds the watcher's Lease
(always, with LEADER_ELECTION off), and the probes Kubernetes asks (docs/architecture.md, High availability).

A standby campaigns and mirrors nothing. A leader that loses the Lease stops its loops at once and the process
exits, so that no thread of the old watcher, however stuck, can write after another took over; Kubernetes starts a
fresh process, which campaigns again. A stop (SIGTERM) stops the loops, then releases the Lease for a standby.

Probes, on the metrics port: `/healthz` fails when the election loop or, in the leader, a loop of the watcher
stopped making progress (a liveness probe restarts the process, and its standby takes over); `/readyz` also fails
while the leader's first sync is not done.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection

from .leader import LeaderElector
from .watcher import Watcher

LOST_JOIN_SECONDS = 0.1  # a leader that lost the Lease waits this little for each loop: the process exits next


class WatcherProcess:
    def __init__(self, watcher: Watcher, elector: LeaderElector | None) -> None:
        self.watcher = watcher
        self.elector = elector

    def run(self) -> bool:
        """Until `stop()` or the loss of the Lease; returns whether it was lost (the caller must then exit)."""
        if self.elector is None:
            self._lead()
            self.watcher.stopping.wait()
            return False
        return self.elector.run(on_started_leading=self._lead, on_stopped_leading=self._step_down)

    def stop(self) -> None:
        if self.elector is None:
            self.watcher.stop()
        else:
            self.elector.stop()

    def _lead(self) -> None:
        """The first sync, then the watcher's loops in threads of their own."""
        try:
            self.watcher.start()
        finally:
            connection.close()  # the first sync's, in this thread

    def _step_down(self, lost: bool) -> None:
        if lost:
            self.watcher.stop(timeout=LOST_JOIN_SECONDS)
        else:
            self.watcher.stop()

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def problems(self) -> list[str]:
        """Why this process is not healthy: its election loop stuck, or a loop of the watcher it runs stalled."""
        found = ["the leader election loop made no progress"] if self.elector and self.elector.stalled() else []
        if self.leading():
            found += self.watcher.stalled()
        return found

    def not_ready(self) -> list[str]:
        """A standby is ready (it takes over when needed); a leader once its first sync is done."""
        found = self.problems()
        if self.leading() and not self.watcher.synced.is_set():
            found.append("the first sync of the cluster is not done")
        return found

    def probes(self) -> dict[str, Callable[[], list[str]]]:
        return {"/healthz": self.problems, "/readyz": self.not_ready}
