"""The Deployment status kube-controller-manager's deployment controller reports, for kubectl (`get deploy`,
`rollout status`, `describe`) and clients that wait for a rollout.

kubesim runs no ReplicaSets or pods for a Deployment (an installed controller manager's, a user's): its rollout
completes at once. Each change of a Deployment's spec is observed (observedGeneration), every desired replica is
updated, ready and available, and the conditions read as a finished rollout: Available (MinimumReplicasAvailable)
and Progressing (NewReplicaSetAvailable, naming the ReplicaSet `<name>-<pod-template-hash>` the controller would
have made), or Progressing Unknown (DeploymentPaused) while paused. Learned from Kubernetes' deployment controller
(pkg/controller/deployment) and kubectl's rollout status viewer.
"""

from __future__ import annotations

import json
from datetime import datetime

from kubesim.kernel.clock import rfc3339
from kubesim.kernel.store import Store, clone

_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet apimachinery's SafeEncodeString writes names with


def pod_template_hash(deployment: dict) -> str:
    """A stable hash of the pod template (and collision count), written with the safe alphabet as the controller's
    pod-template-hash is (FNV-1a over the template; not byte-identical to Go's, which hashes the Go struct)."""
    data = json.dumps(
        [(deployment.get("spec") or {}).get("template"), (deployment.get("status") or {}).get("collisionCount")],
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(ch) % len(_SAFE)] for ch in str(h))


def _condition(old: list[dict], now: str, type_: str, status: str, reason: str, message: str) -> dict:
    """A condition; its transition time kept while its status stays, its update time kept while nothing changed."""
    prev = next((c for c in old if c.get("type") == type_), None)
    same = prev is not None and prev.get("status") == status
    unchanged = same and prev is not None and prev.get("reason") == reason and prev.get("message") == message
    return {
        "type": type_,
        "status": status,
        "lastUpdateTime": prev["lastUpdateTime"] if unchanged and prev and prev.get("lastUpdateTime") else now,
        "lastTransitionTime": prev["lastTransitionTime"] if same and prev and prev.get("lastTransitionTime") else now,
        "reason": reason,
        "message": message,
    }


def desired_status(deployment: dict, now: datetime) -> dict:
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    replicas = 1 if spec.get("replicas") is None else int(spec["replicas"])
    ts = rfc3339(now)
    old = status.get("conditions") or []
    name = deployment["metadata"]["name"]
    if spec.get("paused"):
        progressing = _condition(old, ts, "Progressing", "Unknown", "DeploymentPaused", "Deployment is paused")
    else:
        progressing = _condition(
            old,
            ts,
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            f'ReplicaSet "{name}-{pod_template_hash(deployment)}" has successfully progressed.',
        )
    out: dict = {"observedGeneration": deployment["metadata"].get("generation", 1)}
    # Go's omitempty: zero counts are left out
    for key in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"):
        if replicas:
            out[key] = replicas
    out["conditions"] = [
        _condition(old, ts, "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
        progressing,
    ]
    if status.get("collisionCount") is not None:
        out["collisionCount"] = status["collisionCount"]
    return out


class DeploymentController:
    """Keeps every Deployment's status that of a finished rollout of its current spec."""

    name = "deployment-controller"

    def __init__(self) -> None:
        self._seen = -1

    def reconcile(self, store: Store) -> bool:
        version = store.last_change("deployments")
        if version == self._seen:
            return False
        wrote = False
        now = store.now()
        for deployment in store.list("deployments", copy=False):
            if deployment["metadata"].get("deletionTimestamp"):
                continue
            want = desired_status(deployment, now)
            if want != deployment.get("status"):
                updated = clone(deployment)
                updated["status"] = want
                store.update_status("deployments", updated)
                wrote = True
        self._seen = store.last_change("deployments")
        return wrote

    def next_deadline(self, store: Store) -> datetime | None:
        return None
