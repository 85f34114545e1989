"""The namespace controller: empties a terminating namespace, then lets the store remove it."""

from __future__ import annotations

from datetime import datetime

from kubesim.apiserver.registry.resources import RESOURCES
from kubesim.kernel.store import Store, clone


class NamespaceController:
    """Empties terminating namespaces, then drops their spec.finalizers so the store removes them."""

    name = "namespace-controller"

    def reconcile(self, store: Store) -> bool:
        wrote = False
        for ns in store.list("namespaces", copy=False):
            if not ns["metadata"].get("deletionTimestamp"):
                continue
            ns = clone(ns)
            name = ns["metadata"]["name"]
            remaining = 0
            for resource in _namespaced():
                for obj in store.list(resource, name, copy=False):
                    remaining += 1
                    if not obj["metadata"].get("deletionTimestamp"):
                        store.delete(resource, name, obj["metadata"]["name"])
                        wrote = True
            if not remaining and (ns.get("spec") or {}).get("finalizers"):
                ns["spec"]["finalizers"] = []
                store.update("namespaces", ns)
                wrote = True
        return wrote

    def next_deadline(self, store: Store) -> datetime | None:
        return None


def _namespaced() -> list[str]:
    return [r for r, info in RESOURCES.items() if info.namespaced]
