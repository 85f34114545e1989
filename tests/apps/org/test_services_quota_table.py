"""quota_table_save: many cells of one department's quota table at once; all or nothing, every refusal at once."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied

from apps.core.models import AuditEvent
from apps.org import services, signals
from apps.org.models import Department, NodePool, Project, Quota


@pytest.fixture
def org(demo):
    return {**demo, "research": Department.objects.get(slug="research"), "vision": Project.objects.get(slug="vision"),
            "nlp": Project.objects.get(slug="nlp"), "h100": NodePool.objects.get(slug="h100")}


def state() -> tuple:
    return list(Quota.objects.order_by("pk").values_list()), AuditEvent.objects.count()


def quota(owner: str, pool: str = "h100") -> Quota:
    return Quota.objects.get(**{"project__slug" if owner in {"vision", "nlp"} else "department__slug": owner},
                             node_pool__slug=pool)


def save(org, username: str, rows: list[dict]) -> list[Quota]:
    return services.quota_table_save(actor=org[username], department=org["research"], rows=rows)


def refused(org, username: str, rows: list[dict]) -> dict[int, dict[str, list[str]]]:
    before = state()
    with pytest.raises(services.QuotaTableError) as caught:
        save(org, username, rows)
    assert state() == before
    return caught.value.rows


def test_every_refusal_is_reported_at_once_and_nothing_is_saved(org):
    errors = refused(org, "admin", [
        {"node_pool": "h100", "project": "vision", "deserved": 3},  # fine on its own
        {"node_pool": "h100", "project": org["nlp"].pk, "limit": 2},  # below its deserved
        {"node_pool": "b200", "deserved": 1},  # no such pool
        {"node_pool": "h100", "project": "serving", "deserved": 1},  # a project of Production
        {"node_pool": "a100-mig-3g40gb", "deserved": 1},  # Research below its projects
        {"node_pool": "l40s-shared", "project": "vision", "over_quota_weight": Decimal("1001"), "deserved": 2},
        {"node_pool": "h100", "project": "vision", "deserved": 2},  # the same cell again
        {"node_pool": "h100", "project": "vision", "colour": "red"},
    ])
    assert errors == {
        1: {"limit": ["The limit (2) cannot be below the deserved quota (4)."]},
        2: {"node_pool": ["There is no node pool 'b200'."]},
        3: {"project": ["Research has no project 'serving'."]},
        4: {"deserved": ["The department's projects hold 6 deserved units on a100-mig-3g40gb; lower theirs before "
                         "lowering the department's."]},
        5: {"over_quota_weight": ["Ensure this value is less than or equal to 1000."]},
        6: {"node_pool": ["Row 0 already changes this quota."]},
        7: {"colour": ["This field of a quota cannot be changed here."]},
    }


def test_the_rules_see_the_proposed_table_as_a_whole_in_any_order(org):
    """Research gives Vision two more h100 units by raising itself: valid together, whichever row comes first."""
    services.node_pool_update(actor=org["admin"], node_pool=org["h100"], over_subscribable=True)
    rows = [{"node_pool": "h100", "project": "vision", "deserved": 6},
            {"node_pool": "h100", "deserved": 10, "limit": 12}]
    # Each row alone breaks a rule...
    assert refused(org, "admin", rows[:1]) == {0: {"deserved": [
        "Research has 8 deserved units on h100 and its other projects hold 4, so this project can have at most 4. "
        "Raise the department's quota first or lower another project's."]}}
    # ... together they do not, in either order.
    audit = AuditEvent.objects.count()
    changed = save(org, "admin", rows)
    assert {(q.project_id, q.deserved) for q in changed} == {(org["vision"].pk, 6), (None, 10)}
    assert (quota("vision").deserved, quota("research").deserved) == (6, 10)
    events = AuditEvent.objects.order_by("id")[audit:]
    assert [event.action for event in events] == ["quota.update", "quota.update"]
    save(org, "admin", [{**rows[1], "deserved": 8}, {**rows[0], "deserved": 4}])
    assert (quota("vision").deserved, quota("research").deserved) == (4, 8)


def test_one_audit_row_per_changed_quota_and_none_for_unchanged_ones(org):
    project = services.project_create(actor=org["admin"], department=org["research"], slug="speech", name="Speech")
    services.quota_update(actor=org["admin"], quota=quota("nlp"), deserved=3)
    audit = AuditEvent.objects.count()
    changed = save(org, "deptadmin", [
        {"node_pool": "h100", "project": "vision", "deserved": 4, "limit": 8},  # as stored
        {"node_pool": "h100", "project": "nlp", "over_quota_weight": Decimal("5")},
        {"node_pool": "h100", "project": project.pk, "deserved": 1},  # a new quota
    ])
    assert len(changed) == 2
    events = list(AuditEvent.objects.order_by("id")[audit:])
    assert [(event.action, event.project_id) for event in events] == [
        ("quota.weight", org["nlp"].pk), ("quota.create", project.pk)]
    assert all(event.actor == org["deptadmin"] for event in events)
    created = Quota.objects.get(project=project)
    assert (created.deserved, created.limit, created.over_quota_weight) == (1, None, 1)
    assert events[1].after["deserved"] == 1 and events[1].before is None


def test_a_cell_without_a_quota_needs_its_deserved_units(org):
    project = services.project_create(actor=org["admin"], department=org["research"], slug="speech", name="Speech")
    errors = refused(org, "admin", [{"node_pool": "h100", "project": "speech", "limit": 4}])
    assert errors == {0: {"deserved": ["A new quota needs its deserved units (0 for none)."]}}
    assert not Quota.objects.filter(project=project).exists()


def test_department_admins_may_not_touch_the_department_row(org):
    errors = refused(org, "deptadmin", [
        {"node_pool": "h100", "deserved": 8, "limit": 16},  # limit changes: refused
        {"node_pool": "h100", "project": "vision", "over_quota_weight": Decimal("4")},
    ])
    assert errors == {0: {"limit": ["You may not change this field of this quota."]}}


def test_resending_the_department_row_unchanged_is_fine_for_department_admins(org):
    changed = save(org, "deptadmin", [{"node_pool": "h100", "deserved": 8, "limit": 12},
                                      {"node_pool": "h100", "project": "vision", "over_quota_weight": 4}])
    assert [q.project_id for q in changed] == [org["vision"].pk]


def test_a_guard_refusal_is_reported_with_the_rest(org, request):
    def guard(quota, **_):
        if quota.project_id == org["nlp"].pk:
            return {"deserved": ["Running non-preemptible work uses 3 units here."]}
        return None

    signals.quota_size_proposed.connect(guard, weak=False, dispatch_uid="test.guard")
    request.addfinalizer(lambda: signals.quota_size_proposed.disconnect(dispatch_uid="test.guard"))
    errors = refused(org, "admin", [
        {"node_pool": "h100", "project": "vision", "deserved": 3, "limit": 2},
        {"node_pool": "h100", "project": "nlp", "deserved": 2},
    ])
    assert errors == {0: {"limit": ["The limit (2) cannot be below the deserved quota (3)."]},
                      1: {"deserved": ["Running non-preemptible work uses 3 units here."]}}


@pytest.mark.parametrize("username", ["lead", "alice", "bob", "viewer"])
def test_only_those_who_manage_the_projects_save_the_table(org, username):
    before = state()
    with pytest.raises(PermissionDenied):
        save(org, username, [{"node_pool": "h100", "project": "vision", "over_quota_weight": 3}])
    assert state() == before


def test_nothing_to_change_saves_nothing(org):
    before = state()
    assert save(org, "admin", []) == []
    assert save(org, "admin", [{"node_pool": "h100", "project": "vision", "deserved": 4}]) == []
    assert state() == before
