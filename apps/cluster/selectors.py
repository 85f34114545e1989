"""Reads of the cluster mirror for health checks and metrics (pages read it through apps/org and apps/cluster/pages)."""

from __future__ import annotations

from .models import ClusterQueueState, WatcherHeartbeat


def watcher_heartbeat() -> WatcherHeartbeat | None:
    return WatcherHeartbeat.objects.filter(pk=1).first()


def cluster_queue_counts() -> list[tuple[str, int, int]]:
    """(name, pending, admitted) of every mirrored ClusterQueue."""
    return list(ClusterQueueState.objects.values_list("name", "pending_workloads", "admitted_workloads"))
