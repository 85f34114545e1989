"""Reconcile against a served kubesim: create, no-op, one-object changes, drift repair, ownership, safe order."""

from decimal import Decimal

import pytest

from apps.org import services
from apps.org.models import Department, NodePool, Project, Quota
from worker.kueue_sync import as_yaml, desired_from_database, read_owned, reconcile


def versions(gw):
    return {key: obj["metadata"]["resourceVersion"] for key, obj in read_owned(gw).items()}


@pytest.fixture
def first_sync(demo, cluster):
    first = reconcile(cluster, desired_from_database())
    return first


def test_first_run_creates_every_object(first_sync, cluster):
    desired = desired_from_database()
    assert len(first_sync.changes) == len(desired) == 115
    assert all(change.startswith("created ") for change in first_sync.changes)
    queue = cluster.get("ClusterQueue", "proj-vision-h100-guaranteed")
    assert queue["spec"]["cohortName"] == "proj-vision-h100"
    local = cluster.get("LocalQueue", "elastic-h100", namespace="proj-vision")
    assert local["spec"]["clusterQueue"] == "proj-vision-h100-elastic"


def test_second_run_writes_nothing(first_sync, cluster):
    before = versions(cluster)
    assert reconcile(cluster, desired_from_database()).changes == []
    assert versions(cluster) == before


def test_weight_change_touches_exactly_one_object(first_sync, cluster, demo):
    quota = Quota.objects.get(project__slug="vision", node_pool__slug="h100")
    services.quota_update(actor=demo["lead"], quota=quota, over_quota_weight=Decimal("3.5"))
    before = versions(cluster)
    result = reconcile(cluster, desired_from_database())
    assert result.changes == ["updated Cohort proj-vision-h100"]
    after = versions(cluster)
    changed = [key for key in after if after[key] != before[key]]
    assert changed == [("Cohort", "", "proj-vision-h100")]
    assert cluster.get("Cohort", "proj-vision-h100")["spec"]["fairSharing"]["weight"] in ("3.5", 3.5)


def test_hand_made_drift_is_repaired(first_sync, cluster):
    queue = cluster.get("ClusterQueue", "proj-nlp-h100-guaranteed")
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 9
    queue["spec"]["preemption"]["withinClusterQueue"] = "LowerPriority"
    cluster.replace(queue)
    cluster.delete("LocalQueue", "guaranteed-h100", namespace="proj-nlp")
    result = reconcile(cluster, desired_from_database())
    assert sorted(result.changes) == ["created LocalQueue proj-nlp/guaranteed-h100",
                                      "updated ClusterQueue proj-nlp-h100-guaranteed"]
    repaired = cluster.get("ClusterQueue", "proj-nlp-h100-guaranteed")["spec"]
    assert str(repaired["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]) == "4"
    assert repaired["preemption"]["withinClusterQueue"] == "Never"


def test_objects_not_owned_by_the_portal_are_never_touched(first_sync, cluster):
    foreign = cluster.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                              "metadata": {"name": "someone-elses", "labels": {"team": "infra"}},
                              "spec": {"namespaceSelector": {}, "resourceGroups": []}})
    lookalike = cluster.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
                                "metadata": {"name": "portal-h200"}, "spec": {}})
    assert reconcile(cluster, desired_from_database()).changes == []
    # Kueue itself may write their status; the portal never writes their metadata or spec.
    for before in (foreign, lookalike):
        after = cluster.get(before["kind"], before["metadata"]["name"])
        assert after["metadata"]["generation"] == before["metadata"]["generation"]
        assert after["metadata"].get("labels") == before["metadata"].get("labels")
        assert after["spec"] == before["spec"]


def test_moving_quota_shrinks_before_it_grows(first_sync, cluster, demo):
    h100 = NodePool.objects.get(slug="h100")
    services.quota_set(actor=demo["admin"], node_pool=h100, project=Project.objects.get(slug="vision"),
                       deserved=2, limit=8, over_quota_weight=2)
    services.quota_set(actor=demo["admin"], node_pool=h100, project=Project.objects.get(slug="nlp"),
                       deserved=6, limit=8, over_quota_weight=1)
    result = reconcile(cluster, desired_from_database())
    assert result.changes.index("updated ClusterQueue proj-vision-h100-guaranteed") < \
        result.changes.index("updated ClusterQueue proj-nlp-h100-guaranteed")


def test_removed_project_objects_are_deleted_children_first(first_sync, cluster, demo):
    project = services.project_create(actor=demo["admin"], department=Department.objects.get(slug="research"),
                                      slug="speech", name="Speech")
    services.quota_set(actor=demo["admin"], node_pool=NodePool.objects.get(slug="l40s-shared"), project=project,
                       deserved=0, limit=4)
    created = reconcile(cluster, desired_from_database()).changes
    assert "created Namespace proj-speech" in created and "created Cohort proj-speech-l40s-shared" in created
    services.project_delete(actor=demo["admin"], project=project)
    deleted = reconcile(cluster, desired_from_database()).changes
    assert deleted.index("deleted LocalQueue proj-speech/guaranteed-l40s-shared") < \
        deleted.index("deleted ClusterQueue proj-speech-l40s-shared-guaranteed") < \
        deleted.index("deleted Cohort proj-speech-l40s-shared") < deleted.index("deleted Namespace proj-speech")
    assert "Namespace proj-speech" not in " ".join(f"{k[0]} {k[2]}" for k in read_owned(cluster))


def test_dry_run_yaml_lists_every_object(demo):
    import yaml

    documents = list(yaml.safe_load_all(as_yaml(desired_from_database())))
    assert len(documents) == 115
    assert {doc["kind"] for doc in documents} == {"WorkloadPriorityClass", "ResourceFlavor", "Namespace", "Cohort",
                                                  "ClusterQueue", "LocalQueue"}
