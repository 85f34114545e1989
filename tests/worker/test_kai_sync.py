"""KAI pools reconciled against a served kubesim (KAI's Queue CRD installed): Queues instead of Kueue objects, a second
pass writes nothing, drift repaired, what the portal no longer wants deleted only when it owns it."""

import pytest
import yaml

from apps.org import services
from apps.org.models import Department, NodePool, PriorityClass, Project, Quota
from tests.crd_schemas import validate_kai_object
from worker.kueue_sync import as_yaml, desired_from_database, read_owned, reconcile

RTX_QUEUES = ["dept-research-rtx", "proj-nlp-rtx", "proj-vision-rtx"]  # parents first, projects by slug
PRIORITY_CLASSES = ["build", "inference", "interactive-preemptible", "train"]  # the demo's, by name


def versions(gw):
    return {key: obj["metadata"]["resourceVersion"] for key, obj in read_owned(gw).items()}


def queues(gw):
    return sorted(key[2] for key in read_owned(gw) if key[0] == "Queue")


@pytest.fixture
def rtx(demo, synced):
    """A KAI pool with fractions; Research 4 (limit 8) on it, Vision 2 (unlimited), NLP 2 (limit 2); reconciled."""
    admin = demo["admin"]
    pool = services.node_pool_create(actor=admin, slug="rtx", name="RTX PRO 6000", gpu_resource="nvidia.com/gpu",
                                     capacity=16, scheduler="kai", gpu_fractions=True)
    services.quota_set(actor=admin, node_pool=pool, department=Department.objects.get(slug="research"), deserved=4,
                       limit=8, over_quota_weight=2)
    services.quota_set(actor=admin, node_pool=pool, project=Project.objects.get(slug="vision"), deserved=2,
                       limit=None, over_quota_weight=3)
    services.quota_set(actor=admin, node_pool=pool, project=Project.objects.get(slug="nlp"), deserved=2, limit=2)
    result = reconcile(synced, desired_from_database())
    assert sorted(result.changes) == [f"created PriorityClass {name}" for name in PRIORITY_CLASSES] + [
        f"created Queue {name}" for name in sorted(RTX_QUEUES)]
    return pool


def test_a_kai_pool_gets_queues_and_no_kueue_objects(rtx, synced):
    owned = read_owned(synced)
    assert not [key for key, obj in owned.items()
                if obj["metadata"]["labels"].get("portal.gpu/pool") == "rtx" and key[0] != "Queue"]
    vision = synced.get("Queue", "proj-vision-rtx")
    validate_kai_object({key: vision[key] for key in ("apiVersion", "kind", "metadata", "spec")})
    assert vision["spec"]["parentQueue"] == "dept-research-rtx"
    assert vision["spec"]["resources"]["gpu"] == {"quota": 2, "limit": -1, "overQuotaWeight": 3}
    assert synced.get("Queue", "proj-nlp-rtx")["spec"]["resources"]["gpu"] == {"quota": 2, "limit": 2,
                                                                              "overQuotaWeight": 1}
    assert synced.get("Queue", "dept-research-rtx")["spec"]["resources"]["gpu"]["limit"] == 8


def test_a_second_pass_writes_nothing(rtx, synced):
    before = versions(synced)
    assert reconcile(synced, desired_from_database()).changes == []
    assert versions(synced) == before


def test_a_field_the_portal_leaves_unset_set_by_hand_is_taken_away(rtx, synced):
    queue = synced.get("Queue", "dept-research-rtx")
    queue["spec"]["priority"] = 500
    synced.replace(queue)
    assert reconcile(synced, desired_from_database()).changes == ["updated Queue dept-research-rtx"]
    assert "priority" not in synced.get("Queue", "dept-research-rtx")["spec"]


def test_a_queue_edited_or_deleted_by_hand_is_put_back(rtx, synced):
    queue = synced.get("Queue", "proj-vision-rtx")
    queue["spec"]["resources"]["gpu"]["quota"] = 9
    queue["spec"]["priority"] = 500  # a field the portal leaves unset is drift too
    synced.replace(queue)
    synced.delete("Queue", "proj-nlp-rtx")
    result = reconcile(synced, desired_from_database())
    assert sorted(result.changes) == ["created Queue proj-nlp-rtx", "updated Queue proj-vision-rtx"]
    repaired = synced.get("Queue", "proj-vision-rtx")["spec"]
    assert repaired["resources"]["gpu"]["quota"] == 2 and "priority" not in repaired
    assert reconcile(synced, desired_from_database()).changes == []


def test_a_quota_change_updates_its_queue_only(rtx, synced, demo):
    quota = Quota.objects.get(project__slug="nlp", node_pool=rtx)
    services.quota_update(actor=demo["admin"], quota=quota, limit=None)
    assert reconcile(synced, desired_from_database()).changes == ["updated Queue proj-nlp-rtx"]
    assert synced.get("Queue", "proj-nlp-rtx")["spec"]["resources"]["gpu"]["limit"] == -1


