"""kubesim's Kueue half: the scheduler core (kubesim.kueue.scheduler, importable on its own), and the controllers,
webhooks and visibility API that run it against kubesim's store. The interface is kubesim/CONTRACT.md.

`Kueue(config)` is one simulator's Kueue half; it owns the KueueState its controllers and the visibility API share.
"""

from __future__ import annotations

from kubesim.kernel.protocols import Controller, PendingCounts, Webhook
from kubesim.kernel.store import Store
from kubesim.kueue.config import KueueConfig, WaitForPodsReady
from kubesim.kueue.controllers import kueue_controllers
from kubesim.kueue.install import installation
from kubesim.kueue.membership import pending_counts
from kubesim.kueue.state import KueueState
from kubesim.kueue.visibility import PendingOrder, pending_workloads
from kubesim.kueue.webhooks import kueue_webhooks


def admission_webhooks(config: KueueConfig) -> list[Webhook]:
    """The Job webhook (suspend on create) and Kueue's validating webhooks (they keep no state)."""
    return kueue_webhooks(config)


class Kueue:
    """The Kueue half of one simulator (kubesim.kernel.protocols.KueueHalf)."""

    def __init__(self, config: KueueConfig) -> None:
        self.config = config
        self.state = KueueState(config)
        self.pending_order = PendingOrder(self.state)  # the visibility API's answers, kept between asks

    def controllers(self) -> list[Controller]:
        """Kueue's controllers in order: Job integration, Workload lifecycle, scheduler, queue status, finalizers."""
        return kueue_controllers(self.state)

    def admission_webhooks(self) -> list[Webhook]:
        return admission_webhooks(self.config)

    def installation(self) -> list[tuple[str, dict]]:
        """The kueue-system objects a Kueue install adds (namespace, controller Deployment, its ConfigMap)."""
        return installation(self.config)

    def visibility(
        self,
        store: Store,
        *,
        cluster_queue: str | None = None,
        namespace: str | None = None,
        local_queue: str | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> dict:
        """PendingWorkloadsSummary for a ClusterQueue, or for namespace/local_queue, in the scheduler's order."""
        return pending_workloads(
            self.pending_order,
            store,
            cluster_queue=cluster_queue,
            namespace=namespace,
            local_queue=local_queue,
            limit=limit,
            offset=offset,
        )

    def pending_counts(self, store: Store) -> PendingCounts:
        """Active and inadmissible workloads per ClusterQueue and LocalQueue, by queue membership."""
        return pending_counts(self.state, store)


__all__ = ["Kueue", "KueueConfig", "KueueState", "WaitForPodsReady", "admission_webhooks"]
