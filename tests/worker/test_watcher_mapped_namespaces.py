"""A namespace an admin maps to a project, against kubesim with the real watcher: the Kueue sync puts the project's
LocalQueues there (never creating the namespace), a kubectl Job in it is mirrored as the project's work with its
position, seen by the project's members only, stopped through the portal; unmapping takes the queues away and keeps
the row's history."""

import pytest
from kubernetes import client as k8s

from apps.cluster.models import UnmappedWork
from apps.core.kueue_names import MANAGED_BY, MANAGED_BY_LABEL
from apps.org import services as org_services
from apps.org.models import Project
from apps.usage.models import UsageInterval
from apps.workloads import services
from apps.workloads.kubectl import get_command
from apps.workloads.models import Origin, Status, Workload
from tests.worker.conftest import signed_in, wait_for
from tests.worker.test_watcher import submit
from tests.worker.test_watcher_outside import batch_job, create_job
from worker import tasks
from worker.kueue_sync import desired_from_database, reconcile

pytestmark = pytest.mark.slow

MAPPED = "vision-pipelines"


def local_queues(cluster, namespace):
    return {item["metadata"]["name"]: item for item in cluster.list("LocalQueue", namespace=namespace)}


def row_of(name):
    return Workload.objects.filter(origin=Origin.OUTSIDE, object_name=name).select_related("project").first()


def test_mapped_namespace_work_is_the_projects(kubesim, org, cluster, watcher):
    core = k8s.CoreV1Api(kubesim.api_client())
    core.create_namespace({"metadata": {"name": MAPPED}})
    vision = Project.objects.get(slug="vision")
    mapping = org_services.project_namespace_map(actor=org["admin"], project=vision, namespace=MAPPED)
    result = reconcile(cluster, desired_from_database())
    assert not result.problems, result.problems

    # The project's queues are there, the portal's, pointing at its ClusterQueues; the namespace stays unlabelled.
    queues = local_queues(cluster, MAPPED)
    assert queues["guaranteed-h100"]["spec"]["clusterQueue"] == "proj-vision-h100-guaranteed"
    assert queues["elastic-h100"]["spec"]["clusterQueue"] == "proj-vision-h100-elastic"
    assert set(queues) == set(local_queues(cluster, "proj-vision"))
    assert all(q["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY for q in queues.values())
    assert MANAGED_BY_LABEL not in (core.read_namespace(MAPPED).metadata.labels or {})

    # Vision's 4 guaranteed H100 are held by the portal's own run: the kubectl Job in the mapped namespace waits.
    holder = submit(kubesim, org["alice"], gpus=4, preemptible=False, seconds=120, name="holder")
    wait_for(lambda: Workload.objects.get(pk=holder.pk).status == Status.RUNNING)
    create_job(kubesim, batch_job("pipeline-step", namespace=MAPPED, pods=1, gpus=4))
    row = wait_for(lambda: (found := row_of("pipeline-step")) and found.queue_position_local is not None and found,
                   describe=lambda: row_of("pipeline-step"))
    assert row.project == vision and row.namespace == MAPPED and row.cluster_namespace == MAPPED
    assert row.status == Status.QUEUED and row.queue_position_local == 0 and row.gpu_units == 4
    assert f"-n {MAPPED}" in get_command(row)

    # Members of Vision see it, with the namespace it runs in; another department gets 404.
    alice, carol = signed_in(org["alice"]), signed_in(org["carol"])
    assert alice.get(f"/api/v1/workloads/{row.pk}/").json()["namespace"] == MAPPED
    assert f"-n {MAPPED}".encode() in alice.get(f"/workloads/{row.pk}/").content
    assert carol.get(f"/api/v1/workloads/{row.pk}/").status_code == 404

    # Admitted once the holder ends, then stopped through the portal by Vision's team lead: its Job goes.
    kubesim.advance(120)
    wait_for(lambda: row_of("pipeline-step").status in (Status.ADMITTED, Status.RUNNING))
    services.workload_stop(actor=org["lead"], workload=row_of("pipeline-step"))
    assert tasks.workload_stop.apply(args=[row.pk]).get() == "stopped"
    wait_for(lambda: row_of("pipeline-step").status == Status.STOPPED)
    batch = k8s.BatchV1Api(kubesim.api_client())
    wait_for(lambda: not batch.list_namespaced_job(MAPPED).items)

    # A GPU pod there that no queue admitted is flagged, as in the project's own namespace.
    core.create_namespaced_pod(MAPPED, {"metadata": {"name": "rogue"}, "spec": {"containers": [{
        "name": "main", "image": "busybox", "command": ["sleep", "3600"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    watcher.unqueued_pods_scan()
    assert UnmappedWork.objects.get(name="rogue").reason == UnmappedWork.Reason.OUTSIDE_QUEUE

    # Work still running there when the namespace is unmapped stops counting as Vision's, its GPU-hours closed.
    create_job(kubesim, batch_job("still-running", namespace=MAPPED, pods=1, gpus=1))
    wait_for(lambda: (found := row_of("still-running")) and found.status in (Status.ADMITTED, Status.RUNNING))

    # Unmapped: the queues leave, the namespace stays, the row keeps its history.
    org_services.project_namespace_unmap(actor=org["admin"], project_namespace=mapping)
    result = reconcile(cluster, desired_from_database())
    assert not result.problems, result.problems
    watcher.resync()
    left = wait_for(lambda: (found := row_of("still-running")) and found.status == Status.STOPPED and found)
    assert left.status_reason == "NoLongerMapped"
    assert UsageInterval.objects.get(workload=left).ended_at is not None
    assert local_queues(cluster, MAPPED) == {} and core.read_namespace(MAPPED).metadata.name == MAPPED
    assert local_queues(cluster, "proj-vision")
    stopped = row_of("pipeline-step")
    assert stopped.status == Status.STOPPED and stopped.events.count() >= 3


def test_a_mapped_namespace_that_does_not_exist_is_reported_not_created(kubesim, org, cluster):
    vision = Project.objects.get(slug="vision")
    org_services.project_namespace_map(actor=org["admin"], project=vision, namespace="not-there-yet")
    result = reconcile(cluster, desired_from_database())
    assert result.problems == [
        "Project vision: namespace not-there-yet is mapped to it but does not exist in the cluster; the portal never "
        "creates a mapped namespace, so its queues there wait until someone creates it (or an admin unmaps it)."]
    assert not [ns for ns in cluster.list("Namespace") if ns["metadata"]["name"] == "not-there-yet"]
    assert local_queues(cluster, "proj-vision")  # the project's own queues are reconciled all the same

    k8s.CoreV1Api(kubesim.api_client()).create_namespace({"metadata": {"name": "not-there-yet"}})
    result = reconcile(cluster, desired_from_database())
    assert not result.problems and set(local_queues(cluster, "not-there-yet")) == set(
        local_queues(cluster, "proj-vision"))
