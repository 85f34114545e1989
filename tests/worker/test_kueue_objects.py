"""The org -> Kueue mapping (docs/architecture.md, The organisation in Kueue), checked value by value and against
Kueue's CRD schemas."""

from decimal import Decimal

import pytest

from apps.core.kueue_names import KueueNames
from tests.crd_schemas import validate_kueue_object
from worker.kueue_objects import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    DepartmentSpec,
    OrgSnapshot,
    PoolQuota,
    PoolSpec,
    PriorityClassSpec,
    ProjectSpec,
    desired_objects,
    quantity,
)
from worker.kueue_sync import org_snapshot


def by_name(objects, kind):
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}


def gpu(obj, index=0):
    return obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][index]


@pytest.fixture
def demo_objects(demo):
    return desired_objects(org_snapshot())


def test_every_demo_object_is_valid_for_kueue(demo_objects):
    kueue = [obj for obj in demo_objects if obj["apiVersion"].startswith("kueue.x-k8s.io/")]
    assert len(kueue) == 4 + 3 + 3 * (1 + 3 + 6 * 3) + 6 * 3 * 2
    for obj in kueue:
        validate_kueue_object(obj)
        assert obj["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY


def test_demo_tree_for_h100(demo_objects):
    cohorts = by_name(demo_objects, "Cohort")
    queues = by_name(demo_objects, "ClusterQueue")
    # Departments hold all 16 H100 cards: the root has no unassigned quota.
    assert cohorts["portal-h100"]["spec"] == {}
    research = cohorts["dept-research-h100"]["spec"]
    assert research["parentName"] == "portal-h100"
    assert research["fairSharing"] == {"weight": 2}
    assert gpu(cohorts["dept-research-h100"]) == {"name": "nvidia.com/gpu", "nominalQuota": 0, "borrowingLimit": 4}
    vision = cohorts["proj-vision-h100"]["spec"]
    assert vision["parentName"] == "dept-research-h100"
    assert gpu(cohorts["proj-vision-h100"]) == {"name": "nvidia.com/gpu", "nominalQuota": 0, "borrowingLimit": 4}
    guaranteed = queues["proj-vision-h100-guaranteed"]["spec"]
    assert guaranteed["cohortName"] == "proj-vision-h100"
    assert gpu(queues["proj-vision-h100-guaranteed"]) == {"name": "nvidia.com/gpu", "nominalQuota": 4,
                                                          "borrowingLimit": 0}
    assert guaranteed["preemption"] == {"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"}
    assert guaranteed["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "proj-vision"}}
    elastic = queues["proj-vision-h100-elastic"]["spec"]
    assert gpu(queues["proj-vision-h100-elastic"]) == {"name": "nvidia.com/gpu", "nominalQuota": 0}
    assert elastic["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    assert elastic["namespaceSelector"] == guaranteed["namespaceSelector"]
    # Serving does not lend its deserved cards.
    assert gpu(queues["proj-serving-h100-guaranteed"])["lendingLimit"] == 0


def test_demo_local_queues_namespaces_and_priorities(demo_objects):
    local_queues = [obj for obj in demo_objects if obj["kind"] == "LocalQueue"]
    vision = {obj["metadata"]["name"]: obj["spec"]["clusterQueue"] for obj in local_queues
              if obj["metadata"]["namespace"] == "proj-vision"}
    assert vision["guaranteed-h100"] == "proj-vision-h100-guaranteed"
    assert vision["elastic-a100-mig-3g40gb"] == "proj-vision-a100-mig-3g40gb-elastic"
    assert len(vision) == 6
    namespaces = by_name(demo_objects, "Namespace")
    assert set(namespaces) == {"proj-vision", "proj-nlp", "proj-serving", "proj-etl", "proj-forecasting",
                               "proj-analytics"}
    priorities = by_name(demo_objects, "WorkloadPriorityClass")
    assert {name: obj["value"] for name, obj in priorities.items()} == {
        "train": 50, "interactive-preemptible": 75, "build": 100, "inference": 125}


def test_flavor_carries_node_labels_and_tolerates_taints():
    pool = PoolSpec(slug="h100", gpu_resource="nvidia.com/gpu", capacity=8, node_labels={"portal.gpu/pool": "h100"},
                    node_taints=({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},))
    flavor = by_name(desired_objects(OrgSnapshot(pools=(pool,), departments=(), priority_classes=())),
                     "ResourceFlavor")["h100"]
    validate_kueue_object(flavor)
    assert flavor["spec"]["nodeLabels"] == {"portal.gpu/pool": "h100"}
    assert flavor["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]


def snapshot(department_quota, project_quota, capacity=8):
    pool = PoolSpec(slug="h100", gpu_resource="nvidia.com/gpu", capacity=capacity)
    project = ProjectSpec(slug="p", namespace="proj-p", does_not_lend=False,
                          quotas={"h100": project_quota} if project_quota else {})
    quotas = {"h100": department_quota} if department_quota else {}
    return OrgSnapshot(pools=(pool,), departments=(DepartmentSpec(slug="d", quotas=quotas, projects=(project,)),),
                       priority_classes=(PriorityClassSpec(name="train", value=50, description=""),))


def test_unassigned_capacity_sits_on_the_root():
    objects = desired_objects(snapshot(PoolQuota(6, None, Decimal(1)), PoolQuota(2, None, Decimal("1.5")), capacity=8))
    cohorts = by_name(objects, "Cohort")
    assert gpu(cohorts["portal-h100"]) == {"name": "nvidia.com/gpu", "nominalQuota": 2}
    assert gpu(cohorts["dept-d-h100"]) == {"name": "nvidia.com/gpu", "nominalQuota": 4}
    # Unlimited: no borrowing limit anywhere, and the project cohort needs no resource group.
    assert "resourceGroups" not in cohorts["proj-p-h100"]["spec"]
    assert cohorts["proj-p-h100"]["spec"]["fairSharing"] == {"weight": "1.5"}
    for obj in objects:
        if obj["apiVersion"].startswith("kueue"):
            validate_kueue_object(obj)


def test_over_subscribed_pool_gives_the_root_nothing():
    cohorts = by_name(desired_objects(snapshot(PoolQuota(10, 10, Decimal(1)), None, capacity=8)), "Cohort")
    assert cohorts["portal-h100"]["spec"] == {}
    assert gpu(cohorts["dept-d-h100"]) == {"name": "nvidia.com/gpu", "nominalQuota": 10, "borrowingLimit": 0}


def test_pool_without_quota_rows_has_no_tree():
    objects = desired_objects(snapshot(None, None))
    assert not by_name(objects, "Cohort") and not by_name(objects, "ClusterQueue")
    assert set(by_name(objects, "ResourceFlavor")) == {"h100"}


def test_department_without_a_row_still_parents_its_projects():
    cohorts = by_name(desired_objects(snapshot(None, PoolQuota(0, 4, Decimal(1)))), "Cohort")
    assert gpu(cohorts["dept-d-h100"]) == {"name": "nvidia.com/gpu", "nominalQuota": 0}
    assert gpu(cohorts["proj-p-h100"]) == {"name": "nvidia.com/gpu", "nominalQuota": 0, "borrowingLimit": 4}


def test_prefixes_are_configurable():
    names = set(by_name(desired_objects(snapshot(PoolQuota(4, None, Decimal(1)), PoolQuota(4, None, Decimal(1))),
                                        KueueNames("acme-", "d-", "p-")), "ClusterQueue"))
    assert names == {"p-p-h100-guaranteed", "p-p-h100-elastic"}


@pytest.mark.parametrize(("value", "expected"), [(Decimal("2.00"), 2), (Decimal("2.50"), "2.5"), (3, 3),
                                                 (Decimal("0"), 0)])
def test_quantity(value, expected):
    assert quantity(value) == expected


def test_schema_check_catches_a_typo():
    bad = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "x"},
           "spec": {"cohortNam": "y"}}
    with pytest.raises(AssertionError, match="cohortNam"):
        validate_kueue_object(bad)
