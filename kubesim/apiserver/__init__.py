"""The Kubernetes API server half of kubesim, HTTP-agnostic (kubesim.server puts it on HTTP).

| module | responsibility |
|---|---|
| `routing.py` | `Api`: paths to control / discovery / visibility / resources; method + path to a verb |
| `verbs.py` | get, list, create, update (replace), patch, delete, deletecollection |
| `admission.py` | identity and namespace checks, decoding, defaulting, webhooks, validation |
| `watch.py` | watch streams (resume, selectors, BOOKMARKs, 410 Gone, Tables) |
| `logs.py` | pod logs (tailLines, timestamps, follow) |
| `visibility.py` | the visibility.kueue.x-k8s.io pendingworkloads endpoints |
| `control.py` | `/kubesim/v1/...` control endpoints |
| `common.py` | `Response`, `Target` and request helpers shared by the above |
"""

from kubesim.apiserver.common import Response, Target
from kubesim.apiserver.routing import Api

__all__ = ["Api", "Response", "Target"]
