"""LocalQueue: upstream has no validating webhook for it; its CRD rule refuses a changed spec.clusterQueue first. The
check here answers as the API server's own validation would (no webhook name: 422 Invalid with causes)."""

from __future__ import annotations

from kubesim.kueue.webhooks.common import IMMUTABLE, Errors, invalid


class LocalQueueWebhook:
    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        return obj

    @staticmethod
    def webhook_name(resource: str) -> str:
        return ""  # no validating webhook: a refusal is the API server's own 422

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource == "localqueues" and operation == "UPDATE" and old is not None:
            old_cq = (old.get("spec") or {}).get("clusterQueue")
            if (obj.get("spec") or {}).get("clusterQueue") != old_cq:  # the CRD's rule says it first
                return [invalid("spec.clusterQueue", (obj.get("spec") or {}).get("clusterQueue"), IMMUTABLE)]
        return []
