"""Kueue's LeaderWorkerSet integration (upstream pkg/controller/jobs/leaderworkerset, framework
`leaderworkerset.x-k8s.io/leaderworkerset`; docs/research/job-integrations/kueue-integrations.md, section 7).

Not a job the jobframework suspends: a LeaderWorkerSet that names a queue gets one prebuilt Workload per group,
`leaderworkerset-<lws>-<i>-<hash>`, made before its pods exist (annotated as a group Workload of that LWS, the LWS a
non-controller owner); scaling down deletes the Workloads of the groups that went; the queue name and
WorkloadPriorityClass follow the LWS while a Workload holds no quota. The pods, gated by the pod webhook for their
parent, are labelled into their group (managed label, queue name, group name and prebuilt Workload = the Workload,
total count = the group size, role `leader` / `worker` / `main`); from there the pod integration
(kubesim.kueue.integrations.pod) admits, ungates and evicts them as a serving pod group, and the LWS controller
recreates evicted groups, gated again until re-admitted.
"""

from __future__ import annotations

from datetime import datetime

from kubesim.kernel.store import ChangeFeed, clone
from kubesim.kueue import constants as C
from kubesim.kueue.integrations import pod as P
from kubesim.kueue.integrations.jobframework import remove_in_use_finalizer
from kubesim.kueue.integrations.podsets import workload_name
from kubesim.kueue.scheduler.model import condition_true
from kubesim.kueue.state import KueueState

FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
GROUP = "leaderworkerset.x-k8s.io"
GVK = "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"
LWS_PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = LWS_PREFIX + "name"
GROUP_INDEX = LWS_PREFIX + "group-index"
LEADER_NAME = LWS_PREFIX + "leader-name"
JOB_OWNER_GVK = "kueue.x-k8s.io/job-owner-gvk"
JOB_OWNER_NAME = "kueue.x-k8s.io/job-owner-name"
COMPONENT_INDEX = "kueue.x-k8s.io/component-workload-index"


def _spec(lws: dict) -> dict:
    return lws.get("spec") or {}


def _template(lws: dict) -> dict:
    return _spec(lws).get("leaderWorkerTemplate") or {}


def group_size(lws: dict) -> int:
    return int(_template(lws).get("size", 1))


def group_workload_name(lws: dict, index: int) -> str:
    md = lws["metadata"]
    return workload_name(f"{md['name']}-{index}", md["uid"], KIND, GROUP)


def _pod_set_template(template: dict) -> dict:
    """The template as the pod set records it: LWS's own labels and annotations dropped (but its name label)."""
    template = clone(template or {})
    md = template.get("metadata") or {}
    for key in ("labels", "annotations"):
        kept = {k: v for k, v in (md.get(key) or {}).items() if not k.startswith(LWS_PREFIX) or k == NAME_LABEL}
        if kept:
            md[key] = kept
        else:
            md.pop(key, None)
    if not md:
        template.pop("metadata", None)
    return template


def pod_sets(lws: dict) -> list[dict]:
    """`leader` (1) and `worker` (size - 1) with a leader template, else `main` (size)."""
    template = _template(lws)
    size = group_size(lws)
    worker = _pod_set_template(template.get("workerTemplate") or {})
    if template.get("leaderTemplate"):
        return [
            {"name": "leader", "count": 1, "template": _pod_set_template(template["leaderTemplate"])},
            {"name": "worker", "count": size - 1, "template": worker},
        ]
    return [{"name": "main", "count": size, "template": worker}]


def role(pod: dict, lws: dict) -> str:
    if not _template(lws).get("leaderTemplate"):
        return "main"
    return "worker" if LEADER_NAME in ((pod["metadata"].get("annotations")) or {}) else "leader"


