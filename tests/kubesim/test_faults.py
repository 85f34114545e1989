"""Fault injection through /kubesim/v1/faults: 500s on chosen verbs/resources, latency, dropped watches."""

from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import pod_body


@pytest.fixture(autouse=True)
def _clear(ks):
    yield
    ks.clear_faults()


def test_error_rate_one_on_a_verb_and_resource(api, ks, ns):
    api.core.create_namespaced_pod(ns, pod_body("f"))
    ks.faults(error_rate=1.0, verbs=["list"], resources=["pods"])
    with pytest.raises(ApiException) as err:
        api.core.list_namespaced_pod(ns)
    assert err.value.status == 500
    body = json.loads(err.value.body)
    assert body["kind"] == "Status" and body["reason"] == "InternalError"
    assert api.core.read_namespaced_pod("f", ns).metadata.name == "f"  # get is not affected
    assert api.core.list_namespaced_service(ns).items == []  # nor other resources
    ks.clear_faults()
    assert len(api.core.list_namespaced_pod(ns).items) == 1


def test_seeded_errors_are_deterministic(api, ks, ns):
    def outcomes() -> list[bool]:
        ks.faults(error_rate=0.5, seed=7, verbs=["get"], resources=["namespaces"])
        out = []
        for _ in range(20):
            try:
                api.core.read_namespace(ns)
                out.append(True)
            except ApiException as exc:
                assert exc.status == 500
                out.append(False)
        return out

    first = outcomes()
    assert first == outcomes()
    assert True in first and False in first


def test_latency(api, ks, ns):
    ks.faults(latency_ms=300)
    started = time.monotonic()
    api.core.list_namespaced_pod(ns)
    assert time.monotonic() - started >= 0.3


def test_drop_watches_ends_open_streams(api, ks, ns):
    resp = api.core.list_namespaced_pod(ns, watch=True, _preload_content=False, timeout_seconds=30)
    ended = threading.Event()

    def drain() -> None:
        for _ in resp.stream(1024):
            pass
        ended.set()

    threading.Thread(target=drain, daemon=True).start()
    time.sleep(0.3)
    assert not ended.is_set()
    ks.faults(drop_watches=True)
    assert ended.wait(3)
    resp.release_conn()
