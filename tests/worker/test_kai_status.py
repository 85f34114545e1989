"""KAI's view of portal work -> the portal's status (worker/kai_status.py), as pure functions: a Job whose pods KAI's
grouper put in PodGroups of their own, and a gang (the portal's PodGroup and its ownerless pods)."""

from datetime import UTC, datetime

from apps.workloads.models import Status
from apps.workloads.observation import Preemption
from worker.kai_status import (
    compact_pod,
    compact_pod_group,
    gang_missing,
    gang_outliving,
    is_gang,
    observe_kai,
    observe_kai_gang,
    on_kai,
    pod_group_owner_uid,
)

JOB_UID = "job-1"


def at(second):
    return datetime(2026, 3, 1, 10, 0, second, tzinfo=UTC)


def stamp(second):
    return at(second).isoformat().replace("+00:00", "Z")


def job(conditions=(), deleted=None):
    metadata = {"name": "wl-7", "namespace": "team", "uid": JOB_UID, "creationTimestamp": stamp(0),
                "labels": {"portal.gpu/workload-id": "7", "kai.scheduler/queue": "proj-nlp-rtx"}}
    if deleted:
        metadata["deletionTimestamp"] = stamp(deleted)
    status = {"conditions": list(conditions)}
    for condition in conditions:
        status["completionTime"] = condition["lastTransitionTime"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"suspend": False},
            "status": status}


def pod_group(min_member=1, condition=None, name="pg-a", gang=False, deleted=None):
    """{name: the compacted PodGroup}: KAI's for a Job's pod (owned by the Job), or a gang's (the portal's, owned by
    nothing)."""
    metadata = {"name": name, "namespace": "team", "uid": f"uid-{name}", "resourceVersion": "5",
                "creationTimestamp": stamp(1), "labels": {"app.kubernetes.io/managed-by": "gpu-portal",
                                                          "portal.gpu/workload-id": "7"}}
    if not gang:
        metadata["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "wl-7", "uid": JOB_UID}]
    if deleted:
        metadata["deletionTimestamp"] = stamp(deleted)
    obj = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": metadata,
           "spec": {"minMember": min_member, "queue": "proj-nlp-rtx"}, "status": {}}
    if condition:
        obj["status"]["schedulingConditions"] = [condition]
    return {name: compact_pod_group(obj)}


def pod(name, *, bound=None, ready=None, phase="Pending", evicted=None, group="pg-a", gang=False, exit_code=None):
    conditions = []
    if bound is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(bound)})
    if ready is not None:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": stamp(ready)})
    if evicted is not None:
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                           "message": "Pod team/x was preempted by workload other/wl-9.",
                           "lastTransitionTime": stamp(evicted)})
    metadata = {"name": name, "namespace": "team", "uid": f"uid-{name}", "resourceVersion": "3",
                "annotations": {"pod-group-name": group}}
    if not gang:
        metadata["ownerReferences"] = [{"kind": "Job", "name": "wl-7", "uid": JOB_UID, "controller": True}]
    status = {"phase": phase, "conditions": conditions}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": "main", "state": {"terminated": {
            "exitCode": exit_code, "reason": "Error" if exit_code else "Completed", "finishedAt": stamp(50)}}}]
    obj = {"metadata": metadata, "spec": {"nodeName": "rtx-0"} if bound is not None else {}, "status": status}
    return compact_pod(obj)


OVER_LIMIT = {"type": "UnschedulableOnNodePool", "nodePool": "rtx", "reason": "Unschedulable", "status": "True",
              "message": "proj-nlp-rtx quota has reached the allowable limit of GPUs.",
              "reasons": [{"reason": "OverLimit", "message": "proj-nlp-rtx quota has reached the allowable limit"}],
              "lastTransitionTime": stamp(2), "transitionID": "0"}


def test_only_jobs_naming_a_kai_queue_are_kais():
    assert on_kai(job())
    assert not on_kai({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "vision-h100"}}})


def test_a_job_alone_waits_for_kai_in_its_queue():
    assert observe_kai(None, {}, []) is None
    seen = observe_kai(job(), {}, [])
    assert (seen.status, seen.reason, seen.kai_queue, seen.kueue_name) == (Status.QUEUED, "Pending", "proj-nlp-rtx",
                                                                           "")
    assert seen.at == at(0) and seen.message == "Waiting for KAI Scheduler to schedule its pods"


def test_a_pending_pod_group_says_kais_first_reason():
    seen = observe_kai(job(), pod_group(condition=OVER_LIMIT), [pod("a")])
    assert (seen.status, seen.reason, seen.at) == (Status.QUEUED, "OverLimit", at(2))
    assert seen.conditions == [OVER_LIMIT] and seen.admitted_at is None
    no_reasons = {**OVER_LIMIT, "reasons": [], "message": "0/2 nodes are available, 2 node(s) didn't have enough "
                                                          "resources: GPUs."}
    assert observe_kai(job(), pod_group(condition=no_reasons), [pod("a")]).reason == "Unschedulable"


def test_a_pod_waiting_says_its_own_pod_groups_condition():
    groups = {**pod_group(name="pg-a"), **pod_group(name="pg-b", condition=OVER_LIMIT)}
    pods = [pod("a", bound=5, ready=6, phase="Running", group="pg-a"), pod("b", group="pg-b")]
    seen = observe_kai(job(), groups, pods)
    assert (seen.status, seen.admitted_at) == (Status.RUNNING, at(5))  # a batch runs from its first pod
    assert seen.conditions == [OVER_LIMIT]  # and says why its other pod waits
    assert seen.message == ("Pods are running; 1 more waiting for KAI Scheduler: proj-nlp-rtx quota has reached the "
                            "allowable limit of GPUs.")


