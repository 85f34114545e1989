"""Thread-safe in-memory object store with a global resourceVersion and a bounded watch-event history.

Every write (API or controller) goes through here, so watches see exactly what Kubernetes would show.
"""

from __future__ import annotations

import bisect
import builtins
import secrets
import threading
import uuid
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta

from kubesim.apiserver.registry.resources import RESOURCES
from kubesim.apiserver.storage.lock import StoreLock
from kubesim.kernel.clock import Clock, parse_rfc3339, rfc3339
from kubesim.kernel.store import WatchEvent, clone

FOREGROUND_FINALIZER = "foregroundDeletion"
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName suffix characters (no vowels)


class StoreError(Exception):
    """Base of store errors; carries the resource and name for the Status details."""

    def __init__(self, resource: str, name: str, message: str = "") -> None:
        super().__init__(message or f"{resource} {name!r}")
        self.resource = resource
        self.name = name


class NotFound(StoreError):
    pass


class Conflict(StoreError):
    pass


class AlreadyExists(StoreError):
    pass


def _key(obj: dict) -> tuple[str, str]:
    md = obj["metadata"]
    return md.get("namespace") or "", md["name"]


def labels_match(obj: dict, selector: dict[str, str] | None) -> bool:
    if not selector:
        return True
    labels = obj["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


class ObjectStore:
    """Objects are plain JSON dicts; every accessor returns deep copies so callers can mutate freely."""

    def __init__(self, clock: Clock, history: int = 5000) -> None:
        self.lock = StoreLock()  # reentrant; the background settle hands it to waiting requests (lock.py)
        self.changed = threading.Condition(self.lock)  # type: ignore[arg-type]  # takes any lock with its hooks
        self.clock = clock
        self.history_size = history
        self._objects: dict[str, dict[tuple[str, str], dict]] = {r: {} for r in RESOURCES}
        self._uids: dict[str, tuple[str, str, str]] = {}
        self._rv = 0
        self._history: deque[WatchEvent] = deque(maxlen=history)
        self._compacted = 0  # events with rv <= this are no longer in the history
        self._event_index: dict[tuple, str] = {}
        self._last_change: dict[str, int] = {}
        self._owners: dict[str, set[tuple[str, str, str]]] = {}  # owner uid -> (resource, namespace, name)
        self._sorted: dict[str, dict[str | None, list[tuple[str, str]]]] = {}  # resource -> namespace -> keys
        self.deletions = 0  # bumped by every deletion step; the garbage collector runs only when it moves
        # Called on every commit, under the lock, with (resource, ADDED|MODIFIED|DELETED, object, previous): cheap.
        self.observers: list[Callable[[str, str, dict, dict | None], None]] = []

    # ---- bookkeeping -------------------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    @property
    def compacted_rv(self) -> int:
        with self.lock:
            return self._compacted

    def set_history_size(self, size: int) -> None:
        """Resize the watch window (tests shrink it to force 410 Gone)."""
        with self.lock:
            self.history_size = size
            events = list(self._history)
            self._history = deque(maxlen=size)
            dropped = events[: max(0, len(events) - size)]
            if dropped:
                self._compacted = max(self._compacted, dropped[-1].rv)
            self._history.extend(events[len(dropped) :])

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _emit(self, resource: str, type_: str, obj: dict, prev: dict | None = None) -> None:
        if len(self._history) == self._history.maxlen and self._history:
            self._compacted = self._history[0].rv
        # Stored objects are never mutated in place (writes replace them), so history can share them.
        self._history.append(WatchEvent(int(obj["metadata"]["resourceVersion"]), resource, type_, obj, prev))
        self._last_change[resource] = self._rv
        for observe in self.observers:
            observe(resource, type_, obj, prev)
        if type_ == "DELETED" or obj["metadata"].get("deletionTimestamp"):
            self.deletions += 1
        self.changed.notify_all()

    def events_since(self, rv: int) -> list[WatchEvent]:
        """History events with rv > the given one; caller checks compacted_rv first."""
        with self.lock:
            out = []
            for e in reversed(self._history):  # newest first: cost is the number of new events
                if e.rv <= rv:
                    break
                out.append(e)
            out.reverse()
            return out

    def now(self) -> datetime:
        return self.clock.now()

    # ---- reads -------------------------------------------------------------------------------------------
    def last_change(self, *resources: str) -> int:
        """The resourceVersion of the latest write to any of these resources (0 if none): lets controllers
        skip a pass when nothing they read has changed."""
        with self.lock:
            return max((self._last_change.get(r, 0) for r in resources), default=0)

    def get(self, resource: str, namespace: str | None, name: str, *, copy: bool = True) -> dict | None:
        """A copy of the object, or with copy=False the stored dict itself (never mutate it)."""
        with self.lock:
            obj = self._objects[resource].get((namespace or "", name))
            return clone(obj) if obj is not None and copy else obj

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        label_selector: dict[str, str] | None = None,
        *,
        copy: bool = True,
    ) -> builtins.list[dict]:
        """Objects sorted by (namespace, name). copy=False returns the stored dicts themselves: much faster,
        and safe only for callers that never mutate them (write back a clone() instead)."""
        with self.lock:
            objs = self._objects[resource]
            items = [objs[k] for k in self._keys(resource, namespace)]
            if label_selector:
                items = [o for o in items if labels_match(o, label_selector)]
            return clone(items) if copy else items

    def scan(
        self,
        resource: str,
        namespace: str | None,
        match: Callable[[dict], bool],
        *,
        after: tuple[str, str] | None = None,
        count: int = 0,
    ) -> tuple[builtins.list[dict], int]:
        """A page of a list: the stored dicts (never mutate them) sorted by (namespace, name) whose key comes after
        `after`, that `match` accepts, the first `count` of them (0: all); and how many keys the scan left unread
        after the last one returned. It starts at `after` and stops at `count`, so paging through a collection of N
        objects reads each once, not N each page."""
        with self.lock:
            objs = self._objects[resource]
            keys = self._keys(resource, namespace)
            at = bisect.bisect_right(keys, after) if after is not None else 0
            if count <= 0:  # the rest, all of it: one comprehension
                return [obj for key in keys[at:] if match(obj := objs[key])], 0
            found: builtins.list[dict] = []
            while at < len(keys):
                obj = objs[keys[at]]
                at += 1
                if match(obj):
                    found.append(obj)
                    if len(found) == count:
                        break
            return found, len(keys) - at

    def _keys(self, resource: str, namespace: str | None) -> builtins.list[tuple[str, str]]:
        """Sorted keys of a resource (in a namespace), built on first use and kept sorted as objects come and go
        (_index_key): a list after a create costs the objects listed, not a sort of every object."""
        per_ns = self._sorted.setdefault(resource, {})
        keys = per_ns.get(namespace)
        if keys is None:
            everything = per_ns.get(None)
            if everything is None:
                everything = per_ns[None] = sorted(self._objects[resource])
            keys = everything if namespace is None else [k for k in everything if k[0] == namespace]
            per_ns[namespace] = keys
        return keys

    def _index_key(self, resource: str, key: tuple[str, str], added: bool) -> None:
        """A key created (added) or removed: the sorted key lists built so far follow (they are only read under
        the lock, by list())."""
        per_ns = self._sorted.get(resource)
        if not per_ns:
            return
        for namespace in (None, key[0]):  # every key, and the namespace's (always a list of its own)
            keys = per_ns.get(namespace)
            if keys is None:
                continue
            at = bisect.bisect_left(keys, key)
            if added:
                keys.insert(at, key)
            elif at < len(keys) and keys[at] == key:
                del keys[at]

    def _put(self, resource: str, key: tuple[str, str], obj: dict) -> dict | None:
        """Store obj under key, keeping the uid, owner and sorted-key indexes; returns the replaced object."""
        objs = self._objects[resource]
        prev = objs.get(key)
        objs[key] = obj
        if prev is None:
            self._index_key(resource, key, added=True)
        else:
            self._unindex_owners(resource, key, prev)
        self._uids[obj["metadata"]["uid"]] = (resource, key[0], key[1])
        for ref in obj["metadata"].get("ownerReferences") or []:
            self._owners.setdefault(ref.get("uid", ""), set()).add((resource, key[0], key[1]))
        return prev

    def _unindex_owners(self, resource: str, key: tuple[str, str], obj: dict) -> None:
        for ref in obj["metadata"].get("ownerReferences") or []:
            owned = self._owners.get(ref.get("uid", ""))
            if owned is not None:
                owned.discard((resource, key[0], key[1]))
                if not owned:
                    del self._owners[ref.get("uid", "")]

    def by_uid(self, uid: str) -> tuple[str, str, str] | None:
        with self.lock:
            return self._uids.get(uid)

    def dependents(self, uid: str, resource: str | None = None) -> builtins.list[tuple[str, dict]]:
        """(resource, object) whose ownerReferences name this uid, sorted; live stored dicts: do not mutate."""
        with self.lock:
            found = sorted(r for r in self._owners.get(uid, ()) if resource is None or r[0] == resource)
            return [(r, o) for r, ns, name in found if (o := self._objects[r].get((ns, name))) is not None]

    # ---- writes ------------------------------------------------------------------------------------------
    def create(self, resource: str, obj: dict, *, dry_run: bool = False) -> dict:
        """Store a new object: fills uid, resourceVersion, generation, creationTimestamp, generateName. A dry run
        answers the object as it would be stored, without a resourceVersion, and stores nothing."""
        with self.lock:
            obj = clone(obj)
            info = RESOURCES[resource]
            obj["apiVersion"], obj["kind"] = info.api_version, info.kind
            md = obj.setdefault("metadata", {})
            if not info.namespaced:
                md.pop("namespace", None)
            if not md.get("name") and md.get("generateName"):
                md["name"] = self.free_name(resource, md.get("namespace"), md["generateName"])
            key = _key(obj)
            if key in self._objects[resource]:
                raise AlreadyExists(resource, md["name"])
            for dropped in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                md.pop(dropped, None)
            md["uid"] = md.get("uid") or str(uuid.uuid4())  # callers may pre-assign (the API server does)
            md["generation"] = 1
            md["creationTimestamp"] = rfc3339(self.now())
            if dry_run:
                md.pop("resourceVersion", None)
                return obj
            md["resourceVersion"] = str(self._next_rv())
            self._put(resource, key, obj)
            self._emit(resource, "ADDED", obj)
            return clone(obj)

    def free_name(self, resource: str, namespace: str | None, prefix: str) -> str:
        """generateName: prefix + 5 random characters from Kubernetes' alphabet, retried on collision."""
        for _ in range(1000):
            name = prefix + "".join(secrets.choice(NAME_ALPHABET) for _ in range(5))
            if (namespace or "", name) not in self._objects[resource]:
                return name
        raise AlreadyExists(resource, prefix)

    def _current(self, resource: str, obj: dict) -> dict:
        md = obj.get("metadata") or {}
        cur = self._objects[resource].get((md.get("namespace") or "", md.get("name", "")))
        if cur is None:
            raise NotFound(resource, md.get("name", ""))
        rv = md.get("resourceVersion")
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise Conflict(
                resource,
                md["name"],
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        return cur

    def _commit(self, resource: str, new: dict) -> dict:
        key = _key(new)
        md = new["metadata"]
        if md.get("deletionTimestamp") and not _finalizers(resource, new) and not md.get("deletionGracePeriodSeconds"):
            return self._remove(resource, key)
        md["resourceVersion"] = str(self._next_rv())
        prev = self._put(resource, key, new)
        self._emit(resource, "MODIFIED", new, prev)
        return clone(new)

    def update(self, resource: str, obj: dict, *, dry_run: bool = False) -> dict:
        """Replace everything but status (kept when the type has a status subresource); bump generation on spec.
        A dry run answers the object as it would be stored, at its current resourceVersion, and stores nothing."""
        with self.lock:
            cur = self._current(resource, obj)
            new = clone(obj)
            info = RESOURCES[resource]
            new["apiVersion"], new["kind"] = info.api_version, info.kind
            if "status" in info.subresources:
                new.pop("status", None)
                if "status" in cur:
                    new["status"] = clone(cur["status"])
            md, old_md = new.setdefault("metadata", {}), cur["metadata"]
            for fixed in ("uid", "creationTimestamp", "namespace", "name", "generation"):
                if fixed in old_md:
                    md[fixed] = old_md[fixed]
            if old_md.get("deletionTimestamp"):
                md["deletionTimestamp"] = old_md["deletionTimestamp"]
            else:
                md.pop("deletionTimestamp", None)
            same_status = new.get("status") == cur.get("status")
            if _body(new) == _body(cur) and _strip_rv(md) == _strip_rv(old_md) and same_status:
                return clone(cur)  # no-op update: Kubernetes does not bump resourceVersion
            if _body(new) != _body(cur):
                md["generation"] = old_md.get("generation", 1) + 1
            if dry_run:
                md["resourceVersion"] = old_md["resourceVersion"]
                return new
            return self._commit(resource, new)

    def update_status(self, resource: str, obj: dict, *, dry_run: bool = False) -> dict:
        """Replace only status (a dry run answers the result and stores nothing)."""
        with self.lock:
            cur = self._current(resource, obj)
            if obj.get("status") == cur.get("status"):
                return clone(cur)
            new = clone(cur)
            if obj.get("status") is None:
                new.pop("status", None)
            else:
                new["status"] = clone(obj["status"])
            return new if dry_run else self._commit(resource, new)

    def _remove(self, resource: str, key: tuple[str, str]) -> dict:
        prev = self._objects[resource].pop(key)
        self._index_key(resource, key, added=False)
        self._unindex_owners(resource, key, prev)
        self._uids.pop(prev["metadata"]["uid"], None)
        obj = clone(prev)  # never mutate a stored object: watch history shares them
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        self._emit(resource, "DELETED", obj, prev)
        return clone(obj)

    def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        propagation: str = "Background",
        *,
        dry_run: bool = False,
        grace_seconds: int | None = None,
    ) -> dict:
        """Delete honouring finalizers; cascade to dependents (Background/Foreground) or orphan them (Orphan).

        Returns the object as it was deleted, or with deletionTimestamp set when finalizers or a pod's graceful
        termination keep it. A pod bound to a node and not finished is deleted gracefully, as kube-apiserver does:
        deletionTimestamp is now + its grace period (`grace_seconds`, DeleteOptions.gracePeriodSeconds, else its
        spec.terminationGracePeriodSeconds, 30 by default), deletionGracePeriodSeconds that period, and it stays
        until the kubelet has stopped its containers (`pod_terminated`); 0 deletes it at once. A dry run returns
        the same answer and touches nothing, dependents included.
        """
        with self.lock:
            key = (namespace or "", name)
            cur = self._objects[resource].get(key)
            if cur is None:
                raise NotFound(resource, name)
            if dry_run:
                return clone(self._marked_for_deletion(resource, cur, propagation, grace_seconds) or cur)
            uid = cur["metadata"]["uid"]
            deps = builtins.list(self.dependents(uid))
            if propagation == "Orphan":
                for dep_resource, dep in deps:
                    new = clone(dep)
                    refs = [r for r in new["metadata"]["ownerReferences"] if r.get("uid") != uid]
                    new["metadata"]["ownerReferences"] = refs
                    if not refs:
                        del new["metadata"]["ownerReferences"]
                    self._commit(dep_resource, new)
                deps = []
            if propagation == "Background" and self._marked_for_deletion(resource, cur, propagation) is not None:
                deps = []  # its finalizers keep it: the garbage collector takes its dependents once it is gone
            for dep_resource, dep in deps:
                dmd = dep["metadata"]
                others = [r for r in dmd.get("ownerReferences") or [] if r.get("uid") != uid]
                if any(r.get("uid") in self._uids for r in others):  # another owner still holds it: only let go
                    new = clone(dep)
                    new["metadata"]["ownerReferences"] = others
                    self._commit(dep_resource, new)
                elif not dmd.get("deletionTimestamp"):
                    self.delete(dep_resource, dmd.get("namespace"), dmd["name"], propagation)
            cur = self._objects[resource].get(key)
            if cur is None:
                raise NotFound(resource, name)
            marked = self._marked_for_deletion(resource, cur, propagation, grace_seconds)
            if marked is None:
                return self._remove(resource, key)
            already = cur["metadata"].get("deletionTimestamp")
            if already and marked["metadata"] == cur["metadata"]:
                return clone(cur)
            return self._commit(resource, marked)

    def _marked_for_deletion(
        self, resource: str, cur: dict, propagation: str, grace_seconds: int | None = None
    ) -> dict | None:
        """The object as a deletion leaves it while finalizers or a pod's grace period keep it (deletionTimestamp
        set), or None when it goes at once. Foreground always goes through the finalizer, as in kube-apiserver: the
        object is marked (deletionTimestamp, foregroundDeletion) and the garbage collector removes it once its
        dependents are gone, even when that is at once. A pod deleted again while terminating keeps its deletion
        time unless the new grace period ends sooner (kube's BeforeDelete)."""
        md = cur["metadata"]
        finalizers = builtins.list(md.get("finalizers") or [])
        if propagation == "Foreground" and FOREGROUND_FINALIZER not in finalizers:
            finalizers.append(FOREGROUND_FINALIZER)
        grace = _grace_seconds(resource, cur, grace_seconds)
        if not finalizers and not _finalizers(resource, cur) and not grace:
            return None
        new = clone(cur)
        nmd = new["metadata"]
        if finalizers:
            nmd["finalizers"] = finalizers
        if resource == "namespaces":
            new.setdefault("status", {})["phase"] = "Terminating"
        now = self.now()
        if md.get("deletionTimestamp") and md.get("deletionGracePeriodSeconds"):
            # Terminating already: a shorter grace period brings the end forward, a longer one changes nothing.
            started = parse_rfc3339(md["deletionTimestamp"]) - timedelta(seconds=md["deletionGracePeriodSeconds"])
            if grace < md["deletionGracePeriodSeconds"] - (now - started).total_seconds():
                nmd["deletionTimestamp"] = rfc3339(now + timedelta(seconds=grace))
                nmd["deletionGracePeriodSeconds"] = grace
            return new
        nmd.setdefault("deletionTimestamp", rfc3339(now + timedelta(seconds=grace)))
        nmd.setdefault("deletionGracePeriodSeconds", grace)
        return new

    def pod_terminated(self, namespace: str, name: str) -> dict | None:
        """The kubelet's last word on a pod being deleted, a delete with grace period 0: its containers have
        stopped, so its grace period ends now (deletionTimestamp now, deletionGracePeriodSeconds 0) and it goes,
        unless finalizers still hold it. None when it went."""
        with self.lock:
            key = (namespace, name)
            cur = self._objects["pods"].get(key)
            if cur is None or not cur["metadata"].get("deletionTimestamp"):
                return None
            new = clone(cur)
            now = self.now()
            if parse_rfc3339(new["metadata"]["deletionTimestamp"]) > now:
                new["metadata"]["deletionTimestamp"] = rfc3339(now)
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            if not _finalizers("pods", new):
                self._remove("pods", key)
                return None
            return self._commit("pods", new)

    def remove_finalizer(self, resource: str, namespace: str | None, name: str, finalizer: str) -> None:
        with self.lock:
            cur = self._objects[resource].get((namespace or "", name))
            if cur is None or finalizer not in (cur["metadata"].get("finalizers") or []):
                return
            new = clone(cur)
            new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != finalizer]
            self._commit(resource, new)

    def release_foreground(self) -> bool:
        """Drop foregroundDeletion from owners whose dependents are all gone (the garbage collector's job)."""
        wrote = False
        with self.lock:
            for resource, objs in self._objects.items():
                for o in builtins.list(objs.values()):
                    md = o["metadata"]
                    if FOREGROUND_FINALIZER in (md.get("finalizers") or []) and not any(
                        True for _ in self.dependents(md["uid"])
                    ):
                        self.remove_finalizer(resource, md.get("namespace"), md["name"], FOREGROUND_FINALIZER)
                        wrote = True
        return wrote

    def collect_orphans(self) -> bool:
        """Delete objects all of whose owners are gone (the garbage collector's other job)."""
        wrote = False
        with self.lock:
            for resource, objs in self._objects.items():
                for o in builtins.list(objs.values()):
                    md = o["metadata"]
                    refs = md.get("ownerReferences") or []
                    if refs and not md.get("deletionTimestamp") and not any(r.get("uid") in self._uids for r in refs):
                        self.delete(resource, md.get("namespace"), md["name"])
                        wrote = True
        return wrote

    def record_event(self, involved: dict, type_: str, reason: str, message: str, component: str) -> None:
        """Write a core/v1 Event as Kubernetes does: repeats of (object, reason, message) bump count."""
        with self.lock:
            md = involved.get("metadata") or {}
            namespace = md.get("namespace") or "default"
            ref = {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": md.get("name"),
                "uid": md.get("uid"),
                "resourceVersion": md.get("resourceVersion"),
            }
            if md.get("namespace"):
                ref["namespace"] = md["namespace"]
            now = rfc3339(self.now())
            dedup = (namespace, ref["kind"], ref["name"], ref["uid"], type_, reason, message)
            existing = self._event_index.get(dedup)
            cur = self._objects["events"].get((namespace, existing)) if existing else None
            if cur is not None:
                new = clone(cur)
                new["count"] = new.get("count", 1) + 1
                new["lastTimestamp"] = now
                self._commit("events", new)
                return
            name = f"{ref['name']}.{secrets.token_hex(8)}"
            self._event_index[dedup] = name
            self.create(
                "events",
                {
                    "metadata": {"name": name, "namespace": namespace},
                    "involvedObject": ref,
                    "reason": reason,
                    "message": message,
                    "type": type_,
                    "source": {"component": component},
                    "firstTimestamp": now,
                    "lastTimestamp": now,
                    "count": 1,
                    "reportingComponent": component,
                    "reportingInstance": "",
                },
            )

    # ---- whole-store operations --------------------------------------------------------------------------
    def wipe(self) -> None:
        """Delete every object at once, bypassing finalizers (reset), emitting DELETED events."""
        with self.lock:
            for resource, objs in self._objects.items():
                for key in builtins.list(objs):
                    self._remove(resource, key)
            self._event_index.clear()

    def snapshot(self) -> dict:
        """Everything --state persists: the objects (stored dicts, do not mutate) and the resourceVersion counter."""
        with self.lock:
            return {
                "resourceVersion": self._rv,
                # stored objects are never mutated in place, so references are a consistent snapshot
                "objects": {r: builtins.list(objs.values()) for r, objs in self._objects.items() if objs},
            }

    def restore(self, data: dict) -> None:
        """Load a snapshot (on start, before any watch exists); the watch history starts after it."""
        with self.lock:
            for resource, items in data.get("objects", {}).items():
                if resource not in self._objects:
                    continue
                for obj in items:
                    self._put(resource, _key(obj), obj)
            self._rv = max(self._rv, int(data.get("resourceVersion", 0)))
            self._compacted = self._rv
            self._history.clear()


