"""Watch streams through kubernetes.watch.Watch: events, resume, BOOKMARK, 410 Gone, live delivery."""

from __future__ import annotations

import threading
import time

import pytest
from kubernetes import watch
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import local_queue_body, pod_body


def _events(api, ns: str, **kwargs) -> list[tuple[str, str]]:
    w = watch.Watch()
    out = []
    for ev in w.stream(api.core.list_namespaced_pod, ns, timeout_seconds=1, **kwargs):
        name = (
            ev["object"].metadata.name if ev["type"] != "BOOKMARK" else ev["raw_object"]["metadata"]["resourceVersion"]
        )
        out.append((ev["type"], name))
    return out


def test_initial_list_then_changes_from_resource_version(api, ns):
    api.core.create_namespaced_pod(ns, pod_body("w1"))
    assert _events(api, ns) == [("ADDED", "w1")]
    rv = api.core.list_namespaced_pod(ns).metadata.resource_version
    api.core.create_namespaced_pod(ns, pod_body("w2"))
    api.core.patch_namespaced_pod("w1", ns, {"metadata": {"labels": {"x": "y"}}})
    api.core.delete_namespaced_pod("w2", ns)
    events = _events(api, ns, resource_version=rv)
    assert events[0] == ("ADDED", "w2")
    assert ("MODIFIED", "w1") in events
    assert events[-1] == ("DELETED", "w2")
    types = [t for t, _ in events]
    assert types.index("ADDED") < types.index("DELETED")


def test_resume_from_midpoint_skips_older_events(api, ns):
    api.core.create_namespaced_pod(ns, pod_body("r1"))
    mid = api.core.list_namespaced_pod(ns).metadata.resource_version
    api.core.create_namespaced_pod(ns, pod_body("r2"))
    names = {name for _, name in _events(api, ns, resource_version=mid)}
    assert names == {"r2"}


def test_label_selector_filters_events(api, ns):
    rv = api.core.list_namespaced_pod(ns).metadata.resource_version
    api.core.create_namespaced_pod(ns, pod_body("sel-a", labels={"keep": "1"}))
    api.core.create_namespaced_pod(ns, pod_body("sel-b"))
    names = {name for _, name in _events(api, ns, resource_version=rv, label_selector="keep=1")}
    assert names == {"sel-a"}


def test_objects_entering_and_leaving_a_selector_are_added_and_deleted(api, ns):
    api.core.create_namespaced_pod(ns, pod_body("mover"))
    rv = api.core.list_namespaced_pod(ns).metadata.resource_version
    api.core.patch_namespaced_pod("mover", ns, {"metadata": {"labels": {"keep": "1"}}})
    api.core.patch_namespaced_pod("mover", ns, {"metadata": {"labels": {"keep": "1", "other": "x"}}})
    api.core.patch_namespaced_pod("mover", ns, {"metadata": {"labels": {"keep": None}}})
    events = _events(api, ns, resource_version=rv, label_selector="keep=1")
    assert events == [("ADDED", "mover"), ("MODIFIED", "mover"), ("DELETED", "mover")]


def test_bookmarks_when_requested(api, ns):
    rv = api.core.list_namespaced_pod(ns).metadata.resource_version
    with_bm = _events(api, ns, resource_version=rv, allow_watch_bookmarks=True)
    assert any(t == "BOOKMARK" for t, _ in with_bm)
    assert all(int(v) >= int(rv) for t, v in with_bm if t == "BOOKMARK")
    assert not any(t == "BOOKMARK" for t, _ in _events(api, ns, resource_version=rv))


def test_too_old_resource_version_is_410(api, ks, ns):
    old_rv = api.core.list_namespaced_pod(ns).metadata.resource_version
    ks.configure(watch_history=5)
    try:
        for i in range(10):
            api.core.create_namespaced_pod(ns, pod_body(f"g{i}"))
        with pytest.raises(ApiException) as err:
            _events(api, ns, resource_version=old_rv)
        assert err.value.status == 410
        assert "too old resource version" in str(err.value.reason)
        recent = api.core.list_namespaced_pod(ns).metadata.resource_version
        assert _events(api, ns, resource_version=recent) == []
    finally:
        ks.configure(watch_history=5000)


def test_live_events_reach_an_open_watch(api, ns):
    got: list[str] = []
    done = threading.Event()

    def consume() -> None:
        w = watch.Watch()
        for ev in w.stream(api.core.list_namespaced_pod, ns, timeout_seconds=5):
            got.append(ev["object"].metadata.name)
            if ev["object"].metadata.name == "live":
                w.stop()
        done.set()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    time.sleep(0.3)
    started = time.monotonic()
    api.core.create_namespaced_pod(ns, pod_body("live"))
    assert done.wait(4)
    assert "live" in got and time.monotonic() - started < 2


def test_watch_on_custom_objects(api, ns):
    from tests.kubesim.conftest import KUEUE

    rv = api.custom.list_namespaced_custom_object(*KUEUE, ns, "localqueues")["metadata"]["resourceVersion"]
    api.custom.create_namespaced_custom_object(
        *KUEUE,
        ns,
        "localqueues",
        local_queue_body("wq", "any"),
    )
    w = watch.Watch()
    events = list(
        w.stream(
            api.custom.list_namespaced_custom_object, *KUEUE, ns, "localqueues", resource_version=rv, timeout_seconds=1
        )
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "wq")]
