"""The named rules of the access module that views, API views and services ask instead of deciding themselves:
which quota and project fields a user may change, which roles they may hand out, whose stop is an owner's."""

from __future__ import annotations

import pytest

from apps.accounts import access
from apps.accounts.models import Role
from apps.org.models import Department, Project, Quota
from apps.workloads.models import Workload

EVERY_PROJECT_FIELD = access.PROJECT_FIELDS


@pytest.mark.parametrize(("username", "project", "fields"), [
    ("admin", "vision", EVERY_PROJECT_FIELD),
    ("admin", "forecasting", EVERY_PROJECT_FIELD),
    ("deptadmin", "vision", EVERY_PROJECT_FIELD),
    ("deptadmin", "serving", frozenset()),
    ("lead", "vision", frozenset({"default_priority_class"})),
    ("lead", "serving", frozenset()),
    ("alice", "vision", frozenset()),
    ("viewer", "vision", frozenset()),
])
def test_project_fields_editable(demo, username, project, fields):
    assert access.project_fields_editable(demo[username], Project.objects.get(slug=project)) == fields


@pytest.mark.parametrize(("username", "owner", "allowed"), [
    ("admin", "research", True), ("admin", "vision", True),
    ("deptadmin", "research", False), ("deptadmin", "vision", True), ("deptadmin", "forecasting", False),
    ("lead", "vision", False), ("alice", "vision", False), ("viewer", "research", False),
])
def test_can_manage_quotas_of(demo, username, owner, allowed):
    target = Department.objects.filter(slug=owner).first() or Project.objects.get(slug=owner)
    assert access.can_manage_quotas_of(demo[username], target) is allowed


def test_a_proposed_quota_is_judged_by_its_owner(demo):
    vision = Project.objects.get(slug="vision")
    research = Department.objects.get(slug="research")
    assert access.quota_fields_editable(demo["lead"], Quota(project=vision)) == {"over_quota_weight"}
    assert access.quota_fields_editable(demo["lead"], Quota(department=research)) == frozenset()
    assert access.quota_weight_bounded(demo["lead"], Quota(project=vision))
    assert not access.quota_weight_bounded(demo["deptadmin"], Quota(project=vision))


@pytest.mark.parametrize(("username", "roles"), [
    ("admin", frozenset(Role.values)),
    ("deptadmin", access.GRANTABLE_BY_MEMBER_MANAGERS),
])
def test_grantable_roles(demo, username, roles):
    assert access.grantable_roles(demo[username]) == roles
    assert (Role.ADMIN in access.grantable_roles(demo[username])) is (username == "admin")


@pytest.mark.parametrize(("username", "own", "may_stop"), [
    ("alice", True, True), ("lead", False, True), ("bob", False, False), ("viewer", False, False),
])
def test_stops_own_workload(demo, username, own, may_stop):
    workload = Workload(project=Project.objects.get(slug="vision"), owner=demo["alice"])
    assert access.stops_own_workload(demo[username], workload) is own
    assert access.can_stop_workload(demo[username], workload) is may_stop