def test_queues_no_longer_wanted_are_deleted_children_first_and_foreign_ones_kept(rtx, synced, demo):
    foreign = synced.create({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                             "metadata": {"name": "default-queue"}, "spec": {"resources": {"gpu": {"quota": 0}}}})
    for quota in Quota.objects.filter(node_pool=rtx, project__isnull=False):
        services.quota_delete(actor=demo["admin"], quota=quota)
    changes = reconcile(synced, desired_from_database()).changes
    assert sorted(changes) == ["deleted Queue proj-nlp-rtx", "deleted Queue proj-vision-rtx"]
    services.quota_delete(actor=demo["admin"], quota=Quota.objects.get(node_pool=rtx, department__isnull=False))
    assert reconcile(synced, desired_from_database()).changes == ["deleted Queue dept-research-rtx"]
    assert queues(synced) == []
    assert synced.get("Queue", "default-queue")["metadata"]["resourceVersion"] == \
        foreign["metadata"]["resourceVersion"]


def test_a_pool_handed_to_kai_swaps_its_kueue_objects_for_queues(synced, demo):
    pool = NodePool.objects.get(slug="l40s-shared")
    services.node_pool_update(actor=demo["admin"], node_pool=pool, scheduler="kai")
    changes = reconcile(synced, desired_from_database()).changes
    created = [change for change in changes if change.startswith("created")]
    deleted = [change for change in changes if change.startswith("deleted")]
    assert sorted(created) == [f"created PriorityClass {name}" for name in PRIORITY_CLASSES] + sorted(
        f"created Queue {name}" for name in (
        "dept-research-l40s-shared", "dept-production-l40s-shared", "dept-data-science-l40s-shared",
        "proj-vision-l40s-shared", "proj-nlp-l40s-shared", "proj-serving-l40s-shared", "proj-etl-l40s-shared",
        "proj-forecasting-l40s-shared", "proj-analytics-l40s-shared"))
    assert "deleted ResourceFlavor l40s-shared" in deleted and "deleted Cohort portal-l40s-shared" in deleted
    assert not [key for key, obj in read_owned(synced).items()
                if obj["metadata"]["labels"].get("portal.gpu/pool") == "l40s-shared" and key[0] != "Queue"]
    assert len(changes) == len(created) + len(deleted)


def test_dry_run_yaml_holds_the_queues(rtx):
    documents = list(yaml.safe_load_all(as_yaml(desired_from_database())))
    assert [doc["metadata"]["name"] for doc in documents if doc["kind"] == "Queue"] == RTX_QUEUES


def test_the_organisations_priority_classes_follow_it_while_a_pool_is_kais(rtx, synced, demo):
    assert synced.get("PriorityClass", "build")["value"] == 100
    build = PriorityClass.objects.get(name="build")
    services.priority_class_update(actor=demo["admin"], priority_class=build, value=110)
    assert [c for c in reconcile(synced, desired_from_database()).changes if "PriorityClass" in c] == [
        "updated WorkloadPriorityClass build", "recreated PriorityClass build"]
    assert synced.get("PriorityClass", "build")["value"] == 110
    assert reconcile(synced, desired_from_database()).changes == []
    services.node_pool_update(actor=demo["admin"], node_pool=rtx, scheduler="kueue", gpu_fractions=False)
    changes = reconcile(synced, desired_from_database()).changes
    assert sorted(change for change in changes if "PriorityClass" in change) == [
        f"deleted PriorityClass {name}" for name in PRIORITY_CLASSES]


def test_a_priority_class_of_the_same_name_not_the_portals_is_left_alone(demo, synced):
    synced.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "train"},
                   "value": 50})  # as KAI's installation has it
    synced.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "build"},
                   "value": 99})
    services.node_pool_create(actor=demo["admin"], slug="rtx", name="RTX PRO 6000", gpu_resource="nvidia.com/gpu",
                              capacity=16, scheduler="kai")
    result = reconcile(synced, desired_from_database())
    assert "created PriorityClass train" not in result.changes and "created PriorityClass build" not in result.changes
    assert [line for line in result.problems if "PriorityClass" in line] == [
        "PriorityClass build: a PriorityClass of this name exists in the cluster without the portal's label "
        "app.kubernetes.io/managed-by=gpu-portal, with value 99 where the organisation's class has 100; the portal "
        "leaves it alone, so KAI Scheduler orders this class's work on KAI pools by the cluster's value. Rename the "
        "class in the portal, or give it the same value."]
    assert "app.kubernetes.io/managed-by" not in (synced.get("PriorityClass", "train")["metadata"].get("labels") or {})
