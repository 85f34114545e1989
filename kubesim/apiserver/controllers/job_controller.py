"""The batch/v1 Job controller: creates pods for unsuspended Jobs, deletes them on suspend, and keeps
Job status (active, ready, succeeded, failed, startTime, completionTime, conditions) as Kubernetes does."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta

from kubesim.apiserver.validation import builtin
from kubesim.kernel.clock import parse_rfc3339, rfc3339
from kubesim.kernel.store import ChangeFeed, Store, clone, controller_reference

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPONENT = "job-controller"
BACKOFF_BASE_SECONDS = 10
BACKOFF_MAX_SECONDS = 360


def _by_owner(pods: list[dict]) -> dict[str, list[dict]]:
    """Pods grouped by the uid of their controller owner."""
    out: dict[str, list[dict]] = {}
    for p in pods:
        for ref in p["metadata"].get("ownerReferences") or []:
            if ref.get("controller"):
                out.setdefault(ref.get("uid", ""), []).append(p)
    return out


def _controlled_by(pod: dict, uid: str) -> bool:
    return any(r.get("uid") == uid and r.get("controller") for r in pod["metadata"].get("ownerReferences") or [])


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def _index(pod: dict) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


def _condition(status: dict, type_: str) -> dict | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


def _set_condition(status: dict, type_: str, value: str, reason: str, message: str, now: str) -> None:
    conds = status.setdefault("conditions", [])
    cur = _condition(status, type_)
    if cur is None:
        conds.append(
            {
                "type": type_,
                "status": value,
                "reason": reason,
                "message": message,
                "lastProbeTime": now,
                "lastTransitionTime": now,
            }
        )
        return
    if cur["status"] != value:
        cur["lastTransitionTime"] = now
    cur.update({"status": value, "reason": reason, "message": message, "lastProbeTime": now})


def finished(job: dict) -> bool:
    status = job.get("status") or {}
    return any((_condition(status, t) or {}).get("status") == "True" for t in ("Complete", "Failed"))


def _compress(indexes: set[int]) -> str:
    """Kubernetes' interval notation for completed indexes, e.g. "0-2,5"."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(indexes):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


