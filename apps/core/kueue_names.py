"""Every name and label the portal gives a Kubernetes object, in one place.

The organisation -> Kueue contract (docs/architecture.md, The organisation in Kueue): per node pool a root cohort
`<root prefix><pool>`, per department a cohort `<department prefix><department>-<pool>`, per project a cohort
`<project prefix><project>-<pool>` with two ClusterQueues `...-guaranteed` and `...-elastic`; each project namespace
`<project prefix><project>` holds the LocalQueues `guaranteed-<pool>` and `elastic-<pool>`; a workload's Job is
`wl-<id>`. The prefixes are configurable per installation (settings.KUEUE_*_PREFIX) and `names()` honours them; nothing
else builds these strings. Pure: no ORM, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpu-portal"
POOL_LABEL = "portal.gpu/pool"
DEPARTMENT_LABEL = "portal.gpu/department"
PROJECT_LABEL = "portal.gpu/project"
# Who and what a workload's Job is: for selectors, audits and the GPU-hour ledger.
WORKLOAD_ID_LABEL = "portal.gpu/workload-id"
OWNER_ID_LABEL = "portal.gpu/owner-id"
KIND_LABEL = "portal.gpu/kind"
MODEL_LABEL = "portal.gpu/model"
DATA_CLASS_LABEL = "portal.gpu/data-class"
OWNER_ANNOTATION = "portal.gpu/owner"
NAME_ANNOTATION = "portal.gpu/name"
# The request that submitted the work (apps/core/request_ids.py), to find its log lines from the Job.
REQUEST_ID_ANNOTATION = "portal.gpu/request-id"
# KAI Scheduler's scheduling-shard label: a KAI pool's Queues carry it with the pool's slug, so the shard that
# schedules the pool's nodes (labelled the same) takes them (README, Kueue and KAI in one cluster).
KAI_NODE_POOL_LABEL = "kai.scheduler/node-pool"
# What KAI Scheduler reads on the portal's work on a KAI pool (README, Kueue and KAI in one cluster): the scheduler a
# pod names, its leaf Queue, whether it may be preempted and its priority class (labels, read on the top owner before
# the pod), the PodGroup it belongs to and the share of one GPU it asks for (annotations), and the PodGroup's own API
# version.
KAI_SCHEDULER_NAME = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
KAI_PRIORITY_CLASS_LABEL = "priorityClassName"
KAI_PREEMPTIBLE = "preemptible"
KAI_NON_PREEMPTIBLE = "non-preemptible"
KAI_POD_GROUP_ANNOTATION = "pod-group-name"
KAI_GPU_FRACTION_ANNOTATION = "gpu-fraction"
KAI_POD_GROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
# Kueue's own labels: the LocalQueue a Job goes to, its WorkloadPriorityClass and its maximum execution time.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
# The label Kueue puts on a Workload naming the Job it stands for.
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
# The label Kueue writes into the pod templates of the work it starts: the pod set the pods belong to.
PODSET_LABEL = "kueue.x-k8s.io/podset"
# Kueue's pod groups: the group's label on its pods, and the annotation on the group's Workload.
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
# Who submitted work from outside the portal (docs/architecture.md, Work submitted outside the portal): the portal
# username a pipeline writes on its object, and the Kubernetes user the cluster stamps at admission
# (deploy/admission/submitted-by.yaml); either matched to a portal user by username.
PORTAL_USER_LABEL = "portal.gpu/user"
SUBMITTED_BY_ANNOTATION = "portal.gpu/submitted-by"

GUARANTEED = "guaranteed"
ELASTIC = "elastic"
JOB_PREFIX = "wl-"


def queue_kind(*, guaranteed: bool) -> str:
    """Non-preemptible work goes to the guaranteed queues, preemptible work to the elastic ones."""
    return GUARANTEED if guaranteed else ELASTIC


def local_queue(pool: str, *, guaranteed: bool) -> str:
    return f"{queue_kind(guaranteed=guaranteed)}-{pool}"


def job_name(workload_id: int) -> str:
    """Deterministic, so a retried create that answers 409 is the same Job, never a duplicate."""
    return f"{JOB_PREFIX}{workload_id}"


@dataclass(frozen=True)
class KueueNames:
    """The installation's name prefixes and the names built from them."""

    root_cohort_prefix: str = "portal-"
    department_cohort_prefix: str = "dept-"
    project_prefix: str = "proj-"

    def root_cohort(self, pool: str) -> str:
        return f"{self.root_cohort_prefix}{pool}"

    def department_cohort(self, department: str, pool: str) -> str:
        return f"{self.department_cohort_prefix}{department}-{pool}"

    def project_cohort(self, project: str, pool: str) -> str:
        return f"{self.project_prefix}{project}-{pool}"

    def cluster_queue(self, project: str, pool: str, *, guaranteed: bool) -> str:
        return f"{self.project_cohort(project, pool)}-{queue_kind(guaranteed=guaranteed)}"

    def project_namespace(self, project: str) -> str:
        return f"{self.project_prefix}{project}"

    # KAI Scheduler's Queues on a KAI pool (worker/kai_objects.py) take the names the Kueue cohorts would have: a
    # different kind, so nothing collides, and a pool moved between schedulers keeps recognisable names.
    def kai_department_queue(self, department: str, pool: str) -> str:
        return self.department_cohort(department, pool)

    def kai_project_queue(self, project: str, pool: str) -> str:
        return self.project_cohort(project, pool)


def names() -> KueueNames:
    """The names under this installation's configured prefixes."""
    return KueueNames(
        root_cohort_prefix=settings.KUEUE_ROOT_COHORT_PREFIX,
        department_cohort_prefix=settings.KUEUE_DEPARTMENT_COHORT_PREFIX,
        project_prefix=settings.KUEUE_PROJECT_PREFIX,
    )
