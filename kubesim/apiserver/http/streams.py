"""A pod's connect subresources (exec, attach, portforward: `kubectl exec`, `attach`, `cp`, `port-forward`).

kubesim's containers are emulated, no process runs in them, so it refuses each with a 400 Status that says why: a
client upgrading the connection (kubectl tries WebSocket, then SPDY) reads the Status and prints
`Error from server (BadRequest): ...`, as it does for a container kube-apiserver cannot reach. The checks a real
server makes first still come first: the pod must exist (404), a named container must be one of the pod's, and the
pod must be on a node. A port-forward refusal names the service proxy path that reaches a pod's emulated server (a
Jupyter notebook) instead, when a Service selects the pod.
"""

from __future__ import annotations

from kubesim.apiserver.errors import bad_request
from kubesim.apiserver.http.common import Query, Response, Target, existing, q
from kubesim.apiserver.nodes.servers import is_server
from kubesim.apiserver.storage.store import ObjectStore

_WHAT = {"exec": "exec into", "attach": "attach to"}


def refuse(store: ObjectStore, t: Target, query: Query) -> Response:
    pod = existing(store, t)
    spec, name, ns = pod.get("spec") or {}, t.name or "", t.namespace or ""
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    container = q(query, "container")
    if t.sub != "portforward" and container and container not in [c.get("name") for c in containers]:
        raise bad_request(f"container {container} is not valid for pod {name}")
    if not spec.get("nodeName"):
        raise bad_request(f"pod {name} does not have a host assigned")
    if t.sub == "portforward":
        raise bad_request(_no_port_forward(store, pod, containers))
    raise bad_request(
        f'kubesim emulates the containers of pod "{ns}/{name}" without running them: there is no process to '
        f"{_WHAT.get(t.sub or '', t.sub or '')} (kubectl exec, attach and cp need one)"
    )


def _no_port_forward(store: ObjectStore, pod: dict, containers: list[dict]) -> str:
    md = pod["metadata"]
    message = f'kubesim cannot forward ports to pod "{md["namespace"]}/{md["name"]}": its containers are emulated'
    if not any(is_server(c) for c in containers):
        return message
    labels = md.get("labels") or {}
    for svc in store.list("services", md["namespace"], copy=False):
        selector = (svc.get("spec") or {}).get("selector") or {}
        if selector and all(labels.get(k) == v for k, v in selector.items()):
            ports = (svc.get("spec") or {}).get("ports") or [{}]
            port = ports[0].get("port")
            target = f"{svc['metadata']['name']}:{port}" if port else svc["metadata"]["name"]
            return (
                f"{message}; reach its server through the service proxy instead: "
                f"/api/v1/namespaces/{md['namespace']}/services/{target}/proxy/ (kubectl proxy serves it locally)"
            )
    return f"{message}; its server is reached through the service proxy of a Service that selects the pod"
