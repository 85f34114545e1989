"""The Kubeflow training-operator's PyTorchJob controller (v1.9.4, the release Kueue v0.20 tests with), as the cluster
runs it beside Kubernetes' own controllers: one pod and one headless Service per replica (`<job>-master-0`,
`<job>-worker-<i>`, labelled as the operator labels them, with torchrun's MASTER_ADDR, MASTER_PORT, WORLD_SIZE and
RANK), suspend (pods and Services deleted) and resume, status.replicaStatuses and the conditions the operator keeps:
each new condition is appended last (so `kubectl get`'s STATE column, the last condition's type, is the latest) and
is also an Event. The operator's defaults (docs/research/job-integrations/status-and-tables.md) are applied in memory,
never written back, as the operator does. Not emulated: elastic policy, backoffLimit, activeDeadlineSeconds,
ttlSecondsAfterFinished, restartPolicy ExitCode's retries, gang scheduling through scheduler plugins."""

from __future__ import annotations

import uuid

from kubesim.apiserver.validation import builtin
from kubesim.kernel.clock import rfc3339
from kubesim.kernel.store import ChangeFeed, Store, clone, controller_reference

COMPONENT = "pytorchjob-controller"
CONTROLLER_NAME = "kubeflow.org/training-operator"
JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
OPERATOR_NAME = "training.kubeflow.org/operator-name"
JOB_ROLE = "training.kubeflow.org/job-role"
REPLICA_TYPES = ("Master", "Worker")
DEFAULT_CONTAINER, PORT_NAME, DEFAULT_PORT = "pytorch", "pytorchjob-port", 23456
CREATED, RUNNING, SUCCEEDED, FAILED, SUSPENDED = "Created", "Running", "Succeeded", "Failed", "Suspended"


def defaulted(job: dict) -> dict:
    """SetDefaults_PyTorchJob on a copy: replica types in CamelCase, replicas 1, restartPolicy OnFailure, the
    `pytorchjob-port` on the `pytorch` container, cleanPodPolicy None."""
    job = clone(job)
    spec = job.setdefault("spec", {})
    spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", "None")
    specs = spec.get("pytorchReplicaSpecs") or {}
    for rtype in REPLICA_TYPES:
        for key in list(specs):
            if key.lower() == rtype.lower() and key != rtype:
                specs[rtype] = specs.pop(key)
    for rspec in specs.values():
        rspec.setdefault("replicas", 1)
        rspec.setdefault("restartPolicy", "OnFailure")
        pod_spec = rspec.setdefault("template", {}).setdefault("spec", {})
        for container in pod_spec.get("containers") or []:
            ports = container.setdefault("ports", [])
            if container.get("name") == DEFAULT_CONTAINER and not any(p.get("name") == PORT_NAME for p in ports):
                ports.append({"name": PORT_NAME, "containerPort": DEFAULT_PORT, "protocol": "TCP"})
    return job


def replica_specs(job: dict) -> list[tuple[str, dict]]:
    """(type, spec) in the operator's order: Master first."""
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return [(t, specs[t]) for t in REPLICA_TYPES if t in specs]