DEFAULT_GRACE_SECONDS = 30  # a PodSpec's terminationGracePeriodSeconds when it says none


def _grace_seconds(resource: str, obj: dict, asked: int | None) -> int:
    """The grace period a deletion gives the object: only a pod bound to a node and not finished has one (kube's
    pod strategy: an unscheduled or finished pod goes at once); DeleteOptions' own, else the pod's, else 30 s."""
    md, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    if resource != "pods" or (md.get("deletionTimestamp") and not md.get("deletionGracePeriodSeconds")):
        return 0  # not a pod, or one whose grace period has ended
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    if asked is not None:
        return max(0, int(asked))
    period = spec.get("terminationGracePeriodSeconds")
    return DEFAULT_GRACE_SECONDS if period is None else max(0, int(period))


def _finalizers(resource: str, obj: dict) -> list[str]:
    """What blocks removal: metadata.finalizers, plus spec.finalizers for namespaces (the namespace controller)."""
    out = list(obj["metadata"].get("finalizers") or [])
    if resource == "namespaces":
        out += (obj.get("spec") or {}).get("finalizers") or []
    return out


def _body(obj: dict) -> dict:
    """Everything that counts for metadata.generation: all but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _strip_rv(md: dict) -> dict:
    return {k: v for k, v in md.items() if k != "resourceVersion"}
