"""Kueue's condition vocabulary as the portal reads it: condition types, their reasons, admission check states and
the message fragments the portal recognises, each spelled once. Pure constants.

Kueue writes these on its objects (a Workload's `status.conditions` and `status.admissionChecks`, a queue's Active
condition); the watcher turns them into the portal's statuses (`worker/status_map.py`), the mirror keeps them
(`Workload.kueue_conditions`, `status_reason`, the queue rows' `active_reason`), and "why am I waiting"
(`apps/workloads/explain`) reads them back. The few Kubernetes conditions the portal reads next to them (a Job's
Complete and Failed, a Node's Ready) are here too. kubesim has its own copy (`kubesim/kueue/constants.py`): it
emulates Kueue and knows nothing of the portal.
"""

from __future__ import annotations

import re

TRUE = "True"  # a condition's status when it holds

# --- Workload condition types ---------------------------------------------------------------------------------
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
PODS_READY = "PodsReady"
FINISHED = "Finished"

# --- QuotaReserved=False reasons: why a workload waits -------------------------------------------------------------
PENDING = "Pending"  # what the portal records when Kueue gives no reason
WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"  # it preempted others and waits for them to go
MISCONFIGURED = "Misconfigured"
SUSPENDED = "Suspended"  # its LocalQueue or ClusterQueue is held
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
# Kueue will never admit the workload as submitted: the portal records it as rejected.
NEVER_ADMITTABLE = frozenset({NO_MATCHING_FLAVOR, EXCEEDS_MAX_QUOTA})

# --- Evicted reasons -------------------------------------------------------------------------------------------
EVICTED_BY_PREEMPTION = "Preempted"
PODS_READY_TIMEOUT = "PodsReadyTimeout"  # a gang's pods were not all ready in time (also a Requeued reason)
DEACTIVATED = "Deactivated"  # spec.active false; also the prefix of Kueue's "DeactivatedDueTo..." reasons
# Kueue stopped the workload at its maximum execution time (the max-exec-time label the portal sets from the
# workload's runtime limit, itself capped by the policy): the Evicted reason names the cause after "DueTo".
MAXIMUM_EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"
DEACTIVATED_AT_RUNTIME_LIMIT = f"{DEACTIVATED}DueTo{MAXIMUM_EXECUTION_TIME_EXCEEDED}"
LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"

# --- Preempted reasons -----------------------------------------------------------------------------------------
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

# --- Finished reasons ------------------------------------------------------------------------------------------
SUCCEEDED = "Succeeded"

# --- Admission check states (status.admissionChecks[].state) ----------------------------------------------------
CHECK_READY = "Ready"

# --- ClusterQueue and LocalQueue condition type and reasons ------------------------------------------------------
ACTIVE = "Active"
STOPPED = "Stopped"  # Active=False: an admin holds the queue (stopPolicy)
# Why a queue is held or a workload waits on a held queue: the queue is on hold, not broken.
STOPPED_REASONS = frozenset({STOPPED, LOCAL_QUEUE_STOPPED, CLUSTER_QUEUE_STOPPED, SUSPENDED})

# --- Kubernetes' own conditions the portal reads --------------------------------------------------------------------
JOB_COMPLETE = "Complete"  # batch/v1 Job
JOB_FAILED = "Failed"  # batch/v1 Job
NODE_READY = "Ready"

# --- Reasons the watcher records for states Kueue gives no reason of its own --------------------------------------
RUNNING = "Running"
JOB_DELETED = "JobDeleted"  # the Job is being deleted before it finished
UNSATISFIED_ADMISSION_CHECKS = "UnsatisfiedAdmissionChecks"  # quota reserved, admission checks not all Ready yet

# --- Kueue's messages the portal reads ---------------------------------------------------------------------------
# A Preempted condition's message names the preemptor: "... (UID: <workload uid>, JobUID: <job uid>) due to <why>".
PREEMPTOR = re.compile(r"\(UID: (?P<uid>[^,]*), JobUID: (?P<job_uid>[^)]*)\) due to (?P<why>[^;]*)")
# ... and, since Kueue 0.13, its place in the cohort tree: "; preemptor path: /<root cohort>/.../<cluster queue>".
PREEMPTOR_PATH = re.compile(r"; preemptor path: [^;]*")
# A waiting workload's message says how many units it lacks, per resource.
MORE_NEEDED = re.compile(r"(\d+(?:\.\d+)?) more needed")
# Kueue >= 0.20 keeps a workload whose preemption targets another workload of the same cycle already took waiting
# with this message (and WaitingForPreemptedWorkloads): it fits once those preemptions complete, preempting none.
OVERLAPPING_TARGETS = "overlapping preemption targets with another workload"
# A provisioning admission check's message while the capacity it asked for is being brought up.
WAITING_FOR_PROVISIONING = "Waiting for ProvisioningRequest"
