"""Every quota rule, accepted and refused, with the message a user sees; refusals change nothing."""

from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import Department, NodePool, PriorityClass, Project, Quota
from tests.apps.usage.reports_support import interval
from tests.factories import NodePoolFactory, PriorityClassFactory, WorkloadFactory


def messages(exc: ValidationError) -> str:
    return " ".join(str(m) for m in exc.messages)


@pytest.fixture
def org(demo):
    return {
        "admin": demo["admin"], "deptadmin": demo["deptadmin"], "lead": demo["lead"], "alice": demo["alice"],
        "h100": NodePool.objects.get(slug="h100"), "research": Department.objects.get(slug="research"),
        "production": Department.objects.get(slug="production"), "vision": Project.objects.get(slug="vision"),
        "nlp": Project.objects.get(slug="nlp"),
    }


def unchanged(func):
    """Run func, expecting a ValidationError, and check that no quota or audit row changed."""
    before = (list(Quota.objects.values_list("pk", "deserved", "limit", "over_quota_weight")),
              AuditEvent.objects.count())
    with pytest.raises(ValidationError) as caught:
        func()
    after = (list(Quota.objects.values_list("pk", "deserved", "limit", "over_quota_weight")),
             AuditEvent.objects.count())
    assert after == before
    return messages(caught.value)


def test_limit_below_deserved_is_refused(org):
    message = unchanged(lambda: services.quota_set(
        actor=org["admin"], node_pool=org["h100"], project=org["vision"], deserved=4, limit=3))
    assert "The limit (3) cannot be below the deserved quota (4)." in message


def test_limit_equal_to_deserved_and_unlimited_are_accepted(org):
    quota = services.quota_set(actor=org["admin"], node_pool=org["h100"], project=org["vision"], deserved=4, limit=4)
    assert quota.limit == 4
    quota = services.quota_set(actor=org["admin"], node_pool=org["h100"], project=org["vision"], deserved=4, limit=None)
    assert quota.limit is None and quota.over_quota_units is None


def test_projects_cannot_exceed_department_quota(org):
    # Research has 8 on h100; vision and nlp hold 4 each.
    message = unchanged(lambda: services.quota_set(
        actor=org["admin"], node_pool=org["h100"], project=org["vision"], deserved=5, limit=8))
    assert "Research has 8 deserved units on h100 and its other projects hold 4, so this project can have at most 4" \
        in message


def test_projects_may_fill_department_quota_exactly(org):
    services.quota_set(actor=org["admin"], node_pool=org["h100"], project=org["nlp"], deserved=2, limit=8)
    quota = services.quota_set(actor=org["admin"], node_pool=org["h100"], project=org["vision"], deserved=6, limit=8)
    assert quota.deserved == 6


def test_department_quota_cannot_drop_below_its_projects(org):
    message = unchanged(lambda: services.quota_set(
        actor=org["admin"], node_pool=org["h100"], department=org["research"], deserved=7, limit=12))
    assert "The department's projects hold 8 deserved units on h100" in message


def test_departments_cannot_exceed_pool_capacity(org):
    # h100 has 16; departments hold 8 + 4 + 4.
    message = unchanged(lambda: services.quota_set(
        actor=org["admin"], node_pool=org["h100"], department=org["production"], deserved=5, limit=8))
    assert "h100 has 16 units and other departments hold 12, so at most 4 can be given here" in message
    assert "mark the pool over-subscribable" in message


def test_over_subscribable_pool_accepts_more_than_capacity(org):
    services.node_pool_update(actor=org["admin"], node_pool=org["h100"], over_subscribable=True)
    quota = services.quota_set(actor=org["admin"], node_pool=org["h100"], department=org["production"], deserved=10,
                               limit=None)
    assert quota.deserved == 10
    # Going back to a strict pool is refused while departments hold more than the capacity.
    with pytest.raises(ValidationError) as caught:
        services.node_pool_update(actor=org["admin"], node_pool=org["h100"], over_subscribable=False)
    assert "Departments hold 22 deserved units on h100, more than a capacity of 16" in messages(caught.value)
    assert NodePool.objects.get(slug="h100").over_subscribable is True


def test_pool_capacity_cannot_drop_below_assigned_quota(org):
    with pytest.raises(ValidationError) as caught:
        services.node_pool_update(actor=org["admin"], node_pool=org["h100"], capacity=15)
    assert "more than a capacity of 15" in messages(caught.value)
    assert NodePool.objects.get(slug="h100").capacity == 16


def test_pool_update_reports_every_refusal_at_once(org):
    with pytest.raises(ValidationError) as caught:
        services.node_pool_update(actor=org["admin"], node_pool=org["h100"], slug="h200", capacity=15, name="")
    errors = caught.value.message_dict
    assert errors["slug"] == ["The name of a pool in use cannot change: it names its Kueue objects."]
    assert "more than a capacity of 15" in errors["capacity"][0]
    assert errors["name"] == ["This field cannot be blank."]
    assert NodePool.objects.filter(slug="h100", capacity=16).exists()


NINE_LABELS = {f"portal.gpu/label-{i}": "x" for i in range(9)}


