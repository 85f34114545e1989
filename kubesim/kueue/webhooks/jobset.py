"""Kueue's JobSet webhook (upstream pkg/controller/jobs/jobset/jobset_webhook.go), mjobset.kb.io / vjobset.kb.io: on
create the namespace's `default` LocalQueue, the `default` WorkloadPriorityClass and spec.suspend for a JobSet that
names a queue; the jobframework's label and annotation rules on create and update (ValidateJobOnUpdate, then
ValidateJobOnCreate, as upstream orders them). Refusals answer 403 under vjobset.kb.io. TopologyAwareScheduling's
annotation checks are not emulated (kubesim has no TAS)."""

from __future__ import annotations

from kubesim.kueue.webhooks.jobframework import JobFrameworkWebhook


class JobSetWebhook(JobFrameworkWebhook):
    resource = "jobsets"
    name = "vjobset.kb.io"
    gvk = "jobset.x-k8s.io/v1alpha2, Kind=JobSet"
