"""Kueue's TrainJob webhook (upstream pkg/controller/jobs/trainjob/trainjob_webhook.go), mtrainjob.kb.io /
vtrainjob.kb.io: on create the jobframework's defaults (spec.suspend for a TrainJob that names a queue), and Kueue's
own runtimePatch (manager kueue.x-k8s.io/manager, empty until admission) appended to every TrainJob; the
jobframework's label and annotation rules on create and update. Refusals answer 403 under vtrainjob.kb.io.
TopologyAwareScheduling's checks are not emulated (kubesim has no TAS)."""

from __future__ import annotations

from kubesim.kueue.integrations.trainjob import kueue_patch
from kubesim.kueue.webhooks.jobframework import JobFrameworkWebhook


class TrainJobWebhook(JobFrameworkWebhook):
    resource = "trainjobs"
    name = "vtrainjob.kb.io"
    gvk = "trainer.kubeflow.org/v1alpha1, Kind=TrainJob"

    def apply_defaults(self, obj: dict, store) -> None:
        super().apply_defaults(obj, store)
        kueue_patch(obj)
