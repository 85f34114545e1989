"""Watches: the initial state (or a resume from a resourceVersion), then the store's events through the request's
selectors with Kubernetes' cacher semantics, BOOKMARKs, 410 Gone past the history window, and Tables for kubectl."""

from __future__ import annotations

import time
from collections.abc import Iterator

from kubesim.apiserver.errors import bad_request, number_param
from kubesim.apiserver.http.backend import Backend
from kubesim.apiserver.http.common import (
    DEFAULT_WATCH_TIMEOUT,
    Matcher,
    Query,
    Response,
    Target,
    matchers,
    q,
    truthy,
)
from kubesim.apiserver.registry import tables
from kubesim.apiserver.storage.selectors import parse_field_selector
from kubesim.kernel.store import WatchEvent


class Watches:
    def __init__(self, sim: Backend) -> None:
        self.sim = sim
        self.store = sim.store

    def watch(self, t: Target, query: Query, headers: dict[str, str]) -> Response:
        labels, fields = matchers(query)
        if t.name:
            by_name = parse_field_selector(f"metadata.name={t.name}")
            fields = (lambda f: lambda o: f(o) and by_name(o))(fields)
        rv_param = q(query, "resourceVersion", "") or ""
        timeout = number_param("timeoutSeconds", q(query, "timeoutSeconds", "") or DEFAULT_WATCH_TIMEOUT)
        bookmarks = truthy(q(query, "allowWatchBookmarks"))
        try:
            start = int(rv_param) if rv_param not in ("", "0") else None
        except ValueError as exc:
            raise bad_request(f'invalid resource version "{rv_param}"') from exc
        events = self._events(t, labels, fields, start, timeout, bookmarks)
        if tables.wants_table(headers.get("accept", "")):
            events = self._as_tables(t, events, q(query, "includeObject", "") or "")
        return Response(200, stream=events)

    def _as_tables(self, t: Target, events: Iterator[dict], include: str) -> Iterator[dict]:
        """kubectl get -w asks for Tables: each event carries a one-row Table (BOOKMARK and ERROR as they are)."""
        for ev in events:
            if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                meta = {"resourceVersion": ev["object"]["metadata"]["resourceVersion"]}
                ev = {
                    "type": ev["type"],
                    "object": tables.table(
                        t.res, [ev["object"]], self.sim.clock.now(), meta, include, t.served_version
                    ),
                }
            yield ev

    def _events(
        self,
        t: Target,
        labels: Matcher,
        fields: Matcher,
        start: int | None,
        timeout: float,
        bookmarks: bool,
    ) -> Iterator[dict]:
        store, res = self.store, t.res
        epoch = self.sim.faults.watch_epoch
        deadline = time.monotonic() + timeout

        def selected(obj: dict | None) -> bool:
            if obj is None:
                return False
            if t.namespace is not None and obj["metadata"].get("namespace") != t.namespace:
                return False
            return labels(obj) and fields(obj)

        def translate(ev: WatchEvent) -> dict | None:
            """Kubernetes' cacher semantics: an object entering the selector is ADDED, leaving it DELETED."""
            if ev.resource != res.plural:
                return None
            now_in, was_in = selected(ev.obj), selected(ev.prev)
            if ev.type == "MODIFIED":
                if now_in and not was_in:
                    return {"type": "ADDED", "object": ev.obj}
                if was_in and not now_in:
                    return {"type": "DELETED", "object": ev.obj}
                return {"type": "MODIFIED", "object": ev.obj} if now_in else None
            if ev.type == "DELETED":
                return {"type": "DELETED", "object": ev.obj} if was_in or now_in else None
            return {"type": ev.type, "object": ev.obj} if now_in else None

        initial: list[dict] | None
        with store.lock:
            if start is None:
                initial = [o for o in store.list(res.plural, t.namespace, copy=False) if labels(o) and fields(o)]
                start = store.resource_version
            elif start < store.compacted_rv:
                initial = None
            else:
                initial = []
        if initial is None:
            yield gone(start, store.compacted_rv)
            return
        for obj in initial:
            yield {"type": "ADDED", "object": obj}
        next_bookmark = time.monotonic() + self.sim.bookmark_interval
        while True:
            now = time.monotonic()
            if now >= deadline or self.sim.faults.watch_epoch != epoch:
                return
            events: list[WatchEvent] | None
            with store.lock:
                if start < store.compacted_rv:
                    events = None
                else:
                    events = store.events_since(start)
                    if not events:
                        store.changed.wait(timeout=max(0.0, min(deadline - now, next_bookmark - now, 0.25)))
                        events = store.events_since(start)
            if events is None:
                yield gone(start, store.compacted_rv)
                return
            for ev in events:
                start = ev.rv
                out = translate(ev)
                if out is not None:
                    yield out
            if bookmarks and time.monotonic() >= next_bookmark:
                next_bookmark = time.monotonic() + self.sim.bookmark_interval
                yield {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": res.kind,
                        "apiVersion": res.api_version,
                        "metadata": {"resourceVersion": str(start)},
                    },
                }


def gone(start: int, compacted: int) -> dict:
    """The ERROR event that ends a watch whose resourceVersion fell out of the history window (410 Expired)."""
    return {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {start} ({compacted + 1})",
            "reason": "Expired",
            "code": 410,
        },
    }
