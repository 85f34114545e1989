"""kube-controller-manager's deployment and replicaset controllers: a Deployment runs as ReplicaSets, one per pod
template (named `<deployment>-<pod-template-hash>`, the hash also a label of the ReplicaSet, its selector and its
pods), each owning its pods; the pods are placed and run like any pod (kube-scheduler and the kubelet,
kubesim.apiserver.nodes), so a pod that fits no node stays Pending and is neither ready nor available.

A change of the pod template makes a new ReplicaSet and rolls over to it: Recreate scales the old ones to zero and
starts the new one once their pods are gone; RollingUpdate keeps at most `replicas + maxSurge` pods (rounded up) and
at least `replicas - maxUnavailable` available (rounded down; both zero means one may be unavailable), as the
upstream controller does: unhealthy old pods go first, then old pods down to the availability floor, oldest
ReplicaSet first, and the new ReplicaSet grows into the room left. A pod counts as available once it has been ready
for the ReplicaSet's minReadySeconds (copied from the Deployment; kubesim counts it available at exactly that age,
kube a moment after). Status is what `kubectl get deploy` and `kubectl rollout status` read: observedGeneration,
replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas, and the conditions Available
(MinimumReplicasAvailable / MinimumReplicasUnavailable) and, with a progressDeadlineSeconds, Progressing
(NewReplicaSetCreated, FoundNewReplicaSet, ReplicaSetUpdated, NewReplicaSetAvailable; Unknown DeploymentPaused /
DeploymentResumed). A rollout that shows no progress (more updated, ready or available replicas, fewer old ones) for
progressDeadlineSeconds turns Progressing False ProgressDeadlineExceeded, which a later progress clears. A condition
is rewritten only when its status or reason changes, but Progressing on progress, whose lastUpdateTime then moves.

Revisions: each ReplicaSet carries `deployment.kubernetes.io/revision`, the Deployment the revision of its current
one, and the Deployment's annotations (but the controller's own and kubectl's last-applied) are copied onto it, so
`kubectl rollout history` shows their change-cause. A template that matches an older ReplicaSet again (`kubectl
rollout undo`, which patches the Deployment's template back from that ReplicaSet) makes that ReplicaSet the new one,
its revision raised above the others' and the revision it had added to `deployment.kubernetes.io/revision-history`.
Once a rollout is complete (or while paused), old ReplicaSets scaled to zero beyond revisionHistoryLimit are
deleted, lowest revision first.

The Deployment an installed controller manager runs as (kubesim.kernel.deployments, annotated as shown only) runs no
pods: its status reads as a finished rollout. Learned from Kubernetes' pkg/controller/deployment and
pkg/controller/replicaset and kubectl's rollout status viewer.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import datetime, timedelta

from kubesim.apiserver.validation import builtin
from kubesim.kernel.clock import parse_rfc3339, rfc3339
from kubesim.kernel.deployments import SHOWN_ONLY_ANNOTATION
from kubesim.kernel.store import ChangeFeed, Store, clone, controller_reference

_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet apimachinery's SafeEncodeString writes names with
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Not copied from a Deployment onto its ReplicaSets (the deployment controller's annotationsToSkip).
_NOT_COPIED = frozenset(
    {LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED, MAX_REPLICAS, "deprecated.deployment.rollback.to"}
)
_MAX_REVISION_HISTORY = 2000  # characters of revision-history kept
_NO_DEADLINE = 2**31 - 1  # progressDeadlineSeconds meaning "never", as math.MaxInt32 does upstream
DEPLOYMENT_COMPONENT = "deployment-controller"
REPLICASET_COMPONENT = "replicaset-controller"


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


def _set_condition(conditions: list[dict], now: str, type_: str, status: str, reason: str, message: str) -> list[dict]:
    """SetDeploymentCondition: unchanged while status and reason stay; else the condition moves to the end, keeping
    its transition time while its status stays."""
    prev = next((c for c in conditions if c.get("type") == type_), None)
    if prev is not None and prev.get("status") == status and prev.get("reason") == reason:
        return conditions
    since = prev["lastTransitionTime"] if prev is not None and prev.get("status") == status else now
    new = {
        "type": type_,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }
    return [c for c in conditions if c.get("type") != type_] + [new]


def _find(conditions: list[dict], type_: str) -> dict | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def _deadline(deployment: dict) -> int | None:
    """progressDeadlineSeconds, None when there is none (unset, or MaxInt32)."""
    value = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    return None if value is None or int(value) == _NO_DEADLINE else int(value)


def _revision(rs: dict) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(REVISION, "0") or 0)
    except ValueError:
        return 0


def _copy_annotations(deployment: dict, rs: dict) -> bool:
    """The Deployment's annotations onto the ReplicaSet (but _NOT_COPIED); True when one changed."""
    target = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in (deployment["metadata"].get("annotations") or {}).items():
        if key not in _NOT_COPIED and target.get(key) != value:
            target[key] = value
            changed = True
    return changed


