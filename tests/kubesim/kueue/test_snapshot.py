"""snapshot() and restore(): a cluster built once and put back, as the portal's cluster tests do before each test."""

from __future__ import annotations

import threading

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from tests.kubesim.kueue.conftest import Cluster


def build(kc: Cluster) -> str:
    kc.flavor()
    kc.cluster_queue("cq", 4)
    namespace = kc.namespace()
    kc.local_queue("lq", "cq", namespace)
    return namespace


def test_restore_puts_back_the_objects_and_kueue_admits_as_before(kc: Cluster):
    namespace = build(kc)
    snapshot = kc.ks.snapshot()
    kept = {(r, o["metadata"].get("namespace"), o["metadata"]["name"], o["metadata"]["uid"])
            for r, objects in snapshot["objects"].items() for o in objects}
    kc.job(namespace, "first", "lq", gpu=4)
    kc.settle(1)
    assert kc.admitted(namespace, "first")
    before = int(kc.core.list_namespace().metadata.resource_version)

    for _ in range(2):  # a snapshot serves any number of times
        kc.ks.restore(snapshot)
        now = kc.ks.snapshot()
        assert {(r, o["metadata"].get("namespace"), o["metadata"]["name"], o["metadata"]["uid"])
                for r, objects in now["objects"].items() for o in objects} == kept
        assert kc.batch.list_namespaced_job(namespace).items == []
        assert int(kc.core.list_namespace().metadata.resource_version) > before  # versions never go back
        # The Kueue half starts afresh from the restored objects: the whole quota is free again.
        kc.job(namespace, "again", "lq", gpu=4)
        kc.settle(1)
        assert kc.admitted(namespace, "again")
        usage = kc.get("clusterqueues", "cq")["status"]["flavorsUsage"][0]["resources"][0]["total"]
        assert usage == "4"


def test_restore_ends_open_watches_with_gone(kc: Cluster):
    build(kc)
    snapshot = kc.ks.snapshot()
    listed = kc.core.list_namespace().metadata.resource_version
    ended: list[int] = []

    def follow() -> None:
        try:
            for _ in watch.Watch().stream(kc.core.list_namespace, resource_version=listed, timeout_seconds=30):
                pass
        except ApiException as exc:  # the client raises the ERROR event
            ended.append(exc.status)

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    kc.namespace()
    kc.ks.restore(snapshot)
    follower.join(timeout=10)
    assert ended == [410]


def test_end_watches_closes_open_streams_at_once(kc: Cluster):
    streaming, done = threading.Event(), threading.Event()

    def follow() -> None:
        for _ in watch.Watch().stream(kc.core.list_namespace, timeout_seconds=30):
            streaming.set()  # the namespaces there are come first, as ADDED
        done.set()

    threading.Thread(target=follow, daemon=True).start()
    assert streaming.wait(timeout=5)
    kc.ks.end_watches()
    assert done.wait(timeout=5)
