"""kubesim's Kueue half: the scheduler core (kubesim.kueue.scheduler, importable on its own), and the controllers,
webhooks and visibility API that run it against kubesim's store. The interface is kubesim/CONTRACT.md."""

from __future__ import annotations

from kubesim.kueue.config import KueueConfig, WaitForPodsReady
from kubesim.kueue.controllers import config_for, kueue_controllers
from kubesim.kueue.visibility import pending_workloads
from kubesim.kueue.webhooks import kueue_webhooks


def controllers(config: KueueConfig) -> list:
    """Kueue's controllers in order: Job integration, Workload lifecycle, scheduler, queue status."""
    return kueue_controllers(config)


def admission_webhooks(config: KueueConfig) -> list:
    """The Job webhook (suspend on create) and Kueue's validating webhooks."""
    return kueue_webhooks(config)


def visibility(
    store,
    *,
    cluster_queue: str | None = None,
    namespace: str | None = None,
    local_queue: str | None = None,
    limit: int = 1000,
    offset: int = 0,
    config: KueueConfig | None = None,
) -> dict:
    """PendingWorkloadsSummary for a ClusterQueue, or for namespace/local_queue (config: the scheduler's)."""
    return pending_workloads(
        store,
        config or config_for(store),
        cluster_queue=cluster_queue,
        namespace=namespace,
        local_queue=local_queue,
        limit=limit,
        offset=offset,
    )


__all__ = ["KueueConfig", "WaitForPodsReady", "admission_webhooks", "controllers", "visibility"]
