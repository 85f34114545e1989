"""Names Kueue uses on the wire: labels, finalizers, condition types, reasons."""

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
PODSET_LABEL = "kueue.x-k8s.io/podset"
CONTROLLER_NAME = "kueue-admission"
# Configuration.managedJobsNamespaceSelector's default: every namespace but these.
UNMANAGED_NAMESPACES = frozenset({"kube-system", "kueue-system"})
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"  # AdmissionCheck controllerName kubesim serves
CONSUME_PROVISIONING_REQUEST = "autoscaling.x-k8s.io/consume-provisioning-request"

# Workload condition types
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
PODS_READY = "PodsReady"
FINISHED = "Finished"
DEACTIVATION_TARGET = "DeactivationTarget"

# QuotaReserved=False reasons (UnadmittedWorkloadsObservability, on since 0.19)
REASON_PENDING_EVALUATION = "PendingEvaluation"
REASON_WAITING_FOR_QUOTA = "WaitingForQuota"
REASON_NO_MATCHING_FLAVOR = "NoMatchingFlavor"
REASON_EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
REASON_WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
REASON_MISCONFIGURED = "Misconfigured"
REASON_SUSPENDED = "Suspended"
REASON_WAITING_FOR_PODS_READY = "WaitingForPodsReady"  # waitForPodsReady.blockAdmission holds the next admission

# Admission check states (Workload status.admissionChecks[].state)
CHECK_PENDING = "Pending"
CHECK_READY = "Ready"
CHECK_RETRY = "Retry"
CHECK_REJECTED = "Rejected"

# Evicted reasons
EVICTED_PREEMPTED = "Preempted"
EVICTED_PODS_READY_TIMEOUT = "PodsReadyTimeout"
EVICTED_DEACTIVATED = "Deactivated"
EVICTED_CQ_STOPPED = "ClusterQueueStopped"
EVICTED_LQ_STOPPED = "LocalQueueStopped"
EVICTED_ADMISSION_CHECK = "AdmissionCheck"

# Preempted reasons
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
HUMAN_PREEMPTION_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}

# Preemption policies and queueing strategies
NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
ANY = "Any"
BEST_EFFORT_FIFO = "BestEffortFIFO"
STRICT_FIFO = "StrictFIFO"

# ClusterQueue Active condition reasons
CQ_REASON_READY = "Ready"
CQ_REASON_STOPPED = "Stopped"
CQ_REASON_FLAVOR_NOT_FOUND = "FlavorNotFound"
CQ_REASON_CHECK_NOT_FOUND = "AdmissionCheckNotFound"
CQ_REASON_CHECK_INACTIVE = "AdmissionCheckInactive"

# Fair sharing preemption strategies
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
