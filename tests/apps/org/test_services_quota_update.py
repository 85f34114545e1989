"""quota_update, the one write of an existing quota: every role x every field, allowed or refused as the access
module says; an allowed change writes one audit row, a refused one changes nothing at all."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.accounts import access
from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import NodePool, Quota

# field -> (new value for vision's h100 quota, new value for Research's own h100 quota); every one passes the rules
# (h100 is made over-subscribable below so Research's deserved may grow).
NEW_VALUES = {
    "deserved": (3, 9),
    "limit": (6, 14),
    "over_quota_weight": (Decimal("3"), Decimal("3")),
    "cpu_cores": (Decimal("16"), Decimal("16")),
    "memory_gib": (128, 128),
}
EVERYTHING = frozenset(NEW_VALUES)
WEIGHT = frozenset({"over_quota_weight"})
NOTHING: frozenset[str] = frozenset()

# username -> (fields editable on vision's quota, fields editable on Research's own quota)
RIGHTS = {
    "admin": (EVERYTHING, EVERYTHING),
    "deptadmin": (EVERYTHING, NOTHING),  # their projects' quotas, not the department's own
    "lead": (WEIGHT, NOTHING),  # weights of their projects only
    "alice": (NOTHING, NOTHING),  # a researcher in vision
    "bob": (NOTHING, NOTHING),  # a researcher in nlp: sees Research, not vision
    "carol": (NOTHING, NOTHING),  # Data Science: sees neither
    "viewer": (NOTHING, NOTHING),
}


@pytest.fixture
def quotas(demo):
    h100 = NodePool.objects.get(slug="h100")
    services.node_pool_update(actor=demo["admin"], node_pool=h100, over_subscribable=True)
    return {
        "project": Quota.objects.get(project__slug="vision", node_pool=h100),
        "department": Quota.objects.get(department__slug="research", node_pool=h100),
    }


def state() -> tuple:
    return list(Quota.objects.order_by("pk").values_list()), AuditEvent.objects.count()


@pytest.mark.parametrize("owner", ["project", "department"])
@pytest.mark.parametrize("username", list(RIGHTS))
def test_the_access_module_names_the_editable_fields(demo, quotas, username, owner):
    quota = Quota.objects.select_related("project", "department").get(pk=quotas[owner].pk)
    expected = RIGHTS[username][0 if owner == "project" else 1]
    assert access.quota_fields_editable(demo[username], quota) == expected


@pytest.mark.parametrize("field", list(NEW_VALUES))
@pytest.mark.parametrize("owner", ["project", "department"])
@pytest.mark.parametrize("username", list(RIGHTS))
def test_role_by_field(demo, quotas, username, owner, field):
    quota = quotas[owner]
    value = NEW_VALUES[field][0 if owner == "project" else 1]
    allowed = field in RIGHTS[username][0 if owner == "project" else 1]
    before_state = state()
    before_value = getattr(quota, field)
    if not allowed:
        with pytest.raises(PermissionDenied) as refused:
            services.quota_update(actor=demo[username], quota=quota, **{field: value})
        assert str(refused.value) == "You may not make this change."
        assert state() == before_state
        return
    updated = services.quota_update(actor=demo[username], quota=quota, **{field: value})
    assert getattr(updated, field) == value
    stored = Quota.objects.get(pk=quota.pk)
    assert getattr(stored, field) == value
    others = [name for name in NEW_VALUES if name != field]
    assert [getattr(stored, name) for name in others] == [getattr(quota, name) for name in others]
    event = AuditEvent.objects.latest("id")
    assert (event.object_type, event.object_id, event.actor) == ("quota", str(quota.pk), demo[username])
    assert event.action == ("quota.weight" if field == "over_quota_weight" else "quota.update")
    assert AuditEvent.objects.count() == before_state[1] + 1
    stored_before = event.before[field]
    assert stored_before == (format(before_value.normalize(), "f") if isinstance(before_value, Decimal)
                             else before_value)
    assert event.after[field] == (format(value.normalize(), "f") if isinstance(value, Decimal) else value)
    assert (event.project_id, event.department_id) == (
        (quota.project_id, quota.project.department_id) if owner == "project" else (None, quota.department_id)
    )


def test_a_refused_field_refuses_the_whole_change(demo, quotas):
    """A team lead's weight travels with a deserved change: neither is saved."""
    before = state()
    with pytest.raises(PermissionDenied):
        services.quota_update(actor=demo["lead"], quota=quotas["project"], over_quota_weight=5, deserved=3)
    assert state() == before


def test_resending_current_values_is_no_change(demo, quotas):
    quota = quotas["project"]
    before = state()
    services.quota_update(actor=demo["lead"], quota=quota, deserved=quota.deserved, limit=quota.limit,
                          over_quota_weight=quota.over_quota_weight)
    assert state() == before
    # ... and a change among resent values is the only one recorded, as a weight change.
    services.quota_update(actor=demo["lead"], quota=quota, deserved=quota.deserved, over_quota_weight="4.5")
    event = AuditEvent.objects.latest("id")
    assert (event.action, event.before["over_quota_weight"], event.after["over_quota_weight"]) == (
        "quota.weight", "2", "4.5")


def test_someone_who_may_change_nothing_is_refused_even_without_a_change(demo, quotas):
    quota = quotas["project"]
    with pytest.raises(PermissionDenied):
        services.quota_update(actor=demo["alice"], quota=quota, over_quota_weight=quota.over_quota_weight)


@pytest.mark.parametrize(("username", "weight", "refused"), [
    ("lead", "10.01", True), ("lead", "-0.5", True), ("lead", "10", False), ("lead", "0", False),
    ("deptadmin", "50", False), ("admin", "999", False),
])
def test_only_team_leads_are_held_to_the_department_bounds(demo, quotas, username, weight, refused):
    before = state()
    if refused:
        with pytest.raises(ValidationError) as caught:
            services.quota_update(actor=demo[username], quota=quotas["project"], over_quota_weight=weight)
        assert caught.value.message_dict == {
            "over_quota_weight": ["Choose a weight between 0 and 10, the bounds set for Research."]
        }
        assert state() == before
    else:
        quota = services.quota_update(actor=demo[username], quota=quotas["project"], over_quota_weight=weight)
        assert quota.over_quota_weight == Decimal(weight)


@pytest.mark.parametrize(("changes", "errors"), [
    ({"node_pool": 1}, {"node_pool": ["This field of a quota cannot be changed here."]}),
    ({"over_quota_weight": "heavy"}, {"over_quota_weight": ["“heavy” value must be a decimal number."]}),
    ({"over_quota_weight": "NaN"}, {"over_quota_weight": ["“NaN” value must be a decimal number."]}),
    ({"deserved": 10**30}, {"deserved": ["Ensure this value is less than or equal to 100000."]}),
    ({"limit": 2}, {"limit": ["The limit (2) cannot be below the deserved quota (4)."]}),
])
def test_field_level_refusals_change_nothing(demo, quotas, changes, errors):
    before = state()
    with pytest.raises(ValidationError) as caught:
        services.quota_update(actor=demo["admin"], quota=quotas["project"], **changes)
    assert caught.value.message_dict == errors
    assert state() == before


def test_the_rules_that_span_rows_still_hold(demo, quotas):
    before = state()
    with pytest.raises(ValidationError) as caught:
        services.quota_update(actor=demo["deptadmin"], quota=quotas["project"], deserved=5)
    assert "so this project can have at most 4" in caught.value.message_dict["deserved"][0]
    assert state() == before
