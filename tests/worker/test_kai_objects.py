"""The org -> KAI Scheduler mapping for KAI pools (worker/kai_objects.py), value by value and against KAI's Queue CRD
schema, beside the Kueue objects the same organisation gives its Kueue pools."""

from decimal import Decimal

import pytest

from apps.core.kueue_tree import PoolQuota
from tests.crd_schemas import validate_kai_object, validate_kueue_object
from tests.k8s_fields import unknown_fields
from worker.kai_objects import kai_objects, queue_resources
from worker.kueue_objects import DepartmentSpec, OrgSnapshot, PoolSpec, PriorityClassSpec, ProjectSpec, desired_objects

GPU = "nvidia.com/gpu"
UNLIMITED_OTHER = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


def org() -> OrgSnapshot:
    """One Kueue pool (h100) and one KAI pool (rtx), the same two departments on both."""
    h100, rtx = (PoolSpec(slug="h100", gpu_resource=GPU, capacity=16),
                 PoolSpec(slug="rtx", gpu_resource=GPU, capacity=16, scheduler="kai"))
    research = DepartmentSpec(
        slug="research", quotas={"h100": PoolQuota(8, 12), "rtx": PoolQuota(8, 12, Decimal(2))},
        projects=(
            ProjectSpec(slug="vision", namespace="proj-vision", does_not_lend=False,
                        quotas={"h100": PoolQuota(4, 8), "rtx": PoolQuota(4, None, Decimal("1.5"))}),
            ProjectSpec(slug="nlp", namespace="proj-nlp", does_not_lend=False,
                        quotas={"h100": PoolQuota(4, 8), "rtx": PoolQuota(4, 4, cpu_cores=Decimal("16.5"),
                                                                              memory_gib=64)}),
        ))
    # No quota row of its own on rtx, one project there with nothing at all.
    production = DepartmentSpec(
        slug="production", quotas={"h100": PoolQuota(4, 4)},
        projects=(ProjectSpec(slug="etl", namespace="proj-etl", does_not_lend=True,
                              quotas={"h100": PoolQuota(0, 4), "rtx": PoolQuota(0, 0)}),))
    return OrgSnapshot(pools=(h100, rtx), departments=(research, production),
                       priority_classes=(PriorityClassSpec(name="train", value=50, description=""),))


@pytest.fixture
def queues():
    return {obj["metadata"]["name"]: obj for obj in kai_objects(org()) if obj["kind"] == "Queue"}


def test_the_same_organisation_gives_valid_kueue_objects_and_valid_kai_queues_side_by_side():
    snapshot = org()
    kueue, kai = desired_objects(snapshot), kai_objects(snapshot)
    for obj in kueue:
        if obj["apiVersion"].startswith("kueue.x-k8s.io/"):
            validate_kueue_object(obj)
    for obj in kai:
        if obj["kind"] == "PriorityClass":  # scheduling.k8s.io/v1, as the official client's model defines it
            assert unknown_fields(obj, "V1PriorityClass") == []
        else:
            validate_kai_object(obj)
    # Kueue gets the Kueue pool only; KAI the KAI pool only.
    assert {obj["metadata"]["labels"].get("portal.gpu/pool") for obj in kueue} == {"h100", None}
    assert [obj["metadata"]["name"] for obj in kueue if obj["kind"] == "ResourceFlavor"] == ["h100"]
    assert [obj["metadata"]["name"] for obj in kai] == [
        "train", "dept-research-rtx", "proj-vision-rtx", "proj-nlp-rtx", "dept-production-rtx", "proj-etl-rtx"]
    # Every project keeps its namespace whatever schedules its pools.
    assert sorted(obj["metadata"]["name"] for obj in kueue if obj["kind"] == "Namespace") == [
        "proj-etl", "proj-nlp", "proj-vision"]


def test_a_pool_without_a_kai_pool_gives_no_queues():
    snapshot = org()
    only_kueue = OrgSnapshot(pools=snapshot.pools[:1], departments=snapshot.departments,
                             priority_classes=snapshot.priority_classes)
    assert kai_objects(only_kueue) == []


