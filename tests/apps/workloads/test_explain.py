"""The "why am I waiting" sentence for each kind of wait, and the facts gathered for it."""

from decimal import Decimal

import pytest

from apps.org.models import Department, NodePool, PriorityClass, Project
from apps.workloads.explain import (
    MISCONFIGURED,
    NEVER_FITS,
    PREEMPTING,
    QUOTA,
    STOPPED_QUEUE,
    QuotaFacts,
    explain,
    explain_workloads,
)
from apps.workloads.models import Kind, Status, Workload
from tests.factories import WorkloadFactory


def queued(**overrides):
    project = Project(slug="vision", name="Vision", namespace="proj-vision", department=Department(name="Research"))
    values = {"pk": 1, "project": project, "kind": Kind.TRAINING, "node_pool": NodePool(slug="h100", name="H100"),
              "gpus": 4, "pods": 1, "preemptible": False, "status": Status.QUEUED, "status_reason": "Pending",
              "status_message": "couldn't assign flavors to pod set main: insufficient unused quota for "
                                "nvidia.com/gpu in flavor h100, 2 more needed", "queue_position_local": 3,
              "kueue_name": "job-wl-1-abcde"}
    values.update(overrides)
    return Workload(**values)


def test_guaranteed_queue_waiting_for_quota():
    result = explain(queued(), QuotaFacts(deserved=4, limit=8, queue_used=Decimal(2), queue_nominal=Decimal(4)))
    assert result.kind == QUOTA
    assert result.sentence == ("Waiting for 4 x H100: your project's guaranteed queue has 2 of 4 in use. "
                               "3 workloads are ahead of you.")
    assert result.numbers["requested"] == 4 and result.numbers["position"] == 3


def test_elastic_work_waits_for_idle_capacity():
    result = explain(queued(preemptible=True, queue_position_local=0),
                     QuotaFacts(deserved=4, limit=8, project_used=Decimal(8), department_deserved=8,
                                department_used=Decimal(8)))
    assert result.kind == QUOTA
    assert "of idle capacity: your project uses 8 of its limit 8, the department uses 8 of its deserved 8" \
        in result.sentence
    assert result.sentence.endswith("You are next in line.")


def test_waiting_for_preempted_workloads():
    result = explain(queued(status_reason="WaitingForPreemptedWorkloads", queue_position_local=None), QuotaFacts())
    assert result.kind == PREEMPTING and "waits for the workloads it preempted" in result.sentence


def test_never_fits_says_what_to_change():
    result = explain(queued(gpus=12, status_reason="ExceedsMaxQuota", preemptible=True), QuotaFacts(limit=8))
    assert result.kind == NEVER_FITS
    assert result.sentence == ("This can never start as submitted: it asks for 12 x H100 but Vision may use at most "
                               "8 there. Ask for fewer GPUs or pods, or ask your admin for more quota.")


def test_misconfigured_and_stopped_queues():
    broken = explain(queued(status_reason="Misconfigured", status_message="ClusterQueue x doesn't exist"),
                     QuotaFacts())
    assert broken.kind == MISCONFIGURED and "ClusterQueue x doesn't exist" in broken.sentence
    held = explain(queued(), QuotaFacts(queue_active=False, queue_reason="Stopped"))
    assert held.kind == STOPPED_QUEUE and "on hold by an admin" in held.sentence


@pytest.mark.parametrize("status", [Status.RUNNING, Status.ADMITTED, Status.SUCCEEDED, Status.SUBMITTING])
def test_nothing_to_explain_unless_waiting(status):
    assert explain(queued(status=status), QuotaFacts()) is None


def test_explain_workloads_reads_the_mirror_in_fixed_queries(demo, django_assert_num_queries):
    from django.utils import timezone

    from apps.cluster.models import ClusterQueueState

    pool = NodePool.objects.get(slug="h100")
    vision = Project.objects.get(slug="vision")
    ClusterQueueState.objects.create(name="proj-vision-h100-guaranteed", project=vision, node_pool=pool,
                                     guaranteed=True, nominal=4, used=4, observed_at=timezone.now())
    build = PriorityClass.objects.get(name="build")
    rows = [WorkloadFactory(project=vision, owner=demo["alice"], node_pool=pool, gpus=2, priority_class=build,
                            preemptible=False, status=Status.QUEUED, status_reason="Pending",
                            queue_position_local=index, kueue_name=f"k{index}") for index in range(5)]
    workloads = list(Workload.objects.select_related("project__department", "node_pool").order_by("pk"))
    with django_assert_num_queries(3):
        explanations = explain_workloads(workloads)
    assert explanations[rows[0].pk].sentence == (
        "Waiting for 2 x H100 80GB: your project's guaranteed queue has 4 of 4 in use. You are next in line.")
    assert explanations[rows[2].pk].sentence.endswith("2 workloads are ahead of you.")
