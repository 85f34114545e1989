"""The one place that answers "may this user do that to this object" and "which rows may this user see".

Every view, API view and task asks this module. Roles bound at a scope apply to everything below it
(everything > department > project). Rows a user may not see are simply absent from the querysets
below, so entry points answer 404 for them and leak no ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from django.db.models import Q, QuerySet

from .models import Role, RoleBinding, Scope

if TYPE_CHECKING:
    from apps.org.models import Department, Project


class Action(StrEnum):
    VIEW = "view"
    MANAGE = "manage"  # create, edit and delete the object itself (and a department's own quotas)
    MANAGE_PROJECTS = "manage_projects"  # create projects in a department, edit their deserved quota and limit
    EDIT_WEIGHT = "edit_weight"  # a project's over-quota weights and default priority class
    MANAGE_MEMBERS = "manage_members"  # role bindings at or below the scope
    VIEW_AUDIT = "view_audit"
    SUBMIT = "submit"  # submit workloads in a project
    STOP_ANY = "stop_any"  # stop anyone's workload in scope


ROLE_ACTIONS: dict[str, frozenset[Action]] = {
    Role.ADMIN: frozenset(Action),
    Role.DEPARTMENT_ADMIN: frozenset(
        {Action.VIEW, Action.MANAGE_PROJECTS, Action.EDIT_WEIGHT, Action.MANAGE_MEMBERS, Action.VIEW_AUDIT,
         Action.SUBMIT, Action.STOP_ANY}
    ),
    Role.TEAM_LEAD: frozenset({Action.VIEW, Action.EDIT_WEIGHT, Action.SUBMIT, Action.STOP_ANY}),
    Role.RESEARCHER: frozenset({Action.VIEW, Action.SUBMIT}),
    Role.VIEWER: frozenset({Action.VIEW}),
}
# Roles a member manager may hand out: only admins over everything create admins.
GRANTABLE_BY_MEMBER_MANAGERS = frozenset(
    {Role.DEPARTMENT_ADMIN, Role.TEAM_LEAD, Role.RESEARCHER, Role.VIEWER}
)


@dataclass(frozen=True)
class Grants:
    """A user's role bindings, indexed by scope; built once per request."""

    everywhere: frozenset[str] = frozenset()
    departments: dict[int, frozenset[str]] = field(default_factory=dict)
    projects: dict[int, frozenset[str]] = field(default_factory=dict)
    # department id of every project the user is bound to, so a project binding makes its department visible
    project_departments: dict[int, int] = field(default_factory=dict)

    def roles_for_department(self, department_id: int) -> frozenset[str]:
        return self.everywhere | self.departments.get(department_id, frozenset())

    def roles_for_project(self, project_id: int, department_id: int) -> frozenset[str]:
        return self.roles_for_department(department_id) | self.projects.get(project_id, frozenset())

    @property
    def all_roles(self) -> frozenset[str]:
        roles = set(self.everywhere)
        for scoped in (*self.departments.values(), *self.projects.values()):
            roles |= scoped
        return frozenset(roles)


def _actions(roles: frozenset[str]) -> frozenset[Action]:
    allowed: set[Action] = set()
    for role in roles:
        allowed |= ROLE_ACTIONS.get(role, frozenset())
    return frozenset(allowed)


def bindings_for(user: Any) -> QuerySet[RoleBinding]:
    """Bindings that apply to the user directly or through a group."""
    return RoleBinding.objects.filter(Q(user=user) | Q(group__in=user.groups.all()))


def grants_for(user: Any) -> Grants:
    """The user's grants, cached on the user object for the rest of the request."""
    if user is None or not user.is_authenticated or not user.is_active:
        return Grants()
    cached = getattr(user, "_portal_grants", None)
    if cached is not None:
        return cached
    everywhere: set[str] = set()
    departments: dict[int, set[str]] = {}
    projects: dict[int, set[str]] = {}
    project_departments: dict[int, int] = {}
    for role, scope, department_id, project_id, project_department_id in bindings_for(user).values_list(
        "role", "scope", "department_id", "project_id", "project__department_id"
    ):
        if scope == Scope.EVERYTHING:
            everywhere.add(role)
        elif scope == Scope.DEPARTMENT:
            departments.setdefault(department_id, set()).add(role)
        else:
            projects.setdefault(project_id, set()).add(role)
            project_departments[project_id] = project_department_id
    grants = Grants(
        everywhere=frozenset(everywhere),
        departments={key: frozenset(value) for key, value in departments.items()},
        projects={key: frozenset(value) for key, value in projects.items()},
        project_departments=project_departments,
    )
    user._portal_grants = grants
    return grants


def forget_grants(user: Any) -> None:
    """Drop the cached grants after the user's bindings changed within the same request."""
    if hasattr(user, "_portal_grants"):
        del user._portal_grants


# --- "may U do A on O" ---------------------------------------------------------------------------------------


def can(user: Any, action: Action, obj: Any = None) -> bool:
    """May the user do the action on the object (None: on the whole installation, e.g. node pools)."""
    from apps.org.models import Department, Project

    grants = grants_for(user)
    if isinstance(obj, Project):
        return action in _actions(grants.roles_for_project(obj.pk, obj.department_id))
    if isinstance(obj, Department):
        if action in _actions(grants.roles_for_department(obj.pk)):
            return True
        # Being bound to one of its projects lets a user see the department that contains it.
        return action == Action.VIEW and obj.pk in grants.project_departments.values()
    # Installation-wide objects (node pools, priority classes): everyone signed in sees them, admins change them.
    if action == Action.VIEW:
        return bool(user is not None and user.is_authenticated and user.is_active)
    return action in _actions(grants.everywhere)


