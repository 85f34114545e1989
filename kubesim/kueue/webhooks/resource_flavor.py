"""The ResourceFlavor webhook (upstream pkg/webhooks/resourceflavor_webhook.go): the defaulter adds the
resource-in-use finalizer; validation covers node labels, node taints and toleration keys. Refusals answer under
vresourceflavor.kb.io."""

from __future__ import annotations

from kubesim.kernel.metadata import LABEL_VALUE, LABEL_VALUE_ERROR
from kubesim.kueue.webhooks.common import (
    Errors,
    add_in_use_finalizer,
    as_dict,
    as_list,
    duplicate,
    invalid,
    label_errors,
    label_name_errors,
    toleration_key_errors,
)


def validate_resource_flavor(obj: dict) -> Errors:
    """ValidateResourceFlavor: node labels, node taints (key, value, unique by key and effect), toleration keys."""
    spec = as_dict(obj.get("spec"))
    errors = label_errors(spec.get("nodeLabels"), "spec.nodeLabels")
    seen: set[tuple] = set()
    for i, taint in enumerate(as_list(spec.get("nodeTaints"))):
        taint = as_dict(taint)
        path = f"spec.nodeTaints[{i}]"
        errors += label_name_errors(taint.get("key", ""), f"{path}.key")
        value = taint.get("value", "")
        if isinstance(value, str) and (len(value) > 63 or not LABEL_VALUE.match(value)):
            messages = (["must be no more than 63 characters"] if len(value) > 63 else []) + (
                [] if LABEL_VALUE.match(value) else [LABEL_VALUE_ERROR]
            )
            errors.append(invalid(f"{path}.value", value, ";".join(messages)))
        key = (taint.get("effect"), taint.get("key"))
        if key in seen:
            errors.append(duplicate(path, taint, "taints must be unique by key and effect pair"))
            continue
        seen.add(key)
    errors += toleration_key_errors(spec.get("tolerations"), "spec.tolerations")
    return errors


class ResourceFlavorWebhook:
    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> dict:
        if resource == "resourceflavors" and operation == "CREATE":
            add_in_use_finalizer(obj)
        return obj

    @staticmethod
    def webhook_name(resource: str) -> str:
        return "vresourceflavor.kb.io" if resource == "resourceflavors" else ""

    def validate(self, resource: str, operation: str, obj: dict, old: dict | None, store) -> Errors:
        return validate_resource_flavor(obj) if resource == "resourceflavors" else []