def test_pool_selectors_are_refused_where_kueue_would_refuse_the_flavor_all_at_once(org):
    """Kueue's ResourceFlavor takes at most 8 node labels and 8 taints, unique by key and effect: the pool is refused
    before it is saved, every problem at once, instead of every later reconcile failing on it."""
    taints = [{"key": "gpu", "effect": "NoSchedule"}, {"key": "gpu", "value": "b", "effect": "NoSchedule"},
              {"key": "bad key!", "effect": "Sometimes"}]
    with pytest.raises(ValidationError) as caught:
        services.node_pool_create(actor=org["admin"], slug="b200", name="B200", gpu_resource="nvidia.com/gpu",
                                  capacity=8, node_labels={**NINE_LABELS, "zone": "bad value!"}, node_taints=taints,
                                  cut=NodePool.Cut.MIG)
    errors = caught.value.message_dict
    assert errors["node_labels"] == [
        "'bad value!' is not a valid Kubernetes label value (at most 63 letters, digits, '-', '_' or '.', starting "
        "and ending alphanumeric).",
        "10 node labels: Kueue's ResourceFlavor takes at most 8. Select the pool's nodes with fewer labels."]
    assert errors["node_taints"] == [
        "'bad key!' is not a valid Kubernetes label key.",
        "Taint 3: the effect must be one of NoSchedule, PreferNoSchedule, NoExecute.",
        "Taints 1 and 2 have the same key and effect (gpu:NoSchedule); Kueue takes one taint per key and effect."]
    assert errors["mig_profile"] == ["A MIG pool needs its profile, e.g. 3g.40gb."]
    nine_taints = [{"key": f"taint-{i}", "effect": "NoSchedule"} for i in range(9)]
    with pytest.raises(ValidationError) as caught:
        services.node_pool_update(actor=org["admin"], node_pool=org["h100"], node_taints=nine_taints,
                                  node_labels=["portal.gpu/pool"])
    assert caught.value.message_dict == {
        "node_taints": ["9 node taints: Kueue's ResourceFlavor takes at most 8 (and as many tolerations)."],
        "node_labels": ["Node labels are a mapping of label keys to label values."]}
    assert not NodePool.objects.filter(slug="b200").exists()
    assert NodePool.objects.get(slug="h100").node_taints == []


def test_department_update_reports_every_refusal_at_once(org):
    with pytest.raises(ValidationError) as caught:
        services.department_update(actor=org["admin"], department=org["research"], slug="science", name="")
    errors = caught.value.message_dict
    assert errors["slug"] == ["A department's name in Kubernetes cannot change once created."]
    assert errors["name"] == ["This field cannot be blank."]
    assert Department.objects.get(pk=org["research"].pk).name == "Research"


@pytest.mark.parametrize("weight", [-1, 1001])
def test_weight_bounds(org, weight):
    message = unchanged(lambda: services.quota_set(
        actor=org["admin"], node_pool=org["h100"], project=org["vision"], deserved=4, limit=8,
        over_quota_weight=weight))
    assert "Ensure this value is" in message


@pytest.mark.parametrize("slug", ["Vision", "-vision", "vision-", "vi_sion", "v" * 41, ""])
def test_project_slug_must_be_dns_label(org, slug):
    with pytest.raises(ValidationError):
        services.project_create(actor=org["admin"], department=org["research"], slug=slug, name="X")
    assert not Project.objects.filter(name="X").exists()


def test_duplicate_slugs_are_refused(org):
    with pytest.raises(ValidationError) as caught:
        services.project_create(actor=org["admin"], department=org["research"], slug="vision", name="Another")
    assert "already exists" in messages(caught.value)
    with pytest.raises(ValidationError):
        services.department_create(actor=org["admin"], slug="research", name="Research 2")


def test_project_gets_namespace_and_audit_row(org):
    project = services.project_create(actor=org["deptadmin"], department=org["research"], slug="speech",
                                      name="Speech")
    assert project.namespace == "proj-speech"
    event = AuditEvent.objects.get(action="project.create", object_id=str(project.pk))
    assert event.actor == org["deptadmin"] and event.department == org["research"] and event.before is None
    assert event.after["slug"] == "speech"


def test_team_lead_weight_within_department_bounds(org):
    quota = Quota.objects.get(project=org["vision"], node_pool=org["h100"])
    updated = services.quota_update(actor=org["lead"], quota=quota, over_quota_weight="3.5")
    assert updated.over_quota_weight == Decimal("3.5")
    event = AuditEvent.objects.get(action="quota.weight")
    assert event.before["over_quota_weight"] == "2" and event.after["over_quota_weight"] == "3.5"
    message = unchanged(lambda: services.quota_update(actor=org["lead"], quota=quota, over_quota_weight=11))
    assert "Choose a weight between 0 and 10, the bounds set for Research." in message


def test_team_lead_cannot_change_deserved_quota(org):
    with pytest.raises(PermissionDenied):
        services.quota_set(actor=org["lead"], node_pool=org["h100"], project=org["vision"], deserved=2, limit=8)
    assert Quota.objects.get(project=org["vision"], node_pool=org["h100"]).deserved == 4


