"""Kueue's Pod webhook (upstream pkg/controller/jobs/pod/pod_webhook.go), mpod.kb.io / vpod.kb.io.

On create, in a namespace Kueue manages (not kube-system nor kueue-system), a pod whose controlling owner is not of an
enabled integration (a Job's or JobSet's pods are their owner's business) gets the namespace's `default` LocalQueue
and the `default` WorkloadPriorityClass; if it then names a queue it is taken in: label `kueue.x-k8s.io/managed`,
finalizer `kueue.x-k8s.io/managed`, scheduling gate `kueue.x-k8s.io/admission`, and for a pod group member its role
hash. A pod annotated `kueue.x-k8s.io/pod-suspending-parent` (a LeaderWorkerSet's) is only gated: its parent's
integration labels it. On create and update: the managed label's value, the group name and total count together, the
group name immutable, an unretriable group not made retriable again, and the jobframework's label rules. Kueue's
TopologyAwareScheduling gate is not added (kubesim has no TAS)."""

from __future__ import annotations

from collections.abc import Mapping

from kubesim.kueue import constants as C
from kubesim.kueue.integrations import pod as P
from kubesim.kueue.webhooks.common import IMMUTABLE, Errors, forbidden, invalid, required
from kubesim.kueue.webhooks.jobframework import JobFrameworkWebhook, meta

BOTH_GROUP_KEYS = f"both the '{P.GROUP_TOTAL_COUNT}' annotation and the '{P.GROUP_NAME}' label should be set"


class PodWebhook(JobFrameworkWebhook):
    resource = "pods"
    name = "vpod.kb.io"
    gvk = "/v1, Kind=Pod"

    def __init__(self, owner_kinds: Mapping[tuple[str, str], str], *, parent_suspended_only: bool = False) -> None:
        """parent_suspended_only: the pod integration is only implicitly enabled (by LeaderWorkerSet's): it gates the
        pods a parent suspends and leaves every other pod alone."""
        super().__init__(owner_kinds)
        self.parent_suspended_only = parent_suspended_only

    def suspended(self, obj: dict) -> bool:
        """A pod is 'suspended' while Kueue's admission gate holds it."""
        return P.gated(obj)

    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        if resource != self.resource or operation != "CREATE":
            return obj
        md = obj.setdefault("metadata", {})
        if P.SUSPENDING_PARENT not in (md.get("annotations") or {}):
            if self.parent_suspended_only:
                return obj
            if md.get("namespace") in C.UNMANAGED_NAMESPACES or self._owned_by_integration(obj):
                return obj
            self.apply_defaults(obj, store)
            if not (md.get("labels") or {}).get(C.QUEUE_NAME_LABEL):
                return obj
            md.setdefault("labels", {})[P.MANAGED_LABEL] = "true"
            if P.POD_FINALIZER not in (md.get("finalizers") or []):
                md["finalizers"] = [*(md.get("finalizers") or []), P.POD_FINALIZER]
            if P.group_name(obj):
                md.setdefault("annotations", {})[P.ROLE_HASH] = P.role_hash(obj.get("spec") or {})
        spec = obj.setdefault("spec", {})
        if not P.gated(obj):
            spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": P.ADMISSION_GATE}]
        return obj

    def suspend(self, obj: dict) -> None:
        """Pods are gated in mutate, after the default queue is known."""

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource != self.resource:
            return []
        errors = self._common(obj)
        if operation == "CREATE" or old is None:
            return self.on_create(obj) + errors
        errors = self.on_update(old, obj, store) + self.on_create(obj) + errors
        if P.group_name(obj) and P.unretriable(old) and not P.unretriable(obj):
            path = f"metadata.annotations[{P.RETRIABLE_IN_GROUP}]"
            errors.append(forbidden(path, "unretriable pod group can't be converted to retriable"))
        if P.group_name(old) and P.group_name(obj) != P.group_name(old):
            errors.append(invalid(f"metadata.labels[{P.GROUP_NAME}]", P.group_name(obj), IMMUTABLE))
        return errors

    def _common(self, obj: dict) -> Errors:
        """validateManagedLabel and validatePodGroupMetadata."""
        errors: Errors = []
        managed = meta(obj, "labels").get(P.MANAGED_LABEL)
        if managed is not None and managed != "true":
            errors.append(forbidden(f"metadata.labels[{P.MANAGED_LABEL}]", "managed label value can only be 'true'"))
        total = meta(obj, "annotations").get(P.GROUP_TOTAL_COUNT)
        group = P.group_name(obj)
        if not group:
            if total is not None:
                errors.append(required(f"metadata.labels[{P.GROUP_NAME}]", BOTH_GROUP_KEYS))
            return errors
        errors += self._subdomain(
            obj, "annotations" if P.GROUP_NAME in meta(obj, "annotations") else "labels", P.GROUP_NAME
        )
        path = f"metadata.annotations[{P.GROUP_TOTAL_COUNT}]"
        if total is None:
            return [*errors, required(path, BOTH_GROUP_KEYS)]
        count = P.total_count(obj)
        if count is None:
            errors.append(invalid(path, total, f'strconv.Atoi: parsing "{total}": invalid syntax'))
        elif count < 1:
            errors.append(invalid(path, total, "should be greater than or equal to 1"))
        prebuilt = self._prebuilt(obj)[0]
        if prebuilt and prebuilt != group:
            errors.append(invalid(self._prebuilt(obj)[1], prebuilt, "prebuilt workload and pod group should be equal"))
        return errors