class LeaderWorkerSetReconciler:
    """Controller for the LeaderWorkerSet integration (kubesim.kernel.protocols.Controller)."""

    name = "kueue-leaderworkerset-controller"

    def __init__(self, state: KueueState) -> None:
        self.state = state
        self._feed = ChangeFeed("leaderworkersets", "pods", "workloads")

    def next_deadline(self, store) -> datetime | None:
        return None

    def reconcile(self, store) -> bool:
        events = self._feed.changed(store)
        if events is None:
            keys = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in store.list("leaderworkersets")}
        else:
            keys = set()
            for e in events:
                md = e.obj["metadata"]
                if e.resource == "leaderworkersets":
                    keys.add((md["namespace"], md["name"]))
                elif e.resource == "pods" and (md.get("labels") or {}).get(NAME_LABEL):
                    keys.add((md["namespace"], md["labels"][NAME_LABEL]))
                elif e.resource == "workloads" and (md.get("annotations") or {}).get(JOB_OWNER_GVK) == GVK:
                    keys.add((md["namespace"], md["annotations"].get(JOB_OWNER_NAME, "")))
        wrote = False
        for ns, name in sorted(keys):
            wrote = self._sync(store, ns, name) or wrote
        return wrote

    def _sync(self, store, ns: str, name: str) -> bool:
        lws = store.get("leaderworkersets", ns, name, copy=False)
        owned = [
            wl
            for wl in store.list("workloads", ns, copy=False)
            if (wl["metadata"].get("annotations") or {}).get(JOB_OWNER_GVK) == GVK
            and wl["metadata"]["annotations"].get(JOB_OWNER_NAME) == name
        ]
        queue = ((lws or {}).get("metadata", {}).get("labels") or {}).get(C.QUEUE_NAME_LABEL)
        if lws is None or lws["metadata"].get("deletionTimestamp") or not queue or ns in C.UNMANAGED_NAMESPACES:
            return self._release(store, owned)
        wanted = {group_workload_name(lws, i): i for i in range(int(_spec(lws).get("replicas", 1)))}
        wrote = False
        for wl in owned:  # scale down: the Workloads of groups that went
            if wl["metadata"]["name"] not in wanted and not wl["metadata"].get("deletionTimestamp"):
                store.delete("workloads", ns, wl["metadata"]["name"])
                wrote = True
        have = {wl["metadata"]["name"]: wl for wl in owned}
        for wl_name, index in wanted.items():
            wl = have.get(wl_name)
            if wl is None:
                wrote = self._create(store, lws, wl_name, index) or wrote
            else:
                wrote = self._follow(store, lws, wl) or wrote
        pods = store.list("pods", ns, {NAME_LABEL: name}, copy=False)
        for pod in pods:
            wrote = self._label_pod(store, lws, pod) or wrote
        return wrote

    @staticmethod
    def _release(store, owned: list[dict]) -> bool:
        wrote = False
        for wl in owned:
            if wl["metadata"].get("deletionTimestamp"):
                wrote = remove_in_use_finalizer(store, wl) or wrote
        return wrote

    def _priority(self, store, lws: dict) -> tuple[dict, bool]:
        """spec.priorityClassRef and priority from the LWS's WorkloadPriorityClass label; False when it is missing."""
        pc_name = (lws["metadata"].get("labels") or {}).get(C.PRIORITY_CLASS_LABEL)
        if not pc_name:
            return {"priority": 0}, True
        pc = store.get("workloadpriorityclasses", None, pc_name, copy=False)
        if pc is None:
            message = f'WorkloadPriorityClass "{pc_name}" not found'
            store.record_event(lws, "Warning", "WorkloadPriorityClassNotFound", message, C.CONTROLLER_NAME)
            return {}, False
        ref = {"group": C.KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": pc_name}
        return {"priorityClassRef": ref, "priority": int(pc.get("value", 0))}, True

    def _create(self, store, lws: dict, wl_name: str, index: int) -> bool:
        md = lws["metadata"]
        priority, found = self._priority(store, lws)
        if not found:
            return True
        wl = {
            "apiVersion": C.KUEUE_API,
            "kind": "Workload",
            "metadata": {
                "name": wl_name,
                "namespace": md["namespace"],
                "labels": {C.JOB_UID_LABEL: md["uid"]},
                "annotations": {
                    P.IS_GROUP_WORKLOAD: "true",
                    JOB_OWNER_GVK: GVK,
                    JOB_OWNER_NAME: md["name"],
                    COMPONENT_INDEX: str(index),
                },
                "finalizers": [C.RESOURCE_IN_USE_FINALIZER],
                "ownerReferences": [
                    {
                        "apiVersion": API_VERSION,
                        "kind": KIND,
                        "name": md["name"],
                        "uid": md["uid"],
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "active": True,
                "queueName": md["labels"][C.QUEUE_NAME_LABEL],
                **priority,
                "podSets": pod_sets(lws),
            },
        }
        store.create("workloads", wl)
        message = f"Created Workload: {md['namespace']}/{wl_name}"
        store.record_event(lws, "Normal", "CreatedWorkload", message, C.CONTROLLER_NAME)
        return True

    def _follow(self, store, lws: dict, wl: dict) -> bool:
        """A Workload holding no quota follows the LWS's queue name and priority class."""
        if condition_true(wl, C.QUOTA_RESERVED) or wl["metadata"].get("deletionTimestamp"):
            return False
        priority, found = self._priority(store, lws)
        wanted = {"queueName": lws["metadata"]["labels"][C.QUEUE_NAME_LABEL], **(priority if found else {})}
        if all(wl["spec"].get(k) == v for k, v in wanted.items()):
            return False
        wl = clone(wl)
        wl["spec"].update(wanted)
        store.update("workloads", wl)
        return True

    @staticmethod
    def _label_pod(store, lws: dict, pod: dict) -> bool:
        """What the LWS reconciler sets on each group pod so the pod integration takes it as a group member."""
        md = pod["metadata"]
        labels, annotations = md.get("labels") or {}, md.get("annotations") or {}
        if GROUP_INDEX not in labels or md.get("deletionTimestamp") or P.terminated(pod):
            return False
        wl_name = group_workload_name(lws, int(labels[GROUP_INDEX]))
        want_labels = {P.MANAGED_LABEL: "true"}
        if P.gated(pod):
            want_labels[C.QUEUE_NAME_LABEL] = lws["metadata"]["labels"][C.QUEUE_NAME_LABEL]
        want_annotations = {
            P.GROUP_NAME: wl_name,
            P.PREBUILT_WORKLOAD: wl_name,
            P.GROUP_TOTAL_COUNT: str(group_size(lws)),
            P.ROLE_HASH: role(pod, lws),
        }
        if all(labels.get(k) == v for k, v in want_labels.items()) and all(
            annotations.get(k) == v for k, v in want_annotations.items()
        ):
            return False
        pod = clone(pod)
        pod["metadata"]["labels"] = {**labels, **want_labels}
        pod["metadata"]["annotations"] = {**annotations, **want_annotations}
        store.update("pods", pod)
        return True
