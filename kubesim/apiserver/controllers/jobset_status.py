"""The JobSet operator's bookkeeping (sigs.k8s.io/jobset v0.12.0, the release Kueue v0.20 runs with), as pure
functions on plain dicts: the labels it puts on child Jobs and their pods, how it sorts its child Jobs,
status.replicatedJobsStatus, its conditions (each change is also an Event), and the success and failure policies
that end or restart a JobSet.
The controller that acts on them is kubesim.apiserver.controllers.jobset_controller."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
GLOBAL_REPLICAS = "jobset.sigs.k8s.io/global-replicas"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
GROUP_NAME = "jobset.sigs.k8s.io/group-name"
GROUP_REPLICAS = "jobset.sigs.k8s.io/group-replicas"
JOB_GROUP_INDEX = "jobset.sigs.k8s.io/job-group-index"
COORDINATOR = "jobset.sigs.k8s.io/coordinator"
CONTROLLER_NAME = "jobset.sigs.k8s.io/jobset-controller"

COMPLETED, FAILED, SUSPENDED, RESTARTING = "Completed", "Failed", "Suspended", "RestartingJobSet"
STARTUP_IN_PROGRESS, STARTUP_COMPLETED = "StartupPolicyInProgress", "StartupPolicyCompleted"
STATUS_FIELDS = ("ready", "succeeded", "failed", "active", "suspended")


def spec_of(obj: dict) -> dict:
    return obj.get("spec") or {}


def replicated_jobs(js: dict) -> list[dict]:
    return spec_of(js).get("replicatedJobs") or []


def replicas(rj: dict) -> int:
    return int(rj.get("replicas", 1))


def pods_per_job(job_spec: dict) -> int:
    """A Job's expected pods: parallelism (default 1), capped by completions."""
    parallelism = int(job_spec.get("parallelism", 1))
    completions = job_spec.get("completions")
    return min(parallelism, int(completions)) if completions is not None else parallelism


def suspended(obj: dict) -> bool:
    return bool(spec_of(obj).get("suspend"))


def job_name(js: dict, rj: dict, index: int) -> str:
    return f"{js['metadata']['name']}-{rj['name']}-{index}"


def subdomain(js: dict) -> str:
    return (spec_of(js).get("network") or {}).get("subdomain") or js["metadata"]["name"]


def dns_hostnames(js: dict) -> bool:
    return (spec_of(js).get("network") or {}).get("enableDNSHostnames") is True


