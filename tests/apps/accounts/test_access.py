"""The access module: roles inherited downwards, scoped querysets, group bindings, who may grant what."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError

from apps.accounts import access
from apps.accounts.access import Action
from apps.accounts.models import Role, RoleBinding
from apps.accounts.services import role_binding_create, role_binding_delete
from apps.core.models import AuditEvent
from apps.org import selectors as org_selectors
from apps.org.models import Department, NodePool, Project


@pytest.fixture
def org(demo):
    return {**demo, "research": Department.objects.get(slug="research"),
            "production": Department.objects.get(slug="production"),
            "vision": Project.objects.get(slug="vision"), "nlp": Project.objects.get(slug="nlp"),
            "serving": Project.objects.get(slug="serving")}


def slugs(queryset):
    return sorted(queryset.values_list("slug", flat=True))


@pytest.mark.parametrize(("username", "departments", "projects"), [
    ("admin", ["data-science", "production", "research"],
     ["analytics", "etl", "forecasting", "nlp", "serving", "vision"]),
    ("viewer", ["data-science", "production", "research"],
     ["analytics", "etl", "forecasting", "nlp", "serving", "vision"]),
    ("deptadmin", ["research"], ["nlp", "vision"]),
    ("lead", ["research"], ["nlp", "vision"]),
    ("alice", ["research"], ["vision"]),
    ("bob", ["research"], ["nlp"]),
    ("carol", ["data-science"], ["forecasting"]),
])
def test_visible_rows(org, username, departments, projects):
    user = org[username]
    assert slugs(org_selectors.departments_for(user)) == departments
    assert slugs(org_selectors.projects_for(user)) == projects
    quota_owners = {q.project.slug if q.project_id else q.department.slug
                    for q in org_selectors.quotas_for(user).select_related("project", "department")}
    assert quota_owners == set(departments) | set(projects)


@pytest.mark.parametrize("username", ["admin", "viewer", "deptadmin", "lead", "alice", "bob", "carol"])
@pytest.mark.parametrize("action", [Action.VIEW, Action.SUBMIT, Action.MANAGE_PROJECTS])
def test_department_ids_seen_are_the_departments_restrict_selects(org, username, action):
    user = org[username]
    seen = access.department_ids_seen(user, action)
    restricted = set(access.restrict(Department.objects.all(), user, action).values_list("pk", flat=True))
    if seen is None:
        assert restricted == set(Department.objects.values_list("pk", flat=True))
        assert access.sees_everything(user, action)
    else:
        assert seen == restricted
        assert not access.sees_everything(user, action)


@pytest.mark.parametrize("username", ["deptadmin", "lead", "alice", "bob", "carol"])
def test_a_scope_at_ids_is_asked_as_its_project(org, username):
    for project in Project.objects.all():
        for action in (Action.VIEW, Action.SUBMIT, Action.STOP_ANY):
            assert access.can(org[username], action, access.ScopeAt(project.department_id, project.pk)) is \
                access.can(org[username], action, project)


@pytest.mark.parametrize(("username", "action", "target", "allowed"), [
    ("admin", Action.MANAGE, None, True),
    ("deptadmin", Action.MANAGE, None, False),
    ("deptadmin", Action.MANAGE_PROJECTS, "research", True),
    ("deptadmin", Action.MANAGE_PROJECTS, "production", False),
    ("deptadmin", Action.MANAGE_PROJECTS, "vision", True),
    ("deptadmin", Action.MANAGE, "research", False),
    ("lead", Action.EDIT_WEIGHT, "vision", True),
    ("lead", Action.EDIT_WEIGHT, "serving", False),
    ("lead", Action.MANAGE_PROJECTS, "vision", False),
    ("lead", Action.STOP_ANY, "nlp", True),
    ("alice", Action.SUBMIT, "vision", True),
    ("alice", Action.SUBMIT, "nlp", False),
    ("alice", Action.VIEW, "research", True),  # the department that holds her project
    ("alice", Action.VIEW, "production", False),
    ("alice", Action.STOP_ANY, "vision", False),
    ("viewer", Action.VIEW, "serving", True),
    ("viewer", Action.SUBMIT, "serving", False),
    ("viewer", Action.VIEW, None, True),
    ("viewer", Action.MANAGE, None, False),
])
def test_can(org, username, action, target, allowed):
    assert access.can(org[username], action, org[target] if target else None) is allowed


def test_anonymous_and_inactive_users_may_do_nothing(org):
    from django.contrib.auth.models import AnonymousUser

    assert not access.can(AnonymousUser(), Action.VIEW, org["vision"])
    assert not access.can(AnonymousUser(), Action.VIEW)
    alice = org["alice"]
    alice.is_active = False
    alice.save()
    alice = get_user_model().objects.get(pk=alice.pk)
    assert not access.can(alice, Action.VIEW, org["vision"])
    assert not org_selectors.projects_for(alice).exists()


def test_group_binding_grants_its_members(org):
    group = Group.objects.create(name="nlp-team")
    dave = get_user_model().objects.create_user("dave")
    dave.groups.add(group)
    assert not org_selectors.projects_for(dave).exists()
    role_binding_create(actor=org["deptadmin"], role=Role.RESEARCHER, group=group, project=org["nlp"])
    dave = get_user_model().objects.get(pk=dave.pk)
    assert slugs(org_selectors.projects_for(dave)) == ["nlp"]
    assert access.can(dave, Action.SUBMIT, org["nlp"])


def test_grants_are_cached_per_user_object(org, django_assert_num_queries):
    alice = get_user_model().objects.get(username="alice")
    with django_assert_num_queries(1):
        for _ in range(5):
            access.can(alice, Action.VIEW, org["vision"])


def test_department_admin_grants_inside_department_only(org):
    eve = get_user_model().objects.create_user("eve")
    binding = role_binding_create(actor=org["deptadmin"], role=Role.TEAM_LEAD, user=eve, project=org["vision"])
    event = AuditEvent.objects.get(action="role_binding.create", object_id=str(binding.pk))
    assert event.project == org["vision"] and event.after["role"] == "team_lead"
    with pytest.raises(PermissionDenied):
        role_binding_create(actor=org["deptadmin"], role=Role.RESEARCHER, user=eve, project=org["serving"])
    with pytest.raises(PermissionDenied):
        role_binding_create(actor=org["deptadmin"], role=Role.ADMIN, user=eve, department=org["research"])
    with pytest.raises(PermissionDenied):
        role_binding_create(actor=org["lead"], role=Role.RESEARCHER, user=eve, project=org["vision"])
    assert RoleBinding.objects.filter(user=eve).count() == 1


def test_only_global_admins_grant_admin(org):
    eve = get_user_model().objects.create_user("eve")
    role_binding_create(actor=org["admin"], role=Role.ADMIN, user=eve)
    assert access.can(get_user_model().objects.get(pk=eve.pk), Action.MANAGE)


def test_duplicate_binding_and_last_admin_are_refused(org):
    with pytest.raises(ValidationError, match="already exists"):
        role_binding_create(actor=org["admin"], role=Role.RESEARCHER, user=org["alice"], project=org["vision"])
    only_admin = RoleBinding.objects.get(role=Role.ADMIN)
    with pytest.raises(ValidationError, match="last admin"):
        role_binding_delete(actor=org["admin"], binding=only_admin)
    assert RoleBinding.objects.filter(pk=only_admin.pk).exists()


def test_remove_is_offered_where_the_service_would_remove(org):
    """The list's "Remove" and the service agree: never a group-rule binding, never the last hand-made admin."""
    only_admin = RoleBinding.objects.get(role=Role.ADMIN)
    alice = RoleBinding.objects.get(user=org["alice"])
    count = access.manual_admin_binding_count()
    assert count == 1
    assert not access.may_remove_binding(org["admin"], only_admin, manual_admin_bindings=count)
    assert access.may_remove_binding(org["admin"], alice, manual_admin_bindings=count)
    assert not access.may_remove_binding(org["lead"], alice, manual_admin_bindings=count)  # leads grant nothing
    rule_made = RoleBinding.objects.create(user=org["carol"], role=Role.ADMIN, scope="everything", source="group_rule")
    assert access.manual_admin_binding_count() == 1  # rule-made admins come and go with groups: they do not count
    assert not access.may_remove_binding(org["admin"], rule_made, manual_admin_bindings=1)
    second = role_binding_create(actor=org["admin"], role=Role.ADMIN, user=org["bob"])
    assert access.may_remove_binding(org["admin"], only_admin,
                                     manual_admin_bindings=access.manual_admin_binding_count())
    role_binding_delete(actor=org["admin"], binding=second)
    assert not access.may_remove_binding(org["admin"], only_admin,
                                         manual_admin_bindings=access.manual_admin_binding_count())


def test_role_binding_delete_is_audited(org):
    binding = RoleBinding.objects.get(user=org["alice"])
    role_binding_delete(actor=org["deptadmin"], binding=binding)
    event = AuditEvent.objects.get(action="role_binding.delete")
    assert event.before["user_id"] == org["alice"].pk and event.after is None
    assert not org_selectors.projects_for(get_user_model().objects.get(username="alice")).exists()


def test_audit_events_are_scoped(org):
    admin_rows = org_selectors.audit_events_for(org["admin"]).count()
    research_rows = org_selectors.audit_events_for(org["deptadmin"])
    assert 0 < research_rows.count() < admin_rows
    assert not research_rows.exclude(department=org["research"]).exists()
    assert not org_selectors.audit_events_for(org["alice"]).exists()
    assert not org_selectors.audit_events_for(org["viewer"]).exists()
    # Pool changes are installation-wide: only global admins see them.
    assert org_selectors.audit_events_for(org["admin"]).filter(object_type="nodepool").exists()
    assert not research_rows.filter(object_type="nodepool").exists()
    assert NodePool.objects.count() == 3
