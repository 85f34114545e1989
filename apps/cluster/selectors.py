"""Reads of the cluster mirror for health checks and metrics (pages read it through apps/org and apps/cluster/pages)."""

from __future__ import annotations

from .models import ClusterQueueState, WatcherHeartbeat


def watcher_heartbeat() -> WatcherHeartbeat | None:
    return WatcherHeartbeat.objects.filter(pk=1).first()


def served_kinds() -> frozenset[str] | None:
    """The kinds of work the cluster serves as the watcher last listed them; None when it has not yet."""
    kinds = WatcherHeartbeat.objects.filter(pk=1).values_list("served_kinds", flat=True).first()
    return None if kinds is None else frozenset(kinds)


def served_for_training() -> tuple[frozenset[str] | None, str]:
    """(the served kinds as `served_kinds` reads them, the ClusterTrainingRuntime for PyTorch or "") in one read."""
    row = WatcherHeartbeat.objects.filter(pk=1).values_list("served_kinds", "torch_runtime").first()
    if row is None or row[0] is None:
        return None, ""
    return frozenset(row[0]), row[1]


def cluster_queue_counts() -> list[tuple[str, int, int]]:
    """(name, pending, admitted) of every mirrored ClusterQueue."""
    return list(ClusterQueueState.objects.values_list("name", "pending_workloads", "admitted_workloads"))