def in_order_startup(js: dict) -> bool:
    return (spec_of(js).get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"


def child_labels(js: dict, rj: dict, index: int) -> dict[str, str]:
    """The labels (and, with the same values, annotations) the operator sets on a child Job and its pod template."""
    md, rjs = js["metadata"], replicated_jobs(js)
    group = rj.get("groupName", "default")
    name = job_name(js, rj, index)
    before = sum(replicas(r) for r in rjs[: rjs.index(rj)])
    group_before = sum(replicas(r) for r in rjs[: rjs.index(rj)] if r.get("groupName", "default") == group)
    out = {
        JOBSET_NAME: md["name"],
        JOBSET_UID: md["uid"],
        REPLICATED_JOB_NAME: rj["name"],
        RESTART_ATTEMPT: str((js.get("status") or {}).get("restarts", 0)),
        REPLICATED_JOB_REPLICAS: str(replicas(rj)),
        GLOBAL_REPLICAS: str(sum(replicas(r) for r in rjs)),
        JOB_INDEX: str(index),
        JOB_KEY: hashlib.sha1(f"{md['namespace']}/{name}".encode(), usedforsecurity=False).hexdigest(),
        JOB_GLOBAL_INDEX: str(before + index),
        GROUP_NAME: group,
        GROUP_REPLICAS: str(sum(replicas(r) for r in rjs if r.get("groupName", "default") == group)),
        JOB_GROUP_INDEX: str(group_before + index),
    }
    coordinator = spec_of(js).get("coordinator")
    if coordinator:
        out[COORDINATOR] = (
            f"{md['name']}-{coordinator.get('replicatedJob')}-{coordinator.get('jobIndex', 0)}-"
            f"{coordinator.get('podIndex', 0)}.{subdomain(js)}"
        )
    return out


def _condition(obj: dict, ctype: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


def condition_true(obj: dict, ctype: str) -> bool:
    return (_condition(obj, ctype) or {}).get("status") == "True"


def job_outcome(job: dict) -> str:
    """ "Complete" or "Failed" once a Job has finished, else "" (active)."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return c["type"]
    return ""


def finished(js: dict) -> bool:
    return condition_true(js, COMPLETED) or condition_true(js, FAILED)


@dataclass
class Children:
    """A JobSet's child Jobs of the current run by outcome, and those of earlier restarts (to be deleted)."""

    active: list[dict] = field(default_factory=list)
    successful: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    previous: list[dict] = field(default_factory=list)

    @classmethod
    def of(cls, js: dict, jobs: list[dict]) -> Children:
        out = cls()
        restarts = int((js.get("status") or {}).get("restarts", 0))
        for job in sorted(jobs, key=lambda j: j["metadata"]["name"]):
            attempt = (job["metadata"].get("labels") or {}).get(RESTART_ATTEMPT, "")
            if not attempt.isdigit() or int(attempt) < restarts:
                out.previous.append(job)
                continue
            outcome = job_outcome(job)
            {"": out.active, "Complete": out.successful, "Failed": out.failed}[outcome].append(job)
        return out

    def names(self) -> set[str]:
        return {j["metadata"]["name"] for j in self.active + self.successful + self.failed + self.previous}


def replicated_jobs_status(js: dict, children: Children) -> list[dict]:
    """status.replicatedJobsStatus, one entry per replicatedJob in spec order."""
    counts = {rj["name"]: dict.fromkeys(STATUS_FIELDS, 0) for rj in replicated_jobs(js)}

    def entry(job: dict) -> dict | None:
        return counts.get((job["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME, ""))

    for job in children.active:
        if (c := entry(job)) is None:
            continue
        status = job.get("status") or {}
        if int(status.get("succeeded") or 0) + int(status.get("ready") or 0) >= pods_per_job(spec_of(job)):
            c["ready"] += 1
        c["active"] += int(int(status.get("active") or 0) > 0)
        c["suspended"] += int(suspended(job))
    for job in children.successful:
        if (c := entry(job)) is not None:
            c["succeeded"] += 1
    for job in children.failed:
        if (c := entry(job)) is not None:
            c["failed"] += 1
    return [{"name": name, **c} for name, c in counts.items()]


def status_of(statuses: list[dict], name: str) -> dict | None:
    return next((s for s in statuses if s["name"] == name), None)


def all_jobs_ready(js: dict, statuses: list[dict]) -> bool:
    return sum(replicas(rj) for rj in replicated_jobs(js)) == sum(s["ready"] + s["succeeded"] for s in statuses)


def dependencies_reached(rj: dict, wanted: dict[str, int], statuses: list[dict]) -> bool:
    """dependsOn: each named replicatedJob has all its Jobs Ready (ready, succeeded or failed) or Complete."""
    for dep in rj.get("dependsOn") or []:
        got = status_of(statuses, dep.get("name", ""))
        if got is None:
            return False
        if dep.get("status") == "Complete" and wanted.get(dep["name"]) != got["succeeded"]:
            return False
        if dep.get("status") == "Ready" and wanted.get(dep["name"]) != got["failed"] + got["ready"] + got["succeeded"]:
            return False
    return True


def all_replicas_started(rj: dict, status: dict | None) -> bool:
    return status is not None and replicas(rj) == status["failed"] + status["ready"] + status["succeeded"]


# -- conditions ------------------------------------------------------------------------------------------------


@dataclass
class Update:
    """What one reconcile changes in a JobSet's status, and the Events to record once it is written."""

    status: dict
    now: str
    changed: bool = False
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)

    def condition(self, ctype: str, value: str, reason: str, message: str, event_type: str = "Normal") -> None:
        """updateCondition: a condition is appended only when True; an existing one is flipped or reworded in place
        (keeping its transition time when only the wording changes); each change is also an Event."""
        conds = self.status.get("conditions") or []
        new = {"type": ctype, "status": value, "reason": reason, "message": message, "lastTransitionTime": self.now}
        cur = next((c for c in conds if c.get("type") == ctype), None)
        startup = {STARTUP_IN_PROGRESS, STARTUP_COMPLETED}
        changed = False
        if value == "True" and ctype in startup:  # the two startup conditions exclude each other
            for other in conds:
                if other.get("type") in startup - {ctype} and other.get("status") == "True":
                    other["status"] = "False"
                    changed = True
        if cur is None:
            if value == "True":
                self.status["conditions"] = [*conds, new]
                changed = True
        elif cur.get("status") != value:
            cur.clear()
            cur.update(new)
            changed = True
        elif (cur.get("reason"), cur.get("message")) != (reason, message):
            cur.update(reason=reason, message=message)
            changed = True
        if changed:
            self.changed = True
            self.events.append((event_type, reason, message))

    def restarting_false(self, reason: str, message: str) -> None:
        self.condition(RESTARTING, "False", reason, message)

    def completed(self) -> None:
        self.condition(COMPLETED, "True", "AllJobsCompleted", "jobset completed successfully")
        self.restarting_false("JobSetCompleted", "jobset completed successfully")
        self._terminal(COMPLETED)

    def failed(self, reason: str, message: str) -> None:
        self.condition(FAILED, "True", reason, message, "Warning")
        self.restarting_false("JobSetFailed", "jobset failed")
        self._terminal(FAILED)

    def _terminal(self, state: str) -> None:
        if self.status.get("terminalState") != state:
            self.status["terminalState"] = state
            self.changed = True


# -- success and failure policies ------------------------------------------------------------------------------


def success_reached(js: dict, successful: list[dict]) -> bool:
    """The success policy: All = every Job of the targeted replicatedJobs (all when none named) succeeded, Any = one."""
    policy = spec_of(js).get("successPolicy") or {"operator": "All"}
    targets = policy.get("targetReplicatedJobs") or []

    def targeted(name: str) -> bool:
        return not targets or name in targets

    done = sum(1 for j in successful if targeted((j["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME, "")))
    needed = (
        1
        if policy.get("operator") == "Any"
        else sum(replicas(rj) for rj in replicated_jobs(js) if targeted(rj["name"]))
    )
    return done >= needed


def _failure_condition(job: dict) -> dict | None:
    return next(
        (
            c
            for c in (job.get("status") or {}).get("conditions") or []
            if c.get("type") == "Failed" and c.get("status") == "True"
        ),
        None,
    )


def _first_failed(jobs: list[dict]) -> dict:
    return min(jobs, key=lambda j: ((_failure_condition(j) or {}).get("lastTransitionTime", ""), j["metadata"]["name"]))


def _rule_applies(rule: dict, job: dict) -> bool:
    cond = _failure_condition(job) or {}
    reasons = rule.get("onJobFailureReasons") or []
    if reasons and cond.get("reason") not in reasons:
        return False
    patterns = rule.get("onJobFailureMessagePatterns") or []
    if patterns and not any(_matches(p, cond.get("message", "")) for p in patterns):
        return False
    targets = rule.get("targetReplicatedJobs") or []
    parent = (job["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME, "")
    return bool(parent) and (not targets or parent in targets)


def _matches(pattern: str, message: str) -> bool:
    try:
        return re.search(pattern, message) is not None
    except re.error:
        return False


def apply_failure_policy(js: dict, failed: list[dict], update: Update) -> None:
    """executeFailurePolicy: without a policy the first failed Job fails the JobSet; with one, the first rule matching a
    failed Job (its earliest failure) chooses the action, RestartJobSet when none matches. A restart bumps
    status.restarts (and restartsCountTowardsMax unless the action ignores the maximum), so the next pass replaces
    every child Job; past failurePolicy.maxRestarts the JobSet fails instead."""
    policy = spec_of(js).get("failurePolicy")
    if policy is None:
        first = _first_failed(failed)["metadata"]["name"]
        update.failed("FailedJobs", f"jobset failed due to one or more job failures (first failed job: {first})")
        return
    rule, job = None, None
    for candidate in policy.get("rules") or []:
        matching = [j for j in failed if _rule_applies(candidate, j)]
        if matching:
            rule, job = candidate, _first_failed(matching)
            break
    action = rule.get("action") if rule else "RestartJobSet"
    job = job or _first_failed(failed)
    first = job["metadata"]["name"]
    if action == "FailJobSet":
        update.failed(
            "FailJobSetFailurePolicyAction", f"applying FailJobSet failure policy action (first failed job: {first})"
        )
        return
    counts = action == "RestartJobSet"
    if counts and int(update.status.get("restartsCountTowardsMax", 0)) >= int(policy.get("maxRestarts", 0)):
        update.failed(
            "ReachedMaxRestarts", f"jobset failed due to reaching max number of restarts (first failed job: {first})"
        )
        return
    if action not in ("RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"):
        return  # RestartJob* need the RestartJob gate (off in v0.12.0); the operator's webhook refuses them
    update.status["restarts"] = int(update.status.get("restarts", 0)) + 1
    if counts:
        update.status["restartsCountTowardsMax"] = int(update.status.get("restartsCountTowardsMax", 0)) + 1
    update.changed = True
    message = f"applying {action} failure policy action (first failed job: {first})"
    reason = f"FailurePolicy_{rule['name']}" if rule else "DefaultFailurePolicy"
    update.condition(RESTARTING, "True", reason, message, "Warning")
    update.events.append(("Warning", f"{action}FailurePolicyAction", message))