class JobController:
    """Controller protocol implementation for batch/v1 Jobs."""

    name = "job-controller"

    def __init__(self) -> None:
        self._feed = ChangeFeed("jobs", "pods")
        self._now: datetime | None = None
        self._deadline: tuple[int, datetime | None] | None = None
        self._synced: dict[str, tuple] = {}  # job uid -> inputs of its last sync that wrote nothing
        self._timed: set[tuple[str, str]] = set()  # Jobs whose sync depends on the time

    def reconcile(self, store: Store) -> bool:
        """Sync the Jobs touched since the last pass (their own writes or their pods'), plus, when time moved,
        the Jobs whose state depends on time (deadline, failure backoff); all Jobs after a history gap."""
        now = store.now()
        events = self._feed.changed(store)
        if events is None:
            self._now = now
            return self._sync_all(store, now)
        touched: set[tuple[str, str]] = set()
        for ev in events:
            md = ev.obj["metadata"]
            if ev.resource == "jobs":
                touched.add((md["namespace"], md["name"]))
                continue
            for ref in md.get("ownerReferences") or []:
                where = store.by_uid(ref.get("uid", "")) if ref.get("controller") else None
                if where is not None and where[0] == "jobs":
                    touched.add((where[1], where[2]))
        if now != self._now:
            self._now = now
            touched |= self._timed
        wrote = False
        for namespace, name in sorted(touched):
            job = store.get("jobs", namespace, name, copy=False)
            if job is None:
                self._timed.discard((namespace, name))
                continue
            uid = job["metadata"]["uid"]
            pods = [p for _, p in store.dependents(uid, "pods") if _controlled_by(p, uid)]
            wrote |= self._maybe_sync(store, job, pods, now)
        return wrote

    def _sync_all(self, store: Store, now: datetime) -> bool:
        owned = _by_owner(store.list("pods", copy=False))
        wrote = False
        for job in store.list("jobs", copy=False):
            wrote |= self._maybe_sync(store, job, owned.get(job["metadata"]["uid"], []), now)
        return wrote

    def _maybe_sync(self, store: Store, job: dict, pods: list[dict], now: datetime) -> bool:
        uid = job["metadata"]["uid"]
        where = (job["metadata"]["namespace"], job["metadata"]["name"])
        if job["metadata"].get("deletionTimestamp") or (
            finished(job) and not any(_phase(p) in ("Pending", "Running") for p in pods)
        ):
            self._timed.discard(where)
            return False
        inputs = self._inputs(job, pods, now)
        if inputs[2] is None:
            self._timed.discard(where)
        else:
            self._timed.add(where)
        if self._synced.get(uid) == inputs:
            return False
        if self._sync(store, clone(job), pods):
            self._synced.pop(uid, None)
            return True
        self._synced[uid] = inputs
        return False

    def _inputs(self, job: dict, pods: list[dict], now: datetime) -> tuple:
        """What a sync of this job depends on; time only matters with a deadline or a failure backoff."""
        timed = job["spec"].get("activeDeadlineSeconds") is not None or any(_phase(p) == "Failed" for p in pods)
        return (
            job["metadata"]["resourceVersion"],
            tuple(p["metadata"]["resourceVersion"] for p in pods),
            now if timed else None,
        )

    def next_deadline(self, store: Store) -> datetime | None:
        version = store.last_change("jobs", "pods")
        if self._deadline is not None and self._deadline[0] == version:
            return self._deadline[1]
        deadlines = []
        # Only a Job whose sync depends on the time can have a deadline: those a pass found so (_timed).
        for namespace, name in sorted(self._timed):
            job = store.get("jobs", namespace, name, copy=False)
            if job is None or finished(job) or job["spec"].get("suspend"):
                continue
            status = job.get("status") or {}
            ads = job["spec"].get("activeDeadlineSeconds")
            if ads is not None and status.get("startTime"):
                deadlines.append(parse_rfc3339(status["startTime"]) + timedelta(seconds=ads))
            uid = job["metadata"]["uid"]
            retry = self._retry_at(job, [p for _, p in store.dependents(uid, "pods") if _controlled_by(p, uid)])
            if retry is not None:
                deadlines.append(retry)
        result = min(deadlines) if deadlines else None
        self._deadline = (version, result)
        return result

    def _retry_at(self, job: dict, owned: list[dict]) -> datetime | None:
        """Pod-failure backoff: 10s doubled per failure, capped at 6 minutes, from the last failure."""
        failed = [p for p in owned if _phase(p) == "Failed"]
        if not failed:
            return None
        last = max(_finished_at(p) for p in failed)
        delay = min(BACKOFF_BASE_SECONDS * 2 ** (len(failed) - 1), BACKOFF_MAX_SECONDS)
        return last + timedelta(seconds=delay)

    def _sync(self, store: Store, job: dict, owned: list[dict]) -> bool:
        now_dt = store.now()
        now = rfc3339(now_dt)
        spec = job["spec"]
        old_status = copy.deepcopy(job.get("status") or {})
        status = job.setdefault("status", {})
        active = [
            p for p in owned if _phase(p) in ("Pending", "Running") and not p["metadata"].get("deletionTimestamp")
        ]
        succeeded = [p for p in owned if _phase(p) == "Succeeded"]
        failed = [p for p in owned if _phase(p) == "Failed"]
        restarts = sum(
            cs.get("restartCount", 0) for p in owned for cs in (p.get("status") or {}).get("containerStatuses") or []
        )
        status["succeeded"] = len(succeeded)
        status["failed"] = len(failed) + restarts
        status.setdefault("uncountedTerminatedPods", {})
        indexed = spec.get("completionMode") == "Indexed"
        if indexed:
            status["completedIndexes"] = _compress({i for p in succeeded if (i := _index(p)) is not None})

        if finished(job):
            self._delete_pods(store, job, active)
            status["active"], status["ready"] = 0, 0
            return self._write(store, job, old_status)

        if spec.get("suspend"):
            if active:
                self._delete_pods(store, job, active)
            status["active"], status["ready"] = 0, 0
            status.pop("startTime", None)
            if (_condition(status, "Suspended") or {}).get("status") != "True":
                _set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", now)
                store.record_event(job, "Normal", "Suspended", "Job suspended", COMPONENT)
            return self._write(store, job, old_status)

        if (_condition(status, "Suspended") or {}).get("status") == "True":
            _set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", now)
            store.record_event(job, "Normal", "Resumed", "Job resumed", COMPONENT)
        status.setdefault("startTime", now)

        completions = spec.get("completions")
        failure = self._failure(spec, status, now_dt)
        done = (completions is not None and len(succeeded) >= completions) or (
            completions is None and succeeded and not active
        )
        if indexed and completions is not None:
            done_idx = {i for p in succeeded if (i := _index(p)) is not None}
            done = len(done_idx) >= completions
        if failure:
            reason, message = failure
            self._delete_pods(store, job, active)
            active = []
            _set_condition(status, "FailureTarget", "True", reason, message, now)
            _set_condition(status, "Failed", "True", reason, message, now)
            store.record_event(job, "Warning", reason, message, COMPONENT)
        elif done:
            self._delete_pods(store, job, active)
            active = []
            message = "Reached expected number of succeeded pods"
            _set_condition(status, "SuccessCriteriaMet", "True", "CompletionsReached", message, now)
            _set_condition(status, "Complete", "True", "CompletionsReached", message, now)
            status["completionTime"] = now
            store.record_event(job, "Normal", "Completed", "Job completed", COMPONENT)
        else:
            active = self._scale_down(store, job, active)
            active += self._create_pods(store, job, active, succeeded, owned, now_dt)
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if _phase(p) == "Running")
        status["terminating"] = 0
        return self._write(store, job, old_status)

    def _failure(self, spec: dict, status: dict, now: datetime) -> tuple[str, str] | None:
        if status["failed"] > spec.get("backoffLimit", 6):
            return "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        ads = spec.get("activeDeadlineSeconds")
        if ads is not None and now >= parse_rfc3339(status["startTime"]) + timedelta(seconds=ads):
            return "DeadlineExceeded", "Job was active longer than specified deadline"
        return None

    def _scale_down(self, store: Store, job: dict, active: list[dict]) -> list[dict]:
        """Lowering parallelism (Kueue's partial admission does) deletes the newest / highest-index pods."""
        parallelism = job["spec"].get("parallelism", 1)
        if len(active) <= parallelism:
            return active
        order = sorted(
            active, key=lambda p: (_index(p) or 0, p["metadata"]["creationTimestamp"], p["metadata"]["name"])
        )
        self._delete_pods(store, job, order[parallelism:])
        return order[:parallelism]

    def _create_pods(
        self, store: Store, job: dict, active: list[dict], succeeded: list[dict], owned: list[dict], now: datetime
    ) -> list[dict]:
        spec = job["spec"]
        parallelism = spec.get("parallelism", 1)
        completions = spec.get("completions")
        retry = self._retry_at(job, owned)
        if retry is not None and retry > now:
            return []
        created = []
        if spec.get("completionMode") == "Indexed":
            busy = {_index(p) for p in active} | {_index(p) for p in succeeded}
            free = [i for i in range(completions or 0) if i not in busy]
            for i in free[: max(0, parallelism - len(active))]:
                created.append(self._create_pod(store, job, i))
        else:
            remaining = parallelism if completions is None else min(parallelism, completions - len(succeeded))
            if completions is None and succeeded:
                remaining = 0  # work-queue Jobs start no new pods once one succeeded
            for _ in range(max(0, remaining - len(active))):
                created.append(self._create_pod(store, job, None))
        return created

    def _create_pod(self, store: Store, job: dict, index: int | None) -> dict:
        md = job["metadata"]
        template = copy.deepcopy(job["spec"]["template"])
        tmd = template.get("metadata") or {}
        labels = dict(tmd.get("labels") or {})
        annotations = dict(tmd.get("annotations") or {})
        pod_spec = template["spec"]
        prefix = f"{md['name']}-"
        if index is not None:
            prefix = f"{md['name']}-{index}-"
            labels[COMPLETION_INDEX] = str(index)
            annotations[COMPLETION_INDEX] = str(index)
            pod_spec.setdefault("hostname", f"{md['name']}-{index}")
            for c in pod_spec.get("containers") or []:
                c.setdefault("env", []).append(
                    {
                        "name": "JOB_COMPLETION_INDEX",
                        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}},
                    }
                )
        pod = {
            "metadata": {
                "generateName": prefix,
                "namespace": md["namespace"],
                "labels": labels,
                "annotations": annotations,
                **({"finalizers": list(tmd["finalizers"])} if tmd.get("finalizers") else {}),  # as GetPodFromTemplate
                "ownerReferences": [controller_reference(job)],
            },
            "spec": pod_spec,
        }
        builtin.apply_defaults("pods", pod, None)  # as kube-apiserver defaults a pod the controller creates
        builtin.resolve_priority(store, pod)
        created = store.create("pods", pod)
        store.record_event(job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}", COMPONENT)
        return created

    def _delete_pods(self, store: Store, job: dict, pods: list[dict]) -> None:
        for p in pods:
            store.delete("pods", p["metadata"]["namespace"], p["metadata"]["name"])
            store.record_event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {p['metadata']['name']}", COMPONENT)

    def _write(self, store: Store, job: dict, old_status: dict) -> bool:
        if job["status"] == old_status:
            return False
        store.update_status("jobs", job)
        return True


def _finished_at(pod: dict) -> datetime:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term and term.get("finishedAt"):
            return parse_rfc3339(term["finishedAt"])
    return parse_rfc3339(pod["metadata"]["creationTimestamp"])
