"""The Kubernetes API over HTTP. `server.py` is the HTTP/1.1 transport; the rest turns a request (method, path,
query, body, headers) into a Response, against the simulator described by `backend.Backend`.

| module | responsibility |
|---|---|
| `server.py` | `KubeHTTPServer(addr, sim)`, `serve_in_thread(sim)`: HTTP/1.1, chunked watch streams |
| `routing.py` | `Api`: paths to control / discovery / visibility / resources; method + path to a verb |
| `verbs.py` | get, list, create, update (replace), patch, delete, deletecollection |
| `admission.py` | identity and namespace checks, decoding, defaulting, webhooks, validation |
| `watch.py` | watch streams (resume, selectors, BOOKMARKs, 410 Gone, Tables) |
| `logs.py` | pod logs (tailLines, timestamps, follow) |
| `streams.py` | a pod's exec and attach: refused with a 400 Status saying why (no process runs); portforward |
| `portforward.py` | `kubectl port-forward`: the SPDY upgrade; stream pairs bridged to the pod's emulated server |
| `spdy.py` | the server side of SPDY/3.1 (frames, zlib-compressed header blocks) |
| `access.py` | TokenRequests, SelfSubjectAccessReviews, SelfSubjectRulesReviews, SelfSubjectReviews |
| `proxy.py` | the service proxy to pods that serve HTTP; a connection to such a pod's port |
| `visibility.py` | the visibility.kueue.x-k8s.io pendingworkloads endpoints (answered by the Kueue half) |
| `metrics.py` | `/metrics`: Kueue's Prometheus metrics from the stored objects |
| `control.py` | `/kubesim/v1/...` control endpoints |
| `faults.py` | fault injection on API requests |
| `k8sproto/` | protobuf request and response bodies |
| `backend.py` | `Backend`: what the handlers need of the simulator |
| `common.py` | `Response`, `Target` and request helpers shared by the above |
"""
