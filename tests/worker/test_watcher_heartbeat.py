"""The watcher's heartbeat (what /readyz reads) and its metrics: resyncs counted, the apply lag observed."""

import socket

from django.utils import timezone
from kubernetes import client

from apps.cluster import selectors
from apps.core import metrics
from tests.worker.conftest import wait_for
from worker.gateway import Gateway
from worker.watcher import Watcher


def sample(name: str) -> float:
    return metrics.REGISTRY.get_sample_value(name) or 0.0


def test_a_reachable_cluster_is_recorded_as_seen(cluster, db):
    before = timezone.now()
    Watcher(cluster).heartbeat()
    heartbeat = selectors.watcher_heartbeat()
    assert heartbeat.cluster_seen_at >= before and heartbeat.error == ""


def test_an_unreachable_cluster_keeps_the_last_sighting_and_says_why(cluster, db):
    Watcher(cluster).heartbeat()
    seen = selectors.watcher_heartbeat().cluster_seen_at
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    Watcher(Gateway(client.ApiClient(configuration))).heartbeat()
    heartbeat = selectors.watcher_heartbeat()
    assert heartbeat.cluster_seen_at == seen and heartbeat.beat_at > seen
    assert heartbeat.error.startswith(f"cannot reach the cluster at http://127.0.0.1:{port}")


def test_resyncs_are_counted_and_applied_events_observed(org, cluster, watcher):
    assert sample("portal_watcher_resyncs_total") >= 1  # start() resynced once
    applied = sample("portal_watcher_lag_seconds_count")
    watcher.handle("ClusterQueue", "MODIFIED", cluster.list("ClusterQueue")[0])
    wait_for(lambda: sample("portal_watcher_lag_seconds_count") > applied)
    resyncs = sample("portal_watcher_resyncs_total")
    watcher.resync()
    assert sample("portal_watcher_resyncs_total") == resyncs + 1
    assert selectors.watcher_heartbeat().error == ""  # start() beat before its first resync
