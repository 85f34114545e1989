"""The kinds kubesim serves and what clients read about them.

- `resources.py`: the registry: group, version, kind, scope, subresources and short names of every kind.
- `crds/`: Kueue's, JobSet's and KubeRay's CRD schemas, vendored
  (`python -m kubesim.apiserver.registry.crds.regenerate DIR`).
- `coreschemas.py`, `workloadschemas.py`: hand-written structural schemas of the core and batch kinds and of what
  workloads attach (volume and env sources, PVCs, Endpoints, Ingress, HTTPRoute).
- `conversion.py`: Kueue's deprecated v1beta1, converted to and from the stored v1beta2; KubeRay's v1alpha1.
- `discovery.py`, `openapi.py`: `/version`, `/api`, `/apis`; `/openapi/v2` and `/openapi/v3` from the same schemas.
- `tables.py`: server-side printing (meta.k8s.io/v1 Table) for `kubectl get`.
"""
