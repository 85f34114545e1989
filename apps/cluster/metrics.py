"""Gauges read from the mirror at scrape time (the web's /metrics): the same figures whichever process answers."""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from . import selectors


class MirrorCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        pending = GaugeMetricFamily("portal_clusterqueue_pending_workloads", "Pending workloads per ClusterQueue, "
                                    "as the watcher last mirrored them", labels=["cluster_queue"])
        admitted = GaugeMetricFamily("portal_clusterqueue_admitted_workloads", "Admitted workloads per ClusterQueue",
                                     labels=["cluster_queue"])
        for name, pending_count, admitted_count in selectors.cluster_queue_counts():
            pending.add_metric([name], pending_count)
            admitted.add_metric([name], admitted_count)
        yield pending
        yield admitted
        heartbeat = selectors.watcher_heartbeat()
        if heartbeat is not None and heartbeat.cluster_seen_at is not None:
            yield GaugeMetricFamily("portal_watcher_cluster_seen_age_seconds", "Since the watcher last got an answer "
                                    "from the API server", value=(timezone.now() - heartbeat.cluster_seen_at)
                                    .total_seconds())
