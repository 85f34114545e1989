"""Kueue's LeaderWorkerSet webhook (upstream pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook.go),
mleaderworkerset.kb.io / vleaderworkerset.kb.io.

On create and update: the namespace's `default` LocalQueue and the `default` WorkloadPriorityClass (create only), and
for a managed LWS (one that names a queue) the queue-name and priority-class labels copied into the leader and worker
pod templates, which are annotated `kueue.x-k8s.io/pod-suspending-parent` (so the pod webhook gates their pods for
it) and `kueue.x-k8s.io/pod-group-serving: "true"`. The LWS itself is never suspended. Validation: the queue name an
object name and, while managed, the group size fixed (LWSImmutableGroupSize, on in
v0.20); the queue name and priority class change only while no group is ready (status.readyReplicas is 0). Kueue's
replicas range (0..1,000,000) is the CRD schema's too, which refuses first."""

from __future__ import annotations

from kubesim.kueue import constants as C
from kubesim.kueue.integrations import leaderworkerset as L
from kubesim.kueue.integrations import pod as P
from kubesim.kueue.webhooks.common import IMMUTABLE, Errors, as_dict, invalid
from kubesim.kueue.webhooks.jobframework import JobFrameworkWebhook, meta

SIZE_PATH = "spec.leaderWorkerTemplate.size"


class LeaderWorkerSetWebhook(JobFrameworkWebhook):
    resource = "leaderworkersets"
    name = "vleaderworkerset.kb.io"
    gvk = L.GVK

    def suspended(self, obj: dict) -> bool:
        """'Suspended' for Kueue's update rules: no group is ready."""
        return not int(as_dict(obj.get("status")).get("readyReplicas") or 0)

    def suspend(self, obj: dict) -> None:
        """A LeaderWorkerSet is not suspended: its pods are gated."""

    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        if resource != self.resource:
            return obj
        if operation == "CREATE":
            self.apply_defaults(obj, store)
        labels = meta(obj, "labels")
        if not labels.get(C.QUEUE_NAME_LABEL):
            return obj
        template = obj.setdefault("spec", {}).setdefault("leaderWorkerTemplate", {})
        for key in ("leaderTemplate", "workerTemplate"):
            if key == "leaderTemplate" and not template.get(key):
                continue
            md = template.setdefault(key, {}).setdefault("metadata", {})
            copied = {k: labels[k] for k in (C.QUEUE_NAME_LABEL, C.PRIORITY_CLASS_LABEL) if labels.get(k)}
            md["labels"] = {**(md.get("labels") or {}), **copied}
            md["annotations"] = {**(md.get("annotations") or {}), P.SUSPENDING_PARENT: L.FRAMEWORK, P.SERVING: "true"}
        return obj

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource != self.resource:
            return []
        if operation == "CREATE" or old is None:
            return self.on_create(obj)
        errors = self.on_update(old, obj, store) + self.on_create(obj)
        managed = bool(meta(obj, "labels").get(C.QUEUE_NAME_LABEL))
        new_size, old_size = L.group_size(obj), L.group_size(old)
        if managed and new_size != old_size:
            errors.append(invalid(SIZE_PATH, new_size, IMMUTABLE))
        return errors
