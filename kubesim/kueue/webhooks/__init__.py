"""Kueue's admission webhooks, one module per kind as upstream has one file per kind, with v0.20's default feature
gates (PartialAdmission, ElasticJobsViaWorkloadSlices, TopologyAwareScheduling, AdmissionGatedBy,
WorkloadValidateResourcesAreNonNegative and WorkloadValidationForPodSetMetadata on; ConcurrentAdmission,
PriorityBoost and RejectUpdatesToCQWithInvalidOnFlavors off).

- `jobframework.py`: what every job kind's webhook shares: default LocalQueue and WorkloadPriorityClass, suspend when
  queued, Kueue's label and annotation rules on create and update.
- `batch_job.py`: batch/v1 Job (vjob.kb.io), with partial admission; `jobset.py`: JobSet (vjobset.kb.io);
  `trainjob.py`: TrainJob (vtrainjob.kb.io); `pytorchjob.py`: PyTorchJob (vpytorchjob.kb.io);
  `raycluster.py`, `rayjob.py`: RayCluster (vraycluster.kb.io), RayJob (vrayjob.kb.io);
  `pod.py`: Pod (vpod.kb.io), the scheduling gate and pod groups; `leaderworkerset.py`: LeaderWorkerSet
  (vleaderworkerset.kb.io). A job
  kind's webhook has its integration's module name (kubesim.kueue.integrations) and runs only while the
  Configuration's integrations.frameworks enables that kind.
- `cluster_queue.py` (vclusterqueue.kb.io), `cohort.py` (vcohort.kb.io), `resource_flavor.py`
  (vresourceflavor.kb.io), `workload.py` (vworkload.kb.io): upstream's pkg/webhooks. The ClusterQueue and
  ResourceFlavor defaulters add the resource-in-use finalizer on create.
- `local_queue.py`: the check upstream leaves to the CRD's rule (no webhook name: it answers as the API server).
- `common.py`: answer types, field.Error message bodies, shared label, annotation and admission-gate rules.
  WorkloadPriorityClass and AdmissionCheck have no webhook upstream: their CRD rules do the work.

A validating webhook answers (field path, message) or (field path, message, StatusCause reason) per problem; the
message is field.Error's body. Schema and CEL validation run first: an object they refuse never reaches these
webhooks, as in kube-apiserver. A refusal answers 403 under the webhook's name (kubesim/CONTRACT.md).
"""

from __future__ import annotations

from kubesim.kernel.protocols import Webhook
from kubesim.kueue.config import KueueConfig
from kubesim.kueue.integrations import enabled_kinds
from kubesim.kueue.integrations.batch_job import FRAMEWORK as BATCH_JOB
from kubesim.kueue.integrations.jobset import FRAMEWORK as JOBSET
from kubesim.kueue.integrations.leaderworkerset import API_VERSION as LWS_API
from kubesim.kueue.integrations.leaderworkerset import FRAMEWORK as LWS
from kubesim.kueue.integrations.pod import FRAMEWORK as POD
from kubesim.kueue.integrations.pytorchjob import FRAMEWORK as PYTORCHJOB
from kubesim.kueue.integrations.raycluster import FRAMEWORK as RAYCLUSTER
from kubesim.kueue.integrations.rayjob import FRAMEWORK as RAYJOB
from kubesim.kueue.integrations.trainjob import FRAMEWORK as TRAINJOB
from kubesim.kueue.webhooks.batch_job import JobWebhook
from kubesim.kueue.webhooks.cluster_queue import ClusterQueueWebhook
from kubesim.kueue.webhooks.cohort import CohortWebhook
from kubesim.kueue.webhooks.jobframework import JobFrameworkWebhook
from kubesim.kueue.webhooks.jobset import JobSetWebhook
from kubesim.kueue.webhooks.leaderworkerset import LeaderWorkerSetWebhook
from kubesim.kueue.webhooks.local_queue import LocalQueueWebhook
from kubesim.kueue.webhooks.pod import PodWebhook
from kubesim.kueue.webhooks.pytorchjob import PyTorchJobWebhook
from kubesim.kueue.webhooks.raycluster import RayClusterWebhook
from kubesim.kueue.webhooks.rayjob import RayJobWebhook
from kubesim.kueue.webhooks.resource_flavor import ResourceFlavorWebhook
from kubesim.kueue.webhooks.trainjob import TrainJobWebhook
from kubesim.kueue.webhooks.workload import WorkloadWebhook

JOB_WEBHOOKS: dict[str, type[JobFrameworkWebhook]] = {
    BATCH_JOB: JobWebhook,
    JOBSET: JobSetWebhook,
    TRAINJOB: TrainJobWebhook,
    PYTORCHJOB: PyTorchJobWebhook,
    RAYCLUSTER: RayClusterWebhook,
    RAYJOB: RayJobWebhook,
}


def kueue_webhooks(config: KueueConfig) -> list[Webhook]:
    """The enabled job integrations' webhooks, then those of Kueue's own kinds (each answers only for its kind)."""
    kinds = enabled_kinds(config.frameworks)
    owners = {(k.api_version, k.kind): k.resource for k in kinds}
    groups: list[Webhook] = []
    if LWS in config.frameworks:
        owners[(LWS_API, "LeaderWorkerSet")] = "leaderworkersets"
        groups.append(LeaderWorkerSetWebhook(owners))
    if POD in config.frameworks or LWS in config.frameworks:
        groups.append(PodWebhook(owners, parent_suspended_only=POD not in config.frameworks))
    return [
        *(JOB_WEBHOOKS[k.framework](owners) for k in kinds),
        *groups,
        ClusterQueueWebhook(),
        CohortWebhook(),
        LocalQueueWebhook(),
        ResourceFlavorWebhook(),
        WorkloadWebhook(),
    ]
