"""The names KAI Scheduler (v0.20.1) gives what it reads and writes: its scheduler name, labels and annotations, its
priority classes, and the reasons of a PodGroup's scheduling conditions."""

from __future__ import annotations

SCHEDULER_NAME = "kai-scheduler"  # a pod's spec.schedulerName
QUEUE_LABEL = "kai.scheduler/queue"  # a pod's (or workload's) leaf queue
NODE_POOL_LABEL = "kai.scheduler/node-pool"  # a node's, Queue's, PodGroup's or pod's pool (KAI's shard partition)
DEFAULT_NODE_POOL = "default"  # the pool of whatever carries no NODE_POOL_LABEL
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"  # preemptible | non-preemptible
POD_GROUP_ANNOTATION = "pod-group-name"  # the PodGroup a pod belongs to
PRIORITY_CLASS_LABEL = "priorityClassName"  # a workload's (or pod's) priority class, read before the pod's own
DEFAULT_QUEUE = "default-queue"  # the queue of a PodGroup whose pod and owner name none
DEFAULT_PRIORITY_CLASS = "train"  # the priority class of a PodGroup whose class does not exist
GPU_FRACTION_ANNOTATION = "gpu-fraction"  # the share of one device a pod asks for ("0.5")
GPU_GROUP_LABEL = "runai-gpu-group"  # the shared device a fractional pod was placed on
GPU_SHARING_LABEL = "kubesim.io/kai-gpu-sharing"
"""kubesim's own node label ("true"): the node's pool shares GPUs between fractional pods. KAI turns sharing on for
the whole installation (global.gpuSharing); kubesim lets a cluster have fraction pools and whole-card pools."""
GPU = "nvidia.com/gpu"

PREEMPTIBLE = "preemptible"
NON_PREEMPTIBLE = "non-preemptible"
NON_PREEMPTIBLE_PRIORITY = 100  # at or above it a workload is non-preemptible unless it says otherwise
DEFAULT_QUEUE_PRIORITY = 100
DEFAULT_POD_GROUP_PRIORITY = 50
PRIORITY_CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
"""The priority classes KAI's installation creates, by name."""

UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"
UNSCHEDULABLE = "Unschedulable"
NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"
OVER_LIMIT = "OverLimit"
QUEUE_DOES_NOT_EXIST = "QueueDoesNotExist"