def test_department_admin_is_confined_to_own_department(org):
    serving = Project.objects.get(slug="serving")
    with pytest.raises(PermissionDenied):
        services.quota_set(actor=org["deptadmin"], node_pool=org["h100"], project=serving, deserved=2, limit=4)
    with pytest.raises(PermissionDenied):
        services.quota_set(actor=org["deptadmin"], node_pool=org["h100"], department=org["research"], deserved=8,
                           limit=16)
    quota = services.quota_set(actor=org["deptadmin"], node_pool=org["h100"], project=org["vision"], deserved=3,
                               limit=6)
    assert quota.deserved == 3


def test_researcher_cannot_change_anything(org):
    quota = Quota.objects.get(project=org["vision"], node_pool=org["h100"])
    with pytest.raises(PermissionDenied):
        services.quota_update(actor=org["alice"], quota=quota, over_quota_weight=3)
    with pytest.raises(PermissionDenied):
        services.node_pool_create(actor=org["alice"], slug="x", name="x", gpu_resource="nvidia.com/gpu", capacity=1)


def test_unchanged_quota_writes_no_audit_row(org):
    rows = AuditEvent.objects.count()
    services.quota_set(actor=org["admin"], node_pool=org["h100"], project=org["vision"], deserved=4, limit=8,
                       over_quota_weight=2)
    assert AuditEvent.objects.count() == rows


def test_deleting_pool_in_use_is_refused(org):
    with pytest.raises(ValidationError) as caught:
        services.node_pool_delete(actor=org["admin"], node_pool=org["h100"])
    assert "quotas still use h100" in messages(caught.value)


def test_deleting_department_with_projects_is_refused(org):
    with pytest.raises(ValidationError) as caught:
        services.department_delete(actor=org["admin"], department=org["research"])
    assert "Research still has 2 projects" in messages(caught.value)


def test_deleting_a_pool_that_workloads_and_gpu_hours_use_is_refused_naming_them(org):
    pool = NodePoolFactory(slug="spare")
    train = PriorityClass.objects.get(name="train")
    running = WorkloadFactory(project=org["vision"], node_pool=pool, priority_class=train, status="running")
    for status in ("succeeded", "failed"):
        WorkloadFactory(project=org["vision"], node_pool=pool, priority_class=train, status=status)
    interval(running, "2026-03-01 10:00", "2026-03-01 11:00")
    message = unchanged(lambda: services.node_pool_delete(actor=org["admin"], node_pool=pool))
    assert message == ("3 workloads (1 not finished) and 1 GPU-hour record still use pool spare; it cannot be "
                       "deleted while they exist.")
    assert NodePool.objects.filter(pk=pool.pk).exists()


def test_deleting_a_priority_class_or_project_a_finished_workload_used_is_refused(org):
    priority_class = PriorityClassFactory(name="rare")
    project = services.project_create(actor=org["admin"], department=org["research"], slug="tmp", name="Tmp")
    WorkloadFactory(project=project, node_pool=org["h100"], priority_class=priority_class, status="succeeded")
    assert unchanged(lambda: services.priority_class_delete(actor=org["admin"], priority_class=priority_class)) == (
        "1 workload (all finished, kept for history) still uses priority class rare; it cannot be deleted while "
        "they exist.")
    assert unchanged(lambda: services.project_delete(actor=org["admin"], project=project)).startswith(
        "1 workload (all finished, kept for history) still uses project tmp;")
    assert PriorityClass.objects.filter(pk=priority_class.pk).exists() and Project.objects.filter(pk=project.pk)


def test_project_delete_audits_its_quotas(org):
    project = services.project_create(actor=org["admin"], department=org["research"], slug="tmp", name="Tmp")
    services.quota_set(actor=org["admin"], node_pool=NodePool.objects.get(slug="l40s-shared"), project=project,
                       deserved=0, limit=4)
    project_id = str(project.pk)
    services.project_delete(actor=org["admin"], project=project)
    assert set(AuditEvent.objects.filter(object_id=project_id).values_list("action", flat=True)) >= {
        "project.create", "project.delete"}
    assert AuditEvent.objects.filter(action="quota.delete").exists()


def test_priority_class_rename_is_refused(org):
    train = PriorityClass.objects.get(name="train")
    with pytest.raises(ValidationError) as caught:
        services.priority_class_update(actor=org["admin"], priority_class=train, name="training")
    assert "cannot be renamed" in messages(caught.value)
    updated = services.priority_class_update(actor=org["admin"], priority_class=train, value=60)
    assert updated.value == 60
    assert AuditEvent.objects.filter(action="priority_class.update", before__value=50, after__value=60).exists()


def test_card_fraction_cannot_exceed_one(org):
    with pytest.raises(ValidationError) as caught:
        services.node_pool_create(actor=org["admin"], slug="big", name="Big", gpu_resource="nvidia.com/gpu",
                                  capacity=4, card_fraction_numerator=2, card_fraction_denominator=1)
    assert "more than one physical card" in messages(caught.value)
