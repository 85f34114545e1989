"""metav1.LabelSelector matching, shared by the API server's halves (validation, admission policies, RBAC
aggregation) and Kueue's (namespace selectors)."""

from __future__ import annotations


def selector_matches(selector: dict, labels: dict) -> bool:
    """metav1.LabelSelector semantics: matchLabels and In / NotIn / Exists / DoesNotExist expressions."""
    match_labels = selector.get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in (match_labels if isinstance(match_labels, dict) else {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        if not isinstance(expr, dict):
            continue
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if (
            (op == "In" and (not present or labels[key] not in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True
