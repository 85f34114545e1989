"""Emulated time: a manual clock that tests step explicitly, or real time scaled by a speed factor."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

MANUAL_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def rfc3339(t: datetime) -> str:
    """Kubernetes' timestamp format: second precision, UTC, trailing Z."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


class Clock:
    """Emulated cluster time. Manual: moves only through set(); real: wall time scaled by speed from a start."""

    def __init__(self, mode: str = "real", speed: float = 1.0, start: datetime | None = None) -> None:
        if mode not in ("real", "manual"):
            raise ValueError(f"unknown clock mode {mode!r}")
        self.mode = mode
        self.speed = speed
        self._lock = threading.Lock()
        self._base = start or (MANUAL_EPOCH if mode == "manual" else datetime.now(UTC))
        self._mono = time.monotonic()

    @property
    def manual(self) -> bool:
        return self.mode == "manual"

    def now(self) -> datetime:
        with self._lock:
            if self.manual:
                return self._base
            return self._base + timedelta(seconds=(time.monotonic() - self._mono) * self.speed)

    def set(self, t: datetime) -> None:
        """Move a manual clock forward (never backwards); a real clock is rebased at t."""
        with self._lock:
            if self.manual:
                self._base = max(self._base, t)
            else:
                self._base, self._mono = t, time.monotonic()

    def real_seconds_until(self, t: datetime) -> float:
        """Wall-clock seconds until emulated time t (real clock only)."""
        return max(0.0, (t - self.now()).total_seconds() / self.speed)
