"""kubesim's API server half: a Kubernetes API server with Kueue's, JobSet's and Kubeflow's CRDs installed, and the
cluster behind it (the kube-controller-manager controllers it needs, the workload operators, the nodes and their
kubelet). It
knows the Kueue half only through kubesim.kernel.protocols; kubesim.sim wires the two.

- `http/`: the API over HTTP: the transport (`server.py`), routing, verbs, admission, watch, pod logs, the service
  proxy, the visibility endpoint, `/metrics`, kubesim's control endpoints, fault injection, protobuf bodies.
- `registry/`: the kinds served (`resources.py`), their schemas (Kueue's, JobSet's and Kubeflow's CRDs vendored in
  `crds/`, hand-written core schemas), served versions (`conversion.py`), and what clients read about them: discovery,
  OpenAPI, Tables.
- `validation/`: admission's checks: structural schemas and CEL, kube's hand-written rules for core and batch kinds.
- `storage/`: the object store and its watch history (implements kubesim.kernel.store.Store), selectors, patches,
  server-side apply.
- `auth/`: bearer tokens and RBAC authorization, the kubeconfig clients use.
- `controllers/`: kube-controller-manager's part: the batch/v1 Job controller, Endpoints, namespace deletion,
  garbage collection; and the workload operators' controllers (JobSet, Kubeflow Trainer v2, the training-operator).
- `operators.py`: the workload operators installed beside Kubernetes' controllers (CRDs, install objects,
  controllers, webhooks).
- `nodes/`: the node definitions, the kubelet (and a trivial scheduler), pods that serve HTTP, DCGM exporters.
- `errors.py`: Kubernetes Status errors.
"""
