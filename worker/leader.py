"""Leader election on a coordination.k8s.io/v1 Lease, with the semantics of client-go's leaderelection package.

deploy/ runs the watcher and beat as two replicas each; only the holder of the process kind's Lease acts, so losing
a node costs the lease duration instead of a rescheduling (docs/architecture.md, High availability).

- A candidate reads the Lease every retry period (jittered up to 1.2 times). It takes the Lease when nobody holds
  it, or when the record has not changed for the record's leaseDurationSeconds as measured on the candidate's own
  clock from when it first saw that record: never from the holder's renewTime, clocks differ. Taking it writes
  holderIdentity, acquireTime and renewTime and adds one to leaseTransitions. Every write carries the
  resourceVersion it read, so of two candidates one wins and the other gets 409 Conflict.
- The holder renews (renewTime) every retry period. One that has not renewed within the renew deadline, counted
  from the start of its last successful attempt, is no longer the leader and steps down: `is_leader()` is false
  from that moment, whatever its threads are doing. A standby counts the lease duration from when it saw the last
  renewal, later than that attempt started, and the renew deadline is shorter than the lease duration: the old
  leader has stopped before another may take over.
- Stopping gracefully, the holder first stops its work, then releases the Lease (no holder, duration 1 s) so a
  standby takes over at its next retry instead of waiting out the lease.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from kubernetes import client

from .gateway import ClusterError, Gateway, api_client_from_settings

logger = logging.getLogger(__name__)

JITTER = 1.2  # a candidate waits between one and 1.2 retry periods between tries (client-go's JitterFactor)
# One Lease per process kind, in the portal's namespace (deploy/base/rbac.yaml grants get and update on these names).
LEASES = {"watcher": "gpu-portal-watcher", "beat": "gpu-portal-beat"}


@dataclass(frozen=True)
class Timing:
    lease_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_seconds: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_seconds > self.renew_deadline_seconds > self.retry_seconds * JITTER > 0:
            raise ValueError("leader election needs lease > renew deadline > 1.2 x retry period > 0")


@dataclass(frozen=True)
class Record:
    """What the Lease says about its holder, as written (any change of it is a sign of life)."""

    holder: str
    lease_seconds: int
    acquired: str
    renewed: str
    transitions: int

    @classmethod
    def of(cls, lease: dict[str, Any] | None) -> Record:
        spec = (lease or {}).get("spec") or {}
        return cls(str(spec.get("holderIdentity") or ""), int(spec.get("leaseDurationSeconds") or 0),
                   str(spec.get("acquireTime") or ""), str(spec.get("renewTime") or ""),
                   int(spec.get("leaseTransitions") or 0))


def micro_time(at: datetime) -> str:
    """A MicroTime as the API server parses it: RFC 3339 with always six fractional digits. Leases go as JSON through
    the gateway for this: the client's models write `isoformat()`, which drops the digits of a whole second."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for one Lease and holds it while `run()` leads; `is_leader()` is what the work checks."""

    def __init__(self, api_client: client.ApiClient, *, namespace: str, name: str, identity: str = "",
                 timing: Timing | None = None) -> None:
        self.gw = Gateway(api_client)
        self.namespace = namespace
        self.name = name
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"  # a restarted process is a new one
        self.timing = timing or Timing()
        self.stopping = threading.Event()
        self.leading_until = 0.0  # monotonic clock: leader until then, unless a renewal moves it on
        self.observed: Record | None = None
        self.observed_at = 0.0  # monotonic clock: when this process first saw `observed`
        self.progressed_at = time.monotonic()  # the election loop's last turn, for the process's probes

    def __str__(self) -> str:
        return f"lease {self.namespace}/{self.name} ({self.identity})"

    def is_leader(self) -> bool:
        return time.monotonic() < self.leading_until

    def stalled(self) -> bool:
        """Whether the election loop stopped turning (a turn takes a retry period plus at most the renew deadline)."""
        return time.monotonic() - self.progressed_at > 2 * self.timing.lease_seconds

    def stop(self) -> None:
        """Stop campaigning; a leader stops its work and releases the Lease (in `run()`'s thread)."""
        self.stopping.set()

    def run(self, *, on_started_leading: Callable[[], object], on_stopped_leading: Callable[[bool], None]) -> bool:
        """Campaign until this process holds the Lease, then lead until it is lost or `stop()` is called.

        The work starts in a thread of its own (`on_started_leading`); when leading ends, `on_stopped_leading(lost)`
        stops it before anything else happens, and only then, on a stop, the Lease is released. Returns whether the
        Lease was lost (False: stopped)."""
        if not self._acquire():
            return False
        logger.info("leading: %s", self)
        threading.Thread(target=on_started_leading, name=f"lead-{self.name}", daemon=True).start()
        lost = self._renew_until_lost()
        self.leading_until = 0.0
        if lost:
            logger.error("lost %s: stepping down", self)
        on_stopped_leading(lost)
        if not lost:
            self._release()
        return lost

    def _acquire(self) -> bool:
        while not self.stopping.is_set():
            self.progressed_at = time.monotonic()
            if self._try_acquire_or_renew(timeout=self.timing.renew_deadline_seconds):
                return True
            self.stopping.wait(self.timing.retry_seconds * random.uniform(1.0, JITTER))
        return False

    def _renew_until_lost(self) -> bool:
        """Renew every retry period, retrying a failed renewal until the deadline; True once it passed, or once the
        Lease names another holder; False on a stop."""
        while not self.stopping.wait(self.timing.retry_seconds):
            while True:
                self.progressed_at = time.monotonic()
                remaining = self.leading_until - time.monotonic()
                if remaining <= 0:
                    return True
                if self._try_acquire_or_renew(timeout=remaining):
                    break
                if self.observed is not None and self.observed.holder not in ("", self.identity):
                    return True
                if self.stopping.wait(min(self.timing.retry_seconds, max(self.leading_until - time.monotonic(), 0))):
                    return False
        return False

    def _try_acquire_or_renew(self, *, timeout: float) -> bool:
        """One try: create the Lease, renew ours, or take one that is free or expired. A request never outlives
        `timeout` (a leader's time left), so a hung API server cannot keep a leader past its deadline."""
        started, now = time.monotonic(), micro_time(timezone.now())
        try:
            lease = self.gw.get("Lease", self.name, namespace=self.namespace, timeout=timeout)
        except ClusterError as error:
            if error.not_found:
                return self._create(started, now, timeout)
            logger.warning("reading %s failed: %s", self, error.describe())
            return False
        record = Record.of(lease)
        if record != self.observed:
            self.observed, self.observed_at = record, time.monotonic()
        ours = record.holder == self.identity
        if record.holder and not ours and time.monotonic() < self.observed_at + (
                record.lease_seconds or self.timing.lease_seconds):
            return False  # another holder, and its lease runs on (as far as this process has seen)
        lease = {**lease, "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": self._spec(
            acquired=record.acquired if ours else now, renewed=now,
            transitions=record.transitions if ours else record.transitions + 1)}
        left = timeout - (time.monotonic() - started)
        if left <= 0:
            return False
        try:  # metadata.resourceVersion is the one read: another writer since then makes this a 409 Conflict
            written = self.gw.replace(lease, timeout=left)
        except ClusterError as error:
            logger.warning("writing %s failed: %s", self, error.describe())
            return False
        if not ours:
            logger.info("took %s from %r (transition %d)", self, record.holder, record.transitions + 1)
        self._hold(written, started)
        return True

    def _spec(self, *, acquired: str, renewed: str, transitions: int) -> dict[str, Any]:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.timing.lease_seconds),
                "acquireTime": acquired, "renewTime": renewed, "leaseTransitions": transitions}

    def _create(self, started: float, now: str, timeout: float) -> bool:
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.name, "namespace": self.namespace},
                 "spec": self._spec(acquired=now, renewed=now, transitions=0)}
        try:
            created = self.gw.create(lease, timeout=timeout)
        except ClusterError as error:  # 409 AlreadyExists: another candidate created it first
            logger.warning("creating %s failed: %s", self, error.describe())
            return False
        self._hold(created, started)
        return True

    def _hold(self, lease: dict[str, Any], started: float) -> None:
        self.observed, self.observed_at = Record.of(lease), time.monotonic()
        self.leading_until = started + self.timing.renew_deadline_seconds

    def _release(self) -> None:
        """Give the Lease up (no holder, 1 s) if it is still ours, keeping its transitions count, as client-go's
        ReleaseOnCancel does; a standby takes it at its next try."""
        timeout = self.timing.renew_deadline_seconds
        try:
            lease = self.gw.get("Lease", self.name, namespace=self.namespace, timeout=timeout)
            record = Record.of(lease)
            if record.holder != self.identity:
                return
            now = micro_time(timezone.now())
            self.gw.replace({**lease, "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {
                "holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now,
                "leaseTransitions": record.transitions}}, timeout=timeout)
        except ClusterError as error:
            logger.warning("releasing %s failed (a standby waits out the lease): %s", self, error.describe())
            return
        logger.info("released %s", self)


def elector_from_settings(process: str, api_client: client.ApiClient | None = None) -> LeaderElector | None:
    """The elector of a process kind ("watcher", "beat") with LEADER_ELECTION on; None when it is off (one instance)."""
    if not settings.LEADER_ELECTION:
        return None
    timing = Timing(settings.LEADER_ELECTION_LEASE_SECONDS, settings.LEADER_ELECTION_RENEW_DEADLINE_SECONDS,
                    settings.LEADER_ELECTION_RETRY_SECONDS)
    return LeaderElector(api_client or api_client_from_settings(), namespace=settings.PORTAL_NAMESPACE,
                         name=LEASES[process], timing=timing)
