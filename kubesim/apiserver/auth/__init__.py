"""Who is asking and what they may do: bearer tokens and RBAC authorization (`rbac.py`), the default ClusterRoles a
cluster starts with (`bootstrap_policy.py`), and the kubeconfig with the cluster admin's token that clients use
(`kubeconfig.py`)."""
