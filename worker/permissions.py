"""Every Kubernetes permission the portal's processes use, once: deploy/'s ClusterRoles hold exactly these (a test
compares them), `manage.py cluster_check` asks the cluster about each, and the least-privilege test proves a run
uses every one and nothing more.

The worker (Celery tasks: submit, stop, log tails, the Kueue reconcile) writes; the watcher only reads and watches.
With leader election (worker/leader.py) the watcher and beat also hold a Role each in the portal's own namespace:
create their Lease, then get and update only that one (`NAMESPACED`).
Work submitted outside the portal (docs/architecture.md, Work submitted outside the portal) adds, per kind Kueue
integrates (`OWNER_KINDS`): the watcher's list and watch of the objects Workloads belong to (who submitted them),
and the worker's delete of one (a stop). A cluster without a kind's CRD answers 404 for it: "not installed", never
an error.
"""

from __future__ import annotations

from dataclasses import dataclass

from .leader import LEASES
from .outside_work import OWNER_KINDS

KUEUE = "kueue.x-k8s.io"
KAI = "scheduling.run.ai"  # KAI Scheduler's Queues, for the pools it schedules (worker/kai_objects.py)
VISIBILITY = "visibility.kueue.x-k8s.io"
SCHEDULING = "scheduling.k8s.io"  # PriorityClasses, which KAI Scheduler reads for the pools it schedules
COORDINATION = "coordination.k8s.io"


@dataclass(frozen=True)
class Permission:
    group: str  # "" for core
    resource: str  # "pods/log" for a subresource
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()  # resourceNames: only these objects (never for create: no name is known then)

    @property
    def pairs(self) -> list[tuple[str, str, str]]:
        """(group, resource, verb) per verb."""
        return [(self.group, self.resource, verb) for verb in self.verbs]


_RECONCILED = ("list", "create", "update", "delete")  # worker.kueue_sync: read what it owns, write what differs
# The watcher keeps who submitted each outside Workload's owner: a list and a watch per kind of the objects Kueue
# queues, and a list by name for an owner the watch has not delivered.
OWNER_READ = ("list", "watch")
OWNER_STOP = ("delete",)  # the worker stops outside work by deleting its owner (foreground)
# A pod group's owners are its pods: one delete of the group's label selector stops them all.
POD_GROUP_STOP = ("deletecollection",)
# The owner kinds that also appear above with verbs of their own: their owner verbs are merged into those lines.
_OWN_LINES = {("batch", "jobs"), ("", "pods"), ("leaderworkerset.x-k8s.io", "leaderworkersets")}


def _owner_kinds(verbs: tuple[str, ...]) -> tuple[Permission, ...]:
    """One line per owner kind not already listed for the portal's own use."""
    return tuple(Permission(group, owner.plural, verbs) for (group, _), owner in OWNER_KINDS.items()
                 if (group, owner.plural) not in _OWN_LINES)


WORKER: tuple[Permission, ...] = (
    Permission("batch", "jobs", ("create", "get", "delete")),  # submit (adopt on retry), stop (outside Jobs too)
    # an inference service's Deployment: created (adopted on retry), patched to scale or roll, deleted at its stop
    Permission("apps", "deployments", ("create", "get", "patch", "delete")),
    # a multi-node inference service's LeaderWorkerSet, the same way; delete stops outside work owned by one too
    Permission("leaderworkerset.x-k8s.io", "leaderworkersets", ("create", "get", "patch", *OWNER_STOP)),
    # a notebook's, a gang's or an inference service's Service (adopt on retry); the cluster's garbage collector
    # deletes an inference service's with the Deployment that owns it
    Permission("", "services", ("create", "get")),
    # credentials and pull secrets (replaced when they exist), a notebook's token; removed when deleted
    Permission("", "secrets", ("create", "get", "update", "delete")),
    Permission("", "services/proxy", ("get",)),  # the idle culler reads a notebook server's /api/status
    # the log tail finds a workload's pods; a stop of outside work deletes a plain pod, or a pod group's pods; a gang
    # on a KAI pool is ownerless pods the worker creates (adopted on retry, made again after an eviction), deletes by
    # its labels at the stop, and deletes one by one when they outlive the gang's end
    Permission("", "pods", ("create", "get", "list", *OWNER_STOP, *POD_GROUP_STOP)),
    Permission("", "pods/log", ("get",)),
    Permission("", "namespaces", ("get", *_RECONCILED)),  # get: is an existing namespace the portal's?
    *(
        Permission(KUEUE, plural, _RECONCILED)
        for plural in ("resourceflavors", "cohorts", "clusterqueues", "localqueues", "workloadpriorityclasses")
    ),
    Permission(KAI, "queues", _RECONCILED),
    # the organisation's priority classes as PriorityClasses while a pool is KAI's, reconciled like its Queues
    Permission(SCHEDULING, "priorityclasses", _RECONCILED),
    # the PodGroup of a gang on a KAI pool, created before its pods (adopted on retry), deleted at its stop
    Permission(KAI, "podgroups", ("create", "get", "delete")),
    *_owner_kinds(OWNER_STOP),
)

WATCHER: tuple[Permission, ...] = (
    Permission("batch", "jobs", OWNER_READ),
    *(Permission(KUEUE, plural, ("list", "watch"))
      for plural in ("workloads", "clusterqueues", "localqueues", "cohorts")),
    Permission(VISIBILITY, "localqueues/pendingworkloads", ("get",)),  # queue positions
    Permission("", "nodes", ("list", "watch")),  # how many of a pool's nodes can host a gang's pod
    Permission("apps", "deployments", ("list", "watch")),  # inference services: followed by their own status
    # multi-node inference services, the same way; also the owners of outside Workloads (who submitted them)
    Permission("leaderworkerset.x-k8s.io", "leaderworkersets", OWNER_READ),
    # the Events of the workloads' pods, Jobs and Workloads, kept for their pages
    Permission("", "events", ("list", "watch")),
    # a plain pod or a pod group member owning an outside Workload; list: GPU pods that run outside the queue
    Permission("", "pods", OWNER_READ),
    *_owner_kinds(OWNER_READ),
    # portal work on KAI pools: followed through its PodGroups (and its pods, above); what it holds, from its Queues
    Permission(KAI, "podgroups", ("list", "watch")),
    Permission(KAI, "queues", ("list", "watch")),
    # PyTorch runs as a TrainJob only on a ClusterTrainingRuntime for torch: each resync looks for one
    Permission("trainer.kubeflow.org", "clustertrainingruntimes", ("list",)),
)

COMPONENTS: dict[str, tuple[Permission, ...]] = {"worker": WORKER, "watcher": WATCHER}


def _lease(name: str) -> tuple[Permission, ...]:
    return (Permission(COORDINATION, "leases", ("create",)),  # the first candidate ever creates it
            Permission(COORDINATION, "leases", ("get", "update"), (name,)))  # campaign, renew, release


# Leader election, in the portal's namespace only (a Role and RoleBinding per process kind).
NAMESPACED: dict[str, tuple[Permission, ...]] = {process: _lease(name) for process, name in LEASES.items()}

# Only with NOTEBOOK_EXPOSE or INFERENCE_EXPOSE ingress or httproute: the worker publishes each notebook or inference
# service (deploy/notebook-routes/); a route goes with its owner (ownerReferences), so nothing deletes one.
NOTEBOOK_ROUTES: dict[str, tuple[Permission, ...]] = {
    "ingress": (Permission("networking.k8s.io", "ingresses", ("create", "get")),),
    "httproute": (Permission("gateway.networking.k8s.io", "httproutes", ("create", "get")),),
}
