"""Celery beat's scheduler (settings.CELERY_BEAT_SCHEDULER): sends the periodic tasks only while this beat holds the
beat's Lease (with LEADER_ELECTION on: docs/architecture.md, High availability), and touches a heartbeat file at
every tick for its liveness probe.

A standby beat ticks without sending; once it holds the Lease its schedule sends whatever came due meanwhile (every
periodic task is idempotent and cheap: a takeover may send one of them twice). Beat's ticks come at least every
CELERY_BEAT_MAX_LOOP_INTERVAL seconds, so a heartbeat older than a minute means beat is stuck.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from celery.beat import PersistentScheduler
from django.conf import settings

from .leader import LeaderElector, elector_from_settings

logger = logging.getLogger(__name__)
STOP_SECONDS = 5.0  # how long closing beat waits for the Lease to be released


class LeaderScheduler(PersistentScheduler):
    elector: LeaderElector | None = None
    campaign: threading.Thread | None = None
    started = False

    def tick(self, *args: Any, **kwargs: Any) -> float:
        beat_heartbeat(Path(settings.BEAT_HEARTBEAT_FILE))
        if not self.started:
            self.started = True
            self._campaign()
        if self.elector is not None and not self.elector.is_leader():
            return min(self.max_interval, self.elector.timing.retry_seconds)
        return float(super().tick(*args, **kwargs))

    def close(self) -> None:
        """Beat's shutdown: stop campaigning and release the Lease (a standby takes over at once), then sync."""
        if self.elector is not None and self.campaign is not None:
            self.elector.stop()
            self.campaign.join(STOP_SECONDS)
        super().close()

    def _campaign(self) -> None:
        """With leader election on, campaign in a thread of its own for as long as beat runs, again after a loss."""
        self.elector = elector_from_settings("beat")
        if self.elector is not None:
            self.campaign = threading.Thread(target=_elect, args=(self.elector,), name="beat-election", daemon=True)
            self.campaign.start()


def _elect(elector: LeaderElector) -> None:
    while not elector.stopping.is_set():
        try:
            elector.run(on_started_leading=lambda: logger.info("beat: leading, sending the periodic tasks"),
                        on_stopped_leading=lambda lost: logger.info("beat: standing by"))
        except Exception:  # the election must go on, or this beat could never take over
            logger.exception("beat: leader election failed; campaigning again")
            elector.stopping.wait(elector.timing.retry_seconds)


def beat_heartbeat(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
