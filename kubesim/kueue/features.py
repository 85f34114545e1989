"""Kueue's feature gates as kubesim knows them: the Configuration's `featureGates` (Kueue also takes them as its
`--feature-gates` flag), v0.20's defaults, and which ones kubesim honours when they are switched.

kubesim emulates Kueue with every gate at its v0.20 default. A gate kubesim honours can be switched in the
configuration (`featureGates: {PrioritizePreemptorWorkloads: true}`); naming an unknown gate is refused, as Kueue
refuses it, and so is switching a gate whose other setting kubesim does not emulate (the refusal says so) rather
than running with a setting it would silently ignore.
"""

from __future__ import annotations

from collections.abc import Mapping

# Kueue v0.20's feature gates and their defaults (pkg/features/kube_features.go, the latest entry of each gate).
DEFAULTS: dict[str, bool] = {
    "AdmissionFairSharing": True,
    "AdmissionGatedBy": True,
    "AssignQueueLabelsForPods": True,
    "CleanupProvisioningRequestsOnEviction": True,
    "ConcurrentAdmission": False,
    "CustomMetricLabels": False,
    "DeferRayServiceFinalizationForRedisCleanup": True,
    "DisableWaitForPodsReady": False,
    "ElasticJobsViaWorkloadSlices": True,
    "ElasticJobsViaWorkloadSlicesWithTAS": False,
    "FailureRecoveryPolicy": False,
    "FairSharingPreemptWithinNominal": True,
    "FairSharingPrioritizeNonBorrowing": True,
    "FastQuotaReleaseInPodIntegration": False,
    "FinishOrphanedWorkloads": True,
    "FlavorFungibility": True,
    "FlavorFungibilityPreserveScanProgress": True,
    "KueueDRAIntegration": True,
    "KueueDRAIntegrationConsumableCapacity": False,
    "KueueDRAIntegrationExtendedResource": True,
    "KueueDRAIntegrationPartitionableDevices": True,
    "KueueDRARejectWorkloadsWhenDRADisabled": True,
    "LWSImmutableGroupSize": True,
    "LocalQueueMetrics": True,
    "ManagedJobsNamespaceSelectorAlwaysRespected": True,
    "MetricForWorkloadCreationLatency": True,
    "MetricsForCohorts": True,
    "MultiKueue": True,
    "MultiKueueAdaptersForCustomJobs": True,
    "MultiKueueClusterProfile": False,
    "MultiKueueIncrementalDispatcherConfig": True,
    "MultiKueueIncrementalDispatcherRespectConfigOrder": True,
    "MultiKueueKubeConfigPathValidation": True,
    "MultiKueueManagerQuotaAutomation": False,
    "MultiKueueOrchestratedPreemption": False,
    "MultiKueueRemoteSpecSync": True,
    "PartialAdmission": True,
    "PodIntegrationValidateGroupOwner": True,
    "PrioritizePreemptorWorkloads": False,
    "PriorityBoost": False,
    "PrioritySortingWithinCohort": True,
    "QuotaCheckStrategy": True,
    "ReclaimablePods": True,
    "RecomputeAssignmentUponPreemptionTargetsOverlap": True,
    "RejectUpdatesToCQWithInvalidOnFlavors": False,
    "RemoveFinalizersWithStrictPatch": True,
    "SchedulerLibraryIntegration": False,
    "SchedulingEquivalenceHashing": True,
    "ShortWorkloadNames": False,
    "SkipAncestorCheckForDeletedWorkloads": True,
    "SkipReassignmentForPodOwnedWorkloads": True,
    "SparkApplicationIntegration": False,
    "TASAssignmentsEncodingByHostnamePrefix": True,
    "TASBalancedPlacement": False,
    "TASCacheNodeMatchResults": True,
    "TASCacheTopologyTree": True,
    "TASCachingRemainingResources": True,
    "TASFailedNodeReplacement": True,
    "TASFailedNodeReplacementFailFast": True,
    "TASHandleOverlappingFlavors": True,
    "TASMultiLayerTopology": True,
    "TASProfileMixed": True,
    "TASRecomputeAssignmentWithinSchedulingCycle": True,
    "TASReplaceNodeDueToNotReadyOverFixedTime": False,
    "TASReplaceNodeOnNodeTaints": True,
    "TASReplaceNodeOnPodTermination": True,
    "TASRespectNodeAffinityPreferred": False,
    "TASValidateWorkloadSliceSize": True,
    "TLSOptions": True,
    "TopologyAwareScheduling": True,
    "UnadmittedWorkloadsExplicitStatus": False,
    "UnadmittedWorkloadsObservability": True,
    "ValidateRayAndSparkJobUpdates": True,
    "VectorizedResourceRequests": True,
    "VisibilityOnDemand": True,
    "WorkloadIdentifierAnnotations": True,
    "WorkloadPriorityClassDefaulting": True,
    "WorkloadRequestUseMergePatch": False,
    "WorkloadValidateResourcesAreNonNegative": True,
    "WorkloadValidationForPodSetMetadata": True,
}

PRIORITIZE_PREEMPTOR_WORKLOADS = "PrioritizePreemptorWorkloads"
ADMISSION_FAIR_SHARING = "AdmissionFairSharing"  # off: the admissionFairSharing configuration is ignored
CLEANUP_PROVISIONING_REQUESTS_ON_EVICTION = "CleanupProvisioningRequestsOnEviction"  # off: an eviction keeps them

# Gates whose non-default setting kubesim emulates.
HONOURED = frozenset(
    {PRIORITIZE_PREEMPTOR_WORKLOADS, ADMISSION_FAIR_SHARING, CLEANUP_PROVISIONING_REQUESTS_ON_EVICTION}
)


def parse_feature_gates(value: object) -> dict[str, bool]:
    """The Configuration's featureGates (a map of gate name to bool): the switched gates kubesim honours."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError("featureGates: a map of feature gate names to booleans")
    gates: dict[str, bool] = {}
    for name, enabled in value.items():
        if name not in DEFAULTS:
            raise ValueError(f"featureGates: unrecognized feature gate: {name}")
        if not isinstance(enabled, bool):
            raise ValueError(f"featureGates.{name}: want a boolean, got {enabled!r}")
        if enabled != DEFAULTS[name] and name not in HONOURED:
            raise ValueError(
                f"featureGates.{name}={str(enabled).lower()}: kubesim emulates this gate at Kueue v0.20's default "
                f"({str(DEFAULTS[name]).lower()}) only"
            )
        gates[name] = enabled
    return gates
