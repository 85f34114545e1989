"""The Deployment an installed controller manager runs as (Kueue's, an operator's): shown, never run, so kubectl
and the portal's cluster check find it where a real installation puts it."""

from __future__ import annotations

from typing import Any

SHOWN_ONLY_ANNOTATION = "kubesim.io/shown-only"  # its status is a finished rollout; it runs no ReplicaSet or pods


def controller_manager(*, name: str, namespace: str, labels: dict[str, str],
                       container: dict[str, Any]) -> dict[str, Any]:
    """A one-replica Deployment of `container`, reported ready."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": {SHOWN_ONLY_ANNOTATION: "true"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
        "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1},
    }
