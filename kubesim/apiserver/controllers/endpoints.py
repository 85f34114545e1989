"""The endpoints controller: one Endpoints object per Service with a selector, listing the pods behind it.

Cluster DNS is built from these: for a headless Service (clusterIP None) each address with a `hostname` (a pod
whose spec.subdomain names the Service, e.g. an Indexed Job's pods) resolves as `<hostname>.<service>.<ns>.svc`.
So a test reads here which pod a name such as MASTER_ADDR reaches. Running and Ready pods are `addresses`, pods
not yet running `notReadyAddresses` (all of them `addresses` when the Service publishes not-ready addresses).
"""

from __future__ import annotations

from datetime import datetime

from kubesim.kernel.store import ChangeFeed, Store


def _matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _address(pod: dict, service_name: str) -> dict:
    md, spec = pod["metadata"], pod["spec"]
    address: dict = {"ip": (pod.get("status") or {}).get("podIP", "")}
    if spec.get("hostname") and spec.get("subdomain") == service_name:
        address["hostname"] = spec["hostname"]
    if spec.get("nodeName"):
        address["nodeName"] = spec["nodeName"]
    address["targetRef"] = {"kind": "Pod", "namespace": md["namespace"], "name": md["name"], "uid": md["uid"]}
    return address


def _port(port: dict, pods: list[dict]) -> dict:
    target = port.get("targetPort", port.get("port"))
    number = target if isinstance(target, int) else None
    if number is None:  # a named port: the number the pods give it
        for pod in pods:
            for c in pod["spec"].get("containers") or []:
                for p in c.get("ports") or []:
                    if p.get("name") == target:
                        number = p.get("containerPort")
    out = {"port": number or port.get("port"), "protocol": port.get("protocol", "TCP")}
    if port.get("name"):
        out["name"] = port["name"]
    return out


def desired_endpoints(service: dict, pods: list[dict]) -> dict:
    md, spec = service["metadata"], service.get("spec") or {}
    chosen = [
        p
        for p in pods
        if _matches(spec.get("selector") or {}, p["metadata"].get("labels") or {})
        and not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    key = sorted(chosen, key=lambda p: p["metadata"]["name"])
    ready = [
        p for p in key if (p.get("status") or {}).get("phase") == "Running" and (p.get("status") or {}).get("podIP")
    ]
    waiting = [p for p in key if p not in ready and (p.get("status") or {}).get("podIP")]
    if spec.get("publishNotReadyAddresses"):
        ready, waiting = ready + waiting, []
    subset: dict = {}
    if ready:
        subset["addresses"] = [_address(p, md["name"]) for p in ready]
    if waiting:
        subset["notReadyAddresses"] = [_address(p, md["name"]) for p in waiting]
    if subset:
        subset["ports"] = [_port(p, key) for p in spec.get("ports") or []]
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": md["name"], "namespace": md["namespace"], "labels": dict(md.get("labels") or {})},
        "subsets": [subset] if subset else [],
    }


class EndpointsController:
    """Keeps Endpoints in step with Services and pods; removes them with their Service."""

    name = "endpoints-controller"

    def __init__(self) -> None:
        self._feed = ChangeFeed("pods", "services")

    def reconcile(self, store: Store) -> bool:
        events = self._feed.changed(store)
        if events is not None and not events:
            return False
        namespaces = None if events is None else {e.obj["metadata"].get("namespace") for e in events}
        wrote = False
        for service in store.list("services", copy=False):
            ns = service["metadata"]["namespace"]
            if namespaces is not None and ns not in namespaces:
                continue
            if not (service.get("spec") or {}).get("selector") or service["metadata"].get("deletionTimestamp"):
                continue
            want = desired_endpoints(service, store.list("pods", ns, copy=False))
            have = store.get("endpoints", ns, service["metadata"]["name"], copy=False)
            if have is None:
                store.create("endpoints", want)
                wrote = True
            elif have.get("subsets") != want["subsets"]:
                store.update("endpoints", {**have, "subsets": want["subsets"]})
                wrote = True
        for endpoints in store.list("endpoints", copy=False):
            md = endpoints["metadata"]
            if (
                (namespaces is None or md["namespace"] in namespaces)
                and store.get("services", md["namespace"], md["name"], copy=False) is None
                and not md.get("deletionTimestamp")
            ):
                store.delete("endpoints", md["namespace"], md["name"])
                wrote = True
        return wrote

    def next_deadline(self, store: Store) -> datetime | None:
        return None
