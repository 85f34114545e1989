"""What Kueue writes into a job's pod templates when it starts the job, and takes out again when it stops it
(upstream pkg/podset, and the jobframework's getPodSetsInfoFromStatus / GetPodSetsInfoFromWorkload), for every kind.

A PodSetInfo is one pod set's share of an admission: the assigned flavors' node labels (as nodeSelector) and
tolerations, the pod set, LocalQueue and ClusterQueue labels (AssignQueueLabelsForPods, on in v0.20), the Workload
annotation (TopologyAwareScheduling, on in v0.20) and the admission checks' podSetUpdates. Merging one into a pod
template refuses a key the template already holds with another value (Kueue then finishes the Workload with
FailedToStart); restoring puts back exactly what the Workload recorded before admission.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from kubesim.kernel.metadata import DNS1123_LABEL
from kubesim.kernel.store import clone
from kubesim.kueue import constants as C

MAX_PREFIX = 253 - 1 - 5
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"


def workload_name(owner_name: str, owner_uid: str, kind: str, group: str) -> str:
    """GetWorkloadNameForOwnerWithGVK: `<kind>-<name>` truncated, `-`, then the first 5 hex digits of the SHA-1 of
    kind, group, name and uid, each on a line."""
    digest = hashlib.sha1(f"{kind}\n{group}\n{owner_name}\n{owner_uid}".encode(), usedforsecurity=False).hexdigest()
    prefix = f"{kind.lower()}-{owner_name}"[:MAX_PREFIX]
    return f"{prefix}-{digest[:5]}"


class PodSetConflict(ValueError):
    """A pod set info that cannot be merged into a template (podset.ErrInvalidPodSetUpdate): permanent."""


@dataclass
class PodSetInfo:
    name: str
    count: int
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict] = field(default_factory=list)
    scheduling_gates: list[dict] = field(default_factory=list)

    def merge(self, labels: dict, annotations: dict, node_selector: dict, tolerations: list, gates: list) -> None:
        """PodSetInfo.Merge: maps must agree on shared keys; tolerations and gates are added once."""
        for what, mine, theirs in (
            ("annotations", self.annotations, annotations),
            ("labels", self.labels, labels),
            ("nodeSelector", self.node_selector, node_selector),
        ):
            for key, value in mine.items():
                if key in theirs and theirs[key] != value:
                    raise PodSetConflict(
                        f"invalid admission check PodSetUpdate: conflict for {what}: conflict for key={key}, "
                        f"value1={value}, value2={theirs[key]}"
                    )
        self.annotations.update(annotations)
        self.labels.update(labels)
        self.node_selector.update(node_selector)
        self.tolerations += [t for t in tolerations if not any(_same_toleration(t, have) for have in self.tolerations)]
        self.scheduling_gates += [g for g in gates if g not in self.scheduling_gates]


def _same_toleration(a: dict, b: dict) -> bool:
    """tolerations.Equal: an empty operator is Equal."""
    return {**a, "operator": a.get("operator") or "Equal"} == {**b, "operator": b.get("operator") or "Equal"}


def from_admission(store, wl: dict) -> list[PodSetInfo]:
    """getPodSetsInfoFromStatus: one PodSetInfo per pod set assignment, in order. Raises PodSetConflict when an
    admission check's podSetUpdates disagree with the rest."""
    status = wl.get("status") or {}
    admission = status.get("admission") or {}
    podsets = (wl.get("spec") or {}).get("podSets") or []
    out = []
    for i, psa in enumerate(admission.get("podSetAssignments") or []):
        name = psa.get("name", "main")
        count = psa.get("count", podsets[i].get("count", 1) if i < len(podsets) else 1)
        info = PodSetInfo(name=name, count=int(count))
        for flavor_name in sorted(set((psa.get("flavors") or {}).values())):
            flavor = (store.get("resourceflavors", None, flavor_name, copy=False) or {}).get("spec") or {}
            info.node_selector.update(flavor.get("nodeLabels") or {})
            info.tolerations += clone(flavor.get("tolerations") or [])
        info.annotations[WORKLOAD_ANNOTATION] = wl["metadata"]["name"]
        info.labels[C.PODSET_LABEL] = name
        info.labels[LOCAL_QUEUE_LABEL] = (wl.get("spec") or {}).get("queueName", "")
        cluster_queue = admission.get("clusterQueue", "")
        if len(cluster_queue) <= 63 and DNS1123_LABEL.match(cluster_queue):
            info.labels[CLUSTER_QUEUE_LABEL] = cluster_queue
        for check in status.get("admissionChecks") or []:
            update = next((u for u in check.get("podSetUpdates") or [] if u.get("name") == name), None)
            if update is None:
                continue
            try:
                info.merge(
                    update.get("labels") or {},
                    update.get("annotations") or {},
                    update.get("nodeSelector") or {},
                    clone(update.get("tolerations") or []),
                    [],
                )
            except PodSetConflict as exc:
                raise PodSetConflict(f'in admission check "{check.get("name")}": {exc}') from exc
        out.append(info)
    return out


def from_workload(wl: dict) -> list[PodSetInfo]:
    """GetPodSetsInfoFromWorkload: what each pod set's template held when the Workload was made."""
    out = []
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        template = ps.get("template") or {}
        md, spec = template.get("metadata") or {}, template.get("spec") or {}
        out.append(
            PodSetInfo(
                name=ps.get("name", "main"),
                count=int(ps.get("count", 1)),
                labels=dict(md.get("labels") or {}),
                annotations=dict(md.get("annotations") or {}),
                node_selector=dict(spec.get("nodeSelector") or {}),
                tolerations=clone(spec.get("tolerations") or []),
                scheduling_gates=clone(spec.get("schedulingGates") or []),
            )
        )
    return out


def merge_into(template: dict, info: PodSetInfo) -> None:
    """podset.Merge: the info's labels, annotations, nodeSelector, tolerations and scheduling gates into a pod template;
    raises PodSetConflict (and leaves the template alone) when a key is already set to another value."""
    md, spec = template.get("metadata") or {}, template.get("spec") or {}
    merged = PodSetInfo(
        name=info.name,
        count=info.count,
        labels=dict(md.get("labels") or {}),
        annotations=dict(md.get("annotations") or {}),
        node_selector=dict(spec.get("nodeSelector") or {}),
        tolerations=clone(spec.get("tolerations") or []),
        scheduling_gates=clone(spec.get("schedulingGates") or []),
    )
    merged.merge(info.labels, info.annotations, info.node_selector, info.tolerations, info.scheduling_gates)
    _write(template, merged)


def restore_template(template: dict, info: PodSetInfo) -> bool:
    """podset.RestorePodSpec: the five fields exactly as recorded; True when anything changed."""
    before = clone(template)
    _write(template, info)
    return template != before


def _write(template: dict, info: PodSetInfo) -> None:
    for part, key, value in (
        ("metadata", "labels", info.labels),
        ("metadata", "annotations", info.annotations),
        ("spec", "nodeSelector", info.node_selector),
        ("spec", "tolerations", info.tolerations),
        ("spec", "schedulingGates", info.scheduling_gates),
    ):
        if value:
            template.setdefault(part, {})[key] = clone(value)
        elif isinstance(template.get(part), dict):
            template[part].pop(key, None)
    if template.get("metadata") == {}:
        del template["metadata"]
