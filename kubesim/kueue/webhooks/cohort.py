"""The Cohort webhook (upstream pkg/webhooks/cohort_webhook.go): the ClusterQueue's resource-group and Fair Sharing
rules, with limits allowed only under a parent Cohort. Refusals answer under vcohort.kb.io."""

from __future__ import annotations

from kubesim.kueue.webhooks.cluster_queue import validate_fair_sharing, validate_resource_groups
from kubesim.kueue.webhooks.common import (
    Errors,
    as_dict,
    as_list,
    decode_quantities,
    resource_group_quantities,
)


def validate_cohort(obj: dict) -> Errors:
    spec = as_dict(obj.get("spec"))
    return validate_fair_sharing(spec) + validate_resource_groups(
        as_list(spec.get("resourceGroups")), bool(spec.get("parentName")), True
    )


class CohortWebhook:
    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        return obj

    @staticmethod
    def webhook_name(resource: str) -> str:
        return "vcohort.kb.io" if resource == "cohorts" else ""

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        if resource != "cohorts":
            return []
        decode_quantities("vcohort.kb.io", resource_group_quantities(as_dict(obj.get("spec"))))
        return validate_cohort(obj)