def test_the_organisations_priority_classes_are_priority_classes_kai_reads():
    classes = (PriorityClassSpec(name="train", value=50, description=""),
               PriorityClassSpec(name="build", value=100, description="Builds and interactive work."))
    snapshot = org()
    objects = kai_objects(OrgSnapshot(pools=snapshot.pools, departments=snapshot.departments,
                                      priority_classes=classes))
    assert [obj for obj in objects if obj["kind"] == "PriorityClass"] == [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "train", "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}}, "value": 50},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "build", "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}}, "value": 100,
         "description": "Builds and interactive work."},
    ]


def test_department_queue_is_the_parent_with_the_department_quota(queues):
    research = queues["dept-research-rtx"]
    assert research["apiVersion"] == "scheduling.run.ai/v2"
    assert "parentQueue" not in research["spec"] and "priority" not in research["spec"]
    assert research["spec"]["resources"] == {"gpu": {"quota": 8, "limit": 12, "overQuotaWeight": 2},
                                             "cpu": {**UNLIMITED_OTHER, "overQuotaWeight": 2},
                                             "memory": {**UNLIMITED_OTHER, "overQuotaWeight": 2}}
    assert research["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpu-portal", "portal.gpu/pool": "rtx", "kai.scheduler/node-pool": "rtx",
        "portal.gpu/department": "research"}


def test_a_department_without_a_quota_row_guarantees_nothing_and_caps_nothing(queues):
    assert queues["dept-production-rtx"]["spec"]["resources"]["gpu"] == {"quota": 0, "limit": -1,
                                                                         "overQuotaWeight": 1}


def test_project_queue_is_a_leaf_with_deserved_limit_and_weight(queues):
    vision = queues["proj-vision-rtx"]
    assert vision["spec"]["parentQueue"] == "dept-research-rtx"
    # An unlimited project is KAI's -1, never an absent limit (which KAI reads as nothing beyond what it holds).
    assert vision["spec"]["resources"]["gpu"] == {"quota": 4, "limit": -1, "overQuotaWeight": 1.5}
    assert vision["metadata"]["labels"]["portal.gpu/project"] == "vision"


def test_a_limit_equal_to_deserved_caps_at_deserved_and_a_zero_limit_stays_zero(queues):
    # Limit = deserved: no over-quota, but its quota is usable (KAI's limit caps the total, not the excess).
    assert queues["proj-nlp-rtx"]["spec"]["resources"]["gpu"] == {"quota": 4, "limit": 4, "overQuotaWeight": 1}
    # Nothing deserved and nothing allowed: written out as 0, not left to a default.
    assert queues["proj-etl-rtx"]["spec"]["resources"]["gpu"] == {"quota": 0, "limit": 0, "overQuotaWeight": 1}


def test_cpu_and_memory_are_kai_units_when_the_quota_gives_them(queues):
    resources = queues["proj-nlp-rtx"]["spec"]["resources"]
    assert resources["cpu"] == {"quota": 16500, "limit": -1, "overQuotaWeight": 1}  # millicpus
    assert resources["memory"] == {"quota": 68719.476736, "limit": -1, "overQuotaWeight": 1}  # 64 GiB in 10^6 B
    assert queues["proj-vision-rtx"]["spec"]["resources"]["cpu"] == {**UNLIMITED_OTHER, "overQuotaWeight": 1.5}


@pytest.mark.parametrize(("quota", "gpu"), [
    (PoolQuota(0, None), {"quota": 0, "limit": -1, "overQuotaWeight": 1}),
    (PoolQuota(0, 0), {"quota": 0, "limit": 0, "overQuotaWeight": 1}),
    (PoolQuota(3, 3, Decimal("0.25")), {"quota": 3, "limit": 3, "overQuotaWeight": 0.25}),
    (PoolQuota(2, 10, Decimal(0)), {"quota": 2, "limit": 10, "overQuotaWeight": 0}),
])
def test_gpu_resources(quota, gpu):
    assert queue_resources(quota)["gpu"] == gpu
