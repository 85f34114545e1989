"""Many clients at once: writes from several threads while a watch streams; nothing lost, nothing deadlocks."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from kubernetes import client, watch

from tests.kubesim.conftest import pod_body


def test_parallel_writers_and_a_watcher(ks, ns):
    rv = client.CoreV1Api(ks.api_client()).list_namespaced_pod(ns).metadata.resource_version
    seen: dict[str, list[str]] = {}
    stop = threading.Event()

    def watcher() -> None:
        core = client.CoreV1Api(ks.api_client())
        w = watch.Watch()
        for ev in w.stream(core.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=20):
            seen.setdefault(ev["object"].metadata.name, []).append(ev["type"])
            if stop.is_set() and len([n for n, t in seen.items() if "DELETED" in t]) == 40:
                w.stop()

    def worker(i: int) -> None:
        core = client.CoreV1Api(ks.api_client())
        for j in range(10):
            name = f"c-{i}-{j}"
            core.create_namespaced_pod(ns, pod_body(name))
            core.patch_namespaced_pod(name, ns, {"metadata": {"labels": {"n": str(j)}}})
            core.delete_namespaced_pod(name, ns)

    t = threading.Thread(target=watcher, daemon=True)
    t.start()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(worker, range(4)))
    stop.set()
    client.CoreV1Api(ks.api_client()).create_namespaced_pod(ns, pod_body("last"))  # wakes the watcher
    t.join(15)
    assert not t.is_alive()
    assert len([n for n in seen if n.startswith("c-")]) == 40
    for name, types in seen.items():
        if name.startswith("c-"):
            assert types[0] == "ADDED" and types[-1] == "DELETED", (name, types)
    assert client.CoreV1Api(ks.api_client()).list_namespaced_pod(ns).items[0].metadata.name == "last"
