"""Kueue's RayJob webhook (upstream pkg/controller/jobs/rayjob/rayjob_webhook.go), mrayjob.kb.io / vrayjob.kb.io: the
jobframework's defaults on create; for a managed RayJob (one that names a queue) either an existing cluster
(clusterSelector) or its own (rayClusterSpec), never both; its own cluster deleted when it finishes
(shutdownAfterJobFinishes); no in-tree autoscaling unless it is an elastic job; the cluster's worker-group rules
(kubesim.kueue.webhooks.raycluster); the jobframework's label and annotation rules. Updates are judged only while the
RayJob is or was managed (ValidateRayAndSparkJobUpdates, on in v0.20). Refusals answer 403 under vrayjob.kb.io."""

from __future__ import annotations

from kubesim.kueue.webhooks.common import ELASTIC_JOB, Errors, as_dict, forbidden, invalid
from kubesim.kueue.webhooks.jobframework import JobFrameworkWebhook, meta
from kubesim.kueue.webhooks.raycluster import cluster_spec_errors, managed


class RayJobWebhook(JobFrameworkWebhook):
    resource = "rayjobs"
    name = "vrayjob.kb.io"
    gvk = "ray.io/v1, Kind=RayJob"
    elastic_supported = True

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource != self.resource:
            return []
        if operation == "CREATE" or old is None:
            return self.managed_errors(obj) + self.on_create(obj)
        if not managed(obj) and not managed(old):
            return []
        return self.on_update(old, obj, store) + self.managed_errors(obj) + self.on_create(obj)

    def managed_errors(self, obj: dict) -> Errors:
        if not managed(obj):
            return []
        spec = as_dict(obj.get("spec"))
        cluster_spec = spec.get("rayClusterSpec")
        errors: Errors = []
        if spec.get("clusterSelector") and cluster_spec is not None:
            errors.append(forbidden("spec.clusterSelector", "a kueue managed job should not use an existing cluster"))
        if not spec.get("clusterSelector") and cluster_spec is None:
            errors.append(
                forbidden(
                    "spec.rayClusterSpec",
                    "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector",
                )
            )
        if cluster_spec is None:
            return errors
        if spec.get("shutdownAfterJobFinishes") is not True:
            errors.append(
                invalid(
                    "spec.shutdownAfterJobFinishes",
                    spec.get("shutdownAfterJobFinishes", False),
                    "a kueue managed job should delete the cluster after finishing",
                )
            )
        cluster = as_dict(cluster_spec)
        if cluster.get("enableInTreeAutoscaling") is True and meta(obj, "annotations").get(ELASTIC_JOB) != "true":
            errors.append(
                invalid(
                    "spec.rayClusterSpec.enableInTreeAutoscaling",
                    True,
                    "a kueue managed job should only use autoscaling when workload slicing is enabled",
                )
            )
        return errors + cluster_spec_errors(cluster, "spec.rayClusterSpec")
