"""Every Kubernetes permission the portal's processes use, once: deploy/'s ClusterRoles hold exactly these (a test
compares them), `manage.py cluster_check` asks the cluster about each, and the least-privilege test proves a run
uses every one and nothing more.

The worker (Celery tasks: submit, stop, log tails, the Kueue reconcile) writes; the watcher only reads and watches.
"""

from __future__ import annotations

from dataclasses import dataclass

KUEUE = "kueue.x-k8s.io"
VISIBILITY = "visibility.kueue.x-k8s.io"


@dataclass(frozen=True)
class Permission:
    group: str  # "" for core
    resource: str  # "pods/log" for a subresource
    verbs: tuple[str, ...]

    @property
    def pairs(self) -> list[tuple[str, str, str]]:
        """(group, resource, verb) per verb."""
        return [(self.group, self.resource, verb) for verb in self.verbs]


_RECONCILED = ("list", "create", "update", "delete")  # worker.kueue_sync: read what it owns, write what differs

WORKER: tuple[Permission, ...] = (
    Permission("batch", "jobs", ("create", "get", "delete")),  # submit (adopt on retry), stop
    Permission("", "services", ("create", "get")),  # a notebook's or a gang's Service (adopt on retry)
    # credentials and pull secrets (replaced when they exist), a notebook's token; removed when deleted
    Permission("", "secrets", ("create", "get", "update", "delete")),
    Permission("", "services/proxy", ("get",)),  # the idle culler reads a notebook server's /api/status
    Permission("", "pods", ("list",)),  # the log tail finds a workload's pods
    Permission("", "pods/log", ("get",)),
    Permission("", "namespaces", ("get", *_RECONCILED)),  # get: is an existing namespace the portal's?
    *(
        Permission(KUEUE, plural, _RECONCILED)
        for plural in ("resourceflavors", "cohorts", "clusterqueues", "localqueues", "workloadpriorityclasses")
    ),
)

WATCHER: tuple[Permission, ...] = (
    Permission("batch", "jobs", ("list", "watch")),
    *(Permission(KUEUE, plural, ("list", "watch"))
      for plural in ("workloads", "clusterqueues", "localqueues", "cohorts")),
    Permission(VISIBILITY, "localqueues/pendingworkloads", ("get",)),  # queue positions
    Permission("", "nodes", ("list", "watch")),  # how many of a pool's nodes can host a gang's pod
)

COMPONENTS: dict[str, tuple[Permission, ...]] = {"worker": WORKER, "watcher": WATCHER}

# Only with NOTEBOOK_EXPOSE=ingress or httproute: the worker publishes each notebook (deploy/notebook-routes/).
NOTEBOOK_ROUTES: dict[str, tuple[Permission, ...]] = {
    "ingress": (Permission("networking.k8s.io", "ingresses", ("create", "get")),),
    "httproute": (Permission("gateway.networking.k8s.io", "httproutes", ("create", "get")),),
}