def test_a_gang_is_admitted_when_min_member_pods_are_bound_and_runs_when_they_are_ready():
    group = pod_group(min_member=2)
    assert observe_kai(job(), group, [pod("a", bound=5), pod("b")]).status == Status.QUEUED
    admitted = observe_kai(job(), group, [pod("a", bound=5), pod("b", bound=6)])
    assert (admitted.status, admitted.at, admitted.admitted_at) == (Status.ADMITTED, at(6), at(6))
    running = observe_kai(job(), group, [pod("a", bound=5, ready=7, phase="Running"),
                                         pod("b", bound=6, ready=9, phase="Running")])
    assert (running.status, running.at, running.admitted_at, running.started_at) == (Status.RUNNING, at(9), at(6),
                                                                                     at(7))
    assert running.conditions == []


def test_evicted_pods_hold_nothing_and_the_preemption_is_passed_on():
    evicted = pod("a", bound=5, ready=6, phase="Running", evicted=20)
    assert evicted.leaving and evicted.preemption.at == at(20)
    assert evicted.preemption.reason == "PreemptionByScheduler" and "other/wl-9" in evicted.preemption.message
    preemption = Preemption(at=at(20), reason="PreemptionByScheduler", message="m", preemptor_workload_uid="",
                            preemptor_job_uid="job-9")
    seen = observe_kai(job(), pod_group(), [evicted, pod("a2")], preemption)
    assert (seen.status, seen.preemption, seen.admitted_at) == (Status.QUEUED, preemption, None)


def test_finished_and_deleted_jobs():
    complete = {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": stamp(59)}
    done = observe_kai(job([complete]), pod_group(), [pod("a", bound=5, ready=6, phase="Succeeded")])
    assert (done.status, done.finished_at, done.admitted_at) == (Status.SUCCEEDED, at(59), at(5))
    gone = observe_kai(job(deleted=30), pod_group(), [pod("a", bound=5)])
    assert (gone.status, gone.deleted_at, gone.finished_at) == (Status.STOPPED, at(30), at(30))


def test_what_is_kept_of_pods_and_pod_groups():
    assert compact_pod({"metadata": {"name": "lonely", "uid": "u"}, "spec": {}, "status": {}}) is None
    assert compact_pod({"metadata": {"name": "owned", "uid": "u", "annotations": {"pod-group-name": "g"},
                                     "ownerReferences": [{"kind": "ReplicaSet", "uid": "r", "controller": True}]},
                        "spec": {}, "status": {}}) is None
    assert pod("w-0", group="wl-7", gang=True).job_uid == "team/wl-7"  # a gang's pod, by its PodGroup
    (kept,) = pod_group(condition=OVER_LIMIT).values()
    assert set(kept) == {"metadata", "spec", "status"} and kept["spec"] == {"minMember": 1, "queue": "proj-nlp-rtx"}
    (gang,) = pod_group(name="wl-7", gang=True).values()
    assert is_gang(gang) and not is_gang(kept)
    assert (pod_group_owner_uid(kept), pod_group_owner_uid(gang)) == (JOB_UID, "uid-wl-7")


def gang_pods(*phases, **fields):
    return [pod(f"w-{i}", bound=5, ready=6, phase=phase, group="wl-7", gang=True,
                exit_code=None if phase in ("Running", "Pending") else int(phase == "Failed"), **fields)
            for i, phase in enumerate(phases)]


def test_a_gang_runs_finishes_once_all_succeeded_and_fails_with_one():
    (group,) = pod_group(name="wl-7", gang=True, min_member=2).values()
    assert observe_kai_gang(None, []) is None
    assert observe_kai_gang(group, gang_pods("Running", "Running")).status == Status.RUNNING
    assert observe_kai_gang(group, gang_pods("Succeeded", "Running")).status == Status.RUNNING
    done = observe_kai_gang(group, gang_pods("Succeeded", "Succeeded"))
    assert (done.status, done.finished_at, done.job_uid) == (Status.SUCCEEDED, at(50), "uid-wl-7")
    failed = observe_kai_gang(group, gang_pods("Running", "Failed"))
    assert (failed.status, failed.reason, failed.message) == (Status.FAILED, "PodFailed",
                                                              "Pod w-1 failed: Error (exit code 1)")
    assert gang_outliving(gang_pods("Running", "Failed")) and not gang_outliving(gang_pods("Failed", "Succeeded"))
    past_limit = compact_pod({"metadata": {"name": "w-0", "namespace": "team", "uid": "u0",
                                           "annotations": {"pod-group-name": "wl-7"}},
                              "spec": {"nodeName": "rtx-0"},
                              "status": {"phase": "Failed", "reason": "DeadlineExceeded",
                                         "message": "Pod was active on the node longer than the specified deadline"}})
    stopped = observe_kai_gang(group, [past_limit])
    assert (stopped.status, stopped.reason, stopped.message) == (
        Status.FAILED, "DeadlineExceeded",
        "Pod w-0 failed: DeadlineExceeded Pod was active on the node longer than the specified deadline")


def test_an_evicted_gang_is_no_failure_waits_again_and_lacks_its_pods():
    (group,) = pod_group(name="wl-7", gang=True, min_member=2).values()
    evicted = gang_pods("Failed", "Running", evicted=20)
    seen = observe_kai_gang(group, evicted)
    assert (seen.status, seen.admitted_at) == (Status.QUEUED, None)
    assert gang_missing(evicted, 2) and gang_missing(evicted[:1], 2) and not gang_missing(gang_pods("Pending") * 2, 2)
    (deleted,) = pod_group(name="wl-7", gang=True, min_member=2, deleted=40).values()
    gone = observe_kai_gang(deleted, [])
    assert (gone.status, gone.deleted_at) == (Status.STOPPED, at(40))