def _replicas(obj: dict) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _scaled(value: int | str | None, total: int, *, round_up: bool) -> int:
    """An int-or-percent of `total` (intstr.GetScaledValueFromIntOrPercent)."""
    if isinstance(value, str) and value.endswith("%"):
        share = total * int(value[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value) if value is not None else 0


def surge_and_unavailable(deployment: dict) -> tuple[int, int]:
    """maxSurge (rounded up) and maxUnavailable (rounded down), 25% each by default; never both zero."""
    spec = deployment.get("spec") or {}
    if (spec.get("strategy") or {}).get("type") == "Recreate":
        return 0, _replicas(deployment)
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    desired = _replicas(deployment)
    surge = _scaled(rolling.get("maxSurge", "25%"), desired, round_up=True)
    unavailable = _scaled(rolling.get("maxUnavailable", "25%"), desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, min(unavailable, desired)


def _active(pod: dict) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def _ready(pod: dict) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def _ready_since(pod: dict) -> datetime | None:
    cond = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    stamp = (cond or {}).get("lastTransitionTime")
    return parse_rfc3339(stamp) if stamp else None


def _available(pod: dict, min_ready: int, now: datetime) -> bool:
    """Ready for at least minReadySeconds (podutil.IsPodAvailable)."""
    if not _ready(pod):
        return False
    if min_ready <= 0:
        return True
    since = _ready_since(pod)
    return since is not None and since + timedelta(seconds=min_ready) <= now


def _min_ready(rs: dict) -> int:
    return int((rs.get("spec") or {}).get("minReadySeconds") or 0)


def _controller_uid(obj: dict) -> str | None:
    return next((r.get("uid") for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def _created(obj: dict) -> tuple[str, str]:
    return obj["metadata"].get("creationTimestamp", ""), obj["metadata"]["name"]


def shown_status(deployment: dict, now: datetime) -> dict:
    """The status of an installed controller manager's Deployment: a finished rollout of its current spec."""
    replicas = _replicas(deployment)
    old = (deployment.get("status") or {}).get("conditions") or []
    ts = rfc3339(now)
    name = deployment["metadata"]["name"]
    out: dict = {"observedGeneration": deployment["metadata"].get("generation", 1)}
    if replicas:  # Go's omitempty: zero counts are left out
        out.update(replicas=replicas, updatedReplicas=replicas, readyReplicas=replicas, availableReplicas=replicas)
    out["conditions"] = [
        _condition(old, ts, "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
        _condition(
            old,
            ts,
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            f'ReplicaSet "{name}-{pod_template_hash(deployment)}" has successfully progressed.',
        ),
    ]
    return out


class DeploymentController:
    """The deployment and replicaset controllers, synced for every Deployment touched since the last pass (its own
    writes, its ReplicaSets', their pods'); everything after a history gap."""

    name = "deployment-controller"

    def __init__(self) -> None:
        self._feed = ChangeFeed("deployments", "replicasets", "pods")
        # When a Deployment needs syncing again without any change: a ready pod turns available, a progress
        # deadline passes.
        self._timers: dict[tuple[str, str], datetime] = {}

    def reconcile(self, store: Store) -> bool:
        now = store.now()
        events = self._feed.changed(store)
        if events is None:
            touched = {
                (d["metadata"]["namespace"], d["metadata"]["name"]) for d in store.list("deployments", copy=False)
            }
        else:
            touched = set()
            for event in events:
                md = event.obj["metadata"]
                if event.resource == "deployments":
                    touched.add((md["namespace"], md["name"]))
                    continue
                owner = self._owner_deployment(store, event.obj)
                if owner is not None:
                    touched.add(owner)
        touched |= {key for key, at in self._timers.items() if at <= now}
        wrote = False
        for namespace, name in sorted(touched):
            self._timers.pop((namespace, name), None)
            deployment = store.get("deployments", namespace, name, copy=False)
            if deployment is None or deployment["metadata"].get("deletionTimestamp"):
                continue
            wrote |= self._sync(store, deployment)
        return wrote

    @staticmethod
    def _owner_deployment(store: Store, obj: dict) -> tuple[str, str] | None:
        """The Deployment a ReplicaSet, or the ReplicaSet of a pod, belongs to."""
        for _ in range(2):
            uid = _controller_uid(obj)
            where = store.by_uid(uid) if uid else None
            if where is None:
                return None
            if where[0] == "deployments":
                return where[1], where[2]
            if where[0] != "replicasets":
                return None
            found = store.get("replicasets", where[1], where[2], copy=False)
            if found is None:
                return None
            obj = found
        return None

    def next_deadline(self, store: Store) -> datetime | None:
        return min(self._timers.values(), default=None)

    # ---- one Deployment ---------------------------------------------------------------------------------
    def _sync(self, store: Store, deployment: dict) -> bool:
        now = store.now()
        if (deployment["metadata"].get("annotations") or {}).get(SHOWN_ONLY_ANNOTATION):
            return self._write_status(store, deployment, shown_status(deployment, now))
        uid = deployment["metadata"]["uid"]
        owned = sorted(
            (rs for _, rs in store.dependents(uid, "replicasets") if _controller_uid(rs) == uid), key=_created
        )
        template_hash = pod_template_hash(deployment)
        new = next((rs for rs in owned if (rs["metadata"].get("labels") or {}).get(HASH_LABEL) == template_hash), None)
        olds = [rs for rs in owned if rs is not new]
        wrote = created = False
        paused = bool((deployment.get("spec") or {}).get("paused"))
        ts = rfc3339(now)
        conditions = self._paused_conditions(deployment, ts)
        deadline = _deadline(deployment)
        if new is None and not paused:
            new = self._create_replicaset(store, deployment, template_hash, olds)
            wrote = created = True
            if deadline is not None:
                message = f'Created new replica set "{new["metadata"]["name"]}"'
                conditions = _set_condition(conditions, ts, "Progressing", "True", "NewReplicaSetCreated", message)
        elif new is not None:
            wrote |= self._sync_new_replicaset(store, deployment, new, olds)
            if deadline is not None and _find(conditions, "Progressing") is None:
                message = f'Found new replica set "{new["metadata"]["name"]}"'
                conditions = _set_condition(conditions, ts, "Progressing", "True", "FoundNewReplicaSet", message)
        if new is not None:
            wrote |= self._set_revision(store, deployment, str(_revision(self._fresh(store, new) or new)))
        if not paused and new is not None:
            wrote |= self._roll(store, deployment, new, olds)
        if paused or self._complete(deployment, deployment.get("status") or {}):
            wrote |= self._clean_up(store, deployment, olds)
        mine = [*olds, new] if new is not None else olds
        fresh = [found for rs in mine if (found := self._fresh(store, rs)) is not None]
        for rs in fresh:
            wrote |= self._sync_replicaset(store, rs)
        fresh = [found for rs in fresh if (found := self._fresh(store, rs)) is not None]
        new_now = next(
            (rs for rs in fresh if new is not None and rs["metadata"]["uid"] == new["metadata"]["uid"]), None
        )
        if created and new_now is not None:  # counted as just created, as kube's sync that made it sees it
            new_now = {**new_now, "status": {}}
            fresh = [new_now if rs["metadata"]["uid"] == new_now["metadata"]["uid"] else rs for rs in fresh]
        status = self._status(deployment, fresh, new_now, conditions, now)
        self._arm(store, deployment, fresh, status, now)
        return self._write_status(store, deployment, status) or wrote

    @staticmethod
    def _fresh(store: Store, rs: dict) -> dict | None:
        return store.get("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"], copy=False)

    @staticmethod
    def _paused_conditions(deployment: dict, ts: str) -> list[dict]:
        """checkPausedConditions: Progressing Unknown DeploymentPaused on pause, DeploymentResumed on resume, never
        over a ProgressDeadlineExceeded."""
        conditions = list((deployment.get("status") or {}).get("conditions") or [])
        if _deadline(deployment) is None:
            return conditions
        current = _find(conditions, "Progressing")
        reason = (current or {}).get("reason")
        if reason == "ProgressDeadlineExceeded":
            return conditions
        paused = bool((deployment.get("spec") or {}).get("paused"))
        if paused and reason != "DeploymentPaused":
            change = ("DeploymentPaused", "Deployment is paused")
        elif not paused and reason == "DeploymentPaused":
            change = ("DeploymentResumed", "Deployment is resumed")
        else:
            return conditions
        return _set_condition(conditions, ts, "Progressing", "Unknown", *change)

    @staticmethod
    def _complete(deployment: dict, status: dict) -> bool:
        """DeploymentComplete: every replica updated and available, the current generation observed."""
        desired = _replicas(deployment)
        return (
            int(status.get("updatedReplicas", 0)) == desired
            and int(status.get("replicas", 0)) == desired
            and int(status.get("availableReplicas", 0)) == desired
            and int(status.get("observedGeneration", 0)) >= int(deployment["metadata"].get("generation", 1))
        )

    def _sync_new_replicaset(self, store: Store, deployment: dict, new: dict, olds: list[dict]) -> bool:
        """The current ReplicaSet found again (a rollback, or any sync): the Deployment's annotations copied onto it,
        its revision raised above every old one's (the revision it had added to its revision history), its
        minReadySeconds the Deployment's."""
        updated = clone(new)
        changed = _copy_annotations(deployment, updated)
        annotations = updated["metadata"]["annotations"]
        old_revision = annotations.get(REVISION, "")
        revision = 1 + max((_revision(rs) for rs in olds), default=0)
        if _revision(new) < revision:
            annotations[REVISION] = str(revision)
            if old_revision:
                history = [r for r in annotations.get(REVISION_HISTORY, "").split(",") if r]
                history.append(old_revision)
                while len(",".join(history)) > _MAX_REVISION_HISTORY and len(history) > 1:
                    history.pop(0)
                annotations[REVISION_HISTORY] = ",".join(history)
            changed = True
        min_ready = int((deployment.get("spec") or {}).get("minReadySeconds") or 0)
        if _min_ready(updated) != min_ready:
            updated["spec"]["minReadySeconds"] = min_ready
            changed = True
        if changed:
            store.update("replicasets", updated)
        return changed

    @staticmethod
    def _set_revision(store: Store, deployment: dict, revision: str) -> bool:
        """SetDeploymentRevision: the Deployment carries its current ReplicaSet's revision."""
        current = store.get("deployments", deployment["metadata"]["namespace"], deployment["metadata"]["name"])
        if current is None or (current["metadata"].get("annotations") or {}).get(REVISION) == revision:
            return False
        current["metadata"].setdefault("annotations", {})[REVISION] = revision
        store.update("deployments", current)
        return True

    def _clean_up(self, store: Store, deployment: dict, olds: list[dict]) -> bool:
        """cleanupDeployment: past revisionHistoryLimit, the old ReplicaSets of the lowest revisions go, but those
        still holding pods or not yet observed by the ReplicaSet controller (they count, and stay)."""
        limit = (deployment.get("spec") or {}).get("revisionHistoryLimit")
        if limit is None:
            return False
        alive = [
            rs
            for old in olds
            if (rs := self._fresh(store, old)) is not None and not rs["metadata"].get("deletionTimestamp")
        ]
        surplus = len(alive) - int(limit)
        if surplus <= 0:
            return False
        wrote = False
        for rs in sorted(alive, key=lambda rs: (_revision(rs), *_created(rs)))[:surplus]:
            status = rs.get("status") or {}
            observed = int(status.get("observedGeneration", 0)) >= int(rs["metadata"].get("generation", 1))
            if int(status.get("replicas", 0)) or _replicas(rs) or not observed:
                continue
            store.delete("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"])
            wrote = True
        return wrote

    def _arm(self, store: Store, deployment: dict, replicasets: list[dict], status: dict, now: datetime) -> None:
        """When this Deployment must be synced again unprompted: its first ready pod to turn available, and the
        progress deadline of a rollout that is neither complete nor already timed out (requeueStuckDeployment,
        which adds a second)."""
        times = []
        for rs in replicasets:
            if (min_ready := _min_ready(rs)) > 0:
                for pod in self._pods(store, rs):
                    since = _ready_since(pod) if _ready(pod) else None
                    if since is not None and (at := since + timedelta(seconds=min_ready)) > now:
                        times.append(at)
        deadline = _deadline(deployment)
        progressing = _find(status.get("conditions") or [], "Progressing")
        if (
            deadline is not None
            and progressing is not None
            and not (deployment.get("spec") or {}).get("paused")
            and progressing.get("reason") not in ("NewReplicaSetAvailable", "ProgressDeadlineExceeded")
            and not self._complete(deployment, status)
        ):
            times.append(parse_rfc3339(progressing["lastUpdateTime"]) + timedelta(seconds=deadline + 1))
        key = (deployment["metadata"]["namespace"], deployment["metadata"]["name"])
        if times:
            self._timers[key] = min(times)

    def _create_replicaset(self, store: Store, deployment: dict, template_hash: str, olds: list[dict]) -> dict:
        md, spec = deployment["metadata"], deployment["spec"]
        template = copy.deepcopy(spec["template"])
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = template_hash
        selector = copy.deepcopy(spec["selector"])
        selector.setdefault("matchLabels", {})[HASH_LABEL] = template_hash
        revision = 1 + max((_revision(rs) for rs in olds), default=0)
        surge, _ = surge_and_unavailable(deployment)
        # A first rollout starts at full size; a rollover starts empty and grows as the old ReplicaSets shrink.
        replicas = _replicas(deployment) if not olds else 0
        rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{md['name']}-{template_hash}",
                "namespace": md["namespace"],
                "labels": {**(template["metadata"].get("labels") or {})},
                "annotations": {
                    **{k: v for k, v in (md.get("annotations") or {}).items() if k not in _NOT_COPIED},
                    REVISION: str(revision),
                    DESIRED: str(_replicas(deployment)),
                    MAX_REPLICAS: str(_replicas(deployment) + surge),
                },
                "ownerReferences": [controller_reference(deployment)],
            },
            "spec": {
                "replicas": replicas,
                "minReadySeconds": spec.get("minReadySeconds", 0),
                "selector": selector,
                "template": template,
            },
        }
        created = store.create("replicasets", rs)
        store.record_event(
            deployment,
            "Normal",
            "ScalingReplicaSet",
            f"Scaled up replica set {created['metadata']['name']} from 0 to {replicas}",
            DEPLOYMENT_COMPONENT,
        )
        return created

    def _scale(self, store: Store, deployment: dict, rs: dict, to: int) -> None:
        before = _replicas(rs)
        if before == to:
            return
        updated = clone(store.get("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"], copy=False))
        updated["spec"]["replicas"] = to
        store.update("replicasets", updated)
        word = "up" if to > before else "down"
        store.record_event(
            deployment,
            "Normal",
            "ScalingReplicaSet",
            f"Scaled {word} replica set {rs['metadata']['name']} from {before} to {to}",
            DEPLOYMENT_COMPONENT,
        )

    def _counts(self, store: Store, rs: dict) -> tuple[int, int]:
        """(spec replicas, available pods) of a ReplicaSet as it is now."""
        current = store.get("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"], copy=False) or rs
        pods = self._pods(store, current)
        now = store.now()
        return _replicas(current), sum(1 for p in pods if _available(p, _min_ready(current), now))

    def _roll(self, store: Store, deployment: dict, new: dict, olds: list[dict]) -> bool:
        """One step of the rollout (all of it when the pods start at once): scale the new ReplicaSet up into the
        room maxSurge leaves, then the old ones down as far as maxUnavailable lets, until nothing moves."""
        desired = _replicas(deployment)
        surge, max_unavailable = surge_and_unavailable(deployment)
        recreate = ((deployment["spec"].get("strategy") or {}).get("type")) == "Recreate"
        wrote = False
        for _ in range(2 * (desired + len(olds)) + 2):
            moved = False
            for rs in [new, *olds]:
                self._sync_replicaset(
                    store,
                    store.get("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"], copy=False) or rs,
                )
            counts = {rs["metadata"]["name"]: self._counts(store, rs) for rs in [new, *olds]}
            new_spec, new_available = counts[new["metadata"]["name"]]
            old_specs = sum(counts[rs["metadata"]["name"]][0] for rs in olds)
            if recreate:
                for rs in olds:
                    if counts[rs["metadata"]["name"]][0]:
                        self._scale(store, deployment, rs, 0)
                        moved = True
                old_pods = sum(len(self._pods(store, rs)) for rs in olds)
                if not moved and not old_pods and new_spec != desired:
                    self._scale(store, deployment, new, desired)
                    moved = True
            elif new_spec > desired or (not olds and new_spec != desired):
                self._scale(store, deployment, new, desired)
                moved = True
            else:
                room = desired + surge - (new_spec + old_specs)
                if new_spec < desired and room > 0:
                    self._scale(store, deployment, new, new_spec + min(room, desired - new_spec))
                    moved = True
                else:
                    moved = self._scale_down_olds(
                        store,
                        deployment,
                        olds,
                        counts,
                        new_spec - new_available,
                        desired - max_unavailable,
                        new_available,
                    )
            if not moved:
                break
            wrote = True
        return wrote

    def _scale_down_olds(
        self,
        store: Store,
        deployment: dict,
        olds: list[dict],
        counts: dict[str, tuple[int, int]],
        new_unavailable: int,
        min_available: int,
        new_available: int,
    ) -> bool:
        all_specs = sum(spec for spec, _ in counts.values())
        budget = all_specs - min_available - new_unavailable
        if budget <= 0:
            return False
        moved = False
        for rs in olds:  # unhealthy old pods first
            spec, available = counts[rs["metadata"]["name"]]
            cut = min(budget, spec - available)
            if cut > 0:
                self._scale(store, deployment, rs, spec - cut)
                counts[rs["metadata"]["name"]] = (spec - cut, available)
                budget -= cut
                moved = True
        total_available = new_available + sum(counts[rs["metadata"]["name"]][1] for rs in olds)
        spare = min(budget, total_available - min_available)
        for rs in olds:  # then available ones down to the floor, oldest first
            if spare <= 0:
                break
            spec, available = counts[rs["metadata"]["name"]]
            cut = min(spare, spec)
            if cut > 0:
                self._scale(store, deployment, rs, spec - cut)
                spare -= cut
                moved = True
        return moved

    # ---- one ReplicaSet ---------------------------------------------------------------------------------
    @staticmethod
    def _pods(store: Store, rs: dict) -> list[dict]:
        uid = rs["metadata"]["uid"]
        return [p for _, p in store.dependents(uid, "pods") if _controller_uid(p) == uid and _active(p)]

    def _sync_replicaset(self, store: Store, rs: dict) -> bool:
        """Pods up or down to spec.replicas (not yet placed, then not ready, then newest go first); its status."""
        pods = self._pods(store, rs)
        want = _replicas(rs)
        wrote = False
        if len(pods) < want:
            for _ in range(want - len(pods)):
                pods.append(self._create_pod(store, rs))
            wrote = True
        elif len(pods) > want:
            order = sorted(pods, key=lambda p: (bool(p["spec"].get("nodeName")), _ready(p), _created(p)))
            doomed = order[: len(pods) - want]
            for pod in doomed:
                store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
                store.record_event(
                    rs, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}", REPLICASET_COMPONENT
                )
            pods = self._pods(store, rs)
            wrote = True
        ready = sum(1 for p in pods if _ready(p))
        now = store.now()
        available = sum(1 for p in pods if _available(p, _min_ready(rs), now))
        status: dict = {"observedGeneration": rs["metadata"].get("generation", 1), "replicas": len(pods)}
        if pods:
            status["fullyLabeledReplicas"] = len(pods)
        if ready:
            status["readyReplicas"] = ready
        if available:
            status["availableReplicas"] = available
        current = store.get("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"], copy=False)
        if current is not None and current.get("status") != status:
            updated = clone(current)
            updated["status"] = status
            store.update_status("replicasets", updated)
            wrote = True
        return wrote

    def _create_pod(self, store: Store, rs: dict) -> dict:
        template = copy.deepcopy(rs["spec"]["template"])
        tmd = template.get("metadata") or {}
        pod = {
            "metadata": {
                "generateName": f"{rs['metadata']['name']}-",
                "namespace": rs["metadata"]["namespace"],
                "labels": dict(tmd.get("labels") or {}),
                "annotations": dict(tmd.get("annotations") or {}),
                **({"finalizers": list(tmd["finalizers"])} if tmd.get("finalizers") else {}),  # as GetPodFromTemplate
                "ownerReferences": [controller_reference(rs)],
            },
            "spec": template["spec"],
        }
        builtin.apply_defaults("pods", pod, None)  # as kube-apiserver defaults a pod the controller creates
        created = store.create("pods", pod)
        store.record_event(
            rs, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}", REPLICASET_COMPONENT
        )
        return created

    # ---- status -------------------------------------------------------------------------------------------
    def _status(
        self, deployment: dict, replicasets: list[dict], new: dict | None, conditions: list[dict], now: datetime
    ) -> dict:
        """calculateStatus, then syncRolloutStatus's verdict on progress (none while paused)."""
        desired = _replicas(deployment)
        _, max_unavailable = surge_and_unavailable(deployment)
        old_status = deployment.get("status") or {}
        ts = rfc3339(now)

        def total(key: str, of: list[dict]) -> int:
            return sum(int((rs.get("status") or {}).get(key, 0)) for rs in of)

        replicas, ready, available = (
            total("replicas", replicasets),
            total("readyReplicas", replicasets),
            total("availableReplicas", replicasets),
        )
        updated = total("replicas", [new]) if new is not None else 0
        out: dict = {"observedGeneration": deployment["metadata"].get("generation", 1)}
        for key, value in (
            ("replicas", replicas),
            ("updatedReplicas", updated),
            ("readyReplicas", ready),
            ("availableReplicas", available),
            ("unavailableReplicas", max(0, sum(_replicas(rs) for rs in replicasets) - available)),
        ):
            if value:  # Go's omitempty
                out[key] = value
        if available >= desired - max_unavailable:
            availability = ("True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
        else:
            availability = ("False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
        conditions = _set_condition(conditions, ts, "Available", *availability)
        deadline = _deadline(deployment)
        if deadline is None:
            conditions = [c for c in conditions if c.get("type") != "Progressing"]
        current = _find(conditions, "Progressing")
        finished = replicas == updated and (current or {}).get("reason") == "NewReplicaSetAvailable"
        paused = bool((deployment.get("spec") or {}).get("paused"))
        if deadline is not None and not finished and not paused:
            name = new["metadata"]["name"] if new is not None else ""
            subject = f'ReplicaSet "{name}"' if new is not None else f'Deployment "{deployment["metadata"]["name"]}"'
            if self._complete(deployment, out):
                message = f"{subject} has successfully progressed."
                conditions = _set_condition(conditions, ts, "Progressing", "True", "NewReplicaSetAvailable", message)
            elif self._progressed(old_status, out):
                since = current["lastTransitionTime"] if current and current.get("status") == "True" else ts
                conditions = [c for c in conditions if c.get("type") != "Progressing"] + [
                    {
                        "type": "Progressing",
                        "status": "True",
                        "lastUpdateTime": ts,
                        "lastTransitionTime": since,
                        "reason": "ReplicaSetUpdated",
                        "message": f"{subject} is progressing.",
                    }
                ]
            elif self._timed_out(current, deadline, now):
                message = f"{subject} has timed out progressing."
                conditions = _set_condition(conditions, ts, "Progressing", "False", "ProgressDeadlineExceeded", message)
        out["conditions"] = conditions
        if old_status.get("collisionCount") is not None:
            out["collisionCount"] = old_status["collisionCount"]
        return out

    @staticmethod
    def _progressed(old: dict, new: dict) -> bool:
        """DeploymentProgressing: more updated, ready or available replicas than before, or fewer old ones."""

        def count(status: dict, key: str) -> int:
            return int(status.get(key, 0))

        return (
            count(new, "updatedReplicas") > count(old, "updatedReplicas")
            or count(new, "replicas") - count(new, "updatedReplicas")
            < count(old, "replicas") - count(old, "updatedReplicas")
            or count(new, "readyReplicas") > count(old, "readyReplicas")
            or count(new, "availableReplicas") > count(old, "availableReplicas")
        )

    @staticmethod
    def _timed_out(progressing: dict | None, deadline: int, now: datetime) -> bool:
        """DeploymentTimedOut: no progress recorded for progressDeadlineSeconds since the condition's last update."""
        if progressing is None or progressing.get("reason") == "NewReplicaSetAvailable":
            return False
        if progressing.get("reason") == "ProgressDeadlineExceeded":
            return True
        return parse_rfc3339(progressing["lastUpdateTime"]) + timedelta(seconds=deadline) < now

    @staticmethod
    def _write_status(store: Store, deployment: dict, status: dict) -> bool:
        current = store.get(
            "deployments", deployment["metadata"]["namespace"], deployment["metadata"]["name"], copy=False
        )
        if current is None or current.get("status") == status:
            return False
        updated = clone(current)
        updated["status"] = status
        store.update_status("deployments", updated)
        return True
