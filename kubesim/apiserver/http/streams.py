"""A pod's connect subresources: exec and attach (`kubectl exec`, `attach`, `cp`) refused, portforward served.

kubesim's containers are emulated, no process runs in them, so exec and attach are refused with a 400 Status that
says why: a client upgrading the connection (kubectl tries WebSocket, then SPDY) reads the Status and prints
`Error from server (BadRequest): ...`, as it does for a container kube-apiserver cannot reach. Port forwarding
reaches what kubesim does emulate inside a pod, a Jupyter server (kubesim.apiserver.http.portforward). The checks a
real server makes first still come first: the pod must exist (404), a named container must be one of the pod's, and
the pod must be on a node.
"""

from __future__ import annotations

from kubesim.apiserver.errors import bad_request
from kubesim.apiserver.http import portforward
from kubesim.apiserver.http.common import Query, Response, Target, existing, q
from kubesim.apiserver.http.proxy import ServiceProxy
from kubesim.apiserver.storage.store import ObjectStore

_WHAT = {"exec": "exec into", "attach": "attach to"}


def connect(store: ObjectStore, proxy: ServiceProxy, t: Target, query: Query, headers: dict[str, str]) -> Response:
    pod = existing(store, t)
    spec, name, ns = pod.get("spec") or {}, t.name or "", t.namespace or ""
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    container = q(query, "container")
    if t.sub != "portforward" and container and container not in [c.get("name") for c in containers]:
        raise bad_request(f"container {container} is not valid for pod {name}")
    if not spec.get("nodeName"):
        raise bad_request(f"pod {name} does not have a host assigned")
    if t.sub == "portforward":
        return portforward.upgrade(proxy, pod, headers)
    raise bad_request(
        f'kubesim emulates the containers of pod "{ns}/{name}" without running them: there is no process to '
        f"{_WHAT.get(t.sub or '', t.sub or '')} (kubectl exec, attach and cp need one)"
    )
