"""Reading a Kueue Workload submitted outside the portal (worker/outside_work.py) and mirroring it
(apps.workloads.services.workloads_mirror_outside): kinds, attribution, pod sets in the pool's units, and what is
refused from the mirror with a reason, nothing written."""

from datetime import UTC, datetime

import pytest

from apps.cluster.models import UnmappedWork
from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.models import Kind, Origin, Status, Workload, WorkloadEvent
from apps.workloads.observation import Observation, OutsideWork, Unmapped
from worker.outside_work import compact, read_outside, stop_target, submitter_fields, unqueued_gpu_pods
from worker.status_map import observe

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def kueue_workload(*, owner=None, pod_sets=None, queue="guaranteed-h100", namespace="proj-vision", annotations=None,
                   **spec):
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid", "controller": True} \
        if owner is None else owner
    return {
        "metadata": {"name": "job-train-abcde", "namespace": namespace, "uid": "wl-uid",
                     "creationTimestamp": "2026-12-01T08:59:00Z", "ownerReferences": [owner] if owner else [],
                     "annotations": annotations or {}},
        "spec": {"queueName": queue, **spec, "podSets": pod_sets if pod_sets is not None else [
            {"name": "main", "count": 2, "template": {"spec": {"containers": [
                {"name": "c", "image": "img:1", "resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "500m",
                                                                           "memory": "16Gi"}}}]}}}]},
    }


@pytest.mark.parametrize(("api_version", "kind", "expected"), [
    ("batch/v1", "Job", Kind.JOB), ("jobset.x-k8s.io/v1alpha2", "JobSet", Kind.JOBSET),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob", Kind.TRAINJOB), ("kubeflow.org/v1", "PyTorchJob", Kind.PYTORCHJOB),
    ("ray.io/v1", "RayJob", Kind.RAYJOB), ("ray.io/v1", "RayCluster", Kind.RAYCLUSTER),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", Kind.LEADERWORKERSET), ("v1", "Pod", Kind.POD),
    ("example.com/v1", "Widget", Kind.OTHER),
])
def test_every_owner_kind_is_named(api_version, kind, expected):
    work = read_outside(kueue_workload(owner={"apiVersion": api_version, "kind": kind, "name": "x", "uid": "u",
                                              "controller": True}), None)
    assert isinstance(work, OutsideWork) and work.kind == expected and work.object_name == "x"


def test_a_pod_groups_workload_is_named_after_its_group():
    pod = {"apiVersion": "v1", "kind": "Pod", "name": "member-0", "uid": "p0"}
    work = read_outside(kueue_workload(owner=pod, annotations={"kueue.x-k8s.io/is-group-workload": "true"}), None)
    assert work.kind == Kind.POD_GROUP and work.object_name == "job-train-abcde"
    assert stop_target(namespace="ns", api_version="v1", kind=Kind.POD_GROUP, name="g") == (
        "/api/v1/namespaces/ns/pods", "kueue.x-k8s.io/pod-group-name=g")


def test_requests_are_summed_over_containers_and_the_larger_init_container_counts():
    pod_sets = [{"name": "main", "count": 1, "template": {"spec": {
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "4"}}}],
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}},
                       {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}]
    work = read_outside(kueue_workload(pod_sets=pod_sets), None)
    assert work.pod_sets[0].requests == {"cpu": "4", "nvidia.com/gpu": "2"}


def test_the_compact_copy_the_watcher_keeps_reads_the_same():
    pod_sets = [{"name": "main", "count": 3, "minCount": 2, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
        "initContainers": [{"name": "i", "image": "init:1", "command": ["x"], "resources": {"requests": {"cpu": "4"}}}],
        "containers": [{"name": "a", "image": "img:2", "env": [{"name": "E", "value": "v" * 1000}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}],
        "volumes": [{"name": "data", "emptyDir": {}}], "nodeSelector": {"pool": "h100"}}}}]
    full = kueue_workload(pod_sets=pod_sets, priority=100, priorityClassName="train",
                          priorityClassSource="kueue.x-k8s.io/workloadpriorityclass")
    full["metadata"]["managedFields"] = [{"manager": "kueue", "fieldsV1": {"f:status": {}}}]
    full["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": "job-uid"}
    full["status"] = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                      "message": "", "lastTransitionTime": "2026-12-01T09:00:00Z"},
                                     {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                                      "lastTransitionTime": "2026-12-01T09:00:00Z"}],
                      "admission": {"clusterQueue": "proj-vision-h100-guaranteed", "podSetAssignments": [
                          {"name": "main", "count": 3, "flavors": {"nvidia.com/gpu": "h100"}}]}}
    kept = compact(full)
    assert "managedFields" not in kept["metadata"] and "env" not in str(kept) and "volumes" not in str(kept)
    assert read_outside(kept, None) == read_outside(full, None)
    assert observe(None, kept) == observe(None, full)


