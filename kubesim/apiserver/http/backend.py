"""What the request handlers need of the simulator behind them (kubesim.sim.Simulator provides it).

Declared here, on the API server's side, so the handlers never import the composition root that builds them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from kubesim.apiserver.auth.rbac import Rbac
from kubesim.apiserver.http.faults import Faults
from kubesim.apiserver.nodes.servers import ServerActivity
from kubesim.apiserver.storage.store import ObjectStore
from kubesim.kernel.clock import Clock
from kubesim.kernel.protocols import KueueHalf, Webhook


class Backend(Protocol):
    store: ObjectStore
    clock: Clock
    faults: Faults
    rbac: Rbac
    webhooks: list[Webhook]  # every admission webhook, run in order on API writes
    kueue: KueueHalf | None  # the Kueue half (the visibility API), None when kubesim runs without it
    server_activity: ServerActivity  # what the pods that serve HTTP saw (kubesim.apiserver.nodes.servers)
    default_run_seconds: float  # a pod's run time when its command does not say (pod logs follow it)
    bookmark_interval: float  # seconds between watch BOOKMARKs (the control endpoint changes it)

    def settle(self) -> None:
        """Run the controllers to a fixpoint."""
        ...

    def after_write(self) -> None:
        """Called after every API write: settle now, or let the background settler do it."""
        ...

    def advance(self, seconds: float) -> datetime:
        """Manual clock: step through every controller deadline in the window, settling at each."""
        ...

    def reset(self) -> None:
        """Back to an empty cluster with the initial nodes."""
        ...

    def stats_report(self) -> dict:
        """Per controller: reconcile calls, writing calls, total and longest time."""
        ...
