"""Labels the portal puts on every Kubernetes object it owns; shared by the worker and the cluster mirror."""

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpu-portal"
POOL_LABEL = "portal.gpu/pool"
DEPARTMENT_LABEL = "portal.gpu/department"
PROJECT_LABEL = "portal.gpu/project"