def test_who_submitted_it_comes_from_the_owner_object():
    owner = {"metadata": {"uid": "job-uid", "labels": {"portal.gpu/user": "alice", "team": "x"},
                          "annotations": {"portal.gpu/submitted-by": "oidc:alice", "other": "y"},
                          "managedFields": [{"manager": "kubectl-create", "fieldsV1": {"f:spec": {}}}]}}
    kept = submitter_fields(owner)
    assert kept == {"metadata": {"uid": "job-uid", "labels": {"portal.gpu/user": "alice"},
                                 "annotations": {"portal.gpu/submitted-by": "oidc:alice"},
                                 "managedFields": [{"manager": "kubectl-create"}]}}
    work = read_outside(kueue_workload(), kept)
    assert (work.portal_user, work.cluster_user, work.manager) == ("alice", "oidc:alice", "kubectl-create")


@pytest.mark.parametrize(("workload", "reason"), [
    (kueue_workload(owner={}), "no_owner"),
    (kueue_workload(pod_sets=[{"name": "main", "count": "two"}]), "malformed"),
    (kueue_workload(pod_sets=[{"name": "main", "count": -1}]), "malformed"),
    (kueue_workload(pod_sets=[{"name": "m", "count": 1, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "lots"}}}]}}}]), "malformed"),
])
def test_what_cannot_be_read_is_refused_with_its_reason(workload, reason):
    refused = read_outside(workload, None)
    assert isinstance(refused, Unmapped) and refused.reason == reason and refused.uid == "wl-uid"


def observed(status=Status.QUEUED, **fields):
    return Observation(status=status, kueue_name="job-train-abcde", **fields)


@pytest.mark.django_db
@pytest.mark.parametrize(("workload", "reason"), [
    (kueue_workload(namespace="team-x"), "no_project"),
    (kueue_workload(queue="someone-elses"), "no_queue"),
    (kueue_workload(queue="elastic-nosuchpool"), "no_queue"),
    (kueue_workload(pod_sets=[{"name": "main", "count": 200_000}]), "malformed"),
    (kueue_workload(pod_sets=[]), "malformed"),
])
def test_the_mirror_refuses_what_it_cannot_map_and_writes_nothing(demo, workload, reason):
    work = read_outside(workload, None)
    result = services.workload_mirror_outside(work=work, observation=observed())
    assert isinstance(result, Unmapped) and result.reason == reason
    assert not Workload.objects.filter(origin=Origin.OUTSIDE).exists()
    assert not WorkloadEvent.objects.exists() and not UnmappedWork.objects.exists()


@pytest.mark.django_db
def test_a_first_seen_admitted_workload_is_written_whole_and_a_replay_changes_nothing(demo):
    work = read_outside(kueue_workload(), submitter_fields({"metadata": {"uid": "job-uid", "labels": {
        "portal.gpu/user": "alice"}}}))
    observation = observed(Status.ADMITTED, reason="Admitted", at=AT, admitted_at=AT,
                           cluster_queue="proj-vision-h100-guaranteed")
    row_id = services.workload_mirror_outside(work=work, observation=observation)
    row = Workload.objects.get(pk=row_id)
    assert (row.origin, row.kind, row.status, row.owner.username, row.gpu_units, row.pod_count, row.preemptible) == (
        Origin.OUTSIDE, Kind.JOB, Status.ADMITTED, "alice", 4, 2, False)
    assert row.pod_sets == [{"name": "main", "count": 2, "gpus": 2, "cpu": "0.500", "memory_gib": "16.00"}]
    events = list(WorkloadEvent.objects.filter(workload=row).values_list("from_status", "to_status"))
    assert events == [("", Status.QUEUED), (Status.QUEUED, Status.ADMITTED)]
    interval = UsageInterval.objects.get(workload=row)
    assert (interval.units, interval.started_at, interval.ended_at, interval.user_id) == (4, AT, None, row.owner_id)
    assert services.workload_mirror_outside(work=work, observation=observation) == row_id
    assert WorkloadEvent.objects.filter(workload=row).count() == 2 and UsageInterval.objects.count() == 1


def test_gpu_pods_outside_the_queue_are_found_in_project_namespaces_only():
    def pod(name, namespace, gpus, phase="Running", labels=None):
        return {"metadata": {"name": name, "namespace": namespace, "uid": name, "labels": labels or {}},
                "status": {"phase": phase}, "spec": {"containers": [
                    {"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}

    found = unqueued_gpu_pods([pod("a", "proj-vision", 2), pod("b", "team-x", 1), pod("c", "proj-vision", 0),
                               pod("d", "proj-vision", 1, phase="Succeeded")], namespaces={"proj-vision"})
    assert [(item.name, item.gpus, item.reason) for item in found] == [("a", 2, "outside_queue")]