def can_stop_workload(user: Any, workload: Any) -> bool:
    """Owners who may (still) submit in the project stop their own work; STOP_ANY stops anyone's in scope."""
    if workload.owner_id == getattr(user, "pk", None) and can(user, Action.SUBMIT, workload.project):
        return True
    return can(user, Action.STOP_ANY, workload.project)


def can_anywhere(user: Any, action: Action) -> bool:
    """Whether the user holds the action at any scope (drives navigation)."""
    return action in _actions(grants_for(user).all_roles)


def may_grant(user: Any, role: str, scope_object: Department | Project | None) -> bool:
    """Whether the user may bind `role` at the scope of `scope_object` (None = everything)."""
    if not can(user, Action.MANAGE_MEMBERS, scope_object):
        return False
    if role in GRANTABLE_BY_MEMBER_MANAGERS:
        return True
    return Action.MANAGE in _actions(grants_for(user).everywhere) and scope_object is None


# --- "which rows of this kind may U see" --------------------------------------------------------------------


def _scoped_filter(grants: Grants, action: Action, *, department_field: str, project_field: str | None) -> Q | None:
    """A Q selecting rows whose department or project the action is allowed on; None means all rows."""
    if action in _actions(grants.everywhere):
        return None
    department_ids = [dept for dept, roles in grants.departments.items() if action in _actions(roles)]
    condition = Q(**{f"{department_field}__in": department_ids})
    if project_field is not None:
        project_ids = [proj for proj, roles in grants.projects.items() if action in _actions(roles)]
        condition |= Q(**{f"{project_field}__in": project_ids})
    return condition


def departments_for(user: Any, action: Action = Action.VIEW) -> QuerySet[Department]:
    from apps.org.models import Department

    grants = grants_for(user)
    condition = _scoped_filter(grants, action, department_field="pk", project_field=None)
    queryset = Department.objects.all()
    if condition is None:
        return queryset
    if action == Action.VIEW:
        condition |= Q(pk__in=set(grants.project_departments.values()))
    return queryset.filter(condition)


def projects_for(user: Any, action: Action = Action.VIEW) -> QuerySet[Project]:
    from apps.org.models import Project

    condition = _scoped_filter(grants_for(user), action, department_field="department_id", project_field="pk")
    queryset = Project.objects.all()
    return queryset if condition is None else queryset.filter(condition)


def scoped_to_projects(queryset: QuerySet, user: Any, action: Action = Action.VIEW, *,
                       project_path: str = "project") -> QuerySet:
    """Restrict any queryset whose rows hang off a project (through `project_path`) to where the action is allowed."""
    condition = _scoped_filter(
        grants_for(user), action, department_field=f"{project_path}__department_id", project_field=f"{project_path}_id"
    )
    return queryset if condition is None else queryset.filter(condition)


def workloads_for(user: Any) -> QuerySet:
    """Workloads the user may see: their own, and every workload in the projects they may view."""
    from apps.workloads.models import Workload

    if user is None or not user.is_authenticated:
        return Workload.objects.none()
    return scoped_to_projects(Workload.objects.all(), user) | Workload.objects.filter(owner=user)


def quotas_for(user: Any, action: Action = Action.VIEW) -> QuerySet:
    """Department quotas of visible departments and project quotas of visible projects."""
    from apps.org.models import Quota

    grants = grants_for(user)
    condition = _scoped_filter(grants, action, department_field="project__department_id", project_field="project_id")
    queryset = Quota.objects.all()
    if condition is None:
        return queryset
    department_condition = _scoped_filter(grants, action, department_field="department_id", project_field=None)
    assert department_condition is not None
    if action == Action.VIEW:
        department_condition |= Q(department_id__in=set(grants.project_departments.values()))
    return queryset.filter(
        (Q(project__isnull=False) & condition) | (Q(department__isnull=False) & department_condition)
    )


def audit_events_for(user: Any) -> QuerySet:
    """Audit rows of the departments and projects the user audits; installation-wide rows for global admins."""
    from apps.org.models import AuditEvent

    grants = grants_for(user)
    queryset = AuditEvent.objects.all()
    condition = _scoped_filter(grants, Action.VIEW_AUDIT, department_field="department_id", project_field="project_id")
    return queryset if condition is None else queryset.filter(condition)


def role_bindings_for(user: Any, action: Action = Action.VIEW) -> QuerySet[RoleBinding]:
    """Bindings at scopes the user may see (or manage); a user always sees their own."""
    grants = grants_for(user)
    queryset = RoleBinding.objects.all()
    if action in _actions(grants.everywhere):
        return queryset
    department_ids = [dept for dept, roles in grants.departments.items() if action in _actions(roles)]
    project_ids = [proj for proj, roles in grants.projects.items() if action in _actions(roles)]
    condition = Q(department_id__in=department_ids) | Q(project_id__in=project_ids) | Q(
        project__department_id__in=department_ids
    )
    if action == Action.VIEW:
        condition |= Q(pk__in=bindings_for(user).values("pk"))
    return queryset.filter(condition)


def sees_everything(user: Any, action: Action = Action.VIEW) -> bool:
    """Whether the user holds the action over the whole installation (cluster-wide roll-ups, for example)."""
    return action in _actions(grants_for(user).everywhere)
