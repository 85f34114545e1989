"""KubeRay's RayCluster controller (ray-project/kuberay v1.7.0, ray-operator with its default feature gates), as the
cluster runs it beside Kubernetes' own controllers: a head Service `<cluster>-head-svc`, one head pod
(`<cluster>-head-<suffix>`) and `replicas x numOfHosts` pods per worker group (`<cluster>-<group>-worker-<suffix>`),
labelled as KubeRay labels them; each Ray container runs `ray start ... --block`, which the kubelet keeps running
until the pod is deleted. Suspending deletes every pod (Kueue suspends a queued cluster); status follows KubeRay's
calculateStatus: `state` ready once the head and all desired workers run and are ready, suspended once a suspended
cluster has no pods; worker counts, the desired CPU / memory / GPU / TPU sums, the head pod's IP and the
RayClusterProvisioned, HeadPodReady, RayClusterSuspending and RayClusterSuspended conditions. Deleting a RayCluster
cascades to its pods and Service through their owner references, as the garbage collector does."""

from __future__ import annotations

import shlex

from kubesim.apiserver.validation import builtin
from kubesim.kernel.clock import rfc3339
from kubesim.kernel.quantity import QuantityError, format_amount, to_amount
from kubesim.kernel.store import ChangeFeed, Store, clone, controller_reference

COMPONENT = "raycluster-controller"
OPERATOR = "ray.io/kuberay-operator"
CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
HEAD_GROUP = "headgroup"
DASHBOARD_PORT = 8265


def spec_of(obj: dict) -> dict:
    return obj.get("spec") or {}


def suspended(cluster: dict) -> bool:
    return spec_of(cluster).get("suspend") is True


def worker_groups(cluster: dict) -> list[dict]:
    return spec_of(cluster).get("workerGroupSpecs") or []


def group_size(group: dict) -> int:
    """The pods one worker group wants: replicas (the CRD defaults it; a missing value counts as its minimum)
    times numOfHosts."""
    replicas = group.get("replicas", group.get("minReplicas", 0))
    return int(replicas) * max(int(group.get("numOfHosts", 1)), 1)


def head_service_name(cluster: dict) -> str:
    head_service = (spec_of(cluster).get("headGroupSpec") or {}).get("headService") or {}
    return (head_service.get("metadata") or {}).get("name") or f"{cluster['metadata']['name']}-head-svc"


