"""Kueue's RayCluster webhook (upstream pkg/controller/jobs/raycluster/raycluster_webhook.go), mraycluster.kb.io /
vraycluster.kb.io: the jobframework's defaults on create; for a managed cluster (one that names a queue) no in-tree
autoscaling unless it is an elastic job, at most 17 worker groups (18 pod sets with the head) and no worker group
named `head`; the jobframework's label and annotation rules. Updates are judged only while the cluster is or was
managed (ValidateRayAndSparkJobUpdates, on in v0.20). Refusals answer 403 under vraycluster.kb.io. The elastic-job
scheduling gate and TopologyAwareScheduling's annotation checks are not emulated."""

from __future__ import annotations

from kubesim.kueue import constants as C
from kubesim.kueue.webhooks.common import ELASTIC_JOB, Errors, as_dict, as_list, forbidden, invalid
from kubesim.kueue.webhooks.jobframework import JobFrameworkWebhook, meta

MAX_WORKER_GROUPS = 17  # Kueue's 18 pod sets, less the head
HEAD = "head"


def too_many(path: str, count: int, limit: int) -> tuple[str, str, str]:
    """field.TooMany's error."""
    return (path, f"Too many: {count}: must have at most {limit} items", "FieldValueTooMany")


def cluster_spec_errors(spec: dict, path: str) -> Errors:
    """The worker-group rules a managed RayCluster, or a managed RayJob's cluster, must meet."""
    errors: Errors = []
    groups = as_list(spec.get("workerGroupSpecs"))
    if len(groups) > MAX_WORKER_GROUPS:
        errors.append(too_many(f"{path}.workerGroupSpecs", len(groups), MAX_WORKER_GROUPS))
    for i, group in enumerate(groups):
        if as_dict(group).get("groupName") == HEAD:
            errors.append(
                forbidden(f"{path}.workerGroupSpecs[{i}].groupName", f'"{HEAD}" is reserved for the head group')
            )
    return errors


def managed(obj: dict | None) -> bool:
    return obj is not None and bool(meta(obj, "labels").get(C.QUEUE_NAME_LABEL))


class RayClusterWebhook(JobFrameworkWebhook):
    resource = "rayclusters"
    name = "vraycluster.kb.io"
    gvk = "ray.io/v1, Kind=RayCluster"
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
        errors: Errors = []
        if spec.get("enableInTreeAutoscaling") is True and meta(obj, "annotations").get(ELASTIC_JOB) != "true":
            errors.append(
                invalid(
                    "spec.enableInTreeAutoscaling",
                    True,
                    f"a kueue-managed RayCluster can use autoscaling only as an elastic job: {ELASTIC_JOB}=true",
                )
            )
        return errors + cluster_spec_errors(spec, "spec")
