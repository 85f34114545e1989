"""Who is asking and what they may do: bearer tokens and RBAC authorization (`rbac.py`), and the kubeconfig with
the cluster admin's token that clients use (`kubeconfig.py`)."""