def suspended(job: dict) -> bool:
    return bool(((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


def condition_true(job: dict, ctype: str) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions)


def finished(job: dict) -> bool:
    return condition_true(job, SUCCEEDED) or condition_true(job, FAILED)


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def _selector(job: dict, rtype: str) -> dict[str, str]:
    return {JOB_NAME: job["metadata"]["name"], OPERATOR_NAME: COMPONENT, REPLICA_TYPE: rtype.lower()}


class _Conditions:
    """updateJobConditions: a new condition replaces the old one of its type and goes last; Succeeded and Failed
    set Running False; Running and Restarting replace each other; nothing changes once Failed."""

    def __init__(self, status: dict, now: str) -> None:
        self.status, self.now = status, now
        self.events: list[tuple[str, str, str]] = []

    def set(self, ctype: str, value: str, reason: str, message: str) -> None:
        conditions = self.status.setdefault("conditions", [])
        if any(c["type"] == FAILED and c["status"] == "True" for c in conditions):
            return
        current = next((c for c in conditions if c["type"] == ctype), None)
        if current is not None and (current["status"], current["reason"], current["message"]) == (
            value,
            reason,
            message,
        ):
            return
        since = current["lastTransitionTime"] if current is not None and current["status"] == value else self.now
        kept = [c for c in conditions if c["type"] != ctype]
        if ctype in (SUCCEEDED, FAILED):
            for c in kept:
                if c["type"] == RUNNING and c["status"] == "True":
                    c.update(status="False", lastUpdateTime=self.now, lastTransitionTime=self.now)
        new = {"type": ctype, "status": value, "reason": reason, "message": message,
               "lastUpdateTime": self.now, "lastTransitionTime": since}
        self.status["conditions"] = [*kept, new]
        self.events.append(("Normal" if ctype != FAILED else "Warning", reason, message))


class PyTorchJobController:
    """Controller protocol implementation for kubeflow.org/v1 PyTorchJobs."""

    name = COMPONENT

    def __init__(self) -> None:
        self._feed = ChangeFeed("pytorchjobs", "pods", "services")

    def next_deadline(self, store: Store) -> None:
        return None

    def reconcile(self, store: Store) -> bool:
        events = self._feed.changed(store)
        if events is None:
            keys = {(j["metadata"]["namespace"], j["metadata"]["name"]) for j in store.list("pytorchjobs", copy=False)}
        else:
            keys = set()
            for ev in events:
                md = ev.obj["metadata"]
                if ev.resource == "pytorchjobs":
                    keys.add((md["namespace"], md["name"]))
                    continue
                ref = next((r for r in md.get("ownerReferences") or [] if r.get("controller")), None)
                if ref is not None and ref.get("kind") == "PyTorchJob":
                    keys.add((md["namespace"], ref.get("name", "")))
        wrote = False
        for namespace, name in sorted(keys):
            stored = store.get("pytorchjobs", namespace, name, copy=False)
            if stored is not None:
                wrote = self._sync(store, stored) or wrote
        return wrote

    # -- one PyTorchJob ----------------------------------------------------------------------------------------

    def _sync(self, store: Store, stored: dict) -> bool:
        md = stored["metadata"]
        managed_by = ((stored.get("spec") or {}).get("runPolicy") or {}).get("managedBy")
        if md.get("deletionTimestamp") or (managed_by is not None and managed_by != CONTROLLER_NAME):
            return False
        job = defaulted(stored)
        status = clone(stored.get("status") or {})
        now = rfc3339(store.now())
        conditions = _Conditions(status, now)
        name = md["name"]
        if not status.get("conditions"):
            conditions.set(CREATED, "True", "PyTorchJobCreated", f"PyTorchJob {name} is created.")
        pods = [p for _, p in store.dependents(md["uid"], "pods") if _owned_by(p, md["uid"])]
        services = [s for _, s in store.dependents(md["uid"], "services") if _owned_by(s, md["uid"])]
        wrote = False
        if finished(stored):
            wrote = self._clean_pods(store, job, pods)
        elif suspended(job):
            wrote = self._delete(store, "pods", pods)
            wrote = self._delete(store, "services", services) or wrote
            pods = []
            status.pop("startTime", None)
            conditions.set(RUNNING, "False", "PyTorchJobSuspended", f"PyTorchJob {name} is suspended.")
            conditions.set(SUSPENDED, "True", "PyTorchJobSuspended", f"PyTorchJob {name} is suspended.")
        else:
            if condition_true(stored, SUSPENDED):
                conditions.set(SUSPENDED, "False", "PyTorchJobResumed", f"PyTorchJob {name} is resumed.")
                status["startTime"] = now
            status.setdefault("startTime", now)
            wrote = self._create_missing(store, job, pods, services)
        status["replicaStatuses"] = {rtype: _replica_status(job, rtype, pods) for rtype, _ in replica_specs(job)}
        if not finished(stored) and not suspended(job):
            self._judge(job, status, conditions, now)
        if status != (stored.get("status") or {}):
            job_obj = clone(stored)
            job_obj["status"] = status
            store.update_status("pytorchjobs", job_obj)
            for type_, reason, message in conditions.events:
                store.record_event(stored, type_, reason, message, COMPONENT)
            wrote = True
        return wrote

    @staticmethod
    def _judge(job: dict, status: dict, conditions: _Conditions, now: str) -> None:
        """updateJobStatus: Running while the Master has pods (the Workers without a Master); Succeeded when the Master
        (without one, every Worker) succeeded; Failed when a replica failed under restartPolicy Never."""
        md, statuses = job["metadata"], status["replicaStatuses"]
        specs = dict(replica_specs(job))
        leader = "Master" if "Master" in specs else "Worker"
        for rtype, rspec in specs.items():
            counts = statuses[rtype]
            if counts.get("failed", 0) > 0 and rspec.get("restartPolicy") in ("Never", "ExitCode"):
                message = f"PyTorchJob {md['name']} is failed because {counts['failed']} {rtype} replica(s) failed."
                conditions.set(FAILED, "True", "PyTorchJobFailed", message)
                status.setdefault("completionTime", now)
                return
        counts = statuses[leader]
        expected = int(specs[leader].get("replicas", 1)) - counts.get("succeeded", 0)
        if leader == "Master":
            done_message, running_message = (f"PyTorchJob {md['name']} is successfully completed.",
                                             f"PyTorchJob {md['name']} is running.")
        else:
            done_message, running_message = (f"PyTorchJob {md['namespace']}/{md['name']} successfully completed.",
                                              f"PyTorchJob {md['namespace']}/{md['name']} is running.")
        if expected == 0:
            conditions.set(SUCCEEDED, "True", "PyTorchJobSucceeded", done_message)
            status.setdefault("completionTime", now)
        elif counts.get("active", 0) > 0:
            conditions.set(RUNNING, "True", "PyTorchJobRunning", running_message)

    # -- pods and Services -------------------------------------------------------------------------------------

    def _create_missing(self, store: Store, job: dict, pods: list[dict], services: list[dict]) -> bool:
        have_pods = {p["metadata"]["name"] for p in pods}
        have_services = {s["metadata"]["name"] for s in services}
        wrote = False
        world = sum(int(rspec.get("replicas", 1)) for _, rspec in replica_specs(job))
        rank = 0
        for rtype, rspec in replica_specs(job):
            for index in range(int(rspec.get("replicas", 1))):
                name = f"{job['metadata']['name']}-{rtype.lower()}-{index}"
                if name not in have_pods:
                    self._create_pod(store, job, rtype, rspec, index, rank, world)
                    wrote = True
                if name not in have_services:
                    self._create_service(store, job, rtype, rspec, index)
                    wrote = True
                rank += 1
        return wrote

    def _create_pod(self, store: Store, job: dict, rtype: str, rspec: dict, index: int, rank: int, world: int) -> None:
        md = job["metadata"]
        template = clone(rspec.get("template") or {})
        tmd = template.get("metadata") or {}
        labels = {**(tmd.get("labels") or {}), **_selector(job, rtype), REPLICA_INDEX: str(index)}
        if rtype == "Master":
            labels[JOB_ROLE] = "master"
        pod_spec = template.get("spec") or {}
        restart = rspec.get("restartPolicy", "OnFailure")
        pod_spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
        master = "Master" if "Master" in dict(replica_specs(job)) else "Worker"
        master_addr = f"{md['name']}-{master.lower()}-0"
        for container in pod_spec.get("containers") or []:
            if container.get("name") != DEFAULT_CONTAINER:
                continue
            env = [e for e in container.get("env") or [] if e.get("name") not in _TORCH_ENV]
            env += [
                {"name": "MASTER_PORT", "value": str(DEFAULT_PORT)},
                {"name": "MASTER_ADDR", "value": "localhost" if rtype == master and index == 0 else master_addr},
                {"name": "WORLD_SIZE", "value": str(world)},
                {"name": "RANK", "value": str(rank)},
                {"name": "PYTHONUNBUFFERED", "value": "1"},
            ]
            container["env"] = env
        pod = {
            "metadata": {
                "name": f"{md['name']}-{rtype.lower()}-{index}",
                "namespace": md["namespace"],
                "labels": labels,
                "annotations": dict(tmd.get("annotations") or {}),
                "ownerReferences": [controller_reference(job)],
                "uid": str(uuid.uuid4()),
            },
            "spec": pod_spec,
        }
        builtin.apply_defaults("pods", pod, None)  # as kube-apiserver defaults a pod the controller creates
        store.create("pods", pod)
        store.record_event(job, "Normal", "SuccessfulCreatePod", f"Created pod: {pod['metadata']['name']}", COMPONENT)

    @staticmethod
    def _create_service(store: Store, job: dict, rtype: str, rspec: dict, index: int) -> None:
        md = job["metadata"]
        name = f"{md['name']}-{rtype.lower()}-{index}"
        containers = ((rspec.get("template") or {}).get("spec") or {}).get("containers") or []
        port = next((p for c in containers if c.get("name") == DEFAULT_CONTAINER for p in c.get("ports") or []
                     if p.get("name") == PORT_NAME), {"containerPort": DEFAULT_PORT})
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": md["namespace"],
                "labels": {**_selector(job, rtype), REPLICA_INDEX: str(index)},
                "ownerReferences": [controller_reference(job)],
            },
            "spec": {
                "clusterIP": "None",
                "clusterIPs": ["None"],
                "type": "ClusterIP",
                "selector": {**_selector(job, rtype), REPLICA_INDEX: str(index)},
                "ports": [{"name": PORT_NAME, "port": port["containerPort"], "protocol": "TCP",
                           "targetPort": port["containerPort"]}],
            },
        }
        store.create("services", service)
        store.record_event(job, "Normal", "SuccessfulCreateService", f"Created service: {name}", COMPONENT)

    def _clean_pods(self, store: Store, job: dict, pods: list[dict]) -> bool:
        """cleanPodPolicy once finished: None keeps the pods, Running deletes the running ones, All every one."""
        policy = job["spec"]["runPolicy"]["cleanPodPolicy"]
        if policy == "All":
            return self._delete(store, "pods", pods)
        if policy == "Running":
            return self._delete(store, "pods", [p for p in pods if _phase(p) in ("Pending", "Running")])
        return False

    @staticmethod
    def _delete(store: Store, resource: str, objs: list[dict]) -> bool:
        wrote = False
        for obj in objs:
            if not obj["metadata"].get("deletionTimestamp"):
                store.delete(resource, obj["metadata"]["namespace"], obj["metadata"]["name"])
                wrote = True
        return wrote


_TORCH_ENV = frozenset({"MASTER_PORT", "MASTER_ADDR", "WORLD_SIZE", "RANK", "PYTHONUNBUFFERED"})


def _owned_by(obj: dict, uid: str) -> bool:
    return any(r.get("uid") == uid and r.get("controller") for r in obj["metadata"].get("ownerReferences") or [])


def _replica_status(job: dict, rtype: str, pods: list[dict]) -> dict:
    """One replica type's counts: active (pending or running pods), succeeded, failed; and its label selector."""
    mine = [p for p in pods if (p["metadata"].get("labels") or {}).get(REPLICA_TYPE) == rtype.lower()]
    phases = [_phase(p) for p in mine if not p["metadata"].get("deletionTimestamp")]
    out: dict = {"selector": ",".join(f"{k}={v}" for k, v in sorted(_selector(job, rtype).items()))}
    for key, wanted in (("active", ("Pending", "Running")), ("succeeded", ("Succeeded",)), ("failed", ("Failed",))):
        count = sum(1 for phase in phases if phase in wanted)
        if count:
            out[key] = count
    return out