def _controlled_by(obj: dict, uid: str) -> bool:
    return any(r.get("uid") == uid and r.get("controller") for r in obj["metadata"].get("ownerReferences") or [])


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def _ready(pod: dict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return _phase(pod) == "Running" and any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _start_command(node_type: str, params: dict, cluster: dict) -> str:
    """KubeRay's generated `ray start` line (head: --head with the dashboard on all interfaces; worker: the head
    Service's address)."""
    args = ["ray", "start"]
    if node_type == "head":
        args += ["--head", "--dashboard-host=0.0.0.0"]
    else:
        namespace = cluster["metadata"]["namespace"]
        args.append(f"--address={head_service_name(cluster)}.{namespace}.svc.cluster.local:6379")
    args += [f"--{key}={value}" for key, value in sorted(params.items())]
    return "ulimit -n 65536; " + shlex.join([*args, "--block"])


def _resources(cluster: dict) -> dict[str, int]:
    """CalculateDesiredResources: the head's and every desired worker's container requests (limits where no request),
    in Kueue's integer units."""
    groups = [(spec_of(cluster).get("headGroupSpec") or {}, 1)] + [(g, group_size(g)) for g in worker_groups(cluster)]
    total: dict[str, int] = {}
    for group, count in groups:
        for c in ((group.get("template") or {}).get("spec") or {}).get("containers") or []:
            res = c.get("resources") or {}
            for name, value in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
                try:
                    total[name] = total.get(name, 0) + to_amount(name, value) * count
                except QuantityError:
                    continue
    return total


class RayClusterController:
    """Controller protocol implementation for ray.io/v1 RayClusters."""

    name = COMPONENT

    def __init__(self) -> None:
        self._feed = ChangeFeed("rayclusters", "pods")

    def reconcile(self, store: Store) -> bool:
        """Sync the RayClusters touched since the last pass (their own writes or their pods'); all after a gap."""
        events = self._feed.changed(store)
        if events is None:
            keys = {(c["metadata"]["namespace"], c["metadata"]["name"]) for c in store.list("rayclusters", copy=False)}
        else:
            keys = set()
            for ev in events:
                md = ev.obj["metadata"]
                if ev.resource == "rayclusters":
                    keys.add((md["namespace"], md["name"]))
                elif cluster := (md.get("labels") or {}).get(CLUSTER_LABEL):
                    keys.add((md["namespace"], cluster))
        wrote = False
        for namespace, name in sorted(keys):
            stored = store.get("rayclusters", namespace, name, copy=False)
            if stored is not None:
                wrote = self._sync(store, stored) or wrote
        return wrote

    def next_deadline(self, store: Store) -> None:
        return None

    def _sync(self, store: Store, stored: dict) -> bool:
        md = stored["metadata"]
        managed_by = spec_of(stored).get("managedBy")
        if md.get("deletionTimestamp") or (managed_by is not None and managed_by != OPERATOR):
            return False
        cluster = clone(stored)
        pods = [p for _, p in store.dependents(md["uid"], "pods") if _controlled_by(p, md["uid"])]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        wrote = False
        if suspended(cluster):
            for pod in live:
                self._delete_pod(store, cluster, pod)
                wrote = True
        else:
            wrote = self._ensure_service(store, cluster)
            wrote = self._ensure_pods(store, cluster, live) or wrote
        pods = [p for _, p in store.dependents(md["uid"], "pods") if _controlled_by(p, md["uid"])]
        return self._write_status(store, cluster, pods) or wrote

    # -- pods and the head Service -------------------------------------------------------------------------------

    def _ensure_service(self, store: Store, cluster: dict) -> bool:
        name, namespace = head_service_name(cluster), cluster["metadata"]["namespace"]
        if store.get("services", namespace, name, copy=False) is not None:
            return False
        labels = {CLUSTER_LABEL: cluster["metadata"]["name"], NODE_TYPE_LABEL: "head"}
        ports = [
            {"name": "gcs-server", "port": 6379, "protocol": "TCP", "targetPort": 6379},
            {"name": "dashboard", "port": DASHBOARD_PORT, "protocol": "TCP", "targetPort": DASHBOARD_PORT},
            {"name": "client", "port": 10001, "protocol": "TCP", "targetPort": 10001},
        ]
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {**labels, "app.kubernetes.io/created-by": "kuberay-operator"},
                "ownerReferences": [controller_reference(cluster)],
            },
            "spec": {"type": "ClusterIP", "selector": labels, "ports": ports},
        }
        store.create("services", service)
        return True

    def _ensure_pods(self, store: Store, cluster: dict, live: list[dict]) -> bool:
        """reconcilePods: one head pod; each worker group's missing pods created, extra ones deleted (newest
        first)."""
        wrote = False
        heads = [p for p in live if (p["metadata"].get("labels") or {}).get(NODE_TYPE_LABEL) == "head"]
        if not heads:
            self._create_pod(store, cluster, spec_of(cluster).get("headGroupSpec") or {}, "head", HEAD_GROUP)
            wrote = True
        for group in worker_groups(cluster):
            name = group.get("groupName", "")
            mine = [
                p
                for p in live
                if (p["metadata"].get("labels") or {}).get(GROUP_LABEL) == name
                and (p["metadata"].get("labels") or {}).get(NODE_TYPE_LABEL) == "worker"
            ]
            want = group_size(group)
            for _ in range(want - len(mine)):
                self._create_pod(store, cluster, group, "worker", name)
                wrote = True
            for pod in sorted(mine, key=lambda p: p["metadata"]["creationTimestamp"], reverse=True)[
                : max(0, len(mine) - want)
            ]:
                self._delete_pod(store, cluster, pod)
                wrote = True
        return wrote

    def _create_pod(self, store: Store, cluster: dict, group: dict, node_type: str, group_name: str) -> None:
        """BuildPod: the group's template, KubeRay's labels, and the Ray container (the first) running `ray start`."""
        md = cluster["metadata"]
        template = clone(group.get("template") or {})
        tmd = template.get("metadata") or {}
        pod_spec = template.get("spec") or {}
        labels = {
            **(tmd.get("labels") or {}),
            CLUSTER_LABEL: md["name"],
            NODE_TYPE_LABEL: node_type,
            GROUP_LABEL: group_name,
            "ray.io/identifier": f"{md['name']}-{node_type}",
            "ray.io/is-ray-node": "yes",
            "app.kubernetes.io/name": "kuberay",
            "app.kubernetes.io/created-by": "kuberay-operator",
        }
        containers = pod_spec.get("containers") or []
        if containers and not containers[0].get("command"):
            user_args = " ".join(str(a) for a in containers[0].pop("args", None) or [])
            start = _start_command(node_type, group.get("rayStartParams") or {}, cluster)
            containers[0]["command"] = ["/bin/bash", "-c", "--"]
            containers[0]["args"] = [f"{user_args}; {start}" if user_args else start]
        prefix = f"{md['name']}-head-" if node_type == "head" else f"{md['name']}-{group_name}-worker-"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": prefix,
                "namespace": md["namespace"],
                "labels": labels,
                "annotations": dict(tmd.get("annotations") or {}),
                "ownerReferences": [controller_reference(cluster)],
            },
            "spec": pod_spec,
        }
        builtin.apply_defaults("pods", pod, None)  # as kube-apiserver defaults a pod the controller creates
        created = store.create("pods", pod)
        reason, what = ("CreatedHeadPod", "head") if node_type == "head" else ("CreatedWorkerPod", "worker")
        message = f"Created {what} Pod {md['namespace']}/{created['metadata']['name']}"
        store.record_event(cluster, "Normal", reason, message, COMPONENT)

    @staticmethod
    def _delete_pod(store: Store, cluster: dict, pod: dict) -> None:
        pmd = pod["metadata"]
        store.delete("pods", pmd["namespace"], pmd["name"])
        head = (pmd.get("labels") or {}).get(NODE_TYPE_LABEL) == "head"
        reason, what = ("DeletedHeadPod", "head") if head else ("DeletedWorkerPod", "worker")
        store.record_event(cluster, "Normal", reason, f"Deleted {what} Pod {pmd['namespace']}/{pmd['name']}", COMPONENT)

    # -- status --------------------------------------------------------------------------------------------------

    def _write_status(self, store: Store, cluster: dict, pods: list[dict]) -> bool:
        """calculateStatus, written only when it changed."""
        now = rfc3339(store.now())
        old = clone(cluster.get("status") or {})
        status = cluster.setdefault("status", {})
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        workers = [p for p in live if (p["metadata"].get("labels") or {}).get(NODE_TYPE_LABEL) == "worker"]
        head = next((p for p in live if (p["metadata"].get("labels") or {}).get(NODE_TYPE_LABEL) == "head"), None)
        groups = worker_groups(cluster)
        desired = sum(group_size(g) for g in groups)
        status["observedGeneration"] = cluster["metadata"].get("generation", 1)
        status["readyWorkerReplicas"] = sum(1 for p in workers if _ready(p))
        status["availableWorkerReplicas"] = sum(1 for p in workers if _phase(p) == "Running")
        status["desiredWorkerReplicas"] = desired
        status["minWorkerReplicas"] = sum(
            int(g.get("minReplicas", 0)) * max(int(g.get("numOfHosts", 1)), 1) for g in groups
        )
        status["maxWorkerReplicas"] = sum(
            int(g.get("maxReplicas", 0)) * max(int(g.get("numOfHosts", 1)), 1) for g in groups
        )
        amounts = _resources(cluster)
        status["desiredCPU"] = format_amount("cpu", amounts.get("cpu", 0))
        status["desiredMemory"] = format_amount("memory", amounts.get("memory", 0))
        status["desiredGPU"] = str(sum(v for k, v in amounts.items() if k.endswith("gpu")))
        status["desiredTPU"] = str(amounts.get("google.com/tpu", 0))
        all_ready = bool(live) and all(_ready(p) for p in live)
        if len(live) == desired + 1 and all_ready and not suspended(cluster):
            self._state(status, "ready", now)
        if suspended(cluster) and not pods:
            self._state(status, "suspended", now)
        if head is not None and (head.get("status") or {}).get("podIP"):
            status.setdefault("head", {})["podIP"] = head["status"]["podIP"]
        elif "head" in status:
            status["head"].pop("podIP", None)
        self._conditions(cluster, status, head, all_ready, not pods, now)
        if status == old:
            return False
        store.update_status("rayclusters", cluster)
        return True

    @staticmethod
    def _state(status: dict, state: str, now: str) -> None:
        if status.get("state") != state:
            status["state"] = state
            status.setdefault("stateTransitionTimes", {})[state] = now
        status.pop("reason", None)

    @staticmethod
    def _conditions(cluster: dict, status: dict, head: dict | None, all_ready: bool, no_pods: bool, now: str) -> None:
        """The RayClusterStatusConditions conditions (on by default in v1.7.0)."""
        conditions = status.setdefault("conditions", [])

        def find(type_: str) -> dict | None:
            return next((c for c in conditions if c.get("type") == type_), None)

        def put(type_: str, value: str, reason: str, message: str = "") -> None:
            cur = find(type_)
            if cur is None:
                conditions.append(
                    {"type": type_, "status": value, "reason": reason, "message": message, "lastTransitionTime": now}
                )
                return
            if cur["status"] != value:
                cur["lastTransitionTime"] = now
            cur.update({"status": value, "reason": reason, "message": message})

        if head is None:
            put("HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found")
        elif _ready(head):
            put("HeadPodReady", "True", "HeadPodRunningAndReady")
        else:
            put("HeadPodReady", "False", "HeadPodNotReady")
        suspend_state = (
            "Suspended"
            if (find("RayClusterSuspended") or {}).get("status") == "True"
            else "Suspending"
            if (find("RayClusterSuspending") or {}).get("status") == "True"
            else ""
        )
        provisioned = (find("RayClusterProvisioned") or {}).get("status") == "True"
        if not provisioned and suspend_state != "Suspended":
            if all_ready:
                put(
                    "RayClusterProvisioned",
                    "True",
                    "AllPodRunningAndReadyFirstTime",
                    "All Ray Pods are ready for the first time",
                )
            else:
                put(
                    "RayClusterProvisioned",
                    "False",
                    "RayClusterPodsProvisioning",
                    "RayCluster Pods are being provisioned for first time",
                )
        if suspend_state == "Suspending":
            if no_pods:
                put("RayClusterProvisioned", "False", "RayClusterPodsProvisioning", "RayCluster has been suspended")
                put("RayClusterSuspending", "False", "RayClusterSuspending")
                put("RayClusterSuspended", "True", "RayClusterSuspended")
        elif suspend_state == "Suspended":
            if not suspended(cluster):
                put("RayClusterSuspended", "False", "RayClusterSuspended")
        else:
            put("RayClusterSuspended", "False", "RayClusterSuspended")
            put("RayClusterSuspending", "True" if suspended(cluster) else "False", "RayClusterSuspending")
